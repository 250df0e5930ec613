/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reduction tree builder: a pure function of the topology, the ranks'
 * hosts and the current load. One leaf covering every rank: that leaf
 * alone. Otherwise each leaf involved aggregates its ranks and sends its
 * partial to one spine linked to all of them, chosen to balance load
 * across spines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgr.h"

void mgr_tree_free(struct mgr_tree *tr)
{
	free(tr->leaves);
	free(tr->leaf_of_rank);
	free(tr->index_in_leaf);
	free(tr->leaf_fanin);
	memset(tr, 0, sizeof(*tr));
}

static bool fits(const struct mgr_topo *t, const struct mgr_load *load, int sw,
		 uint32_t window, char *why, size_t whylen)
{
	const struct mgr_switch *s = &t->switches[sw];

	if (load->down && load->down[sw]) {
		snprintf(why, whylen, "switch %s is down", s->name);
		return false;
	}
	if (load->groups[sw] + 1 > s->max_groups) {
		snprintf(why, whylen, "switch %s has all its %u groups in use", s->name,
			 s->max_groups);
		return false;
	}
	if (load->slots[sw] + window > s->max_slots) {
		snprintf(why, whylen, "switch %s: %u of %u slots in use, the group needs %u",
			 s->name, load->slots[sw], s->max_slots, window);
		return false;
	}
	return true;
}

int mgr_tree_build(const struct mgr_topo *t, const int *hosts, int n,
		   const struct mgr_load *load, uint32_t window, struct mgr_tree *out,
		   char *why, size_t whylen)
{
	int *count = NULL, *slot_of = NULL;
	int best = -1, nl = 0;
	double best_load = 0;

	memset(out, 0, sizeof(*out));
	if (n <= 0) {
		snprintf(why, whylen, "no ranks");
		return -1;
	}
	count = calloc((size_t)t->nswitches, sizeof(int));
	slot_of = malloc(sizeof(int) * (size_t)t->nswitches);
	out->leaf_of_rank = malloc(sizeof(int) * (size_t)n);
	out->index_in_leaf = malloc(sizeof(int) * (size_t)n);
	if (!count || !slot_of || !out->leaf_of_rank || !out->index_in_leaf) {
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	for (int r = 0; r < n; r++) {
		if (hosts[r] < 0 || hosts[r] >= t->nhosts) {
			snprintf(why, whylen, "rank %d: unknown host", r);
			goto fail;
		}
		int l = t->hosts[hosts[r]].leaf;
		out->leaf_of_rank[r] = l;
		out->index_in_leaf[r] = count[l]++;
	}
	/* the leaves involved, ascending */
	for (int s = 0; s < t->nswitches; s++)
		if (count[s])
			slot_of[s] = nl++;
	out->leaves = malloc(sizeof(int) * (size_t)nl);
	out->leaf_fanin = malloc(sizeof(int) * (size_t)nl);
	if (!out->leaves || !out->leaf_fanin) {
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	for (int s = 0; s < t->nswitches; s++)
		if (count[s]) {
			out->leaves[slot_of[s]] = s;
			out->leaf_fanin[slot_of[s]] = count[s];
		}
	for (int i = 0; i < nl; i++)
		if (!fits(t, load, out->leaves[i], window, why, whylen))
			goto fail;
	if (nl == 1) {
		out->root = out->leaves[0];
		out->nleaves = 0;
		free(out->leaves);
		free(out->leaf_fanin);
		out->leaves = out->leaf_fanin = NULL;
		free(count);
		free(slot_of);
		return 0;
	}
	/* a spine linked to every leaf involved, least loaded first */
	char last[160] = "";
	for (int s = 0; s < t->nswitches; s++) {
		bool all = t->switches[s].role == MGR_SPINE;

		for (int i = 0; all && i < nl; i++)
			all = mgr_linked(t, out->leaves[i], s);
		if (!all)
			continue;
		if (!fits(t, load, s, window, last, sizeof(last)))
			continue;
		double l = (double)load->slots[s] / (double)t->switches[s].max_slots;
		if (best < 0 || l < best_load) {
			best = s;
			best_load = l;
		}
	}
	if (best < 0) {
		if (last[0])
			snprintf(why, whylen, "no spine can take the group: %s", last);
		else
			snprintf(why, whylen, "no spine is linked to all %d leaves of the job", nl);
		goto fail;
	}
	out->root = best;
	out->nleaves = nl;
	free(count);
	free(slot_of);
	return 0;
fail:
	free(count);
	free(slot_of);
	mgr_tree_free(out);
	return -1;
}
