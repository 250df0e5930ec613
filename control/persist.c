/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The manager's durable state: jobs (ranks, tree, groups), the switches'
 * desired versions, the next group id and the failure log, as one JSON
 * document in an SQLite database, replaced in one transaction after every
 * change. A manager restarted on the same database serves the same groups
 * at the same versions, so the switches' agents change nothing.
 *
 * WAL with synchronous=NORMAL: a commit is in the log before the request is
 * answered, so a manager that crashes or is killed loses nothing; the log
 * is synced at checkpoints, not per commit, which keeps a save at tens of
 * microseconds (FULL: an fsync per request, milliseconds on real disks).
 * Only a crash of the machine itself may lose the last commits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "mgr.h"

void mgr_db_close(struct mgr *m)
{
	sqlite3_close(m->db);
	m->db = NULL;
}

static json_t *int_array(const int *v, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer(v[i]));
	return a;
}

static int *int_array_get(json_t *a, int n)
{
	int *v = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
	if (!v || !json_is_array(a) || (int)json_array_size(a) != n) {
		free(v);
		return NULL;
	}
	for (int i = 0; i < n; i++)
		v[i] = (int)json_integer_value(json_array_get(a, (size_t)i));
	return v;
}

static json_t *dump(struct mgr *m)
{
	json_t *root = json_object(), *jobs = json_array(), *vers = json_object(),
	       *fails = json_array();

	json_object_set_new(root, "format", json_integer(1));
	json_object_set_new(root, "next_group_id", json_integer(m->next_group_id));
	for (int s = 0; s < m->topo.nswitches; s++)
		json_object_set_new(vers, m->topo.switches[s].name,
				    json_integer(m->sw[s].version));
	json_object_set_new(root, "versions", vers);
	for (struct mgr_job *j = m->jobs; j; j = j->next) {
		json_t *ranks = json_array(), *groups = json_array();
		for (int r = 0; r < j->size; r++)
			json_array_append_new(ranks, json_pack("{s:b, s:b, s:I, s:I, s:I, s:I, s:i}",
				"registered", j->ranks[r].registered, "left", j->ranks[r].left,
				"ip", (json_int_t)j->ranks[r].ip, "qpn", (json_int_t)j->ranks[r].qpn,
				"ring_ip", (json_int_t)j->ranks[r].ring_ip,
				"ring_port", (json_int_t)j->ranks[r].ring_port, "host", j->ranks[r].host));
		for (int g = 0; g < j->ngroups; g++)
			json_array_append_new(groups, json_pack("{s:s, s:I, s:I, s:i, s:i, s:I}",
				"switch", m->topo.switches[j->groups[g].sw].name,
				"qpn", (json_int_t)j->groups[g].qpn, "qkey", (json_int_t)j->groups[g].qkey,
				"parent", j->groups[g].parent, "rank_in_parent",
				j->groups[g].rank_in_parent, "version", (json_int_t)j->groups[g].version));
		json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:s, s:I, s:i, s:i, s:i, s:f, s:f, s:f, "
				      "s:f, s:o, s:o}",
			"id", j->id, "tenant", m->topo.tenants[j->tenant].name, "size", j->size,
			"state", (int)j->state, "reason", j->reason, "group_id",
			(json_int_t)j->group_id, "window", (int)j->window, "elems_per_pkt",
			(int)j->elems_per_pkt, "mtu", (int)j->mtu, "created", j->created,
			"lease_until", j->lease_until, "ready_at", j->ready_at, "registered_at",
			j->registered_at, "ranks", ranks, "groups", groups);
		if (j->have_tree) {
			int nl = j->tree.nleaves;
			json_object_set_new(o, "tree", json_pack("{s:i, s:i, s:o, s:o, s:o, s:o}",
				"root", j->tree.root, "nleaves", nl,
				"leaves", int_array(j->tree.leaves, nl),
				"leaf_fanin", int_array(j->tree.leaf_fanin, nl),
				"leaf_of_rank", int_array(j->tree.leaf_of_rank, j->size),
				"index_in_leaf", int_array(j->tree.index_in_leaf, j->size)));
		}
		json_array_append_new(jobs, o);
	}
	json_object_set_new(root, "jobs", jobs);
	unsigned first = m->nfailures > MGR_FAILURES_KEPT ? m->nfailures - MGR_FAILURES_KEPT : 0;
	for (unsigned i = first; i < m->nfailures; i++) {
		struct mgr_failure *f = &m->failures[i % MGR_FAILURES_KEPT];
		json_array_append_new(fails, json_pack("{s:f, s:s, s:s}", "time", f->t, "what",
						       f->what, "reason", f->reason));
	}
	json_object_set_new(root, "failures", fails);
	return root;
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
	if (sqlite3_exec(m->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
			 "CREATE TABLE IF NOT EXISTS state (id INTEGER PRIMARY KEY CHECK (id = 1),"
			 " doc TEXT NOT NULL, saved REAL NOT NULL)", NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", m->db_path, msg ? msg : "cannot create table");
		sqlite3_free(msg);
		mgr_db_close(m);
		return -1;
	}
	return 0;
}

int mgr_save(struct mgr *m)
{
	sqlite3_stmt *st = NULL;
	char err[256];
	char *doc;
	int rc = -1;

	double t0 = mgr_clock();

	if (!m->db_path[0])
		return 0;
	if (db_open(m, err, sizeof(err))) {
		mgr_log("cannot save state: %s", err);
		return -1;
	}
	json_t *root = dump(m);
	doc = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (doc && sqlite3_prepare_v2(m->db, "INSERT OR REPLACE INTO state (id, doc, saved) "
				      "VALUES (1, ?, ?)", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_bind_text(st, 1, doc, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
	    sqlite3_bind_double(st, 2, m->now()) == SQLITE_OK && sqlite3_step(st) == SQLITE_DONE)
		rc = 0;
	else
		mgr_log("cannot save state to %s: %s", m->db_path,
			sqlite3_errmsg(m->db));
	sqlite3_finalize(st);
	free(doc);
	m->saves++;
	m->save_s_last = mgr_clock() - t0;
	if (m->save_s_last > m->save_s_max)
		m->save_s_max = m->save_s_last;
	return rc;
}

int mgr_load(struct mgr *m, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	json_error_t jerr;
	json_t *root = NULL, *v;
	size_t i;
	int rc = -1;

	if (db_open(m, err, errlen))
		return -1;
	if (sqlite3_prepare_v2(m->db, "SELECT doc FROM state WHERE id = 1", -1, &st, NULL) !=
	    SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", m->db_path, sqlite3_errmsg(m->db));
		return -1;
	}
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_finalize(st);
		return 0;     /* a new database */
	}
	root = json_loads((const char *)sqlite3_column_text(st, 0), 0, &jerr);
	sqlite3_finalize(st);
	if (!root) {
		snprintf(err, errlen, "%s: saved state is not JSON: %s", m->db_path, jerr.text);
		return -1;
	}
	m->next_group_id = (uint32_t)json_integer_value(json_object_get(root, "next_group_id"));
	if (m->next_group_id < 1000)
		m->next_group_id = 1000;
	const char *key;
	json_object_foreach(json_object_get(root, "versions"), key, v) {
		int s = mgr_topo_switch_by_name(&m->topo, key);
		if (s >= 0)
			m->sw[s].version = (uint32_t)json_integer_value(v);
	}
	json_t *jobs = json_object_get(root, "jobs"), *jo;
	json_array_foreach(jobs, i, jo) {
		struct mgr_job *j = calloc(1, sizeof(*j));
		const char *tn = json_string_value(json_object_get(jo, "tenant"));
		json_t *a, *e;
		size_t k;

		if (!j)
			goto out;
		snprintf(j->id, sizeof(j->id), "%s", json_string_value(json_object_get(jo, "id")) ?: "");
		j->tenant = -1;
		for (int t = 0; tn && t < m->topo.ntenants; t++)
			if (!strcmp(m->topo.tenants[t].name, tn))
				j->tenant = t;
		j->size = (int)json_integer_value(json_object_get(jo, "size"));
		if (j->tenant < 0 || j->size < 1 || j->size > AGG_MAX_MEMBERS) {
			snprintf(err, errlen, "%s: job %s: tenant %s or size not in this topology",
				 m->db_path, j->id, tn ? tn : "?");
			free(j);
			goto out;
		}
		j->state = (enum mgr_job_state)json_integer_value(json_object_get(jo, "state"));
		snprintf(j->reason, sizeof(j->reason), "%s",
			 json_string_value(json_object_get(jo, "reason")) ?: "");
		j->group_id = (uint32_t)json_integer_value(json_object_get(jo, "group_id"));
		j->window = (uint32_t)json_integer_value(json_object_get(jo, "window"));
		j->elems_per_pkt = (uint32_t)json_integer_value(json_object_get(jo, "elems_per_pkt"));
		j->mtu = (uint32_t)json_integer_value(json_object_get(jo, "mtu"));
		j->created = json_real_value(json_object_get(jo, "created"));
		j->lease_until = json_real_value(json_object_get(jo, "lease_until"));
		j->ready_at = json_real_value(json_object_get(jo, "ready_at"));
		j->registered_at = json_real_value(json_object_get(jo, "registered_at"));
		j->ranks = calloc((size_t)j->size, sizeof(*j->ranks));
		a = json_object_get(jo, "ranks");
		if (!j->ranks || (int)json_array_size(a) != j->size) {
			snprintf(err, errlen, "%s: job %s: ranks do not match its size", m->db_path, j->id);
			mgr_job_free(j);
			goto out;
		}
		json_array_foreach(a, k, e) {
			j->ranks[k].registered = json_is_true(json_object_get(e, "registered"));
			j->ranks[k].left = json_is_true(json_object_get(e, "left"));
			j->ranks[k].ip = (uint32_t)json_integer_value(json_object_get(e, "ip"));
			j->ranks[k].qpn = (uint32_t)json_integer_value(json_object_get(e, "qpn"));
			j->ranks[k].ring_ip = (uint32_t)json_integer_value(json_object_get(e, "ring_ip"));
			j->ranks[k].ring_port = (uint32_t)json_integer_value(json_object_get(e, "ring_port"));
			j->ranks[k].host = mgr_topo_host_by_ip(&m->topo, j->ranks[k].ip);
		}
		a = json_object_get(jo, "groups");
		j->ngroups = (int)json_array_size(a);
		j->groups = calloc((size_t)(j->ngroups ? j->ngroups : 1), sizeof(*j->groups));
		json_array_foreach(a, k, e) {
			struct mgr_group *g = &j->groups[k];
			g->sw = mgr_topo_switch_by_name(&m->topo,
				json_string_value(json_object_get(e, "switch")) ?: "");
			g->qpn = (uint32_t)json_integer_value(json_object_get(e, "qpn"));
			g->qkey = (uint32_t)json_integer_value(json_object_get(e, "qkey"));
			g->parent = (int)json_integer_value(json_object_get(e, "parent"));
			g->rank_in_parent = (uint16_t)json_integer_value(json_object_get(e, "rank_in_parent"));
			g->version = (uint32_t)json_integer_value(json_object_get(e, "version"));
			if (g->sw < 0) {
				snprintf(err, errlen, "%s: job %s: a group's switch is not in this "
					 "topology", m->db_path, j->id);
				mgr_job_free(j);
				goto out;
			}
		}
		if ((v = json_object_get(jo, "tree"))) {
			struct mgr_tree *t = &j->tree;
			t->root = (int)json_integer_value(json_object_get(v, "root"));
			t->nleaves = (int)json_integer_value(json_object_get(v, "nleaves"));
			t->leaves = int_array_get(json_object_get(v, "leaves"), t->nleaves);
			t->leaf_fanin = int_array_get(json_object_get(v, "leaf_fanin"), t->nleaves);
			t->leaf_of_rank = int_array_get(json_object_get(v, "leaf_of_rank"), j->size);
			t->index_in_leaf = int_array_get(json_object_get(v, "index_in_leaf"), j->size);
			j->have_tree = true;
			if (!t->leaves || !t->leaf_fanin || !t->leaf_of_rank || !t->index_in_leaf) {
				snprintf(err, errlen, "%s: job %s: damaged tree", m->db_path, j->id);
				mgr_job_free(j);
				goto out;
			}
		}
		j->next = m->jobs;
		m->jobs = j;
	}
	json_array_foreach(json_object_get(root, "failures"), i, v) {
		struct mgr_failure *f = &m->failures[m->nfailures++ % MGR_FAILURES_KEPT];
		f->t = json_real_value(json_object_get(v, "time"));
		snprintf(f->what, sizeof(f->what), "%s", json_string_value(json_object_get(v, "what")) ?: "");
		snprintf(f->reason, sizeof(f->reason), "%s",
			 json_string_value(json_object_get(v, "reason")) ?: "");
	}
	mgr_log("state from %s: %zu jobs", m->db_path, json_array_size(jobs));
	rc = 0;
out:
	json_decref(root);
	return rc;
}
