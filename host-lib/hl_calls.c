/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The collective calls of inca.h: their arguments checked (with a sentence
 * saying what is wrong), requests, and the blocking calls as the
 * nonblocking ones plus inca_wait.
 */
#include <stdlib.h>
#include <string.h>

#include "hl_priv.h"

struct inca_request {
	struct hl_coll *op;
	struct hl_hreq *hreq;     /* several ranks per host (hl_hier.c) */
};

/* What every collective needs: a communicator, a known dtype, an op that
 * applies to it, count > 0, a request pointer for the nonblocking form. */
static int check_common(struct inca_comm *c, const char *name, size_t count,
			inca_dtype_t dtype, inca_op_t op, inca_request_t **req)
{
	if (!c)
		return INCA_ERR_INVAL;
	if (!req)
		return hl_fail(c, INCA_ERR_INVAL, "i%s: req is NULL", name);
	*req = NULL;
	if (!agg_dtype_size((enum agg_dtype)dtype))
		return hl_fail(c, INCA_ERR_INVAL, "%s: unknown dtype %d", name, (int)dtype);
	if (agg_op_check((enum agg_dtype)dtype, (enum agg_op)op))
		return hl_fail(c, INCA_ERR_INVAL, "%s: need an op valid for the dtype (%s %s)",
			       name, agg_dtype_name((enum agg_dtype)dtype),
			       agg_op_name((enum agg_op)op));
	if (count == 0)
		return hl_fail(c, INCA_ERR_INVAL, "%s: count must be > 0", name);
	return 0;
}

static int check_root(struct inca_comm *c, const char *name, int root)
{
	if (root < 0 || root >= c->size)
		return hl_fail(c, INCA_ERR_INVAL, "%s: root %d is not a rank (0..%d)", name, root,
			       c->size - 1);
	return 0;
}

static int start(struct inca_comm *c, const struct hl_coll_args *a, inca_request_t **req)
{
	struct hl_coll *op;
	int rc;

	*req = calloc(1, sizeof(**req));
	if (!*req)
		return hl_fail(c, INCA_ERR_NOMEM, "%s: out of memory", hl_coll_name(a->coll));
	if (c->hier) {
		rc = hl_hier_start(c, a, &(*req)->hreq);
		if (rc) {
			free(*req);
			*req = NULL;
		}
		return rc;
	}
	rc = hl_coll_start(c, a, &op);
	if (rc) {
		free(*req);
		*req = NULL;
		return rc;
	}
	(*req)->op = op;
	return INCA_OK;
}

int inca_iallreduce(inca_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
		    inca_dtype_t dtype, inca_op_t op, inca_request_t **req)
{
	int rc = check_common(c, "allreduce", count, dtype, op, req);

	if (rc)
		return rc;
	if (!sendbuf || !recvbuf || recvbuf == INCA_IN_PLACE)
		return hl_fail(c, INCA_ERR_INVAL, "allreduce: need sendbuf (or INCA_IN_PLACE) "
			       "and recvbuf");
	return start(c, &(struct hl_coll_args){ .coll = AGG_COLL_ALLREDUCE, .sendbuf = sendbuf,
						.recvbuf = recvbuf, .count = count,
						.dtype = (enum agg_dtype)dtype,
						.op = (enum agg_op)op }, req);
}

int inca_ireduce(inca_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
		 inca_dtype_t dtype, inca_op_t op, int root, inca_request_t **req)
{
	int rc = check_common(c, "reduce", count, dtype, op, req);

	if (rc || (rc = check_root(c, "reduce", root)))
		return rc;
	if (c->rank == root && (!sendbuf || !recvbuf || recvbuf == INCA_IN_PLACE))
		return hl_fail(c, INCA_ERR_INVAL, "reduce: the root needs sendbuf (or "
			       "INCA_IN_PLACE) and recvbuf");
	if (c->rank != root && (!sendbuf || sendbuf == INCA_IN_PLACE))
		return hl_fail(c, INCA_ERR_INVAL, "reduce: rank %d is not the root (%d): it "
			       "needs a sendbuf (INCA_IN_PLACE is for the root)", c->rank, root);
	return start(c, &(struct hl_coll_args){ .coll = AGG_COLL_REDUCE, .sendbuf = sendbuf,
						.recvbuf = c->rank == root ? recvbuf : NULL,
						.count = count, .dtype = (enum agg_dtype)dtype,
						.op = (enum agg_op)op, .root = root }, req);
}

int inca_ireduce_scatter(inca_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount,
			 inca_dtype_t dtype, inca_op_t op, inca_request_t **req)
{
	int rc = check_common(c, "reduce_scatter", recvcount, dtype, op, req);

	if (rc)
		return rc;
	if (!sendbuf || !recvbuf || recvbuf == INCA_IN_PLACE)
		return hl_fail(c, INCA_ERR_INVAL, "reduce_scatter: need sendbuf (or "
			       "INCA_IN_PLACE) and recvbuf");
	return start(c, &(struct hl_coll_args){ .coll = AGG_COLL_REDUCE_SCATTER,
						.sendbuf = sendbuf, .recvbuf = recvbuf,
						.count = recvcount,
						.dtype = (enum agg_dtype)dtype,
						.op = (enum agg_op)op }, req);
}

int inca_iallgather(inca_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount,
		    inca_dtype_t dtype, inca_request_t **req)
{
	int rc = check_common(c, "allgather", sendcount, dtype, INCA_SUM, req);

	if (rc)
		return rc;
	if (!sendbuf || !recvbuf || recvbuf == INCA_IN_PLACE)
		return hl_fail(c, INCA_ERR_INVAL, "allgather: need sendbuf (or INCA_IN_PLACE) "
			       "and recvbuf");
	return start(c, &(struct hl_coll_args){ .coll = AGG_COLL_ALLGATHER, .sendbuf = sendbuf,
						.recvbuf = recvbuf, .count = sendcount,
						.dtype = (enum agg_dtype)dtype,
						.op = AGG_OP_SUM }, req);
}

int inca_ibcast(inca_comm_t *c, void *buf, size_t count, inca_dtype_t dtype, int root,
		inca_request_t **req)
{
	int rc = check_common(c, "bcast", count, dtype, INCA_SUM, req);

	if (rc || (rc = check_root(c, "bcast", root)))
		return rc;
	if (!buf || buf == INCA_IN_PLACE)
		return hl_fail(c, INCA_ERR_INVAL, "bcast: need a buffer");
	return start(c, &(struct hl_coll_args){ .coll = AGG_COLL_BCAST, .sendbuf = buf,
						.recvbuf = buf, .count = count,
						.dtype = (enum agg_dtype)dtype, .op = AGG_OP_SUM,
						.root = root }, req);
}

/* the request's progress and end, whichever layer holds it */
static int progress(inca_request_t *req, double budget_us)
{
	return req->hreq ? hl_hier_progress(req->hreq, budget_us) :
			   hl_coll_progress(req->op, budget_us);
}

static int finish(inca_request_t *req)
{
	int rc = req->hreq ? hl_hier_finish(req->hreq) : hl_coll_finish(req->op);

	free(req);
	return rc;
}

int inca_test(inca_request_t *req, int *done)
{
	return inca_test_timeout(req, 0, done);
}

int inca_test_timeout(inca_request_t *req, unsigned timeout_us, int *done)
{
	if (!req || !done)
		return INCA_ERR_INVAL;
	*done = progress(req, timeout_us);
	return *done ? finish(req) : INCA_OK;
}

int inca_wait(inca_request_t *req)
{
	if (!req)
		return INCA_ERR_INVAL;
	while (!progress(req, 1e6))
		;
	return finish(req);
}

int inca_allreduce(inca_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
		   inca_dtype_t dtype, inca_op_t op)
{
	inca_request_t *req;
	int rc = inca_iallreduce(c, sendbuf, recvbuf, count, dtype, op, &req);

	return rc ? rc : inca_wait(req);
}

int inca_reduce(inca_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
		inca_dtype_t dtype, inca_op_t op, int root)
{
	inca_request_t *req;
	int rc = inca_ireduce(c, sendbuf, recvbuf, count, dtype, op, root, &req);

	return rc ? rc : inca_wait(req);
}

int inca_reduce_scatter(inca_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount,
			inca_dtype_t dtype, inca_op_t op)
{
	inca_request_t *req;
	int rc = inca_ireduce_scatter(c, sendbuf, recvbuf, recvcount, dtype, op, &req);

	return rc ? rc : inca_wait(req);
}

int inca_allgather(inca_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount,
		   inca_dtype_t dtype)
{
	inca_request_t *req;
	int rc = inca_iallgather(c, sendbuf, recvbuf, sendcount, dtype, &req);

	return rc ? rc : inca_wait(req);
}

int inca_bcast(inca_comm_t *c, void *buf, size_t count, inca_dtype_t dtype, int root)
{
	inca_request_t *req;
	int rc = inca_ibcast(c, buf, count, dtype, root, &req);

	return rc ? rc : inca_wait(req);
}

int inca_barrier(inca_comm_t *c)
{
	int32_t one = 1;

	if (!c)
		return INCA_ERR_INVAL;
	int rc = inca_allreduce(c, INCA_IN_PLACE, &one, 1, INCA_INT32, INCA_SUM);
	if (rc == 0 && one != c->size)
		return hl_fail(c, INCA_ERR_PROTOCOL, "barrier: counted %d ranks, expected %d",
			       one, c->size);
	return rc;
}
