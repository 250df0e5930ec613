/* SPDX-License-Identifier: BSD-3-Clause */
/* Byte-order readers and writers shared by the aggregation engine's files;
 * not installed. The group's layout is agg_group.h. */
#ifndef AGG_PRIV_H
#define AGG_PRIV_H

#include <stdint.h>
#include <string.h>

#include "inca/agg.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "INCA's element payloads are little-endian; big-endian hosts are not supported yet"
#endif

#define AGG_LIKELY(x)   __builtin_expect(!!(x), 1)
#define AGG_UNLIKELY(x) __builtin_expect(!!(x), 0)

static inline uint16_t agg_rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t agg_rd24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline uint32_t agg_rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline void agg_wr16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

static inline void agg_wr24(uint8_t *p, uint32_t v)
{
	p[0] = (v >> 16) & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = v & 0xff;
}

static inline void agg_wr32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = (v >> 16) & 0xff;
	p[2] = (v >> 8) & 0xff;
	p[3] = v & 0xff;
}

/* Does a decoded packet's ICRC (as carried) differ from its frame's? */
static inline bool agg_pkt_icrc_wrong(const struct agg_pkt *pkt)
{
	return agg_icrc_ipv4(pkt->frame + pkt->l3_off, pkt->ip_len) != pkt->icrc;
}

/* Bytes of zero padding that make n payload bytes a multiple of 4. */
static inline uint8_t agg_pad_len(size_t n)
{
	return (uint8_t)((4 - (n & 3)) & 3);
}

#endif /* AGG_PRIV_H */
