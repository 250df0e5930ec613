/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The topology file (JSON): switches (leaf, spine, super-spine) with their
 * aggregation address and capacity, hosts and their leaf, leaf-spine and
 * spine-super-spine links, tenants with their
 * tokens and quotas. Read with common/inca_json.h: every error names the
 * file, the field and what was expected.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgr.h"

int mgr_topo_switch_by_name(const struct mgr_topo *t, const char *name)
{
	for (int i = 0; i < t->nswitches; i++)
		if (!strcmp(t->switches[i].name, name))
			return i;
	return -1;
}

int mgr_topo_host_by_ip(const struct mgr_topo *t, uint32_t ip)
{
	for (int i = 0; i < t->nhosts; i++)
		if (t->hosts[i].ip == ip)
			return i;
	return -1;
}

/* A name field: MGR_NAME_RULE. */
static int get_name(struct inca_json *in, json_t *o, const char *key, char *out)
{
	const char *s = json_string_value(json_object_get(o, key));

	if (mgr_valid_name(s)) {
		strcpy(out, s);
		return 0;
	}
	return inca_json_bad_at(in, key, "expected " MGR_NAME_RULE);
}

static int parse_switch(struct inca_json *in, struct mgr_topo *t, size_t i, json_t *e)
{
	static const char *const keys[] = { "name", "role", "ip", "max_groups", "max_slots",
					    NULL };
	struct mgr_switch *s = &t->switches[i];
	const char *role;

	if (inca_json_object(in, e, keys) || get_name(in, e, "name", s->name))
		return -1;
	if (mgr_topo_switch_by_name(t, s->name) != (int)i)
		return inca_json_bad_at(in, "name", "'%s' is listed twice", s->name);
	role = json_string_value(json_object_get(e, "role"));
	for (s->role = MGR_LEAF; role && s->role < MGR_TIERS; s->role++)
		if (!strcmp(role, mgr_role_name(s->role)))
			break;
	if (!role || s->role == MGR_TIERS)
		return inca_json_bad_at(in, "role", "expected \"leaf\", \"spine\" or \"superspine\"");
	if (mgr_parse_ip(json_string_value(json_object_get(e, "ip")), &s->ip))
		return inca_json_bad_at(in, "ip", "expected the switch's aggregation IPv4 address");
	for (size_t k = 0; k < i; k++)
		if (t->switches[k].ip == s->ip)
			return inca_json_bad_at(in, "ip", "already switch '%s''s", t->switches[k].name);
	s->max_groups = MGR_DEFAULT_MAX_GROUPS;
	s->max_slots = MGR_DEFAULT_MAX_SLOTS;
	return inca_json_opt_u32(in, e, "max_groups", 1, MGR_DEFAULT_MAX_GROUPS, &s->max_groups) ||
	       inca_json_opt_u32(in, e, "max_slots", 1, 1u << 24, &s->max_slots) ? -1 : 0;
}

static int parse_host(struct inca_json *in, struct mgr_topo *t, size_t i, json_t *e)
{
	static const char *const keys[] = { "name", "ip", "leaf", NULL };
	struct mgr_host *h = &t->hosts[i];
	const char *leaf;

	if (inca_json_object(in, e, keys) || get_name(in, e, "name", h->name))
		return -1;
	if (mgr_parse_ip(json_string_value(json_object_get(e, "ip")), &h->ip))
		return inca_json_bad_at(in, "ip", "expected the host's IPv4 address");
	if (mgr_topo_host_by_ip(t, h->ip) != (int)i)
		return inca_json_bad_at(in, "ip", "listed twice");
	leaf = json_string_value(json_object_get(e, "leaf"));
	h->leaf = leaf ? mgr_topo_switch_by_name(t, leaf) : -1;
	if (h->leaf < 0 || t->switches[h->leaf].role != MGR_LEAF)
		return inca_json_bad_at(in, "leaf", "expected the name of a leaf switch, got %s",
				     leaf ? leaf : "nothing");
	return 0;
}

/* {"leaf": L, "spine": S} or {"spine": S, "superspine": X}. */
static int parse_link(struct inca_json *in, struct mgr_topo *t, json_t *e)
{
	static const char *const keys[] = { "leaf", "spine", "superspine", NULL };
	struct inca_json keys_in = *in;   /* one message for all */
	const char *lower_key = "leaf", *upper_key = "spine";
	enum mgr_role lower_role = MGR_LEAF;

	if (!json_is_object(e) || inca_json_object(&keys_in, e, keys) ||
	    !json_object_get(e, "spine") ||
	    !json_object_get(e, "leaf") == !json_object_get(e, "superspine"))
		return inca_json_bad(in, "expected {\"leaf\": NAME, \"spine\": NAME} or "
				     "{\"spine\": NAME, \"superspine\": NAME}");
	if (json_object_get(e, "superspine")) {
		lower_key = "spine";
		upper_key = "superspine";
		lower_role = MGR_SPINE;
	}
	int l = mgr_topo_switch_by_name(t, json_string_value(json_object_get(e, lower_key)) ?: "");
	int u = mgr_topo_switch_by_name(t, json_string_value(json_object_get(e, upper_key)) ?: "");
	if (l < 0 || t->switches[l].role != lower_role)
		return inca_json_bad_at(in, lower_key, "expected a %s's name", lower_key);
	if (u < 0 || t->switches[u].role != lower_role + 1)
		return inca_json_bad_at(in, upper_key, "expected a %s's name", upper_key);
	t->link[(size_t)l * (size_t)t->nswitches + (size_t)u] = 1;
	return 0;
}

const char *mgr_role_name(enum mgr_role r)
{
	static const char *const names[] = { "leaf", "spine", "superspine" };
	return r < MGR_TIERS ? names[r] : "?";
}

/* Per switch, its neighbours one tier up and one down, ascending. */
static void links_unindex(struct mgr_topo *t)
{
	for (int s = 0; s < t->nswitches && t->up; s++)
		free(t->up[s]);
	for (int s = 0; s < t->nswitches && t->down; s++)
		free(t->down[s]);
	free(t->up);
	free(t->down);
	free(t->nup);
	free(t->ndown);
	t->up = t->down = NULL;
	t->nup = t->ndown = NULL;
}

int mgr_topo_index_links(struct mgr_topo *t)
{
	size_t ns = (size_t)t->nswitches;

	links_unindex(t);
	t->up = calloc(ns, sizeof(*t->up));
	t->down = calloc(ns, sizeof(*t->down));
	t->nup = calloc(ns, sizeof(int));
	t->ndown = calloc(ns, sizeof(int));
	if (!t->up || !t->down || !t->nup || !t->ndown)
		return -1;
	for (size_t a = 0; a < ns; a++)
		for (size_t b = 0; b < ns; b++)
			if (t->link[a * ns + b]) {
				t->nup[a]++;
				t->ndown[b]++;
			}
	for (size_t s = 0; s < ns; s++) {
		t->up[s] = malloc(sizeof(int) * (size_t)(t->nup[s] + 1));
		t->down[s] = malloc(sizeof(int) * (size_t)(t->ndown[s] + 1));
		if (!t->up[s] || !t->down[s])
			return -1;
		t->nup[s] = t->ndown[s] = 0;
	}
	for (size_t a = 0; a < ns; a++)
		for (size_t b = 0; b < ns; b++)
			if (t->link[a * ns + b]) {
				t->up[a][t->nup[a]++] = (int)b;
				t->down[b][t->ndown[b]++] = (int)a;
			}
	for (size_t s = 0; s < ns; s++)
		t->up[s][t->nup[s]] = t->down[s][t->ndown[s]] = -1;
	return 0;
}

static int parse_tenant(struct inca_json *in, struct mgr_topo *t, size_t i, json_t *e)
{
	static const char *const keys[] = { "name", "token", "max_slots_per_switch", "max_jobs",
					    NULL };
	struct mgr_tenant *tn = &t->tenants[i];
	char why[200];

	if (inca_json_object(in, e, keys) || get_name(in, e, "name", tn->name))
		return -1;
	for (size_t k = 0; k < i; k++)
		if (!strcmp(t->tenants[k].name, tn->name))
			return inca_json_bad_at(in, "name", "'%s' is listed twice", tn->name);
	if (mgr_token_digest(json_string_value(json_object_get(e, "token")), tn->token_hash,
			     why, sizeof(why)))
		return inca_json_bad_at(in, "token", "%s", why);
	for (size_t k = 0; k < i; k++)
		if (!memcmp(t->tenants[k].token_hash, tn->token_hash, MGR_HASH_LEN))
			return inca_json_bad_at(in, "token", "the same as tenant '%s''s",
					     t->tenants[k].name);
	tn->max_slots_per_switch = MGR_DEFAULT_TENANT_SLOTS;
	tn->max_jobs = MGR_DEFAULT_TENANT_JOBS;
	return inca_json_opt_u32(in, e, "max_slots_per_switch", 1, 1u << 24,
				 &tn->max_slots_per_switch) ||
	       inca_json_opt_u32(in, e, "max_jobs", 1, 100000, &tn->max_jobs) ? -1 : 0;
}

/* A list of 1..max objects, each parsed by one of the functions above. */
static int parse_list(struct inca_json *in, struct mgr_topo *t, json_t *root,
		      const char *key, size_t max, const char *what,
		      int (*parse)(struct inca_json *, struct mgr_topo *, size_t, json_t *))
{
	json_t *a = json_object_get(root, key), *e;
	size_t i;

	inca_json_at(in, "%s", key);
	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > max)
		return inca_json_bad(in, "expected a list of 1..%zu %s", max, what);
	json_array_foreach(a, i, e) {
		inca_json_at(in, "%s[%zu]", key, i);
		if (parse(in, t, i, e))
			return -1;
	}
	return 0;
}

static int topo_parse(struct inca_json *in, struct mgr_topo *t, json_t *root)
{
	static const char *const top[] = { "switches", "hosts", "links", "tenants", NULL };
	json_t *a, *e;
	size_t i;

	if (!json_is_object(root))
		return inca_json_bad(in, "expected a JSON object with switches, hosts, links, "
				     "tenants");
	if (inca_json_object(in, root, top))
		return -1;
	a = json_object_get(root, "switches");
	if (json_is_array(a) && json_array_size(a) > 0 && json_array_size(a) <= MGR_MAX_SWITCHES) {
		t->nswitches = (int)json_array_size(a);
		t->switches = calloc((size_t)t->nswitches, sizeof(*t->switches));
		t->link = calloc((size_t)t->nswitches * (size_t)t->nswitches, 1);
		if (!t->switches || !t->link)
			return inca_json_bad(in, "out of memory");
	}
	if (parse_list(in, t, root, "switches", MGR_MAX_SWITCHES, "switches", parse_switch))
		return -1;

	a = json_object_get(root, "hosts");
	if (json_is_array(a) && json_array_size(a) > 0 && json_array_size(a) <= MGR_MAX_HOSTS) {
		t->nhosts = (int)json_array_size(a);
		t->hosts = calloc((size_t)t->nhosts, sizeof(*t->hosts));
		if (!t->hosts)
			return inca_json_bad(in, "out of memory");
	}
	if (parse_list(in, t, root, "hosts", MGR_MAX_HOSTS, "hosts", parse_host))
		return -1;

	a = json_object_get(root, "links");
	inca_json_at(in, "links");
	if (a && !json_is_array(a))
		return inca_json_bad(in, "expected a list of {\"leaf\", \"spine\"} and "
				     "{\"spine\", \"superspine\"}");
	json_array_foreach(a, i, e) {
		inca_json_at(in, "links[%zu]", i);
		if (parse_link(in, t, e))
			return -1;
	}

	if (mgr_topo_index_links(t))
		return inca_json_bad(in, "out of memory");

	a = json_object_get(root, "tenants");
	if (json_is_array(a) && json_array_size(a) <= MGR_MAX_TENANTS)
		t->ntenants = (int)json_array_size(a);
	return parse_list(in, t, root, "tenants", MGR_MAX_TENANTS, "tenants", parse_tenant);
}

int mgr_topo_parse(struct mgr_topo *t, json_t *root, const char *origin, char *err,
		   size_t errlen)
{
	struct inca_json in;

	memset(t, 0, sizeof(*t));
	inca_json_init(&in, origin);
	if (!topo_parse(&in, t, root))
		return 0;
	snprintf(err, errlen, "%s", in.msg);
	return -1;
}

int mgr_topo_load(struct mgr_topo *t, const char *path, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	int rc;

	memset(t, 0, sizeof(*t));
	if (!root) {
		snprintf(err, errlen, "%s: line %d column %d: %s", path, jerr.line, jerr.column,
			 jerr.text);
		return -1;
	}
	rc = mgr_topo_parse(t, root, path, err, errlen);
	json_decref(root);
	if (rc)
		mgr_topo_free(t);
	return rc;
}

void mgr_topo_free(struct mgr_topo *t)
{
	free(t->switches);
	free(t->hosts);
	links_unindex(t);
	free(t->link);
	memset(t, 0, sizeof(*t));
}

/* ---- generated fat-trees ---- */

static void gen_switch(struct mgr_topo *t, int s, enum mgr_role role)
{
	struct mgr_switch *sw = &t->switches[s];

	sw->role = role;
	snprintf(sw->name, sizeof(sw->name), "%s%d", mgr_role_name(role), s);
	sw->ip = 0x0aff0000u + (uint32_t)s;
	sw->max_groups = MGR_DEFAULT_MAX_GROUPS;
	sw->max_slots = 1u << 24;
}

static void gen_link(struct mgr_topo *t, int lower, int upper)
{
	t->link[(size_t)lower * (size_t)t->nswitches + (size_t)upper] = 1;
}

static int ceil_div(int a, int b)
{
	return (a + b - 1) / b;
}

int mgr_topo_fat_tree(struct mgr_topo *t, const struct mgr_fat_tree *ft, char *why,
		      size_t whylen)
{
	int hpl = ft->tiers == 1 ? ft->hosts : ft->hosts_per_leaf;
	int leaves, spines = 0, supers = 0, first_leaf;

	memset(t, 0, sizeof(*t));
	if (ft->tiers < 1 || ft->tiers > 3) {
		snprintf(why, whylen, "tiers: 1, 2 or 3");
		return -1;
	}
	if (ft->hosts < 1 || hpl < 1 || (ft->tiers > 1 && ft->spines < 1) ||
	    (ft->tiers == 3 && (ft->leaves_per_pod < 1 || ft->supers_per_plane < 1))) {
		snprintf(why, whylen, "a fabric needs hosts, hosts per leaf and spines");
		return -1;
	}
	leaves = ceil_div(ft->hosts, hpl);
	if (ft->tiers == 2) {
		spines = ft->spines;
	} else if (ft->tiers == 3) {
		int pods = ceil_div(leaves, ft->leaves_per_pod);
		leaves = pods * ft->leaves_per_pod;
		spines = pods * ft->spines;
		supers = ft->spines * ft->supers_per_plane;
	}
	if ((long)leaves + spines + supers > MGR_MAX_SWITCHES) {
		snprintf(why, whylen, "%ld switches: the manager takes at most %d",
			 (long)leaves + spines + supers, MGR_MAX_SWITCHES);
		return -1;
	}
	t->nswitches = leaves + spines + supers;
	t->nhosts = ft->hosts;
	t->switches = calloc((size_t)t->nswitches, sizeof(*t->switches));
	t->hosts = calloc((size_t)t->nhosts, sizeof(*t->hosts));
	t->link = calloc((size_t)t->nswitches * (size_t)t->nswitches, 1);
	if (!t->switches || !t->hosts || !t->link)
		goto oom;
	first_leaf = supers + spines;
	for (int i = 0; i < t->nswitches; i++)
		gen_switch(t, i, i < supers ? MGR_SUPERSPINE : i < first_leaf ? MGR_SPINE : MGR_LEAF);
	for (int l = 0; l < leaves; l++) {
		if (ft->tiers == 2) {
			for (int sp = 0; sp < spines; sp++)
				gen_link(t, first_leaf + l, sp);
		} else if (ft->tiers == 3) {
			int pod = l / ft->leaves_per_pod;
			for (int k = 0; k < ft->spines; k++)
				gen_link(t, first_leaf + l, supers + pod * ft->spines + k);
		}
	}
	if (ft->tiers == 3)
		for (int sp = 0; sp < spines; sp++)
			for (int x = 0; x < ft->supers_per_plane; x++)
				gen_link(t, supers + sp, (sp % ft->spines) * ft->supers_per_plane + x);
	for (int h = 0; h < ft->hosts; h++) {
		snprintf(t->hosts[h].name, sizeof(t->hosts[h].name), "h%d", h);
		t->hosts[h].ip = 0x0a000000u + (uint32_t)h + 1;
		t->hosts[h].leaf = first_leaf + h / hpl;
	}
	if (mgr_topo_index_links(t))
		goto oom;
	return 0;
oom:
	mgr_topo_free(t);
	snprintf(why, whylen, "out of memory");
	return -1;
}
