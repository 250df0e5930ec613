/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An ordinary MPI program that checks MPI collectives element by element:
 * run with and without libinca-mpi preloaded, it must pass the same way.
 * MPI_Allreduce on MPI_COMM_WORLD, a dup and a split, in place and not,
 * every type x op libinca-mpi maps (and some it passes through), 1 element
 * to --max bytes; MINLOC, a derived type and a user op; MPI_Iallreduce
 * overlapped with computation (MPI_Wait, MPI_Test loops, MPI_Waitall);
 * MPI_Bcast of predefined and derived types; MPI_Barrier; MPI_Reduce,
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter (equal counts and not),
 * MPI_Allgather (ints, chars, a derived type) and their nonblocking forms,
 * MPI_Ibcast, MPI_Ibarrier, MPI_Request_free, MPI_Waitany, MPI_Testsome,
 * MPI_Request_get_status.
 * --loop N: N checked all-reduces, reduces, reduce-scatters and
 * allgathers of 4 KiB..1 MiB, every other one a batch of 32 small
 * nonblocking all-reduces in flight (the switch may be killed meanwhile). --refuse-rank R: a communicator that rank R cannot offload.
 * -p N: N rounds on MPI_COMM_WORLD of an offloaded all-reduce, a
 * reduce-scatter whose rank 0 has an empty block (unequal counts: passed
 * through) and three calls passed through with a user op (an all-reduce, a
 * reduce, an all-reduce), after four offloaded all-reduces, nothing else:
 * with INCA_MPI_STATS=1 the reduce-scatter and the first all-reduce of
 * each round wait nonblocking (rank 0 may leave the reduce-scatter before
 * the others enter it), the other two use MPI's blocking call.
 * -s N: N short-lived communicators (a split, one checked broadcast and
 * one checked all-reduce, freed), nothing else. -F: without the request
 * freed before it completes (for runs where a communicator may not be
 * offloaded: Open MPI's own nonblocking collectives refuse it, "invalid
 * request", as MPI allows: the call is erroneous).
 * Prints "mpi-check: N passed, M failed" (rank 0) and exits 1 on failure.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long passed, failed;
static int wrank;
/* a request freed before it completes is checked (-F: not) */
static bool free_requests = true;

#define CHECK(cond, ...)                                                           \
	do {                                                                       \
		if (cond) {                                                        \
			passed++;                                                  \
		} else {                                                           \
			failed++;                                                  \
			fprintf(stderr, "rank %d: FAIL: ", wrank);                 \
			fprintf(stderr, __VA_ARGS__);                              \
			fputc('\n', stderr);                                       \
		}                                                                  \
	} while (0)

enum kind { K_F32, K_F64, K_I32, K_I64, K_U32, K_U64 };

struct tcase {
	const char *name;
	MPI_Datatype type;
	enum kind kind;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* rank r's element i for op: exact in any order (small integers, powers of
 * two for products), random bits for integer ops */
static double fval(int r, size_t i, MPI_Op op, unsigned seed)
{
	uint64_t h = mix(((uint64_t)seed << 40) ^ ((uint64_t)r << 32) ^ i);

	if (op == MPI_PROD)
		return (h & 4 ? -1.0 : 1.0) * (h & 1 ? 2.0 : 1.0);
	return (double)((int)(h % 201) - 100);
}

static uint64_t ival(int r, size_t i, MPI_Op op, unsigned seed)
{
	uint64_t h = mix(((uint64_t)seed << 40) ^ ((uint64_t)r << 32) ^ i ^ 0x5a5a);

	if (op == MPI_PROD)
		return h & 0xff;
	return h;
}

static size_t esize(enum kind k)
{
	return k == K_F32 || k == K_I32 || k == K_U32 ? 4 : 8;
}

static void fill(enum kind k, void *buf, int r, size_t n, MPI_Op op, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		switch (k) {
		case K_F32: ((float *)buf)[i] = (float)fval(r, i, op, seed); break;
		case K_F64: ((double *)buf)[i] = fval(r, i, op, seed); break;
		case K_I32: case K_U32: ((uint32_t *)buf)[i] = (uint32_t)ival(r, i, op, seed); break;
		case K_I64: case K_U64: ((uint64_t *)buf)[i] = ival(r, i, op, seed); break;
		}
	}
}

static uint64_t ired(uint64_t a, uint64_t b, MPI_Op op, enum kind k)
{
	bool s = k == K_I32 || k == K_I64, w32 = k == K_I32 || k == K_U32;
	uint64_t m = w32 ? 0xffffffffull : ~0ull, r;

	if (op == MPI_SUM)
		r = a + b;
	else if (op == MPI_PROD)
		r = a * b;
	else if (op == MPI_BAND)
		r = a & b;
	else if (op == MPI_BOR)
		r = a | b;
	else if (op == MPI_BXOR)
		r = a ^ b;
	else {
		bool less;
		if (s && w32)
			less = (int32_t)a < (int32_t)b;
		else if (s)
			less = (int64_t)a < (int64_t)b;
		else
			less = (a & m) < (b & m);
		r = (op == MPI_MIN) == less ? a : b;
	}
	return r & m;
}

static double fred(double a, double b, MPI_Op op)
{
	if (op == MPI_SUM)
		return a + b;
	if (op == MPI_PROD)
		return a * b;
	if (op == MPI_MIN)
		return a < b ? a : b;
	return a > b ? a : b;
}

/* number of elements of out that differ from the reduction over size ranks
 * of elements first.. first + n - 1 */
static size_t verify_at(enum kind k, const void *out, int size, size_t first, size_t n,
			MPI_Op op, unsigned seed)
{
	size_t wrong = 0;

	for (size_t j = 0; j < n; j++) {
		size_t i = first + j;
		if (k == K_F32 || k == K_F64) {
			double want = fval(0, i, op, seed);
			for (int r = 1; r < size; r++)
				want = fred(want, fval(r, i, op, seed), op);
			double got = k == K_F32 ? ((const float *)out)[j] : ((const double *)out)[j];
			wrong += got != want;
		} else {
			bool w32 = k == K_I32 || k == K_U32;
			uint64_t m = w32 ? 0xffffffffull : ~0ull;
			uint64_t want = ival(0, i, op, seed) & m;
			for (int r = 1; r < size; r++)
				want = ired(want, ival(r, i, op, seed) & m, op, k);
			uint64_t got = w32 ? ((const uint32_t *)out)[j] : ((const uint64_t *)out)[j];
			wrong += got != want;
		}
	}
	return wrong;
}

static size_t verify(enum kind k, const void *out, int size, size_t n, MPI_Op op,
		     unsigned seed)
{
	return verify_at(k, out, size, 0, n, op, seed);
}

static const char *op_name(MPI_Op op)
{
	return op == MPI_SUM ? "sum" : op == MPI_PROD ? "prod" : op == MPI_MIN ? "min" :
	       op == MPI_MAX ? "max" : op == MPI_BAND ? "band" : op == MPI_BOR ? "bor" : "bxor";
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		MPI_Abort(MPI_COMM_WORLD, 3);
	return p;
}

/* one checked all-reduce */
static void allreduce_case(MPI_Comm comm, const char *cname, const struct tcase *t, MPI_Op op,
			   size_t n, bool in_place, unsigned seed)
{
	int rank, size;
	size_t es = esize(t->kind);
	void *in = xmalloc(n * es), *out = xmalloc(n * es);

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	fill(t->kind, in_place ? out : in, rank, n, op, seed);
	int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, (int)n, t->type, op, comm);
	size_t wrong = rc == MPI_SUCCESS ? verify(t->kind, out, size, n, op, seed) : n;
	CHECK(wrong == 0, "%s allreduce %s %s x %zu%s: %zu wrong (rc %d)", cname, t->name,
	      op_name(op), n, in_place ? " in place" : "", wrong, rc);
	free(in);
	free(out);
}

static const struct tcase *types(int *n)
{
	static struct tcase t[] = {
		{ "MPI_FLOAT", 0, K_F32 }, { "MPI_DOUBLE", 0, K_F64 }, { "MPI_INT", 0, K_I32 },
		{ "MPI_INT32_T", 0, K_I32 }, { "MPI_INT64_T", 0, K_I64 }, { "MPI_LONG", 0, K_I64 },
		{ "MPI_LONG_LONG", 0, K_I64 }, { "MPI_UNSIGNED", 0, K_U32 },
		{ "MPI_UINT64_T", 0, K_U64 },
	};
	t[0].type = MPI_FLOAT; t[1].type = MPI_DOUBLE; t[2].type = MPI_INT;
	t[3].type = MPI_INT32_T; t[4].type = MPI_INT64_T; t[5].type = MPI_LONG;
	t[6].type = MPI_LONG_LONG; t[7].type = MPI_UNSIGNED; t[8].type = MPI_UINT64_T;
	*n = sizeof(t) / sizeof(t[0]);
	return t;
}

static void matrix(MPI_Comm comm, const char *cname, size_t max_bytes, unsigned *seed)
{
	MPI_Op fops[] = { MPI_SUM, MPI_MIN, MPI_MAX, MPI_PROD };
	MPI_Op iops[] = { MPI_SUM, MPI_MIN, MPI_MAX, MPI_PROD, MPI_BAND, MPI_BOR, MPI_BXOR };
	size_t counts[] = { 1, 3, 257, 4099 };
	int nt;
	const struct tcase *t = types(&nt);

	for (int k = 0; k < nt; k++) {
		bool fp = t[k].kind == K_F32 || t[k].kind == K_F64;
		int nops = fp ? 4 : 7;
		for (int o = 0; o < nops; o++) {
#ifdef MPICH_VERSION
			/* Debian 12's MPICH 4.0.2 reduces MIN and MAX of
			 * MPI_UNSIGNED and MPI_UINT64_T as signed (0xf0.. <
			 * 0x70..; MPI_UNSIGNED_LONG is right): libinca-mpi passes
			 * unsigned MIN/MAX through, so they would fail here with
			 * or without it */
			if ((t[k].kind == K_U32 || t[k].kind == K_U64) &&
			    (iops[o] == MPI_MIN || iops[o] == MPI_MAX))
				continue;
#endif
			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
				allreduce_case(comm, cname, &t[k], fp ? fops[o] : iops[o],
					       counts[c], c % 2, (*seed)++);
		}
	}
	/* large: doubling up to max_bytes, a float sum and an int64 xor */
	for (size_t b = 65536; b <= max_bytes; b *= 4) {
		allreduce_case(comm, cname, &t[0], MPI_SUM, b / 4, false, (*seed)++);
		allreduce_case(comm, cname, &t[4], MPI_BXOR, b / 8, true, (*seed)++);
	}
	if (max_bytes >= 65536) {
		allreduce_case(comm, cname, &t[0], MPI_SUM, max_bytes / 4, true, (*seed)++);
		allreduce_case(comm, cname, &t[1], MPI_MAX, max_bytes / 8, false, (*seed)++);
	}
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
	int n = *type == MPI_INT ? *len : 2 * *len;   /* or pairs of int */

	for (int i = 0; i < n; i++)
		((int *)inout)[i] += ((int *)in)[i];
}

/* calls libinca-mpi must pass through unchanged */
static void passthrough(MPI_Comm comm, const char *cname)
{
	int rank, size;
	struct { float v; int i; } in[5], out[5];
	MPI_Datatype pair;
	MPI_Op uop;
	int a[8], b[8];

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	for (int i = 0; i < 5; i++) {
		in[i].v = (float)((rank * 7 + i * 3) % size);
		in[i].i = rank;
	}
	MPI_Allreduce(in, out, 5, MPI_FLOAT_INT, MPI_MINLOC, comm);
	int bad = 0;
	for (int i = 0; i < 5; i++) {
		float best = 1e9f;
		int who = -1;
		for (int r = 0; r < size; r++) {
			float v = (float)((r * 7 + i * 3) % size);
			if (v < best)
				best = v, who = r;
		}
		bad += out[i].v != best || out[i].i != who;
	}
	CHECK(!bad, "%s MINLOC: %d wrong", cname, bad);

	MPI_Type_contiguous(2, MPI_INT, &pair);
	MPI_Type_commit(&pair);
	for (int i = 0; i < 8; i++)
		a[i] = rank * 10 + i;
	MPI_Op_create(user_sum, 1, &uop);
	MPI_Allreduce(a, b, 4, pair, uop, comm);
	bad = 0;
	for (int i = 0; i < 8; i++)
		bad += b[i] != 10 * size * (size - 1) / 2 + i * size;
	CHECK(!bad, "%s derived-type user-op sum: %d wrong", cname, bad);

	MPI_Allreduce(a, b, 8, MPI_INT, uop, comm);
	bad = 0;
	for (int i = 0; i < 8; i++)
		bad += b[i] != 10 * size * (size - 1) / 2 + i * size;
	CHECK(!bad, "%s user-op sum: %d wrong", cname, bad);
	MPI_Op_free(&uop);

	/* a broadcast of the derived type (packed when offloaded) and of floats */
	for (int root = 0; root < size; root += size - 1 > 0 ? size - 1 : 1) {
		for (int i = 0; i < 8; i++)
			a[i] = rank == root ? 1000 * root + i : -1;
		MPI_Bcast(a, 4, pair, root, comm);
		bad = 0;
		for (int i = 0; i < 8; i++)
			bad += a[i] != 1000 * root + i;
		CHECK(!bad, "%s bcast derived root %d: %d wrong", cname, root, bad);
	}
	MPI_Type_free(&pair);
	size_t n = 300001;
	float *f = xmalloc(n * 4);
	for (size_t i = 0; i < n; i++)
		f[i] = rank == 1 % size ? (float)i * 0.5f : -7.0f;
	MPI_Bcast(f, (int)n, MPI_FLOAT, 1 % size, comm);
	bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += f[i] != (float)i * 0.5f;
	CHECK(!bad, "%s bcast float x %zu: %d wrong", cname, n, bad);
	char msg[7];
	snprintf(msg, sizeof(msg), rank == 0 ? "hello!" : "xxxxx");
	MPI_Bcast(msg, 7, MPI_CHAR, 0, comm);
	CHECK(!strcmp(msg, "hello!"), "%s bcast 7 chars: '%s'", cname, msg);
	free(f);
	CHECK(MPI_Barrier(comm) == MPI_SUCCESS, "%s barrier", cname);
}

static volatile double sink;

static void compute(double ms)
{
	double t0 = MPI_Wtime(), x = 1;
	while ((MPI_Wtime() - t0) * 1e3 < ms)
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 1e-9;
	sink = x;
}

static void nonblocking(MPI_Comm comm, const char *cname, unsigned *seed)
{
	int rank, size, done = 0;
	const struct tcase f32 = { "MPI_FLOAT", MPI_FLOAT, K_F32 }, i64 = { "MPI_LONG", MPI_LONG, K_I64 };
	size_t n = 262144;
	float *in = xmalloc(n * 4), *out = xmalloc(n * 4);
	int64_t *x = xmalloc(n * 8);
	MPI_Request req[2];
	long tests = 0;

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	/* overlapped with computation, then MPI_Wait */
	fill(K_F32, in, rank, n, MPI_SUM, *seed);
	MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, comm, &req[0]);
	compute(20);
	MPI_Wait(&req[0], MPI_STATUS_IGNORE);
	CHECK(verify(f32.kind, out, size, n, MPI_SUM, (*seed)++) == 0, "%s iallreduce+wait",
	      cname);
	/* an MPI_Test loop with computation between tests */
	fill(K_F32, in, rank, n, MPI_MAX, *seed);
	MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_MAX, comm, &req[0]);
	while (!done) {
		compute(0.2);
		MPI_Test(&req[0], &done, MPI_STATUS_IGNORE);
		tests++;
	}
	CHECK(verify(f32.kind, out, size, n, MPI_MAX, (*seed)++) == 0,
	      "%s iallreduce+test loop (%ld tests)", cname, tests);
	/* two at once, in place, then MPI_Waitall */
	fill(K_F32, out, rank, n, MPI_SUM, *seed);
	fill(K_I64, x, rank, n, MPI_BXOR, *seed + 1);
	MPI_Iallreduce(MPI_IN_PLACE, out, (int)n, MPI_FLOAT, MPI_SUM, comm, &req[0]);
	MPI_Iallreduce(MPI_IN_PLACE, x, (int)n, MPI_LONG, MPI_BXOR, comm, &req[1]);
	compute(5);
	MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
	CHECK(verify(f32.kind, out, size, n, MPI_SUM, *seed) == 0, "%s iallreduce x2 (float)",
	      cname);
	CHECK(verify(i64.kind, x, size, n, MPI_BXOR, *seed + 1) == 0, "%s iallreduce x2 (long)",
	      cname);
	*seed += 2;
	free(in);
	free(out);
	free(x);
}

/* one checked reduce to root */
static void reduce_case(MPI_Comm comm, const char *cname, const struct tcase *t, MPI_Op op,
			size_t n, int root, bool in_place, bool nonblocking, unsigned seed)
{
	int rank, size, rc;
	size_t es = esize(t->kind);
	void *in = xmalloc(n * es), *out = xmalloc(n * es);
	MPI_Request req;

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	in_place = in_place && rank == root;
	fill(t->kind, in_place ? out : in, rank, n, op, seed);
	if (nonblocking) {
		rc = MPI_Ireduce(in_place ? MPI_IN_PLACE : in, out, (int)n, t->type, op, root, comm,
				 &req);
		if (rc == MPI_SUCCESS)
			rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
	} else {
		rc = MPI_Reduce(in_place ? MPI_IN_PLACE : in, out, (int)n, t->type, op, root, comm);
	}
	size_t wrong = rc != MPI_SUCCESS ? n : rank == root ? verify(t->kind, out, size, n, op, seed)
			: 0;
	CHECK(wrong == 0, "%s %sreduce %s %s x %zu root %d%s: %zu wrong (rc %d)", cname,
	      nonblocking ? "i" : "", t->name, op_name(op), n, root, in_place ? " in place" : "",
	      wrong, rc);
	free(in);
	free(out);
}

/* one checked reduce-scatter: rank r gets elements r*n .. r*n + n - 1;
 * mode 0: MPI_Reduce_scatter_block, 1: its nonblocking form (MPI_Test
 * loop), 2: MPI_Reduce_scatter with equal counts, 3: with rank 0's count
 * one larger (passes through) */
static void reduce_scatter_case(MPI_Comm comm, const char *cname, const struct tcase *t,
				MPI_Op op, size_t n, bool in_place, int mode, unsigned seed)
{
	int rank, size, rc, done = 0;
	size_t es = esize(t->kind);
	MPI_Request req;

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	int *counts = xmalloc(sizeof(int) * (size_t)size);
	size_t total = 0, first = 0;
	for (int r = 0; r < size; r++) {
		counts[r] = (int)n + (mode == 3 && r == 0);
		if (r < rank)
			first += (size_t)counts[r];
		total += (size_t)counts[r];
	}
	uint8_t *in = xmalloc(total * es), *out = xmalloc(total * es);
	fill(t->kind, in_place ? out : in, rank, total, op, seed);
	const void *send = in_place ? MPI_IN_PLACE : in;
	if (mode == 0) {
		rc = MPI_Reduce_scatter_block(send, out, (int)n, t->type, op, comm);
	} else if (mode == 1) {
		rc = MPI_Ireduce_scatter_block(send, out, (int)n, t->type, op, comm, &req);
		while (rc == MPI_SUCCESS && !done)
			rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
	} else {
		rc = MPI_Reduce_scatter(send, out, counts, t->type, op, comm);
	}
	size_t wrong = rc == MPI_SUCCESS ? verify_at(t->kind, out, size, first,
						     (size_t)counts[rank], op, seed) : n;
	static const char *const names[] = { "reduce_scatter_block", "ireduce_scatter_block",
					     "reduce_scatter", "reduce_scatter (unequal)" };
	CHECK(wrong == 0, "%s %s %s %s x %zu%s: %zu wrong (rc %d)", cname, names[mode], t->name,
	      op_name(op), n, in_place ? " in place" : "", wrong, rc);
	free(counts);
	free(in);
	free(out);
}

/* rank r's byte i of an allgather */
static uint8_t gbyte(int r, size_t i, unsigned seed)
{
	return (uint8_t)mix(((uint64_t)seed << 40) ^ ((uint64_t)r << 32) ^ i);
}

/* one checked allgather of n units per rank: unit = 0: MPI_INT, 1:
 * MPI_CHAR, 2: a derived type (3 ints, contiguous); nonblocking: with
 * MPI_Waitany among a second request (a barrier) */
static void allgather_case(MPI_Comm comm, const char *cname, int unit, size_t n,
			   bool in_place, bool nonblocking, unsigned seed)
{
	int rank, size, rc;
	MPI_Datatype type = unit == 0 ? MPI_INT : MPI_CHAR, tri;
	size_t us = unit == 0 ? 4 : unit == 1 ? 1 : 12, blk = n * us;
	MPI_Request reqs[2];

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	if (unit == 2) {
		MPI_Type_contiguous(3, MPI_INT, &tri);
		MPI_Type_commit(&tri);
		type = tri;
	}
	uint8_t *in = xmalloc(blk), *out = xmalloc(blk * (size_t)size);
	memset(out, 0xee, blk * (size_t)size);
	uint8_t *mine = in_place ? out + (size_t)rank * blk : in;
	for (size_t i = 0; i < blk; i++)
		mine[i] = gbyte(rank, i, seed);
	const void *send = in_place ? MPI_IN_PLACE : in;
	if (nonblocking) {
		rc = MPI_Iallgather(send, (int)n, type, out, (int)n, type, comm, &reqs[0]);
		MPI_Ibarrier(comm, &reqs[1]);
		for (int k = 0, idx; k < 2 && rc == MPI_SUCCESS; k++)
			rc = MPI_Waitany(2, reqs, &idx, MPI_STATUS_IGNORE);
	} else {
		rc = MPI_Allgather(send, (int)n, type, out, (int)n, type, comm);
	}
	size_t wrong = 0;
	for (int r = 0; r < size; r++)
		for (size_t i = 0; i < blk; i++)
			wrong += out[(size_t)r * blk + i] != gbyte(r, i, seed);
	CHECK(rc == MPI_SUCCESS && wrong == 0, "%s %sallgather %s x %zu%s: %zu wrong (rc %d)", cname,
	      nonblocking ? "i" : "", unit == 0 ? "MPI_INT" : unit == 1 ? "MPI_CHAR" : "3 x MPI_INT",
	      n, in_place ? " in place" : "", wrong, rc);
	if (unit == 2)
		MPI_Type_free(&tri);
	free(in);
	free(out);
}

/* batch small all-reduces in flight at once (n floats each, sums of
 * seeds, every fourth in place), completed in reverse order: MPI_Wait, MPI_Test loops and
 * MPI_Waitany in turn; returns the number of wrong calls */
static long batch(MPI_Comm comm, int calls, size_t n, unsigned seed)
{
	int rank, size;
	float **in = xmalloc(sizeof(float *) * (size_t)calls), **out = xmalloc(sizeof(float *) * (size_t)calls);
	MPI_Request *req = xmalloc(sizeof(MPI_Request) * (size_t)calls);
	long bad = 0;

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	for (int k = 0; k < calls; k++) {
		in[k] = xmalloc(n * 4);
		out[k] = xmalloc(n * 4);
		/* every fourth in place */
		fill(K_F32, k % 4 ? in[k] : out[k], rank, n, MPI_SUM, seed + (unsigned)k);
		MPI_Iallreduce(k % 4 ? in[k] : MPI_IN_PLACE, out[k], (int)n, MPI_FLOAT, MPI_SUM, comm,
			       &req[k]);
	}
	for (int k = calls - 1; k >= 0; k--) {
		int done = 0, idx;
		if (req[k] == MPI_REQUEST_NULL)
			continue;
		if (k % 3 == 0)
			MPI_Wait(&req[k], MPI_STATUS_IGNORE);
		else if (k % 3 == 1)
			while (!done)
				MPI_Test(&req[k], &done, MPI_STATUS_IGNORE);
		else
			MPI_Waitany(calls, req, &idx, MPI_STATUS_IGNORE);
	}
	MPI_Waitall(calls, req, MPI_STATUSES_IGNORE);
	for (int k = 0; k < calls; k++) {
		bad += verify(K_F32, out[k], size, n, MPI_SUM, seed + (unsigned)k) != 0;
		free(in[k]);
		free(out[k]);
	}
	free(in);
	free(out);
	free(req);
	return bad;
}

/* Reduce, reduce-scatter, allgather, their nonblocking forms, MPI_Ibcast,
 * MPI_Ibarrier and a freed request, checked */
static void more(MPI_Comm comm, const char *cname, size_t max_bytes, unsigned *seed)
{
	int rank, size, nt;
	const struct tcase *t = types(&nt);  /* 0 f32, 1 f64, 2 int, 4 int64, 7 unsigned, 8 uint64 */
	size_t counts[] = { 1, 257, 4099 };

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	for (size_t c = 0; c < 3; c++) {
		for (int root = 0; root < size; root += size - 1 > 0 ? size - 1 : 1) {
			reduce_case(comm, cname, &t[0], MPI_SUM, counts[c], root, c % 2, false, (*seed)++);
			reduce_case(comm, cname, &t[4], MPI_BXOR, counts[c], root, false, c == 1, (*seed)++);
			reduce_case(comm, cname, &t[1], MPI_MAX, counts[c], root, true, c == 2, (*seed)++);
			reduce_case(comm, cname, &t[2], MPI_PROD, counts[c], root, false, false, (*seed)++);
		}
		for (int mode = 0; mode < 4; mode++) {
			reduce_scatter_case(comm, cname, &t[0], MPI_SUM, counts[c], c % 2, mode, (*seed)++);
			reduce_scatter_case(comm, cname, &t[2], MPI_BOR, counts[c], false, mode, (*seed)++);
			reduce_scatter_case(comm, cname, &t[8], MPI_SUM, counts[c], true, mode, (*seed)++);
			reduce_scatter_case(comm, cname, &t[1], MPI_MIN, counts[c], false, mode, (*seed)++);
		}
		for (int unit = 0; unit < 3; unit++) {
			allgather_case(comm, cname, unit, counts[c], false, false, (*seed)++);
			allgather_case(comm, cname, unit, counts[c], true, c != 1, (*seed)++);
		}
	}
	/* large */
	size_t big = max_bytes / 4;
	reduce_case(comm, cname, &t[0], MPI_SUM, big, size - 1, false, false, (*seed)++);
	reduce_case(comm, cname, &t[0], MPI_SUM, big, 0, true, true, (*seed)++);
	reduce_scatter_case(comm, cname, &t[0], MPI_SUM, big / (size_t)size, false, 0, (*seed)++);
	reduce_scatter_case(comm, cname, &t[4], MPI_BXOR, big / 2 / (size_t)size, true, 1, (*seed)++);
	allgather_case(comm, cname, 0, big / (size_t)size, false, false, (*seed)++);
	allgather_case(comm, cname, 1, 4 * big / (size_t)size - 1, true, true, (*seed)++);

	/* MPI_Ibcast of floats and of a derived type, MPI_Waitall */
	size_t n = 300001;
	float *f = xmalloc(n * 4);
	int a[8], bad = 0;
	MPI_Datatype pair;
	MPI_Request reqs[3];
	MPI_Type_contiguous(2, MPI_INT, &pair);
	MPI_Type_commit(&pair);
	for (size_t i = 0; i < n; i++)
		f[i] = rank == size - 1 ? (float)i * 0.25f : -3.0f;
	for (int i = 0; i < 8; i++)
		a[i] = rank == 0 ? 77 * i : -1;
	MPI_Ibcast(f, (int)n, MPI_FLOAT, size - 1, comm, &reqs[0]);
	MPI_Waitall(1, reqs, MPI_STATUSES_IGNORE);
	MPI_Ibcast(a, 4, pair, 0, comm, &reqs[1]);
	MPI_Waitall(1, &reqs[1], MPI_STATUSES_IGNORE);
	for (size_t i = 0; i < n; i++)
		bad += f[i] != (float)i * 0.25f;
	for (int i = 0; i < 8; i++)
		bad += a[i] != 77 * i;
	CHECK(!bad, "%s ibcast float x %zu and 4 int pairs: %d wrong", cname, n, bad);
	MPI_Type_free(&pair);
	/* many small all-reduces in flight, completed in reverse order */
	long wrong_calls = batch(comm, 100, 17, *seed) + batch(comm, 40, 1000, *seed + 100);
	CHECK(wrong_calls == 0, "%s 100 x 17 and 40 x 1000 floats in flight: %ld calls wrong", cname,
	      wrong_calls);
	*seed += 140;
	/* MPI_Ibarrier completed by an MPI_Testsome loop */
	int outcount = 0, idx[1], tests = 0;
	MPI_Ibarrier(comm, &reqs[2]);
	while (outcount == 0 || outcount == MPI_UNDEFINED) {
		MPI_Testsome(1, &reqs[2], &outcount, idx, MPI_STATUSES_IGNORE);
		tests++;
		if (outcount == MPI_UNDEFINED)
			break;
	}
	CHECK(outcount == 1, "%s ibarrier (testsome %d times): outcount %d", cname, tests, outcount);
	/* MPI_Iallreduce polled with MPI_Request_get_status (which does not
	 * complete it), then MPI_Wait */
	static float polled[777];
	int flag = 0, polls = 0;
	for (int i = 0; i < 777; i++)
		polled[i] = (float)(rank + i);
	MPI_Iallreduce(MPI_IN_PLACE, polled, 777, MPI_FLOAT, MPI_SUM, comm, &reqs[0]);
	while (!flag && polls < 100000000) {
		MPI_Request_get_status(reqs[0], &flag, MPI_STATUS_IGNORE);
		polls++;
	}
	CHECK(flag && reqs[0] != MPI_REQUEST_NULL, "%s iallreduce polled by request_get_status "
	      "(%d times): flag %d", cname, polls, flag);
	MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
	bad = 0;
	for (int i = 0; i < 777; i++)
		bad += polled[i] != (float)(size * (size - 1) / 2 + size * i);
	CHECK(!bad, "%s iallreduce polled by request_get_status: %d wrong", cname, bad);
#ifndef MPICH_VERSION
	/* a request freed before it completes: later calls still right (its
	 * buffer stays: nothing says when the operation is over). MPI calls
	 * freeing a nonblocking collective's request erroneous (MPI 4.0,
	 * 6.12); Open MPI allows it, MPICH aborts ("The supplied request was
	 * invalid") */
	static float freed[1000];
	if (free_requests) {
		MPI_Iallreduce(MPI_IN_PLACE, freed, 1000, MPI_FLOAT, MPI_SUM, comm, &reqs[0]);
		MPI_Request_free(&reqs[0]);
		CHECK(reqs[0] == MPI_REQUEST_NULL, "%s request_free: the handle is not "
		      "MPI_REQUEST_NULL", cname);
	}
#endif
	MPI_Barrier(comm);
	free(f);
	reduce_case(comm, cname, &t[0], MPI_SUM, 1000, 0, false, false, (*seed)++);
}

/* Calls passed through on comm with a user op, checked (round: the
 * values): an all-reduce, a reduce to root, an all-reduce. */
static void passed_three(MPI_Comm comm, int round, int root)
{
	int rank, size, a[8], b[8], c[8], d[8], bad = 0;
	MPI_Op uop;

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	MPI_Op_create(user_sum, 1, &uop);
	for (int i = 0; i < 8; i++) {
		a[i] = rank * 10 + i + round;
		c[i] = d[i] = -1;
	}
	MPI_Allreduce(a, b, 8, MPI_INT, uop, comm);
	MPI_Reduce(a, c, 8, MPI_INT, uop, root, comm);
	MPI_Allreduce(b, d, 8, MPI_INT, uop, comm);
	for (int i = 0; i < 8; i++) {
		int want = 10 * size * (size - 1) / 2 + (i + round) * size;
		bad += b[i] != want || d[i] != size * want || (rank == root ? c[i] != want : c[i] != -1);
	}
	CHECK(!bad, "round %d: user-op all-reduce, reduce to %d, all-reduce: %d wrong", round,
	      root, bad);
	MPI_Op_free(&uop);
}

/* -p N: see the header */
static void pass_rounds(int rounds)
{
	int rank, size;
	double one = 1, sum = 0;

	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int *counts = xmalloc(sizeof(int) * (size_t)size), *in = xmalloc(sizeof(int) * 2 * (size_t)size);
	int out[2] = { -1, -1 };

	for (int q = 0; q < size; q++)
		counts[q] = q ? 2 : 0;
	for (int i = 0; i < 2 * size; i++)
		in[i] = rank + i;
	for (int r = 0; r < 4 + rounds; r++) {
		MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		CHECK(sum == (double)size, "round %d: all-reduce %g, want %d", r, sum, size);
		if (r < 4)
			continue;
		MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		int bad = 0;
		for (int j = 0; rank && j < 2; j++)
			bad += out[j] != size * (size - 1) / 2 + size * (2 * (rank - 1) + j);
		CHECK(!bad, "round %d: reduce-scatter, rank 0's block empty: %d wrong", r, bad);
		passed_three(MPI_COMM_WORLD, r, r % size);
	}
	free(counts);
	free(in);
}

/* iters checked collectives of 4 KiB..1 MiB (the switch may be killed
 * meanwhile): every other one a batch of small nonblocking all-reduces,
 * the others all-reduce, reduce, reduce-scatter, allgather in turn; every
 * third also three calls passed through (the first of them waits
 * nonblocking, the others use MPI's blocking call, until the switch
 * fails) */
static void loop(int iters, unsigned *seed)
{
	const struct tcase f32 = { "MPI_FLOAT", MPI_FLOAT, K_F32 };
	long bad = 0;
	int size;

	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int it = 0; it < iters; it++) {
		size_t n = (size_t)1024 << (it % 9);   /* 4 KiB .. 1 MiB */
		long before = failed;
		if (it % 2) {
			/* 32 small ones in flight (16 B .. 16 KiB each) */
			CHECK(batch(MPI_COMM_WORLD, 32, n / 64, *seed) == 0,
			      "loop: batch of 32 x %zu floats", n / 64);
			*seed += 32;
		} else switch ((it / 2) % 5) {
		case 0:
		case 1:
			allreduce_case(MPI_COMM_WORLD, "loop", &f32, MPI_SUM, n, it % 4 == 0, (*seed)++);
			break;
		case 2:
			reduce_case(MPI_COMM_WORLD, "loop", &f32, MPI_SUM, n, it % size, it % 4 == 0,
				    it % 3 == 0, (*seed)++);
			break;
		case 3:
			reduce_scatter_case(MPI_COMM_WORLD, "loop", &f32, MPI_SUM, n / (size_t)size,
					    it % 4 == 0, it % 3, (*seed)++);
			break;
		default:
			allgather_case(MPI_COMM_WORLD, "loop", it % 3, n / (size_t)size, it % 4 == 0,
				       it % 7 == 0, (*seed)++);
			break;
		}
		if (it % 3 == 2)
			passed_three(MPI_COMM_WORLD, it, it % size);
		bad += failed != before;
		if (wrank == 0 && it % 20 == 0) {
			printf("mpi-check: loop %d of %d\n", it, iters);
			fflush(stdout);
		}
	}
	CHECK(bad == 0, "loop: %ld of %d wrong", bad, iters);
}

/* Communicators made for one broadcast and one all-reduce, then freed
 * (what libraries do): checked like the rest. */
static void short_lived(int n)
{
	for (int it = 0; it < n; it++) {
		MPI_Comm c;
		int r, size;
		float v[1000];
		double one = 1, sum = 0;

		MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &c);
		MPI_Comm_rank(c, &r);
		MPI_Comm_size(c, &size);
		for (int i = 0; i < 1000; i++)
			v[i] = r == 0 ? (float)(it * 1000 + i) : -1.0f;
		MPI_Bcast(v, 1000, MPI_FLOAT, 0, c);
		int bad = 0;
		for (int i = 0; i < 1000; i++)
			bad += v[i] != (float)(it * 1000 + i);
		CHECK(!bad, "short-lived %d: bcast: %d elements wrong", it, bad);
		MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, c);
		CHECK(sum == (double)size, "short-lived %d: allreduce %g, want %d", it, sum, size);
		MPI_Comm_free(&c);
	}
}

int main(int argc, char **argv)
{
	size_t max_bytes = 16u << 20;
	int iters = 0, refuse = -1, shortlived = 0, pass = 0, opt, provided;
	unsigned seed = 1;

	MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
	while ((opt = getopt(argc, argv, "m:l:r:s:p:F")) != -1) {
		switch (opt) {
		case 'm': max_bytes = strtoull(optarg, NULL, 0); break;
		case 'l': iters = atoi(optarg); break;
		case 'r': refuse = atoi(optarg); break;
		case 's': shortlived = atoi(optarg); break;
		case 'p': pass = atoi(optarg); break;
		case 'F': free_requests = false; break;
		default:
			if (wrank == 0)
				fprintf(stderr, "usage: mpi-check [-m MAX_BYTES] [-l LOOPS] "
					"[-r REFUSE_RANK] [-s SHORT_LIVED_COMMS] [-p PASS_ROUNDS] [-F]\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	if (pass > 0) {
		pass_rounds(pass);
	} else if (shortlived > 0) {
		short_lived(shortlived);
	} else if (iters > 0) {
		loop(iters, &seed);
	} else {
		MPI_Comm dup, split;
		int rank;

		MPI_Comm_rank(MPI_COMM_WORLD, &rank);
		MPI_Comm_dup(MPI_COMM_WORLD, &dup);
		MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &split);
		matrix(MPI_COMM_WORLD, "world", max_bytes, &seed);
		matrix(dup, "dup", max_bytes / 16, &seed);
		matrix(split, "split", max_bytes / 16, &seed);
		passthrough(MPI_COMM_WORLD, "world");
		passthrough(split, "split");
		nonblocking(MPI_COMM_WORLD, "world", &seed);
		nonblocking(split, "split", &seed);
		more(MPI_COMM_WORLD, "world", max_bytes, &seed);
		more(split, "split", max_bytes / 16, &seed);
		MPI_Comm_free(&dup);
		MPI_Comm_free(&split);
		if (refuse >= 0) {
			/* rank refuse cannot offload this one (no address): every rank
			 * must pass it through together */
			MPI_Comm other;
			const struct tcase f64 = { "MPI_DOUBLE", MPI_DOUBLE, K_F64 };
			MPI_Comm_dup(MPI_COMM_WORLD, &other);
			char *ifname = getenv("INCA_IFNAME") ? strdup(getenv("INCA_IFNAME")) : NULL;
			if (rank == refuse)
				setenv("INCA_IFNAME", "no-such-if0", 1);
			allreduce_case(other, "refused", &f64, MPI_SUM, 1000, false, seed++);
			if (rank == refuse && ifname)
				setenv("INCA_IFNAME", ifname, 1);
			free(ifname);
			MPI_Comm_free(&other);
		}
	}
	long mine[2] = { passed, failed }, all[2];
	MPI_Reduce(mine, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (wrank == 0)
		printf("mpi-check: %ld passed, %ld failed\n", all[0], all[1]);
	MPI_Bcast(all, 2, MPI_LONG, 0, MPI_COMM_WORLD);
	MPI_Finalize();
	return all[1] ? 1 : 0;
}
