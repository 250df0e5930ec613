/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counters for operators: rte_telemetry commands (dpdk-telemetry.py) under
 * /inca/, and the one-line --stats summary. Counters are per worker and
 * summed here; a read may be a packet behind, never torn (64-bit stores).
 */
#include <stdio.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_telemetry.h>

#include "dp_priv.h"

const char *const dp_drop_names[DP_DROP_COUNT] = {
#define DP_X_NAME(n, c) [DP_DROP_##n] = c,
	DP_DROPS(DP_X_NAME)
#undef DP_X_NAME
};

struct totals {
	struct dp_port_stats port[DP_MAX_PORTS];
	uint64_t drops[DP_DROP_COUNT];
	uint64_t agg_drops[AGG_E__COUNT];
	uint64_t arp_replies, icmp_replies, floods, handoffs;
	uint64_t impair_lost, impair_duplicated, impair_reordered;
	uint64_t contributions, completions, duplicates, retransmits, preempted;
	uint64_t busy_tsc;
};

static void sum(struct dp_switch *sw, struct totals *t)
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
		}
		for (int d = 0; d < DP_DROP_COUNT; d++)
			t->drops[d] += w->drops[d];
		for (int d = 0; d < AGG_E__COUNT; d++)
			t->agg_drops[d] += w->agg_drops[d];
		t->arp_replies += w->arp_replies;
		t->icmp_replies += w->icmp_replies;
		t->floods += w->floods;
		t->handoffs += w->handoffs;
		t->impair_lost += w->impair_lost;
		t->impair_duplicated += w->impair_duplicated;
		t->impair_reordered += w->impair_reordered;
		t->busy_tsc += w->busy_tsc;
	}
	for (uint16_t g = 0; g < sw->ngroups; g++) {
		const struct agg_group_stats *s = agg_group_stats(sw->groups[g].agg);

		t->contributions += s->contributions;
		t->completions += s->completions;
		t->duplicates += s->duplicates;
		t->retransmits += s->retransmits;
		t->preempted += s->preempted;
		for (int d = 0; d < AGG_E__COUNT; d++)
			t->agg_drops[d] += s->drops[d];
	}
}

static uint64_t total_drops(const struct totals *t)
{
	uint64_t n = 0;

	for (int d = 0; d < DP_DROP_COUNT; d++)
		n += t->drops[d];
	for (int d = 1; d < AGG_E__COUNT; d++)
		n += t->agg_drops[d];
	return n;
}

static int cmd_info(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct dp_switch *sw = &dp_sw;
	struct totals t;
	char ip[16];
	uint32_t a = sw->cfg->switch_ip;

	(void)cmd;
	(void)params;
	sum(sw, &t);
	snprintf(ip, sizeof(ip), "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff,
		 (a >> 8) & 0xff, a & 0xff);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "switch_ip", ip);
	rte_tel_data_add_dict_u64(d, "ports", sw->nports);
	rte_tel_data_add_dict_u64(d, "workers", sw->nworkers);
	rte_tel_data_add_dict_u64(d, "groups", sw->ngroups);
	rte_tel_data_add_dict_u64(d, "l2_entries", dp_l2_count(sw->l2));
	rte_tel_data_add_dict_u64(d, "uptime_s", (rte_rdtsc() - sw->start_tsc) / sw->tsc_hz);
	rte_tel_data_add_dict_u64(d, "contributions", t.contributions);
	rte_tel_data_add_dict_u64(d, "completions", t.completions);
	rte_tel_data_add_dict_u64(d, "duplicates", t.duplicates);
	rte_tel_data_add_dict_u64(d, "retransmits", t.retransmits);
	rte_tel_data_add_dict_u64(d, "arp_replies", t.arp_replies);
	rte_tel_data_add_dict_u64(d, "icmp_replies", t.icmp_replies);
	rte_tel_data_add_dict_u64(d, "floods", t.floods);
	rte_tel_data_add_dict_u64(d, "handoffs", t.handoffs);
	rte_tel_data_add_dict_u64(d, "drops", total_drops(&t));
	rte_tel_data_add_dict_u64(d, "impair_lost", t.impair_lost);
	rte_tel_data_add_dict_u64(d, "impair_duplicated", t.impair_duplicated);
	rte_tel_data_add_dict_u64(d, "impair_reordered", t.impair_reordered);
	return 0;
}

static int cmd_ports(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct dp_switch *sw = &dp_sw;
	struct totals t;

	(void)cmd;
	(void)params;
	sum(sw, &t);
	rte_tel_data_start_dict(d);
	for (uint16_t p = 0; p < sw->nports; p++) {
		struct rte_tel_data *c = rte_tel_data_alloc();
		struct rte_eth_stats es;
		uint64_t queued = 0;
		char name[16];

		if (!c)
			return -ENOMEM;
		for (unsigned i = 0; i < sw->nworkers; i++)
			queued += sw->workers[i]->egress[p].bytes;
		rte_tel_data_start_dict(c);
		rte_tel_data_add_dict_u64(c, "dpdk_port", sw->port_ids[p]);
		rte_tel_data_add_dict_u64(c, "rx_packets", t.port[p].rx_pkts);
		rte_tel_data_add_dict_u64(c, "rx_bytes", t.port[p].rx_bytes);
		rte_tel_data_add_dict_u64(c, "tx_packets", t.port[p].tx_pkts);
		rte_tel_data_add_dict_u64(c, "tx_bytes", t.port[p].tx_bytes);
		rte_tel_data_add_dict_u64(c, "egress_drops", t.port[p].egress_drops);
		rte_tel_data_add_dict_u64(c, "egress_queued_bytes", queued);
		rte_tel_data_add_dict_u64(c, "rate_bps",
					  sw->workers[0]->egress[p].rate_bps * sw->nworkers);
		if (rte_eth_stats_get(sw->port_ids[p], &es) == 0) {
			rte_tel_data_add_dict_u64(c, "nic_rx_missed", es.imissed);
			rte_tel_data_add_dict_u64(c, "nic_rx_errors", es.ierrors);
			rte_tel_data_add_dict_u64(c, "nic_tx_errors", es.oerrors);
		}
		snprintf(name, sizeof(name), "port%u", p);
		rte_tel_data_add_dict_container(d, name, c, 0);
	}
	return 0;
}

static void add_drops(struct rte_tel_data *d, const uint64_t *dp, const uint64_t *agg,
		      bool all)
{
	if (dp)
		for (int i = 0; i < DP_DROP_COUNT; i++)
			if (all || dp[i])
				rte_tel_data_add_dict_u64(d, dp_drop_names[i], dp[i]);
	for (int i = 1; i < AGG_E__COUNT; i++)
		if (all || agg[i])
			rte_tel_data_add_dict_u64(d, agg_errname(-i), agg[i]);
}

static int cmd_drops(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct totals t;

	(void)cmd;
	(void)params;
	sum(&dp_sw, &t);
	rte_tel_data_start_dict(d);
	add_drops(d, t.drops, t.agg_drops, true);
	return 0;
}

static int cmd_groups(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
	for (uint16_t g = 0; g < dp_sw.ngroups; g++)
		rte_tel_data_add_array_u64(d, agg_group_config(dp_sw.groups[g].agg)->group_id);
	return 0;
}

static int cmd_group(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct dp_switch *sw = &dp_sw;
	char *end;
	unsigned long id;

	(void)cmd;
	if (!params || !*params)
		return -EINVAL;
	id = strtoul(params, &end, 0);
	if (*end)
		return -EINVAL;
	for (uint16_t i = 0; i < sw->ngroups; i++) {
		const struct dp_group *g = &sw->groups[i];
		const struct agg_group_config *c = agg_group_config(g->agg);
		const struct agg_group_stats *s = agg_group_stats(g->agg);
		struct rte_tel_data *dr;

		if (c->group_id != id)
			continue;
		rte_tel_data_start_dict(d);
		rte_tel_data_add_dict_u64(d, "id", c->group_id);
		rte_tel_data_add_dict_u64(d, "qpn", c->qpn);
		rte_tel_data_add_dict_u64(d, "members", c->nmembers);
		rte_tel_data_add_dict_u64(d, "window", c->window);
		rte_tel_data_add_dict_u64(d, "elems_per_pkt", c->elems_per_pkt);
		rte_tel_data_add_dict_u64(d, "reproducible", c->reproducible);
		rte_tel_data_add_dict_u64(d, "worker", g->owner);
		rte_tel_data_add_dict_u64(d, "contributions", s->contributions);
		rte_tel_data_add_dict_u64(d, "completions", s->completions);
		rte_tel_data_add_dict_u64(d, "duplicates", s->duplicates);
		rte_tel_data_add_dict_u64(d, "retransmits", s->retransmits);
		rte_tel_data_add_dict_u64(d, "preempted", s->preempted);
		rte_tel_data_add_dict_u64(d, "restarts", s->restarts);
		rte_tel_data_add_dict_u64(d, "results_sent", g->results_sent);
		rte_tel_data_add_dict_u64(d, "results_no_route", g->results_no_route);
		dr = rte_tel_data_alloc();
		if (!dr)
			return -ENOMEM;
		rte_tel_data_start_dict(dr);
		add_drops(dr, NULL, s->drops, true);
		rte_tel_data_add_dict_container(d, "drops", dr, 0);
		return 0;
	}
	return -ENOENT;
}

int dp_telemetry_init(struct dp_switch *sw)
{
	(void)sw;
	rte_telemetry_register_cmd("/inca/info", cmd_info,
		"Switch summary: address, ports, workers, groups, totals. No parameters.");
	rte_telemetry_register_cmd("/inca/ports", cmd_ports,
		"Per-port packets, bytes, egress drops and queue. No parameters.");
	rte_telemetry_register_cmd("/inca/drops", cmd_drops,
		"Every drop reason with its count. No parameters.");
	rte_telemetry_register_cmd("/inca/groups", cmd_groups,
		"Ids of the configured groups. No parameters.");
	rte_telemetry_register_cmd("/inca/group", cmd_group,
		"One group's counters and drops. Parameter: group id.");
	return 0;
}

void dp_stats_line(struct dp_switch *sw, double interval_s)
{
	static struct totals prev;
	struct totals t;
	uint64_t rx = 0, tx = 0, prx = 0, ptx = 0;

	sum(sw, &t);
	for (uint16_t p = 0; p < sw->nports; p++) {
		rx += t.port[p].rx_pkts;
		tx += t.port[p].tx_pkts;
		prx += prev.port[p].rx_pkts;
		ptx += prev.port[p].tx_pkts;
	}
	printf("inca-switch: rx %.0f pps, tx %.0f pps, contributions %.0f/s, "
	       "completions %.0f/s, retransmits %llu, duplicates %llu, drops %llu, "
	       "busy %.1f%%\n",
	       (double)(rx - prx) / interval_s, (double)(tx - ptx) / interval_s,
	       (double)(t.contributions - prev.contributions) / interval_s,
	       (double)(t.completions - prev.completions) / interval_s,
	       (unsigned long long)t.retransmits, (unsigned long long)t.duplicates,
	       (unsigned long long)total_drops(&t),
	       100.0 * (double)(t.busy_tsc - prev.busy_tsc) /
		       ((double)sw->tsc_hz * interval_s * sw->nworkers));
	fflush(stdout);
	prev = t;
}
