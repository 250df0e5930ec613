/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The layout of a group (struct agg_group and its slots), private to the
 * three files that own its parts: agg_group.c (config check, create,
 * destroy, counters, the rank map), agg_table.c (the slot state machine)
 * and agg_frame.c (the result frames it sends, with their PSNs).
 */
#ifndef AGG_GROUP_H
#define AGG_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "agg_priv.h"

/* SET_UP: complete here, partial sent to the parent, final not back yet */
enum set_state { SET_IDLE = 0, SET_OPEN, SET_UP, SET_DONE };

struct agg_set {
	uint8_t state;
	uint8_t dtype;
	uint8_t op;
	uint8_t coll;          /* enum agg_coll */
	uint16_t root;
	uint16_t owner;        /* the member root is under, or AGG_NO_MEMBER */
	uint16_t count;
	uint16_t nseen;
	uint8_t first_seen;    /* a member's first copy (not a retransmission)
				  is in this use: WAITs may be answered */
	uint32_t coll_seq;     /* which use of the slot this set holds */
	uint32_t pkt_idx;
	uint64_t *bitmap;      /* members that contributed to this use */
	uint64_t *older;       /* members that sent older_key: a restarted job */
	uint32_t older_seq, older_idx;
	uint16_t older_seen;
	uint8_t restarted;     /* every member sent restart_*: that key opens
				  the set next, the kept use answers until then */
	uint32_t restart_seq, restart_idx;
	void *acc;             /* E accumulator elements, for dtypes whose
				  accumulator is wider than the wire's (fp16,
				  bf16); the others accumulate in out */
	uint8_t *out;          /* wire-format result + pad, kept until reuse */
	/* acc and out are rooms of one size, which change places with the
	 * shards' spares (struct shard): no set owns a fixed one */
	uint8_t *stage;        /* reproducible mode: one row per member */
	struct agg_result res;
} __attribute__((aligned(64)));   /* slots of different shards share no line */

/* One shard's counters, on cache lines of their own (one writer each). */
struct shard {
	struct agg_group_stats st;
	/* an accumulator's room that changes places with a set's when a
	 * contribution is reduced and its ICRC checked in one pass
	 * (agg_icrc_reduce): the set's stays as it was until the ICRC is
	 * known good */
	uint8_t *spare;
} __attribute__((aligned(64)));

/* One job rank and the member it is under; sorted by rank. */
struct rank_owner {
	uint16_t rank;
	uint16_t member;
};

struct agg_group {
	struct agg_group_config cfg;
	struct agg_member *members;
	uint16_t *member_ranks;    /* copies of the members' rank lists */
	struct rank_owner *owners; /* total_fanin entries */
	uint32_t *member_psn;      /* [shard * psn_stride + member] */
	uint32_t *member_bal;      /* agg_result_member_balance of each member */
	uint32_t bal_psn_op;       /* agg_result_psn_op() */
	size_t psn_stride;
	uint16_t total_fanin;
	uint16_t bitmap_words;
	bool staged;           /* reproducible mode for float dtypes */
	size_t row_bytes;      /* E * 8: room for any dtype */
	struct agg_set *sets;  /* window * 2 */
	void *mem;
	uint16_t shards;       /* slot s is shard (group_id + s) % shards */
	struct shard *sh;
};

/* The share of a member's own fields (address, UDP source port, QPN,
 * rank) in its results' ICRC balance (agg_frame.c). */
uint32_t agg_result_member_balance(const struct agg_group *g, uint16_t member);
/* The operator that takes a PSN to its share of the balance. */
uint32_t agg_result_psn_op(void);

/* The shard that handles slot, its counters: one writer each. */
static inline struct shard *shard_of(struct agg_group *g, uint32_t slot)
{
	/* no division in the common case of one worker */
	return g->shards == 1 ? g->sh : &g->sh[(g->cfg.group_id + slot) % g->shards];
}

static inline struct agg_group_stats *shard_stats(struct agg_group *g, uint32_t slot)
{
	return &shard_of(g, slot)->st;
}

#endif /* AGG_GROUP_H */
