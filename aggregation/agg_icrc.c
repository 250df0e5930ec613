/* SPDX-License-Identifier: BSD-3-Clause */
/* CRC-32 (slice-by-8), CRC combination, and the RoCEv2 invariant CRC. */
#include <string.h>

#include "agg_priv.h"

/* IEEE 802.3 CRC-32, reflected polynomial. */
#define CRC32_POLY 0xedb88320u

static uint32_t crc_table[8][256];

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

uint32_t agg_crc32(uint32_t crc, const void *buf, size_t len)
{
	return ~crc32_raw(~crc, buf, len);
}

/* a * b modulo P, in the reflected representation (zlib's multmodp). */
static uint32_t crc_multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

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

uint32_t agg_crc32_shift_op(size_t len)
{
	/* x^(8*len): 8 * len = 2^3 * len, walk the bits of len from k = 3. */
	uint32_t p = 1u << 31; /* x^0 */
	unsigned k = 3;

	while (len) {
		if (len & 1)
			p = crc_multmodp(x2n_table[k & 31], p);
		len >>= 1;
		k++;
	}
	return p;
}

uint32_t agg_crc32_combine_op(uint32_t crc_a, uint32_t crc_b, uint32_t op)
{
	return crc_multmodp(op, crc_a) ^ crc_b;
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
	static const uint8_t lrh[8] = { 0xff, 0xff, 0xff, 0xff,
					0xff, 0xff, 0xff, 0xff };
	uint8_t masked[AGG_IPV4_HLEN + AGG_UDP_HLEN + AGG_BTH_LEN];
	size_t mlen = hdr_len < sizeof(masked) ? hdr_len : sizeof(masked);
	uint32_t c;

	memcpy(masked, ip, mlen);
	if (mlen > 1)
		masked[1] = 0xff;                     /* TOS */
	if (mlen > 8)
		masked[8] = 0xff;                     /* TTL */
	if (mlen > 11)
		masked[10] = masked[11] = 0xff;       /* header checksum */
	if (mlen > 27)
		masked[26] = masked[27] = 0xff;       /* UDP checksum */
	if (mlen > 32)
		masked[32] = 0xff;                    /* BTH byte 4 */

	c = crc32_raw(0xffffffffu, lrh, sizeof(lrh));
	c = crc32_raw(c, masked, mlen);
	if (hdr_len > mlen)
		c = crc32_raw(c, ip + mlen, hdr_len - mlen);
	return ~c;
}

uint32_t agg_icrc_ipv4(const uint8_t *ip, size_t ip_len)
{
	return agg_icrc_ipv4_prefix(ip, ip_len - AGG_ICRC_LEN);
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
