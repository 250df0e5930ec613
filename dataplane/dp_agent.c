/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch's agent for inca-manager, in its own thread: every heartbeat
 * it reports its address, the group-set version it has applied and its
 * counters, and gets back the version it should have and the groups that
 * make it up. It then deletes the groups the manager no longer lists and
 * adds the new ones through the same calls the static config uses (under
 * sw->ctl_lock), while the workers keep forwarding and aggregating every
 * other group. The heartbeat is a long-poll ("wait_ms": the period): the
 * manager answers as soon as the version changes, and the agent applies it
 * and heartbeats again at once to report it. If the manager is unreachable
 * the switch keeps its groups and says so (rate-limited).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>
#include <rte_cycles.h>

#include "inca_http.h"

#include "dp_priv.h"

struct dp_agent {
	char url[512];
	char name[64];
	char token[256];
	uint32_t applied;
	char error[256];
	uint64_t ok, failed;
	bool registered, complained;
	/* every parent its groups have had: reported while the port towards
	 * one is down, held or not (a job moved off the link frees the
	 * group, and the link must not look mended for it) */
	uint32_t parents[64];
	unsigned nparents;
	/* the thread */
	struct dp_switch *sw;
	unsigned period_ms;
	pthread_t thread;
	bool running;
	volatile bool stop;
};

struct dp_agent *dp_agent_create(const char *manager, const char *name, const char *token)
{
	struct dp_agent *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(a->url, sizeof(a->url), "%s/v1/switches/%s/heartbeat", manager, name);
	snprintf(a->name, sizeof(a->name), "%s", name);
	snprintf(a->token, sizeof(a->token), "%s", token);
	return a;
}

void dp_agent_destroy(struct dp_agent *a)
{
	if (!a)
		return;
	if (a->running) {
		a->stop = true;
		pthread_join(a->thread, NULL);
	}
	curl_global_cleanup();
	free(a);
}

static json_t *counters(struct dp_switch *sw, struct dp_agent *a)
{
	uint64_t rx = 0, tx = 0, drops = 0;
	json_t *o = json_object();

	for (unsigned i = 0; i < sw->nworkers; i++) {
		const struct dp_worker *w = sw->workers[i];
		for (uint16_t p = 0; p < sw->nports; p++) {
			rx += w->port[p].rx_pkts;
			tx += w->port[p].tx_pkts;
		}
		for (int d = 0; d < DP_DROP_COUNT; d++)
			drops += w->drops[d];
	}
	uint64_t contributions = sw->retired.contributions, completions = sw->retired.completions;
	json_t *ids = json_array();   /* the groups it holds: what the manager reconciles */
	/* ports whose link is down, and the parents behind them: the
	 * manager takes the link from this switch to such a parent out of
	 * its trees (docs/manager.md, "Plans") */
	bool up[DP_MAX_PORTS];
	json_t *down = json_array(), *unreachable = json_array();
	for (uint16_t p = 0; p < sw->nports; p++)
		if (!(up[p] = dp_port_link_up(sw, p)))
			json_array_append_new(down, json_integer(p));
	pthread_mutex_lock(&sw->ctl_lock);
	for (uint16_t g = 0; g < sw->group_hwm; g++)
		if (sw->groups[g].agg) {
			const struct agg_group_config *c = agg_group_config(sw->groups[g].agg);
			struct agg_group_stats sum;
			const struct agg_group_stats *s = &sum;
			agg_group_stats_sum(sw->groups[g].agg, &sum);
			contributions += s->contributions;
			completions += s->completions;
			json_array_append_new(ids, json_integer(c->group_id));
			bool known = !c->parent.ip;
			for (unsigned k = 0; k < a->nparents && !known; k++)
				known = a->parents[k] == c->parent.ip;
			if (!known && a->nparents < RTE_DIM(a->parents))
				a->parents[a->nparents++] = c->parent.ip;
		}
	json_object_set_new(o, "groups", json_integer(sw->ngroups));
	json_object_set_new(o, "group_ids", ids);
	pthread_mutex_unlock(&sw->ctl_lock);
	for (unsigned k = 0; k < a->nparents; k++) {
		struct rte_ether_addr mac;
		int port = dp_neigh_lookup(sw, dp_next_hop(sw->cfg, a->parents[k]), &mac);
		if (port < 0 || up[port])
			continue;
		char ip[16];
		uint32_t v = a->parents[k];
		snprintf(ip, sizeof(ip), "%u.%u.%u.%u", v >> 24, (v >> 16) & 255, (v >> 8) & 255,
			 v & 255);
		json_array_append_new(unreachable, json_string(ip));
	}
	json_object_set_new(o, "ports_down", down);
	json_object_set_new(o, "unreachable", unreachable);
	json_object_set_new(o, "rx_packets", json_integer((json_int_t)rx));
	json_object_set_new(o, "tx_packets", json_integer((json_int_t)tx));
	json_object_set_new(o, "switch_drops", json_integer((json_int_t)drops));
	json_object_set_new(o, "contributions", json_integer((json_int_t)contributions));
	json_object_set_new(o, "completions", json_integer((json_int_t)completions));
	json_object_set_new(o, "uptime_s",
		json_integer((json_int_t)((rte_rdtsc() - sw->start_tsc) / sw->tsc_hz)));
	return o;
}

/* Make the switch's groups the manager's list. Returns 0 when all of it is
 * applied. */
static int reconcile(struct dp_switch *sw, struct dp_agent *a, json_t *groups)
{
	uint32_t have[DP_MAX_GROUPS];
	unsigned nhave = 0;
	size_t i;
	json_t *g;
	int rc = 0;

	a->error[0] = 0;
	pthread_mutex_lock(&sw->ctl_lock);
	for (uint16_t k = 0; k < sw->group_hwm; k++)
		if (sw->groups[k].agg)
			have[nhave++] = agg_group_config(sw->groups[k].agg)->group_id;
	pthread_mutex_unlock(&sw->ctl_lock);
	for (unsigned k = 0; k < nhave; k++) {
		bool keep = false;
		json_array_foreach(groups, i, g)
			keep |= json_integer_value(json_object_get(g, "id")) == have[k];
		if (!keep)
			dp_group_del(sw, have[k]);
	}
	json_array_foreach(groups, i, g) {
		uint32_t id = (uint32_t)json_integer_value(json_object_get(g, "id"));
		struct dp_group_cfg gc;
		char err[256], origin[96];
		bool exists;

		pthread_mutex_lock(&sw->ctl_lock);
		exists = dp_group_find(sw, id) != NULL;
		pthread_mutex_unlock(&sw->ctl_lock);
		if (exists)
			continue;
		snprintf(origin, sizeof(origin), "manager groups[%zu]", i);
		if (dp_config_parse_group(g, origin, &gc, err, sizeof(err)) ||
		    dp_group_add(sw, &gc, err, sizeof(err))) {
			DP_LOG(ERR, "agent: %s\n", err);
			snprintf(a->error, sizeof(a->error), "%s", err);
			rc = -1;
		}
		dp_group_cfg_free(&gc);
	}
	return rc;
}

/* One heartbeat, held by the manager up to wait_ms. Returns 1 when a new
 * version was applied (to be reported at once), 0 when nothing changed,
 * -1 when the manager could not be reached or the version not applied. */
static int heartbeat(struct dp_switch *sw, struct dp_agent *a, unsigned wait_ms)
{
	char ip[16], err[512];
	json_t *req, *resp = NULL;
	char *body;
	int status;
	uint32_t v = sw->cfg->switch_ip;

	snprintf(ip, sizeof(ip), "%u.%u.%u.%u", v >> 24, (v >> 16) & 255, (v >> 8) & 255, v & 255);
	req = json_pack("{s:s, s:s, s:I, s:s, s:o, s:i}", "name", a->name, "ip", ip,
			"applied", (json_int_t)a->applied, "error", a->error, "counters",
			counters(sw, a), "wait_ms", (int)wait_ms);
	body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	status = inca_http("POST", a->url, a->token, body, 1000 + (long)wait_ms, &resp, NULL, err,
			   sizeof(err));
	free(body);
	if (status != 200) {
		a->failed++;
		if (!a->complained) {
			DP_LOG(WARNING, "agent: manager: %s; keeping the %u groups the switch has\n",
			       err, sw->ngroups);
			a->complained = true;
		}
		json_decref(resp);
		return -1;
	}
	a->ok++;
	if (a->complained || !a->registered)
		DP_LOG(INFO, "agent: %s with manager as '%s'\n",
		       a->registered ? "back in touch" : "registered", a->name);
	a->complained = false;
	a->registered = true;
	json_t *ver = json_object_get(resp, "version");
	if (!json_is_integer(ver) || !json_is_array(json_object_get(resp, "groups"))) {
		DP_LOG(ERR, "agent: the manager's answer has no version and groups\n");
		json_decref(resp);
		return -1;
	}
	int rc = 0;
	if ((uint32_t)json_integer_value(ver) != a->applied) {
		rc = -1;
		if (!reconcile(sw, a, json_object_get(resp, "groups"))) {
			a->applied = (uint32_t)json_integer_value(ver);
			rc = 1;
		}
		DP_LOG(INFO, "agent: group set version %u applied: %u groups\n", a->applied,
		       sw->ngroups);
	}
	json_decref(resp);
	return rc;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Heartbeat at least every period; at once after applying a new version.
 * A manager that does not hold heartbeats answers at once: then the rest
 * of the period is slept here. */
static void *agent_main(void *arg)
{
	struct dp_agent *a = arg;

	while (!a->stop && !a->sw->quit) {
		double t0 = now_ms();
		if (heartbeat(a->sw, a, a->period_ms) == 1)
			continue;
		while (!a->stop && !a->sw->quit && now_ms() - t0 < a->period_ms) {
			double left = a->period_ms - (now_ms() - t0);
			struct timespec ts = { 0, (long)((left < 10 ? left : 10) * 1e6) };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int dp_agent_start(struct dp_agent *a, struct dp_switch *sw, unsigned period_ms)
{
	int rc;

	a->sw = sw;
	a->period_ms = period_ms;
	rc = pthread_create(&a->thread, NULL, agent_main, a);
	if (rc)
		return -rc;
	a->running = true;
	return 0;
}
