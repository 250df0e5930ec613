/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libinca: collective operations for training jobs, reduced in the network
 * by INCA switches, with a host ring over TCP as fallback.
 *
 * Model (MPI-like): every rank of a job creates a communicator with the same
 * group description, then calls the same collectives in the same order.
 * Every call returns INCA_OK (0) or a negative INCA_ERR_* code;
 * inca_strerror() names the code and inca_comm_errmsg() says what happened
 * on that communicator. No call waits without a deadline.
 *
 * Threads: a communicator is used by one thread at a time. Different
 * communicators are independent.
 */
#ifndef INCA_H
#define INCA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define INCA_VERSION_MAJOR 0
#define INCA_VERSION_MINOR 1

/* Element types and reduction operators (the wire's numbering). */
typedef enum {
	INCA_FLOAT32 = 0,
	INCA_FLOAT16 = 1,   /* IEEE binary16, accumulated in fp32 */
	INCA_BFLOAT16 = 2,  /* accumulated in fp32 */
	INCA_INT32 = 3,
	INCA_INT64 = 4,
	INCA_FLOAT64 = 5,
} inca_dtype_t;

typedef enum {
	INCA_SUM = 0,
	INCA_MIN = 1,
	INCA_MAX = 2,
	INCA_PROD = 3,
	INCA_BAND = 4,      /* integer dtypes only */
	INCA_BOR = 5,
	INCA_BXOR = 6,
} inca_op_t;

/* Error codes: negative. */
#define INCA_OK               0
#define INCA_ERR_INVAL       -1   /* bad argument (NULL, count, dtype/op) */
#define INCA_ERR_NOMEM       -2   /* out of memory */
#define INCA_ERR_CONFIG      -3   /* missing or malformed group description */
#define INCA_ERR_TRANSPORT   -4   /* the transport could not be opened or failed */
#define INCA_ERR_TIMEOUT     -5   /* the deadline passed */
#define INCA_ERR_SWITCH      -6   /* no switch, and no fallback (off, or it failed) */
#define INCA_ERR_PEER        -7   /* a member was unreachable during fallback */
#define INCA_ERR_UNSUPPORTED -8   /* transport or feature not built in */
#define INCA_ERR_BUSY        -9   /* too many collectives in flight */
#define INCA_ERR_PROTOCOL    -10  /* a peer broke the protocol (wrong size, order) */
#define INCA_ERR_MANAGER     -11  /* the manager refused or was unreachable */

/* Name of an error code. Never NULL. */
const char *inca_strerror(int err);

/* Pass as sendbuf to work in place in recvbuf (where a call allows it). */
#define INCA_IN_PLACE ((const void *)1)

/* Logging: quiet by default; INCA_LOG=error|warn|info|debug raises it. */
enum inca_log_level {
	INCA_LOG_ERROR = 0,
	INCA_LOG_WARN = 1,
	INCA_LOG_INFO = 2,
	INCA_LOG_DEBUG = 3,
};
typedef void (*inca_log_fn)(enum inca_log_level level, const char *msg, void *arg);
/* Replace the log sink (default: stderr, prefixed "libinca:") and level.
 * fn NULL restores the default. */
void inca_set_log(inca_log_fn fn, void *arg, enum inca_log_level level);

/* Library set-up and tear-down. inca_init is optional (the first
 * communicator calls it) and reads INCA_LOG. */
int inca_init(void);
void inca_finalize(void);

typedef struct inca_comm inca_comm_t;

/* Fallback policy when the switch path does not work. */
typedef enum {
	INCA_FALLBACK_AUTO = 0,   /* fall back to the TCP ring, warn once */
	INCA_FALLBACK_OFF = 1,    /* return INCA_ERR_SWITCH instead; with a
				     manager the same as auto: its plan moves
				     every rank to the ring at one collective */
	INCA_FALLBACK_FORCE = 2,  /* always use the ring (baselines, tests) */
} inca_fallback_t;

/* Several ranks per host: INCA_HIER_AUTO (default) reduces inside the host
 * first when the layout says ranks share a host; OFF makes every rank a
 * member of the switch's group; LEADER is what auto does today (the host's
 * ranks reduce to local rank 0, which alone takes part in the network);
 * RAILS gives every local rank a communicator of its own across the hosts
 * (its rail: a static group's "rails", or a job "<job>.rail<l>" at the
 * manager) and splits each all-reduce, reduce, reduce-scatter, allgather
 * and bcast of at least INCA_RAIL_MIN_BYTES (256 KiB; the same on every
 * host, checked at creation) over them, every local rank carrying 1/P of
 * the data through the network; smaller calls go as with LEADER. Needs as
 * many ranks on every host. */
typedef enum {
	INCA_HIER_AUTO = 0,
	INCA_HIER_OFF = 1,
	INCA_HIER_LEADER = 2,
	INCA_HIER_RAILS = 3,
} inca_hier_t;

/*
 * Communicator attributes. Zero means "default" for every number; NULL
 * strings fall back to the environment (INCA_*), then to defaults.
 * Group description (static mode) comes from:
 *   - config_file: JSON {"switch": "10.0.0.254", "group": 1, "qpn": 256,
 *     "qkey": "0x...", "window": 64, "elems_per_pkt": 256, "mtu": 1024,
 *     "reproducible": false, "ring_port": 18515,
 *     "members": [{"ip": "10.0.0.1", "qpn": 17}, ...]}   (INCA_CONFIG);
 *     fewer members than ranks: a group of hosts, each member with its
 *     "ranks" (or as many on each), reduced inside the host first
 *   - or the environment: INCA_SWITCH, INCA_GROUP, INCA_GROUP_QPN,
 *     INCA_QKEY, INCA_MEMBERS="ip:qpn,ip:qpn,...", INCA_WINDOW,
 *     INCA_ELEMS, INCA_MTU, INCA_RING_PORT
 *   A packet carries min(E, (mtu - 32) / element size) elements: the IB MTU
 *   (1024 on 1500-byte Ethernet, 4096 with jumbo frames) bounds a UD
 *   message, header included. Without "mtu" (or with 0 or "auto") each
 *   rank takes the largest IB MTU its route to the switch carries, within
 *   its transport's (udp and verbs 4096, xdp 2048): ranks on links of
 *   different MTU, or one group mixing transports, must all be given one.
 *   - or a manager (manager_url / INCA_MANAGER), which creates the group
 *     for the job, on every transport (with verbs the rank registers the
 *     QPN its NIC gave; docs/manager.md), and whose plan then says where
 *     the collectives run: its tree, or the host ring when none fits (a
 *     warning), changing at a collective every rank agrees on.
 */
struct inca_comm_attr {
	int rank;                 /* 0..size-1 (INCA_RANK) */
	int size;                 /* ranks in the job (INCA_SIZE) */
	const char *job;          /* job id (INCA_JOB), for the manager */
	const char *transport;    /* "udp", "xdp" or "verbs" (INCA_TRANSPORT; udp) */
	const char *config_file;  /* INCA_CONFIG */
	const char *manager_url;  /* INCA_MANAGER */
	const char *local_ip;     /* bind here (INCA_LOCAL_IP; the member's ip) */
	const char *ifname;       /* xdp: the interface (INCA_IFNAME) */
	inca_fallback_t fallback; /* INCA_FALLBACK=auto|off|force */
	unsigned timeout_ms;      /* deadline of every call (INCA_TIMEOUT_MS; 30000) */
	unsigned switch_timeout_ms; /* no answer for this long: switch unavailable
				       (INCA_SWITCH_TIMEOUT_MS; 1000) */
	unsigned rto_min_us;      /* retransmission timeout floor (INCA_RTO_MIN_US; 1000) */
	int dcqcn;                /* 1 on, -1 off, 0 default (INCA_DCQCN; on) */
	double line_rate_gbps;    /* the link's rate, for DCQCN and PFC pause quanta
				     (INCA_LINE_RATE_GBPS; 10) */
	int pfc;                  /* honour PFC pauses (udp, xdp): 1 on (an error if
				     impossible), -1 off, 0 default: on if the packet
				     socket can be opened (INCA_PFC=1|0) */
	int pfc_priority;         /* the data's 802.1p priority + 1; 0: default 3
				     (INCA_PFC_PRIORITY=0..7) */
	uint32_t epoch;           /* the same on every rank of this job, different
				     from any earlier job on the same static group
				     (INCA_EPOCH): collectives are numbered from it,
				     so the switch never answers this job with an
				     earlier job's retained result. The MPI and
				     PyTorch layers pick one; 0: numbered from 1
				     (docs/protocol.md 3.2). The manager gives every
				     job a group of its own: not needed there. */
	/* Several ranks per host (docs/hostlib.md, "Several ranks per host"):
	 * they reduce through shared memory first and one of them, the
	 * host's leader, takes part in the network. The layout, in rank order
	 * (ranks numbered host by host): */
	const char *layout;       /* ranks per host, "2,2,2,2" (INCA_LAYOUT); else */
	int local_size;           /* this host's ranks, the same on every host
				     (INCA_LOCAL_SIZE, torchrun's LOCAL_WORLD_SIZE,
				     OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS);
				     0: not said */
	int local_rank;           /* with local_size: rank % local_size, checked */
	inca_hier_t hier;         /* INCA_HIER=auto|off|leader|rails */
};

/* An epoch for a new job on a static group (one rank draws it, every rank
 * uses it): its collectives are numbered from the real-time clock (4 µs
 * ticks), so they are newer than those of any job whose epoch was drawn
 * earlier (within 2.4 hours, and while a job averages fewer than one
 * collective per tick). A switch then starts serving them at once; a job
 * whose numbers are older than what a set retains waits for every member's
 * copy of each first use and a retransmission (docs/protocol.md 3.2). Never
 * 0. */
uint32_t inca_epoch_new(void);

/* Create a communicator; collective: every rank calls it. Returns
 * INCA_OK, INCA_ERR_INVAL, INCA_ERR_CONFIG, INCA_ERR_TRANSPORT,
 * INCA_ERR_UNSUPPORTED, INCA_ERR_MANAGER or INCA_ERR_NOMEM; on failure
 * *comm is NULL and inca_last_errmsg() says why. attr may be NULL (all
 * from the environment). */
int inca_comm_create(const struct inca_comm_attr *attr, inca_comm_t **comm);
/* Free everything the communicator holds. NULL is allowed. */
void inca_comm_destroy(inca_comm_t *comm);
int inca_comm_rank(const inca_comm_t *comm);
int inca_comm_size(const inca_comm_t *comm);
/* The transport in use ("udp", "xdp", "verbs"). */
const char *inca_comm_transport(const inca_comm_t *comm);
/* What the last failing call on comm said (never NULL). */
const char *inca_comm_errmsg(const inca_comm_t *comm);
/* What the last failing inca_comm_create in this thread said. */
const char *inca_last_errmsg(void);

/*
 * Collectives. Every rank calls the same collectives in the same order
 * with the same count, dtype, op and root. Any count > 0 (split into
 * packets and windows; docs/hostlib.md). Every call returns INCA_OK or a
 * negative code:
 *   INCA_ERR_INVAL        a bad argument (NULL buffer or request, count 0,
 *                         unknown dtype, an op that does not apply to the
 *                         dtype, root not a rank, INCA_IN_PLACE where it is
 *                         not allowed; inca_comm_errmsg says which)
 *   INCA_ERR_BUSY         INCA_MAX_INFLIGHT collectives already in flight
 *   INCA_ERR_TIMEOUT      the deadline (INCA_TIMEOUT_MS) passed
 *   INCA_ERR_SWITCH       no switch and fallback off (a static group); a
 *                         move to the ring the ranks cannot make: a replay's
 *                         input gone, or the ring's network down too (a
 *                         plan's cut, a static group's fallback); after a
 *                         plan's cut failed, every later call
 *   INCA_ERR_PEER         a member unreachable during the fallback
 *   INCA_ERR_PROTOCOL     the ranks disagreed (e.g. on which call fell back)
 *   INCA_ERR_NOMEM
 * Float results follow docs/protocol.md section 2 (fp16/bf16 accumulate in
 * fp32; sums within its bound, bit-identical in a reproducible group);
 * integer results are exact; allgather and bcast copy bytes (any dtype, -0
 * and NaN payloads kept).
 */

/* All-reduce: recvbuf[i] = op over ranks of sendbuf[i]. sendbuf may be
 * INCA_IN_PLACE (the input is recvbuf). */
int inca_allreduce(inca_comm_t *comm, const void *sendbuf, void *recvbuf,
		   size_t count, inca_dtype_t dtype, inca_op_t op);

/* Reduce to root: at root recvbuf[i] = op over ranks of sendbuf[i]; recvbuf
 * is not used at other ranks (may be NULL). INCA_IN_PLACE as sendbuf at the
 * root only (the root's input is its recvbuf). */
int inca_reduce(inca_comm_t *comm, const void *sendbuf, void *recvbuf,
		size_t count, inca_dtype_t dtype, inca_op_t op, int root);

/* Reduce-scatter (MPI_Reduce_scatter_block): sendbuf holds size x recvcount
 * elements, shard r at r x recvcount; rank r's recvbuf (recvcount
 * elements) gets the reduction of shard r. With INCA_IN_PLACE the input is
 * recvbuf (size x recvcount elements) and the result lands at its start. */
int inca_reduce_scatter(inca_comm_t *comm, const void *sendbuf, void *recvbuf,
			size_t recvcount, inca_dtype_t dtype, inca_op_t op);

/* Allgather: recvbuf holds size x sendcount elements; rank r's sendbuf
 * (sendcount elements) lands at r x sendcount on every rank. With
 * INCA_IN_PLACE each rank's input is already at its place in recvbuf. */
int inca_allgather(inca_comm_t *comm, const void *sendbuf, void *recvbuf,
		   size_t sendcount, inca_dtype_t dtype);

/* Broadcast: buf on every rank becomes root's buf (count elements of
 * dtype); only the root sends data, and its buf is only read. */
int inca_bcast(inca_comm_t *comm, void *buf, size_t count, inca_dtype_t dtype,
	       int root);

/* Every rank has entered the barrier (an all-reduce of one int32). */
int inca_barrier(inca_comm_t *comm);

/*
 * Nonblocking forms: start the collective and return a request; progress
 * happens in inca_test/inca_wait on any request of the communicator, which
 * complete in any order the caller chooses. Up to INCA_MAX_INFLIGHT
 * collectives may be in flight on one communicator (started, their request
 * not yet completed); they share its window, pipelined in one packet
 * stream. One more returns INCA_ERR_BUSY. Buffers belong to the collective
 * until its request completes. The blocking calls are these plus
 * inca_wait. inca_comm_destroy frees requests still in flight (they must
 * not be used afterwards).
 */
#define INCA_MAX_INFLIGHT 64
typedef struct inca_request inca_request_t;
int inca_iallreduce(inca_comm_t *comm, const void *sendbuf, void *recvbuf,
		    size_t count, inca_dtype_t dtype, inca_op_t op,
		    inca_request_t **req);
int inca_ireduce(inca_comm_t *comm, const void *sendbuf, void *recvbuf,
		 size_t count, inca_dtype_t dtype, inca_op_t op, int root,
		 inca_request_t **req);
int inca_ireduce_scatter(inca_comm_t *comm, const void *sendbuf, void *recvbuf,
			 size_t recvcount, inca_dtype_t dtype, inca_op_t op,
			 inca_request_t **req);
int inca_iallgather(inca_comm_t *comm, const void *sendbuf, void *recvbuf,
		    size_t sendcount, inca_dtype_t dtype, inca_request_t **req);
int inca_ibcast(inca_comm_t *comm, void *buf, size_t count, inca_dtype_t dtype,
		int root, inca_request_t **req);
/* Progress; *done = 1 when finished (then the request is freed and the
 * return value is the collective's result). */
int inca_test(inca_request_t *req, int *done);
/* inca_test, waiting up to timeout_us for the network (not spinning):
 * for a progress loop that also serves something else. */
int inca_test_timeout(inca_request_t *req, unsigned timeout_us, int *done);
/* Progress until finished; frees the request. */
int inca_wait(inca_request_t *req);

/* Counters of a communicator since it was created. */
struct inca_stats {
	uint64_t collectives;       /* calls completed */
	uint64_t packets_sent;      /* contributions (first sends) */
	uint64_t retransmissions;
	uint64_t results;           /* results accepted */
	uint64_t duplicates;        /* results ignored: late or duplicate */
	uint64_t rx_dropped;        /* packets refused: not for us, bad Q_Key, malformed */
	uint64_t bytes_sent;        /* on the wire, headers included */
	uint64_t bytes_received;
	uint64_t cnps;              /* congestion notifications received */
	uint64_t pause_waits;       /* sends deferred by rate limiting */
	uint64_t fallbacks;         /* calls completed by the TCP ring */
	uint64_t ring_bytes_sent;   /* bytes the ring fallback sent */
	double rate_gbps;           /* DCQCN's current rate */
	double rto_us;              /* current retransmission timeout */
	uint64_t pfc_frames;        /* PFC frames received */
	uint64_t pfc_malformed;     /* MAC control frames that were not valid PFC */
	uint64_t pfc_waits;         /* times sending waited on a paused priority */
	uint64_t probes;            /* retransmissions sent on a timeout with no sign of a
				       loss (no later packet completed): a stalled peer,
				       switch or CPU rather than a dropped packet */
	uint64_t plan_changes;      /* the manager's plans taken (INCA_MANAGER): a new
				       tree, the host ring, in-network again */
	uint64_t replays;           /* collectives this rank completed in-network and ran
				       again on the ring for ranks that had not when
				       their switch or tree failed */
	uint64_t switch_waits;      /* WAITs from the switch: it holds this rank's
				       retransmitted packet while its slot waits for other
				       ranks (late to start, or slow); each one restarts
				       INCA_SWITCH_TIMEOUT_MS */
	uint64_t kept_inputs;       /* inputs of completed collectives held now for a
				       replay on the ring (fallback auto or a manager:
				       those some other rank may not have completed; at
				       most INCA_KEEP) */
	uint64_t kept_bytes;        /* ... and their bytes (at most INCA_KEEP_MB MiB) */
	uint64_t hier_calls;        /* calls that reduced inside the host first (several
				       ranks per host); the network counters above are
				       the host leader's, 0 at the other local ranks */
	uint64_t local_bytes;       /* bytes this rank passed through the host's shared
				       memory */
	uint64_t rail_calls;        /* of hier_calls, the calls split over the rails
				       (INCA_HIER=rails); with rails each rank's
				       network counters are its rail's */
	uint64_t spin_polls;        /* polls for results that found none while the rank
				       spun before sleeping (INCA_SPIN_US) */
	double spin_cpu_us;         /* the CPU time they and the yields between them
				       took: of this rank's CPU, what waited rather than
				       worked. Several ranks a host: the leader's (or
				       with rails each rail's) network waits only, not
				       the wait on the host's shared memory */
};
int inca_comm_stats(const inca_comm_t *comm, struct inca_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* INCA_H */
