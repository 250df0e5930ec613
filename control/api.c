/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The HTTP API as a function of (method, path, token, body): the token
 * names the admin or a tenant, the body is parsed once, the query's
 * wait_ms is read, and the path is looked up in one table of routes
 * (method, pattern, handler). docs/manager.md lists the routes.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"

int mgr_reply(struct mgr_req *q, int status, json_t *j)
{
	*q->resp = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
	*q->ctype = "application/json";
	json_decref(j);
	if (status >= 400)
		q->m->requests_refused++;
	return status;
}

int mgr_error(struct mgr_req *q, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* the message may quote what the client sent (a path, a field):
	 * JSON strings are UTF-8, so anything else is shown as '?' rather
	 * than making the answer empty */
	for (char *c = msg; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			*c = '?';
	return mgr_reply(q, status, json_pack("{s:s, s:i}", "error", msg, "status", status));
}

bool mgr_hold(struct mgr_req *q, struct mgr_job *j, int sw, uint32_t applied,
	      long long plan_ver, long wait_ms)
{
	struct mgr_parked *p = q->park;

	if (!p || p->resumed || wait_ms <= 0 || q->m->stopping)
		return false;
	p->job = j;
	p->sw = sw;
	p->applied = applied;
	p->plan_ver = plan_ver;
	if (j)
		mgr_job_check_ready(q->m, j);
	if (mgr_parked_done(q->m, p))
		return false;
	mgr_park(q->m, p, wait_ms);
	return true;
}

bool mgr_may_touch(const struct mgr_req *q, const struct mgr_job *j)
{
	return q->tenant < 0 || q->tenant == j->tenant;
}

/* What a pattern's {name}, {id} and {rank} matched. */


struct route {
	const char *method;
	const char *pattern;   /* segments: literal, {name}, {id} or {rank} */
	mgr_handler *handler;
	bool job;              /* {id} must be a job the token may touch */
};

static int healthz(struct mgr_req *q, const struct mgr_route_args *a)
{
	(void)a;
	return mgr_reply(q, 200, json_pack("{s:s}", "status", "ok"));
}

static const struct route routes[] = {
	{ "GET",    "/metrics",                         mgr_api_metrics },
	{ "GET",    "/v1/topology",                     mgr_api_topology },
	{ "GET",    "/v1/switches",                     mgr_api_switches },
	{ "POST",   "/v1/switches/{name}/heartbeat",    mgr_api_heartbeat },
	{ "GET",    "/v1/jobs",                         mgr_api_jobs },
	{ "GET",    "/v1/failures",                     mgr_api_failures },
	{ "GET",    "/v1/groups",                       mgr_api_groups },
	{ "POST",   "/v1/jobs/{id}/ranks",              mgr_api_register },
	{ "GET",    "/v1/jobs/{id}",                    mgr_api_job_show, true },
	{ "DELETE", "/v1/jobs/{id}",                    mgr_api_job_delete, true },
	{ "POST",   "/v1/jobs/{id}/renew",              mgr_api_job_renew, true },
	{ "GET",    "/v1/jobs/{id}/ranks/{rank}",       mgr_api_rank, true },
	{ "POST",   "/v1/jobs/{id}/ranks/{rank}/leave", mgr_api_rank_leave, true },
	{ "POST",   "/v1/jobs/{id}/ranks/{rank}/ack",   mgr_api_rank_ack, true },
	{ "POST",   "/v1/jobs/{id}/ranks/{rank}/stall", mgr_api_rank_stall, true },
};

/* Copy one path segment (up to '/' or the end) of at most max bytes;
 * returns its length, or -1 if longer. */
static int segment(const char *p, char *out, size_t max)
{
	size_t n = strcspn(p, "/");

	if (n > max)
		return -1;
	memcpy(out, p, n);
	out[n] = '\0';
	return (int)n;
}

/* Does path match pattern? Fills a's captures. */
static bool route_match(const char *pattern, const char *path, struct mgr_route_args *a)
{
	const char *p = pattern, *s = path;

	while (*p) {
		if (*p == '{') {
			const char *end = strchr(p, '}');
			size_t len = (size_t)(end - p) + 1;
			char seg[MGR_NAME_LEN + 1];
			int n;

			if (!strncmp(p, "{name}", len))
				n = segment(s, a->name, MGR_NAME_LEN);
			else if (!strncmp(p, "{id}", len))
				n = segment(s, a->id, MGR_NAME_LEN);
			else
				n = segment(s, seg, 10);
			if (n <= 0)
				return false;
			if (!strncmp(p, "{rank}", len)) {
				char *e;
				unsigned long r;

				errno = 0;
				r = strtoul(seg, &e, 10);
				if (errno || *e || seg[0] < '0' || seg[0] > '9' || r > UINT32_MAX)
					return false;
				a->rank = (unsigned)r;
			}
			p += len;
			s += n;
		} else {
			if (*p != *s)
				return false;
			p++;
			s++;
		}
	}
	return !*s;
}

/* Who the token is: -1 the admin, a tenant's index, or -2 nobody. The
 * digests are compared in constant time: neither the secrets nor how much
 * of one a guess got right are ever at hand. */
static int token_tenant(struct mgr *m, const char *token)
{
	if (mgr_token_matches(token, m->admin_hash))
		return -1;
	for (int t = 0; t < m->topo.ntenants; t++)
		if (mgr_token_matches(token, m->topo.tenants[t].token_hash))
			return t;
	return -2;
}

/* Split "?wait_ms=N&plan_ver=V&members=M" off path into pbuf. 0, or an
 * HTTP status. */
static int read_query(struct mgr_req *q, const char **path, char *pbuf, size_t size)
{
	const char *query = strchr(*path, '?');
	size_t len;

	if (!query)
		return 0;
	len = (size_t)(query - *path);
	if (len >= size)
		return mgr_error(q, 404, "no such resource: path too long");
	memcpy(pbuf, *path, len);
	pbuf[len] = 0;
	*path = pbuf;
	/* the query: wait_ms (a rank's state request and a heartbeat may be
	 * held), plan_ver (a rank's: held until the plan moves on from it),
	 * members=all|ring|0 (a rank's: which members its group lists,
	 * mgr_members) */
	for (const char *p = query + 1; *p; p += strcspn(p, "&"), p += *p == '&') {
		char *end;

		if (!strncmp(p, "plan_ver=", 9)) {
			errno = 0;
			unsigned long v = strtoul(p + 9, &end, 10);
			if (errno || end == p + 9 || (*end && *end != '&') || v > UINT32_MAX)
				return mgr_error(q, 400, "plan_ver: expected a version number");
			q->plan_ver = (long long)v;
			continue;
		}
		if (!strncmp(p, "members=", 8)) {
			size_t n = strcspn(p + 8, "&");
			if (n == 1 && p[8] == '0')
				q->members = MGR_MEMBERS_NONE;
			else if (n == 4 && !strncmp(p + 8, "ring", 4))
				q->members = MGR_MEMBERS_RING;
			else if (n != 3 || strncmp(p + 8, "all", 3))
				return mgr_error(q, 400, "members: expected all, ring or 0");
			continue;
		}
		if (strncmp(p, "wait_ms=", 8))
			continue;
		errno = 0;
		q->wait_ms = strtol(p + 8, &end, 10);
		if (errno || end == p + 8 || (*end && *end != '&') || q->wait_ms < 0 ||
		    q->wait_ms > MGR_WAIT_MS_MAX)
			return mgr_error(q, 400, "wait_ms: expected 0..%d milliseconds",
					 MGR_WAIT_MS_MAX);
	}
	return 0;
}

static int dispatch(struct mgr_req *q, const char *method, const char *path)
{
	struct mgr_route_args a = { .job = NULL };
	const struct route *found = NULL;

	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]) && !found; i++)
		if (route_match(routes[i].pattern, path, &a) &&
		    (!strcmp(routes[i].method, method) || routes[i].job))
			found = &routes[i];
	/* a job's routes: the job first (404, 403), then the method */
	if (found && found->job) {
		a.job = mgr_job_find(q->m, a.id);
		if (!a.job && q->park && q->park->resumed)
			return mgr_error(q, 404, "job %s was deleted while the request waited", a.id);
		if (!a.job)
			return mgr_error(q, 404, "no job '%s'", a.id);
		if (!mgr_may_touch(q, a.job))
			return mgr_error(q, 403, "job %s belongs to tenant %s", a.id,
					 q->m->topo.tenants[a.job->tenant].name);
		found = NULL;
		for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]) && !found; i++)
			if (!strcmp(routes[i].method, method) &&
			    route_match(routes[i].pattern, path, &a))
				found = &routes[i];
		if (found && strstr(found->pattern, "{rank}") && (int)a.rank >= a.job->size)
			found = NULL;
	}
	if (!found)
		return mgr_error(q, 404, "no such resource: %s %s", method, path);
	return found->handler(q, &a);
}

int mgr_api_request(struct mgr *m, const char *method, const char *path, const char *token,
		    const char *body, struct mgr_parked *park, char **resp, const char **ctype)
{
	struct mgr_req q = { .m = m, .tenant = -2, .resp = resp, .ctype = ctype, .plan_ver = -1,
			     .park = park };
	char pbuf[256];
	json_error_t jerr;
	struct timespec t0, t1;
	int status;

	*resp = NULL;
	pthread_mutex_lock(&m->lock);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!park || !park->resumed)
		m->requests++;
	if (!strcmp(path, "/healthz")) {
		status = healthz(&q, NULL);
		goto out;
	}
	if (!token || !*token) {
		status = mgr_error(&q, 401, "missing bearer token (Authorization: Bearer TOKEN)");
		goto out;
	}
	q.tenant = token_tenant(m, token);
	if (q.tenant == -2) {
		status = mgr_error(&q, 401, "invalid token");
		goto out;
	}
	if (body && *body) {
		q.body = json_loads(body, JSON_REJECT_DUPLICATES, &jerr);
		if (!q.body) {
			status = mgr_error(&q, 400, "body: line %d column %d: %s", jerr.line,
					   jerr.column, jerr.text);
			goto out;
		}
	}
	status = read_query(&q, &path, pbuf, sizeof(pbuf));
	if (!status)
		status = dispatch(&q, method, path);
out:
	json_decref(q.body);
	/* what this request changed wakes what waits on it */
	if (m->wakeups != m->swept)
		mgr_wake_due(m);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	m->busy_s += (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	pthread_mutex_unlock(&m->lock);
	return status;
}

/* mgr_api's own parking: the calling thread waits on m->changed */
static void sync_wake(struct mgr_parked *p)
{
	struct mgr *m = p->owner;

	pthread_cond_broadcast(&m->changed);
}

int mgr_api(struct mgr *m, const char *method, const char *path, const char *token,
	    const char *body, char **resp, const char **ctype)
{
	struct mgr_parked park = { .wake = sync_wake, .owner = m };
	struct timespec until;
	int status = mgr_api_request(m, method, path, token, body, &park, resp, ctype);

	if (status != MGR_PARKED)
		return status;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += park.wait_ms / 1000;
	until.tv_nsec += (park.wait_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&m->lock);
	while (park.parked)
		if (pthread_cond_timedwait(&m->changed, &m->lock, &until) == ETIMEDOUT) {
			mgr_unpark(m, &park, true);
			break;
		}
	pthread_mutex_unlock(&m->lock);
	park.resumed = true;
	return mgr_api_request(m, method, path, token, body, &park, resp, ctype);
}
