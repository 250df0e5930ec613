/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Group and slot tables: who may contribute, the window of slots with two
 * shadow sets each, per-set contribution bitmaps, completion, duplicates,
 * retained results, the reproducible (rank-ordered) mode, and which member
 * each job rank is under for the rooted collectives.
 */
#include <errno.h>
#include <stdlib.h>

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
	uint32_t coll_seq;     /* which use of the slot this set holds */
	uint32_t pkt_idx;
	uint64_t *bitmap;      /* members that contributed to this use */
	uint64_t *older;       /* members that sent older_key: a restarted job */
	uint32_t older_seq, older_idx;
	uint16_t older_seen;
	void *acc;             /* E accumulator elements */
	uint8_t *out;          /* wire-format result + pad, kept until reuse */
	uint8_t *stage;        /* reproducible mode: one row per member */
	struct agg_result res;
} __attribute__((aligned(64)));   /* slots of different shards share no line */

/* One shard's counters, on cache lines of their own (one writer each). */
struct shard {
	struct agg_group_stats st;
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

/* Counters of the shard that handles slot: one writer each. */
static inline struct agg_group_stats *shard_stats(struct agg_group *g, uint32_t slot)
{
	return &g->sh[(g->cfg.group_id + slot) % g->shards].st;
}

static const char *group_check(const struct agg_group_config *c)
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
	return NULL;
}

static int rank_owner_cmp(const void *a, const void *b)
{
	const struct rank_owner *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The rank -> member map, sorted by rank; copies the members' lists.
 * Returns NULL, or the error of a rank listed twice. */
static const char *rank_map_build(struct agg_group *g, const struct agg_group_config *cfg)
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
	if (!cfg->members[0].ranks)
		return NULL;        /* consecutive: sorted already */
	qsort(g->owners, k, sizeof(*g->owners), rank_owner_cmp);
	for (uint32_t i = 1; i < k; i++)
		if (g->owners[i].rank == g->owners[i - 1].rank)
			return "members[].ranks: a rank is listed twice";
	return NULL;
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
	size_t nsets, row, per_set, bitmap_bytes;
	uint8_t *p;
	const char *err = cfg ? group_check(cfg) : "no configuration";

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
	if (posix_memalign((void **)&g->sh, 64, g->shards * sizeof(*g->sh)))
		g->sh = NULL;
	if (!g->members || !g->member_psn || !g->sh)
		goto err_free_group;
	memset(g->sh, 0, g->shards * sizeof(*g->sh));
	memcpy(g->members, cfg->members, cfg->nmembers * sizeof(*g->members));
	g->cfg.members = g->members;
	for (uint16_t m = 0; m < cfg->nmembers; m++)
		g->total_fanin += cfg->members[m].fanin;
	g->owners = calloc(g->total_fanin, sizeof(*g->owners));
	g->member_ranks = calloc(g->total_fanin, sizeof(*g->member_ranks));
	if (!g->owners || !g->member_ranks)
		goto err_free_group;
	err = rank_map_build(g, cfg);
	if (err)
		goto err_free_group;

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
	/* acc + out (+4 pad) + bitmap (+ staging rows), 64-byte aligned */
	per_set = row + ((row + 4 + 63) & ~(size_t)63) + 2 * ((bitmap_bytes + 63) & ~(size_t)63);
	if (g->staged)
		per_set += row * cfg->nmembers;
	nsets = (size_t)cfg->window * 2;
	if (posix_memalign((void **)&g->sets, 64, nsets * sizeof(*g->sets)))
		goto err_free_group;
	memset(g->sets, 0, nsets * sizeof(*g->sets));
	if (posix_memalign(&g->mem, 64, per_set * nsets))
		goto err_free_sets;
	memset(g->mem, 0, per_set * nsets);
	p = g->mem;
	for (size_t i = 0; i < nsets; i++) {
		struct agg_set *s = &g->sets[i];

		s->acc = p;
		p += row;
		s->out = p;
		p += (row + 4 + 63) & ~(size_t)63;
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

err_free_sets:
	free(g->sets);
err_free_group:
	free(g->owners);
	free(g->member_ranks);
	free(g->member_psn);
	free(g->sh);
	free(g->members);
	free(g);
err_oom:
	/* err is still NULL unless the members' ranks were refused */
	if (why)
		*why = err ? err : "out of memory for the group's slots";
	errno = err ? EINVAL : ENOMEM;
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
		for (int d = 0; d < AGG_E__COUNT; d++)
			out->drops[d] += s->drops[d];
	}
}

void agg_group_reset(struct agg_group *g)
{
	for (size_t i = 0; i < (size_t)g->cfg.window * 2; i++)
		g->sets[i].state = SET_IDLE;
}

/* Serial-number order (RFC 1982) of (coll_seq, pkt_idx) keys. */
static inline int key_cmp(const struct agg_hdr *h, const struct agg_set *s)
{
	int32_t d = (int32_t)(h->coll_seq - s->coll_seq);

	if (d == 0)
		d = (int32_t)(h->pkt_idx - s->pkt_idx);
	return (d > 0) - (d < 0);
}

static inline int drop(struct agg_group_stats *st, int rc)
{
	st->drops[-rc]++;
	return rc;
}

/* Allgather and bcast copy the owner's elements; the others reduce. */
static inline bool coll_copies(uint8_t coll)
{
	return coll >= AGG_COLL_ALLGATHER;
}

/* docs/protocol.md 2.1: does member send elements for this packet's use?
 * Reductions: every member; allgather, bcast: the root's owner only. */
static int coll_contrib_check(const struct agg_group *g, const struct agg_hdr *h,
			      uint16_t owner)
{
	bool want = coll_copies(h->coll) ? owner == h->rank : true;

	/* at the top of a tree every rank is under some member */
	if (owner == AGG_NO_MEMBER && !g->cfg.parent.ip)
		return -AGG_E_COLL;
	return agg_hdr_has_data(h) == want ? 0 : -AGG_E_COLL_DATA;
}

/* Set res's payload to len bytes of s->out (0: none). */
static void result_payload(struct agg_set *s, size_t len)
{
	uint8_t pad = agg_pad_len(len);

	memset(s->out + len, 0, pad);
	s->res.payload = s->out;
	s->res.payload_len = (uint32_t)len;
	s->res.pad = pad;
	s->res.payload_crc = agg_crc32(0, s->out, len + pad);
	s->res.payload_shift = agg_crc32_shift_op(len + pad);
}

static void set_complete(struct agg_group *g, struct agg_set *s)
{
	struct agg_group_stats *st = shard_stats(g, (uint32_t)((s - g->sets) / 2));
	size_t esize = agg_dtype_size(s->dtype);
	size_t len = (size_t)s->count * esize;
	bool has_data = true;

	if (AGG_UNLIKELY(coll_copies(s->coll))) {
		/* s->out holds the owner's elements, if it is here */
		has_data = s->owner != AGG_NO_MEMBER;
	} else {
		if (g->staged && agg_dtype_is_float(s->dtype)) {
			/* Rank order, whatever the arrival order. */
			agg_acc_load(s->dtype, s->acc, s->stage, s->count);
			for (uint16_t m = 1; m < g->cfg.nmembers; m++)
				agg_acc_reduce(s->dtype, s->op, s->acc,
					       s->stage + (size_t)m * g->row_bytes,
					       s->count);
		}
		agg_acc_store(s->dtype, s->out, s->acc, s->count);
	}

	s->res.hdr = (struct agg_hdr){
		.version = AGG_VERSION,
		.type = AGG_TYPE_RESULT,
		.dtype = s->dtype,
		.op = s->op,
		.flags = (uint8_t)((s - g->sets) & 1) |
			 (g->cfg.reproducible ? AGG_FLAG_REPRODUCIBLE : 0) |
			 (s->coll ? AGG_FLAG_COLL : 0) |
			 (has_data ? 0 : AGG_FLAG_NO_DATA),
		.count = s->count,
		.group_id = g->cfg.group_id,
		.rank = 0,
		.fanin = g->total_fanin,
		.slot = (uint16_t)((s - g->sets) / 2),
		.coll_seq = s->coll_seq,
		.pkt_idx = s->pkt_idx,
		.coll = s->coll,
		.root = s->root,
	};
	result_payload(s, has_data ? len : 0);
	/* reduce, reduce-scatter: the root's owner only */
	s->res.data_to_all = s->coll == AGG_COLL_ALLREDUCE || coll_copies(s->coll);
	s->res.owner = s->owner;
	st->completions++;
	if (g->cfg.parent.ip) {
		/* a partial for the parent, as one contribution */
		s->res.hdr.type = AGG_TYPE_CONTRIB;
		s->res.hdr.rank = g->cfg.parent.rank;
		s->res.hdr.flags &= (uint8_t)~AGG_FLAG_REPRODUCIBLE;
		s->state = SET_UP;
		st->upstream++;
	} else {
		s->state = SET_DONE;
	}
}

int agg_group_ingest(struct agg_group *g, const struct agg_pkt *pkt,
		     struct agg_result *res, uint16_t *member_out)
{
	const struct agg_hdr *h = &pkt->hdr;
	const struct agg_group_config *c = &g->cfg;
	const struct agg_member *mb;
	struct agg_set *s;
	uint64_t bit, *word;
	uint16_t owner = AGG_NO_MEMBER;
	struct agg_group_stats *st = shard_stats(g, h->slot);
	int cmp, rc;

	if (AGG_UNLIKELY(pkt->kind != AGG_PKT_INCA ||
			 h->group_id != c->group_id || pkt->dest_qp != c->qpn))
		return drop(st, -AGG_E_GROUP);
	if (AGG_UNLIKELY(pkt->qkey != c->qkey))
		return drop(st, -AGG_E_QKEY);
	if (AGG_UNLIKELY(h->type != AGG_TYPE_CONTRIB))
		return drop(st, -AGG_E_TYPE);
	if (AGG_UNLIKELY(c->dtype_mask && !(c->dtype_mask & (1u << h->dtype))))
		return drop(st, -AGG_E_DTYPE);
	if (AGG_UNLIKELY(h->rank >= c->nmembers))
		return drop(st, -AGG_E_NOT_MEMBER);
	mb = &g->members[h->rank];
	if (AGG_UNLIKELY(mb->ip != pkt->src_ip || mb->qpn != pkt->src_qp))
		return drop(st, -AGG_E_NOT_MEMBER);
	if (AGG_UNLIKELY(h->fanin != mb->fanin))
		return drop(st, -AGG_E_FANIN);
	if (AGG_UNLIKELY(h->slot >= c->window))
		return drop(st, -AGG_E_SLOT);
	if (AGG_UNLIKELY(h->count > c->elems_per_pkt))
		return drop(st, -AGG_E_TOO_LONG);
	if (AGG_UNLIKELY(h->flags & AGG_FLAG_COLL)) {
		owner = agg_group_rank_owner(g, h->root);
		rc = coll_contrib_check(g, h, owner);
		if (rc)
			return drop(st, rc);
	}
	if (member_out)
		*member_out = h->rank;

	s = &g->sets[(size_t)h->slot * 2 + (h->flags & AGG_FLAG_SHADOW_SET)];
	cmp = s->state == SET_IDLE ? 1 : key_cmp(h, s);
	if (cmp > 0) {
		/* A newer use of this set. Hosts reuse a set only after every
		 * member has the result of its previous use, so an open set
		 * here means that use was abandoned (e.g. a job restarted). */
		if (s->state == SET_OPEN)
			st->preempted++;
		s->state = SET_OPEN;
		s->dtype = h->dtype;
		s->op = h->op;
		s->coll = h->coll;
		s->root = h->root;
		s->owner = owner;
		s->count = h->count;
		s->nseen = 0;
		s->coll_seq = h->coll_seq;
		s->pkt_idx = h->pkt_idx;
		s->older_seen = 0;
		memset(s->bitmap, 0, (size_t)g->bitmap_words * 8);
	} else if (cmp < 0) {
		/* Late copies of an old use come from some members; a job that
		 * restarted its sequence numbers sends the same older key from
		 * every member. When all have, the set is freed for it. */
		if (s->older_seen == 0 || s->older_seq != h->coll_seq ||
		    s->older_idx != h->pkt_idx) {
			memset(s->older, 0, (size_t)g->bitmap_words * 8);
			s->older_seq = h->coll_seq;
			s->older_idx = h->pkt_idx;
			s->older_seen = 0;
		}
		word = &s->older[h->rank / 64];
		bit = 1ull << (h->rank % 64);
		if (!(*word & bit)) {
			*word |= bit;
			if (++s->older_seen == c->nmembers) {
				s->state = SET_IDLE;
				s->older_seen = 0;
				st->restarts++;
			}
		}
		return drop(st, -AGG_E_STALE);
	} else if (AGG_UNLIKELY(h->dtype != s->dtype || h->op != s->op ||
				h->count != s->count || h->coll != s->coll ||
				h->root != s->root)) {
		return drop(st, -AGG_E_MISMATCH);
	}

	word = &s->bitmap[h->rank / 64];
	bit = 1ull << (h->rank % 64);
	if (*word & bit) {
		if (s->state == SET_DONE) {
			st->retransmits++;
			*res = s->res;
			return AGG_V_RETRANSMIT;
		}
		if (s->state == SET_UP) {
			/* the member lost nothing we can answer yet: the
			 * partial (or the parent's result) may be lost */
			st->upstream_resends++;
			*res = s->res;
			return AGG_V_UPSTREAM;
		}
		st->duplicates++;
		return AGG_V_DUPLICATE;
	}
	*word |= bit;

	if (AGG_UNLIKELY(coll_copies(h->coll))) {
		/* allgather, bcast: the owner's bytes as they are (checked:
		 * only the owner sends any) */
		if (agg_hdr_has_data(h))
			memcpy(s->out, pkt->payload, pkt->payload_len);
	} else if (g->staged && agg_dtype_is_float(h->dtype))
		memcpy(s->stage + (size_t)h->rank * g->row_bytes, pkt->payload,
		       pkt->payload_len);
	else if (s->nseen == 0)
		agg_acc_load(h->dtype, s->acc, pkt->payload, h->count);
	else
		agg_acc_reduce(h->dtype, h->op, s->acc, pkt->payload, h->count);
	s->nseen++;
	st->contributions++;

	if (s->nseen < c->nmembers)
		return AGG_V_ACCEPTED;
	set_complete(g, s);
	*res = s->res;
	return s->state == SET_UP ? AGG_V_UPSTREAM : AGG_V_COMPLETE;
}

int agg_group_parent_result(struct agg_group *g, const struct agg_pkt *pkt,
			    struct agg_result *res)
{
	const struct agg_hdr *h = &pkt->hdr;
	const struct agg_parent *p = &g->cfg.parent;
	struct agg_set *s;
	size_t len;
	bool has_data;
	struct agg_group_stats *st = shard_stats(g, h->slot);

	if (AGG_UNLIKELY(pkt->kind != AGG_PKT_INCA || h->group_id != g->cfg.group_id ||
			 pkt->dest_qp != g->cfg.qpn || !p->ip))
		return drop(st, -AGG_E_GROUP);
	if (AGG_UNLIKELY(pkt->src_ip != p->ip || pkt->src_qp != p->qpn))
		return drop(st, -AGG_E_NOT_MEMBER);
	if (AGG_UNLIKELY(pkt->qkey != p->qkey))
		return drop(st, -AGG_E_QKEY);
	if (AGG_UNLIKELY(h->type != AGG_TYPE_RESULT))
		return drop(st, -AGG_E_TYPE);
	if (AGG_UNLIKELY(h->slot >= g->cfg.window))
		return drop(st, -AGG_E_SLOT);
	s = &g->sets[(size_t)h->slot * 2 + (h->flags & AGG_FLAG_SHADOW_SET)];
	if (s->state == SET_IDLE || s->state == SET_OPEN || key_cmp(h, s) != 0)
		return drop(st, -AGG_E_STALE);
	if (AGG_UNLIKELY(h->dtype != s->dtype || h->op != s->op || h->count != s->count ||
			 h->coll != s->coll || h->root != s->root))
		return drop(st, -AGG_E_MISMATCH);
	/* docs/protocol.md, section 4: the result comes down with data when
	 * every member gets data, or to the child that owns the root */
	has_data = s->coll == AGG_COLL_ALLREDUCE || coll_copies(s->coll) ||
		   s->owner != AGG_NO_MEMBER;
	if (AGG_UNLIKELY(agg_hdr_has_data(h) != has_data))
		return drop(st, -AGG_E_COLL_DATA);
	if (s->state == SET_DONE) {
		st->duplicates++;
		return AGG_V_DUPLICATE;
	}
	len = has_data ? (size_t)s->count * agg_dtype_size(s->dtype) : 0;
	if (AGG_UNLIKELY(pkt->payload_len != len))
		return drop(st, -AGG_E_MISMATCH);
	memcpy(s->out, pkt->payload, len);
	s->res.hdr = *h;
	s->res.hdr.rank = 0;
	result_payload(s, len);
	s->res.data_to_all = s->coll == AGG_COLL_ALLREDUCE || coll_copies(s->coll);
	s->res.owner = s->owner;
	s->state = SET_DONE;
	st->parent_results++;
	*res = s->res;
	return AGG_V_COMPLETE;
}

/* The result frame for member; with hdr_only, the payload and ICRC are
 * left to the caller (the ICRC in *icrc_out) and the header length is
 * returned. */
static int result_encode(struct agg_group *g, uint16_t member,
			 const struct agg_result *res,
			 const struct agg_result_l2 *l2, const uint8_t *dst_mac,
			 void *buf, size_t cap, bool hdr_only, uint32_t *icrc_out)
{
	const struct agg_member *mb;
	uint8_t *f = buf, *ip, *b;
	size_t roce, off, total, body;
	struct agg_hdr hdr;
	uint32_t crc;
	bool has_data;

	if (member >= g->cfg.nmembers)
		return -AGG_E_INVAL;
	mb = &g->members[member];
	/* reduce, reduce-scatter: the others get the header alone */
	has_data = agg_result_has_data_for(res, member);
	body = AGG_LIKELY(has_data) ? res->payload_len + res->pad : 0;
	roce = AGG_BTH_LEN + AGG_DETH_LEN + AGG_INCA_HLEN + body + AGG_ICRC_LEN;
	total = AGG_ETH_HLEN + (l2->has_vlan ? AGG_VLAN_HLEN : 0) +
		AGG_IPV4_HLEN + AGG_UDP_HLEN + roce;
	if ((hdr_only ? total - body - AGG_ICRC_LEN : total) > cap)
		return -AGG_E_NOSPACE;

	memcpy(f, dst_mac ? dst_mac : mb->mac, 6);
	memcpy(f + 6, l2->src_mac, 6);
	off = 12;
	if (l2->has_vlan) {
		agg_wr16(f + off, AGG_ETHERTYPE_VLAN);
		agg_wr16(f + off + 2, l2->vlan_tci);
		off += 4;
	}
	agg_wr16(f + off, AGG_ETHERTYPE_IPV4);
	off += 2;
	ip = f + off;
	/* UDP source port varies per member for ECMP entropy. */
	off += agg_write_ipv4_udp(ip, l2->switch_ip, mb->ip, l2->dscp, 0, 64,
				  (uint16_t)(0xc000 | ((g->cfg.group_id + member) & 0x3fff)),
				  roce);
	b = f + off;
	b[0] = AGG_OP_UD_SEND_ONLY;
	b[1] = (uint8_t)(has_data ? res->pad << 4 : 0);
	agg_wr16(b + 2, AGG_PKEY_DEFAULT);
	b[4] = 0;
	agg_wr24(b + 5, mb->qpn);
	b[8] = 0;
	/* a counter per member and shard (no line shared between the
	 * threads): with S shards, shard k's PSNs to a member are k, k + S,
	 * k + 2S, ... (docs/protocol.md, 3.3) */
	uint16_t shard = (uint16_t)((g->cfg.group_id + res->hdr.slot) % g->shards);
	agg_wr24(b + 9, (g->member_psn[shard * g->psn_stride + member]++ * g->shards + shard) &
			AGG_PSN_MASK);
	agg_wr32(b + 12, g->cfg.qkey);
	b[16] = 0;
	agg_wr24(b + 17, g->cfg.qpn);
	hdr = res->hdr;
	hdr.rank = member;   /* a result names the member it is for */
	if (!has_data)
		hdr.flags |= AGG_FLAG_NO_DATA;
	agg_hdr_write(b + AGG_BTH_LEN + AGG_DETH_LEN, &hdr);
	off += AGG_BTH_LEN + AGG_DETH_LEN + AGG_INCA_HLEN;
	crc = agg_icrc_ipv4_prefix(ip, (size_t)(f + off - ip));
	if (AGG_LIKELY(has_data)) {
		if (!hdr_only)
			memcpy(f + off, res->payload, body);
		/* CRC-32 is linear: header CRC combined with the payload's,
		 * which was computed once for all members. */
		crc = agg_crc32_combine_op(crc, res->payload_crc, res->payload_shift);
	}
	if (hdr_only) {
		*icrc_out = crc;
		return (int)off;
	}
	agg_icrc_store(f + off + body, crc);
	return (int)total;
}

int agg_result_encode(struct agg_group *g, uint16_t member,
		      const struct agg_result *res,
		      const struct agg_result_l2 *l2, const uint8_t *dst_mac,
		      void *buf, size_t cap)
{
	return result_encode(g, member, res, l2, dst_mac, buf, cap, false, NULL);
}

int agg_result_encode_hdr(struct agg_group *g, uint16_t member,
			  const struct agg_result *res,
			  const struct agg_result_l2 *l2, const uint8_t *dst_mac,
			  void *buf, size_t cap, uint32_t *icrc)
{
	return result_encode(g, member, res, l2, dst_mac, buf, cap, true, icrc);
}
