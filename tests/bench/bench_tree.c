/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-bench-tree: how long inca-manager's tree builder takes on leaf-spine
 * fat-trees (64 hosts per leaf, every leaf linked to every spine), for jobs
 * spanning the whole fabric in random rank order. Median of 101 builds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mgr.h"

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

static void fabric(struct mgr_topo *t, int leaves, int per_leaf, int spines)
{
	memset(t, 0, sizeof(*t));
	t->nswitches = leaves + spines;
	t->nhosts = leaves * per_leaf;
	t->switches = calloc((size_t)t->nswitches, sizeof(*t->switches));
	t->hosts = calloc((size_t)t->nhosts, sizeof(*t->hosts));
	t->link = calloc((size_t)t->nswitches * (size_t)t->nswitches, 1);
	for (int s = 0; s < t->nswitches; s++) {
		struct mgr_switch *sw = &t->switches[s];
		sw->role = s < spines ? MGR_SPINE : MGR_LEAF;
		snprintf(sw->name, sizeof(sw->name), "%s%d", s < spines ? "spine" : "leaf", s);
		sw->ip = 0x0aff0000u + (uint32_t)s;
		sw->max_groups = 1024;
		sw->max_slots = 1u << 20;
	}
	for (int l = spines; l < t->nswitches; l++)
		for (int s = 0; s < spines; s++)
			t->link[(size_t)l * (size_t)t->nswitches + (size_t)s] = 1;
	for (int h = 0; h < t->nhosts; h++) {
		t->hosts[h].ip = 0x0a000000u + (uint32_t)h + 1;
		t->hosts[h].leaf = spines + h / per_leaf;
	}
}

int main(void)
{
	static const int sizes[][3] = { { 4, 64, 2 }, { 16, 64, 4 }, { 64, 64, 16 }, { 64, 64, 32 } };

	printf("# tree builder on leaf-spine fat-trees, 64 hosts per leaf, job over all hosts in "
	       "random rank order; median of 101 builds\n");
	printf("%-8s %-7s %-7s %12s %12s\n", "hosts", "leaves", "spines", "median_us", "max_us");
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct mgr_topo t;
		int leaves = sizes[k][0], per = sizes[k][1], spines = sizes[k][2], n = leaves * per;
		int *hosts = malloc(sizeof(int) * (size_t)n);
		uint32_t *slots = calloc((size_t)(leaves + spines), 4);
		uint32_t *groups = calloc((size_t)(leaves + spines), 4);
		bool *down = calloc((size_t)(leaves + spines), 1);
		struct mgr_load load = { slots, groups, down };
		double t_us[101];
		char why[200];

		fabric(&t, leaves, per, spines);
		for (int i = 0; i < n; i++)
			hosts[i] = i;
		srand(1);
		for (int i = n - 1; i > 0; i--) {
			int j = rand() % (i + 1), x = hosts[i];
			hosts[i] = hosts[j];
			hosts[j] = x;
		}
		for (int s = 0; s < spines; s++)
			slots[s] = (uint32_t)(rand() % 1000);
		for (int r = 0; r < 101; r++) {
			struct mgr_tree tr;
			double t0 = now();
			if (mgr_tree_build(&t, hosts, n, &load, 64, &tr, why, sizeof(why))) {
				fprintf(stderr, "inca-bench-tree: %s\n", why);
				return 1;
			}
			t_us[r] = (now() - t0) * 1e6;
			mgr_tree_free(&tr);
		}
		qsort(t_us, 101, sizeof(double), cmp);
		printf("%-8d %-7d %-7d %12.1f %12.1f\n", n, leaves, spines, t_us[50], t_us[100]);
		free(hosts);
		free(slots);
		free(groups);
		free(down);
		mgr_topo_free(&t);
	}
	return 0;
}
