/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sending: a packet goes to its port's egress queues (dp_qos.c shapes and
 * schedules them), copies of a flooded one to every other port, and the
 * link impairment emulation (loss, duplication, reordering; docs/switch.md)
 * both directions use. The end of every path through the switch.
 */
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "dp_priv.h"

static void egress(struct dp_worker *w, uint16_t port_idx, struct rte_mbuf *m)
{
	enum dp_qdrop why = dp_egress_enqueue(&w->egress[port_idx], m);

	if (unlikely(why != DP_Q_OK)) {
		unsigned tc = m->hash.sched.traffic_class & (DP_NUM_TC - 1);

		w->tc[port_idx][tc].drops[why]++;
		w->drops[DP_DROP_EGRESS_FULL]++;
		w->port[port_idx].egress_drops++;
		rte_pktmbuf_free(m);
	}
}

void dp_classify_local(struct dp_switch *sw, struct rte_mbuf *m, uint8_t dscp)
{
	m->hash.sched.queue_id = DP_NO_PORT;
	m->hash.sched.traffic_class = sw->cfg->qos.dscp_tc[dscp & 63];
}

/* xorshift64: the impairment emulation's coin */
static inline uint32_t coin(struct dp_worker *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return (uint32_t)(w->rng >> 32);
}

/* Loss and duplication as a link would do them; true if m was consumed. */
bool dp_impair_link(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m,
		    struct rte_mbuf **dup)
{
	const struct dp_impair *im = &sw->cfg->impair;

	*dup = NULL;
	if (im->loss && coin(w) < im->loss) {
		w->impair_lost++;
		rte_pktmbuf_free(m);
		return true;
	}
	if (im->duplicate && coin(w) < im->duplicate) {
		*dup = rte_pktmbuf_copy(m, w->pool, 0, UINT32_MAX);
		if (*dup) {
			(*dup)->port = m->port;
			w->impair_duplicated++;
		}
	}
	return false;
}

void dp_tx(struct dp_switch *sw, struct dp_worker *w, uint16_t port_idx,
	   struct rte_mbuf *m)
{
	const struct dp_impair *im = &sw->cfg->impair;
	struct rte_mbuf *dup;

	if (likely(!im->on)) {
		egress(w, port_idx, m);
		return;
	}
	if (dp_impair_link(sw, w, m, &dup))
		return;
	if (dup)
		egress(w, port_idx, dup);
	if (im->reorder && !w->held[port_idx] && coin(w) < im->reorder) {
		/* overtaken by the next packet to this port (or sent after 1 ms) */
		w->held[port_idx] = m;
		w->held_tsc[port_idx] = rte_rdtsc();
		w->impair_reordered++;
		return;
	}
	egress(w, port_idx, m);
	if (w->held[port_idx]) {
		egress(w, port_idx, w->held[port_idx]);
		w->held[port_idx] = NULL;
	}
}

void dp_flood(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m, uint16_t in)
{
	uint16_t last = UINT16_MAX;

	w->floods++;
	for (uint16_t p = 0; p < sw->nports; p++) {
		if (p == in)
			continue;
		if (last != UINT16_MAX) {
			struct rte_mbuf *c = rte_pktmbuf_copy(m, w->pool, 0, UINT32_MAX);
			if (c)
				dp_tx(sw, w, last, c);
			else
				w->drops[DP_DROP_NO_MBUF]++;
		}
		last = p;
	}
	if (last == UINT16_MAX)
		rte_pktmbuf_free(m);     /* a one-port switch */
	else
		dp_tx(sw, w, last, m);
}

void dp_tx_release_held(struct dp_switch *sw, struct dp_worker *w, uint16_t port_idx,
			uint64_t now)
{
	if (unlikely(w->held[port_idx] != NULL) &&
	    now - w->held_tsc[port_idx] > sw->tsc_hz / 1000) {
		egress(w, port_idx, w->held[port_idx]);
		w->held[port_idx] = NULL;
	}
}
