/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the API shows, as JSON: a job (its tree in detail), a switch with
 * its load, the groups a switch must hold (in its config-file format),
 * what a rank needs (libinca's group description), the failure log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

json_t *mgr_ip_json(uint32_t ip)
{
	char b[16];
	mgr_ip_str(ip, b);
	return json_string(b);
}

/* The job's ranks under leaf sw, ascending: a leaf member's own rank, or
 * what a leaf stands for in the spine's group (docs/protocol.md, section
 * 4, "Ranks in a tree"; in general not consecutive). */
static json_t *ranks_under(const struct mgr_job *j, int sw)
{
	json_t *a = json_array();

	for (int r = 0; r < j->size; r++)
		if (j->tree.leaf_of_rank[r] == sw)
			json_array_append_new(a, json_integer(r));
	return a;
}

/* The groups a switch must hold, in the switch's config-file format, with
 * the ranks under every member (what the rooted collectives need). */
json_t *mgr_switch_groups_json(struct mgr *m, int s)
{
	json_t *arr = json_array();

	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int g = 0; g < j->ngroups; g++) {
			const struct mgr_group *gr = &j->groups[g];
			json_t *mem, *o;

			if (gr->sw != s)
				continue;
			mem = json_array();
			if (g == 0 && j->tree.nleaves > 0) {
				for (int i = 0; i < j->tree.nleaves; i++)
					json_array_append_new(mem, json_pack("{s:o, s:i, s:i, s:o}",
						"ip", mgr_ip_json(m->topo.switches[j->tree.leaves[i]].ip),
						"qpn", (int)j->groups[1 + i].qpn,
						"fanin", j->tree.leaf_fanin[i],
						"ranks", ranks_under(j, j->tree.leaves[i])));
			} else {
				for (int r = 0; r < j->size; r++)
					if (j->tree.leaf_of_rank[r] == gr->sw)
						json_array_append_new(mem, json_pack("{s:o, s:i, s:[i]}",
							"ip", mgr_ip_json(j->ranks[r].ip),
							"qpn", (int)j->ranks[r].qpn, "ranks", r));
			}
			o = json_pack("{s:i, s:i, s:I, s:i, s:i, s:o}", "id", (int)j->group_id,
				      "qpn", (int)gr->qpn, "qkey", (json_int_t)gr->qkey,
				      "window", (int)j->window, "elems_per_pkt",
				      (int)j->elems_per_pkt, "members", mem);
			if (gr->parent >= 0) {
				const struct mgr_group *p = &j->groups[gr->parent];
				json_object_set_new(o, "parent", json_pack("{s:o, s:i, s:I, s:i}",
					"ip", mgr_ip_json(m->topo.switches[p->sw].ip), "qpn", (int)p->qpn,
					"qkey", (json_int_t)p->qkey, "rank", gr->rank_in_parent));
			}
			json_array_append_new(arr, o);
		}
	return arr;
}

/* What rank r needs: libinca's group description. */
json_t *mgr_rank_json(struct mgr *m, struct mgr_job *j, int r)
{
	int leaf = j->tree.leaf_of_rank[r], g = 0;
	json_t *mem = json_array();

	for (int i = 0; i < j->ngroups; i++)
		if (j->groups[i].sw == leaf)
			g = i;
	for (int k = 0; k < j->size; k++) {
		json_t *o = json_pack("{s:o, s:i}", "ip", mgr_ip_json(j->ranks[k].ip),
				      "qpn", (int)j->ranks[k].qpn);
		if (j->ranks[k].ring_ip)
			json_object_set_new(o, "ring_ip", mgr_ip_json(j->ranks[k].ring_ip));
		if (j->ranks[k].ring_port)
			json_object_set_new(o, "ring_port", json_integer(j->ranks[k].ring_port));
		json_array_append_new(mem, o);
	}
	return json_pack("{s:o, s:i, s:i, s:I, s:i, s:i, s:i, s:i, s:o}",
			 "switch", mgr_ip_json(m->topo.switches[leaf].ip), "group", (int)j->group_id,
			 "qpn", (int)j->groups[g].qpn, "qkey", (json_int_t)j->groups[g].qkey,
			 "window", (int)j->window, "elems_per_pkt", (int)j->elems_per_pkt,
			 "mtu", (int)j->mtu, "member_index", j->tree.index_in_leaf[r],
			 "members", mem);
}

json_t *mgr_job_json(struct mgr *m, struct mgr_job *j, bool detail)
{
	int registered = 0;
	json_t *o;

	for (int r = 0; r < j->size; r++)
		registered += j->ranks[r].registered;
	o = json_pack("{s:s, s:s, s:i, s:i, s:s, s:s, s:i, s:i}", "id", j->id,
		      "tenant", m->topo.tenants[j->tenant].name, "size", j->size,
		      "registered", registered, "state", mgr_job_state_name(j->state),
		      "reason", j->reason, "group", (int)j->group_id, "window", (int)j->window);
	if (j->ngroups) {
		json_t *sws = json_array();
		for (int g = 0; g < j->ngroups; g++)
			json_array_append_new(sws, json_string(m->topo.switches[j->groups[g].sw].name));
		json_object_set_new(o, "switches", sws);
	}
	if (j->ready_at && j->registered_at)
		json_object_set_new(o, "setup_ms", json_real((j->ready_at - j->registered_at) * 1000.0));
	if (detail && j->ngroups) {
		json_t *tree = json_pack("{s:s, s:i, s:I}", "switch",
					 m->topo.switches[j->tree.root].name,
					 "qpn", (int)j->groups[0].qpn, "qkey",
					 (json_int_t)j->groups[0].qkey);
		json_t *children = json_array();
		for (int i = 0; i < j->tree.nleaves; i++) {
			json_t *ranks = json_array();
			for (int r = 0; r < j->size; r++)
				if (j->tree.leaf_of_rank[r] == j->tree.leaves[i])
					json_array_append_new(ranks, json_pack("{s:i, s:o, s:i}",
						"rank", r, "ip", mgr_ip_json(j->ranks[r].ip), "qpn",
						(int)j->ranks[r].qpn));
			json_array_append_new(children, json_pack("{s:s, s:i, s:i, s:o}",
				"switch", m->topo.switches[j->tree.leaves[i]].name,
				"qpn", (int)j->groups[1 + i].qpn, "fanin", j->tree.leaf_fanin[i],
				"ranks", ranks));
		}
		if (!j->tree.nleaves) {
			json_t *ranks = json_array();
			for (int r = 0; r < j->size; r++)
				json_array_append_new(ranks, json_pack("{s:i, s:o, s:i}", "rank", r,
					"ip", mgr_ip_json(j->ranks[r].ip), "qpn", (int)j->ranks[r].qpn));
			json_object_set_new(tree, "ranks", ranks);
		} else {
			json_object_set_new(tree, "children", children);
			children = NULL;
		}
		json_decref(children);
		json_object_set_new(o, "tree", tree);
	}
	return o;
}

/* One switch as /v1/switches and /v1/topology show it. */
json_t *mgr_switch_json(struct mgr *m, int s, bool counters)
{
	const struct mgr_switch *sw = &m->topo.switches[s];
	struct mgr_switch_state *st = &m->sw[s];
	uint32_t slots, groups;
	json_t *o;

	mgr_switch_usage(m, s, &slots, &groups);
	o = json_pack("{s:s, s:s, s:o, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:s}",
		"name", sw->name, "role", sw->role == MGR_LEAF ? "leaf" : "spine",
		"ip", mgr_ip_json(sw->ip),
		"state", !st->ever ? (st->up ? "unknown" : "down") : st->up ? "up" : "down",
		"groups", (int)groups, "max_groups", (int)sw->max_groups,
		"slots", (int)slots, "max_slots", (int)sw->max_slots,
		"version", (int)st->version, "applied", (int)st->applied,
		"error", st->last_error);
	if (st->last_seen)
		json_object_set_new(o, "last_heartbeat_ms",
				    json_integer((json_int_t)((m->now() - st->last_seen) * 1000)));
	if (counters && st->counters)
		json_object_set(o, "counters", st->counters);
	return o;
}

/* The last n failures, oldest first. */
json_t *mgr_failures_json(struct mgr *m, unsigned n)
{
	json_t *arr = json_array();
	unsigned kept = m->nfailures < 256 ? m->nfailures : 256;
	unsigned first = m->nfailures - (n < kept ? n : kept);

	for (unsigned i = first; i < m->nfailures; i++) {
		struct mgr_failure *f = &m->failures[i % 256];
		json_array_append_new(arr, json_pack("{s:f, s:s, s:s}", "time", f->t,
						     "what", f->what, "reason", f->reason));
	}
	return arr;
}
