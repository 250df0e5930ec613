/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The L2 learning table: MAC -> port, shared by all workers without locks.
 * Each entry packs MAC and port in one 64-bit word written atomically, so a
 * reader sees either the old or the new binding, never a torn one. Two
 * workers learning into the same entry at once is benign: one wins, the
 * other relearns on its next packet.
 */
#include <stdlib.h>

#include <rte_hash_crc.h>
#include <rte_malloc.h>

#include "dp_priv.h"

#define WAYS 4

struct l2_entry {
	_Atomic uint64_t key;       /* mac << 16 | port; 0 = empty */
	_Atomic uint64_t seen;      /* TSC of the last packet from this MAC */
};

struct dp_l2_table {
	uint32_t mask;              /* buckets - 1 */
	struct l2_entry e[];        /* buckets * WAYS */
};

static inline uint64_t mac_u64(const struct rte_ether_addr *a)
{
	const uint8_t *b = a->addr_bytes;

	return (uint64_t)b[0] << 40 | (uint64_t)b[1] << 32 | (uint64_t)b[2] << 24 |
	       (uint64_t)b[3] << 16 | (uint64_t)b[4] << 8 | b[5];
}

static inline struct l2_entry *bucket(struct dp_l2_table *t, uint64_t mac)
{
	uint32_t h = rte_hash_crc_8byte(mac, 0x1ca1c0de);

	return &t->e[(size_t)(h & t->mask) * WAYS];
}

struct dp_l2_table *dp_l2_create(uint32_t entries)
{
	uint32_t buckets = rte_align32pow2(entries / WAYS ? entries / WAYS : 1);
	struct dp_l2_table *t;

	t = rte_zmalloc("inca_l2", sizeof(*t) + sizeof(struct l2_entry) * buckets * WAYS,
			RTE_CACHE_LINE_SIZE);
	if (t)
		t->mask = buckets - 1;
	return t;
}

void dp_l2_free(struct dp_l2_table *t)
{
	rte_free(t);
}

#define L2_SEEN_GRANULE (1ull << 22)   /* TSC cycles: 1.4 ms at 3 GHz */

void dp_l2_learn(struct dp_l2_table *t, const struct rte_ether_addr *a,
		 uint16_t port, uint64_t now)
{
	uint64_t mac = mac_u64(a), want = mac << 16 | port;
	struct l2_entry *b = bucket(t, mac), *victim = NULL;
	uint64_t oldest = UINT64_MAX;

	for (int i = 0; i < WAYS; i++) {
		uint64_t k = atomic_load_explicit(&b[i].key, memory_order_relaxed);

		if (k >> 16 == mac && k) {
			if (k != want)          /* the station moved */
				atomic_store_explicit(&b[i].key, want, memory_order_relaxed);
			/* refreshed about every millisecond, not per frame: a
			 * store per frame bounced the entry's cache line between
			 * the workers that receive from one station (ageing
			 * counts in seconds) */
			if (now - atomic_load_explicit(&b[i].seen, memory_order_relaxed) >
			    L2_SEEN_GRANULE)
				atomic_store_explicit(&b[i].seen, now, memory_order_relaxed);
			return;
		}
		uint64_t s = k ? atomic_load_explicit(&b[i].seen, memory_order_relaxed) : 0;
		if (s < oldest) {
			oldest = s;
			victim = &b[i];
		}
	}
	atomic_store_explicit(&victim->seen, now, memory_order_relaxed);
	atomic_store_explicit(&victim->key, want, memory_order_release);
}

int dp_l2_lookup(struct dp_l2_table *t, const struct rte_ether_addr *a)
{
	uint64_t mac = mac_u64(a);
	struct l2_entry *b = bucket(t, mac);

	for (int i = 0; i < WAYS; i++) {
		uint64_t k = atomic_load_explicit(&b[i].key, memory_order_acquire);
		if (k && k >> 16 == mac)
			return (int)(k & 0xffff);
	}
	return -1;
}

uint32_t dp_l2_age(struct dp_l2_table *t, uint64_t now, uint64_t max_age)
{
	uint32_t aged = 0;

	for (size_t i = 0; i < (size_t)(t->mask + 1) * WAYS; i++) {
		struct l2_entry *e = &t->e[i];
		uint64_t k = atomic_load_explicit(&e->key, memory_order_relaxed);

		if (k && now - atomic_load_explicit(&e->seen, memory_order_relaxed) > max_age) {
			/* only clear what we looked at: a concurrent relearn wins */
			if (atomic_compare_exchange_strong(&e->key, &k, 0))
				aged++;
		}
	}
	return aged;
}

uint32_t dp_l2_count(struct dp_l2_table *t)
{
	uint32_t n = 0;

	for (size_t i = 0; i < (size_t)(t->mask + 1) * WAYS; i++)
		n += atomic_load_explicit(&t->e[i].key, memory_order_relaxed) != 0;
	return n;
}
