/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The simulator's view of a fabric and of one job's reduction tree, in
 * plain arrays so that the C++ model needs no manager header. The fabric is
 * a topology in the manager's format (control/topo.c: a file, or one of the
 * generated shapes below); the tree is what the manager's own builder
 * (control/tree.c, mgr_tree_build) makes for a job of every host in
 * topology order.
 */
#ifndef INCA_SIM_FABRIC_H
#define INCA_SIM_FABRIC_H

#ifdef __cplusplus
extern "C" {
#endif

/* What to build: a topology file, or a generated fat-tree. */
struct sim_shape {
	const char *topo_path;       /* non-NULL: load it (every host a rank) */
	int tiers;                   /* 1: one switch; 2: leaf/spine; 3: pods + super-spines */
	int hosts;                   /* ranks, one per host */
	int hosts_per_leaf;          /* tiers 2, 3 */
	int spines;                  /* tier 2: spines, every leaf linked to each;
					tier 3: spines per pod (one per plane) */
	int leaves_per_pod;          /* tier 3 */
	int supers_per_plane;        /* tier 3 */
};

struct sim_fabric {
	int nswitches, nhosts;
	char (*switch_name)[48];
	int *role;                   /* 0 leaf, 1 spine, 2 super-spine */
	int *host_leaf;              /* switch index */
	int nlinks;                  /* switch-to-switch links, lower then upper */
	int *link_lower, *link_upper;
	int *ports_down;             /* per switch: hosts or switches below it */
	/* the job's tree (ranks = hosts 0..nhosts-1) */
	int nnodes, depth;
	int *node_sw, *node_parent, *node_children, *node_fanin;
	int *rank_node;              /* per rank: its leaf's node */
};

/* 0, or -1 with why. */
int sim_fabric_build(const struct sim_shape *shape, unsigned window, struct sim_fabric *f,
		     char *why, unsigned long whylen);
void sim_fabric_free(struct sim_fabric *f);

/*
 * The aggregation and forwarding costs inca-bench-switch measured: the
 * 'aggregation' and 'forward-only' rows of its table (ns per packet on
 * one busy core, elements per second per core) and the row's payload.
 * 0, or -1 with why.
 */
struct sim_switch_cost {
	double agg_ns_per_pkt, agg_elems_per_s_core;
	double fwd_ns_per_pkt;
	int members, elems_per_pkt, payload_bytes;
};
int sim_switch_cost_load(const char *path, struct sim_switch_cost *c, char *why,
			 unsigned long whylen);

#ifdef __cplusplus
}
#endif

#endif /* INCA_SIM_FABRIC_H */
