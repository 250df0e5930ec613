/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-switch's JSON configuration: switch address, ports (shaping), QoS
 * and static groups, read with common/inca_json.h. Every error names the
 * file, the field and what was expected. docs/switch.md describes the
 * format. The checks of a group the engine makes are aggregation/'s
 * (agg_group_config_check), so a file the switch starts with never holds a
 * group the engine would refuse.
 *
 * One file over 500 lines on purpose (about 640): it is one format, and
 * the field table (NUM, get_nums) and AT_KEY it reads every section with
 * are private to it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "dp_priv.h"
#include "inca_json.h"

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

/* An optional number: its key, range and destination (of its width). */
struct num_field {
	const char *key;
	uint64_t min, max;
	void *dst;
	uint8_t size;
};
#define NUM(key, min, max, lvalue) { key, min, max, &(lvalue), sizeof(lvalue) }

/* The fields of fs present in o, each checked and stored. */
static int get_nums(struct inca_json *in, json_t *o, const struct num_field *fs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct num_field *f = &fs[i];
		uint64_t u;

		if (!json_object_get(o, f->key))
			continue;
		if (inca_json_get_uint(in, o, f->key, f->min, f->max, &u))
			return -EINVAL;
		switch (f->size) {
		case 1: *(uint8_t *)f->dst = (uint8_t)u; break;
		case 2: *(uint16_t *)f->dst = (uint16_t)u; break;
		case 4: *(uint32_t *)f->dst = (uint32_t)u; break;
		default: *(uint64_t *)f->dst = u; break;
		}
	}
	return 0;
}

/* A number o must have; missing says what it is for. */
static int need_u32(struct inca_json *in, json_t *o, const char *key, uint32_t min,
		    uint32_t max, const char *what, uint32_t *out)
{
	if (!json_object_get(o, key))
		return inca_json_bad_at(in, key, "missing%s", what);
	return inca_json_get_u32(in, o, key, min, max, out);
}

static int get_mac(struct inca_json *in, json_t *v, uint8_t mac[6])
{
	struct rte_ether_addr a;

	if (!json_is_string(v) || rte_ether_unformat_addr(json_string_value(v), &a))
		return inca_json_bad(in, "expected a MAC address such as \"02:00:00:00:00:01\"");
	if (rte_is_multicast_ether_addr(&a) || rte_is_zero_ether_addr(&a))
		return inca_json_bad(in, "expected a unicast MAC address");
	memcpy(mac, a.addr_bytes, 6);
	return 0;
}

/* Run get on it, o's member key, with the path naming it, if key is there. */
#define AT_KEY(in, o, key, get)                                              \
	({                                                                    \
		json_t *v_ = json_object_get(o, key);                         \
		int rc_ = 0;                                                  \
		if (v_) {                                                     \
			size_t mark_ = inca_json_enter(in, "%s", key);        \
			json_t *it = v_;                                      \
			rc_ = (get);                                          \
			inca_json_leave(in, mark_);                           \
		}                                                             \
		rc_;                                                          \
	})

static int parse_port(struct inca_json *in, json_t *o, struct dp_port_cfg *p)
{
	static const char *const keys[] = { "port", "rate", "queue_kb", NULL };
	uint32_t kb = p->queue_bytes / 1024;

	if (inca_json_object(in, o, keys))
		return -EINVAL;
	if (AT_KEY(in, o, "rate", !json_is_string(it) ||
		   dp_parse_rate(json_string_value(it), &p->rate_bps) ?
		   inca_json_bad(in, "expected a rate such as \"1gbit\", \"100mbit\" "
				 "(1 kbit/s .. 10 Tbit/s)") : 0))
		return -EINVAL;
	if (json_object_get(o, "queue_kb")) {
		if (inca_json_get_u32(in, o, "queue_kb", 16, 1024 * 1024, &kb))
			return -EINVAL;
		p->queue_bytes = kb * 1024;
	}
	p->set = true;
	return 0;
}

/* The job ranks under a member ("ranks": [0, 3]), into *next, which moves on. */
static int parse_ranks(struct inca_json *in, json_t *v, struct agg_member *m, uint16_t **next)
{
	json_t *e;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return inca_json_bad(in, "expected a list of the job's ranks under this member, "
				     "such as [0, 3]");
	if (json_array_size(v) != m->fanin)
		return inca_json_bad(in, "expected %u ranks (the member's fanin), got %zu",
				     m->fanin, json_array_size(v));
	m->ranks = *next;
	m->nranks = (uint16_t)json_array_size(v);
	json_array_foreach(v, i, e) {
		if (!json_is_integer(e) || json_integer_value(e) < 0 ||
		    json_integer_value(e) > UINT16_MAX)
			return inca_json_bad(in, "element %zu: expected a rank 0..65535", i);
		*(*next)++ = (uint16_t)json_integer_value(e);
	}
	return 0;
}

static int parse_member(struct inca_json *in, json_t *o, struct agg_member *m,
			uint16_t **ranks)
{
	static const char *const keys[] = { "ip", "qpn", "mac", "fanin", "ranks", NULL };

	m->fanin = 1;
	if (inca_json_object(in, o, keys) ||
	    inca_json_get_ipv4(in, o, "ip", &m->ip) ||
	    need_u32(in, o, "qpn", 2, AGG_QPN_MASK, " (the member's UD QP number)", &m->qpn) ||
	    AT_KEY(in, o, "mac", get_mac(in, it, m->mac)))
		return -EINVAL;
	const struct num_field nums[] = { NUM("fanin", 1, UINT16_MAX, m->fanin) };
	if (get_nums(in, o, nums, 1) ||
	    AT_KEY(in, o, "ranks", parse_ranks(in, it, m, ranks)))
		return -EINVAL;
	return 0;
}

static int parse_dtypes(struct inca_json *in, json_t *v, uint32_t *mask)
{
	json_t *e;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return inca_json_bad(in, "expected a non-empty list such as [\"fp32\", \"bf16\"]");
	json_array_foreach(v, i, e) {
		int d = json_is_string(e) ? agg_dtype_parse(json_string_value(e)) : -1;

		if (d < 0) {
			inca_json_enter(in, "[%zu]", i);
			return inca_json_bad(in, "expected one of fp32, fp16, bf16, int32, int64, "
					     "fp64");
		}
		*mask |= 1u << d;
	}
	return 0;
}

static int parse_parent(struct inca_json *in, json_t *v, struct agg_parent *p)
{
	static const char *const keys[] = { "ip", "qpn", "qkey", "rank", NULL };
	uint32_t rank = 0;

	if (inca_json_object(in, v, keys) ||
	    inca_json_get_ipv4(in, v, "ip", &p->ip) ||
	    need_u32(in, v, "qpn", 2, AGG_QPN_MASK, " (the group's QPN on the parent switch)",
		     &p->qpn) ||
	    need_u32(in, v, "qkey", 0, UINT32_MAX, " (the parent group's Q_Key)", &p->qkey) ||
	    need_u32(in, v, "rank", 0, AGG_MAX_MEMBERS - 1,
		     " (this switch's member index in the parent group)", &rank))
		return -EINVAL;
	p->rank = (uint16_t)rank;
	return 0;
}

static int parse_group(struct inca_json *in, json_t *o, struct dp_group_cfg *g)
{
	static const char *const keys[] = { "id", "qpn", "qkey", "window",
		"elems_per_pkt", "dtypes", "reproducible", "members", "parent",
		"first_rank", NULL };
	struct agg_group_config *a = &g->agg;
	json_t *v, *e;
	uint16_t *next_rank;
	size_t i, nranks = 0;
	const char *why;

	a->window = 64;
	a->elems_per_pkt = 256;
	const struct num_field nums[] = {
		NUM("window", 1, AGG_MAX_WINDOW, a->window),
		NUM("elems_per_pkt", 1, AGG_MAX_ELEMS, a->elems_per_pkt),
		NUM("first_rank", 0, UINT16_MAX, a->first_rank),
	};
	if (inca_json_object(in, o, keys) ||
	    need_u32(in, o, "id", 0, UINT32_MAX, "", &a->group_id) ||
	    need_u32(in, o, "qpn", 2, AGG_QPN_MASK, "", &a->qpn) ||
	    need_u32(in, o, "qkey", 0, UINT32_MAX, "", &a->qkey) ||
	    get_nums(in, o, nums, sizeof(nums) / sizeof(nums[0])) ||
	    AT_KEY(in, o, "dtypes", parse_dtypes(in, it, &a->dtype_mask)) ||
	    inca_json_opt_bool(in, o, "reproducible", &a->reproducible))
		return -EINVAL;

	v = json_object_get(o, "members");
	if (!json_is_array(v) || json_array_size(v) == 0 ||
	    json_array_size(v) > AGG_MAX_MEMBERS)
		return inca_json_bad_at(in, "members", "expected a list of 1..%d members",
					AGG_MAX_MEMBERS);
	a->nmembers = (uint16_t)json_array_size(v);
	json_array_foreach(v, i, e)
		nranks += json_array_size(json_object_get(e, "ranks"));
	g->members = calloc(a->nmembers, sizeof(*g->members));
	g->ranks = calloc(nranks ? nranks : 1, sizeof(*g->ranks));
	if (!g->members || !g->ranks)
		return inca_json_bad(in, "out of memory");
	next_rank = g->ranks;
	json_array_foreach(v, i, e) {
		size_t mark = inca_json_enter(in, "members[%zu]", i);

		if (parse_member(in, e, &g->members[i], &next_rank))
			return -EINVAL;
		inca_json_leave(in, mark);
	}
	a->members = g->members;
	if (AT_KEY(in, o, "parent", parse_parent(in, it, &a->parent)))
		return -EINVAL;
	/* what else the engine does not accept, in its words */
	why = agg_group_config_check(a);
	return why ? inca_json_bad(in, "%s", why) : 0;
}

/* a list of TC numbers -> bit mask */
static int get_tc_mask(struct inca_json *in, json_t *v, uint8_t *mask)
{
	size_t i;
	json_t *e;

	if (!json_is_array(v))
		return inca_json_bad(in, "expected a list of traffic classes 0..7, such as [3]");
	*mask = 0;
	json_array_foreach(v, i, e) {
		if (!json_is_integer(e) || json_integer_value(e) < 0 ||
		    json_integer_value(e) >= DP_NUM_TC)
			return inca_json_bad(in, "element %zu: expected a traffic class 0..7", i);
		*mask |= (uint8_t)(1u << json_integer_value(e));
	}
	return 0;
}

static int parse_dscp_map(struct inca_json *in, json_t *v, struct dp_qos_cfg *q)
{
	const char *key;
	json_t *e;

	if (!json_is_object(v))
		return inca_json_bad(in, "expected an object such as {\"26\": 3, \"48\": 6}");
	json_object_foreach(v, key, e) {
		char *end;
		long d = strtol(key, &end, 10);
		uint32_t tc;

		if (*end || end == key || d < 0 || d > 63)
			return inca_json_bad_at(in, key, "expected a DSCP 0..63 as the key");
		if (inca_json_get_u32(in, v, key, 0, DP_NUM_TC - 1, &tc))
			return -EINVAL;
		q->dscp_tc[d] = (uint8_t)tc;
	}
	return 0;
}

static int parse_weights(struct inca_json *in, json_t *v, struct dp_qos_cfg *q)
{
	json_t *e;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) != DP_NUM_TC)
		return inca_json_bad(in, "expected 8 weights 1..100, one per traffic class");
	json_array_foreach(v, i, e) {
		size_t mark = inca_json_enter(in, "[%zu]", i);
		uint32_t w;

		if (inca_json_u32(in, e, 1, 100, &w))
			return -EINVAL;
		inca_json_leave(in, mark);
		q->wrr_weight[i] = (uint8_t)w;
	}
	return 0;
}

static int parse_ecn(struct inca_json *in, json_t *v, struct dp_qos_cfg *q)
{
	static const char *const keys[] = { "enabled", "lossy", "kmin_bytes", "kmax_bytes",
		"pmax", NULL };
	const struct num_field nums[] = {
		NUM("kmin_bytes", 0, 1u << 30, q->kmin_bytes),
		NUM("kmax_bytes", 1, 1u << 30, q->kmax_bytes),
	};

	if (inca_json_object(in, v, keys) ||
	    inca_json_opt_bool(in, v, "enabled", &q->ecn) ||
	    inca_json_opt_bool(in, v, "lossy", &q->ecn_lossy) ||
	    get_nums(in, v, nums, 2))
		return -EINVAL;
	if (q->kmax_bytes <= q->kmin_bytes)
		return inca_json_bad_at(in, "kmax_bytes", "must be above kmin_bytes (%u), got %u",
					q->kmin_bytes, q->kmax_bytes);
	if (AT_KEY(in, v, "pmax", !json_is_number(it) || !(json_number_value(it) >= 0 &&
							   json_number_value(it) <= 1) ?
		   inca_json_bad(in, "expected a probability 0..1, such as 0.2") :
		   (q->pmax = json_number_value(it), 0)))
		return -EINVAL;
	return 0;
}

static int parse_cnp(struct inca_json *in, json_t *v, struct dp_qos_cfg *q)
{
	static const char *const keys[] = { "enabled", "interval_us", "dscp", NULL };
	const struct num_field nums[] = {
		NUM("interval_us", 0, 1000000, q->cnp_interval_us),
		NUM("dscp", 0, 63, q->cnp_dscp),
	};

	return inca_json_object(in, v, keys) ||
	       inca_json_opt_bool(in, v, "enabled", &q->cnp) ||
	       get_nums(in, v, nums, 2) ? -EINVAL : 0;
}

static int parse_watchdog(struct inca_json *in, json_t *v, struct dp_qos_cfg *q)
{
	static const char *const keys[] = { "enabled", "detection_ms", "restoration_ms",
		"action", NULL };
	static const char *const names[] = { "drop", "forward", "alert" };
	const struct num_field nums[] = {
		NUM("detection_ms", 10, 60000, q->wd_detect_ms),
		NUM("restoration_ms", 10, 60000, q->wd_restore_ms),
	};
	json_t *e;
	size_t i;

	if (inca_json_object(in, v, keys) ||
	    inca_json_opt_bool(in, v, "enabled", &q->watchdog) ||
	    get_nums(in, v, nums, 2))
		return -EINVAL;
	if ((e = json_object_get(v, "action"))) {
		for (i = 0; i < 3; i++)
			if (json_is_string(e) && !strcmp(json_string_value(e), names[i]))
				break;
		if (i == 3)
			return inca_json_bad_at(in, "action", "expected \"drop\", \"forward\" or "
						"\"alert\"");
		q->wd_action = (enum dp_wd_action)i;
	}
	return 0;
}

static int parse_qos(struct inca_json *in, json_t *o, struct dp_qos_cfg *q)
{
	static const char *const keys[] = { "dscp_to_tc", "default_tc", "lossless_tcs",
		"strict_tcs", "wrr_weights", "pfc", "xoff_bytes", "xon_bytes",
		"headroom_bytes", "pause_quanta", "ecn", "cnp", "watchdog", NULL };
	const struct num_field sizes[] = {
		NUM("xoff_bytes", 1024, 1u << 30, q->xoff_bytes),
		NUM("xon_bytes", 0, 1u << 30, q->xon_bytes),
		NUM("headroom_bytes", 2 * 9216, 1u << 30, q->headroom_bytes),
		NUM("pause_quanta", 1, 0xffff, q->pause_quanta),
	};
	uint32_t def;

	if (inca_json_object(in, o, keys))
		return -EINVAL;
	if (json_object_get(o, "default_tc")) {
		if (inca_json_get_u32(in, o, "default_tc", 0, DP_NUM_TC - 1, &def))
			return -EINVAL;
		for (size_t i = 0; i < 64; i++)
			if (i != 26 && i != 48)
				q->dscp_tc[i] = (uint8_t)def;
	}
	if (AT_KEY(in, o, "dscp_to_tc", parse_dscp_map(in, it, q)) ||
	    AT_KEY(in, o, "lossless_tcs", get_tc_mask(in, it, &q->lossless_mask)) ||
	    AT_KEY(in, o, "strict_tcs", get_tc_mask(in, it, &q->strict_mask)) ||
	    AT_KEY(in, o, "wrr_weights", parse_weights(in, it, q)) ||
	    inca_json_opt_bool(in, o, "pfc", &q->pfc) ||
	    get_nums(in, o, sizes, sizeof(sizes) / sizeof(sizes[0])))
		return -EINVAL;
	if (q->xon_bytes >= q->xoff_bytes)
		return inca_json_bad_at(in, "xon_bytes", "must be below xoff_bytes (%u), got %u",
					q->xoff_bytes, q->xon_bytes);
	if (AT_KEY(in, o, "ecn", parse_ecn(in, it, q)) ||
	    AT_KEY(in, o, "cnp", parse_cnp(in, it, q)) ||
	    AT_KEY(in, o, "watchdog", parse_watchdog(in, it, q)))
		return -EINVAL;
	if (q->lossless_mask & q->strict_mask)
		return inca_json_bad_at(in, "strict_tcs", "a traffic class cannot be both "
					"lossless and strict priority");
	return 0;
}

static int parse_switch(struct inca_json *in, json_t *sw, struct dp_config *cfg)
{
	static const char *const keys[] = { "ip", "gateway", "prefix_len", "result_dscp",
		"idle_sleep_us", "idle_spin_us", "mac_age_s", "rate", "queue_kb", "impair", NULL };
	const struct num_field nums[] = {
		NUM("prefix_len", 1, 32, cfg->prefix_len),
		NUM("result_dscp", 0, 63, cfg->result_dscp),
		NUM("idle_sleep_us", 0, 1000000, cfg->idle_sleep_us),
		NUM("idle_spin_us", 0, 1000000, cfg->idle_spin_us),
		NUM("mac_age_s", 1, 86400, cfg->mac_age_s),
	};
	const char *where = NULL;
	json_t *d;
	int rc;

	if (!sw)
		return inca_json_bad(in, "missing (needs at least \"ip\")");
	if (inca_json_object(in, sw, keys) ||
	    inca_json_get_ipv4(in, sw, "ip", &cfg->switch_ip) ||
	    get_nums(in, sw, nums, sizeof(nums) / sizeof(nums[0])))
		return -EINVAL;
	/* routed placement: a gateway in the switch's subnet */
	if (json_object_get(sw, "gateway")) {
		uint32_t mask = ~0u << (32 - cfg->prefix_len);
		if (inca_json_get_ipv4(in, sw, "gateway", &cfg->gateway))
			return -EINVAL;
		if ((cfg->gateway ^ cfg->switch_ip) & mask || cfg->gateway == cfg->switch_ip)
			return inca_json_bad_at(in, "gateway", "not another address in the "
						"switch's subnet (ip and prefix_len, %u)",
						cfg->prefix_len);
	} else if (json_object_get(sw, "prefix_len")) {
		return inca_json_bad_at(in, "prefix_len", "only with a gateway");
	}
	if (AT_KEY(in, sw, "impair", !json_is_string(it) ||
		   dp_parse_impair(json_string_value(it), &cfg->impair, &where) ?
		   inca_json_bad(in, "expected netem-style \"loss 1%% duplicate 1%% reorder "
				 "5%%\"%s%s", where ? ", stuck at: " : "", where ? where : "") : 0))
		return -EINVAL;
	/* switch.rate / switch.queue_kb: defaults for every port */
	d = json_object();
	if (json_object_get(sw, "rate"))
		json_object_set(d, "rate", json_object_get(sw, "rate"));
	if (json_object_get(sw, "queue_kb"))
		json_object_set(d, "queue_kb", json_object_get(sw, "queue_kb"));
	rc = parse_port(in, d, &cfg->port_default);
	json_decref(d);
	cfg->port_default.set = false;
	return rc;
}

static int parse_ports(struct inca_json *in, json_t *v, struct dp_config *cfg)
{
	json_t *e;
	size_t i;

	if (!json_is_array(v))
		return inca_json_bad(in, "expected a list of {\"port\": N, \"rate\": ...}");
	json_array_foreach(v, i, e) {
		size_t mark = inca_json_enter(in, "[%zu]", i);
		uint32_t port;

		if (!json_is_object(e) || !json_object_get(e, "port"))
			return inca_json_bad_at(in, "port", "missing (the port's index, 0..%d)",
						DP_MAX_PORTS - 1);
		if (inca_json_get_u32(in, e, "port", 0, DP_MAX_PORTS - 1, &port))
			return -EINVAL;
		if (cfg->ports[port].set)
			return inca_json_bad_at(in, "port", "port %u is listed twice", port);
		cfg->ports[port] = cfg->port_default;
		if (parse_port(in, e, &cfg->ports[port]))
			return -EINVAL;
		inca_json_leave(in, mark);
	}
	return 0;
}

static int parse_groups(struct inca_json *in, json_t *v, struct dp_config *cfg)
{
	json_t *e;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) > DP_MAX_GROUPS)
		return inca_json_bad(in, "expected a list of at most %d groups", DP_MAX_GROUPS);
	cfg->groups = calloc(json_array_size(v) + 1, sizeof(*cfg->groups));
	if (!cfg->groups)
		return inca_json_bad(in, "out of memory");
	json_array_foreach(v, i, e) {
		struct agg_group_config *a = &cfg->groups[i].agg;
		size_t mark = inca_json_enter(in, "[%zu]", i);

		cfg->ngroups = (uint16_t)(i + 1);
		if (parse_group(in, e, &cfg->groups[i]))
			return -EINVAL;
		for (size_t k = 0; k < i; k++) {
			if (cfg->groups[k].agg.group_id == a->group_id)
				return inca_json_bad_at(in, "id", "group %u is defined twice",
							a->group_id);
			if (cfg->groups[k].agg.qpn == a->qpn)
				return inca_json_bad_at(in, "qpn", "QPN %u is already group %u's",
							a->qpn, cfg->groups[k].agg.group_id);
		}
		inca_json_leave(in, mark);
	}
	return 0;
}

static int config_parse(struct inca_json *in, json_t *root, struct dp_config *cfg)
{
	static const char *const keys[] = { "switch", "ports", "groups", "qos", NULL };

	if (inca_json_object(in, root, keys) ||
	    (inca_json_at(in, "switch"), parse_switch(in, json_object_get(root, "switch"), cfg)))
		return -EINVAL;
	inca_json_at(in, "%s", "");
	if (AT_KEY(in, root, "ports", parse_ports(in, it, cfg)) ||
	    AT_KEY(in, root, "qos", parse_qos(in, it, &cfg->qos)) ||
	    AT_KEY(in, root, "groups", parse_groups(in, it, cfg)))
		return -EINVAL;
	return 0;
}

int dp_config_load(struct dp_config *cfg, const char *path)
{
	struct inca_json in;
	json_error_t jerr;
	json_t *root;
	int rc;

	snprintf(cfg->path, sizeof(cfg->path), "%s", path);
	cfg->result_dscp = 26;
	cfg->prefix_len = 24;
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
	inca_json_init(&in, path);
	rc = config_parse(&in, root, cfg);
	json_decref(root);
	if (rc) {
		fprintf(stderr, "inca-switch: %s\n", in.msg);
		dp_config_free(cfg);
	}
	return rc;
}

int dp_config_parse_group(json_t *o, const char *origin, struct dp_group_cfg *g,
			  char *err, size_t errlen)
{
	struct inca_json in;
	int rc;

	memset(g, 0, sizeof(*g));
	inca_json_init(&in, origin);
	inca_json_at(&in, "group");
	rc = parse_group(&in, o, g);
	if (rc) {
		snprintf(err, errlen, "%s", in.msg);
		dp_group_cfg_free(g);
	}
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
