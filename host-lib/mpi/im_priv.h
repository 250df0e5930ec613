/* SPDX-License-Identifier: BSD-3-Clause */
/* libinca-mpi internals: the PMPI interposer's state, shared by its files. */
#ifndef IM_PRIV_H
#define IM_PRIV_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inca.h"

/* the collectives the interposer counts (INCA_MPI_STATS) */
enum im_coll {
	IM_ALLREDUCE,
	IM_IALLREDUCE,
	IM_BCAST,
	IM_BARRIER,
	IM_NCOLL,
};

struct im_counter {
	uint64_t offloaded, passed;
	uint64_t bytes_offloaded, bytes_passed;
	double us_offloaded, us_passed;
};

/* libinca's collectives of the communicators released so far, and those
 * of them that reduced inside the host first (several ranks per host) */
extern struct im_host_first {
	uint64_t calls, all;
} im_host_first;

/* Settings from the environment, read once at MPI_Init. */
struct im_config {
	bool enabled;             /* INCA_MPI=0 turns the interposer off */
	int verbose;              /* INCA_MPI_VERBOSE */
	bool stats;               /* INCA_MPI_STATS */
	size_t min_bytes;         /* INCA_MPI_MIN_BYTES: smaller calls pass through */
	size_t max_bytes;         /* INCA_MPI_MAX_BYTES: larger calls pass through (0: none) */
	unsigned create_timeout_ms; /* INCA_MPI_CREATE_TIMEOUT_MS */
	unsigned offload_after;   /* INCA_MPI_OFFLOAD_AFTER: a communicator is
				     offloaded at this offloadable call */
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
	void *last;               /* its result, for a rank that missed it */
	size_t last_len, last_cap;
	void *scratch;            /* in-place inputs kept for a recovery */
	size_t scratch_cap;
	struct im_op *active;     /* nonblocking operation in progress */
	struct im_comm *next;     /* all mapped communicators */
	char job[48];
	uint32_t seen[];          /* per rank: the latest operation it said it
				     could not finish (recovery) */
};

/* One offloaded operation: enough to redo it through PMPI if the switch
 * fails, and to hand its result to a rank that missed it. */
struct im_op {
	enum im_coll kind;
	struct im_comm *ic;
	uint32_t seq;
	const void *in;           /* original input (a copy if in place) */
	void *out;
	size_t count, bytes;
	MPI_Datatype type;
	MPI_Op op;
	int root;
	inca_request_t *req;      /* nonblocking: libinca's request */
	MPI_Request greq;         /* nonblocking: the generalized request */
	bool complete, failed;
	int inca_err;
	double start_us;
};

double im_now_us(void);
__attribute__((format(printf, 2, 3)))
void im_log(int level, const char *fmt, ...);

/* im_comm.c: the INCA communicator behind an MPI communicator, created
 * collectively on its offload_after-th offloadable call (counted here);
 * NULL: pass through (before that call too). */
struct im_comm *im_comm_get(MPI_Comm comm);
/* comm is offloaded (or failed, its ranks not yet agreed): its PMPI calls
 * must keep serving recoveries. Decides nothing. */
bool im_comm_offloaded(MPI_Comm comm);
/* Serve other ranks' recovery requests on every offloaded communicator
 * (at most once a millisecond: each probe runs MPI's progress engine). */
void im_serve_all(void);
/* The switch failed during op: agree with the other ranks and finish op
 * (from a rank that has its result, or redone through PMPI). */
int im_recover(struct im_op *op);
/* Keep op's result for a rank that may miss it. */
void im_keep_result(struct im_op *op);
/* Drain (serve until every rank arrives) and free the mapping of comm. */
void im_comm_release(MPI_Comm comm);
void im_comm_release_all(void);
/* An in-place input's copy for a recovery; NULL: out of memory. */
void *im_comm_scratch(struct im_comm *ic, size_t bytes);

/* im_coll.c: nonblocking operations */
/* Finish ic's nonblocking operation, if any, before another starts. */
int im_finish_active(struct im_comm *ic);
/* ic goes away without MPI_Comm_free (its attribute deleted while an
 * operation is unfinished): finish that operation with libinca alone (no
 * MPI calls, no recovery) and complete its request. */
void im_abandon_active(struct im_comm *ic);
void im_progress_init(void);
void im_progress_fini(void);

/* maps of MPI types and ops to INCA's; -1 when there is none */
int im_dtype(MPI_Datatype t);
int im_op(MPI_Op o, int dtype);

#endif /* IM_PRIV_H */
