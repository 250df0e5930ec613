/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fabric's routes: a switch's heartbeat (answered with the groups it
 * must hold; held until its desired version moves on from what it
 * applied), the switches, every switch's groups, the topology view's one
 * answer, the failure log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

int mgr_api_heartbeat(struct mgr_req *q, const struct mgr_route_args *args)
{
	const char *name = args->name;
	struct mgr *m = q->m;
	int s = mgr_topo_switch_by_name(&m->topo, name);
	struct mgr_switch_state *st;
	uint32_t applied = 0, wait_ms = 0;
	struct inca_json in;
	const char *e;
	bool dirty = false;

	if (s < 0)
		return mgr_error(q, 404, "switch '%s' is not in the topology", name);
	if (q->tenant >= 0)
		return mgr_error(q, 403, "heartbeats need the admin token");
	inca_json_init(&in, NULL);
	if (!json_is_object(q->body) ||
	    inca_json_opt_u32(&in, q->body, "applied", 0, UINT32_MAX - 1, &applied))
		return mgr_error(q, 400, "body: expected {\"applied\": VERSION, ...}");
	if (inca_json_opt_u32(&in, q->body, "wait_ms", 0, MGR_WAIT_MS_MAX, &wait_ms))
		return mgr_error(q, 400, "%s", in.msg);
	st = &m->sw[s];
	if (json_object_get(q->body, "ip")) {
		uint32_t ip;
		char a[16], b[16];
		if (mgr_parse_ip(json_string_value(json_object_get(q->body, "ip")), &ip))
			return mgr_error(q, 400, "ip: expected the switch's IPv4 address");
		if (ip != m->topo.switches[s].ip) {
			mgr_ip_str(ip, a);
			mgr_ip_str(m->topo.switches[s].ip, b);
			return mgr_error(q, 409, "switch %s reports address %s, the topology says %s",
				     name, a, b);
		}
	}
	if (!st->up || !st->ever) {
		m->capacity_gen++;          /* jobs on the ring may have a tree again */
		mgr_log("switch %s %s", name,
			st->ever ? "is back" : "registered");
		if (!st->up)
			mgr_failure(m, name, "switch back: heartbeats again");
	}
	st->up = true;
	st->ever = true;
	st->last_seen = m->now();
	st->busy_at_seen = m->busy_s;
	st->applied = applied;
	if (applied > st->version) {
		/* ahead of this manager (its state was lost or restored from older):
		 * move past, so the agent takes this manager's groups */
		mgr_log("switch %s applied version %u, this manager is at %u: it takes the "
			"manager's %u", name, applied, st->version, applied + 1);
		st->version = applied + 1;
		dirty = true;     /* saved below */
	}
	e = json_string_value(json_object_get(q->body, "error"));
	snprintf(st->last_error, sizeof(st->last_error), "%s", e ? e : "");
	json_decref(st->counters);
	st->counters = json_incref(json_object_get(q->body, "counters"));
	/* its links up the tree: "unreachable" lists the parents behind a
	 * port whose link is down */
	json_t *un = json_object_get(st->counters, "unreachable");
	for (int k = 0; k < m->topo.nup[s]; k++) {
		int u = m->topo.up[s][k];
		bool down = false;
		size_t i;
		json_t *v;
		uint32_t ip;
		json_array_foreach(un, i, v)
			down |= json_is_string(v) && !mgr_parse_ip(json_string_value(v), &ip) &&
				ip == m->topo.switches[u].ip;
		if (down != (bool)m->link_down[(size_t)s * (size_t)m->topo.nswitches + (size_t)u]) {
			mgr_link_changed(m, s, u, down);
			dirty = true;
		}
	}
	for (struct mgr_job *j = m->jobs; j; j = j->next) {
		bool before = j->state == MGR_JOB_READY;
		mgr_job_check_ready(m, j);
		dirty |= !before && j->state == MGR_JOB_READY;
	}
	if (dirty)
		mgr_save(m);
	/* long-poll: a live switch is never held past half its dead time, so
	 * liveness stays what the heartbeats' arrival says */
	if (wait_ms > m->dead_after_s * 500.0)
		wait_ms = (uint32_t)(m->dead_after_s * 500.0);
	if (mgr_hold(q, NULL, s, applied, -1, (long)wait_ms))
		return MGR_PARKED;
	return mgr_reply(q, 200, json_pack("{s:i, s:o}", "version", (int)st->version, "groups",
				       mgr_switch_groups_json(m, s)));
}

int mgr_api_switches(struct mgr_req *q, const struct mgr_route_args *a)
{
	json_t *arr = json_array();

	(void)a;
	for (int s = 0; s < q->m->topo.nswitches; s++)
		json_array_append_new(arr, mgr_switch_json(q->m, s, true));
	return mgr_reply(q, 200, arr);
}

/* Everything the topology view draws, in one answer: switches with state
 * and load, hosts, links, the jobs the token may see with their trees, the
 * recent failures. */
int mgr_api_topology(struct mgr_req *q, const struct mgr_route_args *a)
{
	struct mgr *m = q->m;
	json_t *sws = json_array(), *hosts = json_array(), *links = json_array();
	json_t *jobs = json_array();

	(void)a;
	for (int s = 0; s < m->topo.nswitches; s++)
		json_array_append_new(sws, mgr_switch_json(m, s, false));
	for (int h = 0; h < m->topo.nhosts; h++)
		json_array_append_new(hosts, json_pack("{s:s, s:o, s:s}", "name",
			m->topo.hosts[h].name, "ip", mgr_ip_json(m->topo.hosts[h].ip), "leaf",
			m->topo.switches[m->topo.hosts[h].leaf].name));
	for (int l = 0; l < m->topo.nswitches; l++)
		for (int s = 0; s < m->topo.nswitches; s++)
			if (mgr_linked(&m->topo, l, s))
				json_array_append_new(links, json_pack("{s:s, s:s}",
					mgr_role_name(m->topo.switches[l].role), m->topo.switches[l].name,
					mgr_role_name(m->topo.switches[s].role), m->topo.switches[s].name));
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		if (mgr_may_touch(q, j)) {
			/* each rail is listed with its own tree already */
			json_t *o = mgr_job_json(m, j, true);
			json_object_del(o, "rail_jobs");
			json_array_append_new(jobs, o);
		}
	return mgr_reply(q, 200, json_pack("{s:f, s:o, s:o, s:o, s:o, s:o}", "time", m->now(),
		"switches", sws, "hosts", hosts, "links", links, "jobs", jobs,
		"failures", mgr_failures_json(m, 20)));
}

int mgr_api_groups(struct mgr_req *q, const struct mgr_route_args *a)
{
	json_t *o = json_object();

	(void)a;
	for (int s = 0; s < q->m->topo.nswitches; s++)
		json_object_set_new(o, q->m->topo.switches[s].name, mgr_switch_groups_json(q->m, s));
	return mgr_reply(q, 200, o);
}

int mgr_api_failures(struct mgr_req *q, const struct mgr_route_args *a)
{
	(void)a;
	return mgr_reply(q, 200, mgr_failures_json(q->m, MGR_FAILURES_KEPT));
}
