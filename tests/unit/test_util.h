/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared helpers for the unit tests: seeded randomness and frame builders. */
#ifndef INCA_TEST_UTIL_H
#define INCA_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inca/agg.h"

/* xorshift64*: reproducible from the printed seed (INCA_TEST_SEED). */
static uint64_t test_rng_state;

static inline uint64_t test_seed_init(const char *who)
{
	const char *env = getenv("INCA_TEST_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0)
			    : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);

	if (seed == 0)
		seed = 1;
	test_rng_state = seed;
	printf("# %s: seed %llu (rerun with INCA_TEST_SEED=%llu)\n", who,
	       (unsigned long long)seed, (unsigned long long)seed);
	return seed;
}

static inline uint64_t test_rand64(void)
{
	uint64_t x = test_rng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	test_rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

static inline uint32_t test_rand_below(uint32_t n)
{
	return (uint32_t)(test_rand64() % n);
}

static inline void test_rand_bytes(void *buf, size_t n)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)test_rand64();
}

/* Recompute the IPv4 checksum and the ICRC of an untagged frame built by
 * agg_encode after a test has edited it. */
static inline void test_refresh(uint8_t *f, size_t l3_off, size_t frame_len)
{
	uint8_t *ip = f + l3_off;
	size_t ip_len = (size_t)ip[2] << 8 | ip[3];

	ip[10] = ip[11] = 0;
	uint16_t cs = agg_ipv4_csum(ip, AGG_IPV4_HLEN);
	ip[10] = cs >> 8;
	ip[11] = cs & 0xff;
	/* the ICRC only where the claimed length fits the frame */
	if (ip_len >= AGG_IPV4_HLEN + AGG_UDP_HLEN + AGG_BTH_LEN + 4 &&
	    l3_off + ip_len <= frame_len)
		agg_icrc_store(ip + ip_len - 4, agg_icrc_ipv4(ip, ip_len));
}

static inline struct agg_frame_spec test_spec(uint8_t dtype, uint8_t op,
					      uint16_t count)
{
	struct agg_frame_spec s = {
		.dst_mac = { 0x02, 0, 0, 0, 0, 0xfe },
		.src_mac = { 0x02, 0, 0, 0, 0, 0x01 },
		.src_ip = 0x0a000001,
		.dst_ip = 0x0a0000fe,
		.dscp = 26,
		.ecn = 2,
		.dest_qp = 0x123456,
		.psn = 7,
		.qkey = 0xdeadbeef,
		.src_qp = 0x100,
		.hdr = {
			.version = AGG_VERSION,
			.type = AGG_TYPE_CONTRIB,
			.dtype = dtype,
			.op = op,
			.count = count,
			.group_id = 42,
			.rank = 0,
			.fanin = 1,
			.slot = 0,
			.coll_seq = 1,
			.pkt_idx = 0,
		},
	};
	return s;
}

#endif
