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

/* A desired version or a job's state changed: wake the held requests. */
void mgr_changed(struct mgr *m)
{
	m->wakeups++;
	pthread_cond_broadcast(&m->changed);
}

void mgr_stop(struct mgr *m)
{
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_broadcast(&m->changed);
	pthread_mutex_unlock(&m->lock);
}

/*
 * Hold a request, m->lock released meanwhile, until done(m, arg) or
 * wait_ms pass (or the manager stops). Returns done's last answer.
 */
bool mgr_hold(struct mgr *m, long wait_ms, bool (*done)(struct mgr *, const void *),
	      const void *arg)
{
	struct timespec until;
	bool ok = done(m, arg);

	if (ok || wait_ms <= 0 || m->stopping)
		return ok;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += wait_ms / 1000;
	until.tv_nsec += (wait_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	m->polls_held++;
	m->polls_holding++;
	while (!ok && !m->stopping) {
		int rc = pthread_cond_timedwait(&m->changed, &m->lock, &until);
		ok = done(m, arg);
		if (rc == ETIMEDOUT)
			break;
	}
	m->polls_holding--;
	if (ok)
		m->polls_woken++;
	else
		m->polls_timed_out++;
	return ok;
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
