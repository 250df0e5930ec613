/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counters for operators: rte_telemetry commands (dpdk-telemetry.py) under
 * /inca/, and the one-line --stats summary, from dp_counters.c's sums.
 */
#include <stdio.h>
#include <stdlib.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_telemetry.h>

#include "dp_priv.h"


static int cmd_info(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct dp_switch *sw = &dp_sw;
	struct dp_totals t;
	char ip[16];
	uint32_t a = sw->cfg->switch_ip;

	(void)cmd;
	(void)params;
	dp_totals_sum(sw, &t);
	snprintf(ip, sizeof(ip), "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff,
		 (a >> 8) & 0xff, a & 0xff);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "switch_ip", ip);
	if (sw->cfg->gateway) {
		a = sw->cfg->gateway;
		snprintf(ip, sizeof(ip), "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff,
			 (a >> 8) & 0xff, a & 0xff);
		rte_tel_data_add_dict_string(d, "gateway", ip);
		rte_tel_data_add_dict_u64(d, "prefix_len", sw->cfg->prefix_len);
	}
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
	rte_tel_data_add_dict_u64(d, "arp_requests", t.arp_requests);
	rte_tel_data_add_dict_u64(d, "icmp_replies", t.icmp_replies);
	rte_tel_data_add_dict_u64(d, "floods", t.floods);
	rte_tel_data_add_dict_u64(d, "handoffs", t.handoffs);
	rte_tel_data_add_dict_u64(d, "drops", dp_totals_drops(&t));
	rte_tel_data_add_dict_u64(d, "impair_lost", t.impair_lost);
	rte_tel_data_add_dict_u64(d, "impair_duplicated", t.impair_duplicated);
	rte_tel_data_add_dict_u64(d, "impair_reordered", t.impair_reordered);
	rte_tel_data_add_dict_u64(d, "cnp_sent", t.cnp_sent);
	rte_tel_data_add_dict_u64(d, "cnp_rate_limited", t.cnp_limited);
	rte_tel_data_add_dict_u64(d, "pfc_watchdog_events", sw->qos->nevents);
	return 0;
}

static int cmd_ports(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct dp_switch *sw = &dp_sw;
	struct dp_totals t;

	(void)cmd;
	(void)params;
	dp_totals_sum(sw, &t);
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
		rte_tel_data_add_dict_u64(c, "link_up", dp_port_link_up(sw, p));
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
	struct dp_totals t;

	(void)cmd;
	(void)params;
	dp_totals_sum(&dp_sw, &t);
	rte_tel_data_start_dict(d);
	add_drops(d, t.drops, t.agg_drops, true);
	for (int r = 1; r < DP_QDROP_END; r++) {
		char name[64];
		snprintf(name, sizeof(name), "queue_%s", dp_qdrop_names[r]);
		rte_tel_data_add_dict_u64(d, name, t.qdrops[r]);
	}
	return 0;
}

/* /inca/qos,PORT: per traffic class queue, PFC, ECN and watchdog counters */
static int cmd_qos(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct dp_switch *sw = &dp_sw;
	const struct dp_qos_cfg *cfg = &sw->cfg->qos;
	struct dp_totals *t;
	unsigned long port;
	char *end;

	(void)cmd;
	if (!params || !*params)
		return -EINVAL;
	port = strtoul(params, &end, 0);
	if (*end || port >= sw->nports)
		return -EINVAL;
	t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	dp_totals_sum(sw, t);
	uint64_t now = rte_rdtsc();
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "port", port);
	rte_tel_data_add_dict_u64(d, "pfc", cfg->pfc);
	rte_tel_data_add_dict_u64(d, "pause_rate_bps", sw->qos->port_bps[port]);
	for (unsigned tc = 0; tc < DP_NUM_TC; tc++) {
		const struct dp_tc_stats *s = &t->tc[port][tc];
		struct dp_pq *pq = &sw->qos->pq[port][tc];
		struct rte_tel_data *c = rte_tel_data_alloc();
		uint64_t qb = 0, qp = 0;
		char name[8];

		if (!c) {
			free(t);
			return -ENOMEM;
		}
		for (unsigned i = 0; i < sw->nworkers; i++) {
			const struct dp_tcq *q = &sw->workers[i]->egress[port].q[tc];
			qb += __atomic_load_n(&q->bytes, __ATOMIC_RELAXED);
			qp += __atomic_load_n(&q->tail, __ATOMIC_RELAXED) -
			      __atomic_load_n(&q->head, __ATOMIC_RELAXED);
		}
		rte_tel_data_start_dict(c);
		rte_tel_data_add_dict_u64(c, "lossless", dp_tc_lossless(cfg, tc));
		rte_tel_data_add_dict_u64(c, "strict", cfg->strict_mask >> tc & 1);
		rte_tel_data_add_dict_u64(c, "enqueued", s->enq_pkts);
		rte_tel_data_add_dict_u64(c, "tx_packets", s->tx_pkts);
		rte_tel_data_add_dict_u64(c, "tx_bytes", s->tx_bytes);
		rte_tel_data_add_dict_u64(c, "queued_packets", qp);
		rte_tel_data_add_dict_u64(c, "queued_bytes", qb);
		rte_tel_data_add_dict_u64(c, "ecn_marked", s->ecn_marked);
		for (int r = 1; r < DP_QDROP_END; r++)
			rte_tel_data_add_dict_u64(c, dp_qdrop_names[r], s->drops[r]);
		rte_tel_data_add_dict_u64(c, "ingress_bytes",
			__atomic_load_n(&pq->ingress_bytes, __ATOMIC_RELAXED));
		rte_tel_data_add_dict_u64(c, "ingress_peak_bytes",
			__atomic_load_n(&pq->ingress_peak, __ATOMIC_RELAXED));
		rte_tel_data_add_dict_u64(c, "pfc_xoff_sent", pq->xoff_tx);
		rte_tel_data_add_dict_u64(c, "pfc_xon_sent", pq->xon_tx);
		rte_tel_data_add_dict_u64(c, "pfc_xoff_received", pq->pfc_rx);
		rte_tel_data_add_dict_u64(c, "pfc_xon_received", pq->pfc_rx_xon);
		rte_tel_data_add_dict_u64(c, "pfc_ignored_lossy", pq->pfc_rx_lossy);
		rte_tel_data_add_dict_u64(c, "paused_us", dp_tsc_us(sw, pq->paused_tsc));
		rte_tel_data_add_dict_u64(c, "paused_now",
			__atomic_load_n(&pq->paused_until, __ATOMIC_RELAXED) > now);
		rte_tel_data_add_dict_u64(c, "watchdog_storms", pq->wd_storms);
		rte_tel_data_add_dict_u64(c, "watchdog_restores", pq->wd_restores);
		rte_tel_data_add_dict_u64(c, "watchdog_stormed",
			__atomic_load_n(&pq->wd_stormed, __ATOMIC_RELAXED));
		snprintf(name, sizeof(name), "tc%u", tc);
		rte_tel_data_add_dict_container(d, name, c, 0);
	}
	struct rte_tel_data *m = rte_tel_data_alloc();
	if (!m) {
		free(t);
		return -ENOMEM;
	}
	rte_tel_data_start_dict(m);
	for (int e = 1; e < AGG_PFC_E__COUNT; e++)
		rte_tel_data_add_dict_u64(m, agg_pfc_error_name(-e),
					  t->port[port].pfc_malformed[e]);
	rte_tel_data_add_dict_container(d, "pfc_malformed", m, 0);
	free(t);
	return 0;
}

/* /inca/pfc_watchdog: the configuration and the last events */
static int cmd_watchdog(const char *cmd, const char *params, struct rte_tel_data *d)
{
	static const char *const actions[] = { "drop", "forward", "alert" };
	struct dp_switch *sw = &dp_sw;
	struct dp_qos *qos = sw->qos;
	const struct dp_qos_cfg *cfg = qos->cfg;

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "enabled", cfg->watchdog);
	rte_tel_data_add_dict_string(d, "action", actions[cfg->wd_action]);
	rte_tel_data_add_dict_u64(d, "detection_ms", cfg->wd_detect_ms);
	rte_tel_data_add_dict_u64(d, "restoration_ms", cfg->wd_restore_ms);
	rte_spinlock_lock(&qos->ev_lock);
	uint64_t n = qos->nevents, first = n > DP_WD_EVENTS ? n - DP_WD_EVENTS : 0;
	rte_tel_data_add_dict_u64(d, "events", n);
	for (uint64_t i = first; i < n; i++) {
		const struct dp_wd_event *e = &qos->events[i % DP_WD_EVENTS];
		struct rte_tel_data *c = rte_tel_data_alloc();
		char name[32];

		if (!c)
			break;
		rte_tel_data_start_dict(c);
		rte_tel_data_add_dict_string(c, "event", e->storm ? "storm" : "restore");
		rte_tel_data_add_dict_u64(c, "port", e->port);
		rte_tel_data_add_dict_u64(c, "tc", e->tc);
		rte_tel_data_add_dict_u64(c, "time_ms", (uint64_t)(e->t_s * 1000.0));
		snprintf(name, sizeof(name), "event%llu", (unsigned long long)i);
		rte_tel_data_add_dict_container(d, name, c, 0);
	}
	rte_spinlock_unlock(&qos->ev_lock);
	return 0;
}

static int cmd_groups(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
	pthread_mutex_lock(&dp_sw.ctl_lock);
	for (uint16_t g = 0; g < dp_sw.group_hwm; g++)
		if (dp_sw.groups[g].agg)
			rte_tel_data_add_array_u64(d,
				agg_group_config(dp_sw.groups[g].agg)->group_id);
	pthread_mutex_unlock(&dp_sw.ctl_lock);
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
	pthread_mutex_lock(&sw->ctl_lock);
	const struct dp_group *g = dp_group_find(sw, (uint32_t)id);
	if (g) {
		const struct agg_group_config *c = agg_group_config(g->agg);
		struct agg_group_stats sum;
		const struct agg_group_stats *s = &sum;
		struct dp_group_shard gs;
		struct rte_tel_data *dr;

		agg_group_stats_sum(g->agg, &sum);
		dp_group_shard_sum(g, &gs);

		rte_tel_data_start_dict(d);
		rte_tel_data_add_dict_u64(d, "id", c->group_id);
		rte_tel_data_add_dict_u64(d, "qpn", c->qpn);
		rte_tel_data_add_dict_u64(d, "members", c->nmembers);
		rte_tel_data_add_dict_u64(d, "window", c->window);
		rte_tel_data_add_dict_u64(d, "elems_per_pkt", c->elems_per_pkt);
		rte_tel_data_add_dict_u64(d, "reproducible", c->reproducible);
		rte_tel_data_add_dict_u64(d, "workers", g->shards);
		rte_tel_data_add_dict_u64(d, "contributions", s->contributions);
		rte_tel_data_add_dict_u64(d, "completions", s->completions);
		rte_tel_data_add_dict_u64(d, "duplicates", s->duplicates);
		rte_tel_data_add_dict_u64(d, "retransmits", s->retransmits);
		rte_tel_data_add_dict_u64(d, "preempted", s->preempted);
		rte_tel_data_add_dict_u64(d, "restarts", s->restarts);
		rte_tel_data_add_dict_u64(d, "waits", s->waits);
		rte_tel_data_add_dict_u64(d, "icrc_one_pass", s->one_pass);
		rte_tel_data_add_dict_u64(d, "results_sent", gs.results_sent);
		rte_tel_data_add_dict_u64(d, "results_no_data", gs.results_no_data);
		rte_tel_data_add_dict_u64(d, "results_no_route", gs.results_no_route);
		rte_tel_data_add_dict_u64(d, "cnp_sent", gs.cnp_sent);
		rte_tel_data_add_dict_u64(d, "cnp_rate_limited", gs.cnp_limited);
		if (c->parent.ip) {
			char ip[16];
			uint32_t a = c->parent.ip;
			snprintf(ip, sizeof(ip), "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff,
				 (a >> 8) & 0xff, a & 0xff);
			rte_tel_data_add_dict_string(d, "parent_ip", ip);
			rte_tel_data_add_dict_u64(d, "parent_qpn", c->parent.qpn);
			rte_tel_data_add_dict_u64(d, "upstream", s->upstream);
			rte_tel_data_add_dict_u64(d, "upstream_resends", s->upstream_resends);
			rte_tel_data_add_dict_u64(d, "upstream_sent", gs.up_sent);
			rte_tel_data_add_dict_u64(d, "upstream_no_data", gs.up_no_data);
			rte_tel_data_add_dict_u64(d, "upstream_no_route", gs.up_no_route);
			rte_tel_data_add_dict_u64(d, "parent_results", s->parent_results);
		}
		dr = rte_tel_data_alloc();
		if (!dr) {
			pthread_mutex_unlock(&sw->ctl_lock);
			return -ENOMEM;
		}
		rte_tel_data_start_dict(dr);
		add_drops(dr, NULL, s->drops, true);
		rte_tel_data_add_dict_container(d, "drops", dr, 0);
	}
	pthread_mutex_unlock(&sw->ctl_lock);
	return g ? 0 : -ENOENT;
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
	rte_telemetry_register_cmd("/inca/qos", cmd_qos,
		"Per traffic class queue, PFC, ECN and watchdog counters of a port. "
		"Parameter: port index.");
	rte_telemetry_register_cmd("/inca/pfc_watchdog", cmd_watchdog,
		"PFC watchdog settings and its last events. No parameters.");
	return 0;
}

void dp_stats_line(struct dp_switch *sw, double interval_s)
{
	static struct dp_totals prev;
	struct dp_totals t;
	uint64_t rx = 0, tx = 0, prx = 0, ptx = 0;

	dp_totals_sum(sw, &t);
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
	       (unsigned long long)dp_totals_drops(&t),
	       100.0 * (double)(t.busy_tsc - prev.busy_tsc) /
		       ((double)sw->tsc_hz * interval_s * sw->nworkers));
	fflush(stdout);
	prev = t;
}
