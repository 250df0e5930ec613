/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The slot state machine: a contribution's key against its slot's two
 * shadow sets, per-set contribution bitmaps, completion, duplicates,
 * retained results, the reproducible (rank-ordered) mode, partials sent up
 * a tree and the parent's final result. The group's layout is in
 * agg_group.h; creating it is agg_group.c's.
 */
#include <errno.h>
#include <stdlib.h>

#include "agg_group.h"

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

/* A contribution refused for rc before any state changed: when its ICRC
 * was left for later (agg_decode_lazy) and is wrong, that is the error,
 * counted where the decoder counts it, not in the group's drops. */
static int refuse(struct agg_group_stats *st, const struct agg_pkt *pkt, bool lazy, int rc)
{
	if (lazy && agg_pkt_icrc_wrong(pkt))
		return -AGG_E_ICRC;
	return drop(st, rc);
}

/* A WAIT for the sender of h: its key, no elements, fanin = the members
 * the set has heard from (docs/protocol.md 3.2, "Waiting"). */
static int wait_answer(struct agg_group_stats *st, const struct agg_hdr *h, unsigned seen,
		       struct agg_result *res)
{
	*res = (struct agg_result){ .hdr = *h, .owner = AGG_NO_MEMBER };
	res->hdr.type = AGG_TYPE_WAIT;
	res->hdr.flags = (uint8_t)((h->flags & (AGG_FLAG_SHADOW_SET | AGG_FLAG_COLL)) |
				   AGG_FLAG_NO_DATA);
	res->hdr.fanin = (uint16_t)seen;
	st->waits++;
	return AGG_V_WAIT;
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

/* The accumulator of a use of dtype: the result buffer itself where the
 * accumulator holds the wire's elements (fp32, fp64, int32, int64), so
 * nothing is copied at completion and a set touches half the memory;
 * s->acc where it is wider (fp16/bf16 accumulate in fp32). The result of
 * the set's previous use is no longer answered once a new use opens the
 * set (hosts reuse a set only after every member has that result), so it
 * may be overwritten. */
static inline uint8_t *set_acc(struct agg_set *s, uint8_t dtype)
{
	return agg_dtype_acc_size(dtype) == agg_dtype_size(dtype) ? s->out : (uint8_t *)s->acc;
}

/* stored: the wire's elements are in s->out already (agg_icrc_reduce_store) */
static void set_complete(struct agg_group *g, struct agg_set *s, bool stored)
{
	struct agg_group_stats *st = shard_stats(g, (uint32_t)((s - g->sets) / 2));
	size_t esize = agg_dtype_size(s->dtype);
	size_t len = (size_t)s->count * esize;
	bool has_data = true;

	if (AGG_UNLIKELY(coll_copies(s->coll))) {
		/* s->out holds the owner's elements, if it is here */
		has_data = s->owner != AGG_NO_MEMBER;
	} else {
		void *acc = set_acc(s, s->dtype);

		if (g->staged && agg_dtype_is_float(s->dtype)) {
			/* Rank order, whatever the arrival order. */
			agg_acc_load(s->dtype, acc, s->stage, s->count);
			for (uint16_t m = 1; m < g->cfg.nmembers; m++)
				agg_acc_reduce(s->dtype, s->op, acc,
					       s->stage + (size_t)m * g->row_bytes,
					       s->count);
		}
		if (acc != s->out && !stored)
			agg_acc_store(s->dtype, s->out, acc, s->count);
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
	/* reduce, reduce-scatter: the root's owner only; allgather, bcast:
	 * every member but the owner */
	s->res.data_to_all = s->coll == AGG_COLL_ALLREDUCE || coll_copies(s->coll);
	s->res.not_owner = coll_copies(s->coll);
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
	bool lazy = pkt->icrc_pending, fused = false, stored = false;

	if (AGG_UNLIKELY(pkt->kind != AGG_PKT_INCA ||
			 h->group_id != c->group_id || pkt->dest_qp != c->qpn))
		return refuse(st, pkt, lazy, -AGG_E_GROUP);
	if (AGG_UNLIKELY(pkt->qkey != c->qkey))
		return refuse(st, pkt, lazy, -AGG_E_QKEY);
	if (AGG_UNLIKELY(h->type != AGG_TYPE_CONTRIB))
		return refuse(st, pkt, lazy, -AGG_E_TYPE);
	if (AGG_UNLIKELY(c->dtype_mask && !(c->dtype_mask & (1u << h->dtype))))
		return refuse(st, pkt, lazy, -AGG_E_DTYPE);
	if (AGG_UNLIKELY(h->rank >= c->nmembers))
		return refuse(st, pkt, lazy, -AGG_E_NOT_MEMBER);
	mb = &g->members[h->rank];
	if (AGG_UNLIKELY(mb->ip != pkt->src_ip || mb->qpn != pkt->src_qp))
		return refuse(st, pkt, lazy, -AGG_E_NOT_MEMBER);
	if (AGG_UNLIKELY(h->fanin != mb->fanin))
		return refuse(st, pkt, lazy, -AGG_E_FANIN);
	if (AGG_UNLIKELY(h->slot >= c->window))
		return refuse(st, pkt, lazy, -AGG_E_SLOT);
	if (AGG_UNLIKELY(h->count > c->elems_per_pkt))
		return refuse(st, pkt, lazy, -AGG_E_TOO_LONG);
	if (AGG_UNLIKELY(h->flags & AGG_FLAG_COLL)) {
		owner = agg_group_rank_owner(g, h->root);
		rc = coll_contrib_check(g, h, owner);
		if (rc)
			return refuse(st, pkt, lazy, rc);
	}
	if (member_out)
		*member_out = h->rank;

	s = &g->sets[(size_t)h->slot * 2 + (h->flags & AGG_FLAG_SHADOW_SET)];
	cmp = s->state == SET_IDLE ? 1 : key_cmp(h, s);
	/* the key every member sent again (a restarted job): a new use */
	bool restart = cmp < 0 && s->restarted && h->coll_seq == s->restart_seq &&
		       h->pkt_idx == s->restart_idx;
	if (AGG_UNLIKELY(lazy)) {
		/* The ICRC, not checked yet: in the pass that reduces the
		 * elements where this contribution is a plain one (a new use,
		 * or the next member of the open one), into the shard's spare
		 * accumulator, which then changes places with the set's: a
		 * wrong ICRC leaves the set as it was. Otherwise now, before
		 * anything changes. */
		bool opens = cmp > 0 || restart;
		bool next = cmp == 0 && s->state == SET_OPEN && s->nseen > 0 &&
			    h->dtype == s->dtype && h->op == s->op && h->count == s->count &&
			    h->coll == s->coll && h->root == s->root &&
			    !(s->bitmap[h->rank / 64] & 1ull << (h->rank % 64));
		if ((opens || next) && !coll_copies(h->coll) && agg_hdr_has_data(h) &&
		    !(g->staged && agg_dtype_is_float(h->dtype)) &&
		    agg_icrc_reduce_available((enum agg_dtype)h->dtype, (enum agg_op)h->op, opens)) {
			struct shard *sh = shard_of(g, h->slot);
			uint8_t *acc = set_acc(s, h->dtype);
			if (next && acc != s->out && s->nseen + 1u == c->nmembers &&
			    agg_icrc_reduce_store_available((enum agg_dtype)h->dtype,
							    (enum agg_op)h->op)) {
				/* the last member's (fp16, bf16): the result
				 * rounded into s->out as it is summed, the
				 * accumulator only read. s->out is no one's
				 * while the use is open, a wrong ICRC may
				 * leave anything there. */
				if (agg_icrc_reduce_store(pkt, s->out, acc) != pkt->icrc)
					return -AGG_E_ICRC;
				stored = true;
			} else {
				if (agg_icrc_reduce(pkt, sh->spare, opens ? NULL : acc) != pkt->icrc)
					return -AGG_E_ICRC;
				if (acc == s->out)
					s->out = sh->spare;
				else
					s->acc = sh->spare;
				sh->spare = acc;
			}
			fused = true;
			st->one_pass++;
		} else if (agg_pkt_icrc_wrong(pkt)) {
			return -AGG_E_ICRC;
		}
	}
	if (cmp > 0 || restart) {
		/* A newer use of this set. Hosts reuse a set only after every
		 * member has the result of its previous use, so an open set
		 * here means that use was abandoned (e.g. a job restarted). */
		if (s->state == SET_OPEN && !restart)
			st->preempted++;
		s->restarted = 0;
		s->state = SET_OPEN;
		s->dtype = h->dtype;
		s->op = h->op;
		s->coll = h->coll;
		s->root = h->root;
		s->owner = owner;
		s->count = h->count;
		s->nseen = 0;
		s->first_seen = 0;
		s->coll_seq = h->coll_seq;
		s->pkt_idx = h->pkt_idx;
		s->older_seen = 0;
		memset(s->bitmap, 0, (size_t)g->bitmap_words * 8);
	} else if (cmp < 0) {
		/* Late copies of an old use come from some members; a job that
		 * restarted its sequence numbers sends the same older key from
		 * every member. When all have, that key opens the set again
		 * when it comes next. The set is not freed: late copies from
		 * every member (a tree's children, whose stale partials can
		 * all come late under reordering) would otherwise let the next
		 * retransmission of the use it holds open it afresh, with the
		 * members that have its result never sending again: stuck. */
		if (s->older_seen == 0 || s->older_seq != h->coll_seq ||
		    s->older_idx != h->pkt_idx) {
			memset(s->older, 0, (size_t)g->bitmap_words * 8);
			s->older_seq = h->coll_seq;
			s->older_idx = h->pkt_idx;
			s->older_seen = 0;
		}
		word = &s->older[h->rank / 64];
		bit = 1ull << (h->rank % 64);
		unsigned seen = s->older_seen + !(*word & bit);
		if (!(*word & bit)) {
			*word |= bit;
			if (++s->older_seen == c->nmembers) {
				/* decided (a later such key replaces it) */
				s->restarted = 1;
				s->restart_seq = s->older_seq;
				s->restart_idx = s->older_idx;
				s->older_seen = 0;
				st->restarts++;
			}
		}
		drop(st, -AGG_E_STALE);
		/* a member that sent it again is waiting for the others'
		 * first copies: say the switch is there */
		if (h->flags & AGG_FLAG_RETRANSMIT) {
			if (member_out)
				*member_out = h->rank;
			return wait_answer(st, h, seen, res);
		}
		return -AGG_E_STALE;
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
			/* marked, so that a parent that holds it and waits for
			 * other children answers with a WAIT (below) */
			if (h->flags & AGG_FLAG_RETRANSMIT)
				res->hdr.flags |= AGG_FLAG_RETRANSMIT;
			return AGG_V_UPSTREAM;
		}
		st->duplicates++;
		/* the member timed out waiting for the others: say the
		 * switch holds its contribution (not gone, not lost). Only
		 * once some member's first copy is in: a use opened by
		 * retransmissions alone may be one this switch forgot (it
		 * restarted), whose other members have their results and
		 * send no more; a WAIT would hold this one to its deadline,
		 * silence lets it fall back (docs/protocol.md 3.2) */
		if ((h->flags & AGG_FLAG_RETRANSMIT) && s->first_seen)
			return wait_answer(st, h, s->nseen, res);
		return AGG_V_DUPLICATE;
	}
	*word |= bit;
	if (!(h->flags & AGG_FLAG_RETRANSMIT))
		s->first_seen = 1;

	if (fused) {
		/* reduced above */
	} else if (AGG_UNLIKELY(coll_copies(h->coll))) {
		/* allgather, bcast: the owner's bytes as they are (checked:
		 * only the owner sends any) */
		if (agg_hdr_has_data(h))
			memcpy(s->out, pkt->payload, pkt->payload_len);
	} else if (g->staged && agg_dtype_is_float(h->dtype))
		memcpy(s->stage + (size_t)h->rank * g->row_bytes, pkt->payload,
		       pkt->payload_len);
	else if (s->nseen == 0)
		agg_acc_load(h->dtype, set_acc(s, h->dtype), pkt->payload, h->count);
	else
		agg_acc_reduce(h->dtype, h->op, set_acc(s, h->dtype), pkt->payload, h->count);
	s->nseen++;
	st->contributions++;

	if (s->nseen < c->nmembers)
		return AGG_V_ACCEPTED;
	set_complete(g, s, stored);
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

	/* a caller that decoded it lazily (agg_decode_lazy): checked here,
	 * before anything is read from it */
	if (AGG_UNLIKELY(pkt->icrc_pending) && agg_pkt_icrc_wrong(pkt))
		return -AGG_E_ICRC;
	if (AGG_UNLIKELY(pkt->kind != AGG_PKT_INCA || h->group_id != g->cfg.group_id ||
			 pkt->dest_qp != g->cfg.qpn || !p->ip))
		return drop(st, -AGG_E_GROUP);
	if (AGG_UNLIKELY(pkt->src_ip != p->ip || pkt->src_qp != p->qpn))
		return drop(st, -AGG_E_NOT_MEMBER);
	if (AGG_UNLIKELY(pkt->qkey != p->qkey))
		return drop(st, -AGG_E_QKEY);
	if (AGG_UNLIKELY(h->type != AGG_TYPE_RESULT && h->type != AGG_TYPE_WAIT))
		return drop(st, -AGG_E_TYPE);
	if (AGG_UNLIKELY(h->slot >= g->cfg.window))
		return drop(st, -AGG_E_SLOT);
	s = &g->sets[(size_t)h->slot * 2 + (h->flags & AGG_FLAG_SHADOW_SET)];
	if (s->state == SET_IDLE || s->state == SET_OPEN || key_cmp(h, s) != 0)
		return drop(st, -AGG_E_STALE);
	if (AGG_UNLIKELY(h->dtype != s->dtype || h->op != s->op || h->count != s->count ||
			 h->coll != s->coll || h->root != s->root))
		return drop(st, -AGG_E_MISMATCH);
	if (h->type == AGG_TYPE_WAIT) {
		/* the parent holds our partial and waits for other children:
		 * every member waits on this set, so each hears it */
		if (s->state != SET_UP) {
			st->duplicates++;     /* the result came meanwhile */
			return AGG_V_DUPLICATE;
		}
		return wait_answer(st, h, h->fanin, res);
	}
	/* docs/protocol.md, section 4: the result comes down with data to
	 * every child of an all-reduce, to the child that owns the root of a
	 * reduce or reduce-scatter, and to every child but that one of an
	 * allgather or bcast (it has the owner's elements: s->out; a parent
	 * from before that rule sends them all the same: taken) */
	bool copies = coll_copies(s->coll);
	has_data = s->coll == AGG_COLL_ALLREDUCE ||
		   (copies ? s->owner == AGG_NO_MEMBER : s->owner != AGG_NO_MEMBER);
	if (AGG_UNLIKELY(agg_hdr_has_data(h) != has_data &&
			 !(copies && s->owner != AGG_NO_MEMBER)))
		return drop(st, -AGG_E_COLL_DATA);
	if (s->state == SET_DONE) {
		st->duplicates++;
		return AGG_V_DUPLICATE;
	}
	len = (size_t)s->count * agg_dtype_size(s->dtype);
	if (AGG_UNLIKELY(pkt->payload_len != (agg_hdr_has_data(h) ? len : 0)))
		return drop(st, -AGG_E_MISMATCH);
	memcpy(s->out, pkt->payload, pkt->payload_len);
	s->res.hdr = *h;
	s->res.hdr.rank = 0;
	if (copies) {
		/* every member but the owner gets its elements */
		s->res.hdr.flags &= (uint8_t)~AGG_FLAG_NO_DATA;
	} else if (!has_data) {
		len = 0;
	}
	result_payload(s, len);
	s->res.data_to_all = s->coll == AGG_COLL_ALLREDUCE || coll_copies(s->coll);
	s->res.not_owner = coll_copies(s->coll);
	s->res.owner = s->owner;
	s->state = SET_DONE;
	st->parent_results++;
	*res = s->res;
	return AGG_V_COMPLETE;
}
