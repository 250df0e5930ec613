/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduction kernels, one specialised loop per (dtype, op): no per-element
 * switch, unaligned little-endian input through memcpy so the compiler can
 * vectorise. fp16/bf16 accumulate in fp32 and round once, on store.
 * Where the compiler's vectoriser does not reach (float min/max, whose
 * NaN and signed-zero rules are selects; the fp16/bf16 conversions, bit
 * manipulation per element), the loop body is written on GCC's vector
 * types, 32 bytes a step (fp32 and fp64 min/max 64 with AVX-512), and the
 * scalar code finishes the tail: the same
 * result element for element but for which NaN a NaN result is, which the
 * protocol leaves open (tests/unit/test_reduce.c checks it).
 */
#include <string.h>

#if defined(__F16C__) || defined(__AVX__) || defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

/* The 32-byte vector types pass between static inline functions only:
 * built for a CPU without AVX, GCC warns that their ABI differs from an
 * AVX build's, which no caller outside this file sees. */
#pragma GCC diagnostic ignored "-Wpsabi"

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

#define INT_ROW(tag) { [AGG_OP_SUM] = red_##tag##_sum,                \
		       [AGG_OP_MIN] = red_##tag##_min,                \
		       [AGG_OP_MAX] = red_##tag##_max,                \
		       [AGG_OP_PROD] = red_##tag##_prod,              \
		       [AGG_OP_BAND] = red_##tag##_band,              \
		       [AGG_OP_BOR] = red_##tag##_bor,                \
		       [AGG_OP_BXOR] = red_##tag##_bxor }


/* ---- vector bodies ---- */

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef uint16_t v8h __attribute__((vector_size(16)));

static inline v8f ldv8f(const void *p) { v8f v; memcpy(&v, p, sizeof(v)); return v; }
static inline void stv8f(void *p, v8f v) { memcpy(p, &v, sizeof(v)); }
#ifndef __AVX512F__   /* (with it, fp64's min/max are on 64-byte vectors) */
static inline v4d ldv4d(const void *p) { v4d v; memcpy(&v, p, sizeof(v)); return v; }
#endif

/* min_f32/max_f32/min_f64/max_f64 on vectors: the same results lane for
 * lane, but for which NaN a NaN lane holds (unspecified: docs/protocol.md).
 * With AVX, from the instructions, which return their second operand when
 * the two compare equal or either is NaN: min(a, b) | min(b, a) is a | b
 * when a == b (so -0 beats +0) and the smaller otherwise, max's &
 * likewise; a lane where either is NaN is set to all ones, a quiet NaN.
 * Without AVX, the scalar operations lane by lane. */
#ifdef __AVX__
static inline v8f vmin8f(v8f a, v8f b)
{
	return (v8f)((v8i)_mm256_min_ps(a, b) | (v8i)_mm256_min_ps(b, a) |
		     (v8i)_mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}

static inline v8f vmax8f(v8f a, v8f b)
{
	return (v8f)(((v8i)_mm256_max_ps(a, b) & (v8i)_mm256_max_ps(b, a)) |
		     (v8i)_mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}

#ifndef __AVX512F__
static inline v4d vmin4d(v4d a, v4d b)
{
	return (v4d)((v4l)_mm256_min_pd(a, b) | (v4l)_mm256_min_pd(b, a) |
		     (v4l)_mm256_cmp_pd(a, b, _CMP_UNORD_Q));
}

static inline v4d vmax4d(v4d a, v4d b)
{
	return (v4d)(((v4l)_mm256_max_pd(a, b) & (v4l)_mm256_max_pd(b, a)) |
		     (v4l)_mm256_cmp_pd(a, b, _CMP_UNORD_Q));
}
#endif
#else
/* lane by lane through the scalar operations themselves */
#define LANEWISE(name, V, LANES, OP)                                          \
	static inline V name(V a, V b)                                         \
	{                                                                      \
		V r;                                                           \
		for (int k = 0; k < (LANES); k++)                              \
			r[k] = OP(a[k], b[k]);                                 \
		return r;                                                      \
	}
LANEWISE(vmin8f, v8f, 8, min_f32)
LANEWISE(vmax8f, v8f, 8, max_f32)
LANEWISE(vmin4d, v4d, 4, min_f64)
LANEWISE(vmax4d, v4d, 4, max_f64)
#endif

static inline v8f vsum8f(v8f a, v8f b) { return a + b; }
static inline v8f vprod8f(v8f a, v8f b) { return a * b; }

/* 8 wire elements to fp32 */
#ifndef __AVX512F__
static inline v8f ldv8_f32(const uint8_t *p) { return ldv8f(p); }
#endif

static inline v8f ldv8_bf16(const uint8_t *p)
{
#ifdef __AVX2__
	/* (the compiler's own widening of the vector takes four steps) */
	return (v8f)_mm256_slli_epi32(_mm256_cvtepu16_epi32(
		_mm_loadu_si128((const __m128i *)(const void *)p)), 16);
#else
	v8h h;
	memcpy(&h, p, sizeof(h));
	return (v8f)(__builtin_convertvector(h, v8u) << 16);
#endif
}

static inline v8f ldv8_fp16(const uint8_t *p)
{
#ifdef __F16C__
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
#else
	v8f v;
	for (int k = 0; k < 8; k++)
		v[k] = ld_fp16(p + 2 * k);
	return v;
#endif
}

/* 8 fp32 to the wire: fp32_to_bf16, fp32_to_fp16 on vectors */
static inline void stv8_bf16(uint8_t *p, v8f f)
{
	v8u u = (v8u)f;
	v8i nan = (v8i)(u & 0x7fffffffu) > 0x7f800000;
	v8u r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	r = (v8u)(((v8i)r & ~nan) | ((v8i)((u >> 16) | 0x40u) & nan));
#ifdef __AVX2__
	/* every lane is below 2^16: packing with unsigned saturation keeps
	 * it; the packs work per 128-bit half, the permute joins them */
	__m256i k = _mm256_packus_epi32((__m256i)r, (__m256i)r);
	k = _mm256_permute4x64_epi64(k, 0xd8);
	_mm_storeu_si128((__m128i *)(void *)p, _mm256_castsi256_si128(k));
#else
	v8h h = __builtin_convertvector(r, v8h);
	memcpy(p, &h, sizeof(h));
#endif
}

static inline void stv8_fp16(uint8_t *p, v8f f)
{
#ifdef __F16C__
	/* the instruction rounds to nearest even, overflows to Inf and keeps
	 * subnormals as fp32_to_fp16 does; a NaN becomes 0x7E00 with its sign */
	v8h h = (v8h)_mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	v8h nan = (v8h)((h & 0x7fff) > 0x7c00);
	h = (h & ~nan) | (((h & 0x8000) | 0x7e00) & nan);
	memcpy(p, &h, sizeof(h));
#else
	for (int k = 0; k < 8; k++) {
		uint16_t h = fp32_to_fp16(f[k]);
		memcpy(p + 2 * k, &h, 2);
	}
#endif
}

/* acc[i] = OP(acc[i], in[i]), one vector of LANES accumulators a step (two
 * per loop), LDV turning WSIZE-byte wire elements into one; the scalar
 * kernel TAIL for the rest */
#define DEFINE_VREDUCE(fname, ACC, V, LANES, LDV, VOP, WSIZE, TAIL)               \
	static void fname(void *accv, const uint8_t *restrict in, size_t n)    \
	{                                                                      \
		ACC *restrict acc = accv;                                      \
		size_t i = 0;                                                  \
		V a, b;                                                        \
		for (; i + 2 * (LANES) <= n; i += 2 * (LANES)) {               \
			V x0 = LDV(in + i * (WSIZE));                          \
			V x1 = LDV(in + (i + (LANES)) * (WSIZE));              \
			memcpy(&a, acc + i, sizeof(a));                        \
			memcpy(&b, acc + i + (LANES), sizeof(b));              \
			a = VOP(a, x0);                                        \
			b = VOP(b, x1);                                        \
			memcpy(acc + i, &a, sizeof(a));                        \
			memcpy(acc + i + (LANES), &b, sizeof(b));              \
		}                                                              \
		for (; i + (LANES) <= n; i += (LANES)) {                       \
			memcpy(&a, acc + i, sizeof(a));                        \
			a = VOP(a, LDV(in + i * (WSIZE)));                     \
			memcpy(acc + i, &a, sizeof(a));                        \
		}                                                              \
		if (i < n)                                                     \
			TAIL(acc + i, in + i * (WSIZE), n - i);                \
	}
#define DEFINE_VREDUCE_F32(fname, LDV, VOP, WSIZE, TAIL) \
	DEFINE_VREDUCE(fname, float, v8f, 8, LDV, VOP, WSIZE, TAIL)
#define DEFINE_VREDUCE_F64(fname, VOP, TAIL) \
	DEFINE_VREDUCE(fname, double, v4d, 4, ldv4d, VOP, 8, TAIL)

#ifdef __AVX512F__
/* With AVX-512, fp32 and fp64 min and max on 64-byte vectors (at 32 bytes
 * they ran at half of sum's rate, which the compiler vectorises at 64);
 * fp16 and bf16 stay at 32 bytes, where they are faster (inca-bench-agg).
 * A lane where either is NaN is set to all ones, as vmin8f's. */
static inline __m512 vmin16f(__m512 a, __m512 b)
{
	__m512i r = _mm512_or_si512(_mm512_castps_si512(_mm512_min_ps(a, b)),
				    _mm512_castps_si512(_mm512_min_ps(b, a)));
	return _mm512_castsi512_ps(_mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q),
							 _mm512_set1_epi32(-1)));
}

static inline __m512 vmax16f(__m512 a, __m512 b)
{
	__m512i r = _mm512_and_si512(_mm512_castps_si512(_mm512_max_ps(a, b)),
				     _mm512_castps_si512(_mm512_max_ps(b, a)));
	return _mm512_castsi512_ps(_mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q),
							 _mm512_set1_epi32(-1)));
}

static inline __m512d vmin8d(__m512d a, __m512d b)
{
	__m512i r = _mm512_or_si512(_mm512_castpd_si512(_mm512_min_pd(a, b)),
				    _mm512_castpd_si512(_mm512_min_pd(b, a)));
	return _mm512_castsi512_pd(_mm512_mask_mov_epi64(r, _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q),
							 _mm512_set1_epi64(-1)));
}

static inline __m512d vmax8d(__m512d a, __m512d b)
{
	__m512i r = _mm512_and_si512(_mm512_castpd_si512(_mm512_max_pd(a, b)),
				     _mm512_castpd_si512(_mm512_max_pd(b, a)));
	return _mm512_castsi512_pd(_mm512_mask_mov_epi64(r, _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q),
							 _mm512_set1_epi64(-1)));
}

static inline __m512 ldv16_f32(const uint8_t *p) { return _mm512_loadu_ps(p); }
static inline __m512d ldv8_f64(const uint8_t *p) { return _mm512_loadu_pd(p); }

DEFINE_VREDUCE(vred_fp32_min, float, __m512, 16, ldv16_f32, vmin16f, 4, red_fp32_min)
DEFINE_VREDUCE(vred_fp32_max, float, __m512, 16, ldv16_f32, vmax16f, 4, red_fp32_max)
DEFINE_VREDUCE(vred_fp64_min, double, __m512d, 8, ldv8_f64, vmin8d, 8, red_fp64_min)
DEFINE_VREDUCE(vred_fp64_max, double, __m512d, 8, ldv8_f64, vmax8d, 8, red_fp64_max)
#else
DEFINE_VREDUCE_F32(vred_fp32_min, ldv8_f32, vmin8f, 4, red_fp32_min)
DEFINE_VREDUCE_F32(vred_fp32_max, ldv8_f32, vmax8f, 4, red_fp32_max)
DEFINE_VREDUCE_F64(vred_fp64_min, vmin4d, red_fp64_min)
DEFINE_VREDUCE_F64(vred_fp64_max, vmax4d, red_fp64_max)
#endif
DEFINE_VREDUCE_F32(vred_bf16_sum, ldv8_bf16, vsum8f, 2, red_bf16_sum)
DEFINE_VREDUCE_F32(vred_bf16_prod, ldv8_bf16, vprod8f, 2, red_bf16_prod)
DEFINE_VREDUCE_F32(vred_bf16_min, ldv8_bf16, vmin8f, 2, red_bf16_min)
DEFINE_VREDUCE_F32(vred_bf16_max, ldv8_bf16, vmax8f, 2, red_bf16_max)
DEFINE_VREDUCE_F32(vred_fp16_sum, ldv8_fp16, vsum8f, 2, red_fp16_sum)
DEFINE_VREDUCE_F32(vred_fp16_prod, ldv8_fp16, vprod8f, 2, red_fp16_prod)
DEFINE_VREDUCE_F32(vred_fp16_min, ldv8_fp16, vmin8f, 2, red_fp16_min)
DEFINE_VREDUCE_F32(vred_fp16_max, ldv8_fp16, vmax8f, 2, red_fp16_max)

#define VFLOAT_ROW(sum, prod, min, max) { [AGG_OP_SUM] = sum, [AGG_OP_MIN] = min, \
					  [AGG_OP_MAX] = max, [AGG_OP_PROD] = prod }

/* what agg_acc_reduce calls: the vector bodies where written, the
 * scalar kernels (vectorised by the compiler) elsewhere */
static const reduce_fn vreduce_fns[AGG_DTYPE_COUNT][AGG_OP_COUNT] = {
	[AGG_DTYPE_FP32] = VFLOAT_ROW(red_fp32_sum, red_fp32_prod, vred_fp32_min, vred_fp32_max),
	[AGG_DTYPE_FP16] = VFLOAT_ROW(vred_fp16_sum, vred_fp16_prod, vred_fp16_min,
				      vred_fp16_max),
	[AGG_DTYPE_BF16] = VFLOAT_ROW(vred_bf16_sum, vred_bf16_prod, vred_bf16_min,
				      vred_bf16_max),
	[AGG_DTYPE_FP64] = VFLOAT_ROW(red_fp64_sum, red_fp64_prod, vred_fp64_min, vred_fp64_max),
	[AGG_DTYPE_INT32] = INT_ROW(int32),
	[AGG_DTYPE_INT64] = INT_ROW(int64),
};


int agg_acc_reduce(enum agg_dtype dtype, enum agg_op op, void *acc,
		   const void *in, size_t n)
{
	int rc = agg_op_check(dtype, op);

	if (AGG_UNLIKELY(rc))
		return rc;
	vreduce_fns[dtype][op](acc, in, n);
	return 0;
}

static void load_half(float *restrict acc, const uint8_t *restrict in,
		      size_t n, bool bf16)
{
	size_t i = 0;

	if (bf16) {
		for (; i + 8 <= n; i += 8)
			stv8f(acc + i, ldv8_bf16(in + 2 * i));
		for (; i < n; i++)
			acc[i] = ld_bf16(in + 2 * i);
	} else {
		for (; i + 8 <= n; i += 8)
			stv8f(acc + i, ldv8_fp16(in + 2 * i));
		for (; i < n; i++)
			acc[i] = ld_fp16(in + 2 * i);
	}
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

	size_t i = 0;

	switch (dtype) {
	case AGG_DTYPE_FP16:
		for (; i + 8 <= n; i += 8)
			stv8_fp16(o + 2 * i, ldv8f(a + i));
		for (; i < n; i++) {
			uint16_t h = fp32_to_fp16(a[i]);
			memcpy(o + 2 * i, &h, 2);
		}
		return 0;
	case AGG_DTYPE_BF16:
		for (; i + 8 <= n; i += 8)
			stv8_bf16(o + 2 * i, ldv8f(a + i));
		for (; i < n; i++) {
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
