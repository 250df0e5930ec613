/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-bench-tree: how long inca-manager's tree builder takes.
 *
 *   two tiers:   64 hosts a leaf, every leaf linked to every spine
 *   three tiers: pods of 8 leaves of 64 hosts and 4 spines (one a plane);
 *                4 planes of 4 super-spines, plane k's linked to spine k
 *                of every pod
 *
 * A full build is one job over every host in random rank order; a rebuild
 * is one job of 512 ranks over 4 pods after the super-spine of its tree
 * went down (what the manager does for a job on a failed switch), with the
 * other switches loaded at random. Median and max of 101 builds; each tree
 * is checked (the root's fan-in is the job's size, every node linked to its
 * parent, none on a down switch) so a figure comes from a build that did
 * the work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mgr.h"

#define RUNS 101

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* 64 hosts a leaf: two tiers, every leaf linked to every spine; three
 * tiers, pods of 8 leaves and 4 spines, 4 planes of 4 super-spines */
static void fabric(struct mgr_topo *t, int tiers, int leaves, int spines)
{
	struct mgr_fat_tree ft = { .tiers = tiers, .hosts = leaves * 64, .hosts_per_leaf = 64,
				   .spines = spines, .leaves_per_pod = 8, .supers_per_plane = 4 };
	char why[200];

	if (mgr_topo_fat_tree(t, &ft, why, sizeof(why))) {
		fprintf(stderr, "inca-bench-tree: %s\n", why);
		exit(1);
	}
}

static void shuffle(int *v, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = rand() % (i + 1), x = v[i];
		v[i] = v[j];
		v[j] = x;
	}
}

/* The tree is what it must be; exits loudly when not. */
static void check(const struct mgr_topo *t, const struct mgr_tree *tr, int n,
		  const struct mgr_load *load, int depth)
{
	bool ok = tr->nnodes >= 1 && tr->nodes[0].fanin == n && tr->depth == depth;

	for (int k = 0; ok && k < tr->nnodes; k++) {
		const struct mgr_tree_node *nd = &tr->nodes[k];
		ok = !load->down[nd->sw] &&
		     (k == 0 || mgr_linked(t, nd->sw, tr->nodes[nd->parent].sw));
	}
	if (!ok) {
		fprintf(stderr, "inca-bench-tree: a wrong tree (%d nodes, depth %d, root fan-in %d "
			"for %d ranks)\n", tr->nnodes, tr->depth, tr->nnodes ? tr->nodes[0].fanin : 0,
			n);
		exit(1);
	}
}

static void run(const char *what, const struct mgr_topo *t, const int *hosts, int n,
		const struct mgr_load *load, int depth)
{
	double us[RUNS];
	char why[200];
	struct mgr_tree tr;
	int nnodes = 0;

	for (int r = 0; r < RUNS; r++) {
		double t0 = now();
		if (mgr_tree_build(t, hosts, n, load, 64, &tr, why, sizeof(why))) {
			fprintf(stderr, "inca-bench-tree: %s: %s\n", what, why);
			exit(1);
		}
		us[r] = (now() - t0) * 1e6;
		check(t, &tr, n, load, depth);
		nnodes = tr.nnodes;
		mgr_tree_free(&tr);
	}
	qsort(us, RUNS, sizeof(double), cmp);
	printf("%-9s %-7s %-7d %-9d %-7d %12.1f %12.1f\n", what, depth == 3 ? "3" : "2", n,
	       t->nswitches, nnodes, us[RUNS / 2], us[RUNS - 1]);
}

static struct mgr_load *new_load(int nswitches)
{
	struct mgr_load *l = calloc(1, sizeof(*l));

	l->slots = calloc((size_t)nswitches, sizeof(uint32_t));
	l->groups = calloc((size_t)nswitches, sizeof(uint32_t));
	l->down = calloc((size_t)nswitches, sizeof(bool));
	if (!l->slots || !l->groups || !l->down) {
		fprintf(stderr, "inca-bench-tree: out of memory\n");
		exit(1);
	}
	for (int s = 0; s < nswitches; s++)
		l->slots[s] = (uint32_t)(rand() % 1000);
	return l;
}

static void free_load(struct mgr_load *l)
{
	free(l->slots);
	free(l->groups);
	free(l->down);
	free(l);
}

static void full(const struct mgr_topo *t, int depth)
{
	int *hosts = malloc(sizeof(int) * (size_t)t->nhosts);
	struct mgr_load *l = new_load(t->nswitches);

	for (int i = 0; i < t->nhosts; i++)
		hosts[i] = i;
	shuffle(hosts, t->nhosts);
	run("build", t, hosts, t->nhosts, l, depth);
	free(hosts);
	free_load(l);
}

/* 512 ranks on pods 0, 5, 9, 13 (128 random hosts each); the root of their
 * tree down, then rebuilt. */
static void rebuild(const struct mgr_topo *t)
{
	static const int pods[4] = { 0, 5, 9, 13 };
	int hosts[512], n = 0;
	struct mgr_load *l = new_load(t->nswitches);
	struct mgr_tree tr;
	char why[200];

	for (int p = 0; p < 4; p++) {
		int pick[512];
		for (int i = 0; i < 512; i++)
			pick[i] = pods[p] * 512 + i;
		shuffle(pick, 512);
		for (int i = 0; i < 128; i++)
			hosts[n++] = pick[i];
	}
	shuffle(hosts, n);
	if (mgr_tree_build(t, hosts, n, l, 64, &tr, why, sizeof(why))) {
		fprintf(stderr, "inca-bench-tree: rebuild: %s\n", why);
		exit(1);
	}
	l->down[tr.nodes[0].sw] = true;
	mgr_tree_free(&tr);
	run("rebuild", t, hosts, n, l, 3);
	free_load(l);
}

int main(void)
{
	struct mgr_topo t;

	srand(1);
	printf("# inca-manager's tree builder: 64 hosts a leaf; two tiers: every leaf on every "
	       "spine; three tiers: pods of 8 leaves and 4 spines, 4 planes of 4 super-spines.\n"
	       "# build: one job over every host, random rank order; rebuild: one job of 512 "
	       "ranks over 4 pods after its super-spine went down. Median of %d.\n", RUNS);
	printf("%-9s %-7s %-7s %-9s %-7s %12s %12s\n", "what", "tiers", "ranks", "switches",
	       "groups", "median_us", "max_us");
	fabric(&t, 2, 64, 16);
	full(&t, 2);
	mgr_topo_free(&t);
	fabric(&t, 2, 256, 32);
	full(&t, 2);
	mgr_topo_free(&t);
	fabric(&t, 3, 8 * 8, 4);
	full(&t, 3);
	mgr_topo_free(&t);
	fabric(&t, 3, 32 * 8, 4);
	full(&t, 3);
	rebuild(&t);
	mgr_topo_free(&t);
	return 0;
}
