/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-manager's state and API: jobs register rank by rank; when all have,
 * the tree is built, slots are allocated within the switches' capacity and
 * the tenant's quota, the switches' desired group sets change (a version
 * per switch), and once every switch involved reports that version applied
 * the ranks get their group description. Switches heartbeat; one that
 * stops is marked down and the jobs using it failed. Everything that must
 * survive a restart is saved after each change (persist.c).
 *
 * Heartbeats and ranks' state requests may ask to be held (long-poll,
 * "wait_ms"): the request waits on m->changed, m->lock released, until the
 * switch's desired version differs from what it applied, or the job is
 * ready or failed. Every version or job state change broadcasts it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "mgr.h"

double mgr_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *mgr_job_state_name(enum mgr_job_state s)
{
	static const char *const n[] = { "waiting", "programming", "ready", "failed" };
	return s <= JOB_FAILED ? n[s] : "?";
}

static void failure(struct mgr *m, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void failure(struct mgr *m, const char *what, const char *fmt, ...)
{
	struct mgr_failure *f = &m->failures[m->nfailures++ % 256];
	va_list ap;

	f->t = m->now();
	snprintf(f->what, sizeof(f->what), "%s", what);
	va_start(ap, fmt);
	vsnprintf(f->reason, sizeof(f->reason), fmt, ap);
	va_end(ap);
	fprintf(stderr, "inca-manager: %s: %s\n", f->what, f->reason);
}

static void switch_usage(struct mgr *m, int s, uint32_t *slots, uint32_t *groups);

/* A desired version or a job's state changed: wake the held requests. */
static void changed(struct mgr *m)
{
	m->wakeups++;
	pthread_cond_broadcast(&m->changed);
}

static struct mgr_job *job_find(struct mgr *m, const char *id)
{
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		if (!strcmp(j->id, id))
			return j;
	return NULL;
}

void mgr_job_free(struct mgr_job *j);
static void job_free(struct mgr_job *j)
{
	free(j->ranks);
	free(j->groups);
	if (j->have_tree)
		mgr_tree_free(&j->tree);
	free(j);
}

void mgr_job_free(struct mgr_job *j)
{
	job_free(j);
}

/* Remove a job and its groups: the switches lose them at their next
 * heartbeat. */
static void job_teardown(struct mgr *m, struct mgr_job *j)
{
	for (struct mgr_job **p = &m->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	for (int g = 0; g < j->ngroups; g++)
		m->sw[j->groups[g].sw].version++;
	job_free(j);
	changed(m);
}

static void load_of(struct mgr *m, struct mgr_load *l, int tenant, uint32_t *tenant_slots)
{
	for (int s = 0; s < m->topo.nswitches; s++) {
		l->slots[s] = l->groups[s] = 0;
		l->down[s] = !m->sw[s].up;
		if (tenant_slots)
			tenant_slots[s] = 0;
	}
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int g = 0; g < j->ngroups; g++) {
			int s = j->groups[g].sw;
			l->slots[s] += j->window;
			l->groups[s]++;
			if (tenant_slots && j->tenant == tenant)
				tenant_slots[s] += j->window;
		}
}

static uint32_t free_qpn(struct mgr *m, int sw, const struct mgr_job *self)
{
	for (uint32_t q = 256;; q++) {
		bool used = false;
		for (struct mgr_job *j = m->jobs; j && !used; j = j->next)
			for (int g = 0; g < j->ngroups && !used; g++)
				used = j->groups[g].sw == sw && j->groups[g].qpn == q;
		for (int g = 0; self && g < self->ngroups && !used; g++)
			used = self->groups[g].sw == sw && self->groups[g].qpn == q;
		if (!used)
			return q;
	}
}

static uint32_t random_qkey(void)
{
	uint32_t k = 0;

	while (getrandom(&k, sizeof(k), 0) != sizeof(k))
		;
	return k & 0x7fffffffu;   /* the high bit means a privileged Q_Key */
}

/* All ranks are in: tree, quota, slots, groups. 0 or -1 with j->reason. */
static int job_allocate(struct mgr *m, struct mgr_job *j)
{
	int ns = m->topo.nswitches, *hosts = malloc(sizeof(int) * (size_t)j->size);
	uint32_t *slots = calloc((size_t)ns, 4), *groups = calloc((size_t)ns, 4);
	uint32_t *tslots = calloc((size_t)ns, 4);
	bool *down = calloc((size_t)ns, 1);
	struct mgr_load load = { slots, groups, down };
	const struct mgr_tenant *tn = &m->topo.tenants[j->tenant];
	int rc = -1;
	double t0;

	if (!hosts || !slots || !groups || !tslots || !down) {
		snprintf(j->reason, sizeof(j->reason), "out of memory");
		goto out;
	}
	for (int r = 0; r < j->size; r++)
		hosts[r] = j->ranks[r].host;
	load_of(m, &load, j->tenant, tslots);
	t0 = mgr_clock();
	rc = mgr_tree_build(&m->topo, hosts, j->size, &load, j->window, &j->tree, j->reason,
			    sizeof(j->reason));
	m->tree_builds++;
	m->tree_build_s_last = mgr_clock() - t0;
	if (m->tree_build_s_last > m->tree_build_s_max)
		m->tree_build_s_max = m->tree_build_s_last;
	if (rc)
		goto out;
	j->have_tree = true;
	j->ngroups = 1 + j->tree.nleaves;
	j->groups = calloc((size_t)j->ngroups, sizeof(*j->groups));
	if (!j->groups) {
		snprintf(j->reason, sizeof(j->reason), "out of memory");
		rc = -1;
		goto out;
	}
	j->groups[0] = (struct mgr_group){ .sw = j->tree.root, .parent = -1 };
	for (int i = 0; i < j->tree.nleaves; i++)
		j->groups[1 + i] = (struct mgr_group){ .sw = j->tree.leaves[i], .parent = 0,
							.rank_in_parent = (uint16_t)i };
	/* the tenant's quota on every switch of the tree */
	for (int g = 0; g < j->ngroups; g++) {
		int s = j->groups[g].sw;
		if (tslots[s] + j->window > tn->max_slots_per_switch) {
			snprintf(j->reason, sizeof(j->reason), "quota: tenant %s would use %u of "
				 "its %u slots on switch %s", tn->name, tslots[s] + j->window,
				 tn->max_slots_per_switch, m->topo.switches[s].name);
			rc = -1;
			goto out;
		}
	}
	j->group_id = m->next_group_id++;
	for (int g = 0; g < j->ngroups; g++) {
		struct mgr_group *gr = &j->groups[g];
		gr->qpn = free_qpn(m, gr->sw, j);
		gr->qkey = random_qkey();
		gr->version = ++m->sw[gr->sw].version;
	}
	j->state = JOB_PROGRAMMING;
	j->reason[0] = 0;
	rc = 0;
out:
	if (rc) {
		if (j->have_tree)
			mgr_tree_free(&j->tree);
		j->have_tree = false;
		free(j->groups);
		j->groups = NULL;
		j->ngroups = 0;
		j->state = JOB_FAILED;
	}
	free(hosts);
	free(slots);
	free(groups);
	free(tslots);
	free(down);
	changed(m);
	return rc;
}

static void job_check_ready(struct mgr *m, struct mgr_job *j)
{
	if (j->state != JOB_PROGRAMMING)
		return;
	for (int g = 0; g < j->ngroups; g++)
		if (m->sw[j->groups[g].sw].applied < j->groups[g].version)
			return;
	j->state = JOB_READY;
	j->ready_at = m->now();
	changed(m);
	fprintf(stderr, "inca-manager: job %s ready: group %u on %d switch%s, %.1f ms after "
		"the last rank registered\n", j->id, j->group_id, j->ngroups,
		j->ngroups > 1 ? "es" : "", (j->ready_at - j->registered_at) * 1000.0);
}

void mgr_tick(struct mgr *m)
{
	double now = m->now();
	bool dirty = false;

	pthread_mutex_lock(&m->lock);
	for (int s = 0; s < m->topo.nswitches; s++) {
		struct mgr_switch_state *st = &m->sw[s];
		double since = st->last_seen ? st->last_seen : m->start_time;

		if (!st->up || now - since <= m->dead_after_s)
			continue;
		st->up = false;
		if (!st->ever && !st->last_seen) {
			/* never heard of since start: down only if it holds groups */
			uint32_t slots, groups;
			switch_usage(m, s, &slots, &groups);
			if (!groups)
				continue;
		}
		failure(m, m->topo.switches[s].name, "switch down: no heartbeat for %.0f ms",
			(now - since) * 1000.0);
		for (struct mgr_job *j = m->jobs; j; j = j->next) {
			if (j->state == JOB_FAILED)
				continue;
			for (int g = 0; g < j->ngroups; g++)
				if (j->groups[g].sw == s) {
					j->state = JOB_FAILED;
					snprintf(j->reason, sizeof(j->reason), "switch %s of its tree "
						 "is down (no heartbeat for %.0f ms)",
						 m->topo.switches[s].name, (now - since) * 1000.0);
					failure(m, j->id, "job failed: %s", j->reason);
					break;
				}
		}
		dirty = true;
	}
	for (struct mgr_job *j = m->jobs, *next; j; j = next) {
		next = j->next;
		if (j->lease_until && now > j->lease_until) {
			failure(m, j->id, "job removed: lease expired (no rank renewed it for %.0f s)",
				m->lease_s);
			job_teardown(m, j);
			dirty = true;
			continue;
		}
		enum mgr_job_state before = j->state;
		job_check_ready(m, j);
		dirty |= before != j->state;
	}
	if (dirty) {
		changed(m);
		mgr_save(m);
	}
	pthread_mutex_unlock(&m->lock);
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
static bool hold(struct mgr *m, long wait_ms, bool (*done)(struct mgr *, const void *),
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
	if (!m->sw) {
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
		job_free(j);
	}
	for (int s = 0; m->sw && s < m->topo.nswitches; s++)
		json_decref(m->sw[s].counters);
	free(m->sw);
	mgr_topo_free(&m->topo);
	pthread_cond_destroy(&m->changed);
	if (m->db)
		mgr_db_close(m);
}

/* ---------------------------------------------------------------- API */

struct req {
	struct mgr *m;
	int tenant;          /* -1: admin */
	json_t *body;
	char **resp;
	const char **ctype;
};

static int reply(struct req *q, int status, json_t *j)
{
	*q->resp = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
	*q->ctype = "application/json";
	json_decref(j);
	if (status >= 400)
		q->m->requests_refused++;
	return status;
}

__attribute__((format(printf, 3, 4)))
static int error(struct req *q, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* the message may quote what the client sent (a path, a field):
	 * JSON strings are UTF-8, so anything else is shown as '?' rather
	 * than making the answer empty */
	for (char *c = msg; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			*c = '?';
	return reply(q, status, json_pack("{s:s, s:i}", "error", msg, "status", status));
}

static json_t *ipj(uint32_t ip)
{
	char b[16];
	mgr_ip_str(ip, b);
	return json_string(b);
}

/* The job's ranks under leaf sw, ascending: a leaf member's own rank, or
 * what a leaf stands for in the spine's group (docs/protocol.md, section
 * 4, "Ranks in a tree"; in general not consecutive). */
static json_t *ranks_under(const struct mgr_job *j, int sw)
{
	json_t *a = json_array();

	for (int r = 0; r < j->size; r++)
		if (j->tree.leaf_of_rank[r] == sw)
			json_array_append_new(a, json_integer(r));
	return a;
}

/* The groups a switch must hold, in the switch's config-file format, with
 * the ranks under every member (what the rooted collectives need). */
static json_t *switch_groups(struct mgr *m, int s)
{
	json_t *arr = json_array();

	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int g = 0; g < j->ngroups; g++) {
			const struct mgr_group *gr = &j->groups[g];
			json_t *mem, *o;

			if (gr->sw != s)
				continue;
			mem = json_array();
			if (g == 0 && j->tree.nleaves > 0) {
				for (int i = 0; i < j->tree.nleaves; i++)
					json_array_append_new(mem, json_pack("{s:o, s:i, s:i, s:o}",
						"ip", ipj(m->topo.switches[j->tree.leaves[i]].ip),
						"qpn", (int)j->groups[1 + i].qpn,
						"fanin", j->tree.leaf_fanin[i],
						"ranks", ranks_under(j, j->tree.leaves[i])));
			} else {
				for (int r = 0; r < j->size; r++)
					if (j->tree.leaf_of_rank[r] == gr->sw)
						json_array_append_new(mem, json_pack("{s:o, s:i, s:[i]}",
							"ip", ipj(j->ranks[r].ip),
							"qpn", (int)j->ranks[r].qpn, "ranks", r));
			}
			o = json_pack("{s:i, s:i, s:I, s:i, s:i, s:o}", "id", (int)j->group_id,
				      "qpn", (int)gr->qpn, "qkey", (json_int_t)gr->qkey,
				      "window", (int)j->window, "elems_per_pkt",
				      (int)j->elems_per_pkt, "members", mem);
			if (gr->parent >= 0) {
				const struct mgr_group *p = &j->groups[gr->parent];
				json_object_set_new(o, "parent", json_pack("{s:o, s:i, s:I, s:i}",
					"ip", ipj(m->topo.switches[p->sw].ip), "qpn", (int)p->qpn,
					"qkey", (json_int_t)p->qkey, "rank", gr->rank_in_parent));
			}
			json_array_append_new(arr, o);
		}
	return arr;
}

/* What rank r needs: libinca's group description. */
static json_t *rank_desc(struct mgr *m, struct mgr_job *j, int r)
{
	int leaf = j->tree.leaf_of_rank[r], g = 0;
	json_t *mem = json_array();

	for (int i = 0; i < j->ngroups; i++)
		if (j->groups[i].sw == leaf)
			g = i;
	for (int k = 0; k < j->size; k++) {
		json_t *o = json_pack("{s:o, s:i}", "ip", ipj(j->ranks[k].ip),
				      "qpn", (int)j->ranks[k].qpn);
		if (j->ranks[k].ring_ip)
			json_object_set_new(o, "ring_ip", ipj(j->ranks[k].ring_ip));
		if (j->ranks[k].ring_port)
			json_object_set_new(o, "ring_port", json_integer(j->ranks[k].ring_port));
		json_array_append_new(mem, o);
	}
	return json_pack("{s:o, s:i, s:i, s:I, s:i, s:i, s:i, s:i, s:o}",
			 "switch", ipj(m->topo.switches[leaf].ip), "group", (int)j->group_id,
			 "qpn", (int)j->groups[g].qpn, "qkey", (json_int_t)j->groups[g].qkey,
			 "window", (int)j->window, "elems_per_pkt", (int)j->elems_per_pkt,
			 "mtu", (int)j->mtu, "member_index", j->tree.index_in_leaf[r],
			 "members", mem);
}

static json_t *job_json(struct mgr *m, struct mgr_job *j, bool detail)
{
	int registered = 0;
	json_t *o;

	for (int r = 0; r < j->size; r++)
		registered += j->ranks[r].registered;
	o = json_pack("{s:s, s:s, s:i, s:i, s:s, s:s, s:i, s:i}", "id", j->id,
		      "tenant", m->topo.tenants[j->tenant].name, "size", j->size,
		      "registered", registered, "state", mgr_job_state_name(j->state),
		      "reason", j->reason, "group", (int)j->group_id, "window", (int)j->window);
	if (j->ngroups) {
		json_t *sws = json_array();
		for (int g = 0; g < j->ngroups; g++)
			json_array_append_new(sws, json_string(m->topo.switches[j->groups[g].sw].name));
		json_object_set_new(o, "switches", sws);
	}
	if (j->ready_at && j->registered_at)
		json_object_set_new(o, "setup_ms", json_real((j->ready_at - j->registered_at) * 1000.0));
	if (detail && j->ngroups) {
		json_t *tree = json_pack("{s:s, s:i, s:I}", "switch",
					 m->topo.switches[j->tree.root].name,
					 "qpn", (int)j->groups[0].qpn, "qkey",
					 (json_int_t)j->groups[0].qkey);
		json_t *children = json_array();
		for (int i = 0; i < j->tree.nleaves; i++) {
			json_t *ranks = json_array();
			for (int r = 0; r < j->size; r++)
				if (j->tree.leaf_of_rank[r] == j->tree.leaves[i])
					json_array_append_new(ranks, json_pack("{s:i, s:o, s:i}",
						"rank", r, "ip", ipj(j->ranks[r].ip), "qpn",
						(int)j->ranks[r].qpn));
			json_array_append_new(children, json_pack("{s:s, s:i, s:i, s:o}",
				"switch", m->topo.switches[j->tree.leaves[i]].name,
				"qpn", (int)j->groups[1 + i].qpn, "fanin", j->tree.leaf_fanin[i],
				"ranks", ranks));
		}
		if (!j->tree.nleaves) {
			json_t *ranks = json_array();
			for (int r = 0; r < j->size; r++)
				json_array_append_new(ranks, json_pack("{s:i, s:o, s:i}", "rank", r,
					"ip", ipj(j->ranks[r].ip), "qpn", (int)j->ranks[r].qpn));
			json_object_set_new(tree, "ranks", ranks);
		} else {
			json_object_set_new(tree, "children", children);
			children = NULL;
		}
		json_decref(children);
		json_object_set_new(o, "tree", tree);
	}
	return o;
}

static bool valid_id(const char *s)
{
	if (!*s || strlen(s) >= MGR_NAME_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

static int body_uint(json_t *b, const char *key, uint32_t min, uint32_t max, uint32_t def,
		     uint32_t *out)
{
	json_t *v = json_object_get(b, key);

	if (!v) {
		*out = def;
		return def == UINT32_MAX ? -1 : 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return -1;
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

static bool may_touch(struct req *q, struct mgr_job *j)
{
	return q->tenant < 0 || q->tenant == j->tenant;
}

static uint32_t ring_addr(const struct mgr_rank *rk)
{
	return rk->ring_ip ? rk->ring_ip : rk->ip;
}

/*
 * Who holds value v on address addr, besides rank self_rank of job self:
 * QPNs are per rank address, ring ports (ring) per ring address. Returns
 * the job (and *rank) or NULL.
 */
static struct mgr_job *value_holder(struct mgr *m, bool ring, uint32_t addr, uint32_t v,
				    const struct mgr_job *self, int self_rank, int *rank)
{
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int r = 0; r < j->size; r++) {
			const struct mgr_rank *rk = &j->ranks[r];
			if (!rk->registered || (j == self && r == self_rank))
				continue;
			if (ring ? ring_addr(rk) == addr && rk->ring_port == v :
				   rk->ip == addr && rk->qpn == v) {
				*rank = r;
				return j;
			}
		}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* The lowest value in first..max no other rank holds on addr: 0, or -1
 * when there is none (or no memory). */
static int value_free(struct mgr *m, bool ring, uint32_t addr, const struct mgr_job *self,
		      int self_rank, uint32_t first, uint32_t max, uint32_t *out)
{
	size_t n = 0, cap = 0;
	uint32_t *used = NULL, v = first;

	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int r = 0; r < j->size; r++) {
			const struct mgr_rank *rk = &j->ranks[r];
			if (!rk->registered || (j == self && r == self_rank) ||
			    (ring ? ring_addr(rk) : rk->ip) != addr)
				continue;
			if (n == cap) {
				uint32_t *u = realloc(used, sizeof(*used) * (cap = cap ? 2 * cap : 64));
				if (!u) {
					free(used);
					return -1;
				}
				used = u;
			}
			used[n++] = ring ? rk->ring_port : rk->qpn;
		}
	if (n)
		qsort(used, n, sizeof(*used), cmp_u32);
	for (size_t i = 0; i < n && v <= max; i++)
		if (used[i] == v)
			v++;
	free(used);
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

static int api_register(struct req *q, const char *id)
{
	struct mgr *m = q->m;
	struct mgr_job *j = job_find(m, id), *other;
	uint32_t rank, size, qpn = 0, ring_port = 0, ip, ring_ip = 0, window, elems, mtu;
	int tenant = q->tenant, host, who;
	const char *tname;
	char a[16];

	if (!valid_id(id))
		return error(q, 400, "job id: expected 1..47 characters of a-z A-Z 0-9 - _ .");
	if (!json_is_object(q->body))
		return error(q, 400, "body: expected a JSON object {rank, size, ip[, qpn, ring_port]}");
	if (body_uint(q->body, "size", 1, 1024, UINT32_MAX, &size))
		return error(q, 400, "size: expected 1..1024");
	if (body_uint(q->body, "rank", 0, size - 1, UINT32_MAX, &rank))
		return error(q, 400, "rank: expected 0..%u", size - 1);
	if (body_uint(q->body, "qpn", 2, 0xffffff, 0, &qpn))
		return error(q, 400, "qpn: expected 2..16777215 (or none: the manager assigns one)");
	if (body_uint(q->body, "ring_port", 1, 65535, 0, &ring_port))
		return error(q, 400, "ring_port: expected 1..65535 (or none: the manager assigns "
			     "one)");
	if (mgr_parse_ip(json_string_value(json_object_get(q->body, "ip")), &ip))
		return error(q, 400, "ip: expected the rank's IPv4 address");
	if (json_object_get(q->body, "ring_ip") &&
	    mgr_parse_ip(json_string_value(json_object_get(q->body, "ring_ip")), &ring_ip))
		return error(q, 400, "ring_ip: expected the IPv4 address of the rank's fallback "
			     "ring");
	if (body_uint(q->body, "window", 1, 4096, m->default_window, &window) ||
	    body_uint(q->body, "elems_per_pkt", 1, 2048, m->default_elems, &elems) ||
	    body_uint(q->body, "mtu", 0, 4096, m->default_mtu, &mtu))
		return error(q, 400, "window 1..4096, elems_per_pkt 1..2048, mtu 256..4096 "
			     "(0: auto)");
	host = mgr_topo_host_by_ip(&m->topo, ip);
	mgr_ip_str(ip, a);
	if (host < 0)
		return error(q, 400, "ip %s is not a host of the topology", a);
	if ((tname = json_string_value(json_object_get(q->body, "tenant")))) {
		int t = -1;
		for (int i = 0; i < m->topo.ntenants; i++)
			if (!strcmp(m->topo.tenants[i].name, tname))
				t = i;
		if (t < 0)
			return error(q, 400, "tenant '%s' is not in the topology", tname);
		if (q->tenant >= 0 && t != q->tenant)
			return error(q, 403, "your token is tenant %s's, not %s's",
				     m->topo.tenants[q->tenant].name, tname);
		tenant = t;
	}
	if (tenant < 0)
		return error(q, 400, "tenant: the admin token must name the job's tenant");
	if (!j) {
		unsigned njobs = 0;
		for (struct mgr_job *k = m->jobs; k; k = k->next)
			njobs += k->tenant == tenant;
		if (njobs >= m->topo.tenants[tenant].max_jobs)
			return error(q, 409, "quota: tenant %s has %u jobs, its maximum",
				     m->topo.tenants[tenant].name, njobs);
	} else {
		if (!may_touch(q, j))
			return error(q, 403, "job %s belongs to tenant %s", id,
				     m->topo.tenants[j->tenant].name);
		if ((int)size != j->size)
			return error(q, 409, "job %s has size %d, not %u", id, j->size, size);
		if (j->state == JOB_FAILED)
			return error(q, 409, "job %s failed: %s (delete it and create it again)",
				     id, j->reason);
		/* registering again keeps what the rank was given */
		struct mgr_rank *rk = &j->ranks[rank];
		if (rk->registered && rk->ip != ip)
			return error(q, 409, "job %s rank %u is registered with another address",
				     id, rank);
		if (rk->registered && qpn && rk->qpn != qpn)
			return error(q, 409, "qpn: job %s rank %u is registered with QPN %u", id,
				     rank, rk->qpn);
		if (rk->registered && ring_port && rk->ring_port && rk->ring_port != ring_port)
			return error(q, 409, "ring_port: job %s rank %u is registered with port %u",
				     id, rank, rk->ring_port);
		if (rk->registered) {
			qpn = rk->qpn;
			ring_port = ring_port ? ring_port : rk->ring_port;
		}
	}
	/* the QPN and ring port: the rank's own if free on its address, else one
	 * the manager picks */
	if (qpn && (other = value_holder(m, false, ip, qpn, j, (int)rank, &who)))
		return error(q, 409, "qpn: job %s rank %d already uses %s QPN %u", other->id, who,
			     a, qpn);
	if (!qpn && value_free(m, false, ip, j, (int)rank, MGR_QPN_FIRST, 0xffffff, &qpn))
		return error(q, 409, "qpn: no free QPN on %s", a);
	uint32_t raddr = ring_ip ? ring_ip : ip;
	char ra[16];
	mgr_ip_str(raddr, ra);
	if (ring_port && (other = value_holder(m, true, raddr, ring_port, j, (int)rank, &who)))
		return error(q, 409, "ring_port: job %s rank %d already uses %s port %u",
			     other->id, who, ra, ring_port);
	if (!ring_port && value_free(m, true, raddr, j, (int)rank, MGR_RING_PORT_FIRST, 65535,
				     &ring_port))
		return error(q, 409, "ring_port: no free TCP port on %s from %u up", ra,
			     MGR_RING_PORT_FIRST);
	if (!j) {
		j = calloc(1, sizeof(*j));
		if (!j || !(j->ranks = calloc(size, sizeof(*j->ranks)))) {
			free(j);
			return error(q, 500, "out of memory");
		}
		snprintf(j->id, sizeof(j->id), "%s", id);
		j->tenant = tenant;
		j->size = (int)size;
		j->window = window;
		j->elems_per_pkt = elems;
		j->mtu = mtu;
		j->created = m->now();
		j->next = m->jobs;
		m->jobs = j;
	}
	struct mgr_rank *rk = &j->ranks[rank];
	rk->registered = true;
	rk->ip = ip;
	rk->qpn = qpn;
	rk->ring_ip = ring_ip;
	rk->ring_port = ring_port;
	rk->host = host;
	j->lease_until = m->now() + m->lease_s;
	int n = 0;
	for (int r = 0; r < j->size; r++)
		n += j->ranks[r].registered;
	if (n == j->size && j->state == JOB_WAITING) {
		j->registered_at = m->now();
		if (job_allocate(m, j))
			failure(m, j->id, "job failed: %s", j->reason);
	}
	job_check_ready(m, j);
	mgr_save(m);
	json_t *o = job_json(m, j, false);
	json_object_set_new(o, "qpn", json_integer(qpn));
	json_object_set_new(o, "ring_port", json_integer(ring_port));
	/* a refusal says why where every refusal does, besides the job */
	if (j->state == JOB_FAILED)
		json_object_set_new(o, "error", json_string(j->reason[0] ? j->reason : "job failed"));
	return reply(q, j->state == JOB_FAILED ? 409 : 200, o);
}

/* A rank's state request is answered once its job is ready, failed or gone. */
static bool job_settled(struct mgr *m, const void *arg)
{
	struct mgr_job *j = job_find(m, arg);

	if (j)
		job_check_ready(m, j);
	return !j || j->state == JOB_READY || j->state == JOB_FAILED;
}

static int api_rank(struct req *q, const char *id, int r, long wait_ms)
{
	struct mgr_job *j;
	json_t *o;

	hold(q->m, wait_ms, job_settled, id);
	/* held: the job may have gone, or come back as another */
	j = job_find(q->m, id);
	if (!j || r >= j->size || !may_touch(q, j))
		return error(q, 404, "job %s was deleted while the request waited", id);
	o = json_pack("{s:s, s:s}", "state", mgr_job_state_name(j->state), "reason", j->reason);
	if (j->state == JOB_READY)
		json_object_set_new(o, "group", rank_desc(q->m, j, r));
	return reply(q, 200, o);
}

struct switch_wait {
	int s;
	uint32_t applied;
};

/* A heartbeat is answered once the switch has something new to apply. */
static bool switch_behind(struct mgr *m, const void *arg)
{
	const struct switch_wait *w = arg;

	return m->sw[w->s].version != w->applied;
}

static int api_heartbeat(struct req *q, const char *name)
{
	struct mgr *m = q->m;
	int s = mgr_topo_switch_by_name(&m->topo, name);
	struct mgr_switch_state *st;
	uint32_t applied, wait_ms;
	const char *e;
	bool ready = false;

	if (s < 0)
		return error(q, 404, "switch '%s' is not in the topology", name);
	if (q->tenant >= 0)
		return error(q, 403, "heartbeats need the admin token");
	if (!json_is_object(q->body) || body_uint(q->body, "applied", 0, UINT32_MAX - 1, 0, &applied))
		return error(q, 400, "body: expected {\"applied\": VERSION, ...}");
	if (body_uint(q->body, "wait_ms", 0, MGR_WAIT_MS_MAX, 0, &wait_ms))
		return error(q, 400, "wait_ms: expected 0..%d", MGR_WAIT_MS_MAX);
	st = &m->sw[s];
	if (json_object_get(q->body, "ip")) {
		uint32_t ip;
		char a[16], b[16];
		if (mgr_parse_ip(json_string_value(json_object_get(q->body, "ip")), &ip))
			return error(q, 400, "ip: expected the switch's IPv4 address");
		if (ip != m->topo.switches[s].ip) {
			mgr_ip_str(ip, a);
			mgr_ip_str(m->topo.switches[s].ip, b);
			return error(q, 409, "switch %s reports address %s, the topology says %s",
				     name, a, b);
		}
	}
	if (!st->up || !st->ever) {
		fprintf(stderr, "inca-manager: switch %s %s\n", name,
			st->ever ? "is back" : "registered");
		if (!st->up)
			failure(m, name, "switch back: heartbeats again");
	}
	st->up = true;
	st->ever = true;
	st->last_seen = m->now();
	st->applied = applied;
	e = json_string_value(json_object_get(q->body, "error"));
	snprintf(st->last_error, sizeof(st->last_error), "%s", e ? e : "");
	json_decref(st->counters);
	st->counters = json_incref(json_object_get(q->body, "counters"));
	for (struct mgr_job *j = m->jobs; j; j = j->next) {
		bool before = j->state == JOB_READY;
		job_check_ready(m, j);
		ready |= !before && j->state == JOB_READY;
	}
	if (ready)
		mgr_save(m);
	/* long-poll: a live switch is never held past half its dead time, so
	 * liveness stays what the heartbeats' arrival says */
	if (wait_ms > m->dead_after_s * 500.0)
		wait_ms = (uint32_t)(m->dead_after_s * 500.0);
	struct switch_wait w = { s, applied };
	hold(m, (long)wait_ms, switch_behind, &w);
	return reply(q, 200, json_pack("{s:i, s:o}", "version", (int)st->version, "groups",
				       switch_groups(m, s)));
}

/* Slots and groups the jobs hold on switch s. */
static void switch_usage(struct mgr *m, int s, uint32_t *slots, uint32_t *groups)
{
	*slots = *groups = 0;
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int g = 0; g < j->ngroups; g++)
			if (j->groups[g].sw == s) {
				*slots += j->window;
				(*groups)++;
			}
}

/* One switch as /v1/switches and /v1/topology show it. */
static json_t *switch_json(struct mgr *m, int s, bool counters)
{
	const struct mgr_switch *sw = &m->topo.switches[s];
	struct mgr_switch_state *st = &m->sw[s];
	uint32_t slots, groups;
	json_t *o;

	switch_usage(m, s, &slots, &groups);
	o = json_pack("{s:s, s:s, s:o, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:s}",
		"name", sw->name, "role", sw->role == MGR_LEAF ? "leaf" : "spine",
		"ip", ipj(sw->ip),
		"state", !st->ever ? (st->up ? "unknown" : "down") : st->up ? "up" : "down",
		"groups", (int)groups, "max_groups", (int)sw->max_groups,
		"slots", (int)slots, "max_slots", (int)sw->max_slots,
		"version", (int)st->version, "applied", (int)st->applied,
		"error", st->last_error);
	if (st->last_seen)
		json_object_set_new(o, "last_heartbeat_ms",
				    json_integer((json_int_t)((m->now() - st->last_seen) * 1000)));
	if (counters && st->counters)
		json_object_set(o, "counters", st->counters);
	return o;
}

static int api_switches(struct req *q)
{
	json_t *arr = json_array();

	for (int s = 0; s < q->m->topo.nswitches; s++)
		json_array_append_new(arr, switch_json(q->m, s, true));
	return reply(q, 200, arr);
}

/* The last n failures, oldest first. */
static json_t *failures_json(struct mgr *m, unsigned n)
{
	json_t *arr = json_array();
	unsigned kept = m->nfailures < 256 ? m->nfailures : 256;
	unsigned first = m->nfailures - (n < kept ? n : kept);

	for (unsigned i = first; i < m->nfailures; i++) {
		struct mgr_failure *f = &m->failures[i % 256];
		json_array_append_new(arr, json_pack("{s:f, s:s, s:s}", "time", f->t,
						     "what", f->what, "reason", f->reason));
	}
	return arr;
}

/* Everything the topology view draws, in one answer: switches with state
 * and load, hosts, links, the jobs the token may see with their trees, the
 * recent failures. */
static int api_topology(struct req *q)
{
	struct mgr *m = q->m;
	json_t *sws = json_array(), *hosts = json_array(), *links = json_array();
	json_t *jobs = json_array();

	for (int s = 0; s < m->topo.nswitches; s++)
		json_array_append_new(sws, switch_json(m, s, false));
	for (int h = 0; h < m->topo.nhosts; h++)
		json_array_append_new(hosts, json_pack("{s:s, s:o, s:s}", "name",
			m->topo.hosts[h].name, "ip", ipj(m->topo.hosts[h].ip), "leaf",
			m->topo.switches[m->topo.hosts[h].leaf].name));
	for (int l = 0; l < m->topo.nswitches; l++)
		for (int s = 0; s < m->topo.nswitches; s++)
			if (mgr_linked(&m->topo, l, s))
				json_array_append_new(links, json_pack("{s:s, s:s}", "leaf",
					m->topo.switches[l].name, "spine", m->topo.switches[s].name));
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		if (may_touch(q, j))
			json_array_append_new(jobs, job_json(m, j, true));
	return reply(q, 200, json_pack("{s:f, s:o, s:o, s:o, s:o, s:o}", "time", m->now(),
		"switches", sws, "hosts", hosts, "links", links, "jobs", jobs,
		"failures", failures_json(m, 20)));
}

static int api_metrics(struct req *q)
{
	struct mgr *m = q->m;
	size_t cap = 65536, len = 0;
	char *b = malloc(cap);
	unsigned jobs[4] = { 0 };

#define P(...) do { if (len < cap) len += (size_t)snprintf(b + len, cap - len, __VA_ARGS__); } while (0)
	if (!b)
		return 500;
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		jobs[j->state]++;
	P("# HELP inca_manager_jobs Jobs by state.\n# TYPE inca_manager_jobs gauge\n");
	for (int s = 0; s < 4; s++)
		P("inca_manager_jobs{state=\"%s\"} %u\n", mgr_job_state_name((enum mgr_job_state)s),
		  jobs[s]);
	P("# HELP inca_manager_switch_up Whether the switch heartbeats.\n"
	  "# TYPE inca_manager_switch_up gauge\n");
	for (int s = 0; s < m->topo.nswitches; s++)
		P("inca_manager_switch_up{switch=\"%s\"} %d\n", m->topo.switches[s].name,
		  m->sw[s].up && m->sw[s].ever);
	P("# HELP inca_manager_switch_slots_used Slots allocated on the switch.\n"
	  "# TYPE inca_manager_switch_slots_used gauge\n");
	for (int s = 0; s < m->topo.nswitches; s++) {
		uint32_t slots, groups;
		switch_usage(m, s, &slots, &groups);
		P("inca_manager_switch_slots_used{switch=\"%s\"} %u\n", m->topo.switches[s].name,
		  slots);
	}
	P("# HELP inca_manager_requests_total API requests.\n# TYPE inca_manager_requests_total counter\n"
	  "inca_manager_requests_total %llu\n", (unsigned long long)m->requests);
	P("# HELP inca_manager_requests_refused_total API requests answered 4xx/5xx.\n"
	  "# TYPE inca_manager_requests_refused_total counter\n"
	  "inca_manager_requests_refused_total %llu\n", (unsigned long long)m->requests_refused);
	P("# HELP inca_manager_failures_total Failures recorded (switches down, jobs failed).\n"
	  "# TYPE inca_manager_failures_total counter\ninca_manager_failures_total %u\n",
	  m->nfailures);
	P("# HELP inca_manager_tree_builds_total Trees built.\n"
	  "# TYPE inca_manager_tree_builds_total counter\ninca_manager_tree_builds_total %llu\n",
	  (unsigned long long)m->tree_builds);
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

int mgr_api(struct mgr *m, const char *method, const char *path, const char *token,
	    const char *body, char **resp, const char **ctype)
{
	struct req q = { .m = m, .tenant = -2, .resp = resp, .ctype = ctype };
	char id[MGR_NAME_LEN + 1], sub[MGR_NAME_LEN + 1], pbuf[256];
	const char *query;
	long wait_ms = 0;
	json_error_t jerr;
	unsigned r;
	int n = 0, status;

	*resp = NULL;
	pthread_mutex_lock(&m->lock);
	m->requests++;
	if (!strcmp(path, "/healthz")) {
		status = reply(&q, 200, json_pack("{s:s}", "status", "ok"));
		goto out;
	}
	if (!token || !*token) {
		status = error(&q, 401, "missing bearer token (Authorization: Bearer TOKEN)");
		goto out;
	}
	/* digests compared in constant time: neither the secrets nor how
	 * much of one a guess got right are ever at hand */
	if (mgr_token_matches(token, m->admin_hash))
		q.tenant = -1;
	for (int t = 0; t < m->topo.ntenants && q.tenant == -2; t++)
		if (mgr_token_matches(token, m->topo.tenants[t].token_hash))
			q.tenant = t;
	if (q.tenant == -2) {
		status = error(&q, 401, "invalid token");
		goto out;
	}
	if (body && *body) {
		q.body = json_loads(body, JSON_REJECT_DUPLICATES, &jerr);
		if (!q.body) {
			status = error(&q, 400, "body: line %d column %d: %s", jerr.line, jerr.column,
				       jerr.text);
			goto out;
		}
	}
	/* the query: only wait_ms (a rank's state request may be held) */
	if ((query = strchr(path, '?'))) {
		size_t len = (size_t)(query - path);
		if (len >= sizeof(pbuf)) {
			status = error(&q, 404, "no such resource: path too long");
			goto out;
		}
		memcpy(pbuf, path, len);
		pbuf[len] = 0;
		path = pbuf;
		for (const char *p = query + 1; *p; p += strcspn(p, "&"), p += *p == '&') {
			char *end;
			if (strncmp(p, "wait_ms=", 8))
				continue;
			errno = 0;
			wait_ms = strtol(p + 8, &end, 10);
			if (errno || end == p + 8 || (*end && *end != '&') || wait_ms < 0 ||
			    wait_ms > MGR_WAIT_MS_MAX) {
				status = error(&q, 400, "wait_ms: expected 0..%d milliseconds",
					       MGR_WAIT_MS_MAX);
				goto out;
			}
		}
	}

	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST"),
	     del = !strcmp(method, "DELETE");
	if (get && !strcmp(path, "/metrics")) {
		status = api_metrics(&q);
	} else if (get && !strcmp(path, "/v1/topology")) {
		status = api_topology(&q);
	} else if (get && !strcmp(path, "/v1/switches")) {
		status = api_switches(&q);
	} else if (post && sscanf(path, "/v1/switches/%48[^/]/heartbeat%n", id, &n) == 1 &&
		   !path[n]) {
		status = api_heartbeat(&q, id);
	} else if (get && !strcmp(path, "/v1/jobs")) {
		json_t *arr = json_array();
		for (struct mgr_job *j = m->jobs; j; j = j->next)
			if (may_touch(&q, j))
				json_array_append_new(arr, job_json(m, j, false));
		status = reply(&q, 200, arr);
	} else if (get && !strcmp(path, "/v1/failures")) {
		status = reply(&q, 200, failures_json(m, 256));
	} else if (get && !strcmp(path, "/v1/groups")) {
		json_t *o = json_object();
		for (int s = 0; s < m->topo.nswitches; s++)
			json_object_set_new(o, m->topo.switches[s].name, switch_groups(m, s));
		status = reply(&q, 200, o);
	} else if (post && sscanf(path, "/v1/jobs/%48[^/]/ranks%n", id, &n) == 1 && !path[n]) {
		status = api_register(&q, id);
	} else if (sscanf(path, "/v1/jobs/%48[^/]%n", id, &n) == 1) {
		struct mgr_job *j = job_find(m, id);
		const char *rest = path + n;

		if (!j) {
			status = error(&q, 404, "no job '%s'", id);
		} else if (!may_touch(&q, j)) {
			status = error(&q, 403, "job %s belongs to tenant %s", id,
				       m->topo.tenants[j->tenant].name);
		} else if (!*rest && get) {
			status = reply(&q, 200, job_json(m, j, true));
		} else if (!*rest && del) {
			fprintf(stderr, "inca-manager: job %s deleted\n", id);
			job_teardown(m, j);
			mgr_save(m);
			status = reply(&q, 200, json_pack("{s:s}", "deleted", id));
		} else if (!strcmp(rest, "/renew") && post) {
			j->lease_until = m->now() + m->lease_s;
			status = reply(&q, 200, json_pack("{s:s, s:s, s:f}", "state",
				       mgr_job_state_name(j->state), "reason", j->reason,
				       "lease_s", m->lease_s));
		} else if (sscanf(rest, "/ranks/%u%n", &r, &n) == 1 && (int)r < j->size) {
			const char *tail = rest + n;
			if (!*tail && get) {
				status = api_rank(&q, id, (int)r, wait_ms);
			} else if (!strcmp(tail, "/leave") && post) {
				bool all = true;
				j->ranks[r].left = true;
				for (int k = 0; k < j->size; k++)
					all &= j->ranks[k].left || !j->ranks[k].registered;
				if (all) {
					fprintf(stderr, "inca-manager: job %s: every rank left\n", id);
					job_teardown(m, j);
				}
				mgr_save(m);
				status = reply(&q, 200, json_pack("{s:b}", "removed", all));
			} else {
				status = error(&q, 404, "no such resource: %s %s", method, path);
			}
		} else {
			(void)sub;
			status = error(&q, 404, "no such resource: %s %s", method, path);
		}
	} else {
		status = error(&q, 404, "no such resource: %s %s", method, path);
	}
out:
	json_decref(q.body);
	pthread_mutex_unlock(&m->lock);
	return status;
}
