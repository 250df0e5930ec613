/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The intercepted collectives: MPI_Allreduce, MPI_Iallreduce, MPI_Bcast
 * and MPI_Barrier go to libinca when the communicator is offloaded and the
 * call maps (predefined type and op, size within the thresholds); anything
 * else goes to PMPI unchanged. Nonblocking operations are generalized
 * requests that progress inside Open MPI's progress engine (and in the
 * intercepted MPI_Wait/MPI_Test families, which also run a recovery).
 *
 * Over 500 lines (about 600) on purpose: each intercepted call is short,
 * and they share the mapping of MPI types and ops and the request type.
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

static bool size_ok(size_t bytes)
{
	return bytes >= im_cfg.min_bytes && (!im_cfg.max_bytes || bytes <= im_cfg.max_bytes);
}

static void count_call(enum im_coll k, bool offloaded, size_t bytes, double t0)
{
	struct im_counter *c = &im_count[k];
	double us = im_now_us() - t0;

	if (offloaded) {
		c->offloaded++;
		c->bytes_offloaded += bytes;
		c->us_offloaded += us;
	} else {
		c->passed++;
		c->bytes_passed += bytes;
		c->us_passed += us;
	}
}

/* ---- MPI's own progress, and ours inside it ---- */

static struct im_op *pending[256];
static unsigned npending;
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

static void pending_remove(struct im_op *op)
{
	for (unsigned i = 0; i < npending; i++)
		if (pending[i] == op) {
			pending[i] = pending[--npending];
			return;
		}
}

/* MPI's progress engine, for the application's other requests */
static void mpi_poke(void)
{
	if (opal_progress_fn) {
		opal_progress_fn();
	} else {
		int flag;
		PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
	}
}

/* The last touch of op: once MPI knows the request is complete, a request
 * the application already freed (MPI_Request_free) frees op too. */
static void op_complete(struct im_op *op)
{
	op->complete = true;
	if (op->ic->active == op)
		op->ic->active = NULL;
	pending_remove(op);
	count_call(op->kind, !op->failed, op->bytes, op->start_us);
	PMPI_Grequest_complete(op->greq);
}

/* Progress op (not complete) for at most budget_us; recover it if it
 * failed and may (outside the progress engine: recovery calls MPI).
 * Returns true when op completed, after which op must not be touched. */
static bool op_drive(struct im_op *op, unsigned budget_us, bool may_recover)
{
	int done = 0, rc;

	if (op->req) {
		rc = inca_test_timeout(op->req, budget_us, &done);
		if (done) {
			op->req = NULL;
			if (rc == INCA_OK) {
				im_keep_result(op);
				op_complete(op);
				return true;
			}
			op->failed = true;
			op->inca_err = rc;
		}
	}
	if (op->failed && may_recover) {
		im_recover(op);
		op_complete(op);
		return true;
	}
	return false;
}

/* registered with Open MPI's progress engine: runs in every blocking MPI
 * call, like Open MPI's own nonblocking collectives */
static int progress_cb(void)
{
	int events = 0;

	if (in_progress || !npending)
		return 0;
	in_progress = true;
	for (unsigned i = 0; i < npending; i++) {
		struct im_op *op = pending[i];
		if (op->req && op_drive(op, 0, false)) {
			events++;
			i--;      /* op_complete moved another op into slot i */
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
}

int im_finish_active(struct im_comm *ic)
{
	/* completing the active operation clears ic->active */
	while (ic->active)
		if (!op_drive(ic->active, 1000, true))
			mpi_poke();
	return MPI_SUCCESS;
}

void im_abandon_active(struct im_comm *ic)
{
	struct im_op *op = ic->active;

	if (!op)
		return;
	if (op->req) {
		int rc = inca_wait(op->req);
		op->req = NULL;
		if (rc != INCA_OK)
			op->failed = true;
	}
	if (op->failed)
		im_log(0, "rank %d: a communicator was released with operation %u unfinished "
		       "and failed: its result is undefined", ic->rank, op->seq);
	op_complete(op);
}

/* ic for an offloadable call on comm, its previous operation finished
 * first (finishing it may recover it and move the communicator to MPI, and
 * every rank must see the same state); NULL: pass through. */
static struct im_comm *comm_ready(MPI_Comm comm)
{
	struct im_comm *ic = im_comm_get(comm);

	if (!ic)
		return NULL;
	im_finish_active(ic);
	return ic->failed_synced ? NULL : ic;
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

/* ---- passing through on an offloaded communicator ---- */

/* Wait for a PMPI request while serving other ranks' recoveries. */
static int pass_wait(int rc, MPI_Request *req)
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

/* ---- MPI_Allreduce, MPI_Iallreduce ---- */

static bool allreduce_maps(int count, MPI_Datatype type, MPI_Op op, int *dt, int *io,
			   size_t *bytes)
{
	int tsize = 0;

	*dt = im_dtype(type);
	*io = *dt >= 0 ? im_op(op, *dt) : -1;
	PMPI_Type_size(type, &tsize);
	*bytes = count > 0 ? (size_t)count * (size_t)tsize : 0;
	*dt &= 0xff;
	return *io >= 0 && count > 0 && size_ok(*bytes);
}

static int op_setup(struct im_op *op, struct im_comm *ic, enum im_coll kind,
		    const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
		    MPI_Op mop, size_t bytes, bool in_place)
{
	*op = (struct im_op){ .kind = kind, .ic = ic, .seq = ++ic->seq, .out = recvbuf,
			      .count = (size_t)count, .bytes = bytes, .type = type,
			      .op = mop, .start_us = im_now_us() };
	op->in = sendbuf;
	if (in_place) {
		/* the results overwrite the input: keep it for a recovery */
		void *copy = im_comm_scratch(ic, bytes);
		if (!copy)
			return MPI_ERR_NO_MEM;
		memcpy(copy, recvbuf, bytes);
		op->in = copy;
	}
	return MPI_SUCCESS;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
		  MPI_Op mop, MPI_Comm comm)
{
	double t0 = im_now_us();
	struct im_comm *ic;
	struct im_op op;
	size_t bytes;
	int dt, io, rc;

	if (!im_cfg.enabled)
		return PMPI_Allreduce(sendbuf, recvbuf, count, type, mop, comm);
	im_serve_all();
	if (!allreduce_maps(count, type, mop, &dt, &io, &bytes) || !(ic = comm_ready(comm))) {
		MPI_Request req;
		rc = im_comm_offloaded(comm) ? pass_wait(PMPI_Iallreduce(sendbuf, recvbuf, count, type, mop,
							  comm, &req), &req)
				  : PMPI_Allreduce(sendbuf, recvbuf, count, type, mop, comm);
		count_call(IM_ALLREDUCE, false, bytes, t0);
		return rc;
	}
	rc = op_setup(&op, ic, IM_ALLREDUCE, sendbuf, recvbuf, count, type, mop, bytes,
		      sendbuf == MPI_IN_PLACE);
	if (rc)
		return rc;
	if (ic->state == IM_OFFLOADED) {
		rc = inca_allreduce(ic->inca, sendbuf == MPI_IN_PLACE ? INCA_IN_PLACE : sendbuf,
				    recvbuf, (size_t)count, (inca_dtype_t)dt, (inca_op_t)io);
		if (rc == INCA_OK) {
			im_keep_result(&op);
			count_call(IM_ALLREDUCE, true, bytes, t0);
			return MPI_SUCCESS;
		}
		op.inca_err = rc;
	}
	rc = im_recover(&op);
	count_call(IM_ALLREDUCE, false, bytes, t0);
	return rc;
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
		   MPI_Op mop, MPI_Comm comm, MPI_Request *request)
{
	double t0 = im_now_us();
	struct im_comm *ic;
	struct im_op *op;
	size_t bytes;
	int dt, io, rc;

	if (!im_cfg.enabled)
		return PMPI_Iallreduce(sendbuf, recvbuf, count, type, mop, comm, request);
	im_serve_all();
	/* comm_ready before the table's room: the ranks must count the same
	 * offloadable calls (the decision is collective), and the room is
	 * this rank's own */
	if (!allreduce_maps(count, type, mop, &dt, &io, &bytes) || !(ic = comm_ready(comm)) ||
	    npending == sizeof(pending) / sizeof(pending[0])) {
		rc = PMPI_Iallreduce(sendbuf, recvbuf, count, type, mop, comm, request);
		count_call(IM_IALLREDUCE, false, bytes, t0);
		return rc;
	}
	/* comm_ready finished the previous one: libinca runs one operation
	 * per communicator */
	op = malloc(sizeof(*op));
	if (!op)
		return MPI_ERR_NO_MEM;
	rc = op_setup(op, ic, IM_IALLREDUCE, sendbuf, recvbuf, count, type, mop, bytes,
		      sendbuf == MPI_IN_PLACE);
	if (rc == MPI_SUCCESS)
		rc = PMPI_Grequest_start(greq_query, greq_free, greq_cancel, op, &op->greq);
	if (rc != MPI_SUCCESS) {
		free(op);
		return rc;
	}
	*request = op->greq;
	ic->active = op;
	pending[npending++] = op;
	if (ic->state == IM_OFFLOADED) {
		rc = inca_iallreduce(ic->inca, sendbuf == MPI_IN_PLACE ? INCA_IN_PLACE : sendbuf,
				     recvbuf, (size_t)count, (inca_dtype_t)dt, (inca_op_t)io,
				     &op->req);
		if (rc == INCA_OK)
			op_drive(op, 0, false);        /* the first window goes out now */
		else
			op->inca_err = rc, op->failed = true;
	} else {
		op->failed = true;                    /* recovers in MPI_Wait/MPI_Test */
	}
	return MPI_SUCCESS;
}

/* ---- MPI_Bcast, MPI_Barrier ---- */

/* A named type whose bytes are contiguous, or -1 (then bytes are packed). */
static bool contiguous(MPI_Datatype type)
{
	int ni, na, nd, combiner, size;
	MPI_Aint lb, extent;

	PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
	PMPI_Type_size(type, &size);
	PMPI_Type_get_extent(type, &lb, &extent);
	return combiner == MPI_COMBINER_NAMED && lb == 0 && extent == size;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
	double t0 = im_now_us();
	struct im_comm *ic;
	struct im_op op;
	int tsize = 0, rc, pos = 0;
	size_t bytes;
	uint8_t *cbuf;

	if (!im_cfg.enabled)
		return PMPI_Bcast(buf, count, type, root, comm);
	im_serve_all();
	PMPI_Type_size(type, &tsize);
	bytes = count > 0 ? (size_t)count * (size_t)tsize : 0;
	/* the decision rests on the byte count alone: the type signatures
	 * of the root and the others may differ */
	if (!bytes || !size_ok(bytes) || bytes > INT32_MAX || root < 0 ||
	    !(ic = comm_ready(comm)) || root >= ic->size) {
		MPI_Request req;
		rc = im_comm_offloaded(comm) ? pass_wait(PMPI_Ibcast(buf, count, type, root, comm, &req), &req)
				  : PMPI_Bcast(buf, count, type, root, comm);
		count_call(IM_BCAST, false, bytes, t0);
		return rc;
	}
	bool direct = contiguous(type) && bytes % 4 == 0 && ((uintptr_t)buf & 3) == 0;
	cbuf = direct ? buf : malloc((bytes + 3) & ~(size_t)3);
	if (!cbuf)
		return MPI_ERR_NO_MEM;
	if (!direct && ic->rank == root)
		PMPI_Pack(buf, count, type, cbuf, (int)bytes, &pos, comm);
	rc = op_setup(&op, ic, IM_BCAST, cbuf, cbuf, (int)bytes, MPI_BYTE, MPI_OP_NULL, bytes,
		      false);
	op.root = root;
	bool offloaded = rc == MPI_SUCCESS && ic->state == IM_OFFLOADED;
	if (offloaded) {
		/* padded to whole words: the switch broadcasts int32 words */
		rc = inca_bcast(ic->inca, cbuf, (bytes + 3) / 4, INCA_INT32, root);
		if (rc == INCA_OK) {
			im_keep_result(&op);
		} else {
			op.inca_err = rc;
			offloaded = false;
			rc = im_recover(&op);
		}
	} else if (rc == MPI_SUCCESS) {
		rc = im_recover(&op);
	}
	if (!direct) {
		pos = 0;
		if (rc == MPI_SUCCESS && ic->rank != root)
			PMPI_Unpack(cbuf, (int)bytes, &pos, buf, count, type, comm);
		free(cbuf);
	}
	count_call(IM_BCAST, offloaded, bytes, t0);
	return rc;
}

int MPI_Barrier(MPI_Comm comm)
{
	double t0 = im_now_us();
	struct im_comm *ic;
	struct im_op op;
	int rc;

	if (!im_cfg.enabled)
		return PMPI_Barrier(comm);
	im_serve_all();
	if (!(ic = comm_ready(comm))) {
		MPI_Request req;
		rc = im_comm_offloaded(comm) ? pass_wait(PMPI_Ibarrier(comm, &req), &req) : PMPI_Barrier(comm);
		count_call(IM_BARRIER, false, 0, t0);
		return rc;
	}
	op = (struct im_op){ .kind = IM_BARRIER, .ic = ic, .seq = ++ic->seq, .type = MPI_BYTE,
			     .op = MPI_OP_NULL, .start_us = t0 };
	if (ic->state == IM_OFFLOADED) {
		rc = inca_barrier(ic->inca);
		if (rc == INCA_OK) {
			im_keep_result(&op);
			count_call(IM_BARRIER, true, 0, t0);
			return MPI_SUCCESS;
		}
		op.inca_err = rc;
	}
	rc = im_recover(&op);
	count_call(IM_BARRIER, false, 0, t0);
	return rc;
}

/* ---- MPI_Wait / MPI_Test families: progress and recover ours ---- */

/* Progress our requests among reqs; returns how many are not complete. */
static int drive(int n, MPI_Request *reqs, unsigned budget_us)
{
	int open = 0;

	for (int i = 0; i < n; i++) {
		struct im_op *op = pending_find(reqs[i]);
		if (!op)
			continue;
		open += !op_drive(op, budget_us, true);
	}
	return open;
}

static bool any_ours(int n, const MPI_Request *reqs)
{
	for (int i = 0; i < n && npending; i++)
		if (pending_find(reqs[i]))
			return true;
	return false;
}

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
	if (req && any_ours(1, req))
		while (drive(1, req, 1000) > 0)
			mpi_poke();
	return PMPI_Wait(req, st);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
	if (req && any_ours(1, req))
		drive(1, req, 0);
	return PMPI_Test(req, flag, st);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
	if (reqs && any_ours(n, reqs))
		while (drive(n, reqs, 1000) > 0)
			mpi_poke();
	return PMPI_Waitall(n, reqs, sts);
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
	if (reqs && any_ours(n, reqs))
		drive(n, reqs, 0);
	return PMPI_Testall(n, reqs, flag, sts);
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st)
{
	int flag = 0, rc;

	if (!reqs || !any_ours(n, reqs))
		return PMPI_Waitany(n, reqs, index, st);
	for (;;) {
		drive(n, reqs, 200);
		rc = PMPI_Testany(n, reqs, index, &flag, st);
		if (rc != MPI_SUCCESS || flag)
			return rc;
	}
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
	if (reqs && any_ours(n, reqs))
		drive(n, reqs, 0);
	return PMPI_Testany(n, reqs, index, flag, st);
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
	int rc;

	if (!reqs || !any_ours(n, reqs))
		return PMPI_Waitsome(n, reqs, outcount, indices, sts);
	for (;;) {
		drive(n, reqs, 200);
		rc = PMPI_Testsome(n, reqs, outcount, indices, sts);
		if (rc != MPI_SUCCESS || *outcount != 0)
			return rc;
	}
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
	if (reqs && any_ours(n, reqs))
		drive(n, reqs, 0);
	return PMPI_Testsome(n, reqs, outcount, indices, sts);
}
