/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-check: one rank of a correctness run through libinca: every listed
 * dtype x op x count, each result compared element by element with the
 * exact reference. Used by the functional tests; rank/size/group from the
 * INCA_* environment like any libinca program.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: inca-check [-d TYPES] [-o OPS] [-n COUNTS] [-r REPEAT] [-i]\n"
		"  -d  comma-separated dtypes (fp32,fp16,bf16,int32,int64,fp64) or all\n"
		"  -o  comma-separated ops (sum,min,max,prod,band,bor,bxor) or all\n"
		"  -n  comma-separated element counts (default 1,3,257,1000)\n"
		"  -r  repeat each case R times (default 1)\n"
		"  -i  in place\n"
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

static int parse_dtype(const char *s) { return agg_dtype_parse(s); }
static int parse_op(const char *s) { return agg_op_parse(s); }

int main(int argc, char **argv)
{
	int dts[6] = { 0 }, ops[7] = { 0 }, ndt = 6, nop = 7, opt, repeat = 1;
	size_t counts[32] = { 1, 3, 257, 1000 };
	int ncount = 4;
	bool in_place = false, coll = false;

	for (int i = 0; i < 6; i++)
		dts[i] = i;
	for (int i = 0; i < 7; i++)
		ops[i] = i;
	while ((opt = getopt(argc, argv, "d:o:n:r:ibh")) != -1) {
		switch (opt) {
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
		case 'i': in_place = true; break;
		case 'b': coll = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (ndt <= 0 || nop <= 0 || ncount <= 0 || repeat < 1) {
		usage(stderr);
		return 2;
	}
	inca_comm_t *c;
	int rc = inca_comm_create(NULL, &c);
	if (rc) {
		fprintf(stderr, "inca-check: %s: %s\n", inca_strerror(rc), inca_last_errmsg());
		return 2;
	}
	int rank = inca_comm_rank(c), size = inca_comm_size(c), bad = 0, cases = 0;
	size_t maxc = 0;
	for (int i = 0; i < ncount; i++)
		if (counts[i] > maxc)
			maxc = counts[i];
	uint8_t *in = malloc(maxc * 8 + 8), *out = malloc(maxc * 8 + 8), *want = malloc(maxc * 8 + 8);
	if (!in || !out || !want) {
		fprintf(stderr, "inca-check: out of memory\n");
		return 2;
	}
	for (int di = 0; di < ndt; di++)
		for (int oi = 0; oi < nop; oi++)
			for (int ci = 0; ci < ncount; ci++)
				for (int r = 0; r < repeat; r++) {
					int dt = dts[di], op = ops[oi];
					size_t n = counts[ci], es = agg_dtype_size((enum agg_dtype)dt);
					if (agg_op_check((enum agg_dtype)dt, (enum agg_op)op))
						continue;
					fill(dt, op, rank, in, n);
					expected(dt, op, size, want, n);
					if (in_place)
						memcpy(out, in, n * es);
					rc = inca_allreduce(c, in_place ? INCA_IN_PLACE : in, out, n, dt, op);
					cases++;
					if (rc) {
						fprintf(stderr, "inca-check: rank %d: %s %s x %zu: %s: %s\n",
							rank, agg_dtype_name(dt), agg_op_name(op), n,
							inca_strerror(rc), inca_comm_errmsg(c));
						return 1;
					}
					size_t wrong = 0;
					for (size_t i = 0; i < n; i++)
						wrong += memcmp(out + i * es, want + i * es, es) != 0;
					if (wrong) {
						fprintf(stderr, "inca-check: rank %d: %s %s x %zu: %zu "
							"elements wrong\n", rank, agg_dtype_name(dt),
							agg_op_name(op), n, wrong);
						bad++;
					}
				}
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
	       "%llu duplicates ignored, %llu fallbacks, %llu PFC frames, %llu PFC waits\n",
	       rank, cases, bad,
	       (unsigned long long)st.packets_sent, (unsigned long long)st.retransmissions,
	       (unsigned long long)st.duplicates, (unsigned long long)st.fallbacks,
	       (unsigned long long)st.pfc_frames, (unsigned long long)st.pfc_waits);
	inca_comm_destroy(c);
	free(in);
	free(out);
	free(want);
	return bad ? 1 : 0;
}
