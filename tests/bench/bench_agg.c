/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Aggregation engine microbenchmark, one core: reduction GB/s on 1 KiB
 * payloads, CRC-32 GB/s, a 4 KiB contribution's ICRC and sum in one pass
 * against two, and ns per contribution for the whole ingest path (decode +
 * ICRC verify + slot lookup + reduce + completion check), 8 members.
 * Prints figures; asserts nothing about speed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inca/agg.h"

#define RUNS 7

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static volatile uint32_t sink;

/* GB/s of input reduced into an accumulator, 1 KiB payloads (L1-resident:
 * the kernel's own speed), every other call 2 bytes off alignment as
 * payloads in frames are. prod reduces a pattern near 1 (0x3f80 in every
 * half-word) so that it overflows to Inf rather than into subnormals,
 * whose microcode assists would time the data, not the kernel. */
static double bench_reduce(enum agg_dtype dtype, enum agg_op op, long iters)
{
	static uint8_t in[1024 + 64] __attribute__((aligned(64)));
	static uint64_t acc[1024 / 2] __attribute__((aligned(64)));
	size_t n = 1024 / agg_dtype_size(dtype);
	double gbs[RUNS];

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = op == AGG_OP_PROD ? (i & 1 ? 0x3f : 0x80)
					  : (uint8_t)(i * 7 + 1) & 0x3f;   /* small finite values */
	agg_acc_load(dtype, acc, in, n);
	for (int r = 0; r < RUNS; r++) {
		double t0 = now();
		for (long i = 0; i < iters; i++)
			agg_acc_reduce(dtype, op, acc, in + 2 * (i & 1), n - 1);
		double t = now() - t0;
		gbs[r] = (double)iters * (double)((n - 1) * agg_dtype_size(dtype)) / t / 1e9;
	}
	sink = (uint32_t)acc[0];
	return median(gbs, RUNS);
}

/* GB/s of wire bytes converted into the accumulator (a set's first
 * contribution) or out of it (the result), fp16/bf16's conversions */
static double bench_convert(enum agg_dtype dtype, bool store, long iters)
{
	static uint8_t wire[1024 + 64] __attribute__((aligned(64)));
	static float acc[1024] __attribute__((aligned(64)));
	size_t n = 1024 / agg_dtype_size(dtype);
	double gbs[RUNS];

	for (size_t i = 0; i < sizeof(wire); i++)
		wire[i] = (uint8_t)(i * 7 + 1) & 0x3f;
	agg_acc_load(dtype, acc, wire, n);
	for (int r = 0; r < RUNS; r++) {
		double t0 = now();
		for (long i = 0; i < iters; i++) {
			if (store)
				agg_acc_store(dtype, wire + 2 * (i & 1), acc, n - 1);
			else
				agg_acc_load(dtype, acc, wire + 2 * (i & 1), n - 1);
		}
		double t = now() - t0;
		gbs[r] = (double)iters * (double)((n - 1) * agg_dtype_size(dtype)) / t / 1e9;
	}
	sink = (uint32_t)acc[0] + wire[0];
	return median(gbs, RUNS);
}

/* Every dtype and op: GB/s, and the slowest op against the dtype's sum */
static void bench_reduce_all(long iters)
{
	static const enum agg_dtype order[] = { AGG_DTYPE_FP32, AGG_DTYPE_FP16, AGG_DTYPE_BF16,
						AGG_DTYPE_FP64, AGG_DTYPE_INT32, AGG_DTYPE_INT64 };
	double fp32_sum = 0;

	printf("reduce, 1 KiB payload, GB/s of input (median of %d runs)\n", RUNS);
	printf("%-6s %7s %7s %7s %7s %7s %7s %7s  %s\n", "dtype", "sum", "min", "max", "prod",
	       "band", "bor", "bxor", "slowest/sum  sum/fp32-sum");
	for (size_t d = 0; d < sizeof(order) / sizeof(order[0]); d++) {
		enum agg_dtype dt = order[d];
		double sum = 0, worst = 0;

		printf("%-6s", agg_dtype_name(dt));
		for (int op = AGG_OP_SUM; op < AGG_OP_COUNT; op++) {
			if (agg_op_check(dt, (enum agg_op)op)) {
				printf(" %7s", "-");
				continue;
			}
			double g = bench_reduce(dt, (enum agg_op)op, iters);
			if (op == AGG_OP_SUM)
				sum = g;
			if (worst == 0 || g < worst)
				worst = g;
			printf(" %7.2f", g);
			fflush(stdout);
		}
		if (dt == AGG_DTYPE_FP32)
			fp32_sum = sum;
		printf("  %11.2f  %11.2f\n", worst / sum, sum / fp32_sum);
	}
	printf("convert, 1 KiB of wire bytes, GB/s: fp16 in %.2f, out %.2f; bf16 in %.2f, out %.2f\n",
	       bench_convert(AGG_DTYPE_FP16, false, iters), bench_convert(AGG_DTYPE_FP16, true, iters),
	       bench_convert(AGG_DTYPE_BF16, false, iters), bench_convert(AGG_DTYPE_BF16, true, iters));
}

/* CRC-32 GB/s with impl over len bytes (L1-resident, as a packet's). */
static double bench_crc(enum agg_crc_impl impl, size_t len, long iters)
{
	static uint8_t buf[4096 + 64] __attribute__((aligned(64)));
	double gbs[RUNS];
	uint32_t c = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	for (int r = 0; r < RUNS; r++) {
		double t0 = now();
		for (long i = 0; i < iters; i++)
			c = agg_crc32_with(impl, c, buf + (i & 1) * 2, len);
		gbs[r] = (double)len * (double)iters / (now() - t0) / 1e9;
	}
	sink = c;
	return median(gbs, RUNS);
}

/* Every CRC-32 implementation this CPU has, on the sizes of a packet's
 * ICRC: the payload of a 1 KiB contribution and a 4 KiB one */
static void bench_crc_all(long iters)
{
	printf("crc32, GB/s (median of %d runs; agg_crc32 uses %s)\n", RUNS,
	       agg_crc32_impl_name(agg_crc32_impl_best()));
	for (int impl = 0; impl < AGG_CRC__COUNT; impl++) {
		enum agg_crc_impl im = (enum agg_crc_impl)impl;
		if (!agg_crc32_impl_available(im)) {
			printf("  %-18s not on this CPU\n", agg_crc32_impl_name(im));
			continue;
		}
		double k1 = bench_crc(im, 1024 + 60, iters);
		double k4 = bench_crc(im, 4096 + 60, iters / 4);
		printf("  %-18s 1084 B %6.2f   4156 B %6.2f\n", agg_crc32_impl_name(im), k1, k4);
	}
}

/* A 4 KiB contribution's ICRC check and its sum (L1-resident): in one pass
 * (agg_icrc_reduce, as the switch does it), in two (agg_icrc_ipv4, then
 * agg_acc_reduce), and the ICRC alone; and for fp16/bf16 the last
 * member's, rounded to the wire in the same pass (agg_icrc_reduce_store)
 * against the sum then agg_acc_store. ns per contribution. */
static void bench_icrc_reduce(long iters)
{
	static const struct { enum agg_dtype dt; const char *name; } kinds[] = {
		{ AGG_DTYPE_FP32, "fp32" }, { AGG_DTYPE_FP16, "fp16" }, { AGG_DTYPE_BF16, "bf16" },
		{ AGG_DTYPE_INT32, "int32" }, { AGG_DTYPE_FP64, "fp64" },
	};
	static uint8_t frame[AGG_MAX_FRAME_LEN], payload[4096];
	static uint8_t acc[8192] __attribute__((aligned(64))), out[8192] __attribute__((aligned(64)));
	uint32_t c = 0;

	printf("ICRC and sum of a 4 KiB contribution, ns (median of %d runs; %s: %s):\n", RUNS,
	       agg_crc32_impl_name(agg_crc32_impl_best()),
	       agg_icrc_reduce_available(AGG_DTYPE_FP32, AGG_OP_SUM, false) ?
	       "one pass" : "no one-pass kernel, agg_icrc_reduce takes two");
	printf("dtype    one pass  two passes  ICRC alone   last, one pass  last, sum + store\n");
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 1) & 0x3f;   /* small finite values */
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		enum agg_dtype dt = kinds[k].dt;
		uint16_t n = (uint16_t)(4096 / agg_dtype_size(dt));
		struct agg_frame_spec s = {
			.src_ip = 0x0a000001, .dst_ip = 0x0a0000fe, .dest_qp = 0x100, .qkey = 1,
			.src_qp = 0x101,
			.hdr = { .version = AGG_VERSION, .type = AGG_TYPE_CONTRIB, .dtype = dt,
				 .op = AGG_OP_SUM, .count = n, .group_id = 1, .fanin = 1 },
		};
		struct agg_pkt pkt;
		double t[5][RUNS];
		bool half = agg_dtype_acc_size(dt) != agg_dtype_size(dt);
		int len = agg_encode(frame, sizeof(frame), &s, payload);

		if (len < 0 || agg_decode_lazy(frame, (size_t)len, &pkt)) {
			printf("%-7s (no frame)\n", kinds[k].name);
			continue;
		}
		agg_acc_load(dt, acc, payload, n);
		for (int r = 0; r < RUNS; r++) {
			double t0 = now();
			for (long i = 0; i < iters; i++)
				c ^= agg_icrc_reduce(&pkt, (i & 1) ? out : acc, (i & 1) ? acc : out);
			double t1 = now();
			for (long i = 0; i < iters; i++) {
				c ^= agg_icrc_ipv4(frame + pkt.l3_off, pkt.ip_len);
				agg_acc_reduce(dt, AGG_OP_SUM, acc, pkt.payload, n);
			}
			double t2 = now();
			for (long i = 0; i < iters; i++)
				c ^= agg_icrc_ipv4(frame + pkt.l3_off, pkt.ip_len);
			double t3 = now();
			for (long i = 0; half && i < iters; i++)
				c ^= agg_icrc_reduce_store(&pkt, out, acc);
			double t4 = now();
			for (long i = 0; half && i < iters; i++) {
				c ^= agg_icrc_reduce(&pkt, out, acc);
				agg_acc_store(dt, out + 8192 - 4096, out, n);
			}
			double t5 = now();
			t[0][r] = (t1 - t0) / (double)iters * 1e9;
			t[1][r] = (t2 - t1) / (double)iters * 1e9;
			t[2][r] = (t3 - t2) / (double)iters * 1e9;
			t[3][r] = (t4 - t3) / (double)iters * 1e9;
			t[4][r] = (t5 - t4) / (double)iters * 1e9;
		}
		printf("%-7s %9.1f %11.1f %11.1f", kinds[k].name, median(t[0], RUNS),
		       median(t[1], RUNS), median(t[2], RUNS));
		if (half)
			printf(" %16.1f %18.1f\n", median(t[3], RUNS), median(t[4], RUNS));
		else
			printf(" %16s %18s\n", "-", "-");
	}
	sink = c;
}

/* Whole ingest path: W slots, nmembers contributions each, 1 KiB of
 * elements; optionally also one result frame per member per completion. */
static void bench_ingest(enum agg_dtype dtype, uint16_t nmembers, long rounds,
			 bool with_results)
{
	enum { W = 64 };
	uint16_t e = (uint16_t)(1024 / agg_dtype_size(dtype));
	struct agg_member members[64];
	struct agg_group_config cfg = {
		.group_id = 1, .qpn = 0x100, .qkey = 0x1234, .nmembers = nmembers,
		.window = W, .elems_per_pkt = e, .members = members,
	};
	static uint8_t frames[64][2][W][AGG_FRAME_HDR_LEN + 1024 + 8];
	static int lens[64][2][W];
	static uint8_t payload[1024], out[AGG_MAX_FRAME_LEN];
	struct agg_result_l2 l2 = { .switch_ip = 0x0a0000fe };
	double ns[RUNS];
	uint64_t bytes_out = 0;

	for (uint16_t m = 0; m < nmembers; m++)
		members[m] = (struct agg_member){ .ip = 0x0a000001u + m,
						  .qpn = 0x200u + m, .fanin = 1 };
	struct agg_group *g = agg_group_create(&cfg, NULL);
	if (!g) {
		fprintf(stderr, "bench: group create failed\n");
		exit(1);
	}
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i & 0x3f);
	for (uint16_t m = 0; m < nmembers; m++)
		for (int set = 0; set < 2; set++)
			for (int s = 0; s < W; s++) {
				struct agg_frame_spec sp = {
					.src_ip = members[m].ip, .dst_ip = 0x0a0000fe,
					.dest_qp = 0x100, .qkey = 0x1234,
					.src_qp = members[m].qpn,
					.hdr = { .version = 1, .type = AGG_TYPE_CONTRIB,
						 .dtype = dtype, .op = AGG_OP_SUM,
						 .flags = (uint8_t)set, .count = e,
						 .group_id = 1, .rank = m, .fanin = 1,
						 .slot = (uint16_t)s },
				};
				lens[m][set][s] = agg_encode(frames[m][set][s],
							     sizeof(frames[m][set][s]),
							     &sp, payload);
			}
	for (int r = 0; r < RUNS; r++) {
		uint64_t n = 0;
		double t0 = now();
		for (long k = 0; k < rounds; k++) {
			int set = (int)(k & 1);
			for (int s = 0; s < W; s++)
				for (uint16_t m = 0; m < nmembers; m++) {
					struct agg_pkt pkt;
					struct agg_result res;
					uint8_t *f = frames[m][set][s];
					if (agg_decode(f, (size_t)lens[m][set][s], true, &pkt))
						abort();
					int v = agg_group_ingest(g, &pkt, &res, NULL);
					n++;
					if (v == AGG_V_COMPLETE && with_results)
						for (uint16_t d = 0; d < nmembers; d++)
							bytes_out += (uint64_t)agg_result_encode(
								g, d, &res, &l2, NULL, out, sizeof(out));
				}
			/* the frames keep their keys: forget the slots so the
			 * next round is new uses, not retransmissions */
			agg_group_reset(g);
		}
		ns[r] = (now() - t0) * 1e9 / (double)n;
	}
	sink = (uint32_t)bytes_out;
	const struct agg_group_stats *st = agg_group_stats(g);
	if (st->completions != (uint64_t)RUNS * (uint64_t)rounds * W) {
		fprintf(stderr, "bench: %llu completions, want %llu\n",
			(unsigned long long)st->completions,
			(unsigned long long)RUNS * (unsigned long long)rounds * W);
		exit(1);
	}
	double med = median(ns, RUNS);
	printf("ingest  %-5s %2u members, 1 KiB%s: %7.1f ns/contribution, "
	       "%.2f Mcontrib/s, %.2f Gbit/s of contributions\n",
	       agg_dtype_name(dtype), nmembers,
	       with_results ? " + results" : "          ", med, 1e3 / med,
	       (double)(lens[0][0][0]) * 8 / med);
	agg_group_destroy(g);
}

int main(int argc, char **argv)
{
	long scale = 1;
	int opt;

	while ((opt = getopt(argc, argv, "s:C:h")) != -1) {
		switch (opt) {
		case 'C': {
			int impl = agg_crc32_impl_parse(optarg);
			if (impl < 0 || agg_crc32_impl_use((enum agg_crc_impl)impl)) {
				fprintf(stderr, "bench_agg: -C %s: not a CRC-32 this CPU has\n",
					optarg);
				return 2;
			}
			break;
		}
		case 's':
			scale = strtol(optarg, NULL, 0);
			if (scale < 1 || scale > 1000) {
				fprintf(stderr, "bench_agg: -s wants 1..1000\n");
				return 2;
			}
			break;
		case 'h':
			printf("Usage: inca-bench-agg [-s SCALE] [-C CRC]\n"
			       "  Aggregation engine figures on one core; SCALE multiplies\n"
			       "  the iterations (default 1, about 10 s in all). CRC: the\n"
			       "  CRC-32 the ICRC and the one-pass kernels use (slice-by-8,\n"
			       "  pclmulqdq, vpclmulqdq-avx2, vpclmulqdq-avx512; default the\n"
			       "  widest this CPU has).\n");
			return 0;
		default:
			return 2;
		}
	}
	printf("# INCA aggregation engine, one core; medians of %d runs\n", RUNS);
	bench_reduce_all(100000 * scale);
	bench_crc_all(100000 * scale);
	bench_icrc_reduce(20000 * scale);
	bench_ingest(AGG_DTYPE_FP32, 8, 200 * scale, false);
	bench_ingest(AGG_DTYPE_BF16, 8, 200 * scale, false);
	bench_ingest(AGG_DTYPE_FP32, 8, 200 * scale, true);
	return 0;
}
