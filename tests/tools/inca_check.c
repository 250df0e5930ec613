/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-check: one rank of a correctness run through libinca: every listed
 * collective x dtype x op x count, each result compared element by element
 * with the exact reference (reductions of inputs that are exact in any
 * order; allgather and bcast byte for byte, signed zeros and NaN payloads
 * among the bytes). Used by the functional tests; rank/size/group from the
 * INCA_* environment like any libinca program.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "expect.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: inca-check [-c COLLS] [-d TYPES] [-o OPS] [-n COUNTS] [-r REPEAT] [-i]\n"
		"                  [-R ROOT] [-p INFLIGHT] [-W US] [-s US] [-L RANK:US] [-A RANK:US [-E]]\n"
		"                  [-b]\n"
		"  -c  comma-separated collectives (allreduce,reduce,reduce_scatter,allgather,\n"
		"      bcast) or all (default allreduce)\n"
		"  -d  comma-separated dtypes (fp32,fp16,bf16,int32,int64,fp64) or all\n"
		"  -o  comma-separated ops (sum,min,max,prod,band,bor,bxor) or all; allgather\n"
		"      and bcast run once per dtype, whatever the ops\n"
		"  -n  comma-separated counts (default 1,3,257,1000): elements of the buffer,\n"
		"      or of one rank's shard (reduce_scatter's recvcount, allgather's sendcount)\n"
		"  -r  repeat each case R times (default 1)\n"
		"  -i  in place\n"
		"  -R  root of reduce and bcast (default: each case the next rank)\n"
		"  -p  start P copies of each case (nonblocking, P buffers), wait for them\n"
		"      latest first (default 1; at most 64)\n"
		"  -W  between starting the P copies and waiting for them, compute for US\n"
		"      microseconds (floating-point work, its result checked) without calling\n"
		"      libinca: the collectives overlap the computation (default 0)\n"
		"  -s  sleep US microseconds after each case (a job that lasts; at most 60 s;\n"
		"      default 0)\n"
		"  -L  rank RANK starts each case US microseconds after the others (a late\n"
		"      rank: a data loader or a pause; at most 60 s)\n"
		"  -A  rank RANK, in the first case only, is away for US microseconds between\n"
		"      starting its copies and waiting for them: its collectives in flight while\n"
		"      it makes no libinca call (a pause mid-step; at most 60 s)\n"
		"  -E  with -A: the away rank sends its contributions first (one inca_test of\n"
		"      each copy), so the others complete the collectives it has not\n"
		"  -b  also run barrier and bcast from every root\n"
		"Exit 0 when every element of every case is right.\n");
}

static int parse_list(const char *s, int (*parse)(const char *), int *out, int max)
{
	char buf[256], *save, *tok;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "all")) {
			for (int i = 0; i < max; i++)
				out[i] = i;
			return max;
		}
		int v = parse(tok);
		if (v < 0)
			return -1;
		out[n++] = v;
	}
	return n;
}

static const char *const coll_names[] = { "allreduce", "reduce", "reduce_scatter",
					   "allgather", "bcast" };

static int parse_coll(const char *s)
{
	for (int i = 0; i < 5; i++)
		if (!strcmp(s, coll_names[i]))
			return i;
	return -1;
}

static int parse_dtype(const char *s) { return agg_dtype_parse(s); }
static int parse_op(const char *s) { return agg_op_parse(s); }

/* Bytes only a copy keeps: rank r's input of case j, signed zeros and a
 * NaN payload among them. */
static void raw_bytes(uint8_t *b, size_t len, int r, int j)
{
	uint64_t x = (uint64_t)(r + 1) * 1000003u + (uint64_t)j * 7919u;

	for (size_t i = 0; i < len; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		b[i] = (uint8_t)(x >> 56);
	}
	if (len >= 8) {
		memcpy(b, &(double){ -0.0 }, 8);
		memcpy(b + len - 4, &(uint32_t){ 0x7fc12345 }, 4);
	}
}

struct check_case {
	int coll, dt, op, root, j;
	size_t n, es;
	bool in_place;
};

/* Fill buf (and the root's bcast buffer) for one copy of case k. */
static void prepare(const struct check_case *k, int rank, int size, uint8_t *in, uint8_t *out)
{
	size_t n = k->n, es = k->es, sz = (size_t)size;

	switch (k->coll) {
	case AGG_COLL_ALLREDUCE:
	case AGG_COLL_REDUCE:
		fill(k->dt, k->op, rank, in, n);
		memcpy(out, in, n * es);
		break;
	case AGG_COLL_REDUCE_SCATTER:
		fill(k->dt, k->op, rank, in, n * sz);
		memcpy(out, in, n * sz * es);
		break;
	case AGG_COLL_ALLGATHER:
		memset(out, 0x5a, n * sz * es);
		raw_bytes(in, n * es, rank, k->j);
		memcpy(out + (size_t)rank * n * es, in, n * es);
		break;
	case AGG_COLL_BCAST:
		raw_bytes(in, n * es, k->root, k->j);
		if (rank == k->root)
			memcpy(out, in, n * es);
		else
			memset(out, 0x5a, n * es);
		break;
	}
}

static int start(inca_comm_t *c, const struct check_case *k, int rank, const uint8_t *in,
		 uint8_t *out, inca_request_t **req)
{
	const void *sb = k->in_place ? INCA_IN_PLACE : in;

	switch (k->coll) {
	case AGG_COLL_ALLREDUCE:
		return inca_iallreduce(c, sb, out, k->n, k->dt, k->op, req);
	case AGG_COLL_REDUCE:
		return inca_ireduce(c, rank == k->root ? sb : in, out, k->n, k->dt, k->op,
				    k->root, req);
	case AGG_COLL_REDUCE_SCATTER:
		return inca_ireduce_scatter(c, sb, out, k->n, k->dt, k->op, req);
	case AGG_COLL_ALLGATHER:
		return inca_iallgather(c, sb, out, k->n, k->dt, req);
	default:
		return inca_ibcast(c, out, k->n, k->dt, k->root, req);
	}
}

/* The reference result of case k at rank (want), and its length in
 * elements; 0: nothing to check (reduce at a rank that is not the root). */
static size_t reference(const struct check_case *k, int rank, int size, uint8_t *want,
			uint8_t *scratch)
{
	size_t n = k->n, es = k->es, sz = (size_t)size;

	switch (k->coll) {
	case AGG_COLL_ALLREDUCE:
		expected(k->dt, k->op, size, want, n);
		return n;
	case AGG_COLL_REDUCE:
		if (rank != k->root)
			return 0;
		expected(k->dt, k->op, size, want, n);
		return n;
	case AGG_COLL_REDUCE_SCATTER:
		expected(k->dt, k->op, size, scratch, n * sz);
		memcpy(want, scratch + (size_t)rank * n * es, n * es);
		return n;
	case AGG_COLL_ALLGATHER:
		for (int r = 0; r < size; r++)
			raw_bytes(want + (size_t)r * n * es, n * es, r, k->j);
		return n * sz;
	default:
		raw_bytes(want, n * es, k->root, k->j);
		return n;
	}
}

/* What the cases share: the communicator, the buffers of P copies, the
 * running case number and the tallies. */
struct check_ctx {
	inca_comm_t *c;
	int rank, size, inflight, fixed_root, j, cases, bad;
	unsigned compute_us;
	int away_rank;             /* -A: this rank, in the first case, away */
	long away_us;
	bool away_sent;            /* -E: its contributions sent before */
	uint8_t *in[INCA_MAX_INFLIGHT], *out[INCA_MAX_INFLIGHT], *want, *scratch;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* The application's own work while collectives are in flight: us
 * microseconds of a recurrence whose result is known in closed form.
 * Returns false if the arithmetic came out wrong. */
static bool compute(unsigned us)
{
	double end = now_us() + us;
	uint64_t steps = 0;
	volatile double acc = 0;

	while (now_us() < end)
		for (int i = 0; i < 1000; i++, steps++)
			acc = acc + 1.0;
	return acc == (double)steps;
}

/* P copies of case k in flight, (-W) computation, waited latest first,
 * every element checked. Returns 0, or 1 when a call failed (said). */
static int run_case(struct check_ctx *x, struct check_case *k)
{
	inca_request_t *req[INCA_MAX_INFLIGHT];
	int started = 0, rc = 0;

	for (int p = 0; p < x->inflight && !rc; p++, started++) {
		k->j = x->j + p;
		k->root = x->fixed_root >= 0 ? x->fixed_root : k->j % x->size;
		prepare(k, x->rank, x->size, x->in[p], x->out[p]);
		rc = start(x->c, k, x->rank, x->in[p], x->out[p], &req[p]);
		if (rc)
			break;
	}
	if (!rc && x->rank == x->away_rank && x->away_us && x->cases == 0) {
		int done = 0;
		for (int p = 0; p < started && x->away_sent && !rc && !done; p++)
			rc = inca_test_timeout(req[p], 0, &done);
		if (done || rc) {
			/* their results came at once (the case is not the one asked
			 * for), or the call failed */
			fprintf(stderr, "inca-check: rank %d: -E: %s\n", x->rank,
				rc ? inca_comm_errmsg(x->c) :
				     "a collective completed before the rank went away");
			return 1;
		}
		fprintf(stderr, "inca-check: rank %d: away for %ld us with %d collectives in "
			"flight%s\n", x->rank, x->away_us, started,
			x->away_sent ? ", its contributions sent" : "");
		usleep((useconds_t)x->away_us);
	}
	if (!rc && x->compute_us && !compute(x->compute_us)) {
		fprintf(stderr, "inca-check: rank %d: the computation beside the collectives "
			"came out wrong\n", x->rank);
		x->bad++;
	}
	for (int p = started - 1; p >= 0; p--) {
		int w = inca_wait(req[p]);
		if (!rc)
			rc = w;
	}
	if (rc) {
		fprintf(stderr, "inca-check: rank %d: %s %s %s x %zu: %s: %s\n", x->rank,
			coll_names[k->coll], agg_dtype_name(k->dt), agg_op_name(k->op), k->n,
			inca_strerror(rc), inca_comm_errmsg(x->c));
		return 1;
	}
	for (int p = 0; p < x->inflight; p++, x->j++, x->cases++) {
		k->j = x->j;
		k->root = x->fixed_root >= 0 ? x->fixed_root : k->j % x->size;
		size_t len = reference(k, x->rank, x->size, x->want, x->scratch), wrong = 0;
		for (size_t i = 0; i < len; i++)
			wrong += memcmp(x->out[p] + i * k->es, x->want + i * k->es, k->es) != 0;
		if (wrong) {
			fprintf(stderr, "inca-check: rank %d: %s %s %s x %zu (root %d): %zu "
				"elements wrong\n", x->rank, coll_names[k->coll],
				agg_dtype_name(k->dt), agg_op_name(k->op), k->n, k->root, wrong);
			x->bad++;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	int colls[5] = { 0 }, ncoll = 1, dts[6] = { 0 }, ops[7] = { 0 }, ndt = 6, nop = 7, opt;
	int repeat = 1, fixed_root = -1, inflight = 1;
	long compute_us = 0, sleep_us = 0, late_us = 0, away_us = 0;
	int late_rank = -1, away_rank = -1;
	size_t counts[32] = { 1, 3, 257, 1000 };
	int ncount = 4;
	bool in_place = false, coll = false, away_sent = false;

	for (int i = 0; i < 6; i++)
		dts[i] = i;
	for (int i = 0; i < 7; i++)
		ops[i] = i;
	while ((opt = getopt(argc, argv, "c:d:o:n:r:R:p:W:s:L:A:Eibh")) != -1) {
		switch (opt) {
		case 'c':
			ncoll = parse_list(optarg, parse_coll, colls, 5);
			break;
		case 'd':
			ndt = parse_list(optarg, parse_dtype, dts, 6);
			break;
		case 'o':
			nop = parse_list(optarg, parse_op, ops, 7);
			break;
		case 'n': {
			char buf[512], *save, *tok;
			snprintf(buf, sizeof(buf), "%s", optarg);
			ncount = 0;
			for (tok = strtok_r(buf, ",", &save); tok && ncount < 32;
			     tok = strtok_r(NULL, ",", &save))
				counts[ncount++] = strtoull(tok, NULL, 0);
			break;
		}
		case 'r': repeat = atoi(optarg); break;
		case 'R': fixed_root = atoi(optarg); break;
		case 'p': inflight = atoi(optarg); break;
		case 'W': compute_us = atol(optarg); break;
		case 's': sleep_us = atol(optarg); break;
		case 'L':
		case 'A': {
			char *end;
			int r = (int)strtol(optarg, &end, 10);
			long us = *end == ':' ? strtol(end + 1, &end, 10) : -1;
			if (*end || r < 0)
				us = -1;
			if (opt == 'L') {
				late_rank = r;
				late_us = us;
			} else {
				away_rank = r;
				away_us = us;
			}
			break;
		}
		case 'i': in_place = true; break;
		case 'E': away_sent = true; break;
		case 'b': coll = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (away_sent && away_rank < 0) {
		fprintf(stderr, "inca-check: -E goes with -A RANK:US\n");
		return 2;
	}
	if (ncoll <= 0 || ndt <= 0 || nop <= 0 || ncount <= 0 || repeat < 1 || inflight < 1 ||
	    inflight > INCA_MAX_INFLIGHT || compute_us < 0 || compute_us > 10000000 ||
	    sleep_us < 0 || sleep_us > 60000000 || late_us < 0 || late_us > 60000000 ||
	    away_us < 0 || away_us > 60000000) {
		usage(stderr);
		return 2;
	}
	inca_comm_t *c;
	int rc = inca_comm_create(NULL, &c);
	if (rc) {
		fprintf(stderr, "inca-check: %s: %s\n", inca_strerror(rc), inca_last_errmsg());
		return 2;
	}
	struct check_ctx x = { .c = c, .rank = inca_comm_rank(c), .size = inca_comm_size(c),
			       .inflight = inflight, .fixed_root = fixed_root,
			       .compute_us = (unsigned)compute_us, .away_rank = away_rank,
			       .away_us = away_us, .away_sent = away_sent };
	if (fixed_root >= x.size) {
		fprintf(stderr, "inca-check: -R %d: not a rank (0..%d)\n", fixed_root, x.size - 1);
		return 2;
	}
	if (late_rank >= x.size) {
		fprintf(stderr, "inca-check: -L %d: not a rank (0..%d)\n", late_rank, x.size - 1);
		return 2;
	}
	if (away_rank >= x.size) {
		fprintf(stderr, "inca-check: -A %d: not a rank (0..%d)\n", away_rank, x.size - 1);
		return 2;
	}
	size_t maxc = 0;
	for (int i = 0; i < ncount; i++)
		if (counts[i] > maxc)
			maxc = counts[i];
	/* the largest buffer: a sharded collective's size x count of 8 bytes */
	size_t maxb = maxc * 8 * (size_t)x.size + 8;
	x.want = malloc(maxb);
	x.scratch = malloc(maxb);
	for (int p = 0; p < inflight; p++) {
		x.in[p] = malloc(maxb);
		x.out[p] = malloc(maxb);
		if (!x.in[p] || !x.out[p]) {
			fprintf(stderr, "inca-check: out of memory\n");
			return 2;
		}
	}
	if (!x.want || !x.scratch) {
		fprintf(stderr, "inca-check: out of memory\n");
		return 2;
	}
	for (int ki = 0; ki < ncoll; ki++)
		for (int di = 0; di < ndt; di++)
			for (int oi = 0; oi < nop; oi++)
				for (int ci = 0; ci < ncount; ci++)
					for (int r = 0; r < repeat; r++) {
						struct check_case k = {
							.coll = colls[ki], .dt = dts[di], .op = ops[oi],
							.n = counts[ci], .in_place = in_place,
							.es = agg_dtype_size((enum agg_dtype)dts[di]),
						};
						bool copies = k.coll == AGG_COLL_ALLGATHER ||
							      k.coll == AGG_COLL_BCAST;
						if (copies ? oi > 0 : agg_op_check((enum agg_dtype)k.dt,
										   (enum agg_op)k.op))
							continue;
						if (copies)
							k.op = INCA_SUM;
						if (x.rank == late_rank && late_us)
							usleep((useconds_t)late_us);
						if (run_case(&x, &k))
							return 1;
						if (sleep_us)
							usleep((useconds_t)sleep_us);
					}
	int rank = x.rank, size = x.size, bad = x.bad, cases = x.cases;
	if (coll) {
		cases++;
		rc = inca_barrier(c);
		if (rc) {
			fprintf(stderr, "inca-check: barrier: %s\n", inca_comm_errmsg(c));
			return 1;
		}
		for (int root = 0; root < size; root++) {
			double v[5] = { root + 0.5, -0.0, 1e300, -root, 42 };
			double got[5] = { 0 };
			if (rank == root)
				memcpy(got, v, sizeof(v));
			rc = inca_bcast(c, got, 5, INCA_FLOAT64, root);
			cases++;
			if (rc || memcmp(got, v, sizeof(v))) {
				fprintf(stderr, "inca-check: bcast from %d: %s\n", root,
					rc ? inca_comm_errmsg(c) : "wrong values");
				bad++;
			}
		}
	}
	struct inca_stats st;
	inca_comm_stats(c, &st);
	printf("inca-check: rank %d: %d cases, %d wrong; %llu packets, %llu retransmitted, "
	       "%llu duplicates ignored, %llu fallbacks, %llu PFC frames, %llu PFC waits, "
	       "%llu bytes sent, %llu bytes received, %llu plan changes, %llu replays, "
	       "%llu switch waits, %llu kept inputs (%llu bytes), %llu host-first "
	       "(%llu local bytes), %llu on rails, %llu empty polls (%.0f us CPU)\n",
	       rank, cases, bad,
	       (unsigned long long)st.packets_sent, (unsigned long long)st.retransmissions,
	       (unsigned long long)st.duplicates, (unsigned long long)st.fallbacks,
	       (unsigned long long)st.pfc_frames, (unsigned long long)st.pfc_waits,
	       (unsigned long long)st.bytes_sent, (unsigned long long)st.bytes_received,
	       (unsigned long long)st.plan_changes, (unsigned long long)st.replays,
	       (unsigned long long)st.switch_waits, (unsigned long long)st.kept_inputs,
	       (unsigned long long)st.kept_bytes, (unsigned long long)st.hier_calls,
	       (unsigned long long)st.local_bytes, (unsigned long long)st.rail_calls,
	       (unsigned long long)st.spin_polls, st.spin_cpu_us);
	inca_comm_destroy(c);
	for (int p = 0; p < inflight; p++) {
		free(x.in[p]);
		free(x.out[p]);
	}
	free(x.scratch);
	free(x.want);
	return bad ? 1 : 0;
}
