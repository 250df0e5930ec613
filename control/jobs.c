/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Jobs' lives: found by id, ready once every switch of the tree applied
 * its groups, a new plan when a switch of the tree stops heartbeating
 * (plans.c), removed when deleted, left by every rank or not renewed
 * (mgr_tick). Allocation is alloc.c's; what a request sees of a job is
 * render.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgr.h"

struct mgr_job *mgr_job_find(struct mgr *m, const char *id)
{
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		if (!strcmp(j->id, id))
			return j;
	return NULL;
}

/* Remove a job and its groups: the switches lose them at their next
 * heartbeat. */
void mgr_job_teardown(struct mgr *m, struct mgr_job *j)
{
	for (struct mgr_job **p = &m->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	for (int g = 0; g < j->ngroups; g++)
		m->sw[j->groups[g].sw].version++;
	if (j->ngroups)
		m->capacity_gen++;
	mgr_persist_gone(m, j->id);
	/* its rails' cut no longer waits for it */
	if (j->nrails > 1)
		mgr_job_cut_check(m, j);
	/* its ranks' held requests are answered: the job is gone */
	while (j->parked)
		mgr_unpark(m, j->parked, false);
	mgr_job_free(j);
	mgr_changed(m);
}

void mgr_job_check_ready(struct mgr *m, struct mgr_job *j)
{
	if (j->state != MGR_JOB_PROGRAMMING)
		return;
	for (int g = 0; g < j->ngroups; g++)
		if (m->sw[j->groups[g].sw].applied < j->groups[g].version)
			return;
	j->state = MGR_JOB_READY;
	j->plan_ver++;
	j->ready_at = m->now();
	mgr_changed(m);
	if (j->plan <= 1)
		mgr_log("job %s ready: group %u on %d switch%s, %.1f ms after the last rank "
			"registered", j->id, j->group_id, j->ngroups, j->ngroups > 1 ? "es" : "",
			(j->ready_at - j->registered_at) * 1000.0);
	else
		mgr_log("job %s ready (plan %u): group %u on %d switch%s, %.1f ms after the plan",
			j->id, j->plan, j->group_id, j->ngroups, j->ngroups > 1 ? "es" : "",
			j->plan_at ? (j->ready_at - j->plan_at) * 1000.0 : 0.0);
}

/* The jobs marked rebuild_due have lost their tree (cause: what did it):
 * trees that avoid the failure, else the host ring. A job's rails marked
 * together are released together and planned once (all trees or all the
 * ring, as plans.c does for every change of a family). */
static void rebuild_marked(struct mgr *m, const char *cause)
{
	for (struct mgr_job *j = m->jobs; j; j = j->next) {
		struct mgr_job *f[MGR_MAX_RAILS], *was[MGR_MAX_RAILS];
		int n, k = 0;

		if (!j->rebuild_due)
			continue;
		n = mgr_job_family(m, j, f);
		for (int l = 0; l < n; l++)
			if (f[l] && f[l]->rebuild_due) {
				f[l]->rebuild_due = false;
				mgr_job_release(m, f[l]);
				was[k++] = f[l];
			}
		mgr_job_replan(m, j, true);
		for (int i = 0; i < k; i++)
			if (!was[i]->plan_ring)
				mgr_log("job %s: %s: a new tree (plan %u, group %u on %d switch%s)",
					was[i]->id, cause, was[i]->plan, was[i]->group_id,
					was[i]->ngroups, was[i]->ngroups > 1 ? "es" : "");
	}
}

void mgr_link_changed(struct mgr *m, int lower, int upper, bool down)
{
	const char *lo = m->topo.switches[lower].name, *up = m->topo.switches[upper].name;

	m->link_down[(size_t)lower * (size_t)m->topo.nswitches + (size_t)upper] = down;
	if (!down) {
		mgr_failure(m, lo, "link %s - %s back: %s reports its port towards %s up", lo, up,
			    lo, up);
		m->capacity_gen++;           /* jobs on the ring may have a tree again */
		return;
	}
	mgr_failure(m, lo, "link %s - %s down: %s reports its port towards %s down", lo, up, lo,
		    up);
	char cause[2 * MGR_NAME_LEN + 16];
	snprintf(cause, sizeof(cause), "link %s - %s down", lo, up);
	/* the jobs whose tree crosses it */
	for (struct mgr_job *j = m->jobs; j; j = j->next) {
		bool on = false;
		for (int k = 0; j->have_tree && k < j->tree.nnodes; k++) {
			const struct mgr_tree_node *nd = &j->tree.nodes[k];
			on |= nd->sw == lower && nd->parent >= 0 &&
			      j->tree.nodes[nd->parent].sw == upper;
		}
		j->rebuild_due = on;
	}
	rebuild_marked(m, cause);
}

void mgr_tick(struct mgr *m)
{
	double now = m->now();
	bool dirty = false;

	pthread_mutex_lock(&m->lock);
	for (int s = 0; s < m->topo.nswitches; s++) {
		struct mgr_switch_state *st = &m->sw[s];
		double since = st->last_seen ? st->last_seen : m->start_time;
		/* silent while the manager could listen: the time it spent
		 * handling requests since is not the switch's silence */
		double silent = now - since - (st->last_seen ? m->busy_s - st->busy_at_seen : 0);

		if (!st->up || silent <= m->dead_after_s)
			continue;
		st->up = false;
		if (!st->ever && !st->last_seen) {
			/* never heard of since start: down only if it holds groups */
			uint32_t slots, groups;
			mgr_switch_usage(m, s, &slots, &groups);
			if (!groups)
				continue;
		}
		mgr_failure(m, m->topo.switches[s].name, "switch down: no heartbeat for %.0f ms",
			(now - since) * 1000.0);
		char cause[MGR_NAME_LEN + 16];
		snprintf(cause, sizeof(cause), "switch %s down", m->topo.switches[s].name);
		/* its jobs */
		for (struct mgr_job *j = m->jobs; j; j = j->next) {
			bool on = false;
			for (int g = 0; g < j->ngroups; g++)
				on |= j->groups[g].sw == s;
			j->rebuild_due = on;
		}
		rebuild_marked(m, cause);
		dirty = true;
	}
	dirty |= mgr_jobs_stalled(m);
	dirty |= mgr_jobs_retry(m);
	for (struct mgr_job *j = m->jobs, *next; j; j = next) {
		next = j->next;
		if (j->parked)         /* a rank holding its state request is alive */
			j->lease_until = now + m->lease_s;
		if (j->lease_until && now > j->lease_until) {
			mgr_failure(m, j->id, "job removed: lease expired (no rank renewed it for %.0f s)",
				m->lease_s);
			mgr_job_teardown(m, j);
			dirty = true;
			continue;
		}
		enum mgr_job_state before = j->state;
		mgr_job_check_ready(m, j);
		dirty |= before != j->state;
	}
	if (dirty) {
		mgr_changed(m);
		mgr_save(m);
	}
	/* held requests whose time is up, or whose wait a change above ended */
	mgr_wake_due(m);
	pthread_mutex_unlock(&m->lock);
}
