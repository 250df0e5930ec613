/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Communicators: the group description (hl_group.c reads it from a file or
 * the environment, hl_manager.c from the manager), choosing the transport,
 * the member's address and MTU, and tear-down.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "hl_priv.h"

#define HL_MIN_U32(a, b) ((uint32_t)(a) < (uint32_t)(b) ? (uint32_t)(a) : (uint32_t)(b))

static __thread char last_errmsg[256] = "no error";

const char *inca_last_errmsg(void)
{
	return last_errmsg;
}

__attribute__((format(printf, 2, 3)))
static int create_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_errmsg, sizeof(last_errmsg), fmt, ap);
	va_end(ap);
	HL_ERR("%s", last_errmsg);
	return err;
}

double hl_clock_us(struct inca_comm *c)
{
	struct timespec ts;

	(void)c;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int hl_cpus_allowed(int *only, bool *all)
{
	int n = 0;

	*only = -1;
	*all = true;
	/* a fixed cpu_set_t is refused (EINVAL) where the kernel allows more
	 * than 1024 CPUs: grow until it fits */
	for (int ncpu = 1024; ncpu <= 1 << 20; ncpu *= 2) {
		cpu_set_t *set = CPU_ALLOC(ncpu);
		size_t size = CPU_ALLOC_SIZE(ncpu);

		if (!set)
			return 0;
		CPU_ZERO_S(size, set);
		if (sched_getaffinity(0, size, set) == 0) {
			n = CPU_COUNT_S(size, set);
			for (int i = 0; n == 1 && i < ncpu; i++)
				if (CPU_ISSET_S(i, size, set))
					*only = i;
			CPU_FREE(set);
			break;
		}
		CPU_FREE(set);
		if (errno != EINVAL)
			return 0;
	}
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	*all = n == 0 || online < 1 || n >= online;
	return n;
}

int inca_init(void)
{
	hl_log(INCA_LOG_DEBUG, "libinca %d.%d", INCA_VERSION_MAJOR, INCA_VERSION_MINOR);
	return INCA_OK;
}

void inca_finalize(void)
{
}

static const char *env_or(const char *v, const char *name)
{
	return v ? v : getenv(name);
}

static unsigned env_uint(unsigned v, const char *name, unsigned def)
{
	uint64_t n;

	if (v)
		return v;
	if (!hl_parse_num(getenv(name), UINT32_MAX, &n) && n > 0)
		return (unsigned)n;
	return def;
}

/* s is one of names (case aside): *out its index, the enum's value. */
/* names: a NULL-terminated list */
static int parse_choice(const char *s, const char *const *names, int *out)
{
	for (int i = 0; names[i]; i++)
		if (!strcasecmp(s, names[i])) {
			*out = i;
			return 0;
		}
	return -1;
}

/* Undo what a transport's reserve made, for a communicator never opened. */
static void release_reserved(const struct hl_transport_ops *tp, void *tp_state)
{
	struct inca_comm tmp = { .tp_state = tp_state };

	if (tp_state)
		tp->close(&tmp);
}

/* IPv4, UDP, BTH, DETH and ICRC around an IB MTU's message */
#define IB_IP_OVERHEAD (AGG_IPV4_HLEN + AGG_UDP_HLEN + AGG_BTH_LEN + AGG_DETH_LEN + 4)

/* mtu "auto": the largest IB MTU whose packets fit the route's MTU toward
 * the switch (1500 -> 1024, 9000 -> 4096), within what the transport can
 * carry; 1024 when the route is unknown. */
static uint16_t path_ib_mtu(uint32_t my_ip, uint32_t switch_ip,
			    const struct hl_transport_ops *tp);

uint16_t hl_path_ib_mtu(const struct inca_comm *c, uint32_t switch_ip)
{
	return path_ib_mtu(c->my_ip, switch_ip, c->tp);
}

static uint16_t path_ib_mtu(uint32_t my_ip, uint32_t switch_ip,
			    const struct hl_transport_ops *tp)
{
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(my_ip) };
	struct sockaddr_in sw = { .sin_family = AF_INET, .sin_port = htons(AGG_ROCEV2_UDP_PORT),
				  .sin_addr.s_addr = htonl(switch_ip) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), mtu = 0;
	unsigned cap = tp->max_ib_mtu ? tp->max_ib_mtu : 4096, ib;
	socklen_t len = sizeof(mtu);

	if (fd < 0)
		return 1024;
	/* from our address if we have it (a unit test may not) */
	(void)bind(fd, (struct sockaddr *)&me, sizeof(me));
	if (connect(fd, (struct sockaddr *)&sw, sizeof(sw)) ||
	    getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len))
		mtu = 0;
	close(fd);
	if (mtu <= 0)
		return 1024;
	for (ib = 4096; ib > 256 && ib + IB_IP_OVERHEAD > (unsigned)mtu; ib /= 2)
		;
	if (ib > cap) {
		HL_INFO("mtu auto: the path's MTU %d carries IB MTU %u, the %s transport %u "
			"at most: IB MTU %u", mtu, ib, tp->name, cap, cap);
		ib = cap;
	}
	return (uint16_t)ib;
}

int hl_comm_create(const struct inca_comm_attr *attr, const struct hl_group_desc *g,
		   const struct hl_transport_ops *tp, void *tp_state, inca_comm_t **out)
{
	struct inca_comm *c = calloc(1, sizeof(*c));
	const char *s;
	int rc;

	if (!c) {
		release_reserved(tp, tp_state);
		return create_fail(INCA_ERR_NOMEM, "out of memory");
	}
	c->rank = attr->rank;
	c->size = attr->size;
	snprintf(c->job, sizeof(c->job), "%s", attr->job ? attr->job : "");
	c->g = *g;
	c->g.rails = NULL;        /* the hosts' layer's (hl_hier.c), not this group's */
	c->g.nrails = 0;
	c->g.members = calloc((size_t)g->nmembers, sizeof(*g->members));
	if (!c->g.members) {
		release_reserved(tp, tp_state);
		free(c);
		return create_fail(INCA_ERR_NOMEM, "out of memory");
	}
	memcpy(c->g.members, g->members, sizeof(*g->members) * (size_t)g->nmembers);
	c->my_ip = g->members[c->rank].ip;
	c->my_qpn = g->members[c->rank].qpn;
	c->member_index = (uint16_t)(g->member_index >= 0 ? g->member_index : c->rank);
	if (attr->local_ip && hl_parse_ip(attr->local_ip, &c->my_ip)) {
		release_reserved(tp, tp_state);
		hl_group_free(&c->g);
		free(c);
		return create_fail(INCA_ERR_INVAL, "local_ip: not an IPv4 address");
	}
	snprintf(c->ifname, sizeof(c->ifname), "%s", attr->ifname ? attr->ifname : "");
	c->tp = tp;
	/* on the host ring (the manager's plan) there is no path yet: frames
	 * sized for the largest, the MTU found when a tree comes */
	if (!c->g.ib_mtu)
		c->g.ib_mtu = g->ring ? (tp->max_ib_mtu ? tp->max_ib_mtu : 4096) :
			      path_ib_mtu(c->my_ip, c->g.switch_ip, tp);
	/* the ring's peers know each other by the job (the group may change
	 * with the manager's plans), else by the static group */
	c->ring_id = g->group_id;
	if (attr->manager_url && *attr->manager_url && c->job[0])
		c->ring_id = hl_fnv1a(c->job);
	c->fallback = attr->fallback;
	c->timeout_ms = attr->timeout_ms ? attr->timeout_ms : 30000;
	c->switch_timeout_ms = attr->switch_timeout_ms ? attr->switch_timeout_ms : 1000;
	c->dcqcn_on = attr->dcqcn >= 0;
	c->ring_listen_fd = c->ring_next_fd = c->ring_prev_fd = -1;
	c->now_us = hl_clock_us;
	c->next_seq = attr->epoch ? attr->epoch * HL_EPOCH_STRIDE : 1;
	hl_keep_init(c);
	hl_rto_init(&c->rto, attr->rto_min_us ? attr->rto_min_us : 1000,
		    (double)c->switch_timeout_ms * 1000 / 4);
	struct hl_dcqcn_params p;
	hl_dcqcn_params_default(&p, attr->line_rate_gbps > 0 ? attr->line_rate_gbps : 10);
	hl_dcqcn_init(&c->dcqcn, &p, c->now_us(c));
	c->line_bps = (attr->line_rate_gbps > 0 ? attr->line_rate_gbps : 10) * 1e9;
	c->pfc_prio = attr->pfc_priority > 0 ? (unsigned)attr->pfc_priority - 1 : 3;

	if (hl_stream_init(c)) {
		release_reserved(tp, tp_state);
		hl_group_free(&c->g);
		free(c);
		return create_fail(INCA_ERR_NOMEM, "out of memory");
	}
	c->tp_state = tp_state;
	if (c->fallback != INCA_FALLBACK_FORCE) {
		rc = tp->open(c);
		if (rc) {
			snprintf(last_errmsg, sizeof(last_errmsg), "%s transport: %.200s", tp->name,
				 c->errmsg);
			hl_stream_free(c);
			hl_group_free(&c->g);
			free(c);
			return rc;
		}
		/* a NIC honours PFC itself; the kernel paths need us to */
		if (attr->pfc >= 0 && tp->host_pfc) {
			rc = hl_pfc_open(c, attr->pfc > 0);
			if (rc) {
				snprintf(last_errmsg, sizeof(last_errmsg), "%.250s", c->errmsg);
				tp->close(c);
				hl_stream_free(c);
				hl_group_free(&c->g);
				free(c);
				return rc;
			}
		}
	}
	/* a static group's ranks listen on their ring port from the start:
	 * a peer that falls back connects, and a rank still waiting on the
	 * switch (hearing its WAITs) goes too (hl_coll.c, PEER_CHECK_US) */
	if (c->fallback == INCA_FALLBACK_AUTO && !(attr->manager_url && *attr->manager_url) &&
	    c->size > 1 && (rc = hl_ring_listen(c)))
		HL_INFO("rank %d: ring port %u: %s: listening from the first fallback on, a "
			"peer's fallback is seen at this rank's own switch timeout", c->rank,
			c->g.members[c->rank].ring_port, strerror(rc));
	s = c->fallback == INCA_FALLBACK_FORCE ? "ring only" :
	    c->fallback == INCA_FALLBACK_OFF ? "no fallback" : "ring fallback";
	if (g->ring)
		HL_INFO("rank %d/%d: on the host ring (the manager's plan), transport %s ready "
			"for a tree", c->rank, c->size, tp->name);
	else
	HL_INFO("rank %d/%d: group %u via switch %u.%u.%u.%u, transport %s, window %u, "
		"up to %u elements per packet (%u fp32 within IB MTU %u), %s, epoch %u",
		c->rank, c->size, g->group_id, g->switch_ip >> 24, (g->switch_ip >> 16) & 255,
		(g->switch_ip >> 8) & 255, g->switch_ip & 255, tp->name, g->window,
		g->elems_per_pkt,
		(unsigned)HL_MIN_U32(g->elems_per_pkt, (c->g.ib_mtu - AGG_INCA_HLEN) / 4),
		c->g.ib_mtu, s, attr->epoch);
	if (!attr->epoch && !(attr->manager_url && *attr->manager_url) &&
	    c->fallback != INCA_FALLBACK_FORCE && c->rank == 0)
		HL_WARN("group %u is static and this job has no epoch (INCA_EPOCH): if an "
			"earlier job on it ended on the same collectives, the switch can "
			"answer with that job's results; give each job its own epoch",
			g->group_id);
	*out = c;
	return INCA_OK;
}

/* The transport's endpoint made before registering with the manager, so
 * that the rank can tell it the QPN its NIC chose (verbs). */
static int reserve_endpoint(const struct inca_comm_attr *attr, const struct hl_transport_ops *tp,
			    void **state, uint32_t *qpn)
{
	struct inca_comm *pre = calloc(1, sizeof(*pre));
	char ip[16], err[256];
	int rc;

	if (!pre)
		return create_fail(INCA_ERR_NOMEM, "out of memory");
	if (hl_manager_address(attr, ip, err, sizeof(err)) || hl_parse_ip(ip, &pre->my_ip)) {
		free(pre);
		return create_fail(INCA_ERR_CONFIG, "%s", err);
	}
	pre->rank = attr->rank;
	pre->now_us = hl_clock_us;
	snprintf(pre->ifname, sizeof(pre->ifname), "%s", attr->ifname ? attr->ifname : "");
	rc = tp->reserve(pre);
	if (rc) {
		create_fail(rc, "%s transport: %.200s", tp->name, pre->errmsg);
		free(pre);
		return rc;
	}
	*state = pre->tp_state;
	*qpn = pre->my_qpn;
	free(pre);
	return INCA_OK;
}

uint32_t inca_epoch_new(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	uint32_t tick = (uint32_t)(((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000) / 4);
	return (tick ? tick : 1) * HL_EPOCH_STRIDE_INV;
}

int inca_comm_create(const struct inca_comm_attr *attr_in, inca_comm_t **out)
{
	struct inca_comm_attr attr = attr_in ? *attr_in : (struct inca_comm_attr){ 0 };
	struct hl_group_desc g;
	const struct hl_transport_ops *tp;
	char err[256] = "";
	uint64_t n;
	const char *s;
	int rc;

	if (!out)
		return create_fail(INCA_ERR_INVAL, "comm pointer is NULL");
	*out = NULL;
	inca_init();
	if (!attr_in || (attr.rank == 0 && attr.size == 0)) {
		if (hl_parse_num(getenv("INCA_RANK"), HL_MAX_RANKS - 1, &n))
			return create_fail(INCA_ERR_CONFIG, "INCA_RANK: expected the rank, got '%s'",
					   getenv("INCA_RANK") ? getenv("INCA_RANK") : "(unset)");
		attr.rank = (int)n;
		if (hl_parse_num(getenv("INCA_SIZE"), HL_MAX_RANKS, &n))
			return create_fail(INCA_ERR_CONFIG, "INCA_SIZE: expected the number of "
					   "ranks, got '%s'",
					   getenv("INCA_SIZE") ? getenv("INCA_SIZE") : "(unset)");
		attr.size = (int)n;
	}
	if (attr.size < 1 || attr.rank < 0 || attr.rank >= attr.size)
		return create_fail(INCA_ERR_INVAL, "rank %d and size %d: need 0 <= rank < size",
				   attr.rank, attr.size);
	attr.job = env_or(attr.job, "INCA_JOB");
	attr.transport = env_or(attr.transport, "INCA_TRANSPORT");
	attr.config_file = env_or(attr.config_file, "INCA_CONFIG");
	attr.manager_url = env_or(attr.manager_url, "INCA_MANAGER");
	attr.local_ip = env_or(attr.local_ip, "INCA_LOCAL_IP");
	attr.ifname = env_or(attr.ifname, "INCA_IFNAME");
	attr.timeout_ms = env_uint(attr.timeout_ms, "INCA_TIMEOUT_MS", 30000);
	attr.switch_timeout_ms = env_uint(attr.switch_timeout_ms, "INCA_SWITCH_TIMEOUT_MS", 1000);
	attr.rto_min_us = env_uint(attr.rto_min_us, "INCA_RTO_MIN_US", 1000);
	if (!attr.dcqcn && (s = getenv("INCA_DCQCN")))
		attr.dcqcn = strcmp(s, "0") && strcasecmp(s, "off") ? 1 : -1;
	if (!attr.pfc && (s = getenv("INCA_PFC")))
		attr.pfc = strcmp(s, "0") && strcasecmp(s, "off") ? 1 : -1;
	if (!attr.pfc_priority && (s = getenv("INCA_PFC_PRIORITY"))) {
		if (hl_parse_num(s, 7, &n))
			return create_fail(INCA_ERR_CONFIG, "INCA_PFC_PRIORITY: expected 0..7, "
					   "got '%s'", s);
		attr.pfc_priority = (int)n + 1;
	}
	if (attr.pfc_priority < 0 || attr.pfc_priority > 8)
		return create_fail(INCA_ERR_INVAL, "pfc_priority: expected 0 (default) or "
				   "priority + 1 (1..8), got %d", attr.pfc_priority);
	if (!attr.epoch && (s = getenv("INCA_EPOCH"))) {
		if (hl_parse_num(s, UINT32_MAX, &n))
			return create_fail(INCA_ERR_CONFIG, "INCA_EPOCH: expected 0..%u, got '%s'",
					   UINT32_MAX, s);
		attr.epoch = (uint32_t)n;
	}
	if (attr.line_rate_gbps <= 0 && (s = getenv("INCA_LINE_RATE_GBPS")))
		attr.line_rate_gbps = atof(s);
	static const char *const fallbacks[] = { "auto", "off", "force", NULL };
	static const char *const hiers[] = { "auto", "off", "leader", "rails", NULL };
	int choice;
	if (!attr.fallback && (s = getenv("INCA_FALLBACK"))) {
		if (parse_choice(s, fallbacks, &choice))
			return create_fail(INCA_ERR_CONFIG, "INCA_FALLBACK: expected auto, off "
					   "or force, got '%s'", s);
		attr.fallback = (inca_fallback_t)choice;
	}
	if (attr.fallback < INCA_FALLBACK_AUTO || attr.fallback > INCA_FALLBACK_FORCE)
		return create_fail(INCA_ERR_INVAL, "fallback: unknown policy %d", attr.fallback);

	if (!attr.hier && (s = getenv("INCA_HIER")) && *s) {
		if (parse_choice(s, hiers, &choice))
			return create_fail(INCA_ERR_CONFIG, "INCA_HIER: expected auto, off, "
					   "leader or rails, got '%s'", s);
		attr.hier = (inca_hier_t)choice;
	}
	if (attr.hier < INCA_HIER_AUTO || attr.hier > INCA_HIER_RAILS)
		return create_fail(INCA_ERR_INVAL, "hier: unknown mode %d", attr.hier);

	s = attr.transport ? attr.transport : "udp";
	if (!strcmp(s, "udp"))
		tp = &hl_udp_ops;
	else if (!strcmp(s, "xdp"))
		tp = &hl_xdp_ops;
	else if (!strcmp(s, "verbs"))
		tp = &hl_verbs_ops;
	else
		return create_fail(INCA_ERR_INVAL, "transport '%s': expected udp, xdp or verbs", s);

	bool managed = attr.manager_url && *attr.manager_url;
	if (!managed) {
		if (attr.config_file) {
			FILE *f = fopen(attr.config_file, "r");
			char *text;
			long len;

			if (!f)
				return create_fail(INCA_ERR_CONFIG, "%s: %s", attr.config_file,
						   strerror(errno));
			fseek(f, 0, SEEK_END);
			len = ftell(f);
			rewind(f);
			text = len >= 0 && len < (1 << 24) ? calloc(1, (size_t)len + 1) : NULL;
			if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) {
				fclose(f);
				free(text);
				return create_fail(INCA_ERR_CONFIG, "%s: cannot read",
						   attr.config_file);
			}
			fclose(f);
			rc = hl_group_from_json(text, attr.config_file, &g, err, sizeof(err));
			free(text);
		} else {
			rc = hl_group_from_env(&g, err, sizeof(err));
		}
		if (rc)
			return create_fail(INCA_ERR_CONFIG, "%s", err);
	}
	/* several ranks on a host: they reduce among themselves first, and
	 * their leader joins the network (hl_hier.c) */
	if (attr.hier != INCA_HIER_OFF) {
		struct hl_layout L;
		rc = hl_layout_resolve(&attr, managed ? NULL : &g, &L, err, sizeof(err));
		if (rc) {
			if (!managed)
				hl_group_free(&g);
			return create_fail(rc, "%s", err);
		}
		if (L.nhosts && L.maxp > 1) {
			rc = hl_hier_create(&attr, &L, managed ? NULL : &g, tp, out, err,
					    sizeof(err));
			return rc ? create_fail(rc, "%s", err) : INCA_OK;
		}
		hl_layout_free(&L);
	}
	return hl_comm_create_flat(&attr, tp, managed ? NULL : &g, out);
}

int hl_comm_create_flat(const struct inca_comm_attr *attr_in, const struct hl_transport_ops *tp,
			struct hl_group_desc *gs, inca_comm_t **out)
{
	return hl_comm_create_rail(attr_in, tp, gs, 0, 0, out);
}

int hl_comm_create_rail(const struct inca_comm_attr *attr_in, const struct hl_transport_ops *tp,
			struct hl_group_desc *gs, int rail, int nrails, inca_comm_t **out)
{
	struct inca_comm_attr attr = *attr_in;
	struct hl_group_desc g;
	char err[256] = "";
	int rc;

	*out = NULL;
	struct hl_manager *mgr = NULL;
	struct hl_plan_msg plan = { 0 };
	void *reserved = NULL;
	if (!gs) {
		uint32_t qpn = 0;
		if (tp->reserve && attr.fallback != INCA_FALLBACK_FORCE) {
			rc = reserve_endpoint(&attr, tp, &reserved, &qpn);
			if (rc)
				return rc;
		}
		rc = hl_manager_join(&attr, qpn, rail, nrails, &g, &plan, &mgr, err, sizeof(err));
		if (rc) {
			release_reserved(tp, reserved);
			return create_fail(rc, "%s", err);
		}
	} else {
		g = *gs;
		memset(gs, 0, sizeof(*gs));
	}
	if (g.nmembers != attr.size) {
		int have = g.nmembers;
		hl_group_free(&g);
		hl_manager_leave(mgr);
		release_reserved(tp, reserved);
		if (attr.hier == INCA_HIER_OFF && have < attr.size)
			return create_fail(INCA_ERR_CONFIG, "the group has %d members but size is "
					   "%d (a group of hosts needs INCA_HIER auto or leader)",
					   have, attr.size);
		return create_fail(INCA_ERR_CONFIG, "the group has %d members but size is %d",
				   have, attr.size);
	}
	rc = hl_comm_create(&attr, &g, tp, reserved, out);
	hl_group_free(&g);
	if (rc) {
		hl_manager_leave(mgr);
		return rc;
	}
	(*out)->mgr = mgr;
	/* with a manager, its plan: where the collectives run, and when that
	 * changes, for every rank at the same collective */
	if (mgr && (rc = hl_plan_start(*out, &plan))) {
		create_fail(rc, "%s", (*out)->errmsg);
		inca_comm_destroy(*out);
		*out = NULL;
	}
	return rc;
}

void inca_comm_destroy(inca_comm_t *c)
{
	if (!c)
		return;
	if (c->hier) {
		hl_hier_destroy(c);
		free(c);
		return;
	}
	hl_plan_stop(c);
	hl_stream_free(c);
	hl_keep_free(c);
	if (c->tp && c->fallback != INCA_FALLBACK_FORCE)
		c->tp->close(c);
	hl_pfc_close(c);
	hl_ring_close(c);
	hl_manager_leave(c->mgr);
	hl_group_free(&c->g);
	free(c);
}

int inca_comm_rank(const inca_comm_t *c)
{
	return c ? c->rank : INCA_ERR_INVAL;
}

int inca_comm_size(const inca_comm_t *c)
{
	return c ? c->size : INCA_ERR_INVAL;
}

const char *inca_comm_transport(const inca_comm_t *c)
{
	if (c && c->hier)
		return hl_hier_transport(c);
	return c && c->tp ? c->tp->name : "none";
}

const char *inca_comm_errmsg(const inca_comm_t *c)
{
	return c && c->errmsg[0] ? c->errmsg : "no error";
}

int inca_comm_stats(const inca_comm_t *c, struct inca_stats *st)
{
	if (!c || !st)
		return INCA_ERR_INVAL;
	if (c->hier) {
		hl_hier_stats(c, st);
		return INCA_OK;
	}
	*st = c->stats;
	st->cnps = c->dcqcn.cnps;
	st->rate_gbps = hl_dcqcn_gbps(&c->dcqcn);
	st->rto_us = c->rto.rto;
	st->kept_inputs = c->keep.n;
	st->kept_bytes = c->keep.bytes;
	return INCA_OK;
}
