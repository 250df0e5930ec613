/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Groups: checking a configuration, creating a group's slots (one block,
 * 64-byte aligned, two shadow sets per slot), destroying it, its counters
 * per shard, and which member each job rank is under (the rooted
 * collectives' owners).
 */
#include <errno.h>
#include <stdlib.h>

#include "agg_group.h"

static int rank_cmp(const void *a, const void *b)
{
	uint16_t x = *(const uint16_t *)a, y = *(const uint16_t *)b;

	return (x > y) - (x < y);
}

/* The members' rank lists name every rank once. */
static const char *ranks_distinct(const struct agg_group_config *c, uint32_t total)
{
	uint16_t *all = malloc(total * sizeof(*all));
	const char *err = NULL;
	uint32_t k = 0;

	if (!all)
		return "members[].ranks: out of memory checking them";
	for (uint16_t m = 0; m < c->nmembers; m++)
		for (uint16_t i = 0; i < c->members[m].nranks; i++)
			all[k++] = c->members[m].ranks[i];
	qsort(all, k, sizeof(*all), rank_cmp);
	for (uint32_t i = 1; i < k && !err; i++)
		if (all[i] == all[i - 1])
			err = "members[].ranks: a rank is listed twice";
	free(all);
	return err;
}

const char *agg_group_config_check(const struct agg_group_config *c)
{
	uint32_t fanin = 0;

	if (c->nmembers == 0 || c->nmembers > AGG_MAX_MEMBERS)
		return "members: need 1 to 1024 members";
	if (!c->members)
		return "members: missing";
	if (c->window == 0 || c->window > AGG_MAX_WINDOW)
		return "window: need 1 to 4096 slots";
	if (c->elems_per_pkt == 0 || c->elems_per_pkt > AGG_MAX_ELEMS)
		return "elems_per_pkt: need 1 to 2048 elements";
	if (c->qpn > AGG_QPN_MASK || c->qpn < 2)
		return "qpn: need 2 to 0xffffff (QP0 and QP1 are special)";
	if (c->dtype_mask & ~((1u << AGG_DTYPE_COUNT) - 1))
		return "dtypes: unknown dtype bit";
	for (uint16_t m = 0; m < c->nmembers; m++) {
		const struct agg_member *a = &c->members[m];

		if (a->qpn > AGG_QPN_MASK || a->qpn < 2)
			return "members[].qpn: need 2 to 0xffffff";
		if (a->ip == 0)
			return "members[].ip: missing";
		if (a->fanin == 0)
			return "members[].fanin: must be at least 1";
		fanin += a->fanin;
		for (uint16_t k = 0; k < m; k++)
			if (c->members[k].ip == a->ip &&
			    c->members[k].qpn == a->qpn)
				return "members[]: two members share an address and QPN";
	}
	if (fanin > UINT16_MAX)
		return "members[].fanin: total fan-in exceeds 65535";
	if (c->members[0].ranks || c->members[0].nranks) {
		if (c->first_rank)
			return "first_rank: not with members[].ranks (they name every rank)";
		for (uint16_t m = 0; m < c->nmembers; m++) {
			if (!c->members[m].ranks || !c->members[m].nranks)
				return "members[].ranks: every member needs its list once one has";
			if (c->members[m].nranks != c->members[m].fanin)
				return "members[].ranks: need exactly fanin ranks";
		}
	} else {
		for (uint16_t m = 1; m < c->nmembers; m++)
			if (c->members[m].ranks || c->members[m].nranks)
				return "members[].ranks: every member needs its list once one has";
		if ((uint32_t)c->first_rank + fanin - 1 > UINT16_MAX)
			return "first_rank: its ranks (first_rank + total fan-in) exceed 65535";
	}
	if (c->parent.ip && (c->parent.qpn < 2 || c->parent.qpn > AGG_QPN_MASK))
		return "parent.qpn: need 2 to 0xffffff";
	if (c->parent.ip && c->parent.rank >= AGG_MAX_MEMBERS)
		return "parent.rank: need 0 to 1023";
	if (c->members[0].ranks)
		return ranks_distinct(c, fanin);
	return NULL;
}

static int rank_owner_cmp(const void *a, const void *b)
{
	const struct rank_owner *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The rank -> member map, sorted by rank; copies the members' lists
 * (agg_group_config_check made sure no rank is listed twice). */
static void rank_map_build(struct agg_group *g, const struct agg_group_config *cfg)
{
	uint32_t k = 0;

	for (uint16_t m = 0; m < cfg->nmembers; m++) {
		const struct agg_member *mb = &cfg->members[m];

		for (uint16_t i = 0; i < mb->fanin; i++, k++) {
			g->owners[k].member = m;
			g->owners[k].rank = mb->ranks ? mb->ranks[i] :
					    (uint16_t)(cfg->first_rank + k);
		}
		if (mb->ranks) {
			memcpy(g->member_ranks + k - mb->fanin, mb->ranks,
			       mb->fanin * sizeof(*mb->ranks));
			g->members[m].ranks = g->member_ranks + k - mb->fanin;
		}
	}
	if (cfg->members[0].ranks)   /* else consecutive: sorted already */
		qsort(g->owners, k, sizeof(*g->owners), rank_owner_cmp);
}

uint16_t agg_group_rank_owner(const struct agg_group *g, uint16_t rank)
{
	const struct rank_owner *o = g->owners;
	uint32_t lo = 0, hi = g->total_fanin;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (o[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < g->total_fanin && o[lo].rank == rank ? o[lo].member : AGG_NO_MEMBER;
}

struct agg_group *agg_group_create(const struct agg_group_config *cfg,
				   const char **why)
{
	struct agg_group *g;
	size_t nsets, row, room, per_set, bitmap_bytes;
	uint8_t *p;
	const char *err = cfg ? agg_group_config_check(cfg) : "no configuration";

	if (err) {
		if (why)
			*why = err;
		errno = EINVAL;
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		goto err_oom;
	g->cfg = *cfg;
	g->members = calloc(cfg->nmembers, sizeof(*g->members));
	g->shards = cfg->shards ? cfg->shards : 1;
	/* one PSN counter per (shard, member), each shard's on its own lines */
	g->psn_stride = ((size_t)cfg->nmembers + 15) & ~(size_t)15;
	g->member_psn = calloc(g->psn_stride * g->shards, sizeof(*g->member_psn));
	g->member_bal = calloc(cfg->nmembers, sizeof(*g->member_bal));
	if (posix_memalign((void **)&g->sh, 64, g->shards * sizeof(*g->sh)))
		g->sh = NULL;
	if (!g->members || !g->member_psn || !g->member_bal || !g->sh)
		goto err_oom;
	memset(g->sh, 0, g->shards * sizeof(*g->sh));
	memcpy(g->members, cfg->members, cfg->nmembers * sizeof(*g->members));
	g->cfg.members = g->members;
	for (uint16_t m = 0; m < cfg->nmembers; m++)
		g->member_bal[m] = agg_result_member_balance(g, m);
	g->bal_psn_op = agg_result_psn_op();
	for (uint16_t m = 0; m < cfg->nmembers; m++)
		g->total_fanin += cfg->members[m].fanin;
	g->owners = calloc(g->total_fanin, sizeof(*g->owners));
	g->member_ranks = calloc(g->total_fanin, sizeof(*g->member_ranks));
	if (!g->owners || !g->member_ranks)
		goto err_oom;
	rank_map_build(g, cfg);

	/* Only float dtypes need staging: integer ops are exact and
	 * order-independent already. */
	g->staged = cfg->reproducible &&
		    (cfg->dtype_mask == 0 ||
		     (cfg->dtype_mask & (1u << AGG_DTYPE_FP32 | 1u << AGG_DTYPE_FP16 |
					 1u << AGG_DTYPE_BF16 | 1u << AGG_DTYPE_FP64)));
	g->bitmap_words = (uint16_t)((cfg->nmembers + 63) / 64);
	row = (size_t)cfg->elems_per_pkt * 8;
	g->row_bytes = row;
	bitmap_bytes = (size_t)g->bitmap_words * 8;
	/* acc + out (+4 pad), rooms of one size (they change places with
	 * the shards' spares), + bitmaps (+ staging rows), 64-byte aligned */
	room = (row + 4 + 63) & ~(size_t)63;
	per_set = 2 * room + 2 * ((bitmap_bytes + 63) & ~(size_t)63);
	if (g->staged)
		per_set += row * cfg->nmembers;
	nsets = (size_t)cfg->window * 2;
	/* on failure the pointers stay NULL for agg_group_destroy */
	if (posix_memalign((void **)&g->sets, 64, nsets * sizeof(*g->sets))) {
		g->sets = NULL;
		goto err_oom;
	}
	memset(g->sets, 0, nsets * sizeof(*g->sets));
	if (posix_memalign(&g->mem, 64, per_set * nsets + room * g->shards)) {
		g->mem = NULL;
		goto err_oom;
	}
	memset(g->mem, 0, per_set * nsets + room * g->shards);
	p = g->mem;
	for (uint16_t k = 0; k < g->shards; k++) {
		g->sh[k].spare = p;
		p += room;
	}
	for (size_t i = 0; i < nsets; i++) {
		struct agg_set *s = &g->sets[i];

		s->acc = p;
		p += room;
		s->out = p;
		p += room;
		s->bitmap = (uint64_t *)p;
		p += (bitmap_bytes + 63) & ~(size_t)63;
		s->older = (uint64_t *)p;
		p += (bitmap_bytes + 63) & ~(size_t)63;
		if (g->staged) {
			s->stage = p;
			p += row * cfg->nmembers;
		}
	}
	return g;

err_oom:
	agg_group_destroy(g);   /* calloc'ed: what was not allocated is NULL */
	if (why)
		*why = "out of memory for the group's slots";
	errno = ENOMEM;
	return NULL;
}

void agg_group_destroy(struct agg_group *g)
{
	if (!g)
		return;
	free(g->mem);
	free(g->sets);
	free(g->owners);
	free(g->member_ranks);
	free(g->member_psn);
	free(g->member_bal);
	free(g->sh);
	free(g->members);
	free(g);
}

const struct agg_group_config *agg_group_config(const struct agg_group *g)
{
	return &g->cfg;
}

const struct agg_group_stats *agg_group_stats(const struct agg_group *g)
{
	return &g->sh[0].st;
}

void agg_group_stats_sum(const struct agg_group *g, struct agg_group_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (uint16_t k = 0; k < g->shards; k++) {
		const struct agg_group_stats *s = &g->sh[k].st;

		out->contributions += s->contributions;
		out->completions += s->completions;
		out->duplicates += s->duplicates;
		out->retransmits += s->retransmits;
		out->preempted += s->preempted;
		out->restarts += s->restarts;
		out->upstream += s->upstream;
		out->upstream_resends += s->upstream_resends;
		out->parent_results += s->parent_results;
		out->waits += s->waits;
		out->one_pass += s->one_pass;
		for (int d = 0; d < AGG_E__COUNT; d++)
			out->drops[d] += s->drops[d];
	}
}

void agg_group_reset(struct agg_group *g)
{
	for (size_t i = 0; i < (size_t)g->cfg.window * 2; i++) {
		g->sets[i].state = SET_IDLE;
		g->sets[i].restarted = 0;
		g->sets[i].older_seen = 0;
	}
}
