/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-manager without HTTP: topology validation, the tree builder on
 * generated fat-trees (up to 4096 hosts), quotas, and the API (tokens,
 * validation, a job from registration to ready, tenant isolation, a switch
 * that stops heartbeating) with a clock the test controls.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mgr.h"

#define ADMIN "admin-token-0123456789"
#define TOK_A "tenant-a-token-0123456789"
#define TOK_B "tenant-b-token-0123456789"

/* A fat-tree: L leaves of H hosts, S spines linked to every leaf. */
static json_t *fat_tree(int leaves, int hosts_per_leaf, int spines, uint32_t spine_slots)
{
	json_t *sw = json_array(), *hs = json_array(), *ln = json_array();
	char name[32], ip[32];

	for (int s = 0; s < spines; s++) {
		snprintf(name, sizeof(name), "spine%d", s);
		snprintf(ip, sizeof(ip), "10.255.0.%d", s + 1);
		json_array_append_new(sw, json_pack("{s:s, s:s, s:s, s:i}", "name", name, "role",
						    "spine", "ip", ip, "max_slots", (int)spine_slots));
	}
	for (int l = 0; l < leaves; l++) {
		snprintf(name, sizeof(name), "leaf%d", l);
		snprintf(ip, sizeof(ip), "10.254.%d.%d", l / 200, l % 200 + 1);
		json_array_append_new(sw, json_pack("{s:s, s:s, s:s}", "name", name, "role", "leaf",
						    "ip", ip));
		for (int s = 0; s < spines; s++) {
			char sp[32];
			snprintf(sp, sizeof(sp), "spine%d", s);
			json_array_append_new(ln, json_pack("{s:s, s:s}", "leaf", name, "spine", sp));
		}
		for (int h = 0; h < hosts_per_leaf; h++) {
			int n = l * hosts_per_leaf + h;
			char hn[32];
			snprintf(hn, sizeof(hn), "h%d", n);
			snprintf(ip, sizeof(ip), "10.%d.%d.%d", 1 + n / 65536, (n / 256) % 256, n % 256);
			json_array_append_new(hs, json_pack("{s:s, s:s, s:s}", "name", hn, "ip", ip,
							    "leaf", name));
		}
	}
	return json_pack("{s:o, s:o, s:o, s:[{s:s, s:s, s:i}, {s:s, s:s, s:i}]}", "switches", sw,
			 "hosts", hs, "links", ln, "tenants", "name", "a", "token", TOK_A,
			 "max_slots_per_switch", 64, "name", "b", "token", TOK_B,
			 "max_slots_per_switch", 16);
}

static void topo_from(struct mgr_topo *t, json_t *j)
{
	char err[256];
	int rc = mgr_topo_parse(t, j, "test", err, sizeof(err));
	if (rc)
		fprintf(stderr, "%s\n", err);
	assert_int_equal(rc, 0);
	json_decref(j);
}

static const char *topo_error(const char *text)
{
	static char err[256];
	struct mgr_topo t;
	json_t *j = json_loads(text, 0, NULL);

	assert_non_null(j);
	assert_int_equal(mgr_topo_parse(&t, j, "t.json", err, sizeof(err)), -1);
	mgr_topo_free(&t);
	json_decref(j);
	return err;
}

static void test_topology_errors(void **state)
{
	(void)state;
	assert_string_equal(topo_error("{\"switches\": [], \"hosts\": []}"),
			    "t.json: switches: expected a list of 1..1024 switches");
	assert_string_equal(topo_error("{\"switch\": 1}"), "t.json: switch: unknown field");
	assert_string_equal(topo_error(
		"{\"switches\": [{\"name\": \"l1\", \"role\": \"leaf\", \"ip\": \"10.0.0.1\"},"
		" {\"name\": \"l1\", \"role\": \"leaf\", \"ip\": \"10.0.0.2\"}]}"),
		"t.json: switches[1].name: 'l1' is listed twice");
	assert_string_equal(topo_error(
		"{\"switches\": [{\"name\": \"l1\", \"role\": \"core\", \"ip\": \"10.0.0.1\"}]}"),
		"t.json: switches[0].role: expected \"leaf\" or \"spine\"");
	assert_string_equal(topo_error(
		"{\"switches\": [{\"name\": \"l1\", \"role\": \"leaf\", \"ip\": \"10.0.0.1\", "
		"\"max_slots\": 0}]}"),
		"t.json: switches[0].max_slots: expected 1..16777216 (default 65536)");
	assert_string_equal(topo_error(
		"{\"switches\": [{\"name\": \"l1\", \"role\": \"leaf\", \"ip\": \"10.0.0.1\"}],"
		" \"hosts\": [{\"name\": \"h1\", \"ip\": \"10.0.0.9\", \"leaf\": \"l2\"}]}"),
		"t.json: hosts[0].leaf: expected the name of a leaf switch, got l2");
	assert_string_equal(topo_error(
		"{\"switches\": [{\"name\": \"l1\", \"role\": \"leaf\", \"ip\": \"10.0.0.1\"}],"
		" \"hosts\": [{\"name\": \"h1\", \"ip\": \"10.0.0.9\", \"leaf\": \"l1\"}],"
		" \"links\": [{\"leaf\": \"l1\", \"spine\": \"l1\"}]}"),
		"t.json: links[0].spine: expected a spine's name");
	assert_string_equal(topo_error(
		"{\"switches\": [{\"name\": \"l1\", \"role\": \"leaf\", \"ip\": \"10.0.0.1\"}],"
		" \"hosts\": [{\"name\": \"h1\", \"ip\": \"10.0.0.9\", \"leaf\": \"l1\"}],"
		" \"tenants\": [{\"name\": \"a\", \"token\": \"short\"}]}"),
		"t.json: tenants[0].token: expected a secret of 16..127 characters");
}

struct loadbuf {
	uint32_t slots[1100], groups[1100];
	bool down[1100];
	struct mgr_load l;
};

static struct mgr_load *zero_load(struct loadbuf *b)
{
	memset(b, 0, sizeof(*b));
	b->l = (struct mgr_load){ b->slots, b->groups, b->down };
	return &b->l;
}

static void test_tree_single_leaf(void **state)
{
	struct mgr_topo t;
	struct mgr_tree tr;
	struct loadbuf lb;
	char why[200];
	int hosts[3] = { 13, 12, 15 };   /* all on leaf3 (hosts 12..15) */

	(void)state;
	topo_from(&t, fat_tree(4, 4, 2, 4096));
	assert_int_equal(mgr_tree_build(&t, hosts, 3, zero_load(&lb), 16, &tr, why, sizeof(why)), 0);
	assert_string_equal(t.switches[tr.root].name, "leaf3");
	assert_int_equal(tr.nleaves, 0);
	for (int r = 0; r < 3; r++) {
		assert_int_equal(tr.leaf_of_rank[r], tr.root);
		assert_int_equal(tr.index_in_leaf[r], r);
	}
	mgr_tree_free(&tr);
	mgr_topo_free(&t);
}

static void test_tree_two_level_balanced(void **state)
{
	struct mgr_topo t;
	struct mgr_tree tr;
	struct loadbuf lb;
	struct mgr_load *l;
	char why[200];
	int hosts[5] = { 7, 0, 9, 1, 31 };   /* leaves 1, 0, 2, 0, 7 */

	(void)state;
	topo_from(&t, fat_tree(8, 4, 2, 4096));
	l = zero_load(&lb);
	l->slots[0] = 100;       /* spine0 busier than spine1 */
	l->slots[1] = 50;
	assert_int_equal(mgr_tree_build(&t, hosts, 5, l, 16, &tr, why, sizeof(why)), 0);
	assert_string_equal(t.switches[tr.root].name, "spine1");
	assert_int_equal(tr.nleaves, 4);
	const char *want[] = { "leaf0", "leaf1", "leaf2", "leaf7" };
	const int fanin[] = { 2, 1, 1, 1 };
	for (int i = 0; i < 4; i++) {
		assert_string_equal(t.switches[tr.leaves[i]].name, want[i]);
		assert_int_equal(tr.leaf_fanin[i], fanin[i]);
	}
	/* ranks 1 and 3 share leaf0: member indices 0 and 1 there */
	assert_int_equal(tr.leaf_of_rank[1], tr.leaf_of_rank[3]);
	assert_int_equal(tr.index_in_leaf[1], 0);
	assert_int_equal(tr.index_in_leaf[3], 1);
	assert_int_equal(tr.index_in_leaf[0], 0);
	mgr_tree_free(&tr);
	/* equal load: the first by name order */
	l->slots[1] = 100;
	assert_int_equal(mgr_tree_build(&t, hosts, 5, l, 16, &tr, why, sizeof(why)), 0);
	assert_string_equal(t.switches[tr.root].name, "spine0");
	mgr_tree_free(&tr);
	mgr_topo_free(&t);
}

static void test_tree_refusals(void **state)
{
	struct mgr_topo t;
	struct mgr_tree tr;
	struct loadbuf lb;
	struct mgr_load *l;
	char why[200];
	int hosts[2] = { 0, 5 };   /* leaves 0 and 1 */

	(void)state;
	topo_from(&t, fat_tree(2, 4, 2, 64));
	l = zero_load(&lb);
	/* both spines full */
	l->slots[0] = 60;
	l->slots[1] = 64;
	assert_int_equal(mgr_tree_build(&t, hosts, 2, l, 16, &tr, why, sizeof(why)), -1);
	assert_string_equal(why, "no spine can take the group: switch spine1: 64 of 64 slots "
			    "in use, the group needs 16");
	l->slots[0] = l->slots[1] = 0;
	/* a leaf down */
	l->down[3] = true;   /* leaf1 */
	assert_int_equal(mgr_tree_build(&t, hosts, 2, l, 16, &tr, why, sizeof(why)), -1);
	assert_string_equal(why, "switch leaf1 is down");
	l->down[3] = false;
	/* no spine linked to both leaves */
	memset(t.link, 0, (size_t)t.nswitches * (size_t)t.nswitches);
	t.link[2 * t.nswitches + 0] = 1;    /* leaf0 - spine0 */
	t.link[3 * t.nswitches + 1] = 1;    /* leaf1 - spine1 */
	assert_int_equal(mgr_tree_build(&t, hosts, 2, l, 16, &tr, why, sizeof(why)), -1);
	assert_string_equal(why, "no spine is linked to all 2 leaves of the job");
	mgr_topo_free(&t);
}

static void test_tree_4096_hosts(void **state)
{
	struct mgr_topo t;
	struct mgr_tree tr;
	struct loadbuf lb;
	struct mgr_load *l;
	char why[200];
	static int hosts[4096];

	(void)state;
	topo_from(&t, fat_tree(64, 64, 16, 65536));
	assert_int_equal(t.nhosts, 4096);
	for (int i = 0; i < 4096; i++)
		hosts[i] = i;
	srand(7);
	for (int i = 4095; i > 0; i--) {
		int k = rand() % (i + 1), x = hosts[i];
		hosts[i] = hosts[k];
		hosts[k] = x;
	}
	l = zero_load(&lb);
	for (int s = 0; s < 16; s++)
		l->slots[s] = (uint32_t)(100 + (s == 11 ? 0 : 50));
	assert_int_equal(mgr_tree_build(&t, hosts, 4096, l, 64, &tr, why, sizeof(why)), 0);
	assert_string_equal(t.switches[tr.root].name, "spine11");
	assert_int_equal(tr.nleaves, 64);
	int seen[64] = { 0 };
	for (int i = 0; i < 64; i++)
		assert_int_equal(tr.leaf_fanin[i], 64);
	for (int r = 0; r < 4096; r++) {
		int leaf = tr.leaf_of_rank[r] - 16;
		assert_int_equal(leaf, hosts[r] / 64);
		assert_int_equal(tr.index_in_leaf[r], seen[leaf]++);
	}
	mgr_tree_free(&tr);
	mgr_topo_free(&t);
}

/* ---- the API ---- */

static double fake_now = 1000;
static double now_fn(void) { return fake_now; }

static struct mgr M;
static char topo_path[64];

static int api_setup(void **state)
{
	char err[256];
	json_t *j = fat_tree(2, 2, 1, 64);
	int fd;

	(void)state;
	snprintf(topo_path, sizeof(topo_path), "/tmp/inca-test-topo.XXXXXX");
	fd = mkstemp(topo_path);
	if (fd < 0)
		return -1;
	close(fd);
	json_dump_file(j, topo_path, 0);
	json_decref(j);
	fake_now = 1000;
	if (mgr_init(&M, topo_path, NULL, ADMIN, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	M.now = now_fn;
	M.start_time = fake_now;
	M.dead_after_s = 1;
	return 0;
}

static int api_teardown(void **state)
{
	(void)state;
	mgr_fini(&M);
	unlink(topo_path);
	return 0;
}

/* call the API; returns the status, *out the parsed body */
static int call(const char *method, const char *path, const char *token, const char *body,
		json_t **out)
{
	char *resp = NULL;
	const char *ctype;
	int st = mgr_api(&M, method, path, token, body, &resp, &ctype);

	*out = resp && !strncmp(ctype, "application/json", 16) ? json_loads(resp, 0, NULL) : NULL;
	free(resp);
	return st;
}

static const char *err_of(json_t *j)
{
	static char b[512];
	snprintf(b, sizeof(b), "%s", json_string_value(json_object_get(j, "error")));
	json_decref(j);
	return b;
}

static void heartbeat(const char *sw, int applied, int *version)
{
	char path[64], body[64];
	json_t *r;

	snprintf(path, sizeof(path), "/v1/switches/%s/heartbeat", sw);
	snprintf(body, sizeof(body), "{\"applied\": %d}", applied);
	assert_int_equal(call("POST", path, ADMIN, body, &r), 200);
	*version = (int)json_integer_value(json_object_get(r, "version"));
	json_decref(r);
}

static void test_api_tokens_and_validation(void **state)
{
	json_t *r;

	(void)state;
	assert_int_equal(call("GET", "/v1/jobs", NULL, NULL, &r), 401);
	assert_string_equal(err_of(r), "missing bearer token (Authorization: Bearer TOKEN)");
	assert_int_equal(call("GET", "/v1/jobs", "nope", NULL, &r), 401);
	assert_string_equal(err_of(r), "invalid token");
	assert_int_equal(call("GET", "/healthz", NULL, NULL, &r), 200);
	json_decref(r);
	assert_int_equal(call("POST", "/v1/switches/leaf0/heartbeat", TOK_A, "{\"applied\": 0}", &r), 403);
	assert_string_equal(err_of(r), "heartbeats need the admin token");
	assert_int_equal(call("POST", "/v1/switches/leafX/heartbeat", ADMIN, "{}", &r), 404);
	assert_string_equal(err_of(r), "switch 'leafX' is not in the topology");
	assert_int_equal(call("POST", "/v1/switches/leaf0/heartbeat", ADMIN,
			      "{\"applied\": 0, \"ip\": \"10.9.9.9\"}", &r), 409);
	assert_string_equal(err_of(r), "switch leaf0 reports address 10.9.9.9, the topology says "
			    "10.254.0.1");
	assert_int_equal(call("POST", "/v1/jobs/j/ranks", TOK_A, "{\"rank\": 0}", &r), 400);
	assert_string_equal(err_of(r), "size: expected 1..1024");
	assert_int_equal(call("POST", "/v1/jobs/j/ranks", TOK_A,
			      "{\"rank\": 2, \"size\": 2, \"ip\": \"10.1.0.0\", \"qpn\": 17}", &r), 400);
	assert_string_equal(err_of(r), "rank: expected 0..1");
	assert_int_equal(call("POST", "/v1/jobs/j/ranks", TOK_A,
			      "{\"rank\": 0, \"size\": 2, \"ip\": \"10.7.7.7\", \"qpn\": 17}", &r), 400);
	assert_string_equal(err_of(r), "ip 10.7.7.7 is not a host of the topology");
	assert_int_equal(call("POST", "/v1/jobs/bad%2fid/ranks", TOK_A, "{}", &r), 400);
	json_decref(r);
	assert_int_equal(call("POST", "/v1/jobs/j/ranks", TOK_A, "{not json", &r), 400);
	json_decref(r);
	assert_int_equal(call("GET", "/v1/nothing", TOK_A, NULL, &r), 404);
	json_decref(r);
}

static void test_api_job_lifecycle(void **state)
{
	json_t *r;
	int v0, v1, vs;

	(void)state;
	/* hosts: h0 h1 on leaf0, h2 h3 on leaf1 (10.1.0.N) */
	heartbeat("spine0", 0, &vs);
	heartbeat("leaf0", 0, &v0);
	heartbeat("leaf1", 0, &v1);
	assert_int_equal(call("POST", "/v1/jobs/j1/ranks", TOK_A,
			      "{\"rank\": 0, \"size\": 2, \"ip\": \"10.1.0.0\", \"qpn\": 17}", &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "waiting");
	json_decref(r);
	/* the same rank again with another address: refused */
	assert_int_equal(call("POST", "/v1/jobs/j1/ranks", TOK_A,
			      "{\"rank\": 0, \"size\": 2, \"ip\": \"10.1.0.1\", \"qpn\": 17}", &r), 409);
	assert_string_equal(err_of(r), "job j1 rank 0 is registered with another address");
	/* tenant b cannot join or see tenant a's job */
	assert_int_equal(call("POST", "/v1/jobs/j1/ranks", TOK_B,
			      "{\"rank\": 1, \"size\": 2, \"ip\": \"10.1.0.2\", \"qpn\": 17}", &r), 403);
	assert_string_equal(err_of(r), "job j1 belongs to tenant a");
	assert_int_equal(call("GET", "/v1/jobs/j1", TOK_B, NULL, &r), 403);
	json_decref(r);
	assert_int_equal(call("POST", "/v1/jobs/j1/ranks", TOK_A,
			      "{\"rank\": 1, \"size\": 2, \"ip\": \"10.1.0.2\", \"qpn\": 18}", &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "programming");
	json_decref(r);
	/* not ready until every switch applied its new version */
	assert_int_equal(call("GET", "/v1/jobs/j1/ranks/1", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "programming");
	assert_null(json_object_get(r, "group"));
	json_decref(r);
	heartbeat("spine0", 0, &vs);
	heartbeat("leaf0", 0, &v0);
	heartbeat("leaf1", 0, &v1);
	assert_int_equal(vs, 1);
	assert_int_equal(v0, 1);
	assert_int_equal(v1, 1);
	heartbeat("spine0", vs, &vs);
	heartbeat("leaf0", v0, &v0);
	assert_int_equal(call("GET", "/v1/jobs/j1/ranks/1", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "programming");
	json_decref(r);
	heartbeat("leaf1", v1, &v1);
	assert_int_equal(call("GET", "/v1/jobs/j1/ranks/1", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "ready");
	json_t *g = json_object_get(r, "group");
	assert_string_equal(json_string_value(json_object_get(g, "switch")), "10.254.0.2");
	assert_int_equal(json_integer_value(json_object_get(g, "member_index")), 0);
	assert_int_equal(json_integer_value(json_object_get(g, "group")), 1000);
	assert_int_equal(json_array_size(json_object_get(g, "members")), 2);
	json_decref(r);
	/* the spine's group: the two leaves, fan-in 1 each; a leaf's names its parent */
	assert_int_equal(call("GET", "/v1/groups", ADMIN, NULL, &r), 200);
	json_t *sg = json_array_get(json_object_get(r, "spine0"), 0);
	assert_int_equal(json_array_size(json_object_get(sg, "members")), 2);
	assert_int_equal(json_integer_value(json_object_get(
		json_array_get(json_object_get(sg, "members"), 1), "fanin")), 1);
	json_t *lg = json_array_get(json_object_get(r, "leaf1"), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(lg, "parent"), "ip")),
			    "10.255.0.1");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(lg, "parent"), "rank")), 1);
	json_decref(r);

	/* tenant b's quota is 16 slots per switch: a 32-slot job is refused */
	assert_int_equal(call("POST", "/v1/jobs/jb/ranks", TOK_B,
			      "{\"rank\": 0, \"size\": 1, \"ip\": \"10.1.0.1\", \"qpn\": 20, "
			      "\"window\": 32}", &r), 409);
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "quota: tenant b would use 32 of its 16 slots on switch leaf0");
	json_decref(r);
	assert_int_equal(call("DELETE", "/v1/jobs/jb", TOK_B, NULL, &r), 200);
	json_decref(r);

	/* leaf1 stops heartbeating: down, the job failed, the failure listed */
	fake_now += 0.5;
	heartbeat("spine0", vs, &vs);
	heartbeat("leaf0", v0, &v0);
	fake_now += 0.7;
	mgr_tick(&M);
	assert_int_equal(call("GET", "/v1/jobs/j1", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "failed");
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "switch leaf1 of its tree is down (no heartbeat for 1200 ms)");
	json_decref(r);
	assert_int_equal(call("GET", "/v1/failures", ADMIN, NULL, &r), 200);
	size_t n = json_array_size(r);
	assert_string_equal(json_string_value(json_object_get(json_array_get(r, n - 2), "reason")),
			    "switch down: no heartbeat for 1200 ms");
	json_decref(r);
	/* teardown frees the slots: the switches' versions move on */
	assert_int_equal(call("DELETE", "/v1/jobs/j1", TOK_A, NULL, &r), 200);
	json_decref(r);
	heartbeat("leaf0", v0, &v0);
	assert_int_equal(v0, 2);
	assert_int_equal(call("GET", "/v1/groups", ADMIN, NULL, &r), 200);
	assert_int_equal(json_array_size(json_object_get(r, "leaf0")), 0);
	json_decref(r);
	/* metrics */
	char *resp = NULL;
	const char *ctype;
	assert_int_equal(mgr_api(&M, "GET", "/metrics", ADMIN, NULL, &resp, &ctype), 200);
	assert_non_null(strstr(resp, "inca_manager_switch_up{switch=\"leaf1\"} 0\n"));
	assert_non_null(strstr(resp, "inca_manager_tree_builds_total 2\n"));
	free(resp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topology_errors),
		cmocka_unit_test(test_tree_single_leaf),
		cmocka_unit_test(test_tree_two_level_balanced),
		cmocka_unit_test(test_tree_refusals),
		cmocka_unit_test(test_tree_4096_hosts),
		cmocka_unit_test_setup_teardown(test_api_tokens_and_validation, api_setup, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_job_lifecycle, api_setup, api_teardown),
	};
	return cmocka_run_group_tests_name("manager", tests, NULL, NULL);
}
