/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for inca-manager's topology parser (topo.c): any bytes
 * as a topology file. No crash or leak; a refused file always says why
 * ("origin: ..."); an accepted one is consistent (every host on a leaf,
 * links only one tier up: leaf to spine, spine to super-spine) and a tree
 * over its first hosts builds (a rank's leaf is its host's, every node's
 * parent is linked to it, fan-ins add up) or is refused cleanly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mgr.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mgr_topo t;
	char err[512] = "";
	json_error_t jerr;
	json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);

	if (!root)
		return 0;
	memset(&t, 0, sizeof(t));
	if (mgr_topo_parse(&t, root, "fuzz.json", err, sizeof(err))) {
		check(strncmp(err, "fuzz.json", 9) == 0);
		mgr_topo_free(&t);
		json_decref(root);
		return 0;
	}
	json_decref(root);
	check(t.nswitches >= 0 && t.nhosts >= 0);
	for (int h = 0; h < t.nhosts; h++) {
		check(t.hosts[h].leaf >= 0 && t.hosts[h].leaf < t.nswitches);
		check(t.switches[t.hosts[h].leaf].role == MGR_LEAF);
		check(mgr_topo_host_by_ip(&t, t.hosts[h].ip) >= 0);
	}
	for (int a = 0; a < t.nswitches; a++)
		for (int b = 0; b < t.nswitches; b++)
			if (t.link[a * t.nswitches + b])
				check(t.switches[a].role != MGR_SUPERSPINE &&
				      t.switches[b].role == t.switches[a].role + 1);
	if (t.nhosts > 0) {
		int n = t.nhosts < 64 ? t.nhosts : 64, hosts[64];
		uint32_t *slots = calloc((size_t)t.nswitches, sizeof(*slots));
		uint32_t *groups = calloc((size_t)t.nswitches, sizeof(*groups));
		struct mgr_load load = { .slots = slots, .groups = groups };
		struct mgr_tree tr;

		check(slots && groups);
		for (int i = 0; i < n; i++)
			hosts[i] = i;
		memset(&tr, 0, sizeof(tr));
		if (mgr_tree_build(&t, hosts, n, &load, 16, &tr, err, sizeof(err)) == 0) {
			check(tr.nnodes >= 1 && tr.nodes[0].parent == -1 && tr.nodes[0].fanin == n);
			for (int k = 1; k < tr.nnodes; k++) {
				const struct mgr_tree_node *nd = &tr.nodes[k];
				check(nd->parent >= 0 && nd->parent < k);
				check(mgr_linked(&t, nd->sw, tr.nodes[nd->parent].sw));
			}
			for (int i = 0; i < n; i++)
				check(tr.nodes[tr.node_of_rank[i]].sw == t.hosts[i].leaf &&
				      tr.nodes[tr.node_of_rank[i]].nchildren == 0);
			mgr_tree_free(&tr);
		}
		free(slots);
		free(groups);
	}
	mgr_topo_free(&t);
	return 0;
}
