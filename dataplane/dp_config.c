/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-switch's JSON configuration: switch address, ports (shaping) and
 * static groups. Every error names the file, the field and what was
 * expected. docs/switch.md describes the format.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "dp_priv.h"

struct ctx {
	const char *path;
	char field[160];
	char *err;          /* the message goes here instead of stderr */
	size_t errlen;
};

__attribute__((format(printf, 2, 3)))
static int bad(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (c->err) {
		int n = snprintf(c->err, c->errlen, "%s: %s: ", c->path, c->field);
		if (n >= 0 && (size_t)n < c->errlen)
			vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	} else {
		fprintf(stderr, "inca-switch: %s: %s: ", c->path, c->field);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
	return -EINVAL;
}

__attribute__((format(printf, 2, 3)))
static void at(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->field, sizeof(c->field), fmt, ap);
	va_end(ap);
}

int dp_parse_rate(const char *s, uint64_t *bps)
{
	static const struct { const char *unit; double mult; } units[] = {
		{ "tbit", 1e12 }, { "gbit", 1e9 }, { "mbit", 1e6 },
		{ "kbit", 1e3 }, { "bit", 1 }, { "", 1 },
	};
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !(v > 0) || !isfinite(v))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcasecmp(end, units[i].unit)) {
			double r = v * units[i].mult;
			if (r < 1000 || r > 1e13)
				return -ERANGE;
			*bps = (uint64_t)r;
			return 0;
		}
	return -EINVAL;
}

int dp_parse_impair(const char *s, struct dp_impair *out, const char **bad)
{
	static const char *const words[] = { "loss", "duplicate", "reorder" };
	uint32_t *fields[] = { &out->loss, &out->duplicate, &out->reorder };
	char buf[256], *save = NULL, *tok;

	memset(out, 0, sizeof(*out));
	if (strlen(s) >= sizeof(buf)) {
		*bad = s;
		return -EINVAL;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		size_t k;
		for (k = 0; k < 3 && strcmp(tok, words[k]); k++)
			;
		if (k == 3) {
			*bad = s + (tok - buf);
			return -EINVAL;
		}
		char *val = strtok_r(NULL, " \t", &save), *end;
		if (!val) {
			*bad = s + (tok - buf);
			return -EINVAL;
		}
		errno = 0;
		double pct = strtod(val, &end);
		if (errno || end == val || strcmp(end, "%") || !(pct >= 0 && pct <= 100)) {
			*bad = s + (val - buf);
			return -EINVAL;
		}
		*fields[k] = (uint32_t)(pct / 100.0 * 4294967295.0);
		out->on = true;
	}
	return 0;
}

static int get_ipv4(struct ctx *c, json_t *v, uint32_t *out)
{
	struct in_addr a;

	if (!json_is_string(v) || inet_pton(AF_INET, json_string_value(v), &a) != 1)
		return bad(c, "expected an IPv4 address such as \"10.0.0.254\"");
	*out = ntohl(a.s_addr);
	if (*out == 0 || *out == 0xffffffffu)
		return bad(c, "expected a unicast IPv4 address, got %s",
			   json_string_value(v));
	return 0;
}

static int get_uint(struct ctx *c, json_t *v, uint64_t min, uint64_t max,
		    uint64_t *out)
{
	json_int_t i;

	if (json_is_string(v)) {   /* "0x1234" is allowed for keys and QPNs */
		char *end;
		errno = 0;
		unsigned long long u = strtoull(json_string_value(v), &end, 0);
		if (errno || *end || end == json_string_value(v))
			return bad(c, "expected an integer, got \"%s\"",
				   json_string_value(v));
		i = (json_int_t)u;
		if (u > (unsigned long long)INT64_MAX)
			return bad(c, "expected %llu..%llu, got %s",
				   (unsigned long long)min,
				   (unsigned long long)max, json_string_value(v));
	} else if (json_is_integer(v)) {
		i = json_integer_value(v);
	} else {
		return bad(c, "expected an integer");
	}
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
		return bad(c, "expected %llu..%llu, got %lld",
			   (unsigned long long)min, (unsigned long long)max,
			   (long long)i);
	*out = (uint64_t)i;
	return 0;
}

static int get_mac(struct ctx *c, json_t *v, uint8_t mac[6])
{
	struct rte_ether_addr a;

	if (!json_is_string(v) || rte_ether_unformat_addr(json_string_value(v), &a))
		return bad(c, "expected a MAC address such as \"02:00:00:00:00:01\"");
	if (rte_is_multicast_ether_addr(&a) || rte_is_zero_ether_addr(&a))
		return bad(c, "expected a unicast MAC address");
	memcpy(mac, a.addr_bytes, 6);
	return 0;
}

/* Unknown keys are errors: a typo must not be silently ignored. */
static int check_keys(struct ctx *c, json_t *obj, const char *const *known)
{
	const char *key;
	json_t *v;

	if (!json_is_object(obj))
		return bad(c, "expected an object");
	json_object_foreach(obj, key, v) {
		bool ok = false;
		for (size_t i = 0; known[i]; i++)
			ok |= !strcmp(key, known[i]);
		if (!ok) {
			size_t n = strlen(c->field);
			snprintf(c->field + n, sizeof(c->field) - n, ".%s", key);
			return bad(c, "unknown field");
		}
	}
	return 0;
}

static int parse_port(struct ctx *c, json_t *o, struct dp_port_cfg *p)
{
	static const char *const keys[] = { "port", "rate", "queue_kb", NULL };
	char base[sizeof(c->field)];
	json_t *v;
	uint64_t u;
	int rc;

	if ((rc = check_keys(c, o, keys)))
		return rc;
	snprintf(base, sizeof(base), "%s", c->field);
	if ((v = json_object_get(o, "rate"))) {
		at(c, "%s.rate", base);
		if (!json_is_string(v) || dp_parse_rate(json_string_value(v), &p->rate_bps))
			return bad(c, "expected a rate such as \"1gbit\", \"100mbit\" "
				   "(1 kbit/s .. 10 Tbit/s)");
	}
	if ((v = json_object_get(o, "queue_kb"))) {
		at(c, "%s.queue_kb", base);
		if ((rc = get_uint(c, v, 16, 1024 * 1024, &u)))
			return rc;
		p->queue_bytes = (uint32_t)(u * 1024);
	}
	p->set = true;
	return 0;
}

/* The job ranks under a member ("ranks": [0, 3]), into *next, which moves on. */
static int parse_ranks(struct ctx *c, json_t *v, struct agg_member *m, uint16_t **next)
{
	json_t *e;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return bad(c, "expected a list of the job's ranks under this member, such as [0, 3]");
	if (json_array_size(v) != m->fanin)
		return bad(c, "expected %u ranks (the member's fanin), got %zu", m->fanin,
			   json_array_size(v));
	m->ranks = *next;
	m->nranks = (uint16_t)json_array_size(v);
	json_array_foreach(v, i, e) {
		if (!json_is_integer(e) || json_integer_value(e) < 0 ||
		    json_integer_value(e) > UINT16_MAX)
			return bad(c, "element %zu: expected a rank 0..65535", i);
		*(*next)++ = (uint16_t)json_integer_value(e);
	}
	return 0;
}

static int parse_member(struct ctx *c, json_t *o, struct agg_member *m, uint16_t **ranks)
{
	static const char *const keys[] = { "ip", "qpn", "mac", "fanin", "ranks", NULL };
	char base[sizeof(c->field)];
	json_t *v;
	uint64_t u;
	int rc;

	if ((rc = check_keys(c, o, keys)))
		return rc;
	snprintf(base, sizeof(base), "%s", c->field);
	at(c, "%s.ip", base);
	if ((rc = get_ipv4(c, json_object_get(o, "ip"), &m->ip)))
		return rc;
	at(c, "%s.qpn", base);
	if (!(v = json_object_get(o, "qpn")))
		return bad(c, "missing (the member's UD QP number)");
	if ((rc = get_uint(c, v, 2, AGG_QPN_MASK, &u)))
		return rc;
	m->qpn = (uint32_t)u;
	if ((v = json_object_get(o, "mac"))) {
		at(c, "%s.mac", base);
		if ((rc = get_mac(c, v, m->mac)))
			return rc;
	}
	m->fanin = 1;
	if ((v = json_object_get(o, "fanin"))) {
		at(c, "%s.fanin", base);
		if ((rc = get_uint(c, v, 1, UINT16_MAX, &u)))
			return rc;
		m->fanin = (uint16_t)u;
	}
	if ((v = json_object_get(o, "ranks"))) {
		at(c, "%s.ranks", base);
		if ((rc = parse_ranks(c, v, m, ranks)))
			return rc;
	}
	return 0;
}

static int parse_group(struct ctx *c, json_t *o, struct dp_group_cfg *g)
{
	static const char *const keys[] = { "id", "qpn", "qkey", "window",
		"elems_per_pkt", "dtypes", "reproducible", "members", "parent",
		"first_rank", NULL };
	static const char *const parent_keys[] = { "ip", "qpn", "qkey", "rank", NULL };
	char base[sizeof(c->field)];
	struct agg_group_config *a = &g->agg;
	json_t *v, *e;
	uint16_t *next_rank;
	size_t i, nranks = 0;
	int rc;

	if ((rc = check_keys(c, o, keys)))
		return rc;
	snprintf(base, sizeof(base), "%s", c->field);

	static const struct { const char *key; uint64_t min, max, def; } nums[] = {
		{ "id", 0, UINT32_MAX, UINT64_MAX },
		{ "qpn", 2, AGG_QPN_MASK, UINT64_MAX },
		{ "qkey", 0, UINT32_MAX, UINT64_MAX },
		{ "window", 1, AGG_MAX_WINDOW, 64 },
		{ "elems_per_pkt", 1, AGG_MAX_ELEMS, 256 },
		{ "first_rank", 0, UINT16_MAX, 0 },
	};
	uint64_t val[6];
	for (i = 0; i < 6; i++) {
		at(c, "%s.%s", base, nums[i].key);
		v = json_object_get(o, nums[i].key);
		if (!v) {
			if (nums[i].def == UINT64_MAX)
				return bad(c, "missing");
			val[i] = nums[i].def;
		} else if ((rc = get_uint(c, v, nums[i].min, nums[i].max, &val[i]))) {
			return rc;
		}
	}
	a->group_id = (uint32_t)val[0];
	a->qpn = (uint32_t)val[1];
	a->qkey = (uint32_t)val[2];
	a->window = (uint16_t)val[3];
	a->elems_per_pkt = (uint16_t)val[4];
	a->first_rank = (uint16_t)val[5];

	if ((v = json_object_get(o, "dtypes"))) {
		at(c, "%s.dtypes", base);
		if (!json_is_array(v) || json_array_size(v) == 0)
			return bad(c, "expected a non-empty list such as [\"fp32\", \"bf16\"]");
		json_array_foreach(v, i, e) {
			int d = json_is_string(e) ? agg_dtype_parse(json_string_value(e)) : -1;
			at(c, "%s.dtypes[%zu]", base, i);
			if (d < 0)
				return bad(c, "expected one of fp32, fp16, bf16, int32, int64, fp64");
			a->dtype_mask |= 1u << d;
		}
	}
	if ((v = json_object_get(o, "reproducible"))) {
		at(c, "%s.reproducible", base);
		if (!json_is_boolean(v))
			return bad(c, "expected true or false");
		a->reproducible = json_is_true(v);
	}
	at(c, "%s.members", base);
	v = json_object_get(o, "members");
	if (!json_is_array(v) || json_array_size(v) == 0 ||
	    json_array_size(v) > AGG_MAX_MEMBERS)
		return bad(c, "expected a list of 1..%d members", AGG_MAX_MEMBERS);
	a->nmembers = (uint16_t)json_array_size(v);
	json_array_foreach(v, i, e)
		nranks += json_array_size(json_object_get(e, "ranks"));
	g->members = calloc(a->nmembers, sizeof(*g->members));
	g->ranks = calloc(nranks ? nranks : 1, sizeof(*g->ranks));
	if (!g->members || !g->ranks)
		return bad(c, "out of memory");
	next_rank = g->ranks;
	json_array_foreach(v, i, e) {
		at(c, "%s.members[%zu]", base, i);
		if ((rc = parse_member(c, e, &g->members[i], &next_rank)))
			return rc;
	}
	a->members = g->members;

	if ((v = json_object_get(o, "parent"))) {
		uint64_t u;
		at(c, "%s.parent", base);
		if ((rc = check_keys(c, v, parent_keys)))
			return rc;
		at(c, "%s.parent.ip", base);
		if ((rc = get_ipv4(c, json_object_get(v, "ip"), &a->parent.ip)))
			return rc;
		at(c, "%s.parent.qpn", base);
		if (!json_object_get(v, "qpn"))
			return bad(c, "missing (the group's QPN on the parent switch)");
		if ((rc = get_uint(c, json_object_get(v, "qpn"), 2, AGG_QPN_MASK, &u)))
			return rc;
		a->parent.qpn = (uint32_t)u;
		at(c, "%s.parent.qkey", base);
		if (!json_object_get(v, "qkey"))
			return bad(c, "missing (the parent group's Q_Key)");
		if ((rc = get_uint(c, json_object_get(v, "qkey"), 0, UINT32_MAX, &u)))
			return rc;
		a->parent.qkey = (uint32_t)u;
		at(c, "%s.parent.rank", base);
		if (!json_object_get(v, "rank"))
			return bad(c, "missing (this switch's member index in the parent group)");
		if ((rc = get_uint(c, json_object_get(v, "rank"), 0, AGG_MAX_MEMBERS - 1, &u)))
			return rc;
		a->parent.rank = (uint16_t)u;
	}

	/* let the engine say what else it does not accept */
	const char *why = NULL;
	struct agg_group *probe = agg_group_create(a, &why);
	if (!probe) {
		at(c, "%s", base);
		return bad(c, "%s", why ? why : "rejected");
	}
	agg_group_destroy(probe);
	return 0;
}

/* a list of TC numbers -> bit mask */
static int get_tc_mask(struct ctx *c, json_t *v, uint8_t *mask)
{
	size_t i;
	json_t *e;

	if (!json_is_array(v))
		return bad(c, "expected a list of traffic classes 0..7, such as [3]");
	*mask = 0;
	json_array_foreach(v, i, e) {
		if (!json_is_integer(e) || json_integer_value(e) < 0 ||
		    json_integer_value(e) >= DP_NUM_TC)
			return bad(c, "element %zu: expected a traffic class 0..7", i);
		*mask |= (uint8_t)(1u << json_integer_value(e));
	}
	return 0;
}

static int get_bool(struct ctx *c, json_t *v, bool *out)
{
	if (!json_is_boolean(v))
		return bad(c, "expected true or false");
	*out = json_is_true(v);
	return 0;
}

static int parse_qos(struct ctx *c, json_t *o, struct dp_qos_cfg *q)
{
	static const char *const keys[] = { "dscp_to_tc", "default_tc", "lossless_tcs",
		"strict_tcs", "wrr_weights", "pfc", "xoff_bytes", "xon_bytes",
		"headroom_bytes", "pause_quanta", "ecn", "cnp", "watchdog", NULL };
	static const char *const ecn_keys[] = { "enabled", "lossy", "kmin_bytes", "kmax_bytes",
		"pmax", NULL };
	static const char *const cnp_keys[] = { "enabled", "interval_us", "dscp", NULL };
	static const char *const wd_keys[] = { "enabled", "detection_ms",
		"restoration_ms", "action", NULL };
	json_t *v, *e;
	uint64_t u;
	size_t i;
	int rc;

	at(c, "qos");
	if ((rc = check_keys(c, o, keys)))
		return rc;
	if ((v = json_object_get(o, "default_tc"))) {
		at(c, "qos.default_tc");
		if ((rc = get_uint(c, v, 0, DP_NUM_TC - 1, &u)))
			return rc;
		for (i = 0; i < 64; i++)
			if (i != 26 && i != 48)
				q->dscp_tc[i] = (uint8_t)u;
	}
	if ((v = json_object_get(o, "dscp_to_tc"))) {
		const char *key;
		at(c, "qos.dscp_to_tc");
		if (!json_is_object(v))
			return bad(c, "expected an object such as {\"26\": 3, \"48\": 6}");
		json_object_foreach(v, key, e) {
			char *end;
			long d = strtol(key, &end, 10);
			at(c, "qos.dscp_to_tc.%s", key);
			if (*end || end == key || d < 0 || d > 63)
				return bad(c, "expected a DSCP 0..63 as the key");
			if ((rc = get_uint(c, e, 0, DP_NUM_TC - 1, &u)))
				return rc;
			q->dscp_tc[d] = (uint8_t)u;
		}
	}
	if ((v = json_object_get(o, "lossless_tcs"))) {
		at(c, "qos.lossless_tcs");
		if ((rc = get_tc_mask(c, v, &q->lossless_mask)))
			return rc;
	}
	if ((v = json_object_get(o, "strict_tcs"))) {
		at(c, "qos.strict_tcs");
		if ((rc = get_tc_mask(c, v, &q->strict_mask)))
			return rc;
	}
	if ((v = json_object_get(o, "wrr_weights"))) {
		at(c, "qos.wrr_weights");
		if (!json_is_array(v) || json_array_size(v) != DP_NUM_TC)
			return bad(c, "expected 8 weights 1..100, one per traffic class");
		json_array_foreach(v, i, e) {
			at(c, "qos.wrr_weights[%zu]", i);
			if ((rc = get_uint(c, e, 1, 100, &u)))
				return rc;
			q->wrr_weight[i] = (uint8_t)u;
		}
	}
	if ((v = json_object_get(o, "pfc"))) {
		at(c, "qos.pfc");
		if ((rc = get_bool(c, v, &q->pfc)))
			return rc;
	}
	static const struct { const char *key; uint64_t min, max; uint32_t *dst; } sizes[] = {
		{ "xoff_bytes", 1024, 1u << 30, NULL },
		{ "xon_bytes", 0, 1u << 30, NULL },
		{ "headroom_bytes", 2 * 9216, 1u << 30, NULL },
	};
	uint32_t *dsts[] = { &q->xoff_bytes, &q->xon_bytes, &q->headroom_bytes };
	for (i = 0; i < 3; i++)
		if ((v = json_object_get(o, sizes[i].key))) {
			at(c, "qos.%s", sizes[i].key);
			if ((rc = get_uint(c, v, sizes[i].min, sizes[i].max, &u)))
				return rc;
			*dsts[i] = (uint32_t)u;
		}
	if (q->xon_bytes >= q->xoff_bytes) {
		at(c, "qos.xon_bytes");
		return bad(c, "must be below xoff_bytes (%u), got %u", q->xoff_bytes,
			   q->xon_bytes);
	}
	if ((v = json_object_get(o, "pause_quanta"))) {
		at(c, "qos.pause_quanta");
		if ((rc = get_uint(c, v, 1, 0xffff, &u)))
			return rc;
		q->pause_quanta = (uint16_t)u;
	}
	if ((v = json_object_get(o, "ecn"))) {
		at(c, "qos.ecn");
		if ((rc = check_keys(c, v, ecn_keys)))
			return rc;
		if ((e = json_object_get(v, "enabled"))) {
			at(c, "qos.ecn.enabled");
			if ((rc = get_bool(c, e, &q->ecn)))
				return rc;
		}
		if ((e = json_object_get(v, "lossy"))) {
			at(c, "qos.ecn.lossy");
			if ((rc = get_bool(c, e, &q->ecn_lossy)))
				return rc;
		}
		if ((e = json_object_get(v, "kmin_bytes"))) {
			at(c, "qos.ecn.kmin_bytes");
			if ((rc = get_uint(c, e, 0, 1u << 30, &u)))
				return rc;
			q->kmin_bytes = (uint32_t)u;
		}
		if ((e = json_object_get(v, "kmax_bytes"))) {
			at(c, "qos.ecn.kmax_bytes");
			if ((rc = get_uint(c, e, 1, 1u << 30, &u)))
				return rc;
			q->kmax_bytes = (uint32_t)u;
		}
		if (q->kmax_bytes <= q->kmin_bytes) {
			at(c, "qos.ecn.kmax_bytes");
			return bad(c, "must be above kmin_bytes (%u), got %u", q->kmin_bytes,
				   q->kmax_bytes);
		}
		if ((e = json_object_get(v, "pmax"))) {
			at(c, "qos.ecn.pmax");
			if (!json_is_number(e) || !(json_number_value(e) >= 0 &&
						    json_number_value(e) <= 1))
				return bad(c, "expected a probability 0..1, such as 0.2");
			q->pmax = json_number_value(e);
		}
	}
	if ((v = json_object_get(o, "cnp"))) {
		at(c, "qos.cnp");
		if ((rc = check_keys(c, v, cnp_keys)))
			return rc;
		if ((e = json_object_get(v, "enabled"))) {
			at(c, "qos.cnp.enabled");
			if ((rc = get_bool(c, e, &q->cnp)))
				return rc;
		}
		if ((e = json_object_get(v, "interval_us"))) {
			at(c, "qos.cnp.interval_us");
			if ((rc = get_uint(c, e, 0, 1000000, &u)))
				return rc;
			q->cnp_interval_us = (uint32_t)u;
		}
		if ((e = json_object_get(v, "dscp"))) {
			at(c, "qos.cnp.dscp");
			if ((rc = get_uint(c, e, 0, 63, &u)))
				return rc;
			q->cnp_dscp = (uint8_t)u;
		}
	}
	if ((v = json_object_get(o, "watchdog"))) {
		at(c, "qos.watchdog");
		if ((rc = check_keys(c, v, wd_keys)))
			return rc;
		if ((e = json_object_get(v, "enabled"))) {
			at(c, "qos.watchdog.enabled");
			if ((rc = get_bool(c, e, &q->watchdog)))
				return rc;
		}
		if ((e = json_object_get(v, "detection_ms"))) {
			at(c, "qos.watchdog.detection_ms");
			if ((rc = get_uint(c, e, 10, 60000, &u)))
				return rc;
			q->wd_detect_ms = (uint32_t)u;
		}
		if ((e = json_object_get(v, "restoration_ms"))) {
			at(c, "qos.watchdog.restoration_ms");
			if ((rc = get_uint(c, e, 10, 60000, &u)))
				return rc;
			q->wd_restore_ms = (uint32_t)u;
		}
		if ((e = json_object_get(v, "action"))) {
			static const char *const names[] = { "drop", "forward", "alert" };
			at(c, "qos.watchdog.action");
			for (i = 0; i < 3; i++)
				if (json_is_string(e) && !strcmp(json_string_value(e), names[i]))
					break;
			if (i == 3)
				return bad(c, "expected \"drop\", \"forward\" or \"alert\"");
			q->wd_action = (enum dp_wd_action)i;
		}
	}
	if (q->lossless_mask & q->strict_mask) {
		at(c, "qos.strict_tcs");
		return bad(c, "a traffic class cannot be both lossless and strict priority");
	}
	return 0;
}

int dp_config_load(struct dp_config *cfg, const char *path)
{
	static const char *const top_keys[] = { "switch", "ports", "groups", "qos", NULL };
	static const char *const sw_keys[] = { "ip", "result_dscp", "idle_sleep_us", "idle_spin_us",
		"mac_age_s", "rate", "queue_kb", "impair", NULL };
	struct ctx c = { .path = path };
	json_error_t jerr;
	json_t *root, *sw, *v, *e;
	uint64_t u;
	size_t i;
	int rc = -EINVAL;

	snprintf(cfg->path, sizeof(cfg->path), "%s", path);
	cfg->result_dscp = 26;
	cfg->idle_sleep_us = 0;
	cfg->idle_spin_us = DP_IDLE_SPIN_US;
	cfg->mac_age_s = 300;
	dp_qos_cfg_default(&cfg->qos);

	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		fprintf(stderr, "inca-switch: %s: line %d column %d: %s\n", path,
			jerr.line, jerr.column, jerr.text);
		return -EINVAL;
	}
	at(&c, "(top level)");
	if ((rc = check_keys(&c, root, top_keys)))
		goto out;

	at(&c, "switch");
	sw = json_object_get(root, "switch");
	if (!sw) {
		rc = bad(&c, "missing (needs at least \"ip\")");
		goto out;
	}
	if ((rc = check_keys(&c, sw, sw_keys)))
		goto out;
	at(&c, "switch.ip");
	if ((rc = get_ipv4(&c, json_object_get(sw, "ip"), &cfg->switch_ip)))
		goto out;
	if ((v = json_object_get(sw, "result_dscp"))) {
		at(&c, "switch.result_dscp");
		if ((rc = get_uint(&c, v, 0, 63, &u)))
			goto out;
		cfg->result_dscp = (uint8_t)u;
	}
	if ((v = json_object_get(sw, "idle_sleep_us"))) {
		at(&c, "switch.idle_sleep_us");
		if ((rc = get_uint(&c, v, 0, 1000000, &u)))
			goto out;
		cfg->idle_sleep_us = (uint32_t)u;
	}
	if ((v = json_object_get(sw, "idle_spin_us"))) {
		at(&c, "switch.idle_spin_us");
		if ((rc = get_uint(&c, v, 0, 1000000, &u)))
			goto out;
		cfg->idle_spin_us = (uint32_t)u;
	}
	if ((v = json_object_get(sw, "mac_age_s"))) {
		at(&c, "switch.mac_age_s");
		if ((rc = get_uint(&c, v, 1, 86400, &u)))
			goto out;
		cfg->mac_age_s = (uint32_t)u;
	}
	if ((v = json_object_get(sw, "impair"))) {
		const char *where = NULL;
		at(&c, "switch.impair");
		if (!json_is_string(v) ||
		    dp_parse_impair(json_string_value(v), &cfg->impair, &where)) {
			rc = bad(&c, "expected netem-style \"loss 1%% duplicate 1%% reorder 5%%\"%s%s",
				 where ? ", stuck at: " : "", where ? where : "");
			goto out;
		}
	}
	at(&c, "switch");
	{
		/* switch.rate / switch.queue_kb: defaults for every port */
		json_t *d = json_object();
		if (json_object_get(sw, "rate"))
			json_object_set(d, "rate", json_object_get(sw, "rate"));
		if (json_object_get(sw, "queue_kb"))
			json_object_set(d, "queue_kb", json_object_get(sw, "queue_kb"));
		rc = parse_port(&c, d, &cfg->port_default);
		json_decref(d);
		if (rc)
			goto out;
		cfg->port_default.set = false;
	}

	if ((v = json_object_get(root, "ports"))) {
		at(&c, "ports");
		if (!json_is_array(v)) {
			rc = bad(&c, "expected a list of {\"port\": N, \"rate\": ...}");
			goto out;
		}
		json_array_foreach(v, i, e) {
			at(&c, "ports[%zu].port", i);
			if (!json_is_object(e) || !json_object_get(e, "port")) {
				rc = bad(&c, "missing (the port's index, 0..%d)", DP_MAX_PORTS - 1);
				goto out;
			}
			if ((rc = get_uint(&c, json_object_get(e, "port"), 0,
					   DP_MAX_PORTS - 1, &u)))
				goto out;
			if (cfg->ports[u].set) {
				rc = bad(&c, "port %llu is listed twice", (unsigned long long)u);
				goto out;
			}
			cfg->ports[u] = cfg->port_default;
			at(&c, "ports[%zu]", i);
			if ((rc = parse_port(&c, e, &cfg->ports[u])))
				goto out;
		}
	}

	if ((v = json_object_get(root, "qos")) && (rc = parse_qos(&c, v, &cfg->qos)))
		goto out;

	if ((v = json_object_get(root, "groups"))) {
		at(&c, "groups");
		if (!json_is_array(v) || json_array_size(v) > DP_MAX_GROUPS) {
			rc = bad(&c, "expected a list of at most %d groups", DP_MAX_GROUPS);
			goto out;
		}
		cfg->groups = calloc(json_array_size(v) + 1, sizeof(*cfg->groups));
		if (!cfg->groups) {
			rc = bad(&c, "out of memory");
			goto out;
		}
		json_array_foreach(v, i, e) {
			at(&c, "groups[%zu]", i);
			cfg->ngroups = (uint16_t)(i + 1);
			if ((rc = parse_group(&c, e, &cfg->groups[i])))
				goto out;
			for (size_t k = 0; k < i; k++) {
				if (cfg->groups[k].agg.group_id == cfg->groups[i].agg.group_id) {
					at(&c, "groups[%zu].id", i);
					rc = bad(&c, "group %u is defined twice",
						 cfg->groups[i].agg.group_id);
					goto out;
				}
				if (cfg->groups[k].agg.qpn == cfg->groups[i].agg.qpn) {
					at(&c, "groups[%zu].qpn", i);
					rc = bad(&c, "QPN %u is already group %u's",
						 cfg->groups[i].agg.qpn,
						 cfg->groups[k].agg.group_id);
					goto out;
				}
			}
		}
	}
	rc = 0;
out:
	json_decref(root);
	if (rc)
		dp_config_free(cfg);
	return rc;
}

int dp_config_parse_group(json_t *o, const char *origin, struct dp_group_cfg *g,
			  char *err, size_t errlen)
{
	struct ctx c = { .path = origin, .err = err, .errlen = errlen };
	int rc;

	memset(g, 0, sizeof(*g));
	at(&c, "group");
	rc = parse_group(&c, o, g);
	if (rc)
		dp_group_cfg_free(g);
	return rc;
}

void dp_group_cfg_free(struct dp_group_cfg *g)
{
	free(g->members);
	free(g->ranks);
	g->members = NULL;
	g->ranks = NULL;
}

void dp_config_free(struct dp_config *cfg)
{
	for (uint16_t i = 0; i < cfg->ngroups; i++)
		dp_group_cfg_free(&cfg->groups[i]);
	free(cfg->groups);
	cfg->groups = NULL;
	cfg->ngroups = 0;
}
