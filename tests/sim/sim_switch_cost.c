/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reading inca-bench-switch's output (tests/bench/bench_switch.c): the
 * table's 'aggregation' and 'forward-only' rows and the payload its
 * header line names, so the model runs on what the switch measured rather
 * than on numbers typed into it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sim_fabric.h"

/* One table row: mode members elems w Mpps/core elements/s/core ns/pkt ... */
static int parse_row(const char *line, const char *mode, int *members, int *elems,
		     double *elems_per_s, double *ns)
{
	char m[32];
	int w;
	double mpps;

	if (sscanf(line, "%31s %d %d %d %lf %lf %lf", m, members, elems, &w, &mpps, elems_per_s,
		   ns) != 7 || strcmp(m, mode))
		return -1;
	return 0;
}

int sim_switch_cost_load(const char *path, struct sim_switch_cost *c, char *why,
			 unsigned long whylen)
{
	FILE *fp = fopen(path, "r");
	char line[512];
	bool agg = false, fwd = false;

	memset(c, 0, sizeof(*c));
	if (!fp) {
		snprintf(why, whylen, "%s: cannot open", path);
		return -1;
	}
	while (fgets(line, sizeof(line), fp)) {
		const char *p = strstr(line, " B payload");
		int members, elems;
		double eps, ns;

		if (line[0] == '#' && p) {
			while (p > line && p[-1] >= '0' && p[-1] <= '9')
				p--;
			sscanf(p, "%d", &c->payload_bytes);
		} else if (!parse_row(line, "aggregation", &members, &elems, &eps, &ns)) {
			c->members = members;
			c->elems_per_pkt = elems;
			c->agg_elems_per_s_core = eps;
			c->agg_ns_per_pkt = ns;
			agg = true;
		} else if (!parse_row(line, "forward-only", &members, &elems, &eps, &ns)) {
			c->fwd_ns_per_pkt = ns;
			fwd = true;
		}
	}
	fclose(fp);
	if (!agg || !fwd || c->agg_ns_per_pkt <= 0 || c->fwd_ns_per_pkt <= 0) {
		snprintf(why, whylen, "%s: no 'aggregation' and 'forward-only' rows of "
			 "inca-bench-switch's table", path);
		return -1;
	}
	return 0;
}
