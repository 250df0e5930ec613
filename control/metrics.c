/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GET /metrics: the manager's own counters in Prometheus text format
 * (deploy/grafana/ queries them).
 */
#include <stdio.h>
#include <stdlib.h>

#include "api.h"

int mgr_api_metrics(struct mgr_req *q, const struct mgr_route_args *a)
{
	struct mgr *m = q->m;
	size_t cap = 65536, len = 0;
	char *b = malloc(cap);
	unsigned jobs[MGR_JOB_RING + 1] = { 0 };

	(void)a;
#define P(...) do { if (len < cap) len += (size_t)snprintf(b + len, cap - len, __VA_ARGS__); } while (0)
	if (!b)
		return 500;
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		jobs[j->state]++;
	P("# HELP inca_manager_jobs Jobs by state.\n# TYPE inca_manager_jobs gauge\n");
	for (int s = 0; s <= MGR_JOB_RING; s++)
		P("inca_manager_jobs{state=\"%s\"} %u\n", mgr_job_state_name((enum mgr_job_state)s),
		  jobs[s]);
	/* jobs with rails, by where their rails run: all on trees, all on the
	 * ring, or some of each (a health check: plans.c never does that) */
	unsigned fam[3] = { 0 };
	for (struct mgr_job *j = m->jobs; j; j = j->next) {
		struct mgr_job *f[MGR_MAX_RAILS];
		int n, l0, ring = 0, tree = 0;
		if (j->nrails < 2)
			continue;
		n = mgr_job_family(m, j, f);
		l0 = mgr_family_first(f, n);
		if (l0 == n || f[l0] != j)
			continue;          /* counted at its first rail here */
		for (int l = 0; l < n; l++)
			if (f[l] && f[l]->plan) {
				ring += f[l]->plan_ring;
				tree += !f[l]->plan_ring;
			}
		if (ring || tree)
			fam[ring && tree ? 2 : ring ? 1 : 0]++;
	}
	P("# HELP inca_manager_rail_jobs Jobs with rails (a group per local rank), by where "
	  "their rails run: every rail on a tree, every rail on the host ring, or some of each "
	  "(never: the manager moves a job's rails together).\n"
	  "# TYPE inca_manager_rail_jobs gauge\n");
	P("inca_manager_rail_jobs{plan=\"tree\"} %u\ninca_manager_rail_jobs{plan=\"ring\"} %u\n"
	  "inca_manager_rail_jobs{plan=\"mixed\"} %u\n", fam[0], fam[1], fam[2]);
	P("# HELP inca_manager_switch_up Whether the switch heartbeats.\n"
	  "# TYPE inca_manager_switch_up gauge\n");
	for (int s = 0; s < m->topo.nswitches; s++)
		P("inca_manager_switch_up{switch=\"%s\"} %d\n", m->topo.switches[s].name,
		  m->sw[s].up && m->sw[s].ever);
	P("# HELP inca_manager_switch_slots_used Slots allocated on the switch.\n"
	  "# TYPE inca_manager_switch_slots_used gauge\n");
	for (int s = 0; s < m->topo.nswitches; s++) {
		uint32_t slots, groups;
		mgr_switch_usage(m, s, &slots, &groups);
		P("inca_manager_switch_slots_used{switch=\"%s\"} %u\n", m->topo.switches[s].name,
		  slots);
	}
	P("# HELP inca_manager_requests_total API requests.\n# TYPE inca_manager_requests_total counter\n"
	  "inca_manager_requests_total %llu\n", (unsigned long long)m->requests);
	P("# HELP inca_manager_rank_polls_total Ranks' state and plan requests (GET "
	  "/v1/jobs/JOB/ranks/R).\n# TYPE inca_manager_rank_polls_total counter\n"
	  "inca_manager_rank_polls_total %llu\n", (unsigned long long)m->rank_polls);
	P("# HELP inca_manager_requests_refused_total API requests answered 4xx/5xx.\n"
	  "# TYPE inca_manager_requests_refused_total counter\n"
	  "inca_manager_requests_refused_total %llu\n", (unsigned long long)m->requests_refused);
	P("# HELP inca_manager_failures_total Failures recorded (switches down, jobs failed).\n"
	  "# TYPE inca_manager_failures_total counter\ninca_manager_failures_total %u\n",
	  m->nfailures);
	P("# HELP inca_manager_tree_builds_total Trees built.\n"
	  "# TYPE inca_manager_tree_builds_total counter\ninca_manager_tree_builds_total %llu\n",
	  (unsigned long long)m->tree_builds);
	P("# HELP inca_manager_plans_total Plans made for jobs: their tree, or the host ring.\n"
	  "# TYPE inca_manager_plans_total counter\n"
	  "inca_manager_plans_total{mode=\"tree\"} %llu\ninca_manager_plans_total{mode=\"ring\"} %llu\n",
	  (unsigned long long)m->plans_tree, (unsigned long long)m->plans_ring);
	P("# HELP inca_manager_stall_reports_total Ranks' reports that their tree sent no "
	  "result for INCA_SWITCH_TIMEOUT_MS.\n# TYPE inca_manager_stall_reports_total counter\n"
	  "inca_manager_stall_reports_total %llu\n", (unsigned long long)m->stall_reports);
	P("# HELP inca_manager_tree_rebuilds_total New trees for jobs whose tree lost a switch.\n"
	  "# TYPE inca_manager_tree_rebuilds_total counter\ninca_manager_tree_rebuilds_total %llu\n",
	  (unsigned long long)m->rebuilds);
	P("# HELP inca_manager_tree_build_seconds_max Longest tree build.\n"
	  "# TYPE inca_manager_tree_build_seconds_max gauge\n"
	  "inca_manager_tree_build_seconds_max %.9f\n", m->tree_build_s_max);
	P("# HELP inca_manager_long_polls_held Heartbeats and rank state requests waiting now.\n"
	  "# TYPE inca_manager_long_polls_held gauge\ninca_manager_long_polls_held %u\n",
	  m->polls_holding);
	P("# HELP inca_manager_long_polls_total Requests held (wait_ms), by how they ended.\n"
	  "# TYPE inca_manager_long_polls_total counter\n"
	  "inca_manager_long_polls_total{end=\"change\"} %llu\n"
	  "inca_manager_long_polls_total{end=\"timeout\"} %llu\n",
	  (unsigned long long)m->polls_woken, (unsigned long long)m->polls_timed_out);
	P("# HELP inca_manager_wakeups_total Version or job state changes that woke held requests.\n"
	  "# TYPE inca_manager_wakeups_total counter\ninca_manager_wakeups_total %llu\n",
	  (unsigned long long)m->wakeups);
	P("# HELP inca_manager_state_saves_total State saves to the database.\n"
	  "# TYPE inca_manager_state_saves_total counter\ninca_manager_state_saves_total %llu\n",
	  (unsigned long long)m->saves);
	P("# HELP inca_manager_state_save_seconds_max Longest state save.\n"
	  "# TYPE inca_manager_state_save_seconds_max gauge\n"
	  "inca_manager_state_save_seconds_max %.9f\n", m->save_s_max);
#undef P
	*q->resp = b;
	*q->ctype = "text/plain; version=0.0.4";
	return 200;
}
