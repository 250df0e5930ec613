/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduction kernels, one specialised loop per (dtype, op): no per-element
 * switch, unaligned little-endian input through memcpy so the compiler can
 * vectorise. fp16/bf16 accumulate in fp32 and round once, on store.
 */
#include <string.h>

#include "agg_priv.h"

/* ---- conversions (F. Giesen's branch-free formulations) ---- */

static inline float f32_from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline double f64_from_bits(uint64_t u)
{
	double f;
	memcpy(&f, &u, 8);
	return f;
}

static inline uint64_t f64_bits(double f)
{
	uint64_t u;
	memcpy(&u, &f, 8);
	return u;
}

static inline float fp16_to_fp32(uint16_t h)
{
	const uint32_t shifted_exp = 0x7c00u << 13;
	uint32_t o = (uint32_t)(h & 0x7fff) << 13;
	uint32_t exp = shifted_exp & o;

	o += (127 - 15) << 23;
	if (exp == shifted_exp) {
		o += (128 - 16) << 23;           /* Inf/NaN */
		if (o & 0x7fffffu)
			o |= 0x400000u;          /* quiet the NaN */
	} else if (exp == 0) {
		o += 1 << 23;                    /* zero or subnormal */
		o = f32_bits(f32_from_bits(o) - f32_from_bits(113u << 23));
	}
	return f32_from_bits(o | (uint32_t)(h & 0x8000) << 16);
}

static inline uint16_t fp32_to_fp16(float f)
{
	const uint32_t f32_inf = 255u << 23, f16_max = (127u + 16) << 23;
	const uint32_t denorm_magic = ((127u - 15) + (23 - 10) + 1) << 23;
	uint32_t u = f32_bits(f), sign = u & 0x80000000u, o;

	u ^= sign;
	if (u >= f16_max) {
		o = u > f32_inf ? 0x7e00 : 0x7c00;   /* NaN : Inf/overflow */
	} else if (u < (113u << 23)) {
		/* subnormal or zero: let the FPU round (to nearest even) */
		o = f32_bits(f32_from_bits(u) + f32_from_bits(denorm_magic)) -
		    denorm_magic;
	} else {
		uint32_t mant_odd = (u >> 13) & 1;
		u += ((uint32_t)(15 - 127) << 23) + 0xfff;
		u += mant_odd;
		o = u >> 13;
	}
	return (uint16_t)(o | sign >> 16);
}

static inline float bf16_to_fp32(uint16_t b)
{
	return f32_from_bits((uint32_t)b << 16);
}

static inline uint16_t fp32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)(u >> 16 | 0x40);   /* quiet NaN, keep sign */
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

float agg_fp16_to_fp32(uint16_t h) { return fp16_to_fp32(h); }
uint16_t agg_fp32_to_fp16(float f) { return fp32_to_fp16(f); }
float agg_bf16_to_fp32(uint16_t b) { return bf16_to_fp32(b); }
uint16_t agg_fp32_to_bf16(float f) { return fp32_to_bf16(f); }

/* ---- element operations ---- */

/* IEEE 754-2019 minimum/maximum: NaN if either is NaN, -0 < +0. */
static inline float min_f32(float a, float b)
{
	float r = a < b ? a : b;
	r = a == b ? f32_from_bits(f32_bits(a) | f32_bits(b)) : r;
	return (a != a || b != b) ? a + b : r;
}

static inline float max_f32(float a, float b)
{
	float r = a > b ? a : b;
	r = a == b ? f32_from_bits(f32_bits(a) & f32_bits(b)) : r;
	return (a != a || b != b) ? a + b : r;
}

static inline double min_f64(double a, double b)
{
	double r = a < b ? a : b;
	r = a == b ? f64_from_bits(f64_bits(a) | f64_bits(b)) : r;
	return (a != a || b != b) ? a + b : r;
}

static inline double max_f64(double a, double b)
{
	double r = a > b ? a : b;
	r = a == b ? f64_from_bits(f64_bits(a) & f64_bits(b)) : r;
	return (a != a || b != b) ? a + b : r;
}

#define OP_SUM(a, b)   ((a) + (b))
#define OP_PROD(a, b)  ((a) * (b))
#define OP_MIN(a, b)   ((b) < (a) ? (b) : (a))
#define OP_MAX(a, b)   ((b) > (a) ? (b) : (a))
#define OP_BAND(a, b)  ((a) & (b))
#define OP_BOR(a, b)   ((a) | (b))
#define OP_BXOR(a, b)  ((a) ^ (b))
/* Integer sum and product wrap (two's complement), computed unsigned. */
#define OP_ISUM32(a, b)  ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define OP_IPROD32(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
#define OP_ISUM64(a, b)  ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define OP_IPROD64(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))

/* Loads of one wire element into the accumulator type. */
#define LD_SAME(T) \
	static inline T ld_##T(const uint8_t *p) { T v; memcpy(&v, p, sizeof(v)); return v; }
typedef float f32;
typedef double f64;
LD_SAME(f32)
LD_SAME(f64)
LD_SAME(int32_t)
LD_SAME(int64_t)

static inline f32 ld_fp16(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return fp16_to_fp32(h);
}

static inline f32 ld_bf16(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return bf16_to_fp32(h);
}

typedef void (*reduce_fn)(void *acc, const uint8_t *in, size_t n);

#define DEFINE_REDUCE(fname, ACC, LOAD, WSIZE, OP)                        \
	static void fname(void *accv, const uint8_t *restrict in, size_t n) \
	{                                                                   \
		ACC *restrict acc = accv;                                   \
		for (size_t i = 0; i < n; i++)                              \
			acc[i] = OP(acc[i], LOAD(in + i * (WSIZE)));        \
	}

/* float-like dtypes: fp32, fp16, bf16 (fp32 accumulator), fp64 */
#define DEFINE_FLOAT_KERNELS(tag, ACC, LOAD, WSIZE, MIN, MAX)          \
	DEFINE_REDUCE(red_##tag##_sum, ACC, LOAD, WSIZE, OP_SUM)        \
	DEFINE_REDUCE(red_##tag##_prod, ACC, LOAD, WSIZE, OP_PROD)      \
	DEFINE_REDUCE(red_##tag##_min, ACC, LOAD, WSIZE, MIN)           \
	DEFINE_REDUCE(red_##tag##_max, ACC, LOAD, WSIZE, MAX)

DEFINE_FLOAT_KERNELS(fp32, f32, ld_f32, 4, min_f32, max_f32)
DEFINE_FLOAT_KERNELS(fp16, f32, ld_fp16, 2, min_f32, max_f32)
DEFINE_FLOAT_KERNELS(bf16, f32, ld_bf16, 2, min_f32, max_f32)
DEFINE_FLOAT_KERNELS(fp64, f64, ld_f64, 8, min_f64, max_f64)

#define DEFINE_INT_KERNELS(tag, ACC, LOAD, WSIZE, SUM, PROD)           \
	DEFINE_REDUCE(red_##tag##_sum, ACC, LOAD, WSIZE, SUM)           \
	DEFINE_REDUCE(red_##tag##_prod, ACC, LOAD, WSIZE, PROD)         \
	DEFINE_REDUCE(red_##tag##_min, ACC, LOAD, WSIZE, OP_MIN)        \
	DEFINE_REDUCE(red_##tag##_max, ACC, LOAD, WSIZE, OP_MAX)        \
	DEFINE_REDUCE(red_##tag##_band, ACC, LOAD, WSIZE, OP_BAND)      \
	DEFINE_REDUCE(red_##tag##_bor, ACC, LOAD, WSIZE, OP_BOR)        \
	DEFINE_REDUCE(red_##tag##_bxor, ACC, LOAD, WSIZE, OP_BXOR)

DEFINE_INT_KERNELS(int32, int32_t, ld_int32_t, 4, OP_ISUM32, OP_IPROD32)
DEFINE_INT_KERNELS(int64, int64_t, ld_int64_t, 8, OP_ISUM64, OP_IPROD64)

#define FLOAT_ROW(tag) { [AGG_OP_SUM] = red_##tag##_sum,              \
			 [AGG_OP_MIN] = red_##tag##_min,              \
			 [AGG_OP_MAX] = red_##tag##_max,              \
			 [AGG_OP_PROD] = red_##tag##_prod }
#define INT_ROW(tag) { [AGG_OP_SUM] = red_##tag##_sum,                \
		       [AGG_OP_MIN] = red_##tag##_min,                \
		       [AGG_OP_MAX] = red_##tag##_max,                \
		       [AGG_OP_PROD] = red_##tag##_prod,              \
		       [AGG_OP_BAND] = red_##tag##_band,              \
		       [AGG_OP_BOR] = red_##tag##_bor,                \
		       [AGG_OP_BXOR] = red_##tag##_bxor }

static const reduce_fn reduce_fns[AGG_DTYPE_COUNT][AGG_OP_COUNT] = {
	[AGG_DTYPE_FP32] = FLOAT_ROW(fp32),
	[AGG_DTYPE_FP16] = FLOAT_ROW(fp16),
	[AGG_DTYPE_BF16] = FLOAT_ROW(bf16),
	[AGG_DTYPE_FP64] = FLOAT_ROW(fp64),
	[AGG_DTYPE_INT32] = INT_ROW(int32),
	[AGG_DTYPE_INT64] = INT_ROW(int64),
};

#ifdef __F16C__
#include <immintrin.h>

/* fp16 -> fp32 with the F16C instruction (exact, as fp16_to_fp32), in
 * chunks into a small buffer, then the fp32 kernel: the per-element bit
 * manipulation does not vectorise. */
#define HALF_CHUNK 256

static void fp16_chunk_to_fp32(float *restrict out, const uint8_t *restrict in,
			       size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, _mm256_cvtph_ps(
				 _mm_loadu_si128((const __m128i *)(in + 2 * i))));
	for (; i < n; i++)
		out[i] = ld_fp16(in + 2 * i);
}

static void reduce_fp16_f16c(enum agg_op op, float *acc, const uint8_t *in,
			     size_t n)
{
	float tmp[HALF_CHUNK];

	for (size_t done = 0; done < n; done += HALF_CHUNK) {
		size_t k = n - done < HALF_CHUNK ? n - done : HALF_CHUNK;

		fp16_chunk_to_fp32(tmp, in + 2 * done, k);
		reduce_fns[AGG_DTYPE_FP32][op](acc + done, (const uint8_t *)tmp, k);
	}
}
#endif

int agg_acc_reduce(enum agg_dtype dtype, enum agg_op op, void *acc,
		   const void *in, size_t n)
{
	int rc = agg_op_check(dtype, op);

	if (AGG_UNLIKELY(rc))
		return rc;
#ifdef __F16C__
	if (dtype == AGG_DTYPE_FP16) {
		reduce_fp16_f16c(op, acc, in, n);
		return 0;
	}
#endif
	reduce_fns[dtype][op](acc, in, n);
	return 0;
}

static void load_half(float *restrict acc, const uint8_t *restrict in,
		      size_t n, bool bf16)
{
	if (bf16)
		for (size_t i = 0; i < n; i++)
			acc[i] = ld_bf16(in + 2 * i);
	else
#ifdef __F16C__
		fp16_chunk_to_fp32(acc, in, n);
#else
		for (size_t i = 0; i < n; i++)
			acc[i] = ld_fp16(in + 2 * i);
#endif
}

int agg_acc_load(enum agg_dtype dtype, void *acc, const void *in, size_t n)
{
	switch (dtype) {
	case AGG_DTYPE_FP16:
	case AGG_DTYPE_BF16:
		load_half(acc, in, n, dtype == AGG_DTYPE_BF16);
		return 0;
	case AGG_DTYPE_FP32:
	case AGG_DTYPE_INT32:
	case AGG_DTYPE_INT64:
	case AGG_DTYPE_FP64:
		memcpy(acc, in, n * agg_dtype_size(dtype));
		return 0;
	default:
		return -AGG_E_DTYPE;
	}
}

int agg_acc_store(enum agg_dtype dtype, void *out, const void *acc, size_t n)
{
	const float *restrict a = acc;
	uint8_t *restrict o = out;

	switch (dtype) {
	case AGG_DTYPE_FP16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h = fp32_to_fp16(a[i]);
			memcpy(o + 2 * i, &h, 2);
		}
		return 0;
	case AGG_DTYPE_BF16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h = fp32_to_bf16(a[i]);
			memcpy(o + 2 * i, &h, 2);
		}
		return 0;
	case AGG_DTYPE_FP32:
	case AGG_DTYPE_INT32:
	case AGG_DTYPE_INT64:
	case AGG_DTYPE_FP64:
		memcpy(out, acc, n * agg_dtype_size(dtype));
		return 0;
	default:
		return -AGG_E_DTYPE;
	}
}
