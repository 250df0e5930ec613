/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libinca's manager client (INCA_MANAGER): a rank registers (job, rank,
 * size, its address; its QPN when its NIC chose it (verbs) or INCA_QPN asks
 * for one, its ring port if INCA_RING_PORT does, else the manager picks
 * ones free on the address), waits until the manager has built the tree and
 * programmed the switches, or put the job on the host ring (a long-poll:
 * the manager answers when the job is ready or on the ring), and gets its
 * first plan and group description (the same JSON as a static INCA_CONFIG
 * file). hl_plan.c's thread then follows the plan: it long-polls for new
 * ones (held by the manager until the plan changes, which also renews the
 * job's lease: nothing else need be sent while a job runs), acknowledges
 * them and reports a tree that stopped answering, all on one kept
 * connection (m->poller) that hl_manager_interrupt can cut short; destroy
 * says the rank left. Join and leave make a connection of their own.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "inca_http.h"

#include "hl_priv.h"

struct hl_manager {
	char url[512];
	char job[64];
	char token[256];
	int rank;
	long poll_ms;                /* how long a plan poll may be held */
	struct inca_http_client *poller;   /* the plan thread's connection */
};

/* The manager holds a plan poll up to this (its maximum is 30 s), and at
 * most a third of the job's lease, which each poll renews. */
#define POLL_MS_MAX 20000

/* One request to the manager, which may hold it up to wait_ms: the HTTP
 * status (-1: unreachable), the answer in *out. */
static int call(struct hl_manager *m, const char *method, const char *path,
		const char *body, long wait_ms, json_t **out, char *err, size_t errlen)
{
	char full[800];

	snprintf(full, sizeof(full), "%s%s", m->url, path);
	return inca_http(method, full, m->token, body, 3000 + wait_ms, out, NULL, err, errlen);
}

/* The same on the plan thread's kept connection. */
static int poller_call(struct hl_manager *m, const char *method, const char *path,
		       const char *body, long wait_ms, json_t **out, char *err, size_t errlen)
{
	char full[800];

	snprintf(full, sizeof(full), "%s%s", m->url, path);
	return inca_http_call(m->poller, method, full, m->token, body, 3000 + wait_ms, out, NULL,
			      err, errlen);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int hl_manager_address(const struct inca_comm_attr *attr, char ip[16], char *err, size_t errlen)
{
	struct ifaddrs *ifa, *i;

	if (attr->local_ip) {
		snprintf(ip, 16, "%s", attr->local_ip);
		return 0;
	}
	if (!attr->ifname) {
		snprintf(err, errlen, "with INCA_MANAGER, set INCA_LOCAL_IP (the rank's address "
			 "on the fabric) or INCA_IFNAME (its interface)");
		return -1;
	}
	if (getifaddrs(&ifa)) {
		snprintf(err, errlen, "getifaddrs failed");
		return -1;
	}
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    !strcmp(i->ifa_name, attr->ifname)) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, 16);
			freeifaddrs(ifa);
			return 0;
		}
	freeifaddrs(ifa);
	snprintf(err, errlen, "INCA_IFNAME=%s has no IPv4 address", attr->ifname);
	return -1;
}

int hl_manager_join(const struct inca_comm_attr *attr, uint32_t qpn, int rail, int nrails,
		    struct hl_group_desc *g, struct hl_plan_msg *plan, struct hl_manager **out,
		    char *err, size_t errlen)
{
	struct hl_manager *m = calloc(1, sizeof(*m));
	const char *token = getenv("INCA_MANAGER_TOKEN"), *s;
	char ip[16], tokbuf[256], path[160], *body;
	char terr[300];
	unsigned timeout_ms = attr->timeout_ms ? attr->timeout_ms : 30000;
	json_t *req, *resp = NULL;
	int status, rc = INCA_ERR_MANAGER;
	double t_join = now_us();

	*out = NULL;
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return INCA_ERR_NOMEM;
	}
	if (!attr->job || !*attr->job) {
		snprintf(err, errlen, "INCA_MANAGER needs a job id (INCA_JOB), the same in every rank");
		free(m);
		return INCA_ERR_CONFIG;
	}
	if ((s = getenv("INCA_MANAGER_TOKEN_FILE"))) {
		if (inca_read_token_file(s, tokbuf, sizeof(tokbuf), terr, sizeof(terr))) {
			snprintf(err, errlen, "INCA_MANAGER_TOKEN_FILE=%s", terr);
			free(m);
			return INCA_ERR_CONFIG;
		}
		token = tokbuf;
	}
	if (!token || !*token) {
		snprintf(err, errlen, "INCA_MANAGER needs the tenant's token: INCA_MANAGER_TOKEN "
			 "or INCA_MANAGER_TOKEN_FILE");
		free(m);
		return INCA_ERR_CONFIG;
	}
	if (hl_manager_address(attr, ip, err, errlen)) {
		free(m);
		return INCA_ERR_CONFIG;
	}
	snprintf(m->url, sizeof(m->url), "%s", attr->manager_url);
	snprintf(m->job, sizeof(m->job), "%s", attr->job);
	snprintf(m->token, sizeof(m->token), "%s", token);
	m->rank = attr->rank;
	curl_global_init(CURL_GLOBAL_DEFAULT);

	req = json_pack("{s:i, s:i, s:s}", "rank", attr->rank, "size", attr->size, "ip", ip);
	/* unique on this address: the NIC's or the manager's choice unless
	 * asked for */
	if (qpn)
		json_object_set_new(req, "qpn", json_integer((json_int_t)qpn));
	else if ((s = getenv("INCA_QPN")))
		json_object_set_new(req, "qpn", json_integer((json_int_t)strtoul(s, NULL, 0)));
	if ((s = getenv("INCA_RING_PORT")))
		json_object_set_new(req, "ring_port", json_integer(atoi(s)));
	if ((s = getenv("INCA_RING_IP")))
		json_object_set_new(req, "ring_ip", json_string(s));
	if ((s = getenv("INCA_WINDOW")))
		json_object_set_new(req, "window", json_integer(atoi(s)));
	if ((s = getenv("INCA_ELEMS")))
		json_object_set_new(req, "elems_per_pkt", json_integer(atoi(s)));
	if ((s = getenv("INCA_MTU")) && atoi(s) > 0)   /* "auto": the manager's default */
		json_object_set_new(req, "mtu", json_integer(atoi(s)));
	if (nrails > 1) {
		json_object_set_new(req, "rails", json_integer(nrails));
		json_object_set_new(req, "rail", json_integer(rail));
	}
	body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	snprintf(path, sizeof(path), "/v1/jobs/%s/ranks", m->job);
	status = call(m, "POST", path, body, 0, &resp, err, errlen);
	free(body);
	if (status != 200)
		goto fail;
	/* each plan poll renews the lease: poll at least three times a lease */
	double lease_s = json_number_value(json_object_get(resp, "lease_s"));
	m->poll_ms = lease_s > 0 && lease_s * 1000 / 3 < POLL_MS_MAX ?
		     (long)(lease_s * 1000 / 3) : POLL_MS_MAX;
	if (m->poll_ms < 100)
		m->poll_ms = 100;
	json_decref(resp);
	resp = NULL;
	if (!(m->poller = inca_http_client_new())) {
		snprintf(err, errlen, "libcurl: cannot start");
		goto fail;
	}

	/* wait for the tree and the switches, or the host ring: the manager
	 * holds the request until the job is ready or on the ring (one that
	 * does not is polled) */
	double deadline = now_us() + timeout_ms * 1000.0;
	for (;;) {
		double t0 = now_us(), left_ms = (deadline - t0) / 1000.0;
		long wait_ms = left_ms > 1000 ? 1000 : left_ms > 0 ? (long)left_ms : 0;
		/* members=ring: itself and the next rank, all the host ring
		 * needs (the whole list would make a job's joins O(ranks^2)) */
		snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%d?wait_ms=%ld&members=ring",
			 m->job, attr->rank, wait_ms);
		status = call(m, "GET", path, NULL, wait_ms, &resp, err, errlen);
		if (status != 200)
			goto fail;
		const char *state = json_string_value(json_object_get(resp, "state"));
		if (state && (!strcmp(state, "ready") || !strcmp(state, "ring")))
			break;
		if (state && !strcmp(state, "failed")) {
			snprintf(err, errlen, "manager: job %s failed: %s", m->job,
				 json_string_value(json_object_get(resp, "reason")) ?: "?");
			goto fail;
		}
		json_decref(resp);
		resp = NULL;
		if (now_us() > deadline) {
			snprintf(err, errlen, "manager: job %s not ready after %u ms (state %s): "
				 "are all %d ranks registering?", m->job, timeout_ms,
				 state ? state : "?", attr->size);
			rc = INCA_ERR_TIMEOUT;
			goto fail;
		}
		if (now_us() - t0 < 5000)
			usleep(10000);
	}
	if (hl_manager_plan_parse(m, resp, plan, err, errlen)) {
		rc = INCA_ERR_MANAGER;
		goto fail;
	}
	*g = plan->g;                 /* the caller owns it now */
	plan->have_group = false;
	memset(&plan->g, 0, sizeof(plan->g));
	json_decref(resp);
	HL_INFO("rank %d: joined job %s in %.1f ms (plan %u: %s)", attr->rank, m->job,
		(now_us() - t_join) / 1e3, plan->epoch, plan->ring ? "host ring" : "tree");
	*out = m;
	return INCA_OK;
fail:
	json_decref(resp);
	inca_http_client_free(m->poller);
	curl_global_cleanup();
	free(m);
	return rc;
}

int hl_manager_plan_parse(struct hl_manager *m, json_t *resp, struct hl_plan_msg *pm,
			  char *err, size_t errlen)
{
	json_t *p = json_object_get(resp, "plan"), *cut, *g;
	const char *mode = json_string_value(json_object_get(p, "mode"));

	memset(pm, 0, sizeof(*pm));
	if (!json_is_object(p) || !mode) {
		snprintf(err, errlen, "manager: job %s: the answer has no plan (a manager older "
			 "than this libinca?)", m->job);
		return -1;
	}
	pm->epoch = (uint32_t)json_integer_value(json_object_get(p, "epoch"));
	pm->version = (uint32_t)json_integer_value(json_object_get(p, "version"));
	pm->ring = !strcmp(mode, "ring");
	pm->dead = json_is_true(json_object_get(p, "dead"));
	pm->ready = json_is_true(json_object_get(p, "ready"));
	pm->replaced = json_is_true(json_object_get(p, "replaced"));
	if ((cut = json_object_get(p, "cut"))) {
		pm->cut = true;
		pm->cut_seq = (uint32_t)json_integer_value(json_object_get(cut, "seq"));
		pm->cut_from = (uint32_t)json_integer_value(json_object_get(cut, "from"));
	}
	snprintf(pm->error, sizeof(pm->error), "%s",
		 json_string_value(json_object_get(p, "error")) ?: "");
	snprintf(pm->reason, sizeof(pm->reason), "%s",
		 json_string_value(json_object_get(resp, "reason")) ?: "");
	if ((g = json_object_get(resp, "group"))) {
		char *desc = json_dumps(g, JSON_COMPACT);
		char origin[128];
		snprintf(origin, sizeof(origin), "manager's group for job %s rank %d", m->job,
			 m->rank);
		if (!desc || hl_group_from_json(desc, origin, &pm->g, err, errlen)) {
			free(desc);
			return -1;
		}
		free(desc);
		pm->have_group = true;
	}
	return 0;
}

int hl_manager_poll(struct hl_manager *m, uint32_t version, struct hl_plan_msg *pm,
		    char *err, size_t errlen)
{
	char path[200];
	json_t *resp = NULL;
	int status, rc;

	snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%d?plan_ver=%u&wait_ms=%ld&members=0",
		 m->job, m->rank, version, m->poll_ms);
	status = poller_call(m, "GET", path, NULL, m->poll_ms, &resp, err, errlen);
	if (status != 200) {
		json_decref(resp);
		return status == 404 ? INCA_ERR_PEER : INCA_ERR_MANAGER;
	}
	rc = hl_manager_plan_parse(m, resp, pm, err, errlen) ? INCA_ERR_MANAGER : 0;
	json_decref(resp);
	return rc;
}

int hl_manager_ack(struct hl_manager *m, uint32_t epoch, uint32_t next, uint32_t first,
		   uint32_t keep, char *err, size_t errlen)
{
	char path[160], body[160];
	json_t *resp = NULL;
	int status;

	snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%d/ack", m->job, m->rank);
	snprintf(body, sizeof(body), "{\"plan\": %u, \"next\": %u, \"first\": %u, \"keep\": %u}",
		 epoch, next, first, keep);
	status = poller_call(m, "POST", path, body, 0, &resp, err, errlen);
	json_decref(resp);
	return status == 200 ? 0 : status == 409 ? INCA_ERR_BUSY : INCA_ERR_MANAGER;
}

int hl_manager_stall(struct hl_manager *m, uint32_t epoch, unsigned ms)
{
	char path[160], body[96], err[256];
	json_t *resp = NULL;
	int status;

	snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%d/stall", m->job, m->rank);
	snprintf(body, sizeof(body), "{\"plan\": %u, \"ms\": %u}", epoch, ms);
	status = poller_call(m, "POST", path, body, 0, &resp, err, sizeof(err));
	json_decref(resp);
	if (status == 200 || (status >= 400 && status < 500))
		return 0;       /* told, or refused for good (logged by the caller) */
	HL_WARN("rank %d: telling the manager the tree stopped answering: %s (retrying)",
		m->rank, err);
	return INCA_ERR_MANAGER;
}

void hl_manager_interrupt(struct hl_manager *m)
{
	inca_http_client_interrupt(m->poller);
}

void hl_manager_leave(struct hl_manager *m)
{
	char path[160], err[256];
	json_t *resp = NULL;

	if (!m)
		return;
	snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%d/leave", m->job, m->rank);
	if (call(m, "POST", path, "{}", 0, &resp, err, sizeof(err)) != 200)
		HL_DEBUG("rank %d: leaving: %s", m->rank, err);
	json_decref(resp);
	inca_http_client_free(m->poller);
	curl_global_cleanup();
	free(m);
}
