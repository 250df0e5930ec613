/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Group descriptions from a static source: a JSON file (INCA_CONFIG, read
 * with common/inca_json.h) or the environment (INCA_SWITCH, INCA_GROUP,
 * ...), checked and defaulted the same way. The manager's are
 * hl_manager.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "hl_priv.h"
#include "inca_json.h"

void hl_group_free(struct hl_group_desc *g)
{
	free(g->members);
	g->members = NULL;
	g->nmembers = 0;
	for (int k = 0; k < g->nrails; k++)
		hl_group_free(&g->rails[k]);
	free(g->rails);
	g->rails = NULL;
	g->nrails = 0;
}

int hl_parse_ip(const char *s, uint32_t *ip)
{
	struct in_addr a;

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return -1;
	*ip = ntohl(a.s_addr);
	return 0;
}

int hl_parse_num(const char *s, uint64_t max, uint64_t *out)
{
	char *end;

	if (!s || !*s)
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/* The seven numbers both sources list, in the same order. */
static void group_set_numbers(struct hl_group_desc *g, const uint64_t val[7])
{
	g->group_id = (uint32_t)val[0];
	g->group_qpn = (uint32_t)val[1];
	g->qkey = (uint32_t)val[2];
	g->window = (uint16_t)val[3];
	g->elems_per_pkt = (uint16_t)val[4];
	g->ring_port = (uint16_t)val[5];
	g->ib_mtu = (uint16_t)val[6];
}

static int group_check(struct hl_group_desc *g, char *err, size_t errlen)
{
	if (!g->window)
		g->window = 64;
	if (!g->elems_per_pkt)
		g->elems_per_pkt = 256;
	if (!g->ring_port)
		g->ring_port = 18515;
	/* 0: auto, the largest the path to the switch allows (hl_comm_create) */
	if (g->ib_mtu && g->ib_mtu != 256 && g->ib_mtu != 512 && g->ib_mtu != 1024 &&
	    g->ib_mtu != 2048 && g->ib_mtu != 4096) {
		snprintf(err, errlen, "mtu must be an IB MTU: 256, 512, 1024, 2048 or 4096 "
			 "(or \"auto\")");
		return -1;
	}
	if (g->window > AGG_MAX_WINDOW || g->elems_per_pkt > AGG_MAX_ELEMS) {
		snprintf(err, errlen, "window must be 1..%d and elems_per_pkt 1..%d",
			 AGG_MAX_WINDOW, AGG_MAX_ELEMS);
		return -1;
	}
	if (!g->ring && (g->group_qpn < 2 || g->group_qpn > AGG_QPN_MASK)) {
		snprintf(err, errlen, "group qpn must be 2..0xffffff");
		return -1;
	}
	for (int i = 0; i < g->nmembers; i++) {
		if (!g->members[i].ring_port)
			g->members[i].ring_port = g->ring_port;
		if (!g->members[i].qpn && !g->members[i].ip)
			continue;       /* not given: a member the rank does not need */
		if (g->members[i].qpn < 2 || g->members[i].qpn > AGG_QPN_MASK) {
			snprintf(err, errlen, "members[%d].qpn must be 2..0xffffff", i);
			return -1;
		}
	}
	return 0;
}

static int member_from_json(struct inca_json *in, json_t *m, struct hl_member *mb)
{
	uint32_t port = 0, nranks = 0;

	if (hl_parse_ip(json_string_value(json_object_get(m, "ip")), &mb->ip))
		return inca_json_bad_at(in, "ip", "expected an IPv4 address");
	if (inca_json_get_u32(in, m, "qpn", 2, AGG_QPN_MASK, &mb->qpn) ||
	    inca_json_opt_u32(in, m, "ring_port", 0, 65535, &port) ||
	    inca_json_opt_u32(in, m, "ranks", 1, 256, &nranks))
		return -1;
	mb->ring_port = (uint16_t)port;
	mb->nranks = (uint16_t)nranks;
	if (json_object_get(m, "ring_ip") &&
	    hl_parse_ip(json_string_value(json_object_get(m, "ring_ip")), &mb->ring_ip))
		return inca_json_bad_at(in, "ring_ip", "expected an IPv4 address");
	return 0;
}

/*
 * "members": a list of every member (a config file); false (the manager's
 * answer to a plan poll, ?members=0: the rank has them; no members, which
 * hl_comm refuses as a configuration); or, from the manager's answer to a
 * join (?members=ring), {"size": N, "R": member, ...} with the rank itself
 * and the next rank, all the host ring uses: the others stay unknown (qpn 0).
 */
static int members_from_json(struct inca_json *in, json_t *v, struct hl_group_desc *g)
{
	uint32_t size;
	const char *key;
	json_t *m;
	size_t i;

	if (json_is_false(v))
		return 0;
	if (json_is_object(v)) {
		inca_json_at(in, "members");
		if (inca_json_get_u32(in, v, "size", 1, HL_MAX_RANKS, &size))
			return -1;
	} else if (!json_is_array(v) || json_array_size(v) == 0 ||
		   json_array_size(v) > AGG_MAX_MEMBERS) {
		return inca_json_bad_at(in, "members", "expected a list of 1..%d members",
					AGG_MAX_MEMBERS);
	} else {
		size = (uint32_t)json_array_size(v);
	}
	g->members = calloc(size, sizeof(*g->members));
	if (!g->members)
		return inca_json_bad(in, "out of memory");
	g->nmembers = (int)size;
	json_array_foreach(v, i, m) {
		inca_json_at(in, "members[%zu]", i);
		if (member_from_json(in, m, &g->members[i]))
			return -1;
	}
	json_object_foreach(v, key, m) {
		char *end;
		unsigned long r = strtoul(key, &end, 10);

		if (!strcmp(key, "size"))
			continue;
		inca_json_at(in, "members.%s", key);
		if (*end || end == key || r >= size)
			return inca_json_bad(in, "expected a rank below %u", size);
		if (member_from_json(in, m, &g->members[r]))
			return -1;
	}
	return 0;
}

/*
 * "rails": the groups of local ranks 1, 2, ... of every host (INCA_HIER=
 * rails; the file's own group is local rank 0's). Each is an object with
 * what differs from the file's group, at least "group", "qpn" and its
 * "members" (one per host, in host order); the rest ("switch", "qkey",
 * "window", ...) is the file's.
 */
static int rails_from_json(struct inca_json *in, json_t *root, json_t *v,
			   struct hl_group_desc *g)
{
	json_t *r;
	size_t k;

	if (!json_is_array(v) || json_array_size(v) == 0 ||
	    json_array_size(v) > HL_MAX_RAILS)
		return inca_json_bad_at(in, "rails", "expected a list of 1..%d groups",
					HL_MAX_RAILS);
	g->rails = calloc(json_array_size(v), sizeof(*g->rails));
	if (!g->rails)
		return inca_json_bad(in, "out of memory");
	json_array_foreach(v, k, r) {
		char origin[200], err[256], *text;
		json_t *m;
		int rc;

		inca_json_at(in, "rails[%zu]", k);
		if (!json_is_object(r) || json_object_get(r, "rails") ||
		    !json_object_get(r, "group") || !json_object_get(r, "qpn") ||
		    !json_object_get(r, "members"))
			return inca_json_bad(in, "expected an object with this rail's \"group\", "
					     "\"qpn\" and \"members\"");
		/* the file's group, but the rail's own ring port (one after
		 * another's: the rails of a host may share its address) */
		m = json_deep_copy(root);
		if (m) {
			json_object_del(m, "member_index");
			json_object_set_new(m, "ring_port",
					    json_integer((json_int_t)g->ring_port + (json_int_t)k + 1));
		}
		if (!m || json_object_del(m, "rails") || json_object_update(m, r) ||
		    !(text = json_dumps(m, 0))) {
			json_decref(m);
			return inca_json_bad(in, "out of memory");
		}
		json_decref(m);
		snprintf(origin, sizeof(origin), "%s%srails[%zu]", in->origin ? in->origin : "",
			 in->origin && *in->origin ? ": " : "", k);
		rc = hl_group_from_json(text, origin, &g->rails[k], err, sizeof(err));
		free(text);
		if (rc) {
			/* the rail's own message names the file and the rail */
			snprintf(in->msg, sizeof(in->msg), "%s", err);
			in->failed = true;
			return -EINVAL;
		}
		g->nrails = (int)k + 1;
	}
	return 0;
}

int hl_group_from_json(const char *text, const char *origin, struct hl_group_desc *g,
		       char *err, size_t errlen)
{
	static const struct { const char *key; uint64_t min, max; } nums[] = {
		{ "group", 0, UINT32_MAX }, { "qpn", 2, AGG_QPN_MASK },
		{ "qkey", 0, UINT32_MAX }, { "window", 1, AGG_MAX_WINDOW },
		{ "elems_per_pkt", 1, AGG_MAX_ELEMS }, { "ring_port", 1, 65535 },
		{ "mtu", 0, AGG_MAX_PAYLOAD },
	};
	json_error_t jerr;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr), *v;
	struct inca_json in;
	uint64_t val[7] = { 0 };
	uint32_t mi;
	size_t i;
	int rc = -1;

	memset(g, 0, sizeof(*g));
	if (!root) {
		snprintf(err, errlen, "%s: line %d column %d: %s", origin, jerr.line,
			 jerr.column, jerr.text);
		return -1;
	}
	inca_json_init(&in, origin);
	if (!json_is_object(root)) {
		inca_json_bad(&in, "expected a JSON object");
		goto out;
	}
	/* the manager's description of a job on the host ring has no switch */
	g->ring = json_is_true(json_object_get(root, "ring"));
	if (!g->ring &&
	    hl_parse_ip(json_string_value(json_object_get(root, "switch")), &g->switch_ip)) {
		inca_json_bad_at(&in, "switch", "expected the switch's IPv4 address");
		goto out;
	}
	for (i = 0; i < 7; i++) {
		v = json_object_get(root, nums[i].key);
		if (g->ring && i < 3)
			continue;
		/* mtu 0 or "auto": the host decides (the manager sends 0) */
		if (!v && i < 3) {
			inca_json_bad_at(&in, nums[i].key, "missing");
			goto out;
		}
		if (!v || (i == 6 && json_is_string(v) && !strcmp(json_string_value(v), "auto")))
			continue;
		if (inca_json_get_uint(&in, root, nums[i].key, nums[i].min, nums[i].max, &val[i]))
			goto out;
	}
	group_set_numbers(g, val);
	g->reproducible = json_is_true(json_object_get(root, "reproducible"));
	g->member_index = -1;
	if (json_object_get(root, "member_index")) {
		if (inca_json_get_u32(&in, root, "member_index", 0, AGG_MAX_MEMBERS - 1, &mi))
			goto out;
		g->member_index = (int)mi;
	}
	v = json_object_get(root, "members");
	if (members_from_json(&in, v, g))
		goto out;
	inca_json_at(&in, "%s", "");
	char why[160];
	if (group_check(g, why, sizeof(why))) {
		inca_json_bad(&in, "%s", why);
		goto out;
	}
	if ((v = json_object_get(root, "rails")) && rails_from_json(&in, root, v, g))
		goto out;
	rc = 0;
out:
	if (rc)
		snprintf(err, errlen, "%s", in.msg);
	json_decref(root);
	if (rc)
		hl_group_free(g);
	return rc;
}

int hl_group_from_env(struct hl_group_desc *g, char *err, size_t errlen)
{
	static const struct { const char *name; uint64_t max; } nums[] = {
		{ "INCA_GROUP", UINT32_MAX }, { "INCA_GROUP_QPN", AGG_QPN_MASK },
		{ "INCA_QKEY", UINT32_MAX }, { "INCA_WINDOW", AGG_MAX_WINDOW },
		{ "INCA_ELEMS", AGG_MAX_ELEMS }, { "INCA_RING_PORT", 65535 },
		{ "INCA_MTU", 4096 },
	};
	uint64_t val[7] = { 0 };
	const char *s;
	char *list, *tok, *save = NULL;

	memset(g, 0, sizeof(*g));
	if (hl_parse_ip(getenv("INCA_SWITCH"), &g->switch_ip)) {
		snprintf(err, errlen, "INCA_SWITCH: expected the switch's IPv4 address "
			 "(or set INCA_CONFIG to a group file)");
		return -1;
	}
	for (int i = 0; i < 7; i++) {
		s = getenv(nums[i].name);
		if ((!s && i >= 3) || (i == 6 && !strcmp(s, "auto")))
			continue;
		if (hl_parse_num(s, nums[i].max, &val[i]) || (i >= 3 && i != 6 && val[i] == 0)) {
			snprintf(err, errlen, "%s: expected a number up to %llu, got '%s'",
				 nums[i].name, (unsigned long long)nums[i].max, s ? s : "(unset)");
			return -1;
		}
	}
	group_set_numbers(g, val);
	s = getenv("INCA_REPRODUCIBLE");
	g->reproducible = s && (!strcmp(s, "1") || !strcasecmp(s, "true"));
	g->member_index = -1;
	if ((s = getenv("INCA_MEMBER_INDEX"))) {
		uint64_t mi;
		if (hl_parse_num(s, AGG_MAX_MEMBERS - 1, &mi)) {
			snprintf(err, errlen, "INCA_MEMBER_INDEX: expected 0..%d, got '%s'",
				 AGG_MAX_MEMBERS - 1, s);
			return -1;
		}
		g->member_index = (int)mi;
	}
	s = getenv("INCA_MEMBERS");
	if (!s || !*s) {
		snprintf(err, errlen, "INCA_MEMBERS: expected \"ip:qpn,ip:qpn,...\" in rank order");
		return -1;
	}
	list = strdup(s);
	g->members = calloc(strlen(s) / 4 + 1, sizeof(*g->members));
	if (!list || !g->members) {
		free(list);
		snprintf(err, errlen, "out of memory");
		hl_group_free(g);
		return -1;
	}
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':'), *port;
		uint64_t q, p = 0;

		if (!colon)
			goto bad;
		*colon = 0;
		port = strchr(colon + 1, ':');
		if (port)
			*port++ = 0;
		if (hl_parse_ip(tok, &g->members[g->nmembers].ip) ||
		    hl_parse_num(colon + 1, AGG_QPN_MASK, &q) ||
		    (port && hl_parse_num(port, 65535, &p)))
			goto bad;
		g->members[g->nmembers].qpn = (uint32_t)q;
		g->members[g->nmembers].ring_port = (uint16_t)p;
		g->nmembers++;
	}
	free(list);
	if (g->nmembers == 0 || g->nmembers > AGG_MAX_MEMBERS) {
		snprintf(err, errlen, "INCA_MEMBERS: expected 1..%d members", AGG_MAX_MEMBERS);
		hl_group_free(g);
		return -1;
	}
	if (group_check(g, err, errlen)) {
		hl_group_free(g);
		return -1;
	}
	return 0;
bad:
	snprintf(err, errlen, "INCA_MEMBERS: member %d: expected ip:qpn[:ring_port]",
		 g->nmembers);
	free(list);
	hl_group_free(g);
	return -1;
}
