/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reduction tree builder: a pure function of the topology, the ranks'
 * hosts and the current load. One leaf covering every rank: that leaf
 * alone. Else each leaf involved aggregates its ranks and sends its partial
 * to one spine linked to all of them, chosen to balance load across
 * spines. Else (leaves of several pods) a super-spine is the root and
 * spines linked to it carry the leaves, as few spines as the links allow,
 * the least loaded among equals.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgr.h"

void mgr_tree_free(struct mgr_tree *tr)
{
	free(tr->nodes);
	free(tr->node_of_rank);
	free(tr->index_in_leaf);
	memset(tr, 0, sizeof(*tr));
}

int mgr_tree_child_toward(const struct mgr_tree *tr, int node, int r)
{
	for (int c = tr->node_of_rank[r]; c >= 0; c = tr->nodes[c].parent)
		if (tr->nodes[c].parent == node)
			return c;
	return -1;
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

/* lower and upper are linked, and the link is not reported down (else
 * why says so) */
static bool usable(const struct mgr_topo *t, const struct mgr_load *load, int lower, int upper,
		   char *why, size_t whylen)
{
	if (!mgr_linked(t, lower, upper))
		return false;
	if (load->link_down && load->link_down[(size_t)lower * (size_t)t->nswitches + (size_t)upper]) {
		snprintf(why, whylen, "the link %s - %s is down", t->switches[lower].name,
			 t->switches[upper].name);
		return false;
	}
	return true;
}

static double load_of(const struct mgr_topo *t, const struct mgr_load *load, int sw)
{
	return (double)load->slots[sw] / (double)t->switches[sw].max_slots;
}

/* What the builder works with: the job's leaves and, per switch, a mark. */
struct build {
	const struct mgr_topo *t;
	const struct mgr_load *load;
	uint32_t window;
	int *leaves, nl;             /* ascending */
	int *count;                  /* per switch: ranks on it (leaves) */
	int *mark;                   /* per switch: -2 not the job's; cover()'s scratch */
};

/* Spine over every leaf, fitting, least loaded: its index, or -1 with why. */
static int common_spine(struct build *b, char *why, size_t whylen)
{
	const struct mgr_topo *t = b->t;
	char last[160] = "";
	int best = -1;

	/* the spines linked to the first leaf are the only candidates */
	for (int k = 0; k < t->nup[b->leaves[0]]; k++) {
		int s = t->up[b->leaves[0]][k];
		bool all = true;

		for (int i = 0; all && i < b->nl; i++)
			all = usable(t, b->load, b->leaves[i], s, last, sizeof(last));
		if (!all || !fits(t, b->load, s, b->window, last, sizeof(last)))
			continue;
		if (best < 0 || load_of(t, b->load, s) < load_of(t, b->load, best))
			best = s;
	}
	if (best < 0) {
		if (last[0])
			snprintf(why, whylen, "no spine can take the group: %s", last);
		else
			snprintf(why, whylen, "no spine is linked to all %d leaves of the job", b->nl);
	}
	return best;
}

/*
 * Under super-spine x: spines linked to x covering every leaf, each leaf's
 * spine in b->mark[leaf]. Returns how many spines (their indices ascending
 * in spines[]), or -1 with why (a leaf no usable spine of x reaches).
 */
static int cover(struct build *b, int x, int *spines, char *why, size_t whylen)
{
	const struct mgr_topo *t = b->t;
	int ns = 0, left = b->nl;
	char last[160] = "";

	for (int i = 0; i < b->nl; i++)
		b->mark[b->leaves[i]] = -1;       /* in the job, not covered */
	while (left) {
		int best = -1, best_n = 0, first = -1;

		/* the first uncovered leaf: one of its spines must cover it */
		for (int i = 0; first < 0 && i < b->nl; i++)
			if (b->mark[b->leaves[i]] == -1)
				first = b->leaves[i];
		for (int k = 0; k < t->nup[first]; k++) {
			int s = t->up[first][k], n = 0;

			if (!usable(t, b->load, first, s, last, sizeof(last)) ||
			    !usable(t, b->load, s, x, last, sizeof(last)) ||
			    !fits(t, b->load, s, b->window, last, sizeof(last)))
				continue;
			for (int d = 0; d < t->ndown[s]; d++)
				n += b->mark[t->down[s][d]] == -1 &&
				     usable(t, b->load, t->down[s][d], s, last, sizeof(last));
			if (best < 0 || n > best_n || (n == best_n &&
					   load_of(t, b->load, s) < load_of(t, b->load, best))) {
				best = s;
				best_n = n;
			}
		}
		if (best < 0) {
			if (last[0])
				snprintf(why, whylen, "no spine under %s can carry leaf %s: %s",
					 t->switches[x].name, t->switches[first].name, last);
			else
				snprintf(why, whylen, "no spine links leaf %s to super-spine %s",
					 t->switches[first].name, t->switches[x].name);
			return -1;
		}
		for (int d = 0; d < t->ndown[best]; d++)
			if (b->mark[t->down[best][d]] == -1 &&
			    usable(t, b->load, t->down[best][d], best, last, sizeof(last))) {
				b->mark[t->down[best][d]] = best;
				left--;
			}
		spines[ns++] = best;
	}
	/* ascending, as the nodes are laid out */
	for (int i = 1; i < ns; i++)
		for (int k = i; k > 0 && spines[k - 1] > spines[k]; k--) {
			int v = spines[k];
			spines[k] = spines[k - 1];
			spines[k - 1] = v;
		}
	return ns;
}

/* The super-spine and its spines: the root's switch (spines[0..*ns-1] and
 * b->mark as cover() leaves them), or -1 with why. */
static int three_tiers(struct build *b, int *spines, int *ns, char *why, size_t whylen)
{
	const struct mgr_topo *t = b->t;
	int nx = 0, *xs = malloc(sizeof(int) * (size_t)t->nswitches);
	char last[200] = "";

	if (!xs) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	for (int s = 0; s < t->nswitches; s++)
		if (t->switches[s].role == MGR_SUPERSPINE &&
		    fits(t, b->load, s, b->window, last, sizeof(last)))
			xs[nx++] = s;
	/* least loaded first, then index */
	for (int i = 1; i < nx; i++)
		for (int k = i; k > 0 && load_of(t, b->load, xs[k]) < load_of(t, b->load, xs[k - 1]);
		     k--) {
			int v = xs[k];
			xs[k] = xs[k - 1];
			xs[k - 1] = v;
		}
	for (int i = 0; i < nx; i++) {
		*ns = cover(b, xs[i], spines, last, sizeof(last));
		if (*ns > 0) {
			int x = xs[i];
			free(xs);
			return x;
		}
	}
	free(xs);
	if (last[0])
		snprintf(why, whylen, "no super-spine can take the group: %s", last);
	else
		snprintf(why, whylen, "no super-spine reaches all %d leaves of the job", b->nl);
	return -1;
}

static int node_add(struct mgr_tree *tr, int sw, int parent)
{
	struct mgr_tree_node *n = &tr->nodes[tr->nnodes];

	*n = (struct mgr_tree_node){ .sw = sw, .parent = parent, .child_index = -1 };
	if (parent >= 0)
		n->child_index = tr->nodes[parent].nchildren++;
	return tr->nnodes++;
}

int mgr_tree_build(const struct mgr_topo *t, const int *hosts, int n,
		   const struct mgr_load *load, uint32_t window, struct mgr_tree *out,
		   char *why, size_t whylen)
{
	struct build b = { .t = t, .load = load, .window = window };
	int *spines = NULL, *node_of_sw = NULL, ns = 0, root;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (n <= 0) {
		snprintf(why, whylen, "no ranks");
		return -1;
	}
	b.count = calloc((size_t)t->nswitches, sizeof(int));
	b.mark = malloc(sizeof(int) * (size_t)t->nswitches);
	b.leaves = malloc(sizeof(int) * (size_t)t->nswitches);
	spines = malloc(sizeof(int) * (size_t)t->nswitches);
	node_of_sw = malloc(sizeof(int) * (size_t)t->nswitches);
	out->node_of_rank = malloc(sizeof(int) * (size_t)n);
	out->index_in_leaf = malloc(sizeof(int) * (size_t)n);
	if (!b.count || !b.mark || !b.leaves || !spines || !node_of_sw || !out->node_of_rank ||
	    !out->index_in_leaf) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	/* a switch of no rank's leaf keeps this mark: cover() marks only the
	 * job's leaves, and counts a leaf as uncovered by its -1 */
	for (int s = 0; s < t->nswitches; s++)
		b.mark[s] = -2;
	for (int r = 0; r < n; r++) {
		if (hosts[r] < 0 || hosts[r] >= t->nhosts) {
			snprintf(why, whylen, "rank %d: unknown host", r);
			goto out;
		}
		out->index_in_leaf[r] = b.count[t->hosts[hosts[r]].leaf]++;
	}
	for (int s = 0; s < t->nswitches; s++)
		if (b.count[s])
			b.leaves[b.nl++] = s;
	for (int i = 0; i < b.nl; i++)
		if (!fits(t, load, b.leaves[i], window, why, whylen))
			goto out;

	out->nodes = calloc((size_t)b.nl * 2 + 1, sizeof(*out->nodes));
	if (!out->nodes) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	if (b.nl == 1) {
		node_add(out, b.leaves[0], -1);
		out->depth = 1;
	} else if ((root = common_spine(&b, why, whylen)) >= 0) {
		node_add(out, root, -1);
		for (int i = 0; i < b.nl; i++)
			node_of_sw[b.leaves[i]] = node_add(out, b.leaves[i], 0);
		out->depth = 2;
	} else {
		char why3[200];
		bool supers = false;

		for (int s = 0; s < t->nswitches && !supers; s++)
			supers = t->switches[s].role == MGR_SUPERSPINE;
		if (!supers)
			goto out;         /* two tiers only: the spine's why */
		root = three_tiers(&b, spines, &ns, why3, sizeof(why3));
		if (root < 0) {
			snprintf(why, whylen, "%s", why3);
			goto out;
		}
		node_add(out, root, -1);
		for (int i = 0; i < ns; i++)
			node_of_sw[spines[i]] = node_add(out, spines[i], 0);
		for (int i = 0; i < b.nl; i++)
			node_of_sw[b.leaves[i]] = node_add(out, b.leaves[i],
							    node_of_sw[b.mark[b.leaves[i]]]);
		out->depth = 3;
	}
	if (out->depth == 1)
		node_of_sw[b.leaves[0]] = 0;
	for (int r = 0; r < n; r++) {
		int node = node_of_sw[t->hosts[hosts[r]].leaf];

		out->node_of_rank[r] = node;
		for (int k = node; k >= 0; k = out->nodes[k].parent)
			out->nodes[k].fanin++;
	}
	rc = 0;
out:
	free(b.count);
	free(b.mark);
	free(b.leaves);
	free(spines);
	free(node_of_sw);
	if (rc)
		mgr_tree_free(out);
	return rc;
}
