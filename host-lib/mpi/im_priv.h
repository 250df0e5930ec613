/* SPDX-License-Identifier: BSD-3-Clause */
/* libinca-mpi internals: the PMPI interposer's state, shared by its files. */
#ifndef IM_PRIV_H
#define IM_PRIV_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inca.h"

/* the collectives the interposer intercepts (and counts: INCA_MPI_STATS) */
enum im_coll {
	IM_ALLREDUCE,
	IM_IALLREDUCE,
	IM_REDUCE,
	IM_IREDUCE,
	IM_REDUCE_SCATTER_BLOCK,
	IM_IREDUCE_SCATTER_BLOCK,
	IM_REDUCE_SCATTER,          /* offloaded when every count is equal */
	IM_IREDUCE_SCATTER,
	IM_ALLGATHER,
	IM_IALLGATHER,
	IM_BCAST,
	IM_IBCAST,
	IM_BARRIER,
	IM_IBARRIER,
	IM_NCOLL,
};

/* why a call passed through (INCA_MPI_STATS) */
enum im_why {
	IM_WHY_COMM,     /* its communicator is not offloaded (yet, or at all) */
	IM_WHY_TYPE,     /* no INCA dtype: derived, pair or unmapped type */
	IM_WHY_OP,       /* MINLOC/MAXLOC, LAND/LOR, user op, MIN/MAX unsigned */
	IM_WHY_SIZE,     /* count 0, INCA_MPI_MIN_BYTES/MAX_BYTES */
	IM_WHY_SHAPE,    /* unequal counts or types, a bad root, too many requests */
	IM_WHY_FAILED,   /* the switch failed: finished through MPI */
	IM_NWHY,
};

struct im_counter {
	uint64_t offloaded, passed;
	uint64_t bytes_offloaded, bytes_passed;
	double us_offloaded, us_passed;
	uint64_t why[IM_NWHY];
};

/* the blocking form of a collective (IM_IALLREDUCE -> IM_ALLREDUCE) */
static inline enum im_coll im_blocking(enum im_coll k)
{
	return k == IM_IALLREDUCE || k == IM_IREDUCE || k == IM_IREDUCE_SCATTER_BLOCK ||
	       k == IM_IREDUCE_SCATTER || k == IM_IALLGATHER || k == IM_IBCAST ||
	       k == IM_IBARRIER ? (enum im_coll)(k - 1) : k;
}

/* libinca's collectives of the communicators released so far, and those
 * of them that reduced inside the host first (several ranks per host) */
extern struct im_host_first {
	uint64_t calls, all, rails;
} im_host_first;

/* communicators offloaded (counted by their rank 0): with a new group,
 * with a freed one's (INCA_MPI_POOL) */
extern struct im_groups {
	uint64_t created, reused;
} im_groups;

/* blocking calls passed through on offloaded communicators: MPI's
 * nonblocking call, waited for while serving recoveries (served), or its
 * blocking call, every operation before it being complete on every rank
 * (settled) */
extern struct im_pass_forms {
	uint64_t served, settled;
} im_pass_forms;

/* Settings from the environment, read once at MPI_Init. */
struct im_config {
	bool enabled;             /* INCA_MPI=0 turns the interposer off */
	int verbose;              /* INCA_MPI_VERBOSE */
	bool stats;               /* INCA_MPI_STATS */
	bool pass_settled;        /* INCA_MPI_PASS_SETTLED: MPI's blocking call
				     for a call passed through on an offloaded
				     communicator once it is settled */
	size_t min_bytes;         /* INCA_MPI_MIN_BYTES: smaller calls pass through */
	size_t max_bytes;         /* INCA_MPI_MAX_BYTES: larger calls pass through (0: none) */
	unsigned create_timeout_ms; /* INCA_MPI_CREATE_TIMEOUT_MS */
	unsigned offload_after;   /* INCA_MPI_OFFLOAD_AFTER: a communicator is
				     offloaded at this offloadable call */
	unsigned pool;            /* INCA_MPI_POOL: freed communicators' groups
				     kept for the next of the same ranks */
	char job_prefix[24];      /* INCA_JOB or the launcher's job id, sanitised */
};

extern struct im_config im_cfg;

extern struct im_counter im_count[IM_NCOLL];

/* What one offloaded communicator knows. Its state is the same on every
 * rank at the same point of the program (decided collectively). */
enum im_state {
	IM_UNDECIDED = 0,   /* fewer offloadable calls than offload_after yet */
	IM_OFFLOADED,       /* an INCA group serves it */
	IM_PASSTHROUGH,     /* decided not to offload: everything to PMPI */
	IM_FAILED,          /* the switch failed: later calls recover first */
};

struct im_op;

/* Small nonblocking calls whose result is every rank's (all-reduce and
 * allgather of at most IM_PIPE_BYTES, barrier) pipeline: up to
 * IM_PIPE_MAX in flight on a communicator, completed in the order they
 * started, so every rank's completed calls are a prefix of the same list;
 * each rank keeps the results of its last IM_PIPE_MAX completed ones for a
 * rank that missed them. Any other call runs alone. */
#define IM_PIPE_MAX 32
#define IM_PIPE_BYTES 65536

/* DATA for a rank that missed operation seq: header (seq, 1 = its result
 * follows / 0 = none for another rank), then the result */
struct im_kept {
	uint32_t seq;             /* 0: none */
	size_t len, cap;          /* result bytes; SIZE_MAX: lost (no memory) */
	void *buf;
};

struct im_comm {
	MPI_Comm comm;            /* the application's communicator */
	MPI_Comm shadow;          /* private dup: creation, recovery, drain */
	enum im_state state;
	unsigned calls;           /* offloadable calls while undecided */
	bool failed_synced;       /* every rank knows the comm failed */
	int rank, size;
	inca_comm_t *inca;
	uint32_t seq;             /* offloaded operations started */
	uint32_t done_seq;        /* the last one completed here (0: none) */
	uint32_t settled_seq;     /* seq when a passed-through call that every
				     rank had to enter last completed here:
				     operations up to it are complete on every
				     rank, none needs this rank for a recovery */
	uint32_t failed_at;       /* the earliest operation this rank knows
				     failed on some rank (0: none) */
	bool pass_settled;        /* INCA_MPI_PASS_SETTLED on every rank */
	struct im_kept big;       /* the last call that ran alone */
	struct im_kept ring[IM_PIPE_MAX]; /* pipelined calls, by seq % IM_PIPE_MAX */
	void *scratch;            /* in-place inputs kept for a recovery */
	size_t scratch_cap;
	/* done_seq's call when its result is not another rank's (a reduce
	 * at a rank that is not the root, a reduce-scatter): its input, to
	 * redo it with the ranks that missed it (REDO) */
	struct im_join {
		enum im_coll kind;
		int count, root;
		MPI_Datatype type;
		MPI_Op op;
		void *in;
		size_t in_cap;
		bool valid;
	} join;
	uint32_t joined_seq;      /* the last operation redone for others */
	int drains;               /* DRAIN messages received (leaving) */
	bool owed;                /* a NOTICE came for an operation not done yet */
	struct im_op *head, *tail; /* nonblocking operations in flight, in
				     start order */
	int nactive;
	struct im_comm *next;     /* all mapped communicators */
	char job[48];
	uint32_t seen[];          /* per rank: the latest operation it said it
				     could not finish (recovery); then, per
				     rank, the latest one it was sent DATA of */
};

/* The call as the application made it: a recovery redoes it through
 * PMPI with these arguments (the input replaced by its copy when the call
 * was in place). */
struct im_args {
	const void *sendbuf;
	void *recvbuf;
	int scount, rcount;       /* count (reductions, bcast), recvcount */
	MPI_Datatype stype, rtype;
	MPI_Op op;
	int root;
};

/* One offloaded operation: enough to redo it through PMPI if the switch
 * fails, and to hand its result to a rank that missed it. */
struct im_op {
	enum im_coll kind;
	struct im_comm *ic;
	uint32_t seq;
	struct im_args a;
	const void *in;           /* libinca's input (NULL: in place) */
	void *out;                /* libinca's output (recvbuf, or packed) */
	const void *saved_in;     /* in place: the input's copy (ic->scratch) */
	size_t count;             /* libinca's count */
	int dt, io;               /* libinca's dtype and op */
	size_t bytes;             /* the result another rank may take (0: none) */
	size_t in_bytes;          /* the input, for a redo with others */
	size_t stat_bytes;        /* the call's size in INCA_MPI_STATS */
	bool share;               /* the result is every rank's (DATA 1) */
	bool in_place;
	uint8_t *pack;            /* derived or odd-sized types: packed copy */
	size_t blk, pblk;         /* allgather: a rank's bytes, padded to words */
	int32_t word[2];          /* barrier: the all-reduced word */
	inca_request_t *req;      /* libinca's request */
	MPI_Request greq;         /* nonblocking: the generalized request */
	bool complete, failed, freed, redone;
	bool pipelined;           /* in flight with others (IM_PIPE_MAX) */
	void *own_copy;           /* pipelined and in place: saved_in, its own */
	struct im_op *next_active;
	struct im_op *reap_next;  /* freed by the application, complete */
	int inca_err;
	double start_us;
};

double im_now_us(void);

/* A call's start, for INCA_MPI_STATS's times (0 without them: a call
 * passed through costs as little more than MPI's own as it can) */
static inline double im_t0(void)
{
	return im_cfg.stats ? im_now_us() : 0;
}

__attribute__((format(printf, 2, 3)))
void im_log(int level, const char *fmt, ...);

/* im_comm.c: the INCA communicator behind an MPI communicator, created
 * collectively on its offload_after-th offloadable call (counted here);
 * NULL: pass through (before that call too). */
struct im_comm *im_comm_get(MPI_Comm comm);
/* How a call passes through on a communicator: the same on every rank
 * at the same call. */
enum im_pass {
	IM_PASS_MPI,      /* never offloaded: MPI's blocking call */
	IM_PASS_SETTLED,  /* offloaded, and every offloaded operation on it is
			     complete on every rank (a passed-through call
			     that every rank had to enter came after them):
			     MPI's blocking call */
	IM_PASS_SERVE,    /* offloaded with operations another rank may still
			     need this one for, or failed: MPI's nonblocking
			     call, waited for while serving recoveries */
};
/* A call on comm passes through: comm's operation in flight, if any, is
 * finished first (the calls stay in the same order on every rank). *icp
 * (icp may be NULL): comm's mapping when it was offloaded (NULL
 * otherwise), for im_comm_settled. Decides nothing. */
enum im_pass im_comm_pass(MPI_Comm comm, struct im_comm **icp);
/* A passed-through call that every rank had to enter (its result needs
 * every rank's input) completed on ic: every offloaded operation before
 * it is complete on every rank. */
void im_comm_settled(struct im_comm *ic);
/* Send DATA for ic's last operation to the ranks whose NOTICE of it came
 * before it finished here. */
void im_answer_owed(struct im_comm *ic);
/* Serve other ranks' recovery requests on every offloaded communicator
 * (at most once every 10 ms, IM_SERVE_EVERY_US: each probe runs MPI's progress
 * engine). */
void im_serve_all(void);
/* The switch failed during op: agree with the other ranks and finish op
 * (from a rank that has its result, or redone through PMPI). */
int im_recover(struct im_op *op);
/* op completed here: keep what a rank that missed it needs (its result,
 * or this rank's input to redo it together). */
void im_keep_result(struct im_op *op);
/* Redo op through PMPI: on the shadow with the blocking call (every rank
 * of a recovery), or on the communicator with the nonblocking call and a
 * wait (a rank whose communicator went to MPI while op was under way,
 * meeting ranks that pass the call through). */
int im_redo(struct im_op *op, bool on_shadow);
/* Wait for a PMPI request while serving other ranks' recoveries. */
int im_pass_wait(int rc, MPI_Request *req);
/* Drain (serve until every rank arrives) and free the mapping of comm. */
void im_comm_release(MPI_Comm comm);
void im_comm_release_all(void);
/* An in-place input's copy for a recovery; NULL: out of memory. */
void *im_comm_scratch(struct im_comm *ic, size_t bytes);

/* im_coll.c: the operations */
/* Count a call in INCA_MPI_STATS (why: when it passed through). */
void im_count_call(enum im_coll k, bool offloaded, enum im_why why, size_t bytes, double t0);
/* A call that maps: set op up (input copies, packing) and run it: blocking
 * (request NULL) or nonblocking. */
int im_run(struct im_op *op, MPI_Request *request);
/* Does a call of kind k of bytes (INCA_MPI_STATS's size) pipeline? */
static inline bool im_pipelined(enum im_coll k, size_t bytes, const MPI_Request *request)
{
	/* not MPI_Ibcast: on the host ring a plan may move it to, the root
	 * finishes before the others start, and could run ahead of them by
	 * more than the results it keeps */
	return request && (k == IM_IALLREDUCE || k == IM_IALLGATHER || k == IM_IBARRIER) &&
	       bytes <= IM_PIPE_BYTES;
}
/* A type whose bytes are contiguous from its start (named, lb 0, no gaps). */
bool im_contiguous(MPI_Datatype type);
/* The result in the packed buffer goes to the application's buffer. */
void im_unpack(struct im_op *op);
/* Finish ic's nonblocking operations, if any, before another starts. */
int im_finish_active(struct im_comm *ic);
/* Make room for one more pipelined operation on ic (IM_PIPE_MAX, and
 * nothing in flight that runs alone). */
void im_pipe_room(struct im_comm *ic);
/* ic goes away without MPI_Comm_free (its attribute deleted while an
 * operation is unfinished): finish that operation with libinca alone (no
 * MPI calls, no recovery) and complete its request. */
void im_abandon_active(struct im_comm *ic);
void im_progress_init(void);
/* MPI's progress engine, for the application's other requests */
void im_poke(void);
/* Progress our requests among reqs (recovering failed ones); returns how
 * many of ours are not complete. */
int im_drive(int n, MPI_Request *reqs, unsigned budget_us);
/* Is any of reqs ours? */
bool im_any_ours(int n, const MPI_Request *reqs);
/* req is ours: it is freed when its operation completes (true). */
bool im_request_free(MPI_Request req);
void im_progress_fini(void);

/* maps of MPI types and ops to INCA's; -1 when there is none */
int im_dtype(MPI_Datatype t);
int im_op(MPI_Op o, int dtype);

#endif /* IM_PRIV_H */
