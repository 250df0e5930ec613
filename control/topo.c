/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The topology file (JSON): switches with their aggregation address and
 * capacity, hosts and their leaf, leaf-spine links, tenants with their
 * tokens and quotas. Every error names the field and what was expected.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/memops.h>
#include <nettle/sha2.h>

#include "mgr.h"

void mgr_token_hash(const char *token, uint8_t out[MGR_HASH_LEN])
{
	struct sha256_ctx h;

	sha256_init(&h);
	sha256_update(&h, strlen(token), (const uint8_t *)token);
	sha256_digest(&h, MGR_HASH_LEN, out);
}

int mgr_token_digest(const char *spec, uint8_t out[MGR_HASH_LEN], char *why, size_t whylen)
{
	size_t len = spec ? strlen(spec) : 0;

	if (len > 7 && !strncmp(spec, "sha256:", 7)) {
		const char *hex = spec + 7;

		if (strlen(hex) != 2 * MGR_HASH_LEN)
			goto bad_digest;
		for (int i = 0; i < MGR_HASH_LEN; i++) {
			unsigned v;
			if (!isxdigit((unsigned char)hex[2 * i]) ||
			    !isxdigit((unsigned char)hex[2 * i + 1]) ||
			    sscanf(hex + 2 * i, "%2x", &v) != 1)
				goto bad_digest;
			out[i] = (uint8_t)v;
		}
		return 0;
	}
	if (len < 16 || len >= MGR_TOKEN_LEN) {
		snprintf(why, whylen, "expected a secret of 16..127 characters, or \"sha256:\" "
			 "and its SHA-256 in 64 hex digits");
		return -1;
	}
	mgr_token_hash(spec, out);
	return 0;
bad_digest:
	snprintf(why, whylen, "expected \"sha256:\" and 64 hex digits (the SHA-256 of the "
		 "secret, e.g. from: printf %%s SECRET | sha256sum)");
	return -1;
}

bool mgr_token_matches(const char *token, const uint8_t hash[MGR_HASH_LEN])
{
	uint8_t h[MGR_HASH_LEN];

	mgr_token_hash(token, h);
	return memeql_sec(h, hash, MGR_HASH_LEN);
}

void mgr_ip_str(uint32_t ip, char buf[16])
{
	snprintf(buf, 16, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

int mgr_parse_ip(const char *s, uint32_t *out)
{
	struct in_addr a;

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return -1;
	*out = ntohl(a.s_addr);
	return *out == 0 || *out == 0xffffffffu ? -1 : 0;
}

__attribute__((format(printf, 4, 5)))
static int fail(char *err, size_t errlen, const char *origin, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "%s: ", origin);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int check_keys(json_t *o, const char *const *known, const char **bad)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		bool ok = false;
		for (size_t i = 0; known[i]; i++)
			ok |= !strcmp(k, known[i]);
		if (!ok) {
			*bad = k;
			return -1;
		}
	}
	return 0;
}

static int get_name(json_t *o, const char *key, char *out)
{
	const char *s = json_string_value(json_object_get(o, key));

	if (!s || !*s || strlen(s) >= MGR_NAME_LEN)
		return -1;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
			return -1;
	strcpy(out, s);
	return 0;
}

static int get_u32(json_t *o, const char *key, uint32_t min, uint32_t max, uint32_t def,
		   uint32_t *out)
{
	json_t *v = json_object_get(o, key);

	if (!v) {
		*out = def;
		return def == UINT32_MAX ? -1 : 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return -1;
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

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

#define NAME_RULE "1..47 characters of a-z A-Z 0-9 - _ ."

int mgr_topo_parse(struct mgr_topo *t, json_t *root, const char *origin, char *err,
		   size_t errlen)
{
	static const char *const top[] = { "switches", "hosts", "links", "tenants", NULL };
	static const char *const swk[] = { "name", "role", "ip", "max_groups", "max_slots", NULL };
	static const char *const hk[] = { "name", "ip", "leaf", NULL };
	static const char *const lk[] = { "leaf", "spine", NULL };
	static const char *const tk[] = { "name", "token", "max_slots_per_switch", "max_jobs", NULL };
	json_t *a, *e;
	const char *bad;
	size_t i;

	memset(t, 0, sizeof(*t));
	if (!json_is_object(root))
		return fail(err, errlen, origin, "expected a JSON object with switches, hosts, "
			    "links, tenants");
	if (check_keys(root, top, &bad))
		return fail(err, errlen, origin, "%s: unknown field", bad);

	a = json_object_get(root, "switches");
	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > MGR_MAX_SWITCHES)
		return fail(err, errlen, origin, "switches: expected a list of 1..%d switches",
			    MGR_MAX_SWITCHES);
	t->nswitches = (int)json_array_size(a);
	t->switches = calloc((size_t)t->nswitches, sizeof(*t->switches));
	t->link = calloc((size_t)t->nswitches * (size_t)t->nswitches, 1);
	if (!t->switches || !t->link)
		return fail(err, errlen, origin, "out of memory");
	json_array_foreach(a, i, e) {
		struct mgr_switch *s = &t->switches[i];
		const char *role;

		if (!json_is_object(e))
			return fail(err, errlen, origin, "switches[%zu]: expected an object", i);
		if (check_keys(e, swk, &bad))
			return fail(err, errlen, origin, "switches[%zu].%s: unknown field", i, bad);
		if (get_name(e, "name", s->name))
			return fail(err, errlen, origin, "switches[%zu].name: expected " NAME_RULE, i);
		if (mgr_topo_switch_by_name(t, s->name) != (int)i)
			return fail(err, errlen, origin, "switches[%zu].name: '%s' is listed twice",
				    i, s->name);
		role = json_string_value(json_object_get(e, "role"));
		if (!role || (strcmp(role, "leaf") && strcmp(role, "spine")))
			return fail(err, errlen, origin, "switches[%zu].role: expected \"leaf\" or "
				    "\"spine\"", i);
		s->role = strcmp(role, "leaf") ? MGR_SPINE : MGR_LEAF;
		if (mgr_parse_ip(json_string_value(json_object_get(e, "ip")), &s->ip))
			return fail(err, errlen, origin, "switches[%zu].ip: expected the switch's "
				    "aggregation IPv4 address", i);
		for (size_t k = 0; k < i; k++)
			if (t->switches[k].ip == s->ip)
				return fail(err, errlen, origin, "switches[%zu].ip: already switch "
					    "'%s''s", i, t->switches[k].name);
		if (get_u32(e, "max_groups", 1, 1024, 1024, &s->max_groups))
			return fail(err, errlen, origin, "switches[%zu].max_groups: expected "
				    "1..1024 (default 1024)", i);
		if (get_u32(e, "max_slots", 1, 1u << 24, 65536, &s->max_slots))
			return fail(err, errlen, origin, "switches[%zu].max_slots: expected "
				    "1..16777216 (default 65536)", i);
	}

	a = json_object_get(root, "hosts");
	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > MGR_MAX_HOSTS)
		return fail(err, errlen, origin, "hosts: expected a list of 1..%d hosts",
			    MGR_MAX_HOSTS);
	t->nhosts = (int)json_array_size(a);
	t->hosts = calloc((size_t)t->nhosts, sizeof(*t->hosts));
	if (!t->hosts)
		return fail(err, errlen, origin, "out of memory");
	json_array_foreach(a, i, e) {
		struct mgr_host *h = &t->hosts[i];
		const char *leaf;

		if (!json_is_object(e))
			return fail(err, errlen, origin, "hosts[%zu]: expected an object", i);
		if (check_keys(e, hk, &bad))
			return fail(err, errlen, origin, "hosts[%zu].%s: unknown field", i, bad);
		if (get_name(e, "name", h->name))
			return fail(err, errlen, origin, "hosts[%zu].name: expected " NAME_RULE, i);
		if (mgr_parse_ip(json_string_value(json_object_get(e, "ip")), &h->ip))
			return fail(err, errlen, origin, "hosts[%zu].ip: expected the host's "
				    "IPv4 address", i);
		if (mgr_topo_host_by_ip(t, h->ip) != (int)i)
			return fail(err, errlen, origin, "hosts[%zu].ip: listed twice", i);
		leaf = json_string_value(json_object_get(e, "leaf"));
		h->leaf = leaf ? mgr_topo_switch_by_name(t, leaf) : -1;
		if (h->leaf < 0 || t->switches[h->leaf].role != MGR_LEAF)
			return fail(err, errlen, origin, "hosts[%zu].leaf: expected the name of a "
				    "leaf switch, got %s", i, leaf ? leaf : "nothing");
	}

	a = json_object_get(root, "links");
	if (a && !json_is_array(a))
		return fail(err, errlen, origin, "links: expected a list of {\"leaf\", \"spine\"}");
	json_array_foreach(a, i, e) {
		int l, s;
		if (!json_is_object(e) || check_keys(e, lk, &bad))
			return fail(err, errlen, origin, "links[%zu]: expected {\"leaf\": NAME, "
				    "\"spine\": NAME}", i);
		l = mgr_topo_switch_by_name(t, json_string_value(json_object_get(e, "leaf")) ?: "");
		s = mgr_topo_switch_by_name(t, json_string_value(json_object_get(e, "spine")) ?: "");
		if (l < 0 || t->switches[l].role != MGR_LEAF)
			return fail(err, errlen, origin, "links[%zu].leaf: expected a leaf's name", i);
		if (s < 0 || t->switches[s].role != MGR_SPINE)
			return fail(err, errlen, origin, "links[%zu].spine: expected a spine's name", i);
		t->link[(size_t)l * (size_t)t->nswitches + (size_t)s] = 1;
	}

	a = json_object_get(root, "tenants");
	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > MGR_MAX_TENANTS)
		return fail(err, errlen, origin, "tenants: expected a list of 1..%d tenants",
			    MGR_MAX_TENANTS);
	t->ntenants = (int)json_array_size(a);
	json_array_foreach(a, i, e) {
		struct mgr_tenant *tn = &t->tenants[i];
		const char *tok;
		char why[200];

		if (!json_is_object(e))
			return fail(err, errlen, origin, "tenants[%zu]: expected an object", i);
		if (check_keys(e, tk, &bad))
			return fail(err, errlen, origin, "tenants[%zu].%s: unknown field", i, bad);
		if (get_name(e, "name", tn->name))
			return fail(err, errlen, origin, "tenants[%zu].name: expected " NAME_RULE, i);
		for (size_t k = 0; k < i; k++)
			if (!strcmp(t->tenants[k].name, tn->name))
				return fail(err, errlen, origin, "tenants[%zu].name: '%s' is listed "
					    "twice", i, tn->name);
		tok = json_string_value(json_object_get(e, "token"));
		if (mgr_token_digest(tok, tn->token_hash, why, sizeof(why)))
			return fail(err, errlen, origin, "tenants[%zu].token: %s", i, why);
		for (size_t k = 0; k < i; k++)
			if (!memcmp(t->tenants[k].token_hash, tn->token_hash, MGR_HASH_LEN))
				return fail(err, errlen, origin, "tenants[%zu].token: the same as "
					    "tenant '%s''s", i, t->tenants[k].name);
		if (get_u32(e, "max_slots_per_switch", 1, 1u << 24, 4096, &tn->max_slots_per_switch))
			return fail(err, errlen, origin, "tenants[%zu].max_slots_per_switch: "
				    "expected 1..16777216 (default 4096)", i);
		if (get_u32(e, "max_jobs", 1, 100000, 64, &tn->max_jobs))
			return fail(err, errlen, origin, "tenants[%zu].max_jobs: expected "
				    "1..100000 (default 64)", i);
	}
	return 0;
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
	free(t->link);
	memset(t, 0, sizeof(*t));
}
