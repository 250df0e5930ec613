/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The manager object: start (settings, topology, the saved state), stop,
 * and the long-poll every held request waits in. Every desired-version or
 * job-state change broadcasts m->changed (mgr_changed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mgr.h"

/* A desired version or a job's state changed: the held requests are looked
 * at again before the lock is let go (mgr_api_request, mgr_tick). */
void mgr_changed(struct mgr *m)
{
	m->wakeups++;
}

void mgr_stop(struct mgr *m)
{
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	mgr_wake_due(m);
	pthread_mutex_unlock(&m->lock);
}

bool mgr_parked_done(struct mgr *m, const struct mgr_parked *p)
{
	const struct mgr_job *j = p->job;

	if (!j)
		return m->sw[p->sw].version != p->applied;
	if (p->plan_ver >= 0)
		return j->plan_ver != (uint32_t)p->plan_ver;
	return j->state == MGR_JOB_READY || j->state == MGR_JOB_RING ||
	       j->state == MGR_JOB_FAILED;
}

void mgr_park(struct mgr *m, struct mgr_parked *p, long wait_ms)
{
	struct mgr_parked **head = p->job ? &p->job->parked : &m->sw[p->sw].parked;

	p->parked = true;
	p->timed_out = false;
	p->wait_ms = wait_ms;
	p->until = m->now() + (double)wait_ms / 1000.0;
	p->next = *head;
	p->pprev = head;
	if (*head)
		(*head)->pprev = &p->next;
	*head = p;
	m->polls_held++;
	m->polls_holding++;
	if (p->hold)
		p->hold(p);
}

void mgr_unpark(struct mgr *m, struct mgr_parked *p, bool timed_out)
{
	if (!p->parked)
		return;
	*p->pprev = p->next;
	if (p->next)
		p->next->pprev = p->pprev;
	p->next = NULL;
	p->pprev = NULL;
	p->parked = false;
	p->timed_out = timed_out;
	m->polls_holding--;
	if (timed_out)
		m->polls_timed_out++;
	else
		m->polls_woken++;
	p->wake(p);
}

static void wake_list(struct mgr *m, struct mgr_parked *head, double now)
{
	for (struct mgr_parked *p = head, *next; p; p = next) {
		next = p->next;
		if (m->stopping || mgr_parked_done(m, p))
			mgr_unpark(m, p, false);
		else if (now >= p->until)
			mgr_unpark(m, p, true);
	}
}

void mgr_wake_due(struct mgr *m)
{
	double now = m->now();

	m->swept = m->wakeups;
	for (int s = 0; s < m->topo.nswitches; s++)
		wake_list(m, m->sw[s].parked, now);
	for (struct mgr_job *j = m->jobs; j; j = j->next) {
		if (!j->parked)
			continue;
		mgr_job_check_ready(m, j);
		wake_list(m, j->parked, now);
	}
}

int mgr_init(struct mgr *m, const char *topo_path, const char *db_path,
	     const char *admin_token, char *err, size_t errlen)
{
	pthread_condattr_t ca;

	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->changed, &ca);
	pthread_condattr_destroy(&ca);
	m->now = mgr_clock;
	m->dead_after_s = 1.0;
	m->lease_s = 60;
	m->default_window = 16;
	m->default_elems = 256;
	/* 0: "auto", each rank's libinca takes the largest IB MTU its path to
	 * the switch carries (docs/hostlib.md); a rank may ask for one */
	m->default_mtu = 0;
	m->next_group_id = 1000;
	char why[160];
	if (mgr_token_digest(admin_token, m->admin_hash, why, sizeof(why))) {
		snprintf(err, errlen, "admin token: %s", why);
		return -1;
	}
	if (mgr_topo_load(&m->topo, topo_path, err, errlen))
		return -1;
	m->sw = calloc((size_t)m->topo.nswitches, sizeof(*m->sw));
	m->link_down = calloc((size_t)m->topo.nswitches * (size_t)m->topo.nswitches, 1);
	if (!m->sw || !m->link_down) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int s = 0; s < m->topo.nswitches; s++)
		m->sw[s].up = true;   /* until it misses its first heartbeats */
	m->start_time = m->now();
	if (db_path) {
		snprintf(m->db_path, sizeof(m->db_path), "%s", db_path);
		if (mgr_load(m, err, errlen))
			return -1;
	}
	return 0;
}

void mgr_fini(struct mgr *m)
{
	while (m->jobs) {
		struct mgr_job *j = m->jobs;
		m->jobs = j->next;
		mgr_job_free(j);
	}
	for (int s = 0; m->sw && s < m->topo.nswitches; s++)
		json_decref(m->sw[s].counters);
	free(m->sw);
	free(m->link_down);
	mgr_topo_free(&m->topo);
	pthread_cond_destroy(&m->changed);
	if (m->db)
		mgr_db_close(m);
	free(m->gone);
}
