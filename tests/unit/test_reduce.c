/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduction kernels against plain scalar references on random data, and
 * the edge cases docs/protocol.md promises (NaN, Inf, signed zero,
 * subnormals, overflow). fp16 references use the compiler's _Float16.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

#define NCONTRIB 5
#define MAXN 1031

static float ref_fp16_to_fp32(uint16_t h)
{
	_Float16 v;
	memcpy(&v, &h, 2);
	return (float)v;
}

static uint16_t ref_fp32_to_fp16(float f)
{
	_Float16 v = (_Float16)f;
	uint16_t h;
	memcpy(&h, &v, 2);
	return h;
}

/* bf16 by exact arithmetic: the nearer of the two truncations, ties to
 * the even one; a step past the largest finite value counts as 2^128. */
static uint16_t ref_fp32_to_bf16(float f)
{
	uint32_t u, lo, hi;
	float flo, fhi;
	double dhi;

	memcpy(&u, &f, 4);
	if (isnan(f))
		return (uint16_t)(u >> 16 | 0x40);
	lo = u & 0xffff0000u;
	if (lo == u)
		return (uint16_t)(u >> 16);                  /* exact, or Inf */
	hi = lo + 0x10000u;
	memcpy(&flo, &lo, 4);
	memcpy(&fhi, &hi, 4);
	dhi = (hi & 0x7fffffffu) == 0x7f800000u ? copysign(ldexp(1.0, 128), f)
						 : (double)fhi;
	double dlo = fabs((double)f - (double)flo);
	double dup = fabs(dhi - (double)f);
	if (dlo < dup || (dlo == dup && !((lo >> 16) & 1)))
		return (uint16_t)(lo >> 16);
	return (uint16_t)(hi >> 16);
}

static void test_fp16_to_fp32_exhaustive(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 65536; h++) {
		float a = agg_fp16_to_fp32((uint16_t)h);
		float b = ref_fp16_to_fp32((uint16_t)h);
		if (isnan(b)) {
			assert_true(isnan(a));
			continue;
		}
		uint32_t ua, ub;
		memcpy(&ua, &a, 4);
		memcpy(&ub, &b, 4);
		if (ua != ub)
			fail_msg("fp16 %#06x -> %#010x, want %#010x", h, ua, ub);
	}
}

static void check_fp32_to_half(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	uint16_t a = agg_fp32_to_fp16(f), b = ref_fp32_to_fp16(f);
	if (isnan(f)) {
		assert_true((a & 0x7c00) == 0x7c00 && (a & 0x3ff));
		assert_true((a & 0x200) != 0);           /* quiet */
	} else if (a != b) {
		fail_msg("fp32 %#010x -> fp16 %#06x, want %#06x", u, a, b);
	}
	uint16_t c = agg_fp32_to_bf16(f), d = ref_fp32_to_bf16(f);
	if (c != d)
		fail_msg("fp32 %#010x -> bf16 %#06x, want %#06x", u, c, d);
}

static void test_fp32_to_half_rounding(void **state)
{
	(void)state;
	test_seed_init("fp32_to_half_rounding");
	/* every exponent with mantissas at and around the rounding points */
	for (uint32_t e = 0; e < 256; e++)
		for (uint32_t m = 0; m < 64; m++) {
			uint32_t base = e << 23;
			uint32_t mants[] = { m, m << 13, (m << 13) | 0x1000,
					     (m << 13) | 0xfff, (m << 13) | 0x1001,
					     (m << 16) | 0x8000, (m << 16) | 0x7fff,
					     (m << 16) | 0x8001, 0x7fffff - m };
			for (size_t k = 0; k < 9; k++) {
				check_fp32_to_half(base | (mants[k] & 0x7fffff));
				check_fp32_to_half(0x80000000u | base |
						   (mants[k] & 0x7fffff));
			}
		}
	for (int i = 0; i < 2000000; i++)
		check_fp32_to_half((uint32_t)test_rand64());
}

/* ---- kernels vs scalar reference ---- */

static float rand_float(int op)
{
	double r = (double)test_rand64() / 18446744073709551616.0;
	if (op == AGG_OP_PROD)
		return (float)(0.5 + 1.5 * r);
	return (float)((r - 0.5) * 2000.0);
}

static void fill_random(int dt, int op, uint8_t *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float f = rand_float(op);
		double d = (double)f + (double)test_rand64() * 1e-30;
		uint16_t h;
		switch (dt) {
		case AGG_DTYPE_FP32:
			memcpy(buf + 4 * i, &f, 4);
			break;
		case AGG_DTYPE_FP64:
			memcpy(buf + 8 * i, &d, 8);
			break;
		case AGG_DTYPE_FP16:
			h = ref_fp32_to_fp16(f / 4);
			memcpy(buf + 2 * i, &h, 2);
			break;
		case AGG_DTYPE_BF16:
			h = ref_fp32_to_bf16(f);
			memcpy(buf + 2 * i, &h, 2);
			break;
		case AGG_DTYPE_INT32:
		case AGG_DTYPE_INT64: {
			uint64_t v = test_rand64();
			memcpy(buf + agg_dtype_size(dt) * i, &v, agg_dtype_size(dt));
			break;
		}
		}
	}
}

static double ref_load(int dt, const uint8_t *p, size_t i)
{
	float f;
	double d;
	uint16_t h;
	switch (dt) {
	case AGG_DTYPE_FP32: memcpy(&f, p + 4 * i, 4); return f;
	case AGG_DTYPE_FP64: memcpy(&d, p + 8 * i, 8); return d;
	case AGG_DTYPE_FP16: memcpy(&h, p + 2 * i, 2); return ref_fp16_to_fp32(h);
	case AGG_DTYPE_BF16: {
		memcpy(&h, p + 2 * i, 2);
		uint32_t u = (uint32_t)h << 16;
		memcpy(&f, &u, 4);
		return f;
	}
	}
	return 0;
}

static void ref_reduce_float(int dt, int op, uint8_t in[NCONTRIB][MAXN * 8],
			     size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		if (dt == AGG_DTYPE_FP64) {
			double a = ref_load(dt, in[0], i);
			for (int k = 1; k < NCONTRIB; k++) {
				double b = ref_load(dt, in[k], i);
				a = op == AGG_OP_SUM ? a + b : op == AGG_OP_PROD ? a * b :
				    op == AGG_OP_MIN ? (b < a ? b : a) : (b > a ? b : a);
			}
			memcpy(out + 8 * i, &a, 8);
			continue;
		}
		float a = (float)ref_load(dt, in[0], i);
		for (int k = 1; k < NCONTRIB; k++) {
			float b = (float)ref_load(dt, in[k], i);
			a = op == AGG_OP_SUM ? a + b : op == AGG_OP_PROD ? a * b :
			    op == AGG_OP_MIN ? (b < a ? b : a) : (b > a ? b : a);
		}
		uint16_t h;
		switch (dt) {
		case AGG_DTYPE_FP32: memcpy(out + 4 * i, &a, 4); break;
		case AGG_DTYPE_FP16: h = ref_fp32_to_fp16(a); memcpy(out + 2 * i, &h, 2); break;
		case AGG_DTYPE_BF16: h = ref_fp32_to_bf16(a); memcpy(out + 2 * i, &h, 2); break;
		}
	}
}

static uint64_t ref_int_op(int op, uint64_t a, uint64_t b)
{
	switch (op) {
	case AGG_OP_SUM: return a + b;
	case AGG_OP_PROD: return a * b;
	case AGG_OP_BAND: return a & b;
	case AGG_OP_BOR: return a | b;
	case AGG_OP_BXOR: return a ^ b;
	}
	return 0;
}

static void ref_reduce_int(int dt, int op, uint8_t in[NCONTRIB][MAXN * 8],
			   size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		if (dt == AGG_DTYPE_INT32) {
			int32_t a, b;
			memcpy(&a, in[0] + 4 * i, 4);
			for (int k = 1; k < NCONTRIB; k++) {
				memcpy(&b, in[k] + 4 * i, 4);
				if (op == AGG_OP_MIN)
					a = b < a ? b : a;
				else if (op == AGG_OP_MAX)
					a = b > a ? b : a;
				else
					a = (int32_t)(uint32_t)ref_int_op(op, (uint32_t)a, (uint32_t)b);
			}
			memcpy(out + 4 * i, &a, 4);
		} else {
			int64_t a, b;
			memcpy(&a, in[0] + 8 * i, 8);
			for (int k = 1; k < NCONTRIB; k++) {
				memcpy(&b, in[k] + 8 * i, 8);
				if (op == AGG_OP_MIN)
					a = b < a ? b : a;
				else if (op == AGG_OP_MAX)
					a = b > a ? b : a;
				else
					a = (int64_t)ref_int_op(op, (uint64_t)a, (uint64_t)b);
			}
			memcpy(out + 8 * i, &a, 8);
		}
	}
}

static void test_kernels_vs_reference(void **state)
{
	static uint8_t in[NCONTRIB][MAXN * 8];
	static uint8_t want[MAXN * 8], got[MAXN * 8 + 1];
	static uint64_t acc[MAXN];
	static const size_t sizes[] = { 1, 2, 3, 7, 8, 15, 16, 17, 31, 64, 255,
					256, 257, 1000, MAXN };

	(void)state;
	test_seed_init("kernels_vs_reference");
	for (int dt = 0; dt < AGG_DTYPE_COUNT; dt++)
		for (int op = 0; op < AGG_OP_COUNT; op++) {
			if (agg_op_check(dt, op))
				continue;
			for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
				size_t n = sizes[si], es = agg_dtype_size(dt);
				/* odd input offset: payloads are unaligned in frames */
				uint8_t *unaligned = got + 1;

				for (int k = 0; k < NCONTRIB; k++)
					fill_random(dt, op, in[k], n);
				if (agg_dtype_is_float(dt))
					ref_reduce_float(dt, op, in, n, want);
				else
					ref_reduce_int(dt, op, in, n, want);

				memcpy(unaligned, in[0], n * es);
				assert_int_equal(agg_acc_load(dt, acc, unaligned, n), 0);
				for (int k = 1; k < NCONTRIB; k++) {
					memcpy(unaligned, in[k], n * es);
					assert_int_equal(agg_acc_reduce(dt, op, acc,
									unaligned, n), 0);
				}
				assert_int_equal(agg_acc_store(dt, unaligned, acc, n), 0);
				if (memcmp(unaligned, want, n * es))
					fail_msg("%s %s n=%zu differs from reference",
						 agg_dtype_name(dt), agg_op_name(op), n);
			}
		}
}

/* ---- documented edge cases ---- */

static float f32r(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f32u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* reduce two fp32 values with op, return the stored bits */
static uint32_t red2(int op, float a, float b)
{
	float acc, out;
	agg_acc_load(AGG_DTYPE_FP32, &acc, &a, 1);
	agg_acc_reduce(AGG_DTYPE_FP32, op, &acc, &b, 1);
	agg_acc_store(AGG_DTYPE_FP32, &out, &acc, 1);
	return f32u(out);
}

static void test_float_edge_cases(void **state)
{
	const float inf = INFINITY, nan = NAN;

	(void)state;
	/* signed zero: minimum prefers -0, maximum +0, in both orders */
	assert_int_equal(red2(AGG_OP_MIN, 0.0f, -0.0f), 0x80000000u);
	assert_int_equal(red2(AGG_OP_MIN, -0.0f, 0.0f), 0x80000000u);
	assert_int_equal(red2(AGG_OP_MAX, 0.0f, -0.0f), 0);
	assert_int_equal(red2(AGG_OP_MAX, -0.0f, 0.0f), 0);
	assert_int_equal(red2(AGG_OP_SUM, -0.0f, -0.0f), 0x80000000u);
	assert_int_equal(red2(AGG_OP_SUM, -0.0f, 0.0f), 0);
	/* NaN propagates through every op, in either position */
	for (int op = AGG_OP_SUM; op <= AGG_OP_PROD; op++) {
		assert_true(isnan(f32r(red2(op, nan, 1.0f))));
		assert_true(isnan(f32r(red2(op, 1.0f, nan))));
		assert_true(isnan(f32r(red2(op, -inf, nan))));
	}
	/* IEEE infinities */
	assert_true(isnan(f32r(red2(AGG_OP_SUM, inf, -inf))));
	assert_int_equal(red2(AGG_OP_SUM, inf, 1e38f), f32u(inf));
	assert_int_equal(red2(AGG_OP_MIN, -inf, -1e38f), f32u(-inf));
	assert_true(isnan(f32r(red2(AGG_OP_PROD, inf, 0.0f))));
	/* overflow to Inf, subnormals kept (no flush to zero) */
	assert_int_equal(red2(AGG_OP_SUM, 3e38f, 3e38f), f32u(inf));
	assert_int_equal(red2(AGG_OP_SUM, f32r(1), f32r(1)), 2);
	assert_int_equal(red2(AGG_OP_MAX, f32r(1), 0.0f), 1);

	/* fp16: accumulate in fp32, round once on output */
	uint16_t h[2] = { 0x7bff, 0x7bff }, o;  /* 65504 + 65504 */
	float acc;
	agg_acc_load(AGG_DTYPE_FP16, &acc, &h[0], 1);
	agg_acc_reduce(AGG_DTYPE_FP16, AGG_OP_SUM, &acc, &h[1], 1);
	assert_true(acc == 131008.0f);
	agg_acc_store(AGG_DTYPE_FP16, &o, &acc, 1);
	assert_int_equal(o, 0x7c00);                 /* +Inf */
	/* 1 + 2^-11 + 2^-11: each partial alone would round back to 1 in
	 * fp16; in fp32 the sum is 1 + 2^-10, exactly representable */
	uint16_t one = 0x3c00, tiny = 0x1000;         /* 2^-11 */
	agg_acc_load(AGG_DTYPE_FP16, &acc, &one, 1);
	agg_acc_reduce(AGG_DTYPE_FP16, AGG_OP_SUM, &acc, &tiny, 1);
	agg_acc_reduce(AGG_DTYPE_FP16, AGG_OP_SUM, &acc, &tiny, 1);
	agg_acc_store(AGG_DTYPE_FP16, &o, &acc, 1);
	assert_int_equal(o, 0x3c01);
	/* fp16 subnormal survives */
	uint16_t sub = 0x0001;
	agg_acc_load(AGG_DTYPE_FP16, &acc, &sub, 1);
	agg_acc_reduce(AGG_DTYPE_FP16, AGG_OP_SUM, &acc, &sub, 1);
	agg_acc_store(AGG_DTYPE_FP16, &o, &acc, 1);
	assert_int_equal(o, 0x0002);
	/* bf16 NaN stays NaN, sign kept, quiet */
	uint16_t bnan = 0xff81;  /* negative signalling NaN */
	agg_acc_load(AGG_DTYPE_BF16, &acc, &bnan, 1);
	agg_acc_store(AGG_DTYPE_BF16, &o, &acc, 1);
	assert_int_equal(o & 0xffc0, 0xffc0);
	/* bf16 max finite + itself overflows to Inf */
	uint16_t bmax = 0x7f7f;
	agg_acc_load(AGG_DTYPE_BF16, &acc, &bmax, 1);
	agg_acc_reduce(AGG_DTYPE_BF16, AGG_OP_SUM, &acc, &bmax, 1);
	agg_acc_store(AGG_DTYPE_BF16, &o, &acc, 1);
	assert_int_equal(o, 0x7f80);

	/* fp64 signed zero and NaN */
	double d0 = 0.0, dm0 = -0.0, dacc, dn = NAN, dout;
	agg_acc_load(AGG_DTYPE_FP64, &dacc, &d0, 1);
	agg_acc_reduce(AGG_DTYPE_FP64, AGG_OP_MIN, &dacc, &dm0, 1);
	agg_acc_store(AGG_DTYPE_FP64, &dout, &dacc, 1);
	assert_true(signbit(dout) && dout == 0.0);
	agg_acc_reduce(AGG_DTYPE_FP64, AGG_OP_MAX, &dacc, &dn, 1);
	assert_true(isnan(dacc));
}

/* A result written in bulk (the vector bodies) is, value for value, what
 * the one-value conversions give: the rounding points of every exponent
 * (as test_fp32_to_half_rounding), NaNs, and random bits. */
static void check_bulk_store(const uint32_t *v, size_t n)
{
	static uint16_t out[4096 + 1];

	for (int bf = 0; bf < 2; bf++) {
		int dt = bf ? AGG_DTYPE_BF16 : AGG_DTYPE_FP16;
		assert_int_equal(agg_acc_store(dt, out + 1, v, n), 0);    /* 2-byte aligned */
		for (size_t i = 0; i < n; i++) {
			float f;
			memcpy(&f, &v[i], 4);
			uint16_t want = bf ? agg_fp32_to_bf16(f) : agg_fp32_to_fp16(f);
			if (out[1 + i] != want)
				fail_msg("%s store of 0x%08x: 0x%04x, one at a time 0x%04x",
					 agg_dtype_name(dt), v[i], out[1 + i], want);
		}
	}
}

static void test_bulk_store(void **state)
{
	static uint32_t v[4096];
	size_t n = 0;

	(void)state;
	test_seed_init("bulk_store");
	for (uint32_t e = 0; e < 256; e++)
		for (uint32_t m = 0; m < 64; m += 4) {
			uint32_t mants[] = { m << 13, (m << 13) | 0x1000, (m << 13) | 0xfff,
					     (m << 16) | 0x8000, (m << 16) | 0x7fff, 0x7fffff - m };
			for (size_t k = 0; k < 6; k++) {
				v[n++] = e << 23 | (mants[k] & 0x7fffff);
				v[n++] = 0x80000000u | e << 23 | (mants[k] & 0x7fffff);
				if (n == 4096) {
					check_bulk_store(v, n);
					n = 0;
				}
			}
		}
	check_bulk_store(v, n);
	for (int r = 0; r < 200; r++) {
		for (size_t i = 0; i < 4096; i++)
			v[i] = (uint32_t)test_rand64();
		check_bulk_store(v, 4096 - (size_t)r % 9);
	}
}

/* The kernels over long vectors (their vector bodies) give, element for
 * element, what they give one element at a time (the scalar tail the
 * edge cases above went through): every pair of special values (signed
 * zeros, infinities, quiet and signalling NaNs of both signs, subnormals,
 * the largest finite values, the fp16 rounding boundaries) in both orders,
 * at an odd address. NaN results may differ in which NaN they are (the
 * protocol leaves it unspecified); fp16 ones are 0x7E00 with a sign. */
static size_t specials(int dt, uint8_t *out)
{
	static const uint32_t f32[] = { 0, 0x80000000u, 0x3f800000u, 0xbf800000u, 0x7f800000u,
					0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
					0xffa00000u, 1, 0x80000001u, 0x7f7fffffu, 0xff7fffffu,
					0x477fe000u, 0x477ff000u, 0x33000000u, 0x40400000u };
	static const uint64_t f64[] = { 0, 0x8000000000000000ull, 0x3ff0000000000000ull,
					0xbff0000000000000ull, 0x7ff0000000000000ull,
					0xfff0000000000000ull, 0x7ff8000000000000ull,
					0xfff8000000000000ull, 0x7ff0000000000001ull, 1,
					0x8000000000000001ull, 0x7fefffffffffffffull,
					0xffefffffffffffffull, 0x4008000000000000ull };
	static const uint16_t h16[] = { 0, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e00,
					0xfe00, 0x7c01, 0xfd00, 1, 0x8001, 0x7bff, 0xfbff,
					0x03ff, 0x4200 };
	static const uint16_t b16[] = { 0, 0x8000, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc0,
					0xffc0, 0x7f81, 0xffa0, 1, 0x8001, 0x7f7f, 0xff7f,
					0x0080, 0x4040 };

	switch (dt) {
	case AGG_DTYPE_FP32: memcpy(out, f32, sizeof(f32)); return sizeof(f32) / 4;
	case AGG_DTYPE_FP64: memcpy(out, f64, sizeof(f64)); return sizeof(f64) / 8;
	case AGG_DTYPE_FP16: memcpy(out, h16, sizeof(h16)); return sizeof(h16) / 2;
	default:             memcpy(out, b16, sizeof(b16)); return sizeof(b16) / 2;
	}
}

static bool is_nan_bits(int dt, const uint8_t *p)
{
	uint64_t u = 0;

	memcpy(&u, p, agg_dtype_size(dt));
	switch (dt) {
	case AGG_DTYPE_FP32: return (u & 0x7fffffffu) > 0x7f800000u;
	case AGG_DTYPE_FP64: return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
	case AGG_DTYPE_FP16: return (u & 0x7fff) > 0x7c00;
	default:             return (u & 0x7fff) > 0x7f80;
	}
}

static void test_edge_cases_in_bulk(void **state)
{
	static const int dts[] = { AGG_DTYPE_FP32, AGG_DTYPE_FP64, AGG_DTYPE_FP16,
				   AGG_DTYPE_BF16 };
	static uint8_t a[MAXN * 8 + 1], b[MAXN * 8 + 1], bulk[MAXN * 8 + 1], one[8];
	static uint64_t acc[MAXN];
	uint8_t sp[32 * 8];

	(void)state;
	/* MAXN and three sizes below it: every vector body's loop of two
	 * vectors, its loop of one (4, 8 or 16 lanes) and its tail */
	for (size_t d = 0; d < 4 * sizeof(dts) / sizeof(dts[0]); d++) {
		int dt = dts[d / 4];
		size_t es = agg_dtype_size(dt), k = specials(dt, sp), n = MAXN - 8 * (d % 4);

		/* element i: the pair (i mod k, i / k mod k), every pair twice */
		for (size_t i = 0; i < n; i++) {
			memcpy(a + 1 + i * es, sp + (i % k) * es, es);
			memcpy(b + 1 + i * es, sp + (i / k % k) * es, es);
		}
		for (int op = AGG_OP_SUM; op <= AGG_OP_PROD; op++) {
			assert_int_equal(agg_acc_load(dt, acc, a + 1, n), 0);
			assert_int_equal(agg_acc_reduce(dt, op, acc, b + 1, n), 0);
			assert_int_equal(agg_acc_store(dt, bulk + 1, acc, n), 0);
			for (size_t i = 0; i < n; i++) {
				uint64_t acc1;
				const uint8_t *g = bulk + 1 + i * es;

				agg_acc_load(dt, &acc1, a + 1 + i * es, 1);
				agg_acc_reduce(dt, op, &acc1, b + 1 + i * es, 1);
				agg_acc_store(dt, one, &acc1, 1);
				if (is_nan_bits(dt, one) && is_nan_bits(dt, g)) {
					/* which NaN is unspecified (a + b may be
					 * computed b + a); fp16's is 0x7E00 */
					uint16_t h1, h2;
					memcpy(&h1, one, 2);
					memcpy(&h2, g, 2);
					if (dt == AGG_DTYPE_FP16 &&
					    ((h1 & 0x7fff) != 0x7e00 || (h2 & 0x7fff) != 0x7e00))
						fail_msg("fp16 %s element %zu: NaN not 0x7E00",
							 agg_op_name(op), i);
					continue;
				}
				if (memcmp(one, g, es))
					fail_msg("%s %s element %zu: the vector body and one element "
						 "at a time differ", agg_dtype_name(dt),
						 agg_op_name(op), i);
			}
		}
	}
}

static void test_integer_wraps(void **state)
{
	int32_t a32 = INT32_MAX, b32 = 1;
	int64_t a64 = INT64_MAX, b64 = 1;

	(void)state;
	assert_int_equal(agg_acc_reduce(AGG_DTYPE_INT32, AGG_OP_SUM, &a32, &b32, 1), 0);
	assert_int_equal(a32, INT32_MIN);
	assert_int_equal(agg_acc_reduce(AGG_DTYPE_INT64, AGG_OP_SUM, &a64, &b64, 1), 0);
	assert_true(a64 == INT64_MIN);
	a32 = 0x10000;
	b32 = 0x10000;
	agg_acc_reduce(AGG_DTYPE_INT32, AGG_OP_PROD, &a32, &b32, 1);
	assert_int_equal(a32, 0);
	a32 = -7;
	b32 = 3;
	agg_acc_reduce(AGG_DTYPE_INT32, AGG_OP_MIN, &a32, &b32, 1);
	assert_int_equal(a32, -7);
	agg_acc_reduce(AGG_DTYPE_INT32, AGG_OP_MAX, &a32, &b32, 1);
	assert_int_equal(a32, 3);
}

static void test_kernel_refusals(void **state)
{
	float acc = 0, in = 0;

	(void)state;
	assert_int_equal(agg_acc_reduce(AGG_DTYPE_FP32, AGG_OP_BXOR, &acc, &in, 1),
			 -AGG_E_OP_DTYPE);
	assert_int_equal(agg_acc_reduce(AGG_DTYPE_COUNT, AGG_OP_SUM, &acc, &in, 1),
			 -AGG_E_DTYPE);
	assert_int_equal(agg_acc_reduce(AGG_DTYPE_FP32, AGG_OP_COUNT, &acc, &in, 1),
			 -AGG_E_OP);
	assert_int_equal(agg_acc_load(AGG_DTYPE_COUNT, &acc, &in, 1), -AGG_E_DTYPE);
	assert_int_equal(agg_acc_store(AGG_DTYPE_COUNT, &acc, &in, 1), -AGG_E_DTYPE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fp16_to_fp32_exhaustive),
		cmocka_unit_test(test_fp32_to_half_rounding),
		cmocka_unit_test(test_kernels_vs_reference),
		cmocka_unit_test(test_edge_cases_in_bulk),
		cmocka_unit_test(test_bulk_store),
		cmocka_unit_test(test_float_edge_cases),
		cmocka_unit_test(test_integer_wraps),
		cmocka_unit_test(test_kernel_refusals),
	};
	return cmocka_run_group_tests_name("reduce", tests, NULL, NULL);
}
