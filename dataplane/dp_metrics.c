/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch's counters for Prometheus: the text (dp_metrics_text, from
 * the same sums as the /inca/ telemetry commands) and GET /metrics on the
 * management address given by --metrics ADDR:PORT, in its own thread
 * (libmicrohttpd's), never a worker's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "dp_priv.h"

/* one metric family: # HELP and # TYPE, then its samples */
static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The same counters as the /inca/ telemetry commands, read the same way,
 * in the Prometheus text format (version 0.0.4). malloc'ed, or NULL. */
char *dp_metrics_text(struct dp_switch *sw)
{
	struct dp_totals *t = malloc(sizeof(*t));
	char *out = NULL, ip[16];
	size_t len = 0;
	uint32_t a = sw->cfg->switch_ip;
	FILE *f;

	if (!t)
		return NULL;
	f = open_memstream(&out, &len);
	if (!f) {
		free(t);
		return NULL;
	}
	dp_totals_sum(sw, t);
	snprintf(ip, sizeof(ip), "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff,
		 a & 0xff);
	family(f, "inca_switch_info", "gauge", "The switch's aggregation address and shape.");
	fprintf(f, "inca_switch_info{switch_ip=\"%s\",ports=\"%u\",workers=\"%u\"} 1\n", ip,
		sw->nports, sw->nworkers);
	family(f, "inca_switch_uptime_seconds", "counter", "Seconds since the switch started.");
	fprintf(f, "inca_switch_uptime_seconds %llu\n",
		(unsigned long long)((rte_rdtsc() - sw->start_tsc) / sw->tsc_hz));
	family(f, "inca_switch_groups", "gauge", "Aggregation groups installed.");
	fprintf(f, "inca_switch_groups %u\n", sw->ngroups);
	family(f, "inca_switch_l2_entries", "gauge", "Learnt MAC addresses.");
	fprintf(f, "inca_switch_l2_entries %u\n", (unsigned)dp_l2_count(sw->l2));

#define PORT_COUNTER(metric, help, field) \
	family(f, metric, "counter", help); \
	for (uint16_t p = 0; p < sw->nports; p++) \
		fprintf(f, metric "{port=\"%u\"} %llu\n", p, (unsigned long long)t->port[p].field);
	PORT_COUNTER("inca_port_rx_packets_total", "Frames received on the port.", rx_pkts)
	PORT_COUNTER("inca_port_rx_bytes_total", "Bytes received on the port.", rx_bytes)
	PORT_COUNTER("inca_port_tx_packets_total", "Frames sent on the port.", tx_pkts)
	PORT_COUNTER("inca_port_tx_bytes_total", "Bytes sent on the port.", tx_bytes)
	PORT_COUNTER("inca_port_egress_drops_total",
		     "Frames the port's transmit path refused (NIC ring full).", egress_drops)
#undef PORT_COUNTER

#define TC_COUNTER(metric, help, expr) \
	family(f, metric, "counter", help); \
	for (uint16_t p = 0; p < sw->nports; p++) \
		for (unsigned tc = 0; tc < DP_NUM_TC; tc++) { \
			const struct dp_tc_stats *s = &t->tc[p][tc]; \
			const struct dp_pq *pq = &sw->qos->pq[p][tc]; \
			(void)s; \
			(void)pq; \
			fprintf(f, metric "{port=\"%u\",tc=\"%u\"} %llu\n", p, tc, \
				(unsigned long long)(expr)); \
		}
	TC_COUNTER("inca_tc_tx_packets_total", "Frames sent from the class's queue.", s->tx_pkts)
	TC_COUNTER("inca_tc_tx_bytes_total", "Bytes sent from the class's queue.", s->tx_bytes)
	TC_COUNTER("inca_tc_ecn_marked_total", "Frames marked CE at dequeue.", s->ecn_marked)
	TC_COUNTER("inca_tc_pfc_xoff_sent_total", "PFC XOFF frames sent for the class.",
		   pq->xoff_tx)
	TC_COUNTER("inca_tc_pfc_xon_sent_total", "PFC XON frames sent for the class.", pq->xon_tx)
	TC_COUNTER("inca_tc_pfc_xoff_received_total", "PFC pause frames received for the class.",
		   pq->pfc_rx)
	TC_COUNTER("inca_tc_pfc_xon_received_total", "PFC resume frames received for the class.",
		   pq->pfc_rx_xon)
	TC_COUNTER("inca_tc_paused_microseconds_total",
		   "Time the class's egress was paused by the peer.", dp_tsc_us(sw, pq->paused_tsc))
	TC_COUNTER("inca_tc_pfc_watchdog_storms_total",
		   "PFC storms the watchdog detected on the class.", pq->wd_storms)
	TC_COUNTER("inca_tc_pfc_watchdog_restores_total",
		   "Classes the watchdog restored after a storm.", pq->wd_restores)
#undef TC_COUNTER
	family(f, "inca_tc_drops_total", "counter",
	       "Frames dropped by the class's queue, by reason.");
	for (uint16_t p = 0; p < sw->nports; p++)
		for (unsigned tc = 0; tc < DP_NUM_TC; tc++)
			for (int r = 1; r < DP_QDROP_END; r++)
				fprintf(f, "inca_tc_drops_total{port=\"%u\",tc=\"%u\",reason=\"%s\"} "
					"%llu\n", p, tc, dp_qdrop_names[r],
					(unsigned long long)t->tc[p][tc].drops[r]);
	family(f, "inca_tc_queued_bytes", "gauge", "Bytes waiting in the class's queue now.");
	for (uint16_t p = 0; p < sw->nports; p++)
		for (unsigned tc = 0; tc < DP_NUM_TC; tc++) {
			uint64_t qb = 0;
			for (unsigned i = 0; i < sw->nworkers; i++)
				qb += __atomic_load_n(&sw->workers[i]->egress[p].q[tc].bytes,
						      __ATOMIC_RELAXED);
			fprintf(f, "inca_tc_queued_bytes{port=\"%u\",tc=\"%u\"} %llu\n", p, tc,
				(unsigned long long)qb);
		}
	family(f, "inca_pfc_malformed_total", "counter",
	       "MAC control frames that were not valid PFC, by reason.");
	for (uint16_t p = 0; p < sw->nports; p++)
		for (int e = 1; e < AGG_PFC_E__COUNT; e++)
			fprintf(f, "inca_pfc_malformed_total{port=\"%u\",reason=\"%s\"} %llu\n", p,
				agg_pfc_error_name(-e),
				(unsigned long long)t->port[p].pfc_malformed[e]);

	family(f, "inca_drops_total", "counter",
	       "Frames the switch dropped and counted, by reason (as /inca/drops).");
	for (int d = 0; d < DP_DROP_COUNT; d++)
		fprintf(f, "inca_drops_total{reason=\"%s\"} %llu\n", dp_drop_names[d],
			(unsigned long long)t->drops[d]);
	for (int d = 1; d < AGG_E__COUNT; d++)
		fprintf(f, "inca_drops_total{reason=\"%s\"} %llu\n", agg_errname(-d),
			(unsigned long long)t->agg_drops[d]);
	family(f, "inca_cnp_sent_total", "counter", "Congestion notifications sent.");
	fprintf(f, "inca_cnp_sent_total %llu\n", (unsigned long long)t->cnp_sent);
	family(f, "inca_cnp_rate_limited_total", "counter",
	       "Congestion notifications not sent: one per QP per interval.");
	fprintf(f, "inca_cnp_rate_limited_total %llu\n", (unsigned long long)t->cnp_limited);
	family(f, "inca_pfc_watchdog_events_total", "counter",
	       "PFC watchdog storms and restorations.");
	fprintf(f, "inca_pfc_watchdog_events_total %llu\n", (unsigned long long)sw->qos->nevents);

	/* per group, as /inca/group,ID */
	static const char *const gnames[][2] = {
		{ "inca_group_contributions_total", "Contributions accepted." },
		{ "inca_group_completions_total", "Slots completed (every member's contribution in)." },
		{ "inca_group_results_sent_total", "Result frames sent to members." },
		{ "inca_group_duplicates_total", "Contributions already counted (retransmissions)." },
		{ "inca_group_retransmits_total", "Retained results sent again." },
		{ "inca_group_restarts_total", "Jobs that started again on the group." },
		{ "inca_group_waits_total",
		  "WAITs sent: a member's retransmission held while the slot waits for others." },
	};
	pthread_mutex_lock(&sw->ctl_lock);
	for (unsigned k = 0; k < RTE_DIM(gnames); k++) {
		family(f, gnames[k][0], "counter", gnames[k][1]);
		for (uint16_t g = 0; g < sw->group_hwm; g++) {
			const struct dp_group *grp = &sw->groups[g];
			struct agg_group_stats s;
			struct dp_group_shard gs;
			uint64_t v;

			if (!grp->agg)
				continue;
			agg_group_stats_sum(grp->agg, &s);
			dp_group_shard_sum(grp, &gs);
			v = k == 0 ? s.contributions : k == 1 ? s.completions :
			    k == 2 ? gs.results_sent : k == 3 ? s.duplicates :
			    k == 4 ? s.retransmits : k == 5 ? s.restarts : s.waits;
			fprintf(f, "%s{group=\"%u\"} %llu\n", gnames[k][0],
				agg_group_config(grp->agg)->group_id, (unsigned long long)v);
		}
	}
	family(f, "inca_group_slots", "gauge", "Window slots the group holds.");
	for (uint16_t g = 0; g < sw->group_hwm; g++)
		if (sw->groups[g].agg) {
			const struct agg_group_config *c = agg_group_config(sw->groups[g].agg);
			fprintf(f, "inca_group_slots{group=\"%u\"} %u\n", c->group_id, c->window);
		}
	family(f, "inca_group_members", "gauge", "Members of the group.");
	for (uint16_t g = 0; g < sw->group_hwm; g++)
		if (sw->groups[g].agg) {
			const struct agg_group_config *c = agg_group_config(sw->groups[g].agg);
			fprintf(f, "inca_group_members{group=\"%u\"} %u\n", c->group_id, c->nmembers);
		}
	pthread_mutex_unlock(&sw->ctl_lock);
	free(t);
	if (fclose(f)) {
		free(out);
		return NULL;
	}
	return out;
}

struct dp_metrics {
	struct MHD_Daemon *d;
	struct dp_switch *sw;
};

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *ctype,
			      char *body, bool owned)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(strlen(body), body,
					    owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		if (owned)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", ctype);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "GET");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	struct dp_metrics *m = cls;
	char *text;

	(void)version;
	(void)upload;
	if (!*con_cls) {             /* headers only so far */
		*con_cls = m;
		return MHD_YES;
	}
	if (*upload_size) {          /* no body is wanted: drop it */
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
			      "only GET /metrics is served here\n", false);
	if (strcmp(url, "/metrics"))
		return answer(c, MHD_HTTP_NOT_FOUND, "text/plain",
			      "not found: the counters are at /metrics\n", false);
	text = dp_metrics_text(m->sw);
	if (!text)
		return answer(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain",
			      "out of memory\n", false);
	return answer(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, true);
}

struct dp_metrics *dp_metrics_start(struct dp_switch *sw, const char *listen_at, char *err,
				    size_t errlen)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	const char *colon = strrchr(listen_at, ':');
	struct dp_metrics *m;
	char host[64], *end;
	long port = colon ? strtol(colon + 1, &end, 10) : -1;

	if (!colon || *end || port < 1 || port > 65535 ||
	    (size_t)(colon - listen_at) >= sizeof(host)) {
		snprintf(err, errlen, "expected ADDR:PORT such as 0.0.0.0:9473, got '%s'",
			 listen_at);
		return NULL;
	}
	memcpy(host, listen_at, (size_t)(colon - listen_at));
	host[colon - listen_at] = 0;
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		snprintf(err, errlen, "'%s' is not an IPv4 address", host);
		return NULL;
	}
	sa.sin_port = htons((uint16_t)port);
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	m->sw = sw;
	m->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
				NULL, handler, m, MHD_OPTION_SOCK_ADDR, &sa,
				MHD_OPTION_CONNECTION_TIMEOUT, 10u,
				MHD_OPTION_CONNECTION_LIMIT, 16u, MHD_OPTION_END);
	if (!m->d) {
		snprintf(err, errlen, "cannot listen on %s: %s", listen_at, strerror(errno));
		free(m);
		return NULL;
	}
	return m;
}

void dp_metrics_stop(struct dp_metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d);
	free(m);
}
