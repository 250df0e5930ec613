/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch's counters summed for readers: per worker (one writer each)
 * and per group shard, added up into struct dp_totals for the telemetry
 * commands, the --stats line and /metrics alike. A read may be a packet
 * behind, never torn (64-bit stores).
 */
#include <string.h>

#include "dp_priv.h"

const char *const dp_drop_names[DP_DROP_COUNT] = {
#define DP_X_NAME(n, c) [DP_DROP_##n] = c,
	DP_DROPS(DP_X_NAME)
#undef DP_X_NAME
};

void dp_totals_sum(struct dp_switch *sw, struct dp_totals *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < sw->nworkers; i++) {
		const struct dp_worker *w = sw->workers[i];

		for (uint16_t p = 0; p < sw->nports; p++) {
			t->port[p].rx_pkts += w->port[p].rx_pkts;
			t->port[p].rx_bytes += w->port[p].rx_bytes;
			t->port[p].tx_pkts += w->port[p].tx_pkts;
			t->port[p].tx_bytes += w->port[p].tx_bytes;
			t->port[p].egress_drops += w->port[p].egress_drops;
			for (int e = 0; e < AGG_PFC_E__COUNT; e++)
				t->port[p].pfc_malformed[e] += w->port[p].pfc_malformed[e];
			for (unsigned tc = 0; tc < DP_NUM_TC; tc++) {
				const struct dp_tc_stats *a = &w->tc[p][tc];
				struct dp_tc_stats *b = &t->tc[p][tc];

				b->enq_pkts += a->enq_pkts;
				b->tx_pkts += a->tx_pkts;
				b->tx_bytes += a->tx_bytes;
				b->ecn_marked += a->ecn_marked;
				b->discarded += a->discarded;
				for (int r = 1; r < DP_QDROP_END; r++) {
					b->drops[r] += a->drops[r];
					t->qdrops[r] += a->drops[r];
				}
				t->discarded += a->discarded;
				t->port[p].tx_bytes += a->tx_bytes;
			}
		}
		t->cnp_sent += w->cnp_sent;
		t->cnp_limited += w->cnp_limited;
		for (int d = 0; d < DP_DROP_COUNT; d++)
			t->drops[d] += w->drops[d];
		for (int d = 0; d < AGG_E__COUNT; d++)
			t->agg_drops[d] += w->agg_drops[d];
		t->arp_replies += w->arp_replies;
		t->arp_requests += w->arp_requests;
		t->icmp_replies += w->icmp_replies;
		t->floods += w->floods;
		t->handoffs += w->handoffs;
		t->impair_lost += w->impair_lost;
		t->impair_duplicated += w->impair_duplicated;
		t->impair_reordered += w->impair_reordered;
		t->busy_tsc += w->busy_tsc;
	}
	pthread_mutex_lock(&sw->ctl_lock);
	for (uint16_t g = 0; g <= sw->group_hwm; g++) {
		struct agg_group_stats sum;
		const struct agg_group_stats *s = &sum;

		if (g == sw->group_hwm)
			s = &sw->retired;
		else if (sw->groups[g].agg)
			agg_group_stats_sum(sw->groups[g].agg, &sum);
		else
			continue;
		t->contributions += s->contributions;
		t->completions += s->completions;
		t->duplicates += s->duplicates;
		t->retransmits += s->retransmits;
		t->preempted += s->preempted;
		for (int d = 0; d < AGG_E__COUNT; d++)
			t->agg_drops[d] += s->drops[d];
	}
	pthread_mutex_unlock(&sw->ctl_lock);
}

uint64_t dp_totals_drops(const struct dp_totals *t)
{
	uint64_t n = 0;

	for (int d = 0; d < DP_DROP_COUNT; d++)
		n += t->drops[d];
	for (int d = 1; d < AGG_E__COUNT; d++)
		n += t->agg_drops[d];
	return n + t->discarded;
}
