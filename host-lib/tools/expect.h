/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inputs whose all-reduce is exact whatever the reduction order (small
 * integers, powers of two for prod), and the reference result computed
 * locally: shared by inca-allreduce-perf and inca-check.
 */
#ifndef INCA_TOOLS_EXPECT_H
#define INCA_TOOLS_EXPECT_H

#include <stdint.h>
#include <string.h>

#include "inca.h"
#include "inca/agg.h"

/* Exact inputs: small integers (or powers of two for prod) so every
 * reduction order gives the same, checkable result. */
static inline double fval(int op, int r, size_t i)
{
	if (op == INCA_PROD) {
		static const double v[] = { 1, 2, 0.5, -1, 1, -2, 1, 0.25 };
		return v[((size_t)r * 3 + i * 7) % 8];
	}
	return (double)((int)(((size_t)r * 131 + i * 17) % 41) - 20);
}

static inline int64_t ival(int op, int r, size_t i)
{
	uint64_t h = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 1) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	if (op == INCA_PROD)
		return (int64_t)(h % 7) - 3;
	if (op >= INCA_BAND)
		return (int64_t)h;
	return (int64_t)(h % 2000001) - 1000000;
}

static inline void put(int dt, void *buf, size_t i, double f, int64_t v)
{
	uint8_t *p = buf;
	float x = (float)f;
	int32_t v32 = (int32_t)v;
	uint16_t h;

	switch (dt) {
	case INCA_FLOAT32: memcpy(p + 4 * i, &x, 4); break;
	case INCA_FLOAT64: memcpy(p + 8 * i, &f, 8); break;
	case INCA_FLOAT16: h = agg_fp32_to_fp16(x); memcpy(p + 2 * i, &h, 2); break;
	case INCA_BFLOAT16: h = agg_fp32_to_bf16(x); memcpy(p + 2 * i, &h, 2); break;
	case INCA_INT32: memcpy(p + 4 * i, &v32, 4); break;
	case INCA_INT64: memcpy(p + 8 * i, &v, 8); break;
	}
}

static inline void fill(int dt, int op, int rank, void *buf, size_t count)
{
	for (size_t i = 0; i < count; i++)
		put(dt, buf, i, fval(op, rank, i), ival(op, rank, i));
}

static inline void expected(int dt, int op, int size, void *buf, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		double f = fval(op, 0, i);
		uint64_t v = (uint64_t)ival(op, 0, i);
		int32_t v32 = (int32_t)v;

		for (int r = 1; r < size; r++) {
			double g = fval(op, r, i);
			uint64_t w = (uint64_t)ival(op, r, i);
			int32_t w32 = (int32_t)w;
			switch (op) {
			case INCA_SUM: f += g; v += w; v32 = (int32_t)((uint32_t)v32 + (uint32_t)w32); break;
			case INCA_PROD: f *= g; v *= w; v32 = (int32_t)((uint32_t)v32 * (uint32_t)w32); break;
			case INCA_MIN: f = g < f ? g : f; v = (int64_t)w < (int64_t)v ? w : v; v32 = w32 < v32 ? w32 : v32; break;
			case INCA_MAX: f = g > f ? g : f; v = (int64_t)w > (int64_t)v ? w : v; v32 = w32 > v32 ? w32 : v32; break;
			case INCA_BAND: v &= w; v32 &= w32; break;
			case INCA_BOR: v |= w; v32 |= w32; break;
			case INCA_BXOR: v ^= w; v32 ^= w32; break;
			}
		}
		put(dt, buf, i, f, dt == INCA_INT32 ? v32 : (int64_t)v);
	}
}

#endif
