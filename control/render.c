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

/* The job's ranks under tree node `node`, ascending: a leaf member's own
 * rank, or what a child switch stands for in its parent's group
 * (docs/protocol.md, section 4, "Ranks in a tree"; in general not
 * consecutive). */
static json_t *ranks_under(const struct mgr_job *j, int node)
{
	json_t *a = json_array();

	for (int r = 0; r < j->size; r++)
		for (int k = j->tree.node_of_rank[r]; k >= 0; k = j->tree.nodes[k].parent)
			if (k == node) {
				json_array_append_new(a, json_integer(r));
				break;
			}
	return a;
}

/* Group g's members, in the switch's config-file format: its child
 * switches, or its ranks. */
static json_t *members_json(struct mgr *m, const struct mgr_job *j, int g)
{
	const struct mgr_tree *tr = &j->tree;
	json_t *mem = json_array();

	if (tr->nodes[g].nchildren) {
		for (int c = 0; c < tr->nnodes; c++)
			if (tr->nodes[c].parent == g)
				json_array_append_new(mem, json_pack("{s:o, s:i, s:i, s:o}",
					"ip", mgr_ip_json(m->topo.switches[tr->nodes[c].sw].ip),
					"qpn", (int)j->groups[c].qpn, "fanin", tr->nodes[c].fanin,
					"ranks", ranks_under(j, c)));
		return mem;
	}
	for (int r = 0; r < j->size; r++)
		if (tr->node_of_rank[r] == g)
			json_array_append_new(mem, json_pack("{s:o, s:i, s:[i]}",
				"ip", mgr_ip_json(j->ranks[r].ip), "qpn", (int)j->ranks[r].qpn,
				"ranks", r));
	return mem;
}

/* The groups a switch must hold, in the switch's config-file format, with
 * the ranks under every member (what the rooted collectives need). */
json_t *mgr_switch_groups_json(struct mgr *m, int s)
{
	json_t *arr = json_array();

	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int g = 0; g < j->ngroups; g++) {
			const struct mgr_group *gr = &j->groups[g];
			json_t *o;

			if (gr->sw != s)
				continue;
			o = json_pack("{s:i, s:i, s:I, s:i, s:i, s:o}", "id", (int)j->group_id,
				      "qpn", (int)gr->qpn, "qkey", (json_int_t)gr->qkey,
				      "window", (int)j->window, "elems_per_pkt",
				      (int)j->elems_per_pkt, "members", members_json(m, j, g));
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

/* What rank r needs: libinca's group description; on the host ring
 * (no tree), without a switch ("ring": true). */
static json_t *member_json(const struct mgr_rank *rk)
{
	json_t *o = json_pack("{s:o, s:i}", "ip", mgr_ip_json(rk->ip), "qpn", (int)rk->qpn);

	if (rk->ring_ip)
		json_object_set_new(o, "ring_ip", mgr_ip_json(rk->ring_ip));
	if (rk->ring_port)
		json_object_set_new(o, "ring_port", json_integer(rk->ring_port));
	return o;
}

json_t *mgr_rank_json(struct mgr *m, struct mgr_job *j, int r, enum mgr_members members)
{
	int g = j->have_tree ? j->tree.node_of_rank[r] : -1;
	json_t *mem;

	if (members == MGR_MEMBERS_NONE) {
		mem = json_false();
	} else if (members == MGR_MEMBERS_RING) {
		char key[16];
		int next = (r + 1) % j->size;
		mem = json_pack("{s:i}", "size", j->size);
		snprintf(key, sizeof(key), "%d", r);
		json_object_set_new(mem, key, member_json(&j->ranks[r]));
		snprintf(key, sizeof(key), "%d", next);
		json_object_set_new(mem, key, member_json(&j->ranks[next]));
	} else {
		mem = json_array();
		for (int k = 0; k < j->size; k++)
			json_array_append_new(mem, member_json(&j->ranks[k]));
	}
	if (g < 0)
		return json_pack("{s:b, s:i, s:i, s:i, s:i, s:o}", "ring", true, "window",
				 (int)j->window, "elems_per_pkt", (int)j->elems_per_pkt, "mtu",
				 (int)j->mtu, "member_index", r, "members", mem);
	return json_pack("{s:o, s:i, s:i, s:I, s:i, s:i, s:i, s:i, s:o}",
			 "switch", mgr_ip_json(m->topo.switches[j->groups[g].sw].ip),
			 "group", (int)j->group_id,
			 "qpn", (int)j->groups[g].qpn, "qkey", (json_int_t)j->groups[g].qkey,
			 "window", (int)j->window, "elems_per_pkt", (int)j->elems_per_pkt,
			 "mtu", (int)j->mtu, "member_index", j->tree.index_in_leaf[r],
			 "members", mem);
}

/* Node g of j's tree as GET /v1/jobs/ID shows it: switch, qpn, and its
 * children (switches) or its ranks. */
static json_t *tree_node_json(struct mgr *m, const struct mgr_job *j, int g)
{
	const struct mgr_tree *tr = &j->tree;
	json_t *o = json_pack("{s:s, s:i}", "switch", m->topo.switches[tr->nodes[g].sw].name,
			      "qpn", (int)j->groups[g].qpn);

	if (g == 0)
		json_object_set_new(o, "qkey", json_integer((json_int_t)j->groups[0].qkey));
	else
		json_object_set_new(o, "fanin", json_integer(tr->nodes[g].fanin));
	if (tr->nodes[g].nchildren) {
		json_t *children = json_array();
		for (int c = 0; c < tr->nnodes; c++)
			if (tr->nodes[c].parent == g)
				json_array_append_new(children, tree_node_json(m, j, c));
		json_object_set_new(o, "children", children);
	} else {
		json_t *ranks = json_array();
		for (int r = 0; r < j->size; r++)
			if (tr->node_of_rank[r] == g)
				json_array_append_new(ranks, json_pack("{s:i, s:o, s:i}", "rank", r,
					"ip", mgr_ip_json(j->ranks[r].ip), "qpn", (int)j->ranks[r].qpn));
		json_object_set_new(o, "ranks", ranks);
	}
	return o;
}

/* A plan as the ranks read it: cut (seq, from) when has_cut, error when
 * not empty. */
static json_t *plan_json(uint32_t epoch, bool ring, bool dead, bool ready, uint32_t version,
			 bool has_cut, uint32_t seq, uint32_t from, const char *error)
{
	json_t *o = json_pack("{s:i, s:s, s:b, s:b, s:I}", "epoch", (int)epoch,
			      "mode", ring ? "ring" : "tree", "dead", dead, "ready", ready,
			      "version", (json_int_t)version);

	if (has_cut)
		json_object_set_new(o, "cut", json_pack("{s:I, s:I}", "seq", (json_int_t)seq,
							"from", (json_int_t)from));
	if (error[0])
		json_object_set_new(o, "error", json_string(error));
	return o;
}

/* Where the job's collectives run and from which one (plans.c). */
json_t *mgr_plan_json(const struct mgr_job *j)
{
	return plan_json(j->plan, j->plan_ring, j->plan_dead,
			 j->plan_ring || j->state == MGR_JOB_READY, j->plan_ver,
			 j->cut_done && j->plan > 1, j->cut_seq, j->cut_from, j->cut_error);
}

/* A plan that was cut and replaced, as mgr_plan_json gave it once cut,
 * and "replaced" (its tree gone: not ready). */
json_t *mgr_past_plan_json(const struct mgr_past_plan *pp)
{
	json_t *o = plan_json(pp->epoch, pp->ring, pp->dead, pp->ring, pp->cut_ver, true,
			      pp->cut_seq, pp->cut_from, pp->cut_error);

	json_object_set_new(o, "replaced", json_true());
	return o;
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
	if (j->plan)
		json_object_set_new(o, "plan", json_pack("{s:i, s:s}", "epoch", (int)j->plan,
							 "mode", j->plan_ring ? "ring" : "tree"));
	if (detail && j->ngroups) {
		json_object_set_new(o, "tree", tree_node_json(m, j, 0));
		json_object_set_new(o, "tiers", json_integer(j->tree.depth));
	}
	if (j->nrails > 1) {
		json_object_set_new(o, "rail", json_integer(j->rail));
		json_object_set_new(o, "rails", json_integer(j->nrails));
	}
	if (detail && j->nrails > 1) {
		/* every rail of the job, this one too: where it runs, its tree */
		struct mgr_job *f[MGR_MAX_RAILS];
		int n = mgr_job_family(m, j, f);
		json_t *a = json_array();
		for (int l = 0; l < n; l++) {
			json_t *r;
			if (!f[l]) {
				json_array_append_new(a, json_pack("{s:i, s:s}", "rail", l, "state",
								   "not registered"));
				continue;
			}
			r = json_pack("{s:i, s:s, s:s, s:s}", "rail", l, "id", f[l]->id, "state",
				      mgr_job_state_name(f[l]->state), "reason", f[l]->reason);
			if (f[l]->plan)
				json_object_set_new(r, "plan", json_pack("{s:i, s:s}", "epoch",
					(int)f[l]->plan, "mode", f[l]->plan_ring ? "ring" : "tree"));
			if (f[l]->ngroups) {
				json_object_set_new(r, "group", json_integer(f[l]->group_id));
				json_object_set_new(r, "tree", tree_node_json(m, f[l], 0));
			}
			json_array_append_new(a, r);
		}
		json_object_set_new(o, "rail_jobs", a);
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
		"name", sw->name, "role", mgr_role_name(sw->role),
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
