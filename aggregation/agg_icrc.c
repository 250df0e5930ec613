/* SPDX-License-Identifier: BSD-3-Clause */
/* CRC-32 (slice-by-8; folding with PCLMULQDQ, or VPCLMULQDQ on AVX2 or
 * AVX-512, chosen at run time), CRC combination, and the RoCEv2 invariant
 * CRC. */
#include <stdbool.h>
#include <string.h>

#include "agg_priv.h"

/* IEEE 802.3 CRC-32, reflected polynomial. */
#define CRC32_POLY 0xedb88320u

static uint32_t crc_table[8][256];
/* CRC-32 of the ICRC's first 8 bytes, 1s standing for the LRH */
static uint32_t crc_after_lrh;

static uint32_t crc32_raw(uint32_t c, const uint8_t *p, size_t len);

/*
 * The prefetch stream (agg_prefetch_stream): the lines from pf_cur to
 * pf_end not yet asked for, a few at each step of the foldings below.
 */
#define AGG_CACHE_LINE 64
static __thread const uint8_t *pf_cur, *pf_end;

/* Up to n lines of a stream, from *c (pf_cur, or a kernel's copy of it)
 * to e */
static inline void pf_lines(const uint8_t **c, const uint8_t *e, size_t n)
{
	for (size_t i = 0; i < n && *c < e; i++, *c += AGG_CACHE_LINE)
		__builtin_prefetch(*c, 0, 2);
}

void agg_prefetch_stream(const void *p, size_t len)
{
	pf_lines(&pf_cur, pf_end, SIZE_MAX);
	/* (as integers: p may be NULL, len 0, to end a stream) */
	pf_cur = (const uint8_t *)((uintptr_t)p & ~(uintptr_t)(AGG_CACHE_LINE - 1));
	pf_end = (const uint8_t *)((uintptr_t)p + len);
	/* with the tables nothing folds, nothing would ask for it: now */
	if (agg_crc32_impl_best() == AGG_CRC_TABLE)
		pf_lines(&pf_cur, pf_end, SIZE_MAX);
}

/* Tables are built once, before main(), so no caller has to remember. */
__attribute__((constructor)) static void crc_tables_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (CRC32_POLY & (0u - (c & 1)));
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xff];
	static const uint8_t lrh[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	crc_after_lrh = ~crc32_raw(0xffffffffu, lrh, sizeof(lrh));
}

static uint32_t crc32_raw(uint32_t c, const uint8_t *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		len--;
	}
	while (len >= 8) {
		uint32_t lo, hi;
		memcpy(&lo, p, 4);
		memcpy(&hi, p + 4, 4);
		lo ^= c;
		c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		    crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		    crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		    crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

/* x1 = x1 * x^128 mod P, the next 16 bytes added: one lane folded 16
 * bytes on */
#define FOLD_INTO(acc, next)                                               \
	do {                                                               \
		t1 = _mm_clmulepi64_si128(acc, k3k4, 0x00);                \
		acc = _mm_clmulepi64_si128(acc, k3k4, 0x11);               \
		acc = _mm_xor_si128(_mm_xor_si128(acc, t1), next);         \
	} while (0)

/*
 * The end of every folding below: one 128-bit lane, the rest of the
 * buffer 16 bytes at a time (len a multiple of 16), 128 -> 64 bits, then
 * a Barrett reduction to 32 bits.
 */
__attribute__((target("pclmul,sse4.1")))
static inline uint32_t crc32_clmul_lane(__m128i x1, const uint8_t *p, size_t len)
{
	const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
	const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
	const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
	const __m128i mask32 = _mm_setr_epi32(-1, 0, -1, 0);
	__m128i t1;

	while (len >= 16) {
		FOLD_INTO(x1, _mm_loadu_si128((const __m128i *)p));
		p += 16;
		len -= 16;
	}

	/* 128 -> 64 bits */
	t1 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
	x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t1);
	t1 = _mm_srli_si128(x1, 4);
	x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
	x1 = _mm_xor_si128(x1, t1);

	/* Barrett reduction to 32 bits */
	t1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x10);
	t1 = _mm_clmulepi64_si128(_mm_and_si128(t1, mask32), poly, 0x00);
	x1 = _mm_xor_si128(x1, t1);
	return (uint32_t)_mm_extract_epi32(x1, 1);
}

/* The end of the four-lane foldings: four lanes into one, then as above. */
__attribute__((target("pclmul,sse4.1")))
static inline uint32_t crc32_clmul_finish(__m128i x1, __m128i x2, __m128i x3, __m128i x4,
					  const uint8_t *p, size_t len)
{
	const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
	__m128i t1;

	FOLD_INTO(x1, x2);
	FOLD_INTO(x1, x3);
	FOLD_INTO(x1, x4);
	return crc32_clmul_lane(x1, p, len);
}
#undef FOLD_INTO

/*
 * Buffers too short for the four lanes (16 to 63 bytes, e.g. a small
 * result's payload) on one lane: len >= 16 and a multiple of 16. No
 * tables: on a switch's data path the 8 KiB of slice-by-8 tables are cold,
 * the payloads streaming through L1 evict them.
 */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc32_clmul16(uint32_t c, const uint8_t *p, size_t len)
{
	__m128i x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p),
				   _mm_cvtsi32_si128((int)c));

	return crc32_clmul_lane(x1, p + 16, len - 16);
}

/*
 * CRC folding with carry-less multiplication (Gopal, Ozturk et al., "Fast
 * CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction",
 * Intel, 2009): four 128-bit lanes folded 64 bytes at a time, then one
 * lane, then a Barrett reduction to 32 bits. The constants are
 * x^(k) mod P for the reflected IEEE polynomial, from that paper.
 * len >= 64 and a multiple of 16; c is the raw (uninverted) register.
 */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc32_clmul(uint32_t c, const uint8_t *p, size_t len, const uint8_t *or64)
{
	const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
	__m128i x1, x2, x3, x4, t1, t2, t3, t4;

#define LOAD_OR(k) _mm_or_si128(_mm_loadu_si128((const __m128i *)(p + 16 * (k))), \
				_mm_loadu_si128((const __m128i *)(or64 + 16 * (k))))
	x1 = LOAD_OR(0);
	x2 = LOAD_OR(1);
	x3 = LOAD_OR(2);
	x4 = LOAD_OR(3);
#undef LOAD_OR
	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)c));
	p += 64;
	len -= 64;

	const uint8_t *pc = pf_cur, *pe = pf_end;
	while (len >= 64) {
		pf_lines(&pc, pe, 1);
		t1 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
		t2 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
		t3 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
		t4 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
		x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
		x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
		x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
		x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
		x1 = _mm_xor_si128(_mm_xor_si128(x1, t1),
				   _mm_loadu_si128((const __m128i *)p));
		x2 = _mm_xor_si128(_mm_xor_si128(x2, t2),
				   _mm_loadu_si128((const __m128i *)(p + 16)));
		x3 = _mm_xor_si128(_mm_xor_si128(x3, t3),
				   _mm_loadu_si128((const __m128i *)(p + 32)));
		x4 = _mm_xor_si128(_mm_xor_si128(x4, t4),
				   _mm_loadu_si128((const __m128i *)(p + 48)));
		p += 64;
		len -= 64;
	}
	pf_cur = pc;

	return crc32_clmul_finish(x1, x2, x3, x4, p, len);
}

/* The same folding with VPCLMULQDQ on AVX-512 (len >= 256) and on AVX2
 * (len >= 128): fold512 and fold256 below, which the one-pass kernels
 * share, with no elements. */
static uint32_t crc32_vclmul(uint32_t c, const uint8_t *p, size_t len, const uint8_t *or64);
static uint32_t crc32_vclmul256(uint32_t c, const uint8_t *p, size_t len, const uint8_t *or64);

static bool have_clmul, have_vclmul, have_vclmul256, have_avx512bw, have_f16c, have_avx2;

/* F16C from CPUID (leaf 1, ECX bit 29): clang's __builtin_cpu_supports
 * does not know the name */
static bool cpu_has_f16c(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

__attribute__((constructor)) static void crc_cpu_init(void)
{
	__builtin_cpu_init();
	have_clmul = __builtin_cpu_supports("pclmul") &&
		     __builtin_cpu_supports("sse4.1");
	/* with the instructions the one-pass kernels share the folding
	 * with (every CPU with VPCLMULQDQ has them) */
	have_vclmul = have_clmul && __builtin_cpu_supports("avx512f") &&
		      __builtin_cpu_supports("avx512bw") &&
		      __builtin_cpu_supports("vpclmulqdq");
	have_vclmul256 = have_clmul && __builtin_cpu_supports("avx2") &&
			 cpu_has_f16c() &&
			 __builtin_cpu_supports("vpclmulqdq");
	have_avx512bw = __builtin_cpu_supports("avx512bw");
	have_f16c = cpu_has_f16c();
	have_avx2 = __builtin_cpu_supports("avx2");
}

static const uint8_t no_mask[64] __attribute__((aligned(64)));

/* The folding that takes a buffer of len bytes with impl, if any (len a
 * multiple of 16 from its minimum on). Each ORs or64's 64 bytes into the
 * buffer's first 64 as it loads them: the ICRC's masked headers are read
 * in place. */
typedef uint32_t (*fold_fn)(uint32_t, const uint8_t *, size_t, const uint8_t *);

static inline fold_fn crc32_fold_for(enum agg_crc_impl impl, size_t len)
{
	if (impl == AGG_CRC_VPCLMUL_AVX512 && len >= 256)
		return crc32_vclmul;
	if (impl == AGG_CRC_VPCLMUL_AVX2 && len >= 128)
		return crc32_vclmul256;
	if (impl != AGG_CRC_TABLE && len >= 64)
		return crc32_clmul;
	return NULL;
}

/* The bytes of the ICRC's first 64 after the LRH that it masks with 1s:
 * TOS, TTL, IPv4 header checksum, UDP checksum, BTH byte 4 (FECN, BECN,
 * resv6). */
static const uint8_t icrc_or_mask[64] __attribute__((aligned(64))) = {
	[1] = 0xff, [8] = 0xff, [10] = 0xff, [11] = 0xff,
	[26] = 0xff, [27] = 0xff, [32] = 0xff,
};

/*
 * A contribution's ICRC and its reduction in one pass over its bytes
 * (issue 33): the folding of crc32_vclmul (or crc32_vclmul256) over the
 * datagram, the masked headers ORed in as agg_icrc_ipv4_prefix does, and
 * in the same loop out = acc + in (or out = in, the first contribution)
 * over the payload, which starts hoff bytes into the datagram. The
 * clmul's port and the adds', loads' and stores' ports work side by side,
 * and the payload comes into L1 once. out may not alias acc's or in's
 * bytes unless it is acc itself. The sums are the kernels' own operations
 * (IEEE addition, integers modulo 2^n), so results are bit for bit
 * agg_acc_reduce's.
 */
enum fuse_kind {
	FUSE_COPY, FUSE_FP32_SUM, FUSE_FP64_SUM, FUSE_I32_SUM, FUSE_I64_SUM,
	/* 2-byte elements on the wire, an fp32 accumulator: twice the bytes */
	FUSE_FP16_LOAD, FUSE_FP16_SUM, FUSE_BF16_LOAD, FUSE_BF16_SUM,
	/* the set's last contribution: the sum rounded to the wire's format
	 * as it is made (agg_acc_store's rounding), no fp32 written */
	FUSE_FP16_LAST, FUSE_BF16_LAST,
};

static inline bool fuse_half(enum fuse_kind k)
{
	return k >= FUSE_FP16_LOAD;
}

static inline bool fuse_fp16(enum fuse_kind k)
{
	return k == FUSE_FP16_LOAD || k == FUSE_FP16_SUM || k == FUSE_FP16_LAST;
}

static inline bool fuse_adds(enum fuse_kind k)
{
	return k == FUSE_FP16_SUM || k == FUSE_BF16_SUM || k == FUSE_FP16_LAST ||
	       k == FUSE_BF16_LAST;
}

static inline bool fuse_last(enum fuse_kind k)
{
	return k == FUSE_FP16_LAST || k == FUSE_BF16_LAST;
}

/*
 * 2-byte elements: the 32 in w widened to fp32 (lo: the first 16, hi: the
 * rest), and 32 fp32 rounded back as agg_acc_store rounds them (agg_reduce.c's
 * stv8_fp16, stv8_bf16): to nearest even; a NaN is 0x7E00 with its sign
 * (fp16) or quieted with its sign (bf16).
 *
 * bf16 moves each element into the high half of its lane with one VPERMW
 * (word i to word 2i + 1, the even words zeroed) and gathers the rounded
 * high halves back with one VPERMT2W: on AMD Zen 4 the zero-extension
 * (VPMOVZXWD) shares its pipe with VPCLMULQDQ, and the folding waited for
 * it (inca-bench-agg, bf16 one pass: 171 ns with it, 147 with VPERMW).
 * fp16's VCVTPH2PS shares it too, and has no such way round.
 */
__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1"), always_inline))
static inline __m512i bf16_idx(short first, short step)
{
	/* word i from word first + i / 2 (step 1: the widening's, whose even
	 * words are masked off) or first + 2i (step 2, first 1: the
	 * narrowing's, from the two sources' 64 words) */
	const __m512i i = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19,
					   18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4,
					   3, 2, 1, 0);

	return _mm512_add_epi16(step == 1 ? _mm512_srli_epi16(i, 1) : _mm512_slli_epi16(i, 1),
				_mm512_set1_epi16(first));
}

__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1"), always_inline))
static inline void fuse_widen512(enum fuse_kind k, __m512i w, __m512 *lo, __m512 *hi)
{
	if (fuse_fp16(k)) {
		/* exact; NaNs quieted, as fp16_to_fp32 */
		*lo = _mm512_cvtph_ps(_mm512_castsi512_si256(w));
		*hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(w, 1));
		return;
	}
	*lo = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xaaaaaaaa, bf16_idx(0, 1), w));
	*hi = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xaaaaaaaa, bf16_idx(16, 1), w));
}

/* 16 fp32 to fp16 */
__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1"), always_inline))
static inline __m256i fp16_round512(__m512 f)
{
	__m256i h = _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256i nan = _mm256_cmpgt_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7fff)),
					 _mm256_set1_epi16(0x7c00));
	__m256i canon = _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16(-0x8000)),
					_mm256_set1_epi16(0x7e00));

	return _mm256_blendv_epi8(h, canon, nan);
}

/* 16 fp32 to bf16, left in the high half of each lane (the low half not
 * cleared) */
__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1"), always_inline))
static inline __m512i bf16_round512(__m512 f)
{
	__m512i u = _mm512_castps_si512(f);
	__mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
						_mm512_set1_epi32(0x7f800000));
	__m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
				     _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));

	return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
}

__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1"), always_inline))
static inline __m512i fuse_narrow512(enum fuse_kind k, __m512 lo, __m512 hi)
{
	if (fuse_fp16(k))
		return _mm512_inserti64x4(_mm512_castsi256_si512(fp16_round512(lo)),
					  fp16_round512(hi), 1);
	return _mm512_permutex2var_epi16(bf16_round512(lo), bf16_idx(1, 2), bf16_round512(hi));
}

/* The elements of n wire bytes at in (whole elements; n = 64 but in the
 * tail): out = acc op in, or out = in. For 2-byte elements out and acc
 * hold fp32, twice the bytes. */
__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1"), always_inline))
static inline void fuse_op512(enum fuse_kind k, uint8_t *o, const uint8_t *a,
			      const uint8_t *in, size_t n)
{
	__mmask64 m = n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1;

	if (fuse_half(k)) {
		__mmask32 e = n >= 64 ? ~(__mmask32)0 : ((__mmask32)1 << (n / 2)) - 1;
		__m512i w = _mm512_maskz_loadu_epi16(e, in);
		__m512 lo, hi;
		__mmask16 elo = (__mmask16)e, ehi = (__mmask16)(e >> 16);

		fuse_widen512(k, w, &lo, &hi);
		if (fuse_adds(k)) {
			lo = _mm512_add_ps(_mm512_maskz_loadu_ps(elo, a), lo);
			hi = _mm512_add_ps(_mm512_maskz_loadu_ps(ehi, a + 64), hi);
		}
		if (fuse_last(k)) {
			_mm512_mask_storeu_epi16(o, e, fuse_narrow512(k, lo, hi));
			return;
		}
		_mm512_mask_storeu_ps(o, elo, lo);
		_mm512_mask_storeu_ps(o + 64, ehi, hi);
		return;
	}
	__m512i x = _mm512_maskz_loadu_epi8(m, in);

	if (k != FUSE_COPY) {
		__m512i y = _mm512_maskz_loadu_epi8(m, a);
		switch (k) {
		case FUSE_FP32_SUM:
			x = _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(y),
							      _mm512_castsi512_ps(x)));
			break;
		case FUSE_FP64_SUM:
			x = _mm512_castpd_si512(_mm512_add_pd(_mm512_castsi512_pd(y),
							      _mm512_castsi512_pd(x)));
			break;
		case FUSE_I32_SUM:
			x = _mm512_add_epi32(y, x);
			break;
		default:
			x = _mm512_add_epi64(y, x);
			break;
		}
	}
	_mm512_mask_storeu_epi8(o, m, x);
}

/*
 * CRC folding on AVX-512 with VPCLMULQDQ, and beside it the elements:
 * four 512-bit registers (16 lanes) folded 256 bytes at a time (constants
 * x^(2048+32) and x^(2048-32) mod P, reflected and shifted as in the
 * paper), then into one register with the 64-byte constants, then 64
 * bytes at a time, then four lanes into one (crc32_clmul_finish). p: len
 * bytes (>= 256, a multiple of 16), or64 ORed into the first 64, c the raw
 * register; returns the raw register. The same loop does out = acc op in
 * over nbytes of elements at in (none: the plain CRC, crc32_vclmul).
 */
__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1"), always_inline))
static inline uint32_t fold512(enum fuse_kind k, uint32_t c, const uint8_t *p, size_t len,
			       const uint8_t *or64, const uint8_t *in, uint8_t *out,
			       const uint8_t *acc, size_t nbytes)
{
	const __m512i k2048 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x01322d1430, 0x011542778a));
	const __m512i k512 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x01c6e41596, 0x0154442bd4));
	size_t r = 0;
	const size_t aw = fuse_half(k) ? 2 : 1;   /* accumulator bytes a wire byte */
	const size_t ow = fuse_last(k) ? 1 : aw;  /* out's */
	__m512i z1, z2, z3, z4;

#define ZFOLD(z, kk, next) \
	_mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, kk, 0x00), \
				  _mm512_clmulepi64_epi128(z, kk, 0x11), next, 0x96)
	z1 = _mm512_or_si512(_mm512_loadu_si512(p), _mm512_loadu_si512(or64));
	z2 = _mm512_loadu_si512(p + 64);
	z3 = _mm512_loadu_si512(p + 128);
	z4 = _mm512_loadu_si512(p + 192);
	z1 = _mm512_xor_si512(z1, _mm512_castsi128_si512(_mm_cvtsi32_si128((int)c)));
	p += 256;
	len -= 256;
	const uint8_t *pc = pf_cur, *pe = pf_end;
	while (len >= 256 && r + 256 <= nbytes) {
		pf_lines(&pc, pe, 4);
		z1 = ZFOLD(z1, k2048, _mm512_loadu_si512(p));
		z2 = ZFOLD(z2, k2048, _mm512_loadu_si512(p + 64));
		z3 = ZFOLD(z3, k2048, _mm512_loadu_si512(p + 128));
		z4 = ZFOLD(z4, k2048, _mm512_loadu_si512(p + 192));
		for (size_t j = 0; j < 256; j += 64)
			fuse_op512(k, out + (r + j) * ow, acc + (r + j) * aw, in + r + j, 64);
		p += 256;
		len -= 256;
		r += 256;
	}
	while (len >= 256) {
		pf_lines(&pc, pe, 4);
		z1 = ZFOLD(z1, k2048, _mm512_loadu_si512(p));
		z2 = ZFOLD(z2, k2048, _mm512_loadu_si512(p + 64));
		z3 = ZFOLD(z3, k2048, _mm512_loadu_si512(p + 128));
		z4 = ZFOLD(z4, k2048, _mm512_loadu_si512(p + 192));
		p += 256;
		len -= 256;
	}
	pf_cur = pc;
	z2 = ZFOLD(z1, k512, z2);
	z3 = ZFOLD(z2, k512, z3);
	z4 = ZFOLD(z3, k512, z4);
	while (len >= 64) {
		z4 = ZFOLD(z4, k512, _mm512_loadu_si512(p));
		p += 64;
		len -= 64;
	}
#undef ZFOLD
	for (; r < nbytes; r += 64)
		fuse_op512(k, out + r * ow, acc + r * aw, in + r, nbytes - r < 64 ? nbytes - r : 64);
	return crc32_clmul_finish(_mm512_extracti32x4_epi32(z4, 0),
				  _mm512_extracti32x4_epi32(z4, 1),
				  _mm512_extracti32x4_epi32(z4, 2),
				  _mm512_extracti32x4_epi32(z4, 3), p, len);
}

/* A contribution's ICRC (the datagram from ip, span bytes, the masked
 * headers ORed in) with out = acc op its elements, hoff bytes on. */
__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1"), always_inline))
static inline uint32_t icrc_fused512(enum fuse_kind k, const uint8_t *ip, size_t span,
				     size_t hoff, uint8_t *out, const uint8_t *acc,
				     size_t nbytes)
{
	size_t bulk = span & ~(size_t)15;
	uint32_t c = fold512(k, ~crc_after_lrh, ip, bulk, icrc_or_mask, ip + hoff, out, acc,
			     nbytes);

	return ~crc32_raw(c, ip + bulk, span - bulk);
}

__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1")))
static uint32_t crc32_vclmul(uint32_t c, const uint8_t *p, size_t len, const uint8_t *or64)
{
	return fold512(FUSE_COPY, c, p, len, or64, NULL, NULL, NULL, 0);
}

__attribute__((target("avx2,f16c"), always_inline))
static inline __m256 fuse_widen256(enum fuse_kind k, __m128i h)
{
	if (fuse_fp16(k))
		return _mm256_cvtph_ps(h);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 8 fp32 to fp16 as fp16_round512 */
__attribute__((target("avx2,f16c"), always_inline))
static inline __m128i fuse_fp16_narrow256(__m256 f)
{
	__m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)),
				      _mm_set1_epi16(0x7c00));
	__m128i canon = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(-0x8000)),
				     _mm_set1_epi16(0x7e00));
	return _mm_blendv_epi8(h, canon, nan);
}

/* 8 fp32 to bf16 as bf16_round512, left in the low 16 bits of each lane */
__attribute__((target("avx2,f16c"), always_inline))
static inline __m256i fuse_bf16_round256(__m256 f)
{
	__m256i u = _mm256_castps_si256(f);
	__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
					 _mm256_set1_epi32(0x7f800000));
	__m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)),
						       _mm256_and_si256(_mm256_srli_epi32(u, 16),
									_mm256_set1_epi32(1))), 16);
	return _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16),
						     _mm256_set1_epi32(0x40)), nan);
}

/* 32 wire bytes: as fuse_op512 */
__attribute__((target("avx2,f16c"), always_inline))
static inline void fuse_op256(enum fuse_kind k, uint8_t *o, const uint8_t *a,
			      const uint8_t *in)
{
	__m256i x = _mm256_loadu_si256((const __m256i *)in);

	if (fuse_half(k)) {
		__m256 lo = fuse_widen256(k, _mm256_castsi256_si128(x));
		__m256 hi = fuse_widen256(k, _mm256_extracti128_si256(x, 1));

		if (fuse_adds(k)) {
			lo = _mm256_add_ps(_mm256_loadu_ps((const float *)a), lo);
			hi = _mm256_add_ps(_mm256_loadu_ps((const float *)(a + 32)), hi);
		}
		if (k == FUSE_FP16_LAST) {
			_mm_storeu_si128((__m128i *)o, fuse_fp16_narrow256(lo));
			_mm_storeu_si128((__m128i *)(o + 16), fuse_fp16_narrow256(hi));
			return;
		}
		if (k == FUSE_BF16_LAST) {
			/* below 2^16 each: packing with unsigned saturation keeps
			 * them; the packs work per 128-bit half, the permute
			 * puts them in order */
			__m256i p = _mm256_packus_epi32(fuse_bf16_round256(lo),
							fuse_bf16_round256(hi));
			_mm256_storeu_si256((__m256i *)o, _mm256_permute4x64_epi64(p, 0xd8));
			return;
		}
		_mm256_storeu_ps((float *)o, lo);
		_mm256_storeu_ps((float *)(o + 32), hi);
		return;
	}
	if (k != FUSE_COPY) {
		__m256i y = _mm256_loadu_si256((const __m256i *)a);
		switch (k) {
		case FUSE_FP32_SUM:
			x = _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(y),
							      _mm256_castsi256_ps(x)));
			break;
		case FUSE_FP64_SUM:
			x = _mm256_castpd_si256(_mm256_add_pd(_mm256_castsi256_pd(y),
							      _mm256_castsi256_pd(x)));
			break;
		case FUSE_I32_SUM:
			x = _mm256_add_epi32(y, x);
			break;
		default:
			x = _mm256_add_epi64(y, x);
			break;
		}
	}
	_mm256_storeu_si256((__m256i *)o, x);
}

/* The elements after the last whole vector, one at a time. */
static inline void fuse_scalar(enum fuse_kind k, uint8_t *o, const uint8_t *a,
			       const uint8_t *in, size_t nbytes)
{
	size_t i = 0;

	switch (k) {
	case FUSE_COPY:
		memmove(o, in, nbytes);
		break;
	/* IEEE addition; integers modulo 2^n */
#define SCALAR_SUM(T)                                                  \
	for (; i + sizeof(T) <= nbytes; i += sizeof(T)) {              \
		T x, y;                                                \
		memcpy(&x, in + i, sizeof(T));                         \
		memcpy(&y, a + i, sizeof(T));                          \
		y += x;                                                \
		memcpy(o + i, &y, sizeof(T));                          \
	}
	case FUSE_FP32_SUM:
		SCALAR_SUM(float);
		break;
	case FUSE_FP64_SUM:
		SCALAR_SUM(double);
		break;
	case FUSE_I32_SUM:
		SCALAR_SUM(uint32_t);
		break;
	case FUSE_I64_SUM:
		SCALAR_SUM(uint64_t);
		break;
#undef SCALAR_SUM
	default:
		/* 2-byte elements, fp32 accumulators */
		for (; i + 2 <= nbytes; i += 2) {
			uint16_t h;
			float x, y = 0.0f;
			memcpy(&h, in + i, 2);
			x = fuse_fp16(k) ? agg_fp16_to_fp32(h) : agg_bf16_to_fp32(h);
			if (fuse_adds(k)) {
				memcpy(&y, a + 2 * i, 4);
				x = y + x;
			}
			if (fuse_last(k)) {
				h = fuse_fp16(k) ? agg_fp32_to_fp16(x) : agg_fp32_to_bf16(x);
				memcpy(o + i, &h, 2);
			} else {
				memcpy(o + 2 * i, &x, 4);
			}
		}
		break;
	}
}

/*
 * The same with 256-bit VPCLMULQDQ (AVX2 CPUs that have it: AMD Zen 3,
 * Intel Alder Lake cores without AVX-512): four 256-bit registers (8
 * lanes) folded 128 bytes at a time (x^(1024+32) and x^(1024-32) mod P),
 * then the first two onto the last two, 64 bytes on (the 4-lane
 * constants), which leaves four consecutive 128-bit lanes for the common
 * end. len >= 128 and a multiple of 16.
 */
__attribute__((target("avx2,f16c,vpclmulqdq,pclmul,sse4.1"), always_inline))
static inline uint32_t fold256(enum fuse_kind k, uint32_t c, const uint8_t *p, size_t len,
			       const uint8_t *or64, const uint8_t *in, uint8_t *out,
			       const uint8_t *acc, size_t nbytes)
{
	const __m256i k1024 = _mm256_broadcastsi128_si256(_mm_set_epi64x(0x014a7fe880,
									  0x01e88ef372));
	const __m256i k512 = _mm256_broadcastsi128_si256(_mm_set_epi64x(0x01c6e41596,
									 0x0154442bd4));
	size_t r = 0;
	const size_t aw = fuse_half(k) ? 2 : 1;
	const size_t ow = fuse_last(k) ? 1 : aw;
	__m256i y1, y2, y3, y4;

#define YFOLD(y, kk, next) \
	_mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(y, kk, 0x00), \
					  _mm256_clmulepi64_epi128(y, kk, 0x11)), next)
#define YLOAD(q) _mm256_loadu_si256((const __m256i *)(q))
	y1 = _mm256_or_si256(YLOAD(p), YLOAD(or64));
	y2 = _mm256_or_si256(YLOAD(p + 32), YLOAD(or64 + 32));
	y3 = YLOAD(p + 64);
	y4 = YLOAD(p + 96);
	y1 = _mm256_xor_si256(y1, _mm256_castsi128_si256(_mm_cvtsi32_si128((int)c)));
	p += 128;
	len -= 128;
	const uint8_t *pc = pf_cur, *pe = pf_end;
	while (len >= 128 && r + 128 <= nbytes) {
		pf_lines(&pc, pe, 2);
		y1 = YFOLD(y1, k1024, YLOAD(p));
		y2 = YFOLD(y2, k1024, YLOAD(p + 32));
		y3 = YFOLD(y3, k1024, YLOAD(p + 64));
		y4 = YFOLD(y4, k1024, YLOAD(p + 96));
		for (size_t j = 0; j < 128; j += 32)
			fuse_op256(k, out + (r + j) * ow, acc + (r + j) * aw, in + r + j);
		p += 128;
		len -= 128;
		r += 128;
	}
	while (len >= 128) {
		pf_lines(&pc, pe, 2);
		y1 = YFOLD(y1, k1024, YLOAD(p));
		y2 = YFOLD(y2, k1024, YLOAD(p + 32));
		y3 = YFOLD(y3, k1024, YLOAD(p + 64));
		y4 = YFOLD(y4, k1024, YLOAD(p + 96));
		p += 128;
		len -= 128;
	}
	pf_cur = pc;
	y3 = YFOLD(y1, k512, y3);
	y4 = YFOLD(y2, k512, y4);
#undef YFOLD
#undef YLOAD
	for (; r + 32 <= nbytes; r += 32)
		fuse_op256(k, out + r * ow, acc + r * aw, in + r);
	if (r < nbytes)
		fuse_scalar(k, out + r * ow, acc + r * aw, in + r, nbytes - r);
	return crc32_clmul_finish(_mm256_castsi256_si128(y3), _mm256_extracti128_si256(y3, 1),
				  _mm256_castsi256_si128(y4), _mm256_extracti128_si256(y4, 1),
				  p, len);
}

__attribute__((target("avx2,f16c,vpclmulqdq,pclmul,sse4.1"), always_inline))
static inline uint32_t icrc_fused256(enum fuse_kind k, const uint8_t *ip, size_t span,
				     size_t hoff, uint8_t *out, const uint8_t *acc,
				     size_t nbytes)
{
	size_t bulk = span & ~(size_t)15;
	uint32_t c = fold256(k, ~crc_after_lrh, ip, bulk, icrc_or_mask, ip + hoff, out, acc,
			     nbytes);

	return ~crc32_raw(c, ip + bulk, span - bulk);
}

__attribute__((target("avx2,f16c,vpclmulqdq,pclmul,sse4.1")))
static uint32_t crc32_vclmul256(uint32_t c, const uint8_t *p, size_t len, const uint8_t *or64)
{
	return fold256(FUSE_COPY, c, p, len, or64, NULL, NULL, NULL, 0);
}

/* The same with PCLMULQDQ (CPUs without VPCLMULQDQ that have AVX2: Intel
 * to Skylake, AMD to Zen 2): crc32_clmul's four 128-bit lanes, 64 bytes a
 * step, the elements with AVX2 beside them. */
__attribute__((target("avx2,f16c,pclmul,sse4.1"), always_inline))
static inline uint32_t icrc_fused128(enum fuse_kind k, const uint8_t *ip, size_t span,
				     size_t hoff, uint8_t *out, const uint8_t *acc,
				     size_t nbytes)
{
	const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
	const uint8_t *p = ip, *in = ip + hoff;
	size_t bulk = span & ~(size_t)15, len = bulk, r = 0;
	const size_t aw = fuse_half(k) ? 2 : 1;
	const size_t ow = fuse_last(k) ? 1 : aw;
	__m128i x1, x2, x3, x4;

#define XLOAD(q) _mm_loadu_si128((const __m128i *)(q))
#define XMASK(j) _mm_load_si128((const __m128i *)(icrc_or_mask + 16 * (j)))
#define XFOLD(x, next) \
	_mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k1k2, 0x00), \
				    _mm_clmulepi64_si128(x, k1k2, 0x11)), next)
	x1 = _mm_or_si128(XLOAD(p), XMASK(0));
	x2 = _mm_or_si128(XLOAD(p + 16), XMASK(1));
	x3 = _mm_or_si128(XLOAD(p + 32), XMASK(2));
	x4 = _mm_or_si128(XLOAD(p + 48), XMASK(3));
	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)~crc_after_lrh));
	p += 64;
	len -= 64;
	const uint8_t *pc = pf_cur, *pe = pf_end;
	while (len >= 64 && r + 64 <= nbytes) {
		pf_lines(&pc, pe, 1);
		x1 = XFOLD(x1, XLOAD(p));
		x2 = XFOLD(x2, XLOAD(p + 16));
		x3 = XFOLD(x3, XLOAD(p + 32));
		x4 = XFOLD(x4, XLOAD(p + 48));
		fuse_op256(k, out + r * ow, acc + r * aw, in + r);
		fuse_op256(k, out + (r + 32) * ow, acc + (r + 32) * aw, in + r + 32);
		p += 64;
		len -= 64;
		r += 64;
	}
	while (len >= 64) {
		pf_lines(&pc, pe, 1);
		x1 = XFOLD(x1, XLOAD(p));
		x2 = XFOLD(x2, XLOAD(p + 16));
		x3 = XFOLD(x3, XLOAD(p + 32));
		x4 = XFOLD(x4, XLOAD(p + 48));
		p += 64;
		len -= 64;
	}
	pf_cur = pc;
#undef XFOLD
#undef XMASK
#undef XLOAD
	for (; r + 32 <= nbytes; r += 32)
		fuse_op256(k, out + r * ow, acc + r * aw, in + r);
	fuse_scalar(k, out + r * ow, acc + r * aw, in + r, nbytes - r);
	uint32_t c = crc32_clmul_finish(x1, x2, x3, x4, p, len);
	return ~crc32_raw(c, ip + bulk, span - bulk);
}

/* One function per kind and width: the kind a constant in each. */
#define FUSED_FNS(kind, tag)                                                         \
	__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1")))          \
	static uint32_t icrc_##tag##_512(const uint8_t *ip, size_t span, size_t hoff,  \
					 uint8_t *o, const uint8_t *a, size_t n)       \
	{ return icrc_fused512(kind, ip, span, hoff, o, a, n); }                       \
	__attribute__((target("avx2,f16c,vpclmulqdq,pclmul,sse4.1")))                 \
	static uint32_t icrc_##tag##_256(const uint8_t *ip, size_t span, size_t hoff,  \
					 uint8_t *o, const uint8_t *a, size_t n)       \
	{ return icrc_fused256(kind, ip, span, hoff, o, a, n); }                       \
	__attribute__((target("avx2,f16c,pclmul,sse4.1")))                            \
	static uint32_t icrc_##tag##_128(const uint8_t *ip, size_t span, size_t hoff,  \
					 uint8_t *o, const uint8_t *a, size_t n)       \
	{ return icrc_fused128(kind, ip, span, hoff, o, a, n); }
FUSED_FNS(FUSE_COPY, copy)
FUSED_FNS(FUSE_FP32_SUM, fp32_sum)
FUSED_FNS(FUSE_FP64_SUM, fp64_sum)
FUSED_FNS(FUSE_I32_SUM, i32_sum)
FUSED_FNS(FUSE_I64_SUM, i64_sum)
FUSED_FNS(FUSE_FP16_LOAD, fp16_load)
FUSED_FNS(FUSE_FP16_SUM, fp16_sum)
FUSED_FNS(FUSE_BF16_LOAD, bf16_load)
FUSED_FNS(FUSE_BF16_SUM, bf16_sum)
FUSED_FNS(FUSE_FP16_LAST, fp16_last)
FUSED_FNS(FUSE_BF16_LAST, bf16_last)
#undef FUSED_FNS

typedef uint32_t (*fused_fn)(const uint8_t *, size_t, size_t, uint8_t *, const uint8_t *,
			     size_t);

#define FUSED_ROW(w) {                                                              \
	[FUSE_COPY] = icrc_copy_##w, [FUSE_FP32_SUM] = icrc_fp32_sum_##w,             \
	[FUSE_FP64_SUM] = icrc_fp64_sum_##w, [FUSE_I32_SUM] = icrc_i32_sum_##w,       \
	[FUSE_I64_SUM] = icrc_i64_sum_##w, [FUSE_FP16_LOAD] = icrc_fp16_load_##w,     \
	[FUSE_FP16_SUM] = icrc_fp16_sum_##w, [FUSE_BF16_LOAD] = icrc_bf16_load_##w,   \
	[FUSE_BF16_SUM] = icrc_bf16_sum_##w, [FUSE_FP16_LAST] = icrc_fp16_last_##w,   \
	[FUSE_BF16_LAST] = icrc_bf16_last_##w }
static const fused_fn fused_fns[3][FUSE_BF16_LAST + 1] = {
	FUSED_ROW(512), FUSED_ROW(256), FUSED_ROW(128),
};
#undef FUSED_ROW

/* The one-pass kernel of kind with the CRC implementation in use (its
 * width: VPCLMULQDQ on AVX-512 or AVX2, PCLMULQDQ with AVX2 beside it),
 * or NULL. */
static fused_fn fused_kernel(enum fuse_kind kind)
{
	enum agg_crc_impl impl = agg_crc32_impl_best();
	int w;

	if (impl == AGG_CRC_VPCLMUL_AVX512 && have_avx512bw)
		w = 0;
	else if ((impl == AGG_CRC_VPCLMUL_AVX512 || impl == AGG_CRC_VPCLMUL_AVX2) &&
		 have_vclmul256)
		w = 1;          /* (AVX-512 without BW: the 256-bit kernels) */
	else if (impl == AGG_CRC_PCLMUL && have_avx2)
		w = 2;
	else
		return NULL;
	/* the 256- and 128-bit kernels are built for F16C as well */
	if ((w > 0 || fuse_fp16(kind)) && !have_f16c)
		return NULL;
	return fused_fns[w][kind];
}

/* The kernel for dtype and op: load (the first contribution, a copy or a
 * widening), sum, or the last sum rounded to the wire (fp16, bf16). */
static fused_fn fused_for(enum agg_dtype dtype, enum agg_op op, bool load)
{
	if (!load && op != AGG_OP_SUM)
		return NULL;
	switch (dtype) {
	case AGG_DTYPE_FP16:
		return fused_kernel(load ? FUSE_FP16_LOAD : FUSE_FP16_SUM);
	case AGG_DTYPE_BF16:
		return fused_kernel(load ? FUSE_BF16_LOAD : FUSE_BF16_SUM);
	case AGG_DTYPE_FP32:
		return fused_kernel(load ? FUSE_COPY : FUSE_FP32_SUM);
	case AGG_DTYPE_FP64:
		return fused_kernel(load ? FUSE_COPY : FUSE_FP64_SUM);
	case AGG_DTYPE_INT32:
		return fused_kernel(load ? FUSE_COPY : FUSE_I32_SUM);
	case AGG_DTYPE_INT64:
		return fused_kernel(load ? FUSE_COPY : FUSE_I64_SUM);
	default:
		return NULL;
	}
}
#endif

/* CRC-32 of buf with one implementation the caller checked exists. */
static uint32_t crc32_impl(enum agg_crc_impl impl, uint32_t crc, const uint8_t *p,
			   size_t len)
{
	uint32_t c = ~crc;

#if defined(__x86_64__)
	/* the folding takes the multiples of 16 bytes from its minimum on
	 * (its first registers' worth), the tables the rest */
	fold_fn fold = crc32_fold_for(impl, len);
	size_t bulk = len & ~(size_t)15;

	if (fold)
		c = fold(c, p, bulk, no_mask);
	else if (impl != AGG_CRC_TABLE && len >= 16)
		c = crc32_clmul16(c, p, bulk);
	else
		bulk = 0;
	p += bulk;
	len -= bulk;
#else
	(void)impl;
#endif
	return ~crc32_raw(c, p, len);
}

bool agg_crc32_impl_available(enum agg_crc_impl impl)
{
	switch (impl) {
	case AGG_CRC_TABLE:
		return true;
#if defined(__x86_64__)
	case AGG_CRC_PCLMUL:
		return have_clmul;
	case AGG_CRC_VPCLMUL_AVX512:
		return have_vclmul;
	case AGG_CRC_VPCLMUL_AVX2:
		return have_vclmul256;
#endif
	default:
		return false;
	}
}

const char *agg_crc32_impl_name(enum agg_crc_impl impl)
{
	static const char *const names[AGG_CRC__COUNT] = {
		[AGG_CRC_TABLE] = "slice-by-8",
		[AGG_CRC_PCLMUL] = "pclmulqdq",
		[AGG_CRC_VPCLMUL_AVX512] = "vpclmulqdq-avx512",
		[AGG_CRC_VPCLMUL_AVX2] = "vpclmulqdq-avx2",
	};
	return (unsigned)impl < AGG_CRC__COUNT ? names[impl] : "unknown";
}

static int crc_forced = -1;

int agg_crc32_impl_use(enum agg_crc_impl impl)
{
	if ((unsigned)impl >= AGG_CRC__COUNT || !agg_crc32_impl_available(impl))
		return -1;
	crc_forced = (int)impl;
	return 0;
}

int agg_crc32_impl_parse(const char *name)
{
	for (int i = 0; i < AGG_CRC__COUNT; i++)
		if (name && !strcmp(name, agg_crc32_impl_name((enum agg_crc_impl)i)))
			return i;
	return -1;
}

enum agg_crc_impl agg_crc32_impl_best(void)
{
	if (crc_forced >= 0)
		return (enum agg_crc_impl)crc_forced;
#if defined(__x86_64__)
	if (have_vclmul)
		return AGG_CRC_VPCLMUL_AVX512;
	if (have_vclmul256)
		return AGG_CRC_VPCLMUL_AVX2;
	if (have_clmul)
		return AGG_CRC_PCLMUL;
#endif
	return AGG_CRC_TABLE;
}

uint32_t agg_crc32_with(enum agg_crc_impl impl, uint32_t crc, const void *buf, size_t len)
{
	if (!agg_crc32_impl_available(impl))
		impl = AGG_CRC_TABLE;
	return crc32_impl(impl, crc, buf, len);
}

uint32_t agg_crc32(uint32_t crc, const void *buf, size_t len)
{
	return crc32_impl(agg_crc32_impl_best(), crc, buf, len);
}

/* a * b modulo P, in the reflected representation (zlib's multmodp). */
static uint32_t crc_multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	if (a == 0)
		return 0;     /* the loop below ends at a's lowest set bit */
	for (;;) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ CRC32_POLY : b >> 1;
	}
	return p;
}

/* x^(2^k) mod P for k = 0..31, built at start-up. */
static uint32_t x2n_table[32];

__attribute__((constructor)) static void crc_x2n_init(void)
{
	uint32_t p = 1u << 30; /* x^1 */

	x2n_table[0] = p;
	for (int n = 1; n < 32; n++)
		x2n_table[n] = p = crc_multmodp(p, p);
}

/* x^-(2^k) mod P for k = 0..31. x's inverse: P = x^32 + ... + 1, so
 * x * (P - 1) / x = P - 1 = 1 mod P; (P - 1) / x in the reflected
 * representation is the polynomial's bits one place up, and x^31 (bit 0). */
static uint32_t xinv2n_table[32];

__attribute__((constructor)) static void crc_xinv2n_init(void)
{
	uint32_t p = (CRC32_POLY << 1) | 1u; /* x^-1 */

	xinv2n_table[0] = p;
	for (int n = 1; n < 32; n++)
		xinv2n_table[n] = p = crc_multmodp(p, p);
}

static uint32_t multmodp_best(uint32_t a, uint32_t b);

uint32_t agg_crc32_unshift_op(size_t len)
{
	/* x^-(8*len + 32): the 4 bytes themselves (x^32) and the len after */
	uint64_t e = 8 * (uint64_t)len + 32;
	uint32_t p = 1u << 31; /* x^0 */

	for (unsigned k = 0; e; k++, e >>= 1)
		if (e & 1)
			p = multmodp_best(xinv2n_table[k & 31], p);
	return p;
}

uint32_t agg_crc32_balance(uint32_t have, uint32_t want, uint32_t unshift_op)
{
	/* CRC-32 is linear: XORing the 4 bytes with B, len bytes before the
	 * end, changes the CRC by B * x^(8*len + 32); have ^ want divided by
	 * that. */
	return multmodp_best(unshift_op, have ^ want);
}

uint32_t agg_crc32_shift_op(size_t len)
{
	/* x^(8*len): 8 * len = 2^3 * len, walk the bits of len from k = 3. */
	uint32_t p = 1u << 31; /* x^0 */
	unsigned k = 3;

	while (len) {
		if (len & 1)
			p = multmodp_best(x2n_table[k & 31], p);
		len >>= 1;
		k++;
	}
	return p;
}

#if defined(__x86_64__)
/* The same product with one carry-less multiplication and the Barrett
 * reduction of crc32_clmul (the reflected product is one bit short). */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc_multmodp_clmul(uint32_t a, uint32_t b)
{
	const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
	const __m128i mask32 = _mm_setr_epi32(-1, 0, -1, 0);
	__m128i v, t;

	v = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_cvtsi32_si128((int)b), 0x00);
	v = _mm_slli_epi64(v, 1);
	t = _mm_clmulepi64_si128(_mm_and_si128(v, mask32), poly, 0x10);
	t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly, 0x00);
	v = _mm_xor_si128(v, t);
	return (uint32_t)_mm_extract_epi32(v, 1);
}
#endif

static uint32_t multmodp_best(uint32_t a, uint32_t b)
{
#if defined(__x86_64__)
	if (have_clmul)
		return crc_multmodp_clmul(a, b);
#endif
	return crc_multmodp(a, b);
}

uint32_t agg_crc32_combine_op_with(enum agg_crc_impl impl, uint32_t crc_a, uint32_t crc_b,
				   uint32_t op)
{
#if defined(__x86_64__)
	if (impl != AGG_CRC_TABLE && agg_crc32_impl_available(impl))
		return crc_multmodp_clmul(op, crc_a) ^ crc_b;
#else
	(void)impl;
#endif
	return crc_multmodp(op, crc_a) ^ crc_b;
}

uint32_t agg_crc32_combine_op(uint32_t crc_a, uint32_t crc_b, uint32_t op)
{
	return multmodp_best(op, crc_a) ^ crc_b;
}

uint32_t agg_crc32_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b)
{
	return agg_crc32_combine_op(crc_a, crc_b, agg_crc32_shift_op(len_b));
}

/*
 * The masked pseudo-header: 8 bytes of 0xFF stand for the LRH, then the
 * IPv4 header with TOS, TTL and checksum set to 1s, the UDP header with
 * the checksum set to 1s, and the BTH with byte 4 (FECN, BECN, resv6) set
 * to 1s (IBA Annex A17, RoCEv2, "ICRC").
 */
uint32_t agg_icrc_ipv4_prefix(const uint8_t *ip, size_t hdr_len)
{
	/* TOS, TTL, IPv4 header checksum, UDP checksum, BTH byte 4 (each
	 * byte where the header is that long) */
	static const uint8_t masked_at[] = { 1, 8, 10, 11, 26, 27, 32 };
#if defined(__x86_64__)
	/* The CRC after the LRH's 8 bytes of 1s is a constant. From 64
	 * bytes on (a contribution's IPv4 .. payload, 4176 bytes at 4 KiB; a
	 * result's headers, 80) the folding reads the headers in place with
	 * the mask ORed into its first registers: one pass, no copy. The
	 * spans are multiples of 16, so none of it goes through the tables,
	 * which are cold on a switch's data path. */
	enum agg_crc_impl impl = agg_crc32_impl_best();
	fold_fn fold = crc32_fold_for(impl, hdr_len);

	if (fold) {
		size_t bulk = hdr_len & ~(size_t)15;
		uint32_t r = fold(~crc_after_lrh, ip, bulk, icrc_or_mask);

		return ~crc32_raw(r, ip + bulk, hdr_len - bulk);
	}
#endif
	/* Shorter: the masked headers and the bytes after them up to
	 * PREFIX_BYTES go in one buffer. */
	enum { PREFIX_BYTES = 96 };
	uint8_t masked[PREFIX_BYTES];
	size_t mlen = hdr_len < PREFIX_BYTES ? hdr_len : PREFIX_BYTES;
	uint32_t c;

	memcpy(masked, ip, mlen);
	for (size_t k = 0; k < sizeof(masked_at) && masked_at[k] < mlen; k++)
		masked[masked_at[k]] = 0xff;

	c = agg_crc32(crc_after_lrh, masked, mlen);
	if (hdr_len > mlen)
		c = agg_crc32(c, ip + mlen, hdr_len - mlen);
	return c;
}

uint32_t agg_icrc_ipv4(const uint8_t *ip, size_t ip_len)
{
	return agg_icrc_ipv4_prefix(ip, ip_len - AGG_ICRC_LEN);
}

bool agg_icrc_reduce_available(enum agg_dtype dtype, enum agg_op op, bool load)
{
#if defined(__x86_64__)
	return fused_for(dtype, op, load) != NULL;
#else
	(void)dtype;
	(void)op;
	(void)load;
	return false;
#endif
}

#if defined(__x86_64__)
/* The set's last contribution, fp16 or bf16: the kernel that rounds as it
 * sums, or NULL. */
static fused_fn fused_last_for(enum agg_dtype dtype, enum agg_op op)
{
	if (op != AGG_OP_SUM)
		return NULL;
	if (dtype == AGG_DTYPE_FP16)
		return fused_kernel(FUSE_FP16_LAST);
	if (dtype == AGG_DTYPE_BF16)
		return fused_kernel(FUSE_BF16_LAST);
	return NULL;
}
#endif

bool agg_icrc_reduce_store_available(enum agg_dtype dtype, enum agg_op op)
{
#if defined(__x86_64__)
	return fused_last_for(dtype, op) != NULL;
#else
	(void)dtype;
	(void)op;
	return false;
#endif
}

uint32_t agg_icrc_reduce_store(const struct agg_pkt *pkt, void *out, const void *acc)
{
	const uint8_t *ip = pkt->frame + pkt->l3_off;
	enum agg_dtype dtype = (enum agg_dtype)pkt->hdr.dtype;
	enum agg_op op = (enum agg_op)pkt->hdr.op;

#if defined(__x86_64__)
	size_t span = (size_t)pkt->ip_len - AGG_ICRC_LEN;
	fused_fn f = fused_last_for(dtype, op);

	if (f && span >= 256)
		return f(ip, span, (size_t)(pkt->payload - ip), out, acc, pkt->payload_len);
#endif
	/* two passes, 256 elements at a time: acc op in, rounded to the
	 * wire as agg_acc_store does (fp16, bf16); the others' accumulators
	 * are the wire's format already */
	if (agg_dtype_acc_size(dtype) == agg_dtype_size(dtype))
		return agg_icrc_reduce(pkt, out, acc);
	float sum[256];
	for (uint32_t i = 0; i < pkt->hdr.count; i += 256) {
		uint32_t n = pkt->hdr.count - i < 256 ? pkt->hdr.count - i : 256;
		memcpy(sum, (const float *)acc + i, n * sizeof(float));
		agg_acc_reduce(dtype, op, sum, pkt->payload + 2 * (size_t)i, n);
		agg_acc_store(dtype, (uint8_t *)out + 2 * (size_t)i, sum, n);
	}
	return agg_icrc_ipv4(ip, pkt->ip_len);
}

uint32_t agg_icrc_reduce(const struct agg_pkt *pkt, void *out, const void *acc)
{
	const uint8_t *ip = pkt->frame + pkt->l3_off;
	enum agg_dtype dtype = (enum agg_dtype)pkt->hdr.dtype;
	enum agg_op op = (enum agg_op)pkt->hdr.op;
	uint32_t icrc;

#if defined(__x86_64__)
	size_t span = (size_t)pkt->ip_len - AGG_ICRC_LEN;
	fused_fn f = fused_for(dtype, op, acc == NULL);

	if (f && span >= 256)
		return f(ip, span, (size_t)(pkt->payload - ip), out,
			 acc ? acc : pkt->payload, pkt->payload_len);
#endif
	/* two passes */
	icrc = agg_icrc_ipv4(ip, pkt->ip_len);
	if (!acc) {
		agg_acc_load(dtype, out, pkt->payload, pkt->hdr.count);
	} else {
		if (out != acc)
			memcpy(out, acc, (size_t)pkt->hdr.count * agg_dtype_acc_size(dtype));
		agg_acc_reduce(dtype, op, out, pkt->payload, pkt->hdr.count);
	}
	return icrc;
}

void agg_icrc_store(uint8_t *p, uint32_t icrc)
{
	p[0] = icrc & 0xff;
	p[1] = (icrc >> 8) & 0xff;
	p[2] = (icrc >> 16) & 0xff;
	p[3] = icrc >> 24;
}

uint32_t agg_icrc_load(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}
