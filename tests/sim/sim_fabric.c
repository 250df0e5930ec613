/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fabrics for the simulator: a topology file read by the manager's loader,
 * or a generated one shaped as tests/bench/bench_tree.c shapes them, and
 * the job's tree from the manager's builder (mgr_tree_build, linked from
 * control/, not copied).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgr.h"
#include "sim_fabric.h"

static void add_switch(struct mgr_topo *t, int s, enum mgr_role role)
{
	struct mgr_switch *sw = &t->switches[s];

	sw->role = role;
	snprintf(sw->name, sizeof(sw->name), "%s%d", mgr_role_name(role), s);
	sw->ip = 0x0aff0000u + (uint32_t)s;
	sw->max_groups = MGR_DEFAULT_MAX_GROUPS;
	sw->max_slots = 1u << 24;
}

static void link_up(struct mgr_topo *t, int lower, int upper)
{
	t->link[(size_t)lower * (size_t)t->nswitches + (size_t)upper] = 1;
}

static int topo_alloc(struct mgr_topo *t, int nswitches, int nhosts)
{
	memset(t, 0, sizeof(*t));
	t->nswitches = nswitches;
	t->nhosts = nhosts;
	t->switches = calloc((size_t)nswitches, sizeof(*t->switches));
	t->hosts = calloc((size_t)nhosts, sizeof(*t->hosts));
	t->link = calloc((size_t)nswitches * (size_t)nswitches, 1);
	return t->switches && t->hosts && t->link ? 0 : -1;
}

static int ceil_div(int a, int b)
{
	return (a + b - 1) / b;
}

/*
 * tiers 1: one leaf. tiers 2: spines first, then the leaves, every leaf
 * linked to every spine. tiers 3: super-spines (plane k: k*X .. k*X+X-1),
 * spines (pod p's spine of plane k: plane k's spine), then leaves; each
 * spine linked to every leaf of its pod and every super-spine of its plane.
 * Hosts fill the leaves in order.
 */
static int generate(const struct sim_shape *s, struct mgr_topo *t, char *why, size_t whylen)
{
	int hpl = s->tiers == 1 ? s->hosts : s->hosts_per_leaf;
	int leaves, spines = 0, supers = 0, first_leaf;

	if (s->hosts < 1 || hpl < 1 || (s->tiers > 1 && s->spines < 1) ||
	    (s->tiers == 3 && (s->leaves_per_pod < 1 || s->supers_per_plane < 1))) {
		snprintf(why, whylen, "a fabric needs hosts, hosts per leaf and spines");
		return -1;
	}
	leaves = ceil_div(s->hosts, hpl);
	if (s->tiers == 2) {
		spines = s->spines;
	} else if (s->tiers == 3) {
		int pods = ceil_div(leaves, s->leaves_per_pod);
		leaves = pods * s->leaves_per_pod;
		spines = pods * s->spines;
		supers = s->spines * s->supers_per_plane;
	} else if (s->tiers != 1) {
		snprintf(why, whylen, "tiers: 1, 2 or 3");
		return -1;
	}
	if (leaves + spines + supers > MGR_MAX_SWITCHES) {
		snprintf(why, whylen, "%d switches: the manager takes at most %d",
			 leaves + spines + supers, MGR_MAX_SWITCHES);
		return -1;
	}
	if (topo_alloc(t, leaves + spines + supers, s->hosts)) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	first_leaf = supers + spines;
	for (int i = 0; i < t->nswitches; i++)
		add_switch(t, i, i < supers ? MGR_SUPERSPINE : i < first_leaf ? MGR_SPINE : MGR_LEAF);
	for (int l = 0; l < leaves; l++) {
		if (s->tiers == 2) {
			for (int sp = 0; sp < spines; sp++)
				link_up(t, first_leaf + l, sp);
		} else if (s->tiers == 3) {
			int pod = l / s->leaves_per_pod;
			for (int k = 0; k < s->spines; k++)
				link_up(t, first_leaf + l, supers + pod * s->spines + k);
		}
	}
	if (s->tiers == 3)
		for (int sp = 0; sp < spines; sp++)
			for (int x = 0; x < s->supers_per_plane; x++)
				link_up(t, supers + sp, (sp % s->spines) * s->supers_per_plane + x);
	for (int h = 0; h < s->hosts; h++) {
		snprintf(t->hosts[h].name, sizeof(t->hosts[h].name), "h%d", h);
		t->hosts[h].ip = 0x0a000000u + (uint32_t)h + 1;
		t->hosts[h].leaf = first_leaf + h / hpl;
	}
	if (mgr_topo_index_links(t)) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	return 0;
}

static int fabric_alloc(struct sim_fabric *f, int nswitches, int nhosts, int nnodes)
{
	size_t ns = (size_t)nswitches, nh = (size_t)nhosts, nn = (size_t)nnodes;

	f->switch_name = calloc(ns, sizeof(*f->switch_name));
	f->role = calloc(ns, sizeof(int));
	f->ports_down = calloc(ns, sizeof(int));
	f->host_leaf = calloc(nh, sizeof(int));
	f->rank_node = calloc(nh, sizeof(int));
	f->link_lower = calloc(ns * ns, sizeof(int));
	f->link_upper = calloc(ns * ns, sizeof(int));
	f->node_sw = calloc(nn, sizeof(int));
	f->node_parent = calloc(nn, sizeof(int));
	f->node_children = calloc(nn, sizeof(int));
	f->node_fanin = calloc(nn, sizeof(int));
	return f->switch_name && f->role && f->ports_down && f->host_leaf && f->rank_node &&
	       f->link_lower && f->link_upper && f->node_sw && f->node_parent &&
	       f->node_children && f->node_fanin ? 0 : -1;
}

int sim_fabric_build(const struct sim_shape *shape, unsigned window, struct sim_fabric *f,
		     char *why, unsigned long whylen)
{
	struct mgr_topo t;
	struct mgr_tree tr = { 0 };
	struct mgr_load load = { 0 };
	int *hosts = NULL, rc = -1;

	memset(f, 0, sizeof(*f));
	memset(&t, 0, sizeof(t));
	if (shape->topo_path ? mgr_topo_load(&t, shape->topo_path, why, whylen)
			     : generate(shape, &t, why, whylen))
		goto out;
	hosts = malloc(sizeof(int) * (size_t)t.nhosts);
	load.slots = calloc((size_t)t.nswitches, sizeof(uint32_t));
	load.groups = calloc((size_t)t.nswitches, sizeof(uint32_t));
	if (!hosts || !load.slots || !load.groups) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	for (int h = 0; h < t.nhosts; h++)
		hosts[h] = h;
	if (mgr_tree_build(&t, hosts, t.nhosts, &load, window, &tr, why, whylen))
		goto out;
	if (fabric_alloc(f, t.nswitches, t.nhosts, tr.nnodes)) {
		snprintf(why, whylen, "out of memory");
		goto out_tree;
	}
	f->nswitches = t.nswitches;
	f->nhosts = t.nhosts;
	for (int s = 0; s < t.nswitches; s++) {
		snprintf(f->switch_name[s], sizeof(f->switch_name[s]), "%s", t.switches[s].name);
		f->role[s] = (int)t.switches[s].role;
		f->ports_down[s] = t.ndown[s];
		for (int u = 0; u < t.nup[s]; u++) {
			f->link_lower[f->nlinks] = s;
			f->link_upper[f->nlinks++] = t.up[s][u];
		}
	}
	for (int h = 0; h < t.nhosts; h++) {
		f->host_leaf[h] = t.hosts[h].leaf;
		f->ports_down[t.hosts[h].leaf]++;
		f->rank_node[h] = tr.node_of_rank[h];
	}
	f->nnodes = tr.nnodes;
	f->depth = tr.depth;
	for (int k = 0; k < tr.nnodes; k++) {
		f->node_sw[k] = tr.nodes[k].sw;
		f->node_parent[k] = tr.nodes[k].parent;
		f->node_children[k] = tr.nodes[k].nchildren;
		f->node_fanin[k] = tr.nodes[k].fanin;
	}
	rc = 0;
out_tree:
	mgr_tree_free(&tr);
out:
	free(hosts);
	free(load.slots);
	free(load.groups);
	mgr_topo_free(&t);
	if (rc)
		sim_fabric_free(f);
	return rc;
}

void sim_fabric_free(struct sim_fabric *f)
{
	free(f->switch_name);
	free(f->role);
	free(f->ports_down);
	free(f->host_leaf);
	free(f->rank_node);
	free(f->link_lower);
	free(f->link_upper);
	free(f->node_sw);
	free(f->node_parent);
	free(f->node_children);
	free(f->node_fanin);
	memset(f, 0, sizeof(*f));
}
