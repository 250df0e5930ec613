/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The operations behind the intercepted collectives (im_calls.c): the
 * mapping of MPI types and ops to INCA's, one operation's life (started in
 * libinca, waited for or progressed as a generalized request, recovered
 * through MPI when the switch fails), MPI's progress engine with ours
 * inside it, and the MPI_Wait/MPI_Test families and MPI_Request_free for
 * the requests the interposer returns.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "im_priv.h"

#define UNSIGNED_FLAG 0x100    /* an unsigned type: only ops that wrap alike */

int im_dtype(MPI_Datatype t)
{
	if (t == MPI_FLOAT || t == MPI_REAL || t == MPI_REAL4)
		return INCA_FLOAT32;
	if (t == MPI_DOUBLE || t == MPI_DOUBLE_PRECISION || t == MPI_REAL8)
		return INCA_FLOAT64;
	if (t == MPI_INT || t == MPI_INT32_T || t == MPI_INTEGER || t == MPI_INTEGER4)
		return INCA_INT32;
	if (t == MPI_INT64_T || t == MPI_LONG_LONG || t == MPI_LONG_LONG_INT ||
	    t == MPI_INTEGER8 || (t == MPI_LONG && sizeof(long) == 8))
		return INCA_INT64;
	if (t == MPI_UNSIGNED || t == MPI_UINT32_T)
		return INCA_INT32 | UNSIGNED_FLAG;
	if (t == MPI_UINT64_T || t == MPI_UNSIGNED_LONG_LONG ||
	    (t == MPI_UNSIGNED_LONG && sizeof(long) == 8))
		return INCA_INT64 | UNSIGNED_FLAG;
	return -1;
}

int im_op(MPI_Op o, int dtype)
{
	bool integer = (dtype & 0xff) == INCA_INT32 || (dtype & 0xff) == INCA_INT64;
	bool uns = dtype & UNSIGNED_FLAG;

	/* two's complement sums, products and bitwise ops are the same bits
	 * for signed and unsigned; MIN and MAX are not */
	if (o == MPI_SUM)
		return INCA_SUM;
	if (o == MPI_PROD)
		return INCA_PROD;
	if (o == MPI_MIN && !uns)
		return INCA_MIN;
	if (o == MPI_MAX && !uns)
		return INCA_MAX;
	if (o == MPI_BAND && integer)
		return INCA_BAND;
	if (o == MPI_BOR && integer)
		return INCA_BOR;
	if (o == MPI_BXOR && integer)
		return INCA_BXOR;
	return -1;
}

bool im_contiguous(MPI_Datatype type)
{
	int ni, na, nd, combiner, size;
	MPI_Aint lb, extent;

	PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
	PMPI_Type_size(type, &size);
	PMPI_Type_get_extent(type, &lb, &extent);
	return combiner == MPI_COMBINER_NAMED && lb == 0 && extent == size;
}

void im_count_call(enum im_coll k, bool offloaded, enum im_why why, size_t bytes, double t0)
{
	struct im_counter *c = &im_count[k];
	double us = im_cfg.stats ? im_now_us() - t0 : 0;

	if (offloaded) {
		c->offloaded++;
		c->bytes_offloaded += bytes;
		c->us_offloaded += us;
	} else {
		c->passed++;
		c->bytes_passed += bytes;
		c->us_passed += us;
		c->why[why]++;
	}
}

/* ---- MPI's own progress, and ours inside it ---- */

static struct im_op **pending;     /* nonblocking operations not complete */
static unsigned npending, pending_cap;
static struct im_op *reap_list;    /* complete, freed by the application:
				      their request is freed outside MPI's
				      progress engine */
static int (*opal_register)(int (*)(void));
static int (*opal_unregister)(int (*)(void));
static void (*opal_progress_fn)(void);
static bool in_progress;

static struct im_op *pending_find(MPI_Request r)
{
	if (r == MPI_REQUEST_NULL)
		return NULL;
	for (unsigned i = 0; i < npending; i++)
		if (pending[i]->greq == r)
			return pending[i];
	return NULL;
}

static bool pending_add(struct im_op *op)
{
	if (npending == pending_cap) {
		unsigned cap = pending_cap ? 2 * pending_cap : 64;
		struct im_op **p = realloc(pending, cap * sizeof(*p));
		if (!p)
			return false;
		pending = p;
		pending_cap = cap;
	}
	pending[npending++] = op;
	return true;
}

static void pending_remove(struct im_op *op)
{
	for (unsigned i = 0; i < npending; i++)
		if (pending[i] == op) {
			pending[i] = pending[--npending];
			return;
		}
}

/* MPI's progress engine, for the application's other requests */
void im_poke(void)
{
	if (opal_progress_fn) {
		opal_progress_fn();
	} else {
		int flag;
		PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
	}
}

/* Requests the application freed before they completed: freed now. */
static void reap(void)
{
	while (reap_list && !in_progress) {
		struct im_op *op = reap_list;
		MPI_Request r = op->greq;   /* MPI writes the handle after greq_free */
		reap_list = op->reap_next;
		PMPI_Request_free(&r);                      /* greq_free frees op */
	}
}

void im_unpack(struct im_op *op)
{
	int pos = 0;
	MPI_Aint lb, extent;

	if (!op->pack || op->redone)
		return;           /* a redo wrote the application's buffer */
	if (im_blocking(op->kind) == IM_BCAST) {
		if (op->ic->rank != op->a.root)
			PMPI_Unpack(op->pack, (int)op->blk, &pos, op->a.recvbuf, op->a.rcount,
				    op->a.rtype, op->ic->comm);
		return;
	}
	PMPI_Type_get_extent(op->a.rtype, &lb, &extent);
	for (int r = 0; r < op->ic->size; r++) {
		pos = 0;
		PMPI_Unpack(op->pack + (size_t)r * op->pblk, (int)op->blk, &pos,
			    (char *)op->a.recvbuf + (MPI_Aint)r * op->a.rcount * extent,
			    op->a.rcount, op->a.rtype, op->ic->comm);
	}
}

/* op is finished (offloaded, or through MPI): its result in place, counted */
static void op_finish(struct im_op *op, bool offloaded)
{
	im_unpack(op);
	free(op->pack);
	op->pack = NULL;
	im_count_call(op->kind, offloaded, IM_WHY_FAILED, op->stat_bytes, op->start_us);
}

/* The last touch of a nonblocking op (the oldest in flight on its
 * communicator): once MPI knows the request is complete, a request the
 * application already freed is freed too (which frees op). */
static void op_complete(struct im_op *op)
{
	struct im_comm *ic = op->ic;

	op->complete = true;
	if (ic->head == op) {
		ic->head = op->next_active;
		if (!ic->head)
			ic->tail = NULL;
		ic->nactive--;
	}
	pending_remove(op);
	op_finish(op, !op->failed);
	free(op->own_copy);
	op->own_copy = NULL;
	op->saved_in = NULL;
	PMPI_Grequest_complete(op->greq);
	if (op->freed) {
		op->reap_next = reap_list;
		reap_list = op;
		reap();
	}
}

/* Progress op (not complete) and the operations in flight before it, in
 * start order, waiting at most budget_us for the network; recover a failed
 * one if allowed (outside the progress engine: recovery calls MPI).
 * Returns true when op completed, after which op must not be touched. */
static bool op_drive(struct im_op *op, unsigned budget_us, bool may_recover)
{
	struct im_comm *ic = op->ic;

	for (;;) {
		struct im_op *h = ic->head;
		int done = 0, rc;

		if (!h)
			return false;            /* not reached: op is in flight */
		if (ic->failed_synced && !h->failed) {
			/* the communicator went to MPI with h in flight: no rank
			 * completed the call before h (nobody had it), so no rank
			 * completed h; every rank redoes it on the communicator,
			 * whatever libinca says now (its request goes with the
			 * communicator) */
			h->failed = true;
			h->req = NULL;
		}
		if (h->req) {
			rc = inca_test_timeout(h->req, budget_us, &done);
			if (!done)
				return false;
			h->req = NULL;
			if (rc != INCA_OK) {
				h->failed = true;
				h->inca_err = rc;
			}
		}
		if (h->failed) {
			if (!may_recover)
				return false;
			im_recover(h);
		} else {
			im_keep_result(h);
		}
		bool was_op = h == op;
		op_complete(h);
		if (was_op)
			return true;
		budget_us = 0;
	}
}

/* registered with Open MPI's progress engine: runs in every blocking MPI
 * call, like Open MPI's own nonblocking collectives */
static int progress_cb(void)
{
	int events = 0;
	bool again = true;

	if (in_progress || !npending)
		return 0;
	in_progress = true;
	while (again) {
		again = false;
		for (unsigned i = 0; i < npending; i++) {
			struct im_op *op = pending[i];
			if (op->ic->head == op && op->req && op_drive(op, 0, false)) {
				events++;
				again = true;    /* the table changed */
				break;
			}
		}
	}
	in_progress = false;
	return events;
}

void im_progress_init(void)
{
	opal_register = (int (*)(int (*)(void)))dlsym(RTLD_DEFAULT, "opal_progress_register");
	opal_unregister = (int (*)(int (*)(void)))dlsym(RTLD_DEFAULT, "opal_progress_unregister");
	opal_progress_fn = (void (*)(void))dlsym(RTLD_DEFAULT, "opal_progress");
	if (opal_register && opal_register(progress_cb) != 0)
		opal_register = NULL;
	im_log(2, "nonblocking progress: %s", opal_register ? "inside Open MPI's progress engine"
		   : "in MPI_Wait/MPI_Test and intercepted calls only");
}

void im_progress_fini(void)
{
	if (opal_register && opal_unregister)
		opal_unregister(progress_cb);
	opal_register = NULL;
	reap();
	free(pending);
	pending = NULL;
	npending = pending_cap = 0;
}

int im_finish_active(struct im_comm *ic)
{
	/* completing the last one completes every one before it */
	while (ic->tail)
		if (!op_drive(ic->tail, 1000, true))
			im_poke();
	reap();
	return MPI_SUCCESS;
}

void im_pipe_room(struct im_comm *ic)
{
	while (ic->head && (ic->nactive >= IM_PIPE_MAX || !ic->head->pipelined))
		if (!op_drive(ic->head, 1000, true))
			im_poke();
	reap();
}

void im_abandon_active(struct im_comm *ic)
{
	struct im_op *op;

	while ((op = ic->head)) {
		if (op->req) {
			int rc = inca_wait(op->req);
			op->req = NULL;
			if (rc != INCA_OK)
				op->failed = true;
		}
		if (op->failed)
			im_log(0, "rank %d: a communicator was released with operation %u "
			       "unfinished and failed: its result is undefined", ic->rank, op->seq);
		op_complete(op);
	}
}

/* ---- generalized request callbacks ---- */

static int greq_query(void *state, MPI_Status *st)
{
	(void)state;
	PMPI_Status_set_elements(st, MPI_BYTE, 0);
	PMPI_Status_set_cancelled(st, 0);
	st->MPI_SOURCE = MPI_UNDEFINED;
	st->MPI_TAG = MPI_UNDEFINED;
	return MPI_SUCCESS;
}

static int greq_free(void *state)
{
	free(state);
	return MPI_SUCCESS;
}

static int greq_cancel(void *state, int complete)
{
	(void)state;
	(void)complete;
	return MPI_SUCCESS;    /* a collective cannot be cancelled */
}

/* ---- one operation ---- */

int im_pass_wait(int rc, MPI_Request *req)
{
	int done = 0;

	if (rc != MPI_SUCCESS)
		return rc;
	while (!done) {
		rc = PMPI_Test(req, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return rc;
		if (!done)
			im_serve_all();
	}
	return MPI_SUCCESS;
}

int im_redo(struct im_op *op, bool on_shadow)
{
	struct im_comm *ic = op->ic;
	struct im_args a = op->a;
	MPI_Comm c = on_shadow ? ic->shadow : ic->comm;
	MPI_Request r;
	int rc, *counts = NULL;

	/* in place: the input's copy, as a separate input */
	if (op->saved_in)
		a.sendbuf = op->saved_in;
	op->redone = true;
	switch (im_blocking(op->kind)) {
	case IM_ALLREDUCE:
		return on_shadow ? PMPI_Allreduce(a.sendbuf, a.recvbuf, a.scount, a.stype, a.op, c)
				 : im_pass_wait(PMPI_Iallreduce(a.sendbuf, a.recvbuf, a.scount,
								a.stype, a.op, c, &r), &r);
	case IM_REDUCE:
		return on_shadow ? PMPI_Reduce(a.sendbuf, a.recvbuf, a.scount, a.stype, a.op, a.root, c)
				 : im_pass_wait(PMPI_Ireduce(a.sendbuf, a.recvbuf, a.scount, a.stype,
							     a.op, a.root, c, &r), &r);
	case IM_REDUCE_SCATTER:
		if (!on_shadow) {
			/* the ranks that pass it through call MPI_Reduce_scatter */
			counts = malloc(sizeof(int) * (size_t)ic->size);
			if (!counts)
				return MPI_ERR_NO_MEM;
			for (int i = 0; i < ic->size; i++)
				counts[i] = a.rcount;
			rc = im_pass_wait(PMPI_Ireduce_scatter(a.sendbuf, a.recvbuf, counts, a.rtype,
							       a.op, c, &r), &r);
			free(counts);
			return rc;
		}
		/* on the shadow every rank redoes it as a block */
		__attribute__((fallthrough));
	case IM_REDUCE_SCATTER_BLOCK:
		return on_shadow ? PMPI_Reduce_scatter_block(a.sendbuf, a.recvbuf, a.rcount, a.rtype,
							     a.op, c)
				 : im_pass_wait(PMPI_Ireduce_scatter_block(a.sendbuf, a.recvbuf,
									   a.rcount, a.rtype, a.op,
									   c, &r), &r);
	case IM_ALLGATHER:
		return on_shadow ? PMPI_Allgather(a.sendbuf, a.scount, a.stype, a.recvbuf, a.rcount,
						  a.rtype, c)
				 : im_pass_wait(PMPI_Iallgather(a.sendbuf, a.scount, a.stype,
								a.recvbuf, a.rcount, a.rtype, c,
								&r), &r);
	case IM_BCAST:
		return on_shadow ? PMPI_Bcast(a.recvbuf, a.rcount, a.rtype, a.root, c)
				 : im_pass_wait(PMPI_Ibcast(a.recvbuf, a.rcount, a.rtype, a.root, c,
							    &r), &r);
	case IM_BARRIER:
	default:
		return on_shadow ? PMPI_Barrier(c) : im_pass_wait(PMPI_Ibarrier(c, &r), &r);
	}
}

/* Start op in libinca (nonblocking; the blocking calls wait for it). */
static int inca_start(struct im_op *op)
{
	inca_comm_t *c = op->ic->inca;
	const void *in = op->in_place ? INCA_IN_PLACE : op->in;
	inca_dtype_t dt = (inca_dtype_t)op->dt;
	inca_op_t io = (inca_op_t)op->io;

	switch (im_blocking(op->kind)) {
	case IM_ALLREDUCE:
		return inca_iallreduce(c, in, op->out, op->count, dt, io, &op->req);
	case IM_REDUCE:
		return inca_ireduce(c, in, op->out, op->count, dt, io, op->a.root, &op->req);
	case IM_REDUCE_SCATTER:
	case IM_REDUCE_SCATTER_BLOCK:
		return inca_ireduce_scatter(c, in, op->out, op->count, dt, io, &op->req);
	case IM_ALLGATHER:
		return inca_iallgather(c, in, op->out, op->count, dt, &op->req);
	case IM_BCAST:
		return inca_ibcast(c, op->out, op->count, dt, op->a.root, &op->req);
	case IM_BARRIER:
	default:
		op->word[0] = 1;
		return inca_iallreduce(c, &op->word[0], &op->word[1], 1, INCA_INT32, INCA_SUM,
				       &op->req);
	}
}

int im_run(struct im_op *op, MPI_Request *request)
{
	struct im_comm *ic = op->ic;
	int rc;

	op->seq = ++ic->seq;
	if (op->in_place && op->in_bytes) {
		/* the results overwrite the input: keep it for a recovery (a
		 * copy of its own when others may be in flight with it) */
		bool own = im_pipelined(op->kind, op->stat_bytes, request);
		void *copy = own ? malloc(op->in_bytes) : im_comm_scratch(ic, op->in_bytes);
		if (!copy) {
			free(op->pack);
			return MPI_ERR_NO_MEM;
		}
		memcpy(copy, op->a.recvbuf, op->in_bytes);
		op->saved_in = copy;
		op->own_copy = own ? copy : NULL;
	}
	if (!request) {
		if (ic->state == IM_OFFLOADED) {
			rc = inca_start(op);
			if (rc == INCA_OK) {
				rc = inca_wait(op->req);
				op->req = NULL;
			}
			if (rc == INCA_OK) {
				im_keep_result(op);
				op_finish(op, true);
				return MPI_SUCCESS;
			}
			op->inca_err = rc;
		}
		rc = im_recover(op);
		op_finish(op, false);
		return rc;
	}
	struct im_op *h = malloc(sizeof(*h));
	if (!h || !pending_add(h)) {
		free(h);
		free(op->pack);
		free(op->own_copy);
		return MPI_ERR_NO_MEM;
	}
	*h = *op;
	h->pipelined = im_pipelined(op->kind, op->stat_bytes, request);
	rc = PMPI_Grequest_start(greq_query, greq_free, greq_cancel, h, &h->greq);
	if (rc != MPI_SUCCESS) {
		pending_remove(h);
		free(h->pack);
		free(h->own_copy);
		free(h);
		return rc;
	}
	*request = h->greq;
	h->next_active = NULL;
	if (ic->tail)
		ic->tail->next_active = h;
	else
		ic->head = h;
	ic->tail = h;
	ic->nactive++;
	if (ic->state == IM_OFFLOADED) {
		rc = inca_start(h);
		if (rc == INCA_OK)
			op_drive(h, 0, false);          /* the first window goes out now */
		else
			h->inca_err = rc, h->failed = true;
	} else {
		h->failed = true;                       /* recovers in MPI_Wait/MPI_Test */
	}
	return MPI_SUCCESS;
}

/* ---- MPI_Wait / MPI_Test families: progress and recover ours ---- */

int im_drive(int n, MPI_Request *reqs, unsigned budget_us)
{
	int open = 0;

	for (int i = 0; i < n; i++) {
		struct im_op *op = pending_find(reqs[i]);
		if (!op)
			continue;
		open += !op_drive(op, budget_us, true);
	}
	reap();
	return open;
}

bool im_any_ours(int n, const MPI_Request *reqs)
{
	for (int i = 0; i < n && npending; i++)
		if (pending_find(reqs[i]))
			return true;
	return false;
}

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
	if (req && im_any_ours(1, req))
		while (im_drive(1, req, 1000) > 0)
			im_poke();
	return PMPI_Wait(req, st);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
	if (req && im_any_ours(1, req))
		im_drive(1, req, 0);
	return PMPI_Test(req, flag, st);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
	if (reqs && im_any_ours(n, reqs))
		while (im_drive(n, reqs, 1000) > 0)
			im_poke();
	return PMPI_Waitall(n, reqs, sts);
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
	if (reqs && im_any_ours(n, reqs))
		im_drive(n, reqs, 0);
	return PMPI_Testall(n, reqs, flag, sts);
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st)
{
	int flag = 0, rc;

	if (!reqs || !im_any_ours(n, reqs))
		return PMPI_Waitany(n, reqs, index, st);
	for (;;) {
		im_drive(n, reqs, 200);
		rc = PMPI_Testany(n, reqs, index, &flag, st);
		if (rc != MPI_SUCCESS || flag)
			return rc;
	}
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
	if (reqs && im_any_ours(n, reqs))
		im_drive(n, reqs, 0);
	return PMPI_Testany(n, reqs, index, flag, st);
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
	int rc;

	if (!reqs || !im_any_ours(n, reqs))
		return PMPI_Waitsome(n, reqs, outcount, indices, sts);
	for (;;) {
		im_drive(n, reqs, 200);
		rc = PMPI_Testsome(n, reqs, outcount, indices, sts);
		if (rc != MPI_SUCCESS || *outcount != 0)
			return rc;
	}
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
	if (reqs && im_any_ours(n, reqs))
		im_drive(n, reqs, 0);
	return PMPI_Testsome(n, reqs, outcount, indices, sts);
}

/* Looking without completing: ours progress too (where MPI has no hook
 * of ours, MPICH, a program polling so would otherwise wait for ever) */
int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *st)
{
	if (im_any_ours(1, &req))
		im_drive(1, &req, 0);
	return PMPI_Request_get_status(req, flag, st);
}

/* Freeing a request of ours before it completes: the operation goes on
 * (progressed by MPI's engine, finished before the next call on its
 * communicator), and its request is freed when it completes. */
bool im_request_free(MPI_Request req)
{
	struct im_op *op = npending ? pending_find(req) : NULL;

	if (op)
		op->freed = true;
	return op != NULL;
}

int MPI_Request_free(MPI_Request *req)
{
	if (!req || !im_request_free(*req))
		return PMPI_Request_free(req);
	*req = MPI_REQUEST_NULL;
	return MPI_SUCCESS;
}
