/* SPDX-License-Identifier: BSD-3-Clause */
/* libinca internals shared by its files; not installed. */
#ifndef HL_PRIV_H
#define HL_PRIV_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "inca.h"
#include "inca/agg.h"

/* ---- logging (hl_log.c) ---- */

__attribute__((format(printf, 2, 3)))
void hl_log(enum inca_log_level level, const char *fmt, ...);
#define HL_ERR(...)   hl_log(INCA_LOG_ERROR, __VA_ARGS__)
#define HL_WARN(...)  hl_log(INCA_LOG_WARN, __VA_ARGS__)
#define HL_INFO(...)  hl_log(INCA_LOG_INFO, __VA_ARGS__)
#define HL_DEBUG(...) hl_log(INCA_LOG_DEBUG, __VA_ARGS__)

/* Set comm's error message and return err. */
__attribute__((format(printf, 3, 4)))
int hl_fail(struct inca_comm *c, int err, const char *fmt, ...);

/* ---- DCQCN reaction point (hl_dcqcn.c) ---- */

struct hl_dcqcn_params {
	double line_rate;     /* bytes per µs (= Gbit/s / 8 * 1000) */
	double min_rate;
	double g;             /* alpha gain */
	double alpha_period_us;
	double timer_period_us;
	uint64_t byte_counter;
	unsigned fast_recovery_steps;   /* F */
	double rate_ai;       /* additive increase, bytes per µs */
	double rate_hai;      /* hyper increase */
};

struct hl_dcqcn {
	struct hl_dcqcn_params p;
	double rc, rt, alpha; /* current rate, target rate (bytes/µs) */
	double last_alpha_us, last_timer_us;
	uint64_t bytes;       /* since the last byte-counter event */
	unsigned t_stage, b_stage;
	uint64_t cnps;
	/* pacing */
	double tokens, bucket, last_pace_us;
};

void hl_dcqcn_params_default(struct hl_dcqcn_params *p, double line_gbps);
void hl_dcqcn_init(struct hl_dcqcn *d, const struct hl_dcqcn_params *p, double now_us);
/* A CNP arrived. */
void hl_dcqcn_on_cnp(struct hl_dcqcn *d, double now_us);
/* Let time pass and account bytes sent: alpha decay, rate increases. */
void hl_dcqcn_advance(struct hl_dcqcn *d, double now_us, uint64_t bytes_sent);
/* Pacing at the current rate: may len bytes go now? (consumes tokens) */
bool hl_dcqcn_may_send(struct hl_dcqcn *d, double now_us, uint32_t len);
static inline double hl_dcqcn_gbps(const struct hl_dcqcn *d)
{
	return d->rc * 8.0 / 1000.0;
}

/* ---- retransmission timeout (hl_coll.c), RFC 6298 ---- */

struct hl_rto {
	double srtt, rttvar, rto;   /* µs */
	double min, max;
	bool have_sample;
};
void hl_rto_init(struct hl_rto *r, double min_us, double max_us);
/* false: above the RTO, not taken (hl_coll.c says why) */
bool hl_rto_sample(struct hl_rto *r, double rtt_us);
void hl_rto_backoff(struct hl_rto *r);

/* ---- transports ---- */

/* A frame as agg_encode built it; transports send what they must of it. */
struct hl_frame {
	uint8_t *data;
	uint16_t len;
	uint16_t bth_off;      /* offset of the BTH (UDP payload) */
	uint16_t msg_off;      /* offset of the INCA header (SEND payload) */
	uint16_t msg_len;      /* INCA header + elements, no padding */
};

enum hl_rx_kind { HL_RX_MSG = 1, HL_RX_CNP = 2 };

/* A received message addressed to this communicator's QPN, valid until the
 * next recv call. */
struct hl_rx {
	enum hl_rx_kind kind;
	const uint8_t *msg;    /* INCA header + elements */
	uint32_t len;
	uint32_t src_qp;
	uint32_t len_wire;     /* bytes on the wire, for counters */
};

struct hl_transport_ops {
	const char *name;
	/* sends go through the kernel, which ignores PFC: libinca must
	 * honour pauses itself (a NIC does it for verbs) */
	bool host_pfc;
	/* the largest IB MTU it carries (mtu auto); 0: 4096 */
	uint16_t max_ib_mtu;
	/* Optional: make the endpoint before the group is known, because the
	 * NIC picks its QPN (verbs): sets c->my_qpn and c->tp_state from
	 * c->my_ip, c->rank and c->ifname; open then finishes that state. */
	int (*reserve)(struct inca_comm *c);
	int (*open)(struct inca_comm *c);
	void (*close)(struct inca_comm *c);
	/* Send n frames; returns how many were sent, or a negative INCA code. */
	int (*send)(struct inca_comm *c, const struct hl_frame *f, unsigned n);
	/* Receive up to max messages for us, waiting at most timeout_us;
	 * returns the count (0: nothing), or a negative INCA code. Packets for
	 * other QPNs or with a wrong Q_Key are dropped and counted. */
	int (*recv)(struct inca_comm *c, struct hl_rx *rx, unsigned max, int timeout_us);
	/* The group moved to another switch (c->g.switch_ip, qkey): send
	 * there from now on, same QPN. 0 or a negative INCA code. */
	int (*retarget)(struct inca_comm *c);
};

extern const struct hl_transport_ops hl_udp_ops;
/* Packets the udp transport's reuseport program on ip (this network
 * namespace) dropped for want of an owner, and left to the kernel as too
 * short. INCA_ERR_TRANSPORT: no group there; INCA_ERR_UNSUPPORTED: no eBPF. */
int hl_udp_steer_dropped(uint32_t ip, uint64_t *unowned, uint64_t *too_short);
extern const struct hl_transport_ops hl_xdp_ops;
extern const struct hl_transport_ops hl_verbs_ops;

/* The UDP source port of a group's slot (docs/protocol.md 1.3): the same
 * for every member, so a switch hashing on it keeps a slot on one worker,
 * and different slots spread over workers and ECMP paths. */
static inline uint16_t hl_slot_sport(uint32_t group_id, uint32_t slot)
{
	return (uint16_t)(0xC000u | ((group_id + slot) & 0x3FFFu));
}

/* ---- the communicator ---- */

/* A communicator's ranks in manager mode (a tree's groups hold at most
 * AGG_MAX_MEMBERS each; a static group is one group). */
#define HL_MAX_RANKS 65536

struct hl_member {
	uint32_t ip;           /* host byte order */
	uint32_t ring_ip;      /* the fallback ring's address; 0: ip */
	uint32_t qpn;
	uint16_t ring_port;
	uint16_t nranks;       /* a static group of hosts: ranks on this one; 0: not said */
};

struct hl_group_desc {
	uint32_t switch_ip;
	uint32_t group_id;
	uint32_t group_qpn;
	uint32_t qkey;
	uint16_t window;
	uint16_t elems_per_pkt;
	uint16_t ib_mtu;       /* 256..4096: INCA header + elements fit in it */
	bool reproducible;
	bool ring;             /* the manager's plan is the host ring: no switch */
	uint16_t ring_port;    /* default TCP port of the fallback ring */
	int member_index;      /* my index in the switch's group (a leaf's, in a
				  tree); -1: my rank */
	int nmembers;
	struct hl_member *members;
	/* a static group of hosts with rails (INCA_HIER=rails): the groups of
	 * local ranks 1..nrails, one member per host each */
	int nrails;
	struct hl_group_desc *rails;
};
#define HL_MAX_RAILS 255

struct hl_coll;

/* Collectives a communicator may have started and not yet completed
 * (inca_test/inca_wait): they share one packet stream. */
#define HL_MAX_INFLIGHT INCA_MAX_INFLIGHT

/* One slot of the window: it carries the stream's packets g, g + W, ...
 * in turn (docs/protocol.md 3.1). */
struct hl_slot {
	uint64_t g;            /* the packet it carries now; >= gcount: idle */
	struct hl_coll *op;    /* the collective packet g belongs to (NULL: not
				  looked up yet) */
	double sent_us;        /* the latest transmission */
	double first_sent_us;  /* the first one */
	bool sent;
	unsigned retx;
};

/* The communicator's packet stream (hl_coll.c). */
struct hl_stream {
	struct hl_slot *slots;     /* the window's W slots */
	uint16_t window;
	uint64_t oldest;           /* lowest packet whose result is not in */
	struct hl_coll *ops[HL_MAX_INFLIGHT];   /* not yet completed by the
						   caller, in start order */
	unsigned nops;
	unsigned unanswered;       /* packets sent whose result is not in */
	uint8_t *frames;           /* SEND_BATCH frames being built */
	size_t frame_cap;
	double last_progress_us;   /* the latest result, or the first send
				      after the stream was idle */
	/* the first transmission of the latest-sent packet whose result is
	 * in: an outstanding packet first sent before it was probably lost */
	double newest_done_sent_us;
	double next_probe_us;      /* no result at all: the next probe, not before */
	unsigned probes;           /* probes since the last result */
	double next_peer_check_us; /* static group, no result: when to look
				      for a peer's ring connection next */
	/* wake-up coalescing (hl_coll.c): the results' pace while many are
	 * outstanding, so that a rank sleeps until a batch has arrived
	 * instead of waking for every result */
	bool coalesce;
	double spin_us;            /* poll this long before sleeping (SPIN_US) */
	double gap_us;             /* estimated time per result; 0: unknown */
	double pace_t0_us;         /* start of the current measurement */
	unsigned pace_results;     /* results since pace_t0_us */
	bool pace_on;              /* a measurement started (at a result) */
	double nap_scale;          /* of the nap the pace gives (1/16..1): halved
				      after a nap that overslept */
	unsigned long naps;        /* naps taken (the unit tests look) */
};

/* What the manager says of a job's plan (docs/manager.md, "Plans"). */
struct hl_plan_msg {
	uint32_t epoch, version;
	bool ring;             /* the host ring, else its tree */
	bool dead;             /* the plan before it was a tree that failed */
	bool ready;            /* its tree programmed (always, on the ring) */
	bool replaced;         /* a newer plan began (the manager's past plans) */
	bool cut;              /* the cut is made: */
	uint32_t cut_seq;      /*   before it the ring, from it this plan */
	uint32_t cut_from;     /*   run again on the ring from here (dead) */
	char error[256];       /* the cut cannot be made: why */
	char reason[256];
	bool have_group;       /* g: the rank's description in this plan */
	struct hl_group_desc g;
};

/* A collective this rank completed in-network, its input kept to replay
 * it on the ring should the switch or tree fail before every rank
 * completed it (hl_keep.c). */
struct hl_kept {
	uint32_t seq;
	enum agg_coll coll;
	enum agg_dtype dtype;
	enum agg_op op;
	int root;
	size_t count, esize;
	uint8_t *in;           /* owned */
	size_t bytes;
	size_t cap;            /* in's allocation */
	/* where its packets ended in the stream (in-network only): once
	 * this rank has every result up to gend + W, every rank has completed
	 * it (hl_plan.c, "kept inputs"); gen: the stream it ran in */
	uint64_t gend;
	uint32_t gen;
};

/* Following the manager's plan (hl_plan.c). The thread writes msg, acked
 * and holding, the caller's thread next/first/keep, under lock. */
#define HL_PLAN_MISSED 8

struct hl_plan {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool thread_on, stop;
	struct hl_plan_msg msg;   /* the manager's latest word; msg.g the thread's */
	bool news;                /* msg changed since the caller looked */
	/* older plans whose cuts came while the caller was away (between its
	 * calls) and a newer plan replaced msg before it applied them: applied
	 * first, oldest first (their groups dropped: superseded) */
	struct hl_plan_msg missed[HL_PLAN_MISSED];
	unsigned nmissed;
	bool missed_overflow;     /* more than HL_PLAN_MISSED: the job cannot go on */
	double seen_us;           /* when a plan newer than the adopted one came */
	uint32_t next, first, keep;   /* where this rank is */
	bool holding;             /* acknowledged at next: start none before the cut */
	uint32_t hold_epoch;      /*   of this plan (or a later one) */
	bool hold_dead;           /* and the plan's old tree failed: no packet sent on
				     it for the first time before the cut (atomic) */
	uint32_t acked;
	uint32_t adopted_epoch;   /* the plan in use: 0 none yet (the ring) */
	bool stall_due;           /* the caller saw the tree stop: the thread tells */
	uint32_t stall_epoch;     /*   the manager this plan's tree gave nothing */
	unsigned stall_ms;        /*   for this long */
	/* the caller's thread only */
	bool applying;            /* inside apply(): no cut applied from within another */
	bool tree;                /* the plan is a tree: in-network from switch_seq */
	uint32_t switch_seq;
	bool installed;           /* its group is c->g */
	struct hl_group_desc pending;
	uint32_t stalled;         /* the plan whose stall was reported */
	char broken[256];         /* a cut that cannot be made: every call fails so */
};

/* The kept inputs (hl_keep.c), oldest first. */
struct hl_keep {
	struct hl_kept *kept;
	unsigned n, cap, max;     /* max: INCA_KEEP */
	size_t bytes, bytes_max;  /* bytes_max: INCA_KEEP_MB */
	bool lost_any;            /* completed in-network, its input not held (lost, */
	uint32_t lost;            /*   pruned, never kept): the latest such collective */
	bool ring_any;            /* completed on the ring (needs no replay): */
	uint32_t ring_low;        /*   the oldest such collective since the last lost */
	uint8_t *spare;           /* a dropped kept input's buffer, for the next */
	size_t spare_cap;
};

/* A job's collectives are numbered from epoch x HL_EPOCH_STRIDE (mod 2^32;
 * epoch 0: from 1). Odd, so a bijection; epochs 1, 2, 3... land about 1.6e9
 * apart, so consecutive jobs on a static group never meet (protocol.md 3.2). */
#define HL_EPOCH_STRIDE 0x9e3779b1u
/* its inverse mod 2^32: the epoch whose numbering starts at a given value
 * (inca_epoch_new: the clock) */
#define HL_EPOCH_STRIDE_INV 0x0e8b2f51u
_Static_assert((uint32_t)(HL_EPOCH_STRIDE * HL_EPOCH_STRIDE_INV) == 1u,
	       "HL_EPOCH_STRIDE_INV is the inverse of HL_EPOCH_STRIDE mod 2^32");

/* FNV-1a of a string: a job's name as a number (the ring's id, the host
 * team's segment name) */
static inline uint32_t hl_fnv1a(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* a - b for collective numbers: a signed distance on the 32-bit circle */
static inline int32_t hl_seq_diff(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b);
}

struct inca_comm {
	int rank, size;
	char job[64];
	struct hl_group_desc g;
	uint32_t my_ip, my_qpn;
	uint16_t member_index;    /* rank field of my contributions */
	char ifname[32];

	const struct hl_transport_ops *tp;
	void *tp_state;
	inca_fallback_t fallback;
	bool switch_failed;       /* sticky: use the ring from now on */
	bool warned_fallback;
	bool fixed_sport;         /* the transport sends from port 4791 only (udp
				     without CAP_NET_RAW): no source port per slot */
	unsigned timeout_ms, switch_timeout_ms;
	bool dcqcn_on;
	double line_bps;          /* the link's rate: DCQCN, PFC quanta */

	/* PFC (hl_pfc.c) */
	struct hl_pfc_port *pfc;  /* the interface's pauses; NULL: not honoured */
	unsigned pfc_prio;        /* priority of our data (the switch's lossless TC) */

	uint32_t next_seq;        /* collective sequence number, from the epoch's */
	uint64_t gcount;          /* packets of the collectives started: the
				     next one's slot/set base */
	uint32_t stream_gen;      /* stream resets (a new tree, a failure) */
	struct hl_rto rto;
	double last_backoff_us;
	double last_rtt_sample_us;
	struct hl_dcqcn dcqcn;
	struct hl_stream stream;  /* collectives in flight */

	/* ring fallback (hl_ring.c) */
	int ring_listen_fd, ring_next_fd, ring_prev_fd;

	struct hl_hier *hier;     /* several ranks per host (hl_hier.c): the rest of
				     this struct is unused but for rank, size, job,
				     tp, timeout_ms, now_us, stats and errmsg */
	struct hl_manager *mgr;   /* NULL: static group */
	struct hl_plan *plan;     /* with mgr: the manager's plan (hl_plan.c) */
	struct hl_keep keep;      /* inputs kept for replays (hl_keep.c) */
	uint32_t ring_id;         /* the ring's peers check it (the job's, with a manager) */

	/* clock, replaceable by unit tests */
	double (*now_us)(struct inca_comm *c);

	struct inca_stats stats;
	char errmsg[256];
};

double hl_clock_us(struct inca_comm *c);
/* The CPUs the calling thread may run on (its affinity, any number of
 * CPUs): how many (0 if unknown), *only the one CPU when there is just
 * one (else -1), *all whether they are every online CPU of the machine. */
int hl_cpus_allowed(int *only, bool *all);

/*
 * The receive filter of the transports that see every frame (udp, xdp;
 * with verbs the NIC filters): a decoded packet is ours when it is for our
 * QPN and, an INCA message, carries the group's Q_Key (a CNP has none).
 * Fills *rx and returns true, or false: the caller counts the drop.
 */
static inline bool hl_rx_accept(const struct inca_comm *c, const struct agg_pkt *p,
				uint32_t len_wire, struct hl_rx *rx)
{
	if (p->dest_qp != c->my_qpn || (p->kind == AGG_PKT_INCA && p->qkey != c->g.qkey))
		return false;
	*rx = (struct hl_rx){
		.kind = p->kind == AGG_PKT_CNP ? HL_RX_CNP : HL_RX_MSG,
		.msg = p->payload ? p->payload - AGG_INCA_HLEN : NULL,
		.len = p->payload_len + AGG_INCA_HLEN,
		.src_qp = p->src_qp,
		.len_wire = len_wire,
	};
	return true;
}

/* Create with explicit pieces (unit tests use a mock transport); tp_state:
 * what tp->reserve made, or NULL. */
int hl_comm_create(const struct inca_comm_attr *attr, const struct hl_group_desc *g,
		   const struct hl_transport_ops *tp, void *tp_state, inca_comm_t **out);
/* hl_group.c: a number in C notation ("4096", "0x1234") up to max: 0 or -1. */
int hl_parse_num(const char *s, uint64_t max, uint64_t *out);
/* A dotted quad, host byte order: 0 or -1. */
int hl_parse_ip(const char *s, uint32_t *ip);
/* Parse a group description from JSON text (config file content). */
int hl_group_from_json(const char *text, const char *origin, struct hl_group_desc *g,
		       char *err, size_t errlen);
/* From INCA_SWITCH, INCA_GROUP, ... */
int hl_group_from_env(struct hl_group_desc *g, char *err, size_t errlen);
void hl_group_free(struct hl_group_desc *g);

/* hl_pfc.c: honour PFC pauses for c->pfc_prio on the member's interface.
 * Without the packet socket: an error when required, else a warning. The
 * communicators of a process on one interface share one packet socket and
 * its pause state; it stays open for the next when the last one closes
 * (a packet socket's bind and close each wait for an RCU grace period,
 * 8-24 ms here, which made every communicator's creation and release that
 * much slower). */
int hl_pfc_open(struct inca_comm *c, bool required);
void hl_pfc_close(struct inca_comm *c);
/* Honour interface ifindex's pauses: the process's port for it if it has
 * one (fd, if any, is closed), else one reading fd (a packet socket, or a
 * test's socket pair), which is the process's from now on. */
int hl_pfc_attach(struct inca_comm *c, int ifindex, int fd);
/* Read pending PFC frames; microseconds until our priority may send. */
double hl_pfc_wait_us(struct inca_comm *c, double now_us);

/* hl_manager.c: INCA_MANAGER */
struct hl_manager;
/* The rank's data address: attr->local_ip, else the IPv4 address of
 * attr->ifname. */
int hl_manager_address(const struct inca_comm_attr *attr, char ip[16], char *err,
		       size_t errlen);
/* Register and wait for the job's first plan and its group description
 * (*g; plan->g is moved there). qpn: the rank's QPN when its transport
 * chose it (verbs), else 0 (INCA_QPN, or the manager's choice). nrails > 1:
 * the job is rail `rail` of that many (hl_comm_create_rail). */
int hl_manager_join(const struct inca_comm_attr *attr, uint32_t qpn, int rail, int nrails,
		    struct hl_group_desc *g, struct hl_plan_msg *plan, struct hl_manager **out,
		    char *err, size_t errlen);
struct json_t;
int hl_manager_plan_parse(struct hl_manager *m, struct json_t *resp, struct hl_plan_msg *pm,
			  char *err, size_t errlen);
/*
 * The plan once its version differs from version: held by the manager up
 * to the poll's wait (20 s, or a third of the job's lease, which it
 * renews). This, ack and stall are the plan thread's: one kept connection.
 * 0; INCA_ERR_PEER: the job is gone; INCA_ERR_MANAGER: unreachable or
 * interrupted.
 */
int hl_manager_poll(struct hl_manager *m, uint32_t version, struct hl_plan_msg *pm,
		    char *err, size_t errlen);
/* Acknowledge plan epoch at (next, first, keep). 0; INCA_ERR_BUSY: not the
 * job's plan any more; INCA_ERR_MANAGER. */
int hl_manager_ack(struct hl_manager *m, uint32_t epoch, uint32_t next, uint32_t first,
		   uint32_t keep, char *err, size_t errlen);
/* The tree of plan epoch gave no results for ms. 0: told (or refused for
 * good); INCA_ERR_MANAGER: not delivered (unreachable, or interrupted). */
int hl_manager_stall(struct hl_manager *m, uint32_t epoch, unsigned ms);
/* End the plan thread's request in progress (or its next) at once. */
void hl_manager_interrupt(struct hl_manager *m);
void hl_manager_leave(struct hl_manager *m);

/* hl_comm.c: the IB MTU the path to switch_ip carries (mtu auto). */
uint16_t hl_path_ib_mtu(const struct inca_comm *c, uint32_t switch_ip);

/* hl_plan.c: the manager's plan (INCA_MANAGER). start: after join, with
 * its first plan; stop: before the communicator goes. */
int hl_plan_start(struct inca_comm *c, const struct hl_plan_msg *first);
void hl_plan_stop(struct inca_comm *c);
/* A new collective: its sequence number, and whether it runs on the ring
 * (applies a new plan's cut, holds at an acknowledged one, installs the
 * new tree's group at its cut). 0 or a negative INCA code. */
int hl_plan_route(struct inca_comm *c, bool *ring, uint32_t *seq);
/* In the progress loop: apply a new plan's cut. 0 or a negative INCA code. */
int hl_plan_progress(struct inca_comm *c);
/* The tree gave no results for ms: tell the manager (once a plan). */
void hl_plan_stalled(struct inca_comm *c, unsigned ms);
/* Kept inputs (hl_keep.c). init: the limits from INCA_KEEP/INCA_KEEP_MB,
 * at the communicator's first collective; free: all of them. */
void hl_keep_init(struct inca_comm *c);
void hl_keep_free(struct inca_comm *c);
/* A collective completed in-network: keep its input (e->in is taken). */
void hl_keep_put(struct inca_comm *c, struct hl_kept *e);
/* A buffer of at least n bytes for a kept input or an in-place copy. First
 * drops the kept inputs every rank has completed; then the spare (a
 * dropped kept input's, its pages in memory already: on these VMs the
 * first write to fresh memory costs 1.5-3 ms a MiB) when large enough,
 * else a new one. *cap: its size. NULL: out of memory. */
uint8_t *hl_keep_buffer(struct inca_comm *c, size_t n, size_t *cap);
/* Give such a buffer back: the spare if larger than the spare, else freed. */
void hl_keep_unbuffer(struct inca_comm *c, uint8_t *p, size_t cap);
/* The first collective this rank can still replay (or never ran). */
uint32_t hl_keep_from(struct inca_comm *c);
/* seq completed in-network here and not kept (no replay possible) */
void hl_keep_lost(struct inca_comm *c, uint32_t seq);
/* seq completed on the ring here (no replay needed) */
void hl_keep_ring_done(struct inca_comm *c, uint32_t seq);
/* Drop those before from: every rank completed them. */
void hl_keep_drop_before(struct inca_comm *c, uint32_t from);
/* The stream's frontier: every packet below it has its result here. */
uint64_t hl_stream_frontier(struct inca_comm *c);
/* Collectives completed or started: update the position the thread acks. */
void hl_plan_position(struct inca_comm *c);
bool hl_plan_hold_dead(const struct inca_comm *c);
/* Before kept inputs are dropped (hl_keep.c): false while a plan's cut is
 * pending (acknowledged, not applied), when none may be; true, the plan
 * locked, and hl_plan_keep_end after the drops. No plan: true. */
bool hl_plan_keep_begin(struct inca_comm *c);
void hl_plan_keep_end(struct inca_comm *c);

/* hl_ring.c: the collectives over a TCP ring among the members, for
 * collective number seq (every message carries it, and the collective and
 * step: ranks that disagree get INCA_ERR_PROTOCOL). Reductions travel in
 * the accumulator format; allgather and bcast only copy bytes. */
/* A static group's fallback: the ranks' positions round the ring, before
 * any collective there. In: this rank's first collective not completed
 * and first it can replay (hl_keep_from); out: the lowest first and the
 * highest keep of all ranks. 0 or a negative INCA code. */
int hl_ring_agree(struct inca_comm *c, uint32_t *first, uint32_t *keep, double deadline_us);
int hl_ring_allreduce(struct inca_comm *c, uint32_t seq, const void *in, void *out,
		      size_t count, enum agg_dtype dtype, enum agg_op op, double deadline_us);
/* out: count elements at root; ignored elsewhere */
int hl_ring_reduce(struct inca_comm *c, uint32_t seq, const void *in, void *out, size_t count,
		   enum agg_dtype dtype, enum agg_op op, int root, double deadline_us);
/* in: size shards of count elements; out: this rank's shard, reduced */
int hl_ring_reduce_scatter(struct inca_comm *c, uint32_t seq, const void *in, void *out,
			   size_t count, enum agg_dtype dtype, enum agg_op op,
			   double deadline_us);
/* buf: size shards of shard_bytes, this rank's already in place */
int hl_ring_allgather(struct inca_comm *c, uint32_t seq, void *buf, size_t shard_bytes,
		      double deadline_us);
int hl_ring_bcast(struct inca_comm *c, uint32_t seq, void *buf, size_t bytes, int root,
		  double deadline_us);
void hl_ring_close(struct inca_comm *c);
/* The ring's listening socket (c->ring_listen_fd) on this rank's ring
 * address and port: 0 or an errno. A static group's ranks listen from
 * the start, so that a peer that fell back can tell them. */
int hl_ring_listen(struct inca_comm *c);
/* Has a peer connected to this rank's ring (it fell back)? Never blocks. */
bool hl_ring_peer_waiting(struct inca_comm *c);

/* hl_coll.c: collectives on the packet stream. The arguments are checked
 * by the caller (hl_calls.c); sendbuf may be INCA_IN_PLACE. */
struct hl_coll_args {
	enum agg_coll coll;
	const void *sendbuf;
	void *recvbuf;
	size_t count;          /* elements of the buffer (allreduce, reduce, bcast)
				  or of one rank's shard (reduce-scatter, allgather) */
	enum agg_dtype dtype;
	enum agg_op op;        /* sum for allgather and bcast */
	int root;              /* reduce, bcast */
};
const char *hl_coll_name(enum agg_coll coll);
int hl_coll_start(struct inca_comm *c, const struct hl_coll_args *a, struct hl_coll **out);
/* Progress the communicator's stream for at most budget_us, until op is
 * done: 1 done (hl_coll_finish says how), 0 not yet. */
int hl_coll_progress(struct hl_coll *op, double budget_us);
int hl_coll_finish(struct hl_coll *op);   /* result code; frees op */
int hl_stream_init(struct inca_comm *c);
/* For hl_plan.c and the static fallback: the lowest collective not
 * completed here (else the next); the collectives from `from` on the ring
 * now, in order (unfinished ones for real; finished ones and the kept
 * inputs as replays whose results are dropped); every collective in flight fails with err; the stream starts
 * afresh (a new group); progress whatever is in flight for up to budget. */
uint32_t hl_coll_first(struct inca_comm *c);
/* The oldest collective in the stream, finished or not (else next_seq). */
uint32_t hl_coll_oldest(struct inca_comm *c);
int hl_coll_recover(struct inca_comm *c, uint32_t from);
void hl_coll_fail_all(struct inca_comm *c, int err);
void hl_coll_restart(struct inca_comm *c);
void hl_coll_idle_progress(struct inca_comm *c, double budget_us);
/* Take the next collective number and run nothing under it: a rail
 * (hl_hier.c) that does not carry a call of its job, so that every rail
 * numbers the job's collectives alike and the manager's cut is one
 * collective for all of them. 0 or a negative INCA code. */
int hl_coll_skip(struct inca_comm *c);
/* Frees every collective still held, then the stream. */
void hl_stream_free(struct inca_comm *c);

/* hl_comm.c: a communicator whose every rank is a member of the switch's
 * group (attr checked and complete; gs: a static group, taken; NULL: the
 * manager's). */
int hl_comm_create_flat(const struct inca_comm_attr *attr, const struct hl_transport_ops *tp,
			struct hl_group_desc *gs, inca_comm_t **out);
/* The same for rail `rail` of a job with nrails (> 1) rails at the manager
 * (hl_hier.c): it registers as one, so that the manager plans the rails
 * together. */
int hl_comm_create_rail(const struct inca_comm_attr *attr, const struct hl_transport_ops *tp,
			struct hl_group_desc *gs, int rail, int nrails, inca_comm_t **out);

/* hl_hier.c: several ranks per host. */
struct hl_layout {
	int nhosts;            /* 0: none found (one member per rank) */
	int *first;            /* nhosts + 1: host h has ranks first[h]..first[h+1]-1 */
	int host, lrank, lsize, maxp;
	bool uniform;          /* as many ranks on every host */
};
/* From attr->layout / INCA_LAYOUT, a static group of hosts (g->nmembers <
 * size), or the launcher's local size; L->nhosts 0 when none applies. */
int hl_layout_resolve(const struct inca_comm_attr *attr, const struct hl_group_desc *g,
		      struct hl_layout *L, char *err, size_t errlen);
void hl_layout_free(struct hl_layout *L);
/* L and g (static, NULL: manager) are taken. */
int hl_hier_create(const struct inca_comm_attr *attr, struct hl_layout *L,
		   struct hl_group_desc *g, const struct hl_transport_ops *tp, inca_comm_t **out,
		   char *err, size_t errlen);
void hl_hier_destroy(struct inca_comm *c);
struct hl_hreq;
int hl_hier_start(struct inca_comm *c, const struct hl_coll_args *a, struct hl_hreq **out);
/* as hl_coll_progress / hl_coll_finish */
int hl_hier_progress(struct hl_hreq *r, double budget_us);
int hl_hier_finish(struct hl_hreq *r);
void hl_hier_stats(const struct inca_comm *c, struct inca_stats *st);
const char *hl_hier_transport(const struct inca_comm *c);

#endif /* HL_PRIV_H */
