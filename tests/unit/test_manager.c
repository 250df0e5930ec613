/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-manager without HTTP: topology validation, the tree builder on
 * generated fat-trees (up to 4096 hosts), quotas, and the API (tokens,
 * validation, a job from registration to ready, tenant isolation, a switch
 * that stops heartbeating, QPNs and ring ports unique per host address
 * across jobs and a restart, held requests: long-poll) with a clock the
 * test controls.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "mgr.h"

#define ADMIN "admin-token-0123456789"
#define TOK_A "tenant-a-token-0123456789"
/* printf %s tenant-a-token-0123456789 | sha256sum */
#define DIGEST_A "sha256:17802374494c2ebca56139aa3b14b8b67e23cd26dabf391ce92b3368eda060ea"
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
			 "hosts", hs, "links", ln, "tenants", "name", "a", "token", DIGEST_A,
			 "max_slots_per_switch", 64, "name", "b", "token", TOK_B,
			 "max_slots_per_switch", 16);
}

/*
 * Three tiers: P pods of L leaves of H hosts; pod p has one spine per plane
 * ("p<p>s<k>", linked to its pod's leaves "p<p>l<i>"); plane k has X
 * super-spines "x<k>-<i>", each linked to spine k of every pod. Switches
 * are listed super-spines, spines, leaves; host n sits on leaf n / H.
 */
static json_t *fat_tree3(int pods, int leaves, int hosts_per_leaf, int planes, int supers)
{
	json_t *sw = json_array(), *hs = json_array(), *ln = json_array();
	char name[32], up[32], ip[32];
	int k = 0;

	for (int x = 0; x < planes * supers; x++, k++) {
		snprintf(name, sizeof(name), "x%d-%d", x / supers, x % supers);
		snprintf(ip, sizeof(ip), "10.253.%d.%d", k / 200, k % 200 + 1);
		json_array_append_new(sw, json_pack("{s:s, s:s, s:s}", "name", name, "role",
						    "superspine", "ip", ip));
	}
	for (int p = 0; p < pods; p++)
		for (int s = 0; s < planes; s++, k++) {
			snprintf(name, sizeof(name), "p%ds%d", p, s);
			snprintf(ip, sizeof(ip), "10.253.%d.%d", k / 200, k % 200 + 1);
			json_array_append_new(sw, json_pack("{s:s, s:s, s:s}", "name", name,
							    "role", "spine", "ip", ip));
			for (int x = 0; x < supers; x++) {
				snprintf(up, sizeof(up), "x%d-%d", s, x);
				json_array_append_new(ln, json_pack("{s:s, s:s}", "spine", name,
								    "superspine", up));
			}
		}
	for (int l = 0; l < pods * leaves; l++, k++) {
		snprintf(name, sizeof(name), "p%dl%d", l / leaves, l % leaves);
		snprintf(ip, sizeof(ip), "10.253.%d.%d", k / 200, k % 200 + 1);
		json_array_append_new(sw, json_pack("{s:s, s:s, s:s}", "name", name, "role", "leaf",
						    "ip", ip));
		for (int s = 0; s < planes; s++) {
			snprintf(up, sizeof(up), "p%ds%d", l / leaves, s);
			json_array_append_new(ln, json_pack("{s:s, s:s}", "leaf", name, "spine", up));
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
	return json_pack("{s:o, s:o, s:o, s:[{s:s, s:s, s:i}]}", "switches", sw, "hosts", hs,
			 "links", ln, "tenants", "name", "a", "token", DIGEST_A,
			 "max_slots_per_switch", 64);
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
		"t.json: switches[0].role: expected \"leaf\", \"spine\" or \"superspine\"");
	assert_string_equal(topo_error(
		"{\"switches\": [{\"name\": \"l1\", \"role\": \"leaf\", \"ip\": \"10.0.0.1\", "
		"\"max_slots\": 0}]}"),
		"t.json: switches[0].max_slots: expected 1..16777216, got 0");
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
		"t.json: tenants[0].token: expected a secret of 16..127 characters, or "
		"\"sha256:\" and its SHA-256 in 64 hex digits");
	assert_string_equal(topo_error(
		"{\"switches\": [{\"name\": \"l1\", \"role\": \"leaf\", \"ip\": \"10.0.0.1\"}],"
		" \"hosts\": [{\"name\": \"h1\", \"ip\": \"10.0.0.9\", \"leaf\": \"l1\"}],"
		" \"tenants\": [{\"name\": \"a\", \"token\": \"sha256:0123\"}]}"),
		"t.json: tenants[0].token: expected \"sha256:\" and 64 hex digits (the SHA-256 of "
		"the secret, e.g. from: printf %s SECRET | sha256sum)");
}

/* The generated fat-trees (the bench's and the simulator's): switch
 * order, links, host placement, and the shapes refused. */
static void test_fat_tree(void **state)
{
	struct mgr_topo t;
	char why[200];
	/* 10 hosts, 2 a leaf: 5 leaves, pods of 2 -> 3 pods, 6 leaves; 2 spines a
	 * pod (6), 2 super-spines a plane (4) */
	struct mgr_fat_tree ft = { .tiers = 3, .hosts = 10, .hosts_per_leaf = 2, .spines = 2,
				   .leaves_per_pod = 2, .supers_per_plane = 2 };

	(void)state;
	assert_int_equal(mgr_topo_fat_tree(&t, &ft, why, sizeof(why)), 0);
	assert_int_equal(t.nswitches, 16);
	assert_int_equal(t.nhosts, 10);
	assert_int_equal(t.switches[0].role, MGR_SUPERSPINE);
	assert_int_equal(t.switches[4].role, MGR_SPINE);
	assert_int_equal(t.switches[10].role, MGR_LEAF);
	assert_string_equal(t.switches[10].name, "leaf10");
	assert_int_equal(t.switches[15].ip, 0x0aff000fu);
	/* leaf 12 (pod 1) on pod 1's spines 6 and 7; spine 7 (plane 1) on
	 * super-spines 2 and 3 */
	assert_int_equal(t.nup[12], 2);
	assert_int_equal(t.up[12][0], 6);
	assert_int_equal(t.up[12][1], 7);
	assert_true(mgr_linked(&t, 7, 2) && mgr_linked(&t, 7, 3) && !mgr_linked(&t, 7, 0));
	assert_int_equal(t.ndown[7], 2);
	assert_int_equal(t.ndown[0], 3);
	/* the last pod's second leaf has no host */
	assert_int_equal(t.hosts[9].leaf, 14);
	assert_string_equal(t.hosts[9].name, "h9");
	assert_int_equal(t.hosts[9].ip, 0x0a00000au);
	mgr_topo_free(&t);

	ft = (struct mgr_fat_tree){ .tiers = 2, .hosts = 5, .hosts_per_leaf = 4, .spines = 3 };
	assert_int_equal(mgr_topo_fat_tree(&t, &ft, why, sizeof(why)), 0);
	assert_int_equal(t.nswitches, 5);
	assert_int_equal(t.nup[3], 3);
	assert_int_equal(t.hosts[4].leaf, 4);
	mgr_topo_free(&t);
	ft = (struct mgr_fat_tree){ .tiers = 1, .hosts = 7 };
	assert_int_equal(mgr_topo_fat_tree(&t, &ft, why, sizeof(why)), 0);
	assert_int_equal(t.nswitches, 1);
	assert_int_equal(t.hosts[6].leaf, 0);
	mgr_topo_free(&t);

	ft = (struct mgr_fat_tree){ .tiers = 4, .hosts = 7 };
	assert_int_equal(mgr_topo_fat_tree(&t, &ft, why, sizeof(why)), -1);
	assert_string_equal(why, "tiers: 1, 2 or 3");
	ft = (struct mgr_fat_tree){ .tiers = 2, .hosts = 7, .hosts_per_leaf = 2 };
	assert_int_equal(mgr_topo_fat_tree(&t, &ft, why, sizeof(why)), -1);
	assert_string_equal(why, "a fabric needs hosts, hosts per leaf and spines");
	ft = (struct mgr_fat_tree){ .tiers = 2, .hosts = 2048, .hosts_per_leaf = 2, .spines = 1 };
	assert_int_equal(mgr_topo_fat_tree(&t, &ft, why, sizeof(why)), -1);
	assert_string_equal(why, "1025 switches: the manager takes at most 1024");
	assert_null(t.switches);
}

/* tokens are kept as SHA-256 digests: a secret and "sha256:" with its
 * digest give the same one, and only the secret is accepted as a token */
static void test_token_digests(void **state)
{
	uint8_t a[MGR_HASH_LEN], b[MGR_HASH_LEN];
	char why[200];

	(void)state;
	assert_int_equal(mgr_token_digest(TOK_A, a, why, sizeof(why)), 0);
	assert_int_equal(mgr_token_digest(DIGEST_A, b, why, sizeof(why)), 0);
	assert_memory_equal(a, b, MGR_HASH_LEN);
	assert_true(mgr_token_matches(TOK_A, b));
	assert_false(mgr_token_matches(DIGEST_A, b));
	assert_false(mgr_token_matches("tenant-a-token-012345678", b));
	assert_int_equal(mgr_token_digest("sha256:7cbc", a, why, sizeof(why)), -1);
	assert_int_equal(mgr_token_digest(NULL, a, why, sizeof(why)), -1);
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
	assert_int_equal(tr.nnodes, 1);
	assert_int_equal(tr.depth, 1);
	assert_string_equal(t.switches[tr.nodes[0].sw].name, "leaf3");
	assert_int_equal(tr.nodes[0].parent, -1);
	assert_int_equal(tr.nodes[0].fanin, 3);
	assert_int_equal(tr.nodes[0].nchildren, 0);
	for (int r = 0; r < 3; r++) {
		assert_int_equal(tr.node_of_rank[r], 0);
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
	assert_string_equal(t.switches[tr.nodes[0].sw].name, "spine1");
	assert_int_equal(tr.nnodes, 5);
	assert_int_equal(tr.depth, 2);
	assert_int_equal(tr.nodes[0].fanin, 5);
	assert_int_equal(tr.nodes[0].nchildren, 4);
	const char *want[] = { "leaf0", "leaf1", "leaf2", "leaf7" };
	const int fanin[] = { 2, 1, 1, 1 };
	for (int i = 0; i < 4; i++) {
		assert_string_equal(t.switches[tr.nodes[1 + i].sw].name, want[i]);
		assert_int_equal(tr.nodes[1 + i].fanin, fanin[i]);
		assert_int_equal(tr.nodes[1 + i].parent, 0);
		assert_int_equal(tr.nodes[1 + i].child_index, i);
	}
	/* ranks 1 and 3 share leaf0: member indices 0 and 1 there */
	assert_int_equal(tr.node_of_rank[1], 1);
	assert_int_equal(tr.node_of_rank[3], 1);
	assert_int_equal(tr.node_of_rank[4], 4);
	assert_int_equal(mgr_tree_child_toward(&tr, 0, 4), 4);
	assert_int_equal(mgr_tree_child_toward(&tr, 2, 4), -1);
	assert_int_equal(tr.index_in_leaf[1], 0);
	assert_int_equal(tr.index_in_leaf[3], 1);
	assert_int_equal(tr.index_in_leaf[0], 0);
	mgr_tree_free(&tr);
	/* equal load: the first by name order */
	l->slots[1] = 100;
	assert_int_equal(mgr_tree_build(&t, hosts, 5, l, 16, &tr, why, sizeof(why)), 0);
	assert_string_equal(t.switches[tr.nodes[0].sw].name, "spine0");
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
	assert_int_equal(mgr_topo_index_links(&t), 0);
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
	assert_string_equal(t.switches[tr.nodes[0].sw].name, "spine11");
	assert_int_equal(tr.nnodes, 65);
	int seen[64] = { 0 };
	for (int i = 0; i < 64; i++)
		assert_int_equal(tr.nodes[1 + i].fanin, 64);
	for (int r = 0; r < 4096; r++) {
		int leaf = tr.nodes[tr.node_of_rank[r]].sw - 16;
		assert_int_equal(leaf, hosts[r] / 64);
		assert_int_equal(tr.index_in_leaf[r], seen[leaf]++);
	}
	mgr_tree_free(&tr);
	mgr_topo_free(&t);
}

static const char *sw_name(const struct mgr_topo *t, const struct mgr_tree *tr, int node)
{
	return t->switches[tr->nodes[node].sw].name;
}

/*
 * The builder's scratch arrays come from malloc: leave freed chunks of
 * their size full of -1 (glibc hands them back to the next mallocs of that
 * size, its cache keeping only their first 16 bytes), so a read of a mark
 * never written sees -1, the value that means "a leaf of the job not yet
 * covered".
 */
static void poison_next_mallocs(size_t bytes)
{
	void *p[8];

	for (int i = 0; i < 8; i++) {
		p[i] = malloc(bytes);
		assert_non_null(p[i]);
		memset(p[i], 0xff, bytes);
	}
	for (int i = 0; i < 8; i++)
		free(p[i]);
}

static void test_tree_three_tiers(void **state)
{
	struct mgr_topo t;
	struct mgr_tree tr;
	struct loadbuf lb;
	struct mgr_load *l;
	char why[200];
	/* 4 pods of 2 leaves of 4 hosts, 2 planes of 2 super-spines:
	 * x0-0 x0-1 x1-0 x1-1 (0..3), p0s0 p0s1 ... p3s1 (4..11), p0l0 ... (12..19) */
	int pod0[3] = { 0, 6, 1 };            /* p0l0, p0l1, p0l0 */
	int hosts[4] = { 17, 1, 5, 2 };       /* p2l0, p0l0, p0l1, p0l0 */

	(void)state;
	topo_from(&t, fat_tree3(4, 2, 4, 2, 2));
	assert_int_equal(t.nswitches, 20);
	l = zero_load(&lb);
	/* one pod: two tiers, its less loaded spine */
	l->slots[4] = 10;                     /* p0s0 */
	assert_int_equal(mgr_tree_build(&t, pod0, 3, l, 16, &tr, why, sizeof(why)), 0);
	assert_int_equal(tr.depth, 2);
	assert_int_equal(tr.nnodes, 3);
	assert_string_equal(sw_name(&t, &tr, 0), "p0s1");
	mgr_tree_free(&tr);

	/* two pods: the least loaded super-spine, the spines of its plane
	 * (p2l1, a leaf of no rank under p2's spines, is not counted as
	 * covered whatever the scratch memory held) */
	l->slots[0] = 30;
	l->slots[1] = 20;
	l->slots[2] = 10;
	l->slots[3] = 40;
	poison_next_mallocs(sizeof(int) * (size_t)t.nswitches);
	assert_int_equal(mgr_tree_build(&t, hosts, 4, l, 16, &tr, why, sizeof(why)), 0);
	assert_int_equal(tr.depth, 3);
	assert_int_equal(tr.nnodes, 6);
	const char *want[] = { "x1-0", "p0s1", "p2s1", "p0l0", "p0l1", "p2l0" };
	const int parent[] = { -1, 0, 0, 1, 1, 2 }, child[] = { -1, 0, 1, 0, 1, 0 };
	const int fanin[] = { 4, 3, 1, 2, 1, 1 }, nchildren[] = { 2, 2, 1, 0, 0, 0 };
	for (int i = 0; i < 6; i++) {
		assert_string_equal(sw_name(&t, &tr, i), want[i]);
		assert_int_equal(tr.nodes[i].parent, parent[i]);
		assert_int_equal(tr.nodes[i].child_index, child[i]);
		assert_int_equal(tr.nodes[i].fanin, fanin[i]);
		assert_int_equal(tr.nodes[i].nchildren, nchildren[i]);
	}
	const int node_of[] = { 5, 3, 4, 3 }, index_of[] = { 0, 0, 0, 1 };
	for (int r = 0; r < 4; r++) {
		assert_int_equal(tr.node_of_rank[r], node_of[r]);
		assert_int_equal(tr.index_in_leaf[r], index_of[r]);
	}
	assert_int_equal(mgr_tree_child_toward(&tr, 0, 0), 2);
	assert_int_equal(mgr_tree_child_toward(&tr, 0, 1), 1);
	assert_int_equal(mgr_tree_child_toward(&tr, 1, 2), 4);
	assert_int_equal(mgr_tree_child_toward(&tr, 2, 2), -1);
	mgr_tree_free(&tr);

	/* that super-spine down: the next least loaded, its plane's spines */
	l->down[2] = true;
	assert_int_equal(mgr_tree_build(&t, hosts, 4, l, 16, &tr, why, sizeof(why)), 0);
	assert_string_equal(sw_name(&t, &tr, 0), "x0-1");
	assert_string_equal(sw_name(&t, &tr, 1), "p0s0");
	assert_string_equal(sw_name(&t, &tr, 2), "p2s0");
	mgr_tree_free(&tr);

	/* and pod 0's plane-0 spine full: plane 0 cannot carry p0l0 */
	l->slots[4] = 65536 - 8;
	assert_int_equal(mgr_tree_build(&t, hosts, 4, l, 16, &tr, why, sizeof(why)), 0);
	assert_string_equal(sw_name(&t, &tr, 0), "x1-1");
	assert_string_equal(sw_name(&t, &tr, 1), "p0s1");
	assert_string_equal(sw_name(&t, &tr, 2), "p2s1");
	mgr_tree_free(&tr);

	/* no super-spine left */
	l->down[0] = l->down[1] = l->down[3] = true;
	assert_int_equal(mgr_tree_build(&t, hosts, 4, l, 16, &tr, why, sizeof(why)), -1);
	assert_string_equal(why, "no super-spine can take the group: switch x1-1 is down");
	/* up, but spine p2s1 down and p2s0 full: nothing carries p2l0 */
	l->down[0] = l->down[1] = l->down[2] = l->down[3] = false;
	l->slots[4] = 0;
	l->down[9] = true;                    /* p2s1 */
	l->slots[8] = 65536;                  /* p2s0 */
	assert_int_equal(mgr_tree_build(&t, hosts, 4, l, 16, &tr, why, sizeof(why)), -1);
	assert_string_equal(why, "no super-spine can take the group: no spine under x1-1 can "
			    "carry leaf p2l0: switch p2s1 is down");
	mgr_topo_free(&t);
}

/* ---- the API ---- */

static double fake_now = 1000;
static double now_fn(void) { return fake_now; }

static struct mgr M;
static char topo_path[64], db_path[64];

/* (Re)start the manager on topo_path and db_path (none if empty). */
static int manager_start(void)
{
	char err[256];

	if (mgr_init(&M, topo_path, db_path[0] ? db_path : NULL, ADMIN, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	M.now = now_fn;
	M.start_time = fake_now;
	M.dead_after_s = 1;
	return 0;
}

/* A manager on topology j (consumed); its state in an SQLite database if
 * db. */
static int setup_on(json_t *j, bool db)
{
	int fd;

	snprintf(topo_path, sizeof(topo_path), "/tmp/inca-test-topo.XXXXXX");
	fd = mkstemp(topo_path);
	if (fd < 0)
		return -1;
	close(fd);
	json_dump_file(j, topo_path, 0);
	json_decref(j);
	fake_now = 1000;
	db_path[0] = 0;
	if (db) {
		snprintf(db_path, sizeof(db_path), "/tmp/inca-test-db.XXXXXX");
		fd = mkstemp(db_path);
		if (fd < 0)
			return -1;
		close(fd);
		unlink(db_path);
	}
	return manager_start();
}

/* A manager on a fat-tree of 2 leaves of 2 hosts and a spine. */
static int setup(bool db)
{
	return setup_on(fat_tree(2, 2, 1, 64), db);
}

static int api_setup(void **state)
{
	(void)state;
	return setup(false);
}

static int api_setup_db(void **state)
{
	(void)state;
	return setup(true);
}

/* Two spines over two leaves of two hosts. */
static int api_setup_2spines(void **state)
{
	(void)state;
	return setup_on(fat_tree(2, 2, 2, 64), true);
}

/* Three tiers: 4 pods of 2 leaves of 4 hosts, 2 planes of 2 super-spines. */
static int api_setup_3tiers(void **state)
{
	(void)state;
	return setup_on(fat_tree3(4, 2, 4, 2, 2), true);
}

static int api_teardown(void **state)
{
	char wal[80];

	(void)state;
	mgr_fini(&M);
	unlink(topo_path);
	if (db_path[0]) {
		unlink(db_path);
		snprintf(wal, sizeof(wal), "%s-wal", db_path);
		unlink(wal);
		snprintf(wal, sizeof(wal), "%s-shm", db_path);
		unlink(wal);
		db_path[0] = 0;
	}
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

static char last_error[512];

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
	assert_string_equal(err_of(r), "size: missing, expected an integer 1..65536");
	assert_int_equal(call("POST", "/v1/jobs/j/ranks", TOK_A,
			      "{\"rank\": 2, \"size\": 2, \"ip\": \"10.1.0.0\", \"qpn\": 17}", &r), 400);
	assert_string_equal(err_of(r), "rank: expected 0..1, got 2");
	assert_int_equal(call("POST", "/v1/jobs/j/ranks", TOK_A,
			      "{\"rank\": 0, \"size\": 2, \"ip\": \"10.1.0.0\", \"qpn\": \"0x1\"}", &r),
			 400);
	assert_string_equal(err_of(r), "qpn: expected 2..16777215, got 0x1 (or none: the manager "
			    "assigns one)");
	assert_int_equal(call("POST", "/v1/jobs/j/ranks", TOK_A,
			      "{\"rank\": 0, \"size\": 2, \"ip\": \"10.1.0.0\", \"window\": 4097}",
			      &r), 400);
	assert_string_equal(err_of(r), "window: expected 1..4096, got 4097");
	assert_int_equal(call("POST", "/v1/jobs/j/ranks", TOK_A,
			      "{\"rank\": 0, \"size\": 2, \"ip\": \"10.7.7.7\", \"qpn\": 17}", &r), 400);
	assert_string_equal(err_of(r), "ip 10.7.7.7 is not a host of the topology");
	assert_int_equal(call("POST", "/v1/jobs/bad%2fid/ranks", TOK_A, "{}", &r), 400);
	json_decref(r);
	assert_int_equal(call("POST", "/v1/jobs/j/ranks", TOK_A, "{not json", &r), 400);
	json_decref(r);
	assert_int_equal(call("GET", "/v1/nothing", TOK_A, NULL, &r), 404);
	json_decref(r);
	/* what the client sent is quoted, bytes that are not printable ASCII
	 * as '?' (a JSON string must be UTF-8: the answer used to be empty) */
	assert_int_equal(call("GET", "/v1/\xbf\x01x", TOK_A, NULL, &r), 404);
	assert_string_equal(err_of(r), "no such resource: GET /v1/??x");
	assert_int_equal(call("GET", "/v1/jobs/\xc3\xa9", TOK_A, NULL, &r), 404);
	assert_string_equal(err_of(r), "no job '?\?'");
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

	/* tenant b's quota is 16 slots per switch: a 32-slot job runs on the ring */
	assert_int_equal(call("POST", "/v1/jobs/jb/ranks", TOK_B,
			      "{\"rank\": 0, \"size\": 1, \"ip\": \"10.1.0.1\", \"qpn\": 20, "
			      "\"window\": 32}", &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "ring");
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: quota: tenant b would use 32 of its 16 slots on "
			    "switch leaf0");
	json_decref(r);
	assert_int_equal(call("GET", "/v1/jobs/jb/ranks/0", TOK_B, NULL, &r), 200);
	json_t *pl = json_object_get(r, "plan");
	assert_int_equal(json_integer_value(json_object_get(pl, "epoch")), 1);
	assert_string_equal(json_string_value(json_object_get(pl, "mode")), "ring");
	assert_true(json_is_true(json_object_get(pl, "ready")));
	assert_null(json_object_get(pl, "cut"));           /* plan 1: from the start */
	/* the ranks' description, without a switch */
	json_t *rg = json_object_get(r, "group");
	assert_true(json_is_true(json_object_get(rg, "ring")));
	assert_null(json_object_get(rg, "switch"));
	assert_int_equal(json_array_size(json_object_get(rg, "members")), 1);
	json_decref(r);
	assert_int_equal(call("DELETE", "/v1/jobs/jb", TOK_B, NULL, &r), 200);
	json_decref(r);

	/* leaf1 stops heartbeating: down; no tree avoids it, the job goes to
	 * the ring (plan 2, its tree dead); both listed */
	fake_now += 0.5;
	heartbeat("spine0", vs, &vs);
	heartbeat("leaf0", v0, &v0);
	fake_now += 0.7;
	mgr_tick(&M);
	assert_int_equal(call("GET", "/v1/jobs/j1", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "ring");
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: switch leaf1 is down");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "plan"), "epoch")), 2);
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
	assert_non_null(strstr(resp, "inca_manager_tree_builds_total 3\n"));
	free(resp);
}

/* Register a rank; returns the status and the QPN and ring port it got. */
static int join(const char *job, int rank, int size, const char *ip, const char *extra,
		int *qpn, int *ring_port)
{
	char path[64], body[256];
	json_t *r;
	int st;

	snprintf(path, sizeof(path), "/v1/jobs/%s/ranks", job);
	snprintf(body, sizeof(body), "{\"rank\": %d, \"size\": %d, \"ip\": \"%s\"%s%s}", rank,
		 size, ip, extra ? ", " : "", extra ? extra : "");
	st = call("POST", path, TOK_A, body, &r);
	if (st == 200) {
		*qpn = (int)json_integer_value(json_object_get(r, "qpn"));
		*ring_port = (int)json_integer_value(json_object_get(r, "ring_port"));
		json_decref(r);
	} else {
		snprintf(last_error, sizeof(last_error), "%s", err_of(r));
	}
	return st;
}

static void test_api_qpn_ring_port(void **state)
{
	json_t *r;
	int q, p, v;

	(void)state;
	M.default_window = 1;   /* many jobs within tenant a's 64 slots */
	/* ja: one rank on each host of leaf0; both addresses start at 17 */
	assert_int_equal(join("ja", 0, 2, "10.1.0.0", NULL, &q, &p), 200);
	assert_int_equal(q, 17);
	assert_int_equal(p, 18515);
	assert_int_equal(join("ja", 1, 2, "10.1.0.1", NULL, &q, &p), 200);
	assert_int_equal(q, 17);
	assert_int_equal(p, 18515);
	/* jb: two ranks on 10.1.0.0, which ja uses too: distinct QPNs and ports */
	assert_int_equal(join("jb", 0, 2, "10.1.0.0", NULL, &q, &p), 200);
	assert_int_equal(q, 18);
	assert_int_equal(p, 18516);
	assert_int_equal(join("jb", 1, 2, "10.1.0.0", NULL, &q, &p), 200);
	assert_int_equal(q, 19);
	assert_int_equal(p, 18517);
	/* registering again keeps them */
	assert_int_equal(join("jb", 1, 2, "10.1.0.0", NULL, &q, &p), 200);
	assert_int_equal(q, 19);
	assert_int_equal(p, 18517);
	assert_int_equal(join("jb", 1, 2, "10.1.0.0", "\"qpn\": 20", &q, &p), 409);
	assert_string_equal(last_error, "qpn: job jb rank 1 is registered with QPN 19");
	/* a QPN or port another job uses on that address: refused, no job left */
	assert_int_equal(join("jc", 0, 1, "10.1.0.0", "\"qpn\": 17", &q, &p), 409);
	assert_string_equal(last_error, "qpn: job ja rank 0 already uses 10.1.0.0 QPN 17");
	assert_int_equal(join("jc", 0, 1, "10.1.0.0", "\"qpn\": 100, \"ring_port\": 18516", &q,
			      &p), 409);
	assert_string_equal(last_error, "ring_port: job jb rank 0 already uses 10.1.0.0 port "
			    "18516");
	assert_int_equal(call("GET", "/v1/jobs/jc", TOK_A, NULL, &r), 404);
	json_decref(r);
	/* the same QPN on another address is fine; a free one asked for is kept */
	assert_int_equal(join("jc", 0, 1, "10.1.0.2", "\"qpn\": 18", &q, &p), 200);
	assert_int_equal(q, 18);
	assert_int_equal(p, 18515);
	assert_int_equal(join("jd", 0, 1, "10.1.0.0", "\"qpn\": 100", &q, &p), 200);
	assert_int_equal(q, 100);
	assert_int_equal(p, 18518);
	/* the ring port is unique on the ring's address */
	assert_int_equal(join("je", 0, 1, "10.1.0.1", "\"ring_ip\": \"192.168.0.1\"", &q, &p), 200);
	assert_int_equal(q, 18);
	assert_int_equal(p, 18515);

	/* every member's QPN and ring port reach the ranks and the switch */
	heartbeat("leaf0", 0, &v);
	heartbeat("leaf0", v, &v);
	assert_int_equal(call("GET", "/v1/jobs/jb/ranks/0", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "ready");
	json_t *mem = json_object_get(json_object_get(r, "group"), "members");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(mem, 0), "qpn")), 18);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(mem, 0), "ring_port")),
			 18516);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(mem, 1), "qpn")), 19);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(mem, 1), "ring_port")),
			 18517);
	json_decref(r);
	/* a join asks for its ring's members (itself and the next, by rank), a
	 * plan poll for none */
	assert_int_equal(call("GET", "/v1/jobs/jb/ranks/1?members=ring", TOK_A, NULL, &r), 200);
	mem = json_object_get(json_object_get(r, "group"), "members");
	assert_int_equal(json_object_size(mem), 3);
	assert_int_equal(json_integer_value(json_object_get(mem, "size")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(mem, "1"), "qpn")), 19);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(mem, "0"), "ring_port")),
			 18516);
	json_decref(r);
	assert_int_equal(call("GET", "/v1/jobs/jb/ranks/0?members=0", TOK_A, NULL, &r), 200);
	assert_true(json_is_false(json_object_get(json_object_get(r, "group"), "members")));
	json_decref(r);
	assert_int_equal(call("GET", "/v1/jobs/jb/ranks/0?members=some", TOK_A, NULL, &r), 400);
	assert_string_equal(err_of(r), "members: expected all, ring or 0");
	assert_int_equal(call("GET", "/v1/groups", ADMIN, NULL, &r), 200);
	int seen = 0;
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(r, "leaf0"), i, g) {
		json_t *m0 = json_array_get(json_object_get(g, "members"), 0);
		json_t *m1 = json_array_get(json_object_get(g, "members"), 1);
		if (json_integer_value(json_object_get(m0, "qpn")) == 18 &&
		    json_integer_value(json_object_get(m1, "qpn")) == 19)
			seen++;
	}
	assert_int_equal(seen, 1);
	json_decref(r);

	/* a restart on the same database: the values are still held */
	mgr_fini(&M);
	assert_int_equal(manager_start(), 0);
	M.default_window = 1;
	assert_int_equal(join("jf", 0, 1, "10.1.0.0", NULL, &q, &p), 200);
	assert_int_equal(q, 20);
	assert_int_equal(p, 18519);
	assert_int_equal(join("jg", 0, 1, "10.1.0.0", "\"qpn\": 19", &q, &p), 409);
	assert_string_equal(last_error, "qpn: job jb rank 1 already uses 10.1.0.0 QPN 19");
	/* deleting a job frees its values for the next */
	assert_int_equal(call("DELETE", "/v1/jobs/ja", TOK_A, NULL, &r), 200);
	json_decref(r);
	assert_int_equal(join("jg", 0, 1, "10.1.0.0", NULL, &q, &p), 200);
	assert_int_equal(q, 17);
	assert_int_equal(p, 18515);
	mgr_fini(&M);
	assert_int_equal(manager_start(), 0);
	M.default_window = 1;
	assert_int_equal(join("jh", 0, 1, "10.1.0.0", NULL, &q, &p), 200);
	assert_int_equal(q, 21);
	assert_int_equal(p, 18520);
}

/* Every switch gets the ranks under each member: hosts their own rank,
 * the spine's members (the leaves) theirs, not consecutive here. */
static void test_api_rank_map(void **state)
{
	static const char *const ip[4] = { "10.1.0.0", "10.1.0.2", "10.1.0.1", "10.1.0.3" };
	char body[160];
	json_t *r;
	int v;

	(void)state;
	/* ranks 0 and 2 on leaf0, 1 and 3 on leaf1 */
	for (int k = 0; k < 4; k++) {
		snprintf(body, sizeof(body), "{\"rank\": %d, \"size\": 4, \"ip\": \"%s\", "
			 "\"qpn\": %d}", k, ip[k], 17 + k);
		assert_int_equal(call("POST", "/v1/jobs/jr/ranks", TOK_A, body, &r), 200);
		json_decref(r);
	}
	/* and a job on leaf0 alone, its ranks in the other order of the hosts */
	assert_int_equal(call("POST", "/v1/jobs/js/ranks", TOK_A,
			      "{\"rank\": 0, \"size\": 2, \"ip\": \"10.1.0.1\", \"qpn\": 30}", &r), 200);
	json_decref(r);
	assert_int_equal(call("POST", "/v1/jobs/js/ranks", TOK_A,
			      "{\"rank\": 1, \"size\": 2, \"ip\": \"10.1.0.0\", \"qpn\": 31}", &r), 200);
	json_decref(r);
	heartbeat("spine0", 0, &v);
	assert_int_equal(call("GET", "/v1/groups", ADMIN, NULL, &r), 200);
	/* a member by switch, address and QPN (the spine's: the leaves' group QPNs) */
	static const struct { const char *sw, *ip; int qpn; const char *ranks; } want[] = {
		{ "spine0", "10.254.0.1", 0, "[0, 2]" },
		{ "spine0", "10.254.0.2", 0, "[1, 3]" },
		{ "leaf0", "10.1.0.0", 17, "[0]" },
		{ "leaf0", "10.1.0.1", 19, "[2]" },
		{ "leaf1", "10.1.0.2", 18, "[1]" },
		{ "leaf1", "10.1.0.3", 20, "[3]" },
		{ "leaf0", "10.1.0.1", 30, "[0]" },
		{ "leaf0", "10.1.0.0", 31, "[1]" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		json_t *g, *m, *found = NULL;
		size_t gi, mi;

		json_array_foreach(json_object_get(r, want[i].sw), gi, g) {
			assert_null(json_object_get(g, "first_rank"));
			json_array_foreach(json_object_get(g, "members"), mi, m)
				if (!strcmp(json_string_value(json_object_get(m, "ip")), want[i].ip) &&
				    (!want[i].qpn ||
				     json_integer_value(json_object_get(m, "qpn")) == want[i].qpn))
					found = m;
		}
		if (!found)
			fail_msg("%s: no member %s qpn %d", want[i].sw, want[i].ip, want[i].qpn);
		char *ranks = json_dumps(json_object_get(found, "ranks"), JSON_ENCODE_ANY);
		assert_non_null(ranks);
		if (strcmp(ranks, want[i].ranks))
			fail_msg("%s member %s qpn %d: ranks %s, want %s", want[i].sw, want[i].ip,
				 want[i].qpn, ranks, want[i].ranks);
		free(ranks);
	}
	json_decref(r);
}

/* A request made from another thread, to be held. */
struct held {
	pthread_t t;
	const char *method;
	char path[96], body[128];
	int status;
	json_t *resp;
};

static void *held_main(void *arg)
{
	struct held *h = arg;

	h->status = call(h->method, h->path, h->method[0] == 'P' ? ADMIN : TOK_A,
			 h->body[0] ? h->body : NULL, &h->resp);
	return NULL;
}

static void held_start(struct held *h, const char *method, const char *path, const char *body)
{
	unsigned waiting;

	memset(h, 0, sizeof(*h));
	h->method = method;
	snprintf(h->path, sizeof(h->path), "%s", path);
	snprintf(h->body, sizeof(h->body), "%s", body ? body : "");
	pthread_mutex_lock(&M.lock);
	waiting = M.polls_holding;
	pthread_mutex_unlock(&M.lock);
	assert_int_equal(pthread_create(&h->t, NULL, held_main, h), 0);
	/* until the manager holds it */
	for (;;) {
		pthread_mutex_lock(&M.lock);
		unsigned now_waiting = M.polls_holding;
		pthread_mutex_unlock(&M.lock);
		if (now_waiting > waiting)
			break;
		usleep(1000);
	}
}

static int metric(const char *name)
{
	char *resp = NULL, *at;
	const char *ctype;
	int v = -1;

	assert_int_equal(mgr_api(&M, "GET", "/metrics", ADMIN, NULL, &resp, &ctype), 200);
	at = strstr(resp, name);
	if (at)
		v = atoi(at + strlen(name));
	free(resp);
	return v;
}

/* what the topology view reads: the fabric, each switch's state and load,
 * the jobs the token may see with their trees, the failures */
static void test_api_topology(void **state)
{
	json_t *r, *sws, *j, *tree, *kids;
	int v;

	(void)state;
	assert_int_equal(call("GET", "/v1/topology", NULL, NULL, &r), 401);
	json_decref(r);
	heartbeat("spine0", 0, &v);
	heartbeat("leaf0", 0, &v);
	assert_int_equal(call("POST", "/v1/jobs/j1/ranks", TOK_A,
			      "{\"rank\": 0, \"size\": 2, \"ip\": \"10.1.0.1\"}", &r), 200);
	json_decref(r);
	assert_int_equal(call("POST", "/v1/jobs/j1/ranks", TOK_A,
			      "{\"rank\": 1, \"size\": 2, \"ip\": \"10.1.0.2\"}", &r), 200);
	json_decref(r);

	assert_int_equal(call("GET", "/v1/topology", ADMIN, NULL, &r), 200);
	sws = json_object_get(r, "switches");
	assert_int_equal(json_array_size(sws), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(sws, 0), "name")),
			    "spine0");
	assert_string_equal(json_string_value(json_object_get(json_array_get(sws, 0), "state")),
			    "up");
	/* leaf1 never heartbeated: unknown until dead_after_s passes */
	assert_string_equal(json_string_value(json_object_get(json_array_get(sws, 2), "state")),
			    "unknown");
	/* the job's one group on leaf0 and spine0 each; window 16 slots */
	assert_int_equal(json_integer_value(json_object_get(json_array_get(sws, 1), "slots")), 16);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(sws, 1), "groups")), 1);
	assert_null(json_object_get(json_array_get(sws, 1), "counters"));
	assert_int_equal(json_array_size(json_object_get(r, "hosts")), 4);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(json_object_get(r, "hosts"), 3), "leaf")), "leaf1");
	assert_int_equal(json_array_size(json_object_get(r, "links")), 2);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(json_object_get(r, "links"), 1), "leaf")), "leaf1");
	assert_int_equal(json_array_size(json_object_get(r, "jobs")), 1);
	j = json_array_get(json_object_get(r, "jobs"), 0);
	assert_string_equal(json_string_value(json_object_get(j, "id")), "j1");
	tree = json_object_get(j, "tree");
	assert_string_equal(json_string_value(json_object_get(tree, "switch")), "spine0");
	kids = json_object_get(tree, "children");
	assert_int_equal(json_array_size(kids), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(kids, 1), "switch")),
			    "leaf1");
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(
		json_array_get(kids, 1), "ranks"), 0), "ip")), "10.1.0.2");
	assert_int_equal(json_array_size(json_object_get(r, "failures")), 0);
	json_decref(r);

	/* tenant b sees the fabric, not tenant a's job */
	assert_int_equal(call("GET", "/v1/topology", TOK_B, NULL, &r), 200);
	assert_int_equal(json_array_size(json_object_get(r, "switches")), 3);
	assert_int_equal(json_array_size(json_object_get(r, "jobs")), 0);
	json_decref(r);

	/* leaf1 silent past dead_after_s: down, the job on the ring, both listed */
	fake_now += 2;
	mgr_tick(&M);
	assert_int_equal(call("GET", "/v1/topology", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(json_object_get(r, "switches"), 2), "state")), "down");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(json_object_get(r, "jobs"), 0), "state")), "ring");
	assert_true(json_array_size(json_object_get(r, "failures")) >= 2);
	json_decref(r);
}

static void test_api_long_poll(void **state)
{
	struct held hb, rk;
	json_t *r;
	int q, p, v;

	(void)state;
	heartbeat("leaf0", 0, &v);
	assert_int_equal(v, 0);
	/* a heartbeat with nothing new is held until a job changes leaf0's version */
	held_start(&hb, "POST", "/v1/switches/leaf0/heartbeat",
		   "{\"applied\": 0, \"wait_ms\": 20000}");
	assert_int_equal(join("j", 0, 1, "10.1.0.0", NULL, &q, &p), 200);
	pthread_join(hb.t, NULL);
	assert_int_equal(hb.status, 200);
	assert_int_equal(json_integer_value(json_object_get(hb.resp, "version")), 1);
	assert_int_equal(json_array_size(json_object_get(hb.resp, "groups")), 1);
	json_decref(hb.resp);
	assert_int_equal(metric("inca_manager_long_polls_total{end=\"change\"} "), 1);
	/* a rank's state request is held until its job is ready */
	held_start(&rk, "GET", "/v1/jobs/j/ranks/0?wait_ms=20000", NULL);
	heartbeat("leaf0", 1, &v);
	pthread_join(rk.t, NULL);
	assert_int_equal(rk.status, 200);
	assert_string_equal(json_string_value(json_object_get(rk.resp, "state")), "ready");
	assert_non_null(json_object_get(rk.resp, "group"));
	json_decref(rk.resp);
	assert_int_equal(metric("inca_manager_long_polls_total{end=\"change\"} "), 2);
	/* answered at once: ready already, or a version not applied yet */
	uint64_t held = M.polls_held;
	assert_int_equal(call("GET", "/v1/jobs/j/ranks/0?wait_ms=20000", TOK_A, NULL, &r), 200);
	json_decref(r);
	assert_int_equal(call("DELETE", "/v1/jobs/j", TOK_A, NULL, &r), 200);
	json_decref(r);
	assert_int_equal(call("POST", "/v1/switches/leaf0/heartbeat", ADMIN,
			      "{\"applied\": 1, \"wait_ms\": 20000}", &r), 200);
	assert_int_equal(json_integer_value(json_object_get(r, "version")), 2);
	assert_int_equal(json_array_size(json_object_get(r, "groups")), 0);
	json_decref(r);
	assert_int_equal(M.polls_held, held);
	/* nothing changes: answered when wait_ms pass */
	assert_int_equal(call("POST", "/v1/switches/leaf0/heartbeat", ADMIN,
			      "{\"applied\": 2, \"wait_ms\": 20}", &r), 200);
	assert_int_equal(json_integer_value(json_object_get(r, "version")), 2);
	json_decref(r);
	assert_int_equal(metric("inca_manager_long_polls_total{end=\"timeout\"} "), 1);
	/* a job deleted while a rank waits for it */
	assert_int_equal(join("jw", 0, 2, "10.1.0.0", NULL, &q, &p), 200);
	held_start(&rk, "GET", "/v1/jobs/jw/ranks/0?wait_ms=20000", NULL);
	assert_int_equal(call("DELETE", "/v1/jobs/jw", TOK_A, NULL, &r), 200);
	json_decref(r);
	pthread_join(rk.t, NULL);
	assert_int_equal(rk.status, 404);
	assert_string_equal(err_of(rk.resp), "job jw was deleted while the request waited");
	/* stopping answers every held request */
	held_start(&hb, "POST", "/v1/switches/leaf1/heartbeat", "{\"applied\": 0, \"wait_ms\": 20000}");
	mgr_stop(&M);
	pthread_join(hb.t, NULL);
	assert_int_equal(hb.status, 200);
	json_decref(hb.resp);
	assert_int_equal(metric("inca_manager_long_polls_held "), 0);
	/* wait_ms is checked */
	assert_int_equal(call("GET", "/v1/jobs/jw/ranks/0?wait_ms=soon", TOK_A, NULL, &r), 400);
	assert_string_equal(err_of(r), "wait_ms: expected 0..30000 milliseconds");
	assert_int_equal(call("POST", "/v1/switches/leaf0/heartbeat", ADMIN,
			      "{\"applied\": 2, \"wait_ms\": 40000}", &r), 400);
	assert_string_equal(err_of(r), "wait_ms: expected 0..30000, got 40000");
}

/* A job over two pods: a three-tier tree, each switch's group (a spine's
 * members are its leaves with their fan-in and ranks, its parent the
 * super-spine), the tree as GET /v1/jobs/ID draws it; a restart on the
 * database serves the same groups. */
static void test_api_three_tiers(void **state)
{
	static const char *const ips[] = { "10.1.0.17", "10.1.0.1", "10.1.0.5", "10.1.0.2" };
	json_t *r, *before, *g;
	int q, p, v;

	(void)state;
	for (int k = 0; k < 4; k++)
		assert_int_equal(join("j3", k, 4, ips[k], NULL, &q, &p), 200);
	assert_int_equal(call("GET", "/v1/jobs/j3", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "programming");
	assert_int_equal(json_integer_value(json_object_get(r, "tiers")), 3);
	json_t *tree = json_object_get(r, "tree");
	assert_string_equal(json_string_value(json_object_get(tree, "switch")), "x0-0");
	json_t *c0 = json_array_get(json_object_get(tree, "children"), 0);
	json_t *c1 = json_array_get(json_object_get(tree, "children"), 1);
	assert_string_equal(json_string_value(json_object_get(c0, "switch")), "p0s0");
	assert_int_equal(json_integer_value(json_object_get(c0, "fanin")), 3);
	assert_string_equal(json_string_value(json_object_get(c1, "switch")), "p2s0");
	json_t *l0 = json_array_get(json_object_get(c0, "children"), 0);
	assert_string_equal(json_string_value(json_object_get(l0, "switch")), "p0l0");
	assert_int_equal(json_array_size(json_object_get(l0, "ranks")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(
		json_object_get(l0, "ranks"), 1), "rank")), 3);
	json_decref(r);

	assert_int_equal(call("GET", "/v1/groups", ADMIN, NULL, &before), 200);
	/* p0s0 (10.253.0.5): members p0l0 (ranks 1, 3) and p0l1 (rank 2), parent x0-0 */
	g = json_array_get(json_object_get(before, "p0s0"), 0);
	assert_int_equal(json_array_size(json_object_get(before, "p0s0")), 1);
	json_t *m0 = json_array_get(json_object_get(g, "members"), 0);
	json_t *m1 = json_array_get(json_object_get(g, "members"), 1);
	assert_string_equal(json_string_value(json_object_get(m0, "ip")), "10.253.0.13");
	assert_int_equal(json_integer_value(json_object_get(m0, "fanin")), 2);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(m0, "ranks"), 0)), 1);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(m0, "ranks"), 1)), 3);
	assert_string_equal(json_string_value(json_object_get(m1, "ip")), "10.253.0.14");
	assert_int_equal(json_integer_value(json_object_get(m1, "fanin")), 1);
	json_t *par = json_object_get(g, "parent");
	assert_string_equal(json_string_value(json_object_get(par, "ip")), "10.253.0.1");
	assert_int_equal(json_integer_value(json_object_get(par, "rank")), 0);
	/* x0-0: members p0s0 (fan-in 3) and p2s0 (fan-in 1, rank 0), no parent */
	g = json_array_get(json_object_get(before, "x0-0"), 0);
	m1 = json_array_get(json_object_get(g, "members"), 1);
	assert_string_equal(json_string_value(json_object_get(m1, "ip")), "10.253.0.9");
	assert_int_equal(json_integer_value(json_object_get(m1, "fanin")), 1);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(m1, "ranks"), 0)), 0);
	assert_null(json_object_get(g, "parent"));
	/* p2l0: rank 0's host, parent p2s0 */
	g = json_array_get(json_object_get(before, "p2l0"), 0);
	assert_int_equal(json_array_size(json_object_get(g, "members")), 1);
	par = json_object_get(g, "parent");
	assert_string_equal(json_string_value(json_object_get(par, "ip")), "10.253.0.9");
	heartbeat("p0s0", 0, &v);
	assert_int_equal(v, 1);

	/* a restart: the same groups; every version one on (the reconcile) */
	mgr_fini(&M);
	assert_int_equal(manager_start(), 0);
	assert_int_equal(call("GET", "/v1/groups", ADMIN, NULL, &r), 200);
	assert_true(json_equal(r, before));
	json_decref(r);
	json_decref(before);
	heartbeat("p0s0", 1, &v);
	assert_int_equal(v, 2);
	/* a switch ahead of the manager (a state restored from before) */
	heartbeat("p2s0", 7, &v);
	assert_int_equal(v, 8);
	assert_int_equal(call("GET", "/v1/jobs/j3", TOK_A, NULL, &r), 200);
	assert_int_equal(json_integer_value(json_object_get(r, "tiers")), 3);
	json_decref(r);
}

/* ack rank r of job id to plan p at (next, first, keep): the status */
static int ack(const char *id, int r, int p, unsigned next, unsigned first, unsigned keep,
	       json_t **out)
{
	char path[96], body[160];

	snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%d/ack", id, r);
	snprintf(body, sizeof(body), "{\"plan\": %d, \"next\": %u, \"first\": %u, \"keep\": %u}",
		 p, next, first, keep);
	return call("POST", path, TOK_A, body, out);
}

/* rank r's view of job id's plan (consumed by the caller), asked with the
 * version of its last answer (?plan_ver=) when ver >= 0 */
static json_t *plan_since(const char *id, int r, long long ver)
{
	char path[128];
	json_t *o;

	if (ver >= 0)
		snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%d?plan_ver=%lld", id, r, ver);
	else
		snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%d", id, r);
	assert_int_equal(call("GET", path, TOK_A, NULL, &o), 200);
	return o;
}

static json_t *plan_of(const char *id, int r)
{
	return plan_since(id, r, -1);
}

static const char *pstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(json_object_get(o, "plan"), k));
}

static long long pnum(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(json_object_get(o, "plan"), k));
}

static long long cutnum(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(json_object_get(json_object_get(o, "plan"),
								  "cut"), k));
}

/* both ranks of job id take plan p at collective `at` (next = first = keep) */
static void ack_both(const char *id, int p, unsigned at)
{
	json_t *r;

	for (int k = 0; k < 2; k++) {
		assert_int_equal(ack(id, k, p, at, at, at, &r), 200);
		json_decref(r);
	}
}

/* job id's plan, as rank 0 sees it, is epoch in mode ("tree", "ring") */
static void expect_plan(const char *id, long long epoch, const char *mode)
{
	json_t *r = plan_of(id, 0);

	assert_int_equal(pnum(r, "epoch"), epoch);
	assert_string_equal(pstr(r, "mode"), mode);
	json_decref(r);
}

/* Every switch but skip and skip2 heartbeats (applied: what it was last
 * told). */
static void beat_all_but2(const char *skip, const char *skip2)
{
	static const char *const sws[] = { "spine0", "spine1", "leaf0", "leaf1" };
	static int ver[4];
	for (int i = 0; i < 4; i++)
		if ((!skip || strcmp(sws[i], skip)) && (!skip2 || strcmp(sws[i], skip2)))
			for (int k = 0; k < 2; k++)
				heartbeat(sws[i], ver[i], &ver[i]);
}

static void beat_all_but(const char *skip)
{
	beat_all_but2(skip, NULL);
}

/* Plans: a spine of the tree down, a new tree and the cut the ranks agree
 * on; both spines down, the ring, a cut that cannot be made; a spine back,
 * in-network again from the ring; a restart keeps it all; a rank's stall. */
static void test_api_plans(void **state)
{
	json_t *r;
	int q, p;

	(void)state;
	beat_all_but(NULL);
	assert_int_equal(join("j", 0, 2, "10.1.0.0", NULL, &q, &p), 200);
	assert_int_equal(join("j", 1, 2, "10.1.0.2", NULL, &q, &p), 200);
	beat_all_but(NULL);
	r = plan_of("j", 0);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "ready");
	assert_int_equal(pnum(r, "epoch"), 1);
	assert_string_equal(pstr(r, "mode"), "tree");
	assert_false(json_is_true(json_object_get(json_object_get(r, "plan"), "dead")));
	assert_null(json_object_get(json_object_get(r, "plan"), "cut"));
	long long ver = pnum(r, "version");
	json_decref(r);
	assert_int_equal(call("GET", "/v1/jobs/j", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "tree"), "switch")),
			    "spine0");
	json_decref(r);

	/* spine0 silent: plan 2, a tree on spine1; the old one dead */
	fake_now += 1.5;
	beat_all_but("spine0");
	mgr_tick(&M);
	r = plan_of("j", 0);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "programming");
	assert_int_equal(pnum(r, "epoch"), 2);
	assert_string_equal(pstr(r, "mode"), "tree");
	assert_true(json_is_true(json_object_get(json_object_get(r, "plan"), "dead")));
	assert_true(pnum(r, "version") > ver);
	assert_null(json_object_get(json_object_get(r, "plan"), "cut"));
	json_decref(r);
	/* the acks: an older plan refused; the cut once both are in */
	assert_int_equal(ack("j", 0, 1, 105, 104, 103, &r), 409);
	assert_string_equal(err_of(r), "plan 1 is not the job's (2)");
	assert_int_equal(ack("j", 0, 2, 105, 106, 103, &r), 400);
	assert_string_equal(err_of(r), "expected keep <= first <= next, got 103, 106, 105");
	assert_int_equal(ack("j", 0, 2, 105, 104, 103, &r), 200);
	assert_null(json_object_get(json_object_get(r, "plan"), "cut"));
	json_decref(r);
	assert_int_equal(ack("j", 1, 2, 104, 103, 103, &r), 200);
	json_decref(r);
	r = plan_of("j", 1);
	assert_int_equal(cutnum(r, "seq"), 105);       /* the highest next */
	assert_int_equal(cutnum(r, "from"), 103);      /* the lowest first: replayed */
	assert_null(json_object_get(json_object_get(r, "plan"), "error"));
	json_decref(r);
	beat_all_but("spine0");
	r = plan_of("j", 1);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "ready");
	assert_true(json_is_true(json_object_get(json_object_get(r, "plan"), "ready")));
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "group"),
							      "switch")), "10.254.0.2");
	json_decref(r);
	assert_int_equal(call("GET", "/v1/jobs/j", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "tree"), "switch")),
			    "spine1");
	json_decref(r);

	/* a restart: the plan, its cut and the acks are kept */
	mgr_fini(&M);
	assert_int_equal(manager_start(), 0);
	r = plan_of("j", 0);
	assert_int_equal(pnum(r, "epoch"), 2);
	assert_int_equal(cutnum(r, "seq"), 105);
	assert_int_equal(cutnum(r, "from"), 103);
	json_decref(r);

	/* spine1 down too: the ring (plan 3); rank 0 completed 198 and no
	 * longer holds its input: the cut cannot be made, and says why */
	fake_now += 1.5;
	beat_all_but2("spine0", "spine1");
	mgr_tick(&M);
	r = plan_of("j", 0);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "ring");
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: no spine can take the group: switch spine1 is down");
	assert_int_equal(pnum(r, "epoch"), 3);
	assert_string_equal(pstr(r, "mode"), "ring");
	long long ver3 = pnum(r, "version");
	json_decref(r);
	assert_int_equal(ack("j", 0, 3, 200, 199, 199, &r), 200);
	json_decref(r);
	assert_int_equal(ack("j", 1, 3, 199, 198, 198, &r), 200);
	json_decref(r);
	r = plan_of("j", 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "plan"), "error")),
			    "collective 198: rank 0 completed it on the tree that failed, rank 1 "
			    "did not, and rank 0 no longer holds its input (it keeps collectives "
			    "from 199 on: INCA_KEEP)");
	json_decref(r);

	/* spine0 back: a tree again (plan 4, from the ring: nothing replayed) */
	beat_all_but("spine1");
	mgr_tick(&M);
	r = plan_of("j", 0);
	assert_int_equal(pnum(r, "epoch"), 4);
	assert_string_equal(pstr(r, "mode"), "tree");
	assert_false(json_is_true(json_object_get(json_object_get(r, "plan"), "dead")));
	long long ver4 = pnum(r, "version");
	json_decref(r);
	/* a rank whose last answer was plan 3 before its cut: plan 3 with its
	 * cut first (its error, its reason, no group), then plan 4 */
	r = plan_since("j", 1, ver3);
	assert_int_equal(pnum(r, "epoch"), 3);
	assert_string_equal(pstr(r, "mode"), "ring");
	const char *err3 = json_string_value(json_object_get(json_object_get(r, "plan"), "error"));
	assert_non_null(err3);
	assert_non_null(strstr(err3, "collective 198: rank 0"));
	assert_true(json_is_true(json_object_get(json_object_get(r, "plan"), "replaced")));
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: no spine can take the group: switch spine1 is down");
	assert_null(json_object_get(r, "group"));
	long long cut3 = pnum(r, "version");
	assert_true(cut3 > ver3 && cut3 < ver4);
	json_decref(r);
	r = plan_since("j", 1, cut3);
	assert_int_equal(pnum(r, "epoch"), 4);
	assert_null(json_object_get(json_object_get(r, "plan"), "cut"));
	assert_null(json_object_get(json_object_get(r, "plan"), "replaced"));
	json_decref(r);
	r = plan_since("j", 1, ver4);     /* seen plan 4: nothing older */
	assert_int_equal(pnum(r, "epoch"), 4);
	json_decref(r);
	assert_int_equal(ack("j", 0, 4, 300, 300, 300, &r), 200);
	json_decref(r);
	assert_int_equal(ack("j", 1, 4, 302, 301, 300, &r), 200);
	json_decref(r);
	r = plan_of("j", 0);
	assert_int_equal(cutnum(r, "seq"), 302);
	assert_int_equal(cutnum(r, "from"), 302);
	json_decref(r);

	/* a rank sees no results while the tree's switches heartbeat: the ring */
	beat_all_but("spine1");
	assert_int_equal(call("POST", "/v1/jobs/j/ranks/1/stall", TOK_A,
			      "{\"plan\": 3, \"ms\": 1000}", &r), 200);   /* an older plan */
	assert_int_equal(pnum(r, "epoch"), 4);
	json_decref(r);
	assert_int_equal(call("POST", "/v1/jobs/j/ranks/1/stall", TOK_A,
			      "{\"plan\": 4, \"ms\": 1000}", &r), 200);
	assert_int_equal(pnum(r, "epoch"), 4);    /* noted: heartbeats decide first */
	json_decref(r);
	fake_now += 0.5;
	beat_all_but("spine1");
	mgr_tick(&M);
	r = plan_of("j", 0);
	assert_int_equal(pnum(r, "epoch"), 4);
	json_decref(r);
	fake_now += 0.6;                          /* dead_after past the stall */
	beat_all_but("spine1");
	mgr_tick(&M);
	r = plan_of("j", 0);
	assert_int_equal(pnum(r, "epoch"), 5);
	assert_string_equal(pstr(r, "mode"), "ring");
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: rank 1 saw no results from its tree for 1000 ms");
	json_decref(r);
	/* plan 4 was cut and replaced: a rank that saw it before its cut gets
	 * the cut first; one that saw plan 3 uncut gets 3, then 4, then 5 */
	r = plan_since("j", 0, ver4);
	assert_int_equal(pnum(r, "epoch"), 4);
	assert_string_equal(pstr(r, "mode"), "tree");
	assert_false(json_is_true(json_object_get(json_object_get(r, "plan"), "ready")));
	assert_int_equal(cutnum(r, "seq"), 302);
	assert_int_equal(cutnum(r, "from"), 302);
	assert_null(json_object_get(json_object_get(r, "plan"), "error"));
	long long cut4 = pnum(r, "version");
	json_decref(r);
	r = plan_since("j", 0, ver3);
	assert_int_equal(pnum(r, "epoch"), 3);
	json_decref(r);
	r = plan_since("j", 0, cut3);
	assert_int_equal(pnum(r, "epoch"), 4);
	assert_int_equal(pnum(r, "version"), cut4);
	json_decref(r);
	r = plan_since("j", 0, cut4);
	assert_int_equal(pnum(r, "epoch"), 5);
	json_decref(r);
	r = plan_since("j", 0, 0);        /* no view yet: the current plan */
	assert_int_equal(pnum(r, "epoch"), 5);
	json_decref(r);
	/* metrics */
	char *resp = NULL;
	const char *ctype;
	assert_int_equal(mgr_api(&M, "GET", "/metrics", ADMIN, NULL, &resp, &ctype), 200);
	assert_non_null(strstr(resp, "inca_manager_plans_total{mode=\"ring\"} 2\n"));
	assert_non_null(strstr(resp, "inca_manager_jobs{state=\"ring\"} 1\n"));
	free(resp);

	/* the ranks take the ring (plan 5); a tree again 10 s after the
	 * stall, not before */
	ack_both("j", 5, 400);
	double ring_at = fake_now;
	int epoch = 5;
	for (unsigned stall = 1; stall <= 3; stall++) {
		/* 10, 20, 40 s: each tree stalled within a minute of its making */
		double wait = 10.0 * (1u << (stall - 1));
		fake_now = ring_at + wait - 0.1;
		assert_int_equal(call("POST", "/v1/jobs/j/renew", TOK_A, "{}", &r), 200);
		json_decref(r);                       /* the ranks' lease */
		beat_all_but("spine1");
		mgr_tick(&M);
		expect_plan("j", epoch, "ring");
		fake_now = ring_at + wait + 0.1;
		beat_all_but("spine1");
		mgr_tick(&M);
		expect_plan("j", ++epoch, "tree");
		unsigned at = 500 + 100 * stall;
		ack_both("j", epoch, at);
		/* it stalls again at once */
		char body[64];
		snprintf(body, sizeof(body), "{\"plan\": %d, \"ms\": 1000}", epoch);
		assert_int_equal(call("POST", "/v1/jobs/j/ranks/0/stall", TOK_A, body, &r), 200);
		json_decref(r);
		fake_now += 1.1;
		beat_all_but("spine1");
		mgr_tick(&M);
		expect_plan("j", ++epoch, "ring");
		ack_both("j", epoch, at + 50);
		ring_at = fake_now;
	}
	/* the failure log says when the next try comes */
	assert_int_equal(call("GET", "/v1/jobs/j", TOK_A, NULL, &r), 200);
	json_decref(r);
	assert_int_equal(mgr_api(&M, "GET", "/v1/failures", ADMIN, NULL, &resp, &ctype), 200);
	assert_non_null(strstr(resp, "a tree again in 80 s at the earliest (stall 4 in a row)"));
	free(resp);
}

/* leaf0's heartbeat saying which parents its down ports hide (JSON array) */
static void beat_unreachable(const char *ips)
{
	static int ver;
	char body[160];
	json_t *r;

	snprintf(body, sizeof(body), "{\"applied\": %d, \"counters\": {\"ports_down\": [], "
		 "\"unreachable\": %s}}", ver, ips);
	assert_int_equal(call("POST", "/v1/switches/leaf0/heartbeat", ADMIN, body, &r), 200);
	ver = (int)json_integer_value(json_object_get(r, "version"));
	json_decref(r);
}

static const char *tree_switch(const char *id)
{
	static char name[32];
	char path[64];
	json_t *r;

	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	assert_int_equal(call("GET", path, TOK_A, NULL, &r), 200);
	const char *s = json_string_value(json_object_get(json_object_get(r, "tree"), "switch"));
	snprintf(name, sizeof(name), "%s", s ? s : "(none)");
	json_decref(r);
	return name;
}

/* A leaf reports its port towards the tree's spine down: a tree on the
 * other spine; both down: the ring, saying which link; back: a tree. */
static void test_api_link_down(void **state)
{
	json_t *r;
	char *resp;
	const char *ctype;
	int q, p;

	(void)state;
	beat_all_but(NULL);
	assert_int_equal(join("j", 0, 2, "10.1.0.0", NULL, &q, &p), 200);
	assert_int_equal(join("j", 1, 2, "10.1.0.2", NULL, &q, &p), 200);
	beat_all_but(NULL);
	assert_string_equal(tree_switch("j"), "spine0");

	beat_unreachable("[\"10.255.0.1\"]");             /* spine0's address */
	r = plan_of("j", 0);
	assert_int_equal(pnum(r, "epoch"), 2);
	assert_string_equal(pstr(r, "mode"), "tree");
	assert_true(json_is_true(json_object_get(json_object_get(r, "plan"), "dead")));
	json_decref(r);
	assert_string_equal(tree_switch("j"), "spine1");
	assert_int_equal(mgr_api(&M, "GET", "/v1/failures", ADMIN, NULL, &resp, &ctype), 200);
	assert_non_null(strstr(resp, "link leaf0 - spine0 down: leaf0 reports its port towards "
				     "spine0 down"));
	free(resp);
	/* the same report again changes nothing */
	beat_unreachable("[\"10.255.0.1\", \"10.9.9.9\", 7]");
	expect_plan("j", 2, "tree");
	ack_both("j", 2, 10);

	beat_unreachable("[\"10.255.0.1\", \"10.255.0.2\"]");
	r = plan_of("j", 0);
	assert_int_equal(pnum(r, "epoch"), 3);
	assert_string_equal(pstr(r, "mode"), "ring");
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: no spine can take the group: the link leaf0 - "
			    "spine1 is down");
	json_decref(r);
	ack_both("j", 3, 20);

	/* spine1's link back: a tree on it at the next tick */
	beat_unreachable("[\"10.255.0.1\"]");
	mgr_tick(&M);
	r = plan_of("j", 0);
	assert_int_equal(pnum(r, "epoch"), 4);
	assert_string_equal(pstr(r, "mode"), "tree");
	assert_false(json_is_true(json_object_get(json_object_get(r, "plan"), "dead")));
	json_decref(r);
	assert_string_equal(tree_switch("j"), "spine1");
	assert_int_equal(mgr_api(&M, "GET", "/v1/failures", ADMIN, NULL, &resp, &ctype), 200);
	assert_non_null(strstr(resp, "link leaf0 - spine1 back"));
	free(resp);
}

/* Join rank r (of 2, on host 10.1.0.0 or .2) of rail `rail` of a job with
 * two rails: the status. */
static int join_rail(const char *job, int r, int rail, const char *more)
{
	char extra[128];
	int q, p;

	snprintf(extra, sizeof(extra), "\"rails\": 2, \"rail\": %d%s%s", rail, more ? ", " : "",
		 more ? more : "");
	return join(job, r, 2, r ? "10.1.0.2" : "10.1.0.0", extra, &q, &p);
}

/* job id's state, as rank 0 sees it */
static const char *state_of(const char *id)
{
	static char st[32];
	json_t *r = plan_of(id, 0);

	snprintf(st, sizeof(st), "%s", json_string_value(json_object_get(r, "state")));
	json_decref(r);
	return st;
}

static bool has_cut(const char *id)
{
	json_t *r = plan_of(id, 0);
	bool cut = json_object_get(json_object_get(r, "plan"), "cut") != NULL;

	json_decref(r);
	return cut;
}

/* Rails: the jobs of a job's rails are planned as one. The first plan
 * waits for every rail; a rail that cannot have a tree puts every rail on
 * the ring; a rail's tree lost alone gets a new one alone; both lost: the
 * ring for both, one cut from every rank of both; back in-network
 * together; a stall on one moves both; a restart keeps the family; a rail
 * deleted does not hold the other's cut. */
static void test_api_rails(void **state)
{
	json_t *r;
	char *resp;
	const char *ctype;

	(void)state;
	beat_all_but(NULL);
	/* what a rank says is checked */
	assert_int_equal(join_rail("jx", 0, 1, NULL), 400);
	assert_string_equal(last_error, "rail 1: expected the job id <job>.rail1, got jx");
	assert_int_equal(join_rail("jr.rail2", 0, 2, NULL), 400);
	assert_string_equal(last_error, "rail: expected 0..1, got 2");

	/* jq: rail 1 asks for more slots than a spine has: no tree for it,
	 * so none for rail 0 either */
	assert_int_equal(join_rail("jq", 0, 0, NULL), 200);
	assert_int_equal(join_rail("jq", 1, 0, NULL), 200);
	assert_string_equal(state_of("jq"), "waiting");        /* its rail is not in */
	assert_int_equal(join_rail("jq.rail1", 0, 1, "\"window\": 128"), 200);
	assert_string_equal(state_of("jq"), "waiting");
	assert_int_equal(join_rail("jq.rail1", 1, 1, "\"window\": 128"), 200);
	assert_string_equal(state_of("jq"), "ring");
	assert_string_equal(state_of("jq.rail1"), "ring");
	r = plan_of("jq", 0);
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: every rail: rail 1 (job jq.rail1): no spine can take "
			    "the group: switch spine1: 0 of 64 slots in use, the group needs 128");
	json_decref(r);
	assert_int_equal(metric("inca_manager_rail_jobs{plan=\"ring\"} "), 1);
	assert_int_equal(call("DELETE", "/v1/jobs/jq", TOK_A, NULL, &r), 200);
	json_decref(r);
	assert_int_equal(call("DELETE", "/v1/jobs/jq.rail1", TOK_A, NULL, &r), 200);
	json_decref(r);

	/* jr: both rails on trees, each its own */
	assert_int_equal(join_rail("jr", 0, 0, NULL), 200);
	assert_int_equal(join_rail("jr", 1, 0, NULL), 200);
	assert_int_equal(join_rail("jr", 0, 0, "\"rails\": 3"), 400);
	assert_int_equal(join("jr", 0, 2, "10.1.0.0", "\"rails\": 3", &(int){0}, &(int){0}), 409);
	assert_string_equal(last_error, "job jr is rail 0 of 2, not rail 0 of 3");
	assert_int_equal(join_rail("jr.rail1", 0, 1, NULL), 200);
	assert_int_equal(join_rail("jr.rail1", 1, 1, NULL), 200);
	beat_all_but(NULL);
	assert_string_equal(state_of("jr"), "ready");
	assert_string_equal(state_of("jr.rail1"), "ready");
	expect_plan("jr", 1, "tree");
	expect_plan("jr.rail1", 1, "tree");
	assert_string_equal(tree_switch("jr"), "spine0");
	assert_string_equal(tree_switch("jr.rail1"), "spine1");
	assert_int_equal(metric("inca_manager_rail_jobs{plan=\"tree\"} "), 1);
	assert_int_equal(call("GET", "/v1/jobs/jr", TOK_A, NULL, &r), 200);
	assert_int_equal(json_integer_value(json_object_get(r, "rails")), 2);
	assert_int_equal(json_integer_value(json_object_get(r, "rail")), 0);
	json_t *rj = json_object_get(r, "rail_jobs");
	assert_int_equal(json_array_size(rj), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(rj, 1), "id")),
			    "jr.rail1");
	assert_string_equal(json_string_value(json_object_get(json_object_get(
		json_array_get(rj, 1), "tree"), "switch")), "spine1");
	json_decref(r);

	/* spine1 silent: rail 1 alone gets a new tree (spine0), rail 0 keeps
	 * its own; its cut is rail 1's ranks' alone */
	fake_now += 1.5;
	beat_all_but("spine1");
	mgr_tick(&M);
	expect_plan("jr", 1, "tree");
	expect_plan("jr.rail1", 2, "tree");
	r = plan_of("jr.rail1", 0);
	long long v2 = pnum(r, "version");       /* a rank's view before plan 2's cut */
	json_decref(r);
	assert_int_equal(ack("jr.rail1", 0, 2, 10, 10, 10, &r), 200);
	json_decref(r);
	assert_int_equal(ack("jr.rail1", 1, 2, 12, 11, 10, &r), 200);
	json_decref(r);
	r = plan_of("jr.rail1", 0);
	assert_int_equal(cutnum(r, "seq"), 12);
	assert_int_equal(cutnum(r, "from"), 10);
	json_decref(r);
	beat_all_but("spine1");
	assert_string_equal(tree_switch("jr.rail1"), "spine0");

	/* spine0 silent too: no tree for either: both on the ring, and one
	 * cut for both, once every rank of both has answered */
	fake_now += 1.5;
	beat_all_but2("spine0", "spine1");
	mgr_tick(&M);
	expect_plan("jr", 2, "ring");
	expect_plan("jr.rail1", 3, "ring");
	r = plan_of("jr", 0);
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: every rail: rail 0 (job jr): no spine can take "
			    "the group: switch spine1 is down");
	assert_true(json_is_true(json_object_get(json_object_get(r, "plan"), "dead")));
	json_decref(r);
	assert_int_equal(metric("inca_manager_rail_jobs{plan=\"ring\"} "), 1);
	assert_int_equal(ack("jr", 0, 2, 20, 20, 20, &r), 200);
	json_decref(r);
	assert_int_equal(ack("jr", 1, 2, 21, 20, 20, &r), 200);
	json_decref(r);
	assert_false(has_cut("jr"));           /* rail 1's ranks have not answered */
	assert_int_equal(ack("jr.rail1", 0, 3, 25, 24, 24, &r), 200);
	json_decref(r);
	assert_false(has_cut("jr"));
	assert_int_equal(ack("jr.rail1", 1, 3, 24, 24, 24, &r), 200);
	json_decref(r);
	r = plan_of("jr", 1);
	assert_int_equal(cutnum(r, "seq"), 25);      /* the highest next of all four */
	assert_int_equal(cutnum(r, "from"), 20);     /* rail 0's lowest first */
	json_decref(r);
	r = plan_of("jr.rail1", 1);
	assert_int_equal(cutnum(r, "seq"), 25);
	assert_int_equal(cutnum(r, "from"), 24);
	json_decref(r);

	/* a restart keeps the family, and the plans cut and replaced since: a
	 * rank whose view is from before rail 1's plan 2 was cut gets that
	 * plan first, with its cut */
	mgr_fini(&M);
	assert_int_equal(manager_start(), 0);
	r = plan_since("jr.rail1", 1, v2);
	assert_int_equal(pnum(r, "epoch"), 2);
	assert_string_equal(pstr(r, "mode"), "tree");
	assert_true(json_is_true(json_object_get(json_object_get(r, "plan"), "replaced")));
	assert_int_equal(cutnum(r, "seq"), 12);
	assert_int_equal(cutnum(r, "from"), 10);
	long long c2 = pnum(r, "version");
	json_decref(r);
	r = plan_since("jr.rail1", 1, c2);
	assert_int_equal(pnum(r, "epoch"), 3);
	assert_null(json_object_get(json_object_get(r, "plan"), "replaced"));
	json_decref(r);
	assert_int_equal(call("GET", "/v1/jobs/jr.rail1", TOK_A, NULL, &r), 200);
	assert_int_equal(json_integer_value(json_object_get(r, "rails")), 2);
	assert_int_equal(json_integer_value(json_object_get(r, "rail")), 1);
	assert_int_equal(json_array_size(json_object_get(r, "rail_jobs")), 2);
	json_decref(r);

	/* spine0 back (spine1 still silent, down again once the restarted
	 * manager has waited for it): trees for both at once (from the ring:
	 * nothing replayed), one cut */
	fake_now += 1.5;
	beat_all_but("spine1");
	mgr_tick(&M);
	assert_string_equal(tree_switch("jr"), "spine0");
	assert_string_equal(tree_switch("jr.rail1"), "spine0");
	expect_plan("jr", 3, "tree");
	expect_plan("jr.rail1", 4, "tree");
	ack_both("jr", 3, 30);
	assert_false(has_cut("jr"));
	ack_both("jr.rail1", 4, 31);
	r = plan_of("jr", 0);
	assert_int_equal(cutnum(r, "seq"), 31);
	assert_int_equal(cutnum(r, "from"), 31);
	json_decref(r);
	beat_all_but("spine1");
	assert_int_equal(metric("inca_manager_rail_jobs{plan=\"tree\"} "), 1);
	assert_int_equal(metric("inca_manager_rail_jobs{plan=\"mixed\"} "), 0);

	/* a rank of rail 0 sees no results while spine0 heartbeats: both go
	 * to the ring */
	assert_int_equal(call("POST", "/v1/jobs/jr/ranks/0/stall", TOK_A,
			      "{\"plan\": 3, \"ms\": 1000}", &r), 200);
	json_decref(r);
	fake_now += 1.5;
	beat_all_but("spine1");
	mgr_tick(&M);
	expect_plan("jr", 4, "ring");
	expect_plan("jr.rail1", 5, "ring");
	r = plan_of("jr.rail1", 0);
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: every rail: rail 0 (job jr): rank 0 saw no results "
			    "from its tree for 1000 ms");
	json_decref(r);
	assert_int_equal(mgr_api(&M, "GET", "/v1/failures", ADMIN, NULL, &resp, &ctype), 200);
	assert_non_null(strstr(resp, "the job goes to the host ring with every rail"));
	free(resp);

	/* rail 0 answers, rail 1 is deleted: rail 0's cut does not wait */
	ack_both("jr", 4, 40);
	assert_false(has_cut("jr"));
	assert_int_equal(call("DELETE", "/v1/jobs/jr.rail1", TOK_A, NULL, &r), 200);
	json_decref(r);
	r = plan_of("jr", 0);
	assert_int_equal(cutnum(r, "seq"), 40);
	json_decref(r);

	/* rail 1 joins again while rail 0 is on the ring after the stall: it
	 * joins it there (no tree before the back-off), and both come back
	 * in-network together once it is over */
	assert_int_equal(join_rail("jr.rail1", 0, 1, NULL), 200);
	assert_int_equal(join_rail("jr.rail1", 1, 1, NULL), 200);
	expect_plan("jr.rail1", 1, "ring");
	expect_plan("jr", 4, "ring");
	r = plan_of("jr.rail1", 0);
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: every rail: on the host ring with the job's other "
			    "rails (job jr: on the host ring: rank 0 saw no results from its tree "
			    "for 1000 ms)");
	json_decref(r);
	mgr_tick(&M);
	expect_plan("jr", 4, "ring");
	fake_now += 10;
	beat_all_but("spine1");
	mgr_tick(&M);
	expect_plan("jr", 5, "tree");
	expect_plan("jr.rail1", 2, "tree");
}

/* Rails and capacity: a rail that does not fit keeps every rail on the
 * ring, also through a retry that fits one rail and not the other (the
 * one that fitted stays on the ring, not programming); once capacity
 * frees for both, both get trees at once, one cut; a rank that leaves
 * does not hold the cut. Tenant a may hold 64 slots a switch. */
static void test_api_rails_capacity(void **state)
{
	json_t *r;
	int q, p;

	(void)state;
	beat_all_but(NULL);
	/* b0 holds 32 of tenant a's slots on both leaves */
	assert_int_equal(join("b0", 0, 2, "10.1.0.0", "\"window\": 32", &q, &p), 200);
	assert_int_equal(join("b0", 1, 2, "10.1.0.2", "\"window\": 32", &q, &p), 200);
	beat_all_but(NULL);
	assert_string_equal(tree_switch("b0"), "spine0");

	/* jc: rail 0 fits (16 slots), rail 1 (32 more) does not: both on the
	 * ring */
	assert_int_equal(join_rail("jc", 0, 0, "\"window\": 16"), 200);
	assert_int_equal(join_rail("jc", 1, 0, "\"window\": 16"), 200);
	assert_int_equal(join("jc.rail1", 0, 3, "10.1.0.0", "\"rails\": 2, \"rail\": 1", &q, &p),
			 409);
	assert_string_equal(last_error, "job jc has 2 ranks, its rail jc.rail1 3 (a rail has one "
			    "rank per host)");
	assert_int_equal(join_rail("jc.rail1", 0, 1, "\"window\": 32"), 200);
	assert_int_equal(join_rail("jc.rail1", 1, 1, "\"window\": 32"), 200);
	assert_string_equal(state_of("jc"), "ring");
	assert_string_equal(state_of("jc.rail1"), "ring");
	r = plan_of("jc", 0);
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: every rail: rail 1 (job jc.rail1): quota: tenant a "
			    "would use 80 of its 64 slots on switch leaf0");
	json_decref(r);

	/* capacity moves (b2 comes and goes) but only rail 0 would fit: the
	 * retry leaves both as they were */
	assert_int_equal(join("b2", 0, 1, "10.1.0.0", "\"window\": 16", &q, &p), 200);
	assert_int_equal(call("DELETE", "/v1/jobs/b2", TOK_A, NULL, &r), 200);
	json_decref(r);
	mgr_tick(&M);
	beat_all_but(NULL);
	mgr_tick(&M);
	assert_string_equal(state_of("jc"), "ring");
	assert_string_equal(state_of("jc.rail1"), "ring");
	expect_plan("jc", 1, "ring");
	expect_plan("jc.rail1", 1, "ring");

	/* b0 ends: trees for both rails at once */
	assert_int_equal(call("DELETE", "/v1/jobs/b0", TOK_A, NULL, &r), 200);
	json_decref(r);
	mgr_tick(&M);
	expect_plan("jc", 2, "tree");
	expect_plan("jc.rail1", 2, "tree");
	assert_string_equal(tree_switch("jc"), "spine0");
	assert_string_equal(tree_switch("jc.rail1"), "spine1");
	/* three ranks answer, the fourth leaves: the cut is made without it */
	assert_int_equal(ack("jc", 0, 2, 50, 50, 50, &r), 200);
	json_decref(r);
	assert_int_equal(ack("jc", 1, 2, 51, 51, 51, &r), 200);
	json_decref(r);
	assert_int_equal(ack("jc.rail1", 0, 2, 52, 52, 52, &r), 200);
	json_decref(r);
	assert_false(has_cut("jc"));
	assert_int_equal(call("POST", "/v1/jobs/jc.rail1/ranks/1/leave", TOK_A, NULL, &r), 200);
	json_decref(r);
	r = plan_of("jc", 0);
	assert_int_equal(cutnum(r, "seq"), 52);
	assert_int_equal(cutnum(r, "from"), 52);
	json_decref(r);
	r = plan_of("jc.rail1", 0);
	assert_int_equal(cutnum(r, "seq"), 52);
	json_decref(r);
}

/* A database written by a manager of format 2 (before rails and kept past
 * plans): its job loads as a job of its own, the file is format 3 after,
 * and a job with rails is saved in it and read back. */
static void test_api_old_format(void **state)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	json_t *r;

	(void)state;
	mgr_fini(&M);
	unlink(db_path);
	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
		"INSERT INTO meta VALUES ('format', 2), ('next_group_id', 1005);"
		"CREATE TABLE jobs (id TEXT PRIMARY KEY, tenant TEXT NOT NULL,"
		" size INTEGER NOT NULL, state INTEGER NOT NULL, reason TEXT NOT NULL,"
		" group_id INTEGER NOT NULL, window INTEGER NOT NULL, elems_per_pkt INTEGER NOT NULL,"
		" mtu INTEGER NOT NULL, created REAL NOT NULL, lease_until REAL NOT NULL,"
		" ready_at REAL NOT NULL, registered_at REAL NOT NULL, plan INTEGER NOT NULL,"
		" plan_ring INTEGER NOT NULL, plan_dead INTEGER NOT NULL, cut_done INTEGER NOT NULL,"
		" cut_seq INTEGER NOT NULL, cut_from INTEGER NOT NULL, plan_ver INTEGER NOT NULL,"
		" cut_error TEXT NOT NULL, retry_at REAL NOT NULL);"
		"CREATE TABLE ranks (job TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
		" rank INTEGER NOT NULL, registered INTEGER NOT NULL, has_left INTEGER NOT NULL,"
		" ip INTEGER NOT NULL, qpn INTEGER NOT NULL, ring_ip INTEGER NOT NULL,"
		" ring_port INTEGER NOT NULL, node INTEGER NOT NULL, member_index INTEGER NOT NULL,"
		" ack_plan INTEGER NOT NULL, ack_next INTEGER NOT NULL, ack_first INTEGER NOT NULL,"
		" ack_keep INTEGER NOT NULL, PRIMARY KEY (job, rank));"
		"INSERT INTO jobs VALUES ('old', 'a', 1, 4, 'on the host ring: a test', 1004, 16, 256,"
		" 0, 999, 0, 0, 999, 1, 1, 0, 1, 0, 0, 3, '', 0);"
		"INSERT INTO ranks VALUES ('old', 0, 1, 0, 167837696, 17, 0, 18515, -1, -1, 0, 0, 0, 0);",
		NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	assert_int_equal(manager_start(), 0);
	assert_int_equal(call("GET", "/v1/jobs/old", TOK_A, NULL, &r), 200);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "ring");
	assert_string_equal(json_string_value(json_object_get(r, "reason")),
			    "on the host ring: a test");
	assert_null(json_object_get(r, "rails"));
	json_decref(r);
	assert_int_equal(join_rail("jf", 0, 0, NULL), 200);
	assert_int_equal(join_rail("jf", 1, 0, NULL), 200);
	mgr_fini(&M);
	assert_int_equal(manager_start(), 0);
	assert_int_equal(call("GET", "/v1/jobs/jf", TOK_A, NULL, &r), 200);
	assert_int_equal(json_integer_value(json_object_get(r, "rails")), 2);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "waiting");
	json_decref(r);
	mgr_fini(&M);
	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'format'", -1,
					    &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 3);
	sqlite3_finalize(st);
	sqlite3_close(db);
	assert_int_equal(manager_start(), 0);     /* for the teardown */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topology_errors),
		cmocka_unit_test(test_fat_tree),
		cmocka_unit_test(test_token_digests),
		cmocka_unit_test(test_tree_single_leaf),
		cmocka_unit_test(test_tree_two_level_balanced),
		cmocka_unit_test(test_tree_refusals),
		cmocka_unit_test(test_tree_4096_hosts),
		cmocka_unit_test(test_tree_three_tiers),
		cmocka_unit_test_setup_teardown(test_api_tokens_and_validation, api_setup, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_job_lifecycle, api_setup, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_qpn_ring_port, api_setup_db, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_long_poll, api_setup, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_three_tiers, api_setup_3tiers, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_plans, api_setup_2spines, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_link_down, api_setup_2spines, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_rails, api_setup_2spines, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_rails_capacity, api_setup_2spines, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_old_format, api_setup_db, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_topology, api_setup, api_teardown),
		cmocka_unit_test_setup_teardown(test_api_rank_map, api_setup, api_teardown),
	};
	return cmocka_run_group_tests_name("manager", tests, NULL, NULL);
}
