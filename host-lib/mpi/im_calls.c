/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The intercepted collectives. Each goes to libinca when its communicator
 * is offloaded and the call maps (a predefined type and op INCA has, a
 * size within the thresholds, equal counts and types where MPI allows
 * them to differ); anything else goes to PMPI unchanged. The decision
 * rests only on what every rank passes alike (counts, types, ops, root),
 * so every rank decides the same way. A call that passes through on an
 * offloaded communicator waits nonblocking, serving other ranks'
 * recoveries (im_pass_wait), with MPI's nonblocking call, so that it
 * matches a rank redoing the same call after a switch failure; once the
 * communicator is settled (im_comm_pass) it takes MPI's blocking call.
 */
#include <stdlib.h>
#include <string.h>

#include "im_priv.h"

static bool size_ok(size_t bytes)
{
	return bytes >= im_cfg.min_bytes && (!im_cfg.max_bytes || bytes <= im_cfg.max_bytes);
}

/* ic for an offloadable call on comm, the operations in flight finished
 * first (all of them, or for a pipelined call enough to make room:
 * finishing them may recover them and move the communicator to MPI, and
 * every rank must see the same state); NULL: pass through. */
static struct im_comm *comm_ready(MPI_Comm comm, bool pipe)
{
	struct im_comm *ic = im_comm_get(comm);

	if (!ic)
		return NULL;
	/* once the switch failed (here, or another rank said so), everything
	 * in flight is recovered first, so that every rank meets the call in
	 * the same state */
	if (pipe && ic->state == IM_OFFLOADED)
		im_pipe_room(ic);
	else
		im_finish_active(ic);
	im_answer_owed(ic);
	return ic->failed_synced ? NULL : ic;
}

/* A reduction of count elements of type with mop (mult: the vector is
 * mult times count, for the size thresholds): IM_NWHY when it maps. */
static enum im_why map_reduction(int count, MPI_Datatype type, MPI_Op mop, int mult,
				 int *dt, int *io, size_t *bytes)
{
	int tsize = 0, d = im_dtype(type);

	PMPI_Type_size(type, &tsize);
	*bytes = count > 0 ? (size_t)count * (size_t)tsize * (size_t)mult : 0;
	if (d < 0)
		return IM_WHY_TYPE;
	*io = im_op(mop, d);
	if (*io < 0)
		return IM_WHY_OP;
	*dt = d & 0xff;
	return count > 0 && size_ok(*bytes) ? IM_NWHY : IM_WHY_SIZE;
}

static int comm_size(MPI_Comm comm)
{
	int n = 0;

	if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &n) != MPI_SUCCESS)
		return 0;
	return n;
}

/* why, or IM_WHY_SHAPE for a call that maps but whose root is not a rank
 * of comm (the same on every rank) */
static enum im_why check_root(enum im_why why, int root, MPI_Comm comm)
{
	return why == IM_NWHY && (root < 0 || root >= comm_size(comm)) ? IM_WHY_SHAPE : why;
}

/* The communicator, for a call that maps; sets *why when it passes.
 * pipe: the call pipelines (im_pipelined). */
static struct im_comm *offload_comm(MPI_Comm comm, enum im_why *why, bool pipe)
{
	struct im_comm *ic;

	if (*why != IM_NWHY)
		return NULL;
	ic = comm_ready(comm, pipe);
	if (!ic)
		*why = IM_WHY_COMM;
	return ic;
}

/* Pass a blocking call through: nonblocking (its request in pass_req)
 * with recoveries served on a communicator that was offloaded and may
 * still need this rank for one, else MPI's blocking call (im_comm_pass).
 * sync: the call's result needs every rank's input, so every rank entered
 * it (it settles an offloaded communicator). */
#define PASS(kind, why, bytes, t0, comm, sync, blocking, nonblocking)                 \
	do {                                                                          \
		MPI_Request pass_req;                                                 \
		struct im_comm *pass_ic;                                              \
		enum im_pass how_ = im_comm_pass(comm, &pass_ic);                     \
		int rc_ = how_ == IM_PASS_SERVE ? im_pass_wait(nonblocking, &pass_req) \
						: (blocking);                         \
		im_pass_forms.served += how_ == IM_PASS_SERVE;                        \
		im_pass_forms.settled += how_ == IM_PASS_SETTLED;                     \
		if (rc_ == MPI_SUCCESS && pass_ic && (sync))                          \
			im_comm_settled(pass_ic);                                     \
		im_count_call(kind, false, why, bytes, t0);                           \
		return rc_;                                                           \
	} while (0)

/* Pass a nonblocking call through. */
#define PASS_I(kind, why, bytes, t0, comm, call)                                      \
	do {                                                                          \
		im_comm_pass(comm, NULL);                                             \
		int rc_ = (call);                                                     \
		im_count_call(kind, false, why, bytes, t0);                           \
		return rc_;                                                           \
	} while (0)

/* ---- all-reduce, reduce ---- */

static int allreduce(enum im_coll kind, const void *sendbuf, void *recvbuf, int count,
		     MPI_Datatype type, MPI_Op mop, MPI_Request *request,
		     struct im_comm *ic, int dt, int io, size_t bytes, double t0)
{
	bool in_place = sendbuf == MPI_IN_PLACE;
	struct im_op op = {
		.kind = kind, .ic = ic, .start_us = t0,
		.a = { .sendbuf = sendbuf, .recvbuf = recvbuf, .scount = count, .stype = type,
		       .op = mop },
		.in = sendbuf, .out = recvbuf, .count = (size_t)count, .dt = dt, .io = io,
		.bytes = bytes, .in_bytes = bytes, .stat_bytes = bytes, .share = true,
		.in_place = in_place,
	};

	return im_run(&op, request);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
		  MPI_Op mop, MPI_Comm comm)
{
	double t0 = im_t0();
	struct im_comm *ic;
	size_t bytes;
	int dt, io;
	enum im_why why;

	if (!im_cfg.enabled)
		return PMPI_Allreduce(sendbuf, recvbuf, count, type, mop, comm);
	im_serve_all();
	why = map_reduction(count, type, mop, 1, &dt, &io, &bytes);
	if (!(ic = offload_comm(comm, &why, false)))
		PASS(IM_ALLREDUCE, why, bytes, t0, comm, bytes > 0,
		     PMPI_Allreduce(sendbuf, recvbuf, count, type, mop, comm),
		     PMPI_Iallreduce(sendbuf, recvbuf, count, type, mop, comm, &pass_req));
	return allreduce(IM_ALLREDUCE, sendbuf, recvbuf, count, type, mop, NULL, ic, dt, io, bytes,
			 t0);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
		   MPI_Op mop, MPI_Comm comm, MPI_Request *request)
{
	double t0 = im_t0();
	struct im_comm *ic;
	size_t bytes;
	int dt, io;
	enum im_why why;

	if (!im_cfg.enabled)
		return PMPI_Iallreduce(sendbuf, recvbuf, count, type, mop, comm, request);
	im_serve_all();
	why = map_reduction(count, type, mop, 1, &dt, &io, &bytes);
	if (!(ic = offload_comm(comm, &why, im_pipelined(IM_IALLREDUCE, bytes, request))))
		PASS_I(IM_IALLREDUCE, why, bytes, t0, comm,
		       PMPI_Iallreduce(sendbuf, recvbuf, count, type, mop, comm, request));
	return allreduce(IM_IALLREDUCE, sendbuf, recvbuf, count, type, mop, request, ic, dt, io,
			 bytes, t0);
}

static int reduce(enum im_coll kind, const void *sendbuf, void *recvbuf, int count,
		  MPI_Datatype type, MPI_Op mop, int root, MPI_Request *request,
		  struct im_comm *ic, int dt, int io, size_t bytes, double t0)
{
	bool is_root = ic->rank == root;
	struct im_op op = {
		.kind = kind, .ic = ic, .start_us = t0,
		.a = { .sendbuf = sendbuf, .recvbuf = recvbuf, .scount = count, .stype = type,
		       .op = mop, .root = root },
		.in = sendbuf, .out = is_root ? recvbuf : NULL, .count = (size_t)count,
		.dt = dt, .io = io, .in_bytes = bytes, .stat_bytes = bytes,
		/* the root's result is its own: its DATA says "done" (a rank
		 * that is not the root needs nothing more); the others keep
		 * their input to redo it with a root that missed it */
		.share = is_root, .in_place = is_root && sendbuf == MPI_IN_PLACE,
	};

	return im_run(&op, request);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op mop,
	       int root, MPI_Comm comm)
{
	double t0 = im_t0();
	struct im_comm *ic;
	size_t bytes;
	int dt, io;
	enum im_why why;

	if (!im_cfg.enabled)
		return PMPI_Reduce(sendbuf, recvbuf, count, type, mop, root, comm);
	im_serve_all();
	why = map_reduction(count, type, mop, 1, &dt, &io, &bytes);
	why = check_root(why, root, comm);
	if (!(ic = offload_comm(comm, &why, false)))
		PASS(IM_REDUCE, why, bytes, t0, comm, false,
		     PMPI_Reduce(sendbuf, recvbuf, count, type, mop, root, comm),
		     PMPI_Ireduce(sendbuf, recvbuf, count, type, mop, root, comm, &pass_req));
	return reduce(IM_REDUCE, sendbuf, recvbuf, count, type, mop, root, NULL, ic, dt, io, bytes,
		      t0);
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op mop,
		int root, MPI_Comm comm, MPI_Request *request)
{
	double t0 = im_t0();
	struct im_comm *ic;
	size_t bytes;
	int dt, io;
	enum im_why why;

	if (!im_cfg.enabled)
		return PMPI_Ireduce(sendbuf, recvbuf, count, type, mop, root, comm, request);
	im_serve_all();
	why = map_reduction(count, type, mop, 1, &dt, &io, &bytes);
	why = check_root(why, root, comm);
	if (!(ic = offload_comm(comm, &why, false)))
		PASS_I(IM_IREDUCE, why, bytes, t0, comm,
		       PMPI_Ireduce(sendbuf, recvbuf, count, type, mop, root, comm, request));
	return reduce(IM_IREDUCE, sendbuf, recvbuf, count, type, mop, root, request, ic, dt, io,
		      bytes, t0);
}

/* ---- reduce-scatter ---- */

static int reduce_scatter(enum im_coll kind, const void *sendbuf, void *recvbuf, int rcount,
			  MPI_Datatype type, MPI_Op mop, MPI_Request *request,
			  struct im_comm *ic, int dt, int io, size_t bytes, double t0)
{
	int tsize = 0;

	PMPI_Type_size(type, &tsize);
	struct im_op op = {
		.kind = kind, .ic = ic, .start_us = t0,
		.a = { .sendbuf = sendbuf, .recvbuf = recvbuf, .rcount = rcount, .rtype = type,
		       .op = mop },
		.in = sendbuf, .out = recvbuf, .count = (size_t)rcount, .dt = dt, .io = io,
		/* each rank's result is its own shard: nobody else's to give */
		.bytes = (size_t)rcount * (size_t)tsize, .in_bytes = bytes, .stat_bytes = bytes,
		.share = false, .in_place = sendbuf == MPI_IN_PLACE,
	};

	return im_run(&op, request);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int rcount,
			     MPI_Datatype type, MPI_Op mop, MPI_Comm comm)
{
	double t0 = im_t0();
	struct im_comm *ic;
	size_t bytes;
	int dt, io;
	enum im_why why;

	if (!im_cfg.enabled)
		return PMPI_Reduce_scatter_block(sendbuf, recvbuf, rcount, type, mop, comm);
	im_serve_all();
	why = map_reduction(rcount, type, mop, comm_size(comm), &dt, &io, &bytes);
	if (!(ic = offload_comm(comm, &why, false)))
		PASS(IM_REDUCE_SCATTER_BLOCK, why, bytes, t0, comm, bytes > 0,
		     PMPI_Reduce_scatter_block(sendbuf, recvbuf, rcount, type, mop, comm),
		     PMPI_Ireduce_scatter_block(sendbuf, recvbuf, rcount, type, mop, comm, &pass_req));
	return reduce_scatter(IM_REDUCE_SCATTER_BLOCK, sendbuf, recvbuf, rcount, type, mop, NULL,
			      ic, dt, io, bytes, t0);
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int rcount,
			      MPI_Datatype type, MPI_Op mop, MPI_Comm comm, MPI_Request *request)
{
	double t0 = im_t0();
	struct im_comm *ic;
	size_t bytes;
	int dt, io;
	enum im_why why;

	if (!im_cfg.enabled)
		return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, rcount, type, mop, comm,
						  request);
	im_serve_all();
	why = map_reduction(rcount, type, mop, comm_size(comm), &dt, &io, &bytes);
	if (!(ic = offload_comm(comm, &why, false)))
		PASS_I(IM_IREDUCE_SCATTER_BLOCK, why, bytes, t0, comm,
		       PMPI_Ireduce_scatter_block(sendbuf, recvbuf, rcount, type, mop, comm,
						  request));
	return reduce_scatter(IM_IREDUCE_SCATTER_BLOCK, sendbuf, recvbuf, rcount, type, mop,
			      request, ic, dt, io, bytes, t0);
}

/* MPI_Reduce_scatter maps when every rank's count is the same (the
 * counts are the same array on every rank): its shard count, else -1. */
static int equal_counts(const int *counts, MPI_Comm comm)
{
	int n = comm_size(comm);

	if (!counts || n < 1)
		return -1;
	for (int i = 1; i < n; i++)
		if (counts[i] != counts[0])
			return -1;
	return counts[0];
}

/* Every rank's block of a reduce-scatter has data: each rank's result
 * needs every rank's input, and every rank knows it alike. (A rank's own
 * block alone differs between ranks: one whose block is empty would not
 * settle where the others do, and would then wait nonblocking against
 * their blocking call.) */
static bool all_blocks(const int *counts, MPI_Datatype type, MPI_Comm comm)
{
	int n = comm_size(comm), tsize = 0;

	PMPI_Type_size(type, &tsize);
	if (!counts || tsize <= 0 || n < 1)
		return false;
	for (int i = 0; i < n; i++)
		if (counts[i] <= 0)
			return false;
	return true;
}

/* the bytes of a reduce-scatter with unequal counts (INCA_MPI_STATS) */
static size_t counts_bytes(const int *counts, MPI_Datatype type, MPI_Comm comm)
{
	int n = comm_size(comm), tsize = 0;
	size_t sum = 0;

	PMPI_Type_size(type, &tsize);
	for (int i = 0; counts && i < n; i++)
		sum += counts[i] > 0 ? (size_t)counts[i] : 0;
	return sum * (size_t)tsize;
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int counts[],
		       MPI_Datatype type, MPI_Op mop, MPI_Comm comm)
{
	double t0 = im_t0();
	struct im_comm *ic = NULL;
	size_t bytes = 0;
	int dt, io, rcount = equal_counts(counts, comm);
	enum im_why why = IM_WHY_SHAPE;

	if (!im_cfg.enabled)
		return PMPI_Reduce_scatter(sendbuf, recvbuf, counts, type, mop, comm);
	im_serve_all();
	if (rcount >= 0)
		why = map_reduction(rcount, type, mop, comm_size(comm), &dt, &io, &bytes);
	else
		bytes = counts_bytes(counts, type, comm);
	if (!(ic = offload_comm(comm, &why, false)))
		PASS(IM_REDUCE_SCATTER, why, bytes, t0, comm, all_blocks(counts, type, comm),
		     PMPI_Reduce_scatter(sendbuf, recvbuf, counts, type, mop, comm),
		     PMPI_Ireduce_scatter(sendbuf, recvbuf, counts, type, mop, comm, &pass_req));
	return reduce_scatter(IM_REDUCE_SCATTER, sendbuf, recvbuf, rcount, type, mop, NULL, ic,
			      dt, io, bytes, t0);
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int counts[],
			MPI_Datatype type, MPI_Op mop, MPI_Comm comm, MPI_Request *request)
{
	double t0 = im_t0();
	struct im_comm *ic = NULL;
	size_t bytes = 0;
	int dt, io, rcount = equal_counts(counts, comm);
	enum im_why why = IM_WHY_SHAPE;

	if (!im_cfg.enabled)
		return PMPI_Ireduce_scatter(sendbuf, recvbuf, counts, type, mop, comm, request);
	im_serve_all();
	if (rcount >= 0)
		why = map_reduction(rcount, type, mop, comm_size(comm), &dt, &io, &bytes);
	else
		bytes = counts_bytes(counts, type, comm);
	if (!(ic = offload_comm(comm, &why, false)))
		PASS_I(IM_IREDUCE_SCATTER, why, bytes, t0, comm,
		       PMPI_Ireduce_scatter(sendbuf, recvbuf, counts, type, mop, comm, request));
	return reduce_scatter(IM_IREDUCE_SCATTER, sendbuf, recvbuf, rcount, type, mop, request,
			      ic, dt, io, bytes, t0);
}

/* ---- allgather ---- */

/* A rank's bytes in an allgather (the same on every rank, whatever the
 * types: MPI requires matching signatures); IM_NWHY when it maps. */
static enum im_why map_allgather(int rcount, MPI_Datatype rtype, MPI_Comm comm, size_t *blk,
				 size_t *bytes)
{
	int tsize = 0;

	PMPI_Type_size(rtype, &tsize);
	*blk = rcount > 0 ? (size_t)rcount * (size_t)tsize : 0;
	*bytes = *blk * (size_t)comm_size(comm);
	return *blk && *blk <= INT32_MAX && size_ok(*bytes) ? IM_NWHY : IM_WHY_SIZE;
}

static bool word_aligned(const void *p)
{
	return ((uintptr_t)p & 3) == 0;
}

static int allgather(enum im_coll kind, const void *sendbuf, int scount, MPI_Datatype stype,
		     void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm,
		     MPI_Request *request, struct im_comm *ic, size_t blk, size_t bytes, double t0)
{
	bool in_place = sendbuf == MPI_IN_PLACE;
	struct im_op op = {
		.kind = kind, .ic = ic, .start_us = t0,
		.a = { .sendbuf = sendbuf, .recvbuf = recvbuf, .scount = scount, .stype = stype,
		       .rcount = rcount, .rtype = rtype },
		.in = sendbuf, .out = recvbuf, .count = blk / 4, .dt = INCA_INT32,
		.bytes = bytes, .stat_bytes = bytes, .share = true, .in_place = in_place,
		.blk = blk, .pblk = blk,
	};

	/* whole words of contiguous bytes go straight to libinca (copied as
	 * int32 words); anything else is packed, each rank's bytes padded
	 * to words (blk % 4 is the same on every rank, so every rank's
	 * result has the same layout) */
	if (blk % 4 || !im_contiguous(rtype) || !word_aligned(recvbuf) ||
	    (!in_place && (!im_contiguous(stype) || !word_aligned(sendbuf)))) {
		MPI_Aint lb, extent;
		int pos = 0;

		op.pblk = (blk + 3) & ~(size_t)3;
		op.count = op.pblk / 4;
		op.pack = calloc((size_t)ic->size, op.pblk);
		if (!op.pack)
			return MPI_ERR_NO_MEM;
		PMPI_Type_get_extent(rtype, &lb, &extent);
		uint8_t *mine = op.pack + (size_t)ic->rank * op.pblk;
		if (in_place)
			PMPI_Pack((char *)recvbuf + (MPI_Aint)ic->rank * rcount * extent, rcount, rtype,
				  mine, (int)op.pblk, &pos, comm);
		else
			PMPI_Pack(sendbuf, scount, stype, mine, (int)op.pblk, &pos, comm);
		op.in_place = true;    /* this rank's part is in the packed buffer */
		op.in = NULL;
		op.out = op.pack;
		op.bytes = (size_t)ic->size * op.pblk;
	}
	return im_run(&op, request);
}

int MPI_Allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf,
		  int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
	double t0 = im_t0();
	struct im_comm *ic;
	size_t blk, bytes;
	enum im_why why;

	if (!im_cfg.enabled)
		return PMPI_Allgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);
	im_serve_all();
	why = map_allgather(rcount, rtype, comm, &blk, &bytes);
	if (!(ic = offload_comm(comm, &why, false)))
		PASS(IM_ALLGATHER, why, bytes, t0, comm, bytes > 0,
		     PMPI_Allgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm),
		     PMPI_Iallgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, &pass_req));
	return allgather(IM_ALLGATHER, sendbuf, scount, stype, recvbuf, rcount, rtype, comm, NULL,
			 ic, blk, bytes, t0);
}

int MPI_Iallgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf,
		   int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *request)
{
	double t0 = im_t0();
	struct im_comm *ic;
	size_t blk, bytes;
	enum im_why why;

	if (!im_cfg.enabled)
		return PMPI_Iallgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm,
				       request);
	im_serve_all();
	why = map_allgather(rcount, rtype, comm, &blk, &bytes);
	if (!(ic = offload_comm(comm, &why, im_pipelined(IM_IALLGATHER, bytes, request))))
		PASS_I(IM_IALLGATHER, why, bytes, t0, comm,
		       PMPI_Iallgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm,
				       request));
	return allgather(IM_IALLGATHER, sendbuf, scount, stype, recvbuf, rcount, rtype, comm,
			 request, ic, blk, bytes, t0);
}

/* ---- broadcast, barrier ---- */

/* The decision rests on the byte count alone: the type signatures of the
 * root and the others may differ. */
static enum im_why map_bcast(int count, MPI_Datatype type, size_t *bytes)
{
	int tsize = 0;

	PMPI_Type_size(type, &tsize);
	*bytes = count > 0 ? (size_t)count * (size_t)tsize : 0;
	return *bytes && *bytes <= INT32_MAX && size_ok(*bytes) ? IM_NWHY : IM_WHY_SIZE;
}

static int bcast(enum im_coll kind, void *buf, int count, MPI_Datatype type, int root,
		 MPI_Comm comm, MPI_Request *request, struct im_comm *ic, size_t bytes, double t0)
{
	struct im_op op = {
		.kind = kind, .ic = ic, .start_us = t0,
		.a = { .recvbuf = buf, .rcount = count, .rtype = type, .root = root },
		/* padded to whole words: the switch broadcasts int32 words */
		.out = buf, .count = (bytes + 3) / 4, .dt = INCA_INT32,
		.bytes = bytes, .stat_bytes = bytes, .share = true, .blk = bytes,
	};

	if (!im_contiguous(type) || bytes % 4 || !word_aligned(buf)) {
		int pos = 0;

		op.pack = malloc((bytes + 3) & ~(size_t)3);
		if (!op.pack)
			return MPI_ERR_NO_MEM;
		if (ic->rank == root)
			PMPI_Pack(buf, count, type, op.pack, (int)bytes, &pos, comm);
		op.out = op.pack;
	}
	return im_run(&op, request);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
	double t0 = im_t0();
	struct im_comm *ic;
	size_t bytes;
	enum im_why why;

	if (!im_cfg.enabled)
		return PMPI_Bcast(buf, count, type, root, comm);
	im_serve_all();
	why = map_bcast(count, type, &bytes);
	why = check_root(why, root, comm);
	if (!(ic = offload_comm(comm, &why, false)))
		PASS(IM_BCAST, why, bytes, t0, comm, false, PMPI_Bcast(buf, count, type, root, comm),
		     PMPI_Ibcast(buf, count, type, root, comm, &pass_req));
	return bcast(IM_BCAST, buf, count, type, root, comm, NULL, ic, bytes, t0);
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
	       MPI_Request *request)
{
	double t0 = im_t0();
	struct im_comm *ic;
	size_t bytes;
	enum im_why why;

	if (!im_cfg.enabled)
		return PMPI_Ibcast(buf, count, type, root, comm, request);
	im_serve_all();
	why = map_bcast(count, type, &bytes);
	why = check_root(why, root, comm);
	if (!(ic = offload_comm(comm, &why, false)))
		PASS_I(IM_IBCAST, why, bytes, t0, comm, PMPI_Ibcast(buf, count, type, root, comm, request));
	return bcast(IM_IBCAST, buf, count, type, root, comm, request, ic, bytes, t0);
}

static int barrier(enum im_coll kind, MPI_Request *request, struct im_comm *ic, double t0)
{
	struct im_op op = { .kind = kind, .ic = ic, .start_us = t0, .share = true };

	return im_run(&op, request);
}

int MPI_Barrier(MPI_Comm comm)
{
	double t0 = im_t0();
	struct im_comm *ic;
	enum im_why why = IM_NWHY;

	if (!im_cfg.enabled)
		return PMPI_Barrier(comm);
	im_serve_all();
	if (!(ic = offload_comm(comm, &why, false)))
		PASS(IM_BARRIER, why, 0, t0, comm, true, PMPI_Barrier(comm),
		     PMPI_Ibarrier(comm, &pass_req));
	return barrier(IM_BARRIER, NULL, ic, t0);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
	double t0 = im_t0();
	struct im_comm *ic;
	enum im_why why = IM_NWHY;

	if (!im_cfg.enabled)
		return PMPI_Ibarrier(comm, request);
	im_serve_all();
	if (!(ic = offload_comm(comm, &why, im_pipelined(IM_IBARRIER, 0, request))))
		PASS_I(IM_IBARRIER, why, 0, t0, comm, PMPI_Ibarrier(comm, request));
	return barrier(IM_IBARRIER, request, ic, t0);
}
