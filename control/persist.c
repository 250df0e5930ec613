/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The manager's durable state as rows in SQLite:
 *
 *   meta      (key, value)              format, next_group_id
 *   switches  (name, version)           each switch's desired version
 *   jobs      (id, tenant, size, ...)   one row a job, with its plan and cut
 *   ranks     (job, rank, ...)          a rank's address, QPN, ring port, leaf,
 *                                       its answer to the plan
 *   groups    (job, idx, switch, ...)   a job's group on a switch: its QPN,
 *                                       Q_Key, parent, version and the slots
 *                                       it holds (the allocation)
 *   past_plans (job, idx, epoch, ...)   the job's last plans cut and then
 *                                       replaced, oldest first (plans.c)
 *   failures  (seq, time, what, reason) the last MGR_FAILURES_KEPT
 *
 * mgr_save brings the rows up to date in one transaction: the jobs whose
 * content changed since they were last written (a signature of their
 * fields tells), the jobs removed, the versions that moved, the new
 * failures. A commit is all of a change or none of it, so a manager killed
 * at any moment restarts on a consistent state: every group row of a live
 * job, at a version its switch's row covers. Every state change is saved
 * before its request is answered, so a switch never holds a group the
 * database does not; on restart the desired versions move on by one, so
 * every agent takes the manager's group set again (the reconcile).
 *
 * WAL with synchronous=NORMAL: a commit is in the log before the request is
 * answered, so a manager that crashes or is killed loses nothing; the log
 * is synced at checkpoints, not per commit (FULL: an fsync per request,
 * milliseconds on real disks). Only a crash of the machine itself may lose
 * the last commits; the heartbeat's reconcile covers that too (a switch
 * ahead of the manager is moved past).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "mgr.h"

/* 3: jobs' rails and cut_ver, past_plans; a format-2 file is brought to 3
 * at start (its jobs are jobs of their own, with no past plans kept), and
 * a manager that reads only 2 then refuses it with that reason instead of
 * failing every save */
#define FORMAT 3

static const char schema[] =
	"PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
	"CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS switches (name TEXT PRIMARY KEY,"
	" version INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, tenant TEXT NOT NULL,"
	" size INTEGER NOT NULL, state INTEGER NOT NULL, reason TEXT NOT NULL,"
	" group_id INTEGER NOT NULL, window INTEGER NOT NULL, elems_per_pkt INTEGER NOT NULL,"
	" mtu INTEGER NOT NULL, created REAL NOT NULL, lease_until REAL NOT NULL,"
	" ready_at REAL NOT NULL, registered_at REAL NOT NULL, plan INTEGER NOT NULL,"
	" plan_ring INTEGER NOT NULL, plan_dead INTEGER NOT NULL, cut_done INTEGER NOT NULL,"
	" cut_seq INTEGER NOT NULL, cut_from INTEGER NOT NULL, plan_ver INTEGER NOT NULL,"
	" cut_error TEXT NOT NULL, retry_at REAL NOT NULL,"
	" rails INTEGER NOT NULL DEFAULT 0, rail INTEGER NOT NULL DEFAULT 0,"
	" cut_ver INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE IF NOT EXISTS ranks (job TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, registered INTEGER NOT NULL, has_left INTEGER NOT NULL,"
	" ip INTEGER NOT NULL, qpn INTEGER NOT NULL, ring_ip INTEGER NOT NULL,"
	" ring_port INTEGER NOT NULL, node INTEGER NOT NULL, member_index INTEGER NOT NULL,"
	" ack_plan INTEGER NOT NULL, ack_next INTEGER NOT NULL, ack_first INTEGER NOT NULL,"
	" ack_keep INTEGER NOT NULL, PRIMARY KEY (job, rank));"
	"CREATE TABLE IF NOT EXISTS groups (job TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" idx INTEGER NOT NULL, switch TEXT NOT NULL, qpn INTEGER NOT NULL, qkey INTEGER NOT NULL,"
	" parent INTEGER NOT NULL, rank_in_parent INTEGER NOT NULL, version INTEGER NOT NULL,"
	" slots INTEGER NOT NULL, PRIMARY KEY (job, idx));"
	"CREATE TABLE IF NOT EXISTS failures (seq INTEGER PRIMARY KEY, time REAL NOT NULL,"
	" what TEXT NOT NULL, reason TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS past_plans (job TEXT NOT NULL REFERENCES jobs(id)"
	" ON DELETE CASCADE, idx INTEGER NOT NULL, epoch INTEGER NOT NULL,"
	" cut_seq INTEGER NOT NULL, cut_from INTEGER NOT NULL, cut_ver INTEGER NOT NULL,"
	" ring INTEGER NOT NULL, dead INTEGER NOT NULL, cut_error TEXT NOT NULL,"
	" reason TEXT NOT NULL, PRIMARY KEY (job, idx));";

void mgr_db_close(struct mgr *m)
{
	for (size_t i = 0; i < sizeof(m->stmt) / sizeof(m->stmt[0]); i++) {
		sqlite3_finalize(m->stmt[i]);
		m->stmt[i] = NULL;
		m->stmt_sql[i] = NULL;
	}
	sqlite3_close(m->db);
	m->db = NULL;
}

void mgr_persist_gone(struct mgr *m, const char *id)
{
	if (!m->db_path[0])
		return;
	if (m->ngone == m->gone_cap) {
		int cap = m->gone_cap ? 2 * m->gone_cap : 16;
		void *g = realloc(m->gone, sizeof(*m->gone) * (size_t)cap);
		if (!g) {
			mgr_log("cannot note job %s's removal: out of memory", id);
			return;
		}
		m->gone = g;
		m->gone_cap = cap;
	}
	snprintf(m->gone[m->ngone++], MGR_NAME_LEN, "%s", id);
}

/* FNV-1a over a job's own fields and groups (and its ranks' place in the
 * tree): whether its job and group rows, and then all its rank rows, need
 * rewriting. A rank's own fields (registration, leave, acknowledgement)
 * are written alone, from the job's dirty range (mgr_rank_touched). The
 * lease is not in it: it moves with every poll, and a restarted manager
 * gives every job a whole lease (mgr_load). */
static void fnv(uint64_t *h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ b[i]) * 0x100000001b3ull;
}
#define FNV(h, v) fnv(h, &(v), sizeof(v))

static uint64_t job_sig(const struct mgr_job *j)
{
	uint64_t h = 0xcbf29ce484222325ull;

	fnv(&h, j->reason, strlen(j->reason));
	FNV(&h, j->state);
	FNV(&h, j->group_id);
	FNV(&h, j->ready_at);
	FNV(&h, j->registered_at);
	FNV(&h, j->ngroups);
	fnv(&h, j->cut_error, strlen(j->cut_error));
	FNV(&h, j->plan);
	FNV(&h, j->plan_ring);
	FNV(&h, j->plan_dead);
	FNV(&h, j->cut_done);
	FNV(&h, j->cut_seq);
	FNV(&h, j->cut_from);
	FNV(&h, j->plan_ver);
	FNV(&h, j->retry_at);
	FNV(&h, j->nrails);
	FNV(&h, j->rail);
	FNV(&h, j->cut_ver);
	/* its past plans: one is added (or the oldest goes) only as a plan
	 * begins, which moves plan_ver too; their count and the newest say it */
	FNV(&h, j->npast);
	if (j->npast)
		FNV(&h, j->past[j->npast - 1].epoch);
	/* the ranks' places in the tree: a new tree is a new group id */
	FNV(&h, j->have_tree);
	for (int g = 0; g < j->ngroups; g++) {
		const struct mgr_group *gr = &j->groups[g];
		FNV(&h, gr->sw);
		FNV(&h, gr->qpn);
		FNV(&h, gr->qkey);
		FNV(&h, gr->version);
		FNV(&h, gr->parent);
		FNV(&h, gr->rank_in_parent);
	}
	return h | 1;   /* never 0: 0 is "no rows" */
}

static int exec(struct mgr *m, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(m->db, sql, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	mgr_log("state %s: %s: %s", m->db_path, sql, msg ? msg : sqlite3_errmsg(m->db));
	sqlite3_free(msg);
	return -1;
}

/* Prepare sql, bind the values fmt lists (i: int64, d: double, s: text),
 * step once. 0, or -1 (logged). */
static int run(struct mgr *m, const char *sql, const char *fmt, ...)
{
	sqlite3_stmt *st = NULL;
	va_list ap;
	int rc = -1, k = 1;
	size_t slot = 0, n = sizeof(m->stmt) / sizeof(m->stmt[0]);

	/* prepared once per statement (sql is a literal): a replan writes a
	 * row per rank */
	while (slot < n && m->stmt_sql[slot] && m->stmt_sql[slot] != sql)
		slot++;
	if (slot < n && m->stmt_sql[slot]) {
		st = m->stmt[slot];
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	} else if (sqlite3_prepare_v3(m->db, sql, -1, slot < n ? SQLITE_PREPARE_PERSISTENT : 0,
				      &st, NULL) != SQLITE_OK) {
		goto out;
	} else if (slot < n) {
		m->stmt[slot] = st;
		m->stmt_sql[slot] = sql;
	}
	va_start(ap, fmt);
	for (const char *f = fmt; *f; f++, k++) {
		int b = *f == 'i' ? sqlite3_bind_int64(st, k, va_arg(ap, long long)) :
			*f == 'd' ? sqlite3_bind_double(st, k, va_arg(ap, double)) :
			sqlite3_bind_text(st, k, va_arg(ap, const char *), -1, SQLITE_TRANSIENT);
		if (b != SQLITE_OK) {
			va_end(ap);
			goto out;
		}
	}
	va_end(ap);
	if (sqlite3_step(st) == SQLITE_DONE)
		rc = 0;
out:
	if (rc)
		mgr_log("state %s: %s: %s", m->db_path, sql, sqlite3_errmsg(m->db));
	if (st && slot >= n)
		sqlite3_finalize(st);
	else if (st)
		sqlite3_reset(st);
	return rc;
}

static int rank_write(struct mgr *m, const struct mgr_job *j, int r)
{
	const struct mgr_rank *rk = &j->ranks[r];

	return run(m, "INSERT OR REPLACE INTO ranks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		   "siiiiiiiiiiiii", j->id, (long long)r, (long long)rk->registered,
		   (long long)rk->left, (long long)rk->ip, (long long)rk->qpn,
		   (long long)rk->ring_ip, (long long)rk->ring_port,
		   (long long)(j->have_tree ? j->tree.node_of_rank[r] : -1),
		   (long long)(j->have_tree ? j->tree.index_in_leaf[r] : -1),
		   (long long)rk->ack_plan, (long long)rk->ack_next, (long long)rk->ack_first,
		   (long long)rk->ack_keep);
}

/* The job's rows: new (no rows yet: all of them), changed (sig: the job's
 * row updated, its groups and every rank rewritten), or only the ranks of
 * its dirty range. */
static int job_write(struct mgr *m, const struct mgr_job *j, uint64_t sig)
{
	static const char update[] = "UPDATE jobs SET tenant = ?2, size = ?3, state = ?4, "
		"reason = ?5, group_id = ?6, window = ?7, elems_per_pkt = ?8, mtu = ?9, "
		"created = ?10, lease_until = ?11, ready_at = ?12, registered_at = ?13, "
		"plan = ?14, plan_ring = ?15, plan_dead = ?16, cut_done = ?17, cut_seq = ?18, "
		"cut_from = ?19, plan_ver = ?20, cut_error = ?21, retry_at = ?22, rails = ?23, "
		"rail = ?24, cut_ver = ?25 WHERE id = ?1";
	static const char insert[] = "INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
		"?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
	const char *sql = j->saved_sig ? update : insert;
	int lo = j->dirty_lo, hi = j->dirty_hi;

	if (sig != j->saved_sig) {
		if ((!j->saved_sig && run(m, "DELETE FROM jobs WHERE id = ?", "s", j->id)) ||
		    run(m, sql, "ssiisiiiiddddiiiiiiisdiii", j->id, m->topo.tenants[j->tenant].name,
			(long long)j->size, (long long)j->state, j->reason, (long long)j->group_id,
			(long long)j->window, (long long)j->elems_per_pkt, (long long)j->mtu,
			j->created, j->lease_until, j->ready_at, j->registered_at,
			(long long)j->plan, (long long)j->plan_ring, (long long)j->plan_dead,
			(long long)j->cut_done, (long long)j->cut_seq, (long long)j->cut_from,
			(long long)j->plan_ver, j->cut_error, j->retry_at, (long long)j->nrails,
			(long long)j->rail, (long long)j->cut_ver) ||
		    run(m, "DELETE FROM groups WHERE job = ?", "s", j->id) ||
		    run(m, "DELETE FROM past_plans WHERE job = ?", "s", j->id))
			return -1;
		for (int k = 0; k < j->npast; k++) {
			const struct mgr_past_plan *pp = &j->past[k];
			if (run(m, "INSERT INTO past_plans VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
				"siiiiiiiss", j->id, (long long)k, (long long)pp->epoch,
				(long long)pp->cut_seq, (long long)pp->cut_from,
				(long long)pp->cut_ver, (long long)pp->ring, (long long)pp->dead,
				pp->cut_error, pp->reason))
				return -1;
		}
		for (int g = 0; g < j->ngroups; g++) {
			const struct mgr_group *gr = &j->groups[g];
			if (run(m, "INSERT INTO groups VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", "sisiiiiii",
				j->id, (long long)g, m->topo.switches[gr->sw].name,
				(long long)gr->qpn, (long long)gr->qkey, (long long)gr->parent,
				(long long)gr->rank_in_parent, (long long)gr->version,
				(long long)j->window))
				return -1;
		}
		lo = 0;
		hi = j->size - 1;
	}
	for (int r = lo; r >= 0 && r <= hi; r++)
		if (rank_write(m, j, r))
			return -1;
	return 0;
}

static int db_open(struct mgr *m, char *err, size_t errlen)
{
	char *msg = NULL;

	if (m->db)
		return 0;
	if (sqlite3_open(m->db_path, (sqlite3 **)&m->db) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", m->db_path, sqlite3_errmsg(m->db));
		mgr_db_close(m);
		return -1;
	}
	sqlite3_busy_timeout(m->db, 5000);
	if (sqlite3_exec(m->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", m->db_path, msg ? msg : "cannot create the tables");
		sqlite3_free(msg);
		mgr_db_close(m);
		return -1;
	}
	/* a file from before rails (its jobs are jobs of their own) and
	 * before past plans were kept (none kept) */
	static const char *const added[][2] = {
		{ "rails", "ALTER TABLE jobs ADD COLUMN rails INTEGER NOT NULL DEFAULT 0" },
		{ "rail", "ALTER TABLE jobs ADD COLUMN rail INTEGER NOT NULL DEFAULT 0" },
		{ "cut_ver", "ALTER TABLE jobs ADD COLUMN cut_ver INTEGER NOT NULL DEFAULT 0" },
	};
	for (size_t i = 0; i < sizeof(added) / sizeof(added[0]); i++) {
		char probe[64];
		snprintf(probe, sizeof(probe), "SELECT %s FROM jobs LIMIT 0", added[i][0]);
		if (sqlite3_exec(m->db, probe, NULL, NULL, NULL) == SQLITE_OK)
			continue;
		if (sqlite3_exec(m->db, added[i][1], NULL, NULL, &msg) != SQLITE_OK) {
			snprintf(err, errlen, "%s: adding the jobs' column %s: %s", m->db_path,
				 added[i][0], msg ? msg : "?");
			sqlite3_free(msg);
			mgr_db_close(m);
			return -1;
		}
	}
	return 0;
}

static int save_rows(struct mgr *m)
{
	uint64_t *sig = NULL;
	int njobs = 0, k = 0;

	for (struct mgr_job *j = m->jobs; j; j = j->next)
		njobs++;
	sig = malloc(sizeof(*sig) * (size_t)(njobs ? njobs : 1));
	if (!sig)
		return -1;
	if (m->next_group_id != m->saved_next_group_id &&
	    run(m, "INSERT OR REPLACE INTO meta VALUES ('next_group_id', ?)", "i",
		(long long)m->next_group_id))
		goto fail;
	for (int s = 0; s < m->topo.nswitches; s++)
		if (m->sw[s].version != m->sw[s].saved_version &&
		    run(m, "INSERT OR REPLACE INTO switches VALUES (?, ?)", "si",
			m->topo.switches[s].name, (long long)m->sw[s].version))
			goto fail;
	for (int i = 0; i < m->ngone; i++)
		if (run(m, "DELETE FROM jobs WHERE id = ?", "s", m->gone[i]))
			goto fail;
	for (struct mgr_job *j = m->jobs; j; j = j->next, k++) {
		sig[k] = job_sig(j);
		if ((sig[k] != j->saved_sig || j->dirty_lo >= 0) && job_write(m, j, sig[k]))
			goto fail;
	}
	for (unsigned i = m->failures_saved; i < m->nfailures; i++) {
		const struct mgr_failure *f = &m->failures[i % MGR_FAILURES_KEPT];
		if (i + MGR_FAILURES_KEPT < m->nfailures)
			continue;
		if (run(m, "INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?)", "idss",
			(long long)i, f->t, f->what, f->reason))
			goto fail;
	}
	if (m->nfailures > MGR_FAILURES_KEPT && m->nfailures != m->failures_saved &&
	    run(m, "DELETE FROM failures WHERE seq < ?", "i",
		(long long)(m->nfailures - MGR_FAILURES_KEPT)))
		goto fail;
	if (exec(m, "COMMIT"))
		goto fail;
	/* committed: what the rows hold now */
	m->saved_next_group_id = m->next_group_id;
	for (int s = 0; s < m->topo.nswitches; s++)
		m->sw[s].saved_version = m->sw[s].version;
	m->ngone = 0;
	k = 0;
	for (struct mgr_job *j = m->jobs; j; j = j->next) {
		j->saved_sig = sig[k++];
		j->dirty_lo = j->dirty_hi = -1;
	}
	m->failures_saved = m->nfailures;
	free(sig);
	return 0;
fail:
	free(sig);
	return -1;
}

int mgr_save(struct mgr *m)
{
	char err[256];
	double t0 = mgr_clock();
	int rc;

	if (!m->db_path[0])
		return 0;
	if (db_open(m, err, sizeof(err))) {
		mgr_log("cannot save state: %s", err);
		return -1;
	}
	if (exec(m, "BEGIN IMMEDIATE"))
		return -1;
	rc = save_rows(m);
	if (rc) {
		sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
		mgr_log("state not saved to %s: the next change tries again", m->db_path);
	}
	m->saves++;
	m->save_s_last = mgr_clock() - t0;
	if (m->save_s_last > m->save_s_max)
		m->save_s_max = m->save_s_last;
	return rc;
}

/* ---- load ---- */

struct loader {
	struct mgr *m;
	char *err;
	size_t errlen;
};

static int bad(struct loader *l, const char *job, const char *what)
{
	snprintf(l->err, l->errlen, "%s: job %s: %s", l->m->db_path, job, what);
	return -1;
}

static int prepare(struct loader *l, const char *sql, sqlite3_stmt **st)
{
	if (sqlite3_prepare_v2(l->m->db, sql, -1, st, NULL) == SQLITE_OK)
		return 0;
	snprintf(l->err, l->errlen, "%s: %s", l->m->db_path, sqlite3_errmsg(l->m->db));
	return -1;
}

static const char *col_text(sqlite3_stmt *st, int c)
{
	const char *s = (const char *)sqlite3_column_text(st, c);
	return s ? s : "";
}

/* The tree from the groups (nodes) and the ranks (their leaves). */
static int tree_rebuild(struct loader *l, struct mgr_job *j)
{
	struct mgr_tree *t = &j->tree;

	t->nnodes = j->ngroups;
	t->nodes = calloc((size_t)j->ngroups, sizeof(*t->nodes));
	if (!t->nodes)
		return bad(l, j->id, "out of memory");
	j->have_tree = true;
	for (int g = 0; g < j->ngroups; g++) {
		const struct mgr_group *gr = &j->groups[g];
		if (g == 0 ? gr->parent != -1 : gr->parent < 0 || gr->parent >= g)
			return bad(l, j->id, "a group's parent is not a group before it");
		t->nodes[g] = (struct mgr_tree_node){ .sw = gr->sw, .parent = gr->parent,
						      .child_index = g ? gr->rank_in_parent : -1 };
		if (g)
			t->nodes[gr->parent].nchildren++;
	}
	for (int r = 0; r < j->size; r++) {
		int n = t->node_of_rank[r], d = 0;
		if (n < 0 || n >= t->nnodes || t->nodes[n].nchildren)
			return bad(l, j->id, "a rank's leaf is not a leaf of its tree");
		for (int k = n; k >= 0; k = t->nodes[k].parent, d++)
			t->nodes[k].fanin++;
		if (d > t->depth)
			t->depth = d;
	}
	return 0;
}

static int load_jobs(struct loader *l)
{
	struct mgr *m = l->m;
	sqlite3_stmt *st = NULL, *rs = NULL, *gs = NULL, *ps = NULL;
	int rc = -1, step;

	if (prepare(l, "SELECT id, tenant, size, state, reason, group_id, window, elems_per_pkt,"
		    " mtu, created, lease_until, ready_at, registered_at, plan, plan_ring, plan_dead,"
		    " cut_done, cut_seq, cut_from, plan_ver, cut_error, retry_at, rails, rail, cut_ver"
		    " FROM jobs ORDER BY created, id", &st) ||
	    prepare(l, "SELECT idx, epoch, cut_seq, cut_from, cut_ver, ring, dead, cut_error,"
		    " reason FROM past_plans WHERE job = ? ORDER BY idx", &ps) ||
	    prepare(l, "SELECT rank, registered, has_left, ip, qpn, ring_ip, ring_port, node,"
		    " member_index, ack_plan, ack_next, ack_first, ack_keep"
		    " FROM ranks WHERE job = ? ORDER BY rank", &rs) ||
	    prepare(l, "SELECT idx, switch, qpn, qkey, parent, rank_in_parent, version"
		    " FROM groups WHERE job = ? ORDER BY idx", &gs))
		goto out;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct mgr_job *j = calloc(1, sizeof(*j));
		const char *tn = col_text(st, 1);
		int n;

		if (!j) {
			snprintf(l->err, l->errlen, "out of memory");
			goto out;
		}
		j->next = m->jobs;        /* freed with the others on an error */
		m->jobs = j;
		snprintf(j->id, sizeof(j->id), "%s", col_text(st, 0));
		j->tenant = -1;
		for (int t = 0; t < m->topo.ntenants; t++)
			if (!strcmp(m->topo.tenants[t].name, tn))
				j->tenant = t;
		j->size = sqlite3_column_int(st, 2);
		if (j->tenant < 0) {
			bad(l, j->id, "its tenant is not in this topology");
			goto out;
		}
		if (j->size < 1 || j->size > MGR_MAX_JOB_RANKS) {
			bad(l, j->id, "size out of range");
			goto out;
		}
		j->state = (enum mgr_job_state)sqlite3_column_int(st, 3);
		if (j->state > MGR_JOB_RING) {
			bad(l, j->id, "unknown state");
			goto out;
		}
		snprintf(j->reason, sizeof(j->reason), "%s", col_text(st, 4));
		j->group_id = (uint32_t)sqlite3_column_int64(st, 5);
		j->window = (uint32_t)sqlite3_column_int64(st, 6);
		j->elems_per_pkt = (uint32_t)sqlite3_column_int64(st, 7);
		j->mtu = (uint32_t)sqlite3_column_int64(st, 8);
		j->created = sqlite3_column_double(st, 9);
		/* a whole lease from now: its ranks' next polls renew it */
		j->lease_until = m->now() + m->lease_s;
		j->ready_at = sqlite3_column_double(st, 11);
		j->registered_at = sqlite3_column_double(st, 12);
		j->plan = (uint32_t)sqlite3_column_int64(st, 13);
		j->plan_ring = sqlite3_column_int(st, 14);
		j->plan_dead = sqlite3_column_int(st, 15);
		j->cut_done = sqlite3_column_int(st, 16);
		j->cut_seq = (uint32_t)sqlite3_column_int64(st, 17);
		j->cut_from = (uint32_t)sqlite3_column_int64(st, 18);
		j->plan_ver = (uint32_t)sqlite3_column_int64(st, 19);
		snprintf(j->cut_error, sizeof(j->cut_error), "%s", col_text(st, 20));
		j->retry_at = sqlite3_column_double(st, 21);
		j->nrails = sqlite3_column_int(st, 22);
		j->rail = sqlite3_column_int(st, 23);
		j->cut_ver = (uint32_t)sqlite3_column_int64(st, 24);
		if (j->nrails < 0 || j->nrails > MGR_MAX_RAILS || j->rail < 0 ||
		    (j->rail && j->rail >= j->nrails)) {
			bad(l, j->id, "rails out of range");
			goto out;
		}
		j->ranks = calloc((size_t)j->size, sizeof(*j->ranks));
		j->tree.node_of_rank = malloc(sizeof(int) * (size_t)j->size);
		j->tree.index_in_leaf = malloc(sizeof(int) * (size_t)j->size);
		if (!j->ranks || !j->tree.node_of_rank || !j->tree.index_in_leaf) {
			bad(l, j->id, "out of memory");
			goto out;
		}
		sqlite3_reset(rs);
		sqlite3_bind_text(rs, 1, j->id, -1, SQLITE_STATIC);
		for (n = 0; sqlite3_step(rs) == SQLITE_ROW; n++) {
			struct mgr_rank *rk = &j->ranks[n];
			if (n >= j->size || sqlite3_column_int(rs, 0) != n) {
				bad(l, j->id, "its ranks do not match its size");
				goto out;
			}
			rk->registered = sqlite3_column_int(rs, 1);
			rk->left = sqlite3_column_int(rs, 2);
			rk->ip = (uint32_t)sqlite3_column_int64(rs, 3);
			rk->qpn = (uint32_t)sqlite3_column_int64(rs, 4);
			rk->ring_ip = (uint32_t)sqlite3_column_int64(rs, 5);
			rk->ring_port = (uint32_t)sqlite3_column_int64(rs, 6);
			rk->host = mgr_topo_host_by_ip(&m->topo, rk->ip);
			j->tree.node_of_rank[n] = sqlite3_column_int(rs, 7);
			j->tree.index_in_leaf[n] = sqlite3_column_int(rs, 8);
			rk->ack_plan = (uint32_t)sqlite3_column_int64(rs, 9);
			rk->ack_next = (uint32_t)sqlite3_column_int64(rs, 10);
			rk->ack_first = (uint32_t)sqlite3_column_int64(rs, 11);
			rk->ack_keep = (uint32_t)sqlite3_column_int64(rs, 12);
		}
		if (n != j->size) {
			bad(l, j->id, "its ranks do not match its size");
			goto out;
		}
		sqlite3_reset(gs);
		sqlite3_bind_text(gs, 1, j->id, -1, SQLITE_STATIC);
		for (n = 0; sqlite3_step(gs) == SQLITE_ROW; n++) {
			struct mgr_group *g;
			void *p = realloc(j->groups, sizeof(*j->groups) * (size_t)(n + 1));
			if (!p) {
				bad(l, j->id, "out of memory");
				goto out;
			}
			j->groups = p;
			g = &j->groups[n];
			g->sw = mgr_topo_switch_by_name(&m->topo, col_text(gs, 1));
			if (sqlite3_column_int(gs, 0) != n || g->sw < 0) {
				bad(l, j->id, "a group's switch is not in this topology");
				goto out;
			}
			g->qpn = (uint32_t)sqlite3_column_int64(gs, 2);
			g->qkey = (uint32_t)sqlite3_column_int64(gs, 3);
			g->parent = sqlite3_column_int(gs, 4);
			g->rank_in_parent = (uint16_t)sqlite3_column_int(gs, 5);
			g->version = (uint32_t)sqlite3_column_int64(gs, 6);
			j->ngroups = n + 1;
		}
		sqlite3_reset(ps);
		sqlite3_bind_text(ps, 1, j->id, -1, SQLITE_STATIC);
		for (n = 0; sqlite3_step(ps) == SQLITE_ROW; n++) {
			struct mgr_past_plan *pp = &j->past[n];
			if (n >= MGR_PAST_PLANS || sqlite3_column_int(ps, 0) != n) {
				bad(l, j->id, "its past plans are out of order");
				goto out;
			}
			pp->epoch = (uint32_t)sqlite3_column_int64(ps, 1);
			pp->cut_seq = (uint32_t)sqlite3_column_int64(ps, 2);
			pp->cut_from = (uint32_t)sqlite3_column_int64(ps, 3);
			pp->cut_ver = (uint32_t)sqlite3_column_int64(ps, 4);
			pp->ring = sqlite3_column_int(ps, 5);
			pp->dead = sqlite3_column_int(ps, 6);
			snprintf(pp->cut_error, sizeof(pp->cut_error), "%s", col_text(ps, 7));
			snprintf(pp->reason, sizeof(pp->reason), "%s", col_text(ps, 8));
			j->npast = n + 1;
		}
		if (j->ngroups ? tree_rebuild(l, j) : 0)
			goto out;
		if (!j->have_tree) {
			free(j->tree.node_of_rank);
			free(j->tree.index_in_leaf);
			memset(&j->tree, 0, sizeof(j->tree));
		}
		j->saved_sig = job_sig(j);
		j->dirty_lo = j->dirty_hi = -1;
	}
	if (step != SQLITE_DONE) {
		snprintf(l->err, l->errlen, "%s: %s", m->db_path, sqlite3_errmsg(m->db));
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(st);
	sqlite3_finalize(rs);
	sqlite3_finalize(gs);
	sqlite3_finalize(ps);
	return rc;
}

int mgr_load(struct mgr *m, char *err, size_t errlen)
{
	struct loader l = { m, err, errlen };
	sqlite3_stmt *st = NULL;
	int njobs = 0, rc = -1;

	if (db_open(m, err, errlen))
		return -1;
	/* the format before rows: one JSON document in table state */
	if (sqlite3_prepare_v2(m->db, "SELECT 1 FROM sqlite_master WHERE name = 'state'", -1,
			       &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
		sqlite3_finalize(st);
		snprintf(err, errlen, "%s: holds state in the first format (one JSON document, "
			 "table 'state'); this manager keeps rows: start it on a new file (the "
			 "switches' agents take the new, empty group set)", m->db_path);
		return -1;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (prepare(&l, "SELECT key, value FROM meta", &st))
		return -1;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *k = col_text(st, 0);
		long long v = sqlite3_column_int64(st, 1);
		if (!strcmp(k, "format") && v != FORMAT && v != 2) {
			snprintf(err, errlen, "%s: state format %lld, this manager reads 2 and %d",
				 m->db_path, v, FORMAT);
			goto out;
		}
		if (!strcmp(k, "next_group_id"))
			m->next_group_id = (uint32_t)v;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (m->next_group_id < 1000)
		m->next_group_id = 1000;
	if (prepare(&l, "SELECT name, version FROM switches", &st))
		return -1;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int s = mgr_topo_switch_by_name(&m->topo, col_text(st, 0));
		if (s < 0)
			continue;
		/* the reconcile: every agent takes the manager's group set again */
		m->sw[s].saved_version = (uint32_t)sqlite3_column_int64(st, 1);
		m->sw[s].version = m->sw[s].saved_version + 1;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (load_jobs(&l))
		goto out;
	if (prepare(&l, "SELECT seq, time, what, reason FROM failures ORDER BY seq", &st))
		goto out;
	while (sqlite3_step(st) == SQLITE_ROW) {
		unsigned seq = (unsigned)sqlite3_column_int64(st, 0);
		struct mgr_failure *f = &m->failures[seq % MGR_FAILURES_KEPT];
		f->t = sqlite3_column_double(st, 1);
		snprintf(f->what, sizeof(f->what), "%s", col_text(st, 2));
		snprintf(f->reason, sizeof(f->reason), "%s", col_text(st, 3));
		m->nfailures = seq + 1;
	}
	m->failures_saved = m->nfailures;
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		njobs++;
	m->saved_next_group_id = m->next_group_id;
	if (exec(m, "INSERT OR REPLACE INTO meta VALUES ('format', 3)") || mgr_save(m)) {
		snprintf(err, errlen, "%s: cannot write", m->db_path);
		goto out;
	}
	mgr_log("state from %s: %d jobs", m->db_path, njobs);
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}
