/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The aggregation path: RoCEv2 UD contributions addressed to the switch are
 * decoded and checked by the worker that received them, and reduced by the
 * worker that owns their slot ((group + slot) % workers; docs/switch.md), and on
 * completion one result per member leaves through the member's port: with
 * the elements, or (reduce, reduce-scatter: every member but the root's;
 * allgather, bcast: the root's) the header alone, as docs/protocol.md 2.1
 * says.
 */
#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_memcpy.h>

#include "dp_priv.h"

/* A frame the switch built in m (len from the encoder, negative on
 * failure): classified by its DSCP and queued on port. */
static void send_built(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m,
		       int len, uint8_t dscp, uint16_t port)
{
	if (unlikely(len < 0)) {
		rte_pktmbuf_free(m);
		w->drops[DP_DROP_NO_MBUF]++;
		return;
	}
	m->data_len = (uint16_t)len;
	m->pkt_len = (uint32_t)len;
	dp_classify_local(sw, m, dscp);
	dp_tx(sw, w, port, m);
}

/* A fresh mbuf for a frame the switch builds, or NULL (counted). */
static inline struct rte_mbuf *frame_alloc(struct dp_worker *w)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(w->pool);

	if (unlikely(!m))
		w->drops[DP_DROP_NO_MBUF]++;
	return m;
}

/* Where a frame the switch sends on port goes: from the port's MAC and the
 * switch's address to dst_mac and dst_ip, with dscp. */
static inline void frame_addresses(struct agg_frame_spec *s, const struct dp_switch *sw,
				   uint16_t port, const uint8_t *dst_mac, uint32_t dst_ip,
				   uint8_t dscp)
{
	memcpy(s->dst_mac, dst_mac, 6);
	memcpy(s->src_mac, sw->port_mac[port].addr_bytes, 6);
	s->src_ip = sw->cfg->switch_ip;
	s->dst_ip = dst_ip;
	s->dscp = dscp;
}

/* (DPDK's rte_prefetch0_write is still experimental) */
#define prefetch_w(p) __builtin_prefetch((p), 1, 3)

/* How far ahead a result's header mbuf is prefetched: they may come cold
 * (from DRAM when many results wait to be sent; in the bench with -t 0,
 * every one), and a result takes some 50-80 ns. */
#define HDR_PF_AHEAD 6

/* Prefetch a stashed header mbuf's two lines and the data line its
 * headers go to. Where that line is follows from the mbuf's address
 * (rte_pktmbuf_init puts buf_addr right after the mbuf and its private
 * area, w->hdr_data_off): reading buf_addr from the mbuf, whose line is
 * not here yet, stalled the core on every result. */
static inline void hdr_prefetch(const struct dp_worker *w, struct rte_mbuf *m)
{
	prefetch_w(m);
	prefetch_w((char *)m + RTE_CACHE_LINE_SIZE);
	prefetch_w((char *)m + w->hdr_data_off);
}

/* A small mbuf for a result's headers: taken from the worker's stash,
 * refilled from the pool in bulk without touching the mbufs (one pool
 * access a burst of results), each reset when it is taken: by then its
 * lines are here, prefetched HDR_PF_AHEAD results ahead (but for the first
 * few after a refill, prefetched as the stash fills). NULL when the pool
 * is empty. */
static inline struct rte_mbuf *hdr_mbuf(struct dp_worker *w)
{
	unsigned n = w->hdr_stashed;
	struct rte_mbuf *m;

	if (unlikely(!n)) {
		n = RTE_DIM(w->hdr_stash);
		if (rte_mempool_get_bulk(w->hdr_pool, (void **)w->hdr_stash, n))
			return rte_pktmbuf_alloc(w->hdr_pool);
		for (unsigned i = n - HDR_PF_AHEAD; i < n; i++)
			hdr_prefetch(w, w->hdr_stash[i]);
	}
	if (likely(n > HDR_PF_AHEAD))
		hdr_prefetch(w, w->hdr_stash[n - HDR_PF_AHEAD - 1]);
	m = w->hdr_stash[--n];
	w->hdr_stashed = n;
	/* a mbuf in its pool has one reference, one segment, no next */
	rte_pktmbuf_reset(m);
	return m;
}

/* Lines of the next body prefetched at each contribution: all 64 of a 4 KiB
 * body at once fill the core's miss buffers and stall it (in the profile:
 * the prefetch loop and the payload copy), a quarter of them at a time do
 * not. A worker sees about as many contributions as a set has members
 * between two completions: with 2 members half a 4 KiB body's lines are
 * prefetched, the rest written cold. */
#define BODY_PF_LINES 16

static inline void body_prefetch_step(struct dp_worker *w)
{
	uint32_t n = RTE_MIN(w->body_pf_lines, (uint32_t)BODY_PF_LINES);

	for (uint32_t i = 0; i < n; i++)
		prefetch_w(w->body_pf + i * RTE_CACHE_LINE_SIZE);
	w->body_pf += n * RTE_CACHE_LINE_SIZE;
	w->body_pf_lines -= n;
}

/* The shared body of a set's results: the one taken for this set, whose
 * data lines were prefetched for writing since the last set completed (the
 * payload copy then writes to lines in cache, not to cold memory). The
 * bodies come in two stages, like the header mbufs: the one after the next
 * is taken from the pool untouched and its header lines prefetched; a set
 * later it is reset (its lines here by then) and becomes the next, its
 * first len bytes prefetched a few lines a contribution from then on
 * (body_prefetch_step). NULL when the pool is empty. */
static struct rte_mbuf *body_mbuf(struct dp_worker *w, uint32_t len)
{
	struct rte_mbuf *m = w->body_next;
	struct rte_mbuf *next = w->body_raw;
	void *raw;

	if (likely(next))
		rte_pktmbuf_reset(next);   /* a mbuf in its pool: as hdr_mbuf() */
	else
		next = rte_pktmbuf_alloc(w->pool);
	w->body_next = next;
	if (likely(next)) {
		char *d = rte_pktmbuf_mtod(next, char *);
		uint32_t room = rte_pktmbuf_tailroom(next);

		if (len > room)
			len = room;
		w->body_pf = d;
		w->body_pf_lines = (len + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE;
	} else {
		w->body_pf_lines = 0;
	}
	w->body_raw = NULL;
	if (likely(rte_mempool_get(w->pool, &raw) == 0)) {
		w->body_raw = raw;
		prefetch_w(raw);
		prefetch_w((char *)raw + RTE_CACHE_LINE_SIZE);
	}
	return m ? m : rte_pktmbuf_alloc(w->pool);
}

void dp_worker_stash_free(struct dp_worker *w)
{
	rte_mempool_put_bulk(w->hdr_pool, (void **)w->hdr_stash, w->hdr_stashed);
	w->hdr_stashed = 0;
	rte_pktmbuf_free(w->body_next);
	w->body_next = NULL;
	w->body_pf_lines = 0;
	if (w->body_raw)
		rte_mempool_put(w->pool, w->body_raw);   /* never reset: as taken */
	w->body_raw = NULL;
}

/* m's headers, then the shared body and ICRC pl (one more reference to
 * it): the payload is not copied per member. */
static struct rte_mbuf *chain_result(struct rte_mbuf *m, int hlen, struct rte_mbuf *pl)
{
	m->data_len = (uint16_t)hlen;
	m->pkt_len = (uint32_t)hlen + pl->data_len;
	m->nb_segs = 2;
	m->next = pl;
	return m;
}

/* The shared body of a set's results (NULL: each result a frame of its
 * own): the payload, its pad and the ICRC every member's frame ends with. */
struct shared_body {
	struct rte_mbuf *pl;
	struct agg_result_tmpl t;   /* the headers the results share, the ICRC */
	uint16_t refs;              /* references to pl the results took */
};

static void send_result(struct dp_switch *sw, struct dp_worker *w,
			struct dp_group *g, uint16_t member,
			const struct agg_result *res, struct shared_body *sb)
{
	struct rte_mbuf *pl = sb ? sb->pl : NULL;
	uint16_t port = __atomic_load_n(&g->member_port[member], __ATOMIC_RELAXED);
	struct dp_group_shard *sh = &g->sh[w->index];
	struct rte_mbuf *m;
	int len;

	if (unlikely(port == UINT16_MAX)) {
		sh->results_no_route++;
		w->drops[DP_DROP_NO_ROUTE]++;
		return;
	}
	bool chain = pl && sw->port_multiseg[port] && agg_result_has_data_for(res, member);
	m = chain ? hdr_mbuf(w) : frame_alloc(w);
	if (unlikely(!m)) {
		w->drops[DP_DROP_NO_MBUF] += chain;
		return;
	}
	/* a member on a tagged link gets its results with its own VLAN and
	 * priority (PCP = traffic class) */
	uint32_t vlan = __atomic_load_n(&g->member_vlan[member], __ATOMIC_RELAXED);
	struct agg_result_l2 l2 = {
		.switch_ip = sw->cfg->switch_ip,
		.dscp = sw->cfg->result_dscp,
		.has_vlan = vlan != 0,
		.vlan_tci = (uint16_t)vlan,
	};
	memcpy(l2.src_mac, sw->port_mac[port].addr_bytes, 6);
	/* with the elements or without, as the collective says for member */
	if (chain) {
		int hlen = agg_result_encode_hdr(g->agg, member, &sb->t, &l2,
						 g->member_mac[member].addr_bytes,
						 rte_pktmbuf_mtod(m, void *),
						 rte_pktmbuf_tailroom(m));
		if (unlikely(hlen < 0)) {
			send_built(sw, w, m, hlen, 0, port);
			return;
		}
		m = chain_result(m, hlen, pl);
		sb->refs++;
		sh->results_sent++;
		dp_classify_local(sw, m, sw->cfg->result_dscp);
		dp_tx(sw, w, port, m);
		return;
	}
	len = agg_result_encode(g->agg, member, res, &l2,
				g->member_mac[member].addr_bytes,
				rte_pktmbuf_mtod(m, void *), rte_pktmbuf_tailroom(m));
	/* a WAIT is counted by the engine (waits), not as a result */
	bool result = res->hdr.type == AGG_TYPE_RESULT;
	sh->results_sent += len >= 0 && result;
	sh->results_no_data += len >= 0 && result && !agg_result_has_data_for(res, member);
	send_built(sw, w, m, len, sw->cfg->result_dscp, port);
}

/* In a tree: the set completed here, its partial goes to the parent as
 * one contribution (and again when a member retransmits); without elements
 * for an allgather or bcast whose root is not under this switch. */
static void send_up(struct dp_switch *sw, struct dp_worker *w, struct dp_group *g,
		    const struct agg_result *res)
{
	const struct agg_parent *p = &agg_group_config(g->agg)->parent;
	struct dp_group_shard *sh = &g->sh[w->index];
	struct rte_ether_addr mac;
	struct rte_mbuf *m;
	int port, len;

	/* the parent, or the gateway towards it (routed placement) */
	uint32_t hop = dp_next_hop(sw->cfg, p->ip);
	port = dp_neigh_lookup(sw, hop, &mac);
	if (port < 0) {
		/* not resolved yet: ask (at most every 100 ms); the members'
		 * retransmissions bring the partial back here */
		uint64_t now = rte_rdtsc();
		sh->up_no_route++;
		w->drops[DP_DROP_NO_ROUTE]++;
		if (now - sh->arp_tsc > sw->tsc_hz / 10) {
			sh->arp_tsc = now;
			dp_arp_request(sw, w, hop);
		}
		return;
	}
	m = frame_alloc(w);
	if (unlikely(!m))
		return;
	struct agg_frame_spec spec = {
		.ecn = 2,
		.dest_qp = p->qpn,
		.qkey = p->qkey,
		.src_qp = agg_group_config(g->agg)->qpn,
		.psn = __atomic_fetch_add(&g->up_psn, 1, __ATOMIC_RELAXED) & AGG_PSN_MASK,
		.hdr = res->hdr,
	};
	frame_addresses(&spec, sw, (uint16_t)port, mac.addr_bytes, p->ip, sw->cfg->result_dscp);
	len = agg_encode(rte_pktmbuf_mtod(m, void *), rte_pktmbuf_tailroom(m), &spec,
			 res->payload);
	sh->up_sent += len >= 0;
	sh->up_no_data += len >= 0 && !agg_hdr_has_data(&res->hdr);
	send_built(sw, w, m, len, sw->cfg->result_dscp, (uint16_t)port);
}

/* The contribution came CE-marked: the switch is its notification point
 * and tells the sender's QP, at most once per cnp_interval_us. */
static void send_cnp(struct dp_switch *sw, struct dp_worker *w, struct dp_group *g,
		     uint16_t member, const struct agg_pkt *pkt, uint16_t in)
{
	const struct dp_qos_cfg *q = &sw->cfg->qos;
	struct dp_group_shard *sh = &g->sh[w->index];
	uint64_t now = rte_rdtsc();
	uint64_t last = __atomic_load_n(&g->member_cnp_tsc[member], __ATOMIC_RELAXED);
	struct rte_mbuf *m;
	int len;

	/* the workers sharing the member race benignly: at worst one CNP
	 * more in an interval */
	if (last && now - last < (uint64_t)q->cnp_interval_us * sw->tsc_hz / 1000000) {
		sh->cnp_limited++;
		w->cnp_limited++;
		return;
	}
	m = frame_alloc(w);
	if (unlikely(!m))
		return;
	struct agg_frame_spec spec = {
		.has_vlan = pkt->has_vlan,
		.vlan_tci = pkt->vlan_tci,
		.dest_qp = pkt->src_qp,
	};
	frame_addresses(&spec, sw, in, pkt->src_mac, pkt->src_ip, q->cnp_dscp);
	len = agg_encode_cnp(rte_pktmbuf_mtod(m, void *), rte_pktmbuf_tailroom(m), &spec);
	if (len >= 0) {
		__atomic_store_n(&g->member_cnp_tsc[member], now, __ATOMIC_RELAXED);
		sh->cnp_sent++;
		w->cnp_sent++;
	}
	send_built(sw, w, m, len, q->cnp_dscp, in);
}

/* Payloads at least this long are shared by the members' results (chained
 * mbufs) instead of copied into each: below it the copy costs less than
 * the extra mbuf. */
#define CHAIN_MIN_PAYLOAD 512

/* A completed set: one result per member. Where the ports chain, every
 * member's frame is its own headers, written from one template, then one
 * mbuf with the body and an ICRC they all share: each header carries the
 * balance that makes its frame's ICRC that one (docs/protocol.md, 1.6). */
static void send_results(struct dp_switch *sw, struct dp_worker *w, struct dp_group *g,
			 const struct agg_result *res)
{
	uint16_t n = agg_group_config(g->agg)->nmembers;
	uint32_t body = res->payload_len + res->pad;
	struct shared_body sb = { 0 };

	if (n > 1 && body >= CHAIN_MIN_PAYLOAD && sw->multiseg_any) {
		sb.pl = body_mbuf(w, body + AGG_ICRC_LEN);
		uint8_t *p = sb.pl ? (uint8_t *)rte_pktmbuf_append(sb.pl,
						(uint16_t)(body + AGG_ICRC_LEN)) : NULL;
		struct agg_result_l2 l2 = {
			.switch_ip = sw->cfg->switch_ip,
			.dscp = sw->cfg->result_dscp,
		};
		if (p && agg_result_tmpl_init(g->agg, res, &l2, &sb.t) == 0) {
			rte_memcpy(p, res->payload, body);
			agg_icrc_store(p + body, sb.t.icrc);
			/* a reference for each member, given back below for
			 * those that took none: taking them costs two atomic
			 * updates a set, not one a result */
			rte_mbuf_refcnt_update(sb.pl, (int16_t)n);
		} else if (sb.pl) {
			rte_pktmbuf_free(sb.pl);
			sb.pl = NULL;
		}
	}
	for (uint16_t i = 0; i < n; i++)
		send_result(sw, w, g, i, res, sb.pl ? &sb : NULL);
	if (sb.pl) {
		if (sb.refs < n)
			rte_mbuf_refcnt_update(sb.pl, (int16_t)-(int)(n - sb.refs));
		rte_pktmbuf_free(sb.pl);   /* the results hold their own */
	}
}

void dp_agg_input(struct dp_switch *sw, struct dp_worker *w,
		  struct rte_mbuf *m, bool icrc_checked)
{
	struct agg_pkt pkt;
	struct agg_result res;
	struct dp_group *g;
	uint16_t member;
	void *data;
	int rc;

	body_prefetch_step(w);
	if (unlikely(m->nb_segs > 1)) {
		w->drops[DP_DROP_MULTI_SEGMENT]++;
		goto out;
	}
	/* The ICRC is checked in the pass that reduces the elements
	 * (agg_group_ingest), or before anything else reads the packet's
	 * INCA fields here. */
	rc = icrc_checked ? agg_decode(rte_pktmbuf_mtod(m, void *), m->data_len, false, &pkt) :
			    agg_decode_lazy(rte_pktmbuf_mtod(m, void *), m->data_len, &pkt);
	if (unlikely(rc)) {
		w->agg_drops[-rc]++;
		goto out;
	}
	if (unlikely(pkt.kind != AGG_PKT_INCA)) {
		/* a CNP for the switch: it sends UD results, not RC traffic */
		w->drops[DP_DROP_NOT_CONTRIB]++;
		goto out;
	}
	/* a burst's contributions are mostly for one group: looked up once
	 * (the group stays until the worker's next quiescent point) */
	if (likely(pkt.dest_qp == w->last_qpn)) {
		g = &sw->groups[w->last_group];
	} else {
		rc = rte_hash_lookup_data(sw->group_by_qpn, &pkt.dest_qp, &data);
		if (unlikely(rc < 0)) {
			rc = agg_pkt_icrc_check(&pkt);
			w->agg_drops[rc ? -rc : AGG_E_GROUP]++;
			goto out;
		}
		w->last_qpn = pkt.dest_qp;
		w->last_group = (uint32_t)(uintptr_t)data;
		g = &sw->groups[w->last_group];
	}
	unsigned owner = dp_slot_owner(g, pkt.hdr.slot);
	if (unlikely(owner != w->index || pkt.hdr.type != AGG_TYPE_CONTRIB) &&
	    (rc = agg_pkt_icrc_check(&pkt))) {
		w->agg_drops[-rc]++;
		goto out;
	}
	if (unlikely(owner != w->index)) {
		/* only the slot's owner touches it: no locks. Its packets
		 * arrive here when the ports' hash did not send them to the
		 * owner's queue (docs/switch.md, "Slots and workers"). */
		if (rte_ring_enqueue(sw->workers[owner]->handoff, m)) {
			w->drops[DP_DROP_HANDOFF_FULL]++;
			goto out;
		}
		w->handoffs++;
		return;
	}

	if (pkt.hdr.type == AGG_TYPE_RESULT || pkt.hdr.type == AGG_TYPE_WAIT) {
		/* in a tree: the parent's result for a set we sent up */
		rc = agg_group_parent_result(g->agg, &pkt, &res);
		if (rc == AGG_V_COMPLETE || rc == AGG_V_WAIT)
			send_results(sw, w, g, &res);
		goto out;
	}
	rc = agg_group_ingest(g->agg, &pkt, &res, &member);
	if (rc < 0) {
		/* counted in the group's drops, but for the ICRC */
		if (rc == -AGG_E_ICRC)
			w->agg_drops[AGG_E_ICRC]++;
		goto out;
	}
	/* results go back the way the member's contributions came */
	uint16_t in = dp_port_index(sw, m->port);
	uint32_t vlan = pkt.has_vlan ? (1u << 16 | pkt.vlan_tci) : 0;
	if (unlikely(__atomic_load_n(&g->member_port[member], __ATOMIC_RELAXED) != in))
		__atomic_store_n(&g->member_port[member], in, __ATOMIC_RELAXED);
	if (unlikely(__atomic_load_n(&g->member_vlan[member], __ATOMIC_RELAXED) != vlan))
		__atomic_store_n(&g->member_vlan[member], vlan, __ATOMIC_RELAXED);
	if (unlikely(pkt.ecn == 3) && sw->cfg->qos.cnp)
		send_cnp(sw, w, g, member, &pkt, in);
	const uint8_t *cfg_mac = agg_group_config(g->agg)->members[member].mac;
	if (!(cfg_mac[0] | cfg_mac[1] | cfg_mac[2] | cfg_mac[3] | cfg_mac[4] | cfg_mac[5]) &&
	    unlikely(memcmp(g->member_mac[member].addr_bytes, pkt.src_mac, 6)))
		/* learnt once; a host that changes its MAC mid-job may see
		 * one result with a torn address while two workers race */
		memcpy(g->member_mac[member].addr_bytes, pkt.src_mac, 6);

	if (rc == AGG_V_COMPLETE) {
		send_results(sw, w, g, &res);
	} else if (rc == AGG_V_RETRANSMIT) {
		send_result(sw, w, g, member, &res, NULL);
	} else if (rc == AGG_V_UPSTREAM) {
		send_up(sw, w, g, &res);
	} else if (rc == AGG_V_WAIT) {
		send_result(sw, w, g, member, &res, NULL);
	}
out:
	dp_free_later(w, m);
}
