/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-bench-manager: many ranks and switch agents against a running
 * inca-manager, over plain HTTP/1.1 keep-alive (docs/manager.md, "API" and
 * "Plans"), from a few processes with one epoll loop each; reports how long
 * jobs take to get ready, what the manager costs (CPU, memory, threads,
 * descriptors, requests) while every rank holds its plan poll, and how a
 * dead spine moves every job on it to a new plan. The phases:
 *   a) every switch heartbeats;  b) every rank registers and gets ready;
 *   c) idle, every poll held;    d) the root spine of the largest job stops.
 * tests/bench/run-manager-scale.sh makes the fabric, starts the manager and
 * runs this.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "inca_http.h"

#define BM_MAX_PROCS      32
#define BM_CONNECTING_MAX 128    /* connects in flight a process: the listen backlog is 4096 */
#define BM_RETRY_S        0.2    /* after an unexpected answer, one retry per 200 ms at most */
#define BM_WAIT_MS        20000  /* what a held request asks for */
#define BM_ERR_KINDS      32
#define BM_MAX_BODY       (256u << 20)

/* ---- the settings (parsed before fork, read-only after) ---- */

struct bm_job {
	char id[32];
	uint32_t size;
};

static struct {
	char url[128], host_hdr[80], admin[256], tenant[256];
	struct sockaddr_in addr;
	struct bm_job *jobs;
	int njobs;
	uint32_t nranks;
	int hosts_per_leaf, leaves, spines, procs;
	double idle_s, time_limit, start, deadline;
	pid_t mgr_pid;
} cfg = { .hosts_per_leaf = 32, .spines = 16, .procs = 4, .idle_s = 5, .time_limit = 240 };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- what the processes tell each other ---- */

enum bm_what { W_REGISTER, W_STATE, W_POLL, W_ACK, W_HEARTBEAT, W_NWHAT };
static const char *const what_name[W_NWHAT] = {
	"POST /v1/jobs/J/ranks", "GET /v1/jobs/J/ranks/R (ready)",
	"GET /v1/jobs/J/ranks/R (plan)", "POST /v1/jobs/J/ranks/R/ack",
	"POST /v1/switches/S/heartbeat",
};
/* what went wrong besides an HTTP status */
enum { ST_CONNECT = -1, ST_CLOSED = -2, ST_PROTO = -3, ST_JSON = -4, ST_STATE = -5,
       ST_STRAY = -6 };

struct bm_err {
	int8_t what;
	int16_t status;
	uint32_t count;
	char sample[120];
};

struct bm_final {
	uint64_t requests, connects, idle_closes;
	double hb_max_s, hb_max_at;     /* the longest heartbeat (sent -> answered), when */
	char hb_max_switch[24];
	uint32_t nerr, err_overflow;
	struct bm_err err[BM_ERR_KINDS];
};

/* one job as one process saw its ranks (merged by the parent) */
struct bm_job_stat {
	double reg_last, ready_last, epoch_first, epoch_last, cut_last;
	uint32_t ranks, ready, ring, moved, cut, new_ring;
};

static int write_full(int fd, const void *p, size_t n)
{
	const char *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_full(int fd, void *p, size_t n)
{
	char *b = p;

	while (n) {
		ssize_t r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r ? -errno : -EPIPE;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* ---- an answer's top-level keys, read as the bytes stream past ---- */

/* A rank's answer carries its group with every member of its job, a
 * switch's every member of every group it holds: only these are kept. */
struct bm_vals {
	char plan[512], error[120], state[24], version[24];
};
static const struct {
	const char *key;
	size_t off, size;
} scan_keys[] = {
	{ "plan", offsetof(struct bm_vals, plan), sizeof(((struct bm_vals *)0)->plan) },
	{ "error", offsetof(struct bm_vals, error), sizeof(((struct bm_vals *)0)->error) },
	{ "state", offsetof(struct bm_vals, state), sizeof(((struct bm_vals *)0)->state) },
	{ "version", offsetof(struct bm_vals, version), sizeof(((struct bm_vals *)0)->version) },
};

struct bm_scan {
	int depth, cur;             /* cur: the scan_keys index being kept, or -1 */
	bool in_str, esc, in_key, want_key, trunc;
	unsigned klen;
	size_t vlen;
	char key[16];
	struct bm_vals v;
};

static void scan_reset(struct bm_scan *s)
{
	memset(s, 0, sizeof(*s));
	s->cur = -1;
}

static void scan_put(struct bm_scan *s, char c)
{
	if (s->cur < 0 || (!s->vlen && (c == ' ' || c == '\n' || c == '\r' || c == '\t')))
		return;
	if (s->vlen + 1 < scan_keys[s->cur].size)
		((char *)&s->v + scan_keys[s->cur].off)[s->vlen++] = c;
	else
		s->trunc = true;
}

/* the value without the blanks around it */
static void scan_value_end(struct bm_scan *s)
{
	char *v = (char *)&s->v + (s->cur >= 0 ? scan_keys[s->cur].off : 0);

	while (s->cur >= 0 && s->vlen && strchr(" \n\r\t", v[s->vlen - 1]))
		s->vlen--;
	if (s->cur >= 0)
		v[s->vlen] = 0;
	s->cur = -1;
}

static void scan_feed(struct bm_scan *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		if (s->in_str) {
			bool end = false;
			if (s->esc)
				s->esc = false;
			else if (c == '\\')
				s->esc = true;
			else if (c == '"')
				end = true;
			if (!s->in_key)
				scan_put(s, c);
			else if (!end && s->klen + 1 < sizeof(s->key))
				s->key[s->klen++] = c;
			if (end) {
				s->key[s->klen] = 0;
				s->in_str = s->in_key = false;
			}
			continue;
		}
		switch (c) {
		case '"':
			s->in_str = true;
			if (s->depth == 1 && s->want_key) {
				s->in_key = true;
				s->want_key = false;
				s->klen = 0;
			} else {
				scan_put(s, c);
			}
			break;
		case ':':
			if (s->depth != 1) {
				scan_put(s, c);
				break;
			}
			s->vlen = 0;
			for (size_t k = 0; k < sizeof(scan_keys) / sizeof(scan_keys[0]); k++)
				if (!strcmp(s->key, scan_keys[k].key))
					s->cur = (int)k;
			break;
		case ',':
			if (s->depth == 1) {
				scan_value_end(s);
				s->want_key = true;
			} else {
				scan_put(s, c);
			}
			break;
		case '{':
		case '[':
			scan_put(s, c);
			if (++s->depth == 1)
				s->want_key = c == '{';
			break;
		case '}':
		case ']':
			if (s->depth == 1)
				scan_value_end(s);
			else
				scan_put(s, c);
			s->depth--;
			break;
		default:
			scan_put(s, c);
		}
	}
}

struct bm_plan {
	uint32_t epoch;
	long long version;
	bool ring, cut;
};

static int plan_parse(const char *text, struct bm_plan *pl)
{
	json_t *o = json_loads(text, 0, NULL);
	json_t *e = json_object_get(o, "epoch"), *v = json_object_get(o, "version");
	const char *mode = json_string_value(json_object_get(o, "mode"));
	int rc = -EINVAL;

	if (json_is_integer(e) && json_is_integer(v) && mode && json_integer_value(e) >= 0) {
		pl->epoch = (uint32_t)json_integer_value(e);
		pl->version = json_integer_value(v);
		pl->ring = !strcmp(mode, "ring");
		pl->cut = json_is_object(json_object_get(o, "cut"));
		rc = 0;
	}
	json_decref(o);
	return rc;
}

/* ---- one process: its connections ---- */

struct bm_conn {
	int fd, status;
	bool connecting, queued, busy, want_out, close_after, is_switch, hdr_done;
	enum bm_what what;
	double retry_at;
	size_t reqlen, reqoff, hdrlen, clen, got;
	char req[512];
	char hdr[1024];
	struct bm_scan scan;
};

enum bm_step { STEP_REGISTER, STEP_STATE, STEP_POLL, STEP_ACK };

struct bm_rank {
	struct bm_conn c;          /* first: an event's conn is its rank */
	int job;
	uint32_t r, host, epoch, acked, acking, epoch0;
	long long ver;
	enum bm_step step;
	bool ready, ring, affected, new_ring;
	double t_reg, t_ready, t_epoch, t_cut;
};

struct bm_switch {
	struct bm_conn c;          /* first, as in bm_rank */
	char name[24];
	double sent_at;
	uint32_t applied;
	bool answered, dead;
};

struct bm_child {
	int id, ep, cmd, rep;
	struct bm_rank *ranks;
	uint32_t nranks;
	struct bm_switch *sws;
	int nsw;
	struct bm_conn **queue;    /* waiting to connect: a ring of every conn */
	size_t qcap, qhead, qlen;
	int connecting;
	unsigned nretry;
	bool started, armed, sent_s, sent_r, sent_d;
	struct bm_final fin;
	char buf[1 << 16];
};

static void err_count(struct bm_child *ch, enum bm_what what, int status, const char *msg)
{
	struct bm_final *f = &ch->fin;

	for (uint32_t i = 0; i < f->nerr; i++)
		if (f->err[i].what == (int8_t)what && f->err[i].status == status) {
			f->err[i].count++;
			return;
		}
	if (f->nerr == BM_ERR_KINDS) {
		f->err_overflow++;
		return;
	}
	f->err[f->nerr] = (struct bm_err){ .what = (int8_t)what, .status = (int16_t)status,
					   .count = 1 };
	snprintf(f->err[f->nerr].sample, sizeof(f->err[0].sample), "%s", msg ? msg : "");
	f->nerr++;
}

static void conn_close(struct bm_child *ch, struct bm_conn *c)
{
	if (c->fd < 0)
		return;
	if (c->connecting) {
		c->connecting = false;
		ch->connecting--;
	}
	close(c->fd);
	c->fd = -1;
	c->want_out = false;
}

/* The request failed before a usable answer: counted, the connection
 * closed, the same step again in BM_RETRY_S (a dead switch: never). */
static void conn_failed(struct bm_child *ch, struct bm_conn *c, int status, const char *msg)
{
	err_count(ch, c->what, status, msg);
	conn_close(ch, c);
	c->busy = false;
	if (c->is_switch && ((struct bm_switch *)c)->dead)
		return;
	if (!c->retry_at)
		ch->nretry++;
	c->retry_at = now_s() + BM_RETRY_S;
}

static int ep_mod(struct bm_child *ch, struct bm_conn *c, uint32_t events, int op)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	return epoll_ctl(ch->ep, op, c->fd, &ev) ? -errno : 0;
}

static void conn_flush(struct bm_child *ch, struct bm_conn *c)
{
	while (c->reqoff < c->reqlen) {
		ssize_t n = send(c->fd, c->req + c->reqoff, c->reqlen - c->reqoff, MSG_NOSIGNAL);
		if (n > 0) {
			c->reqoff += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (!c->want_out && ep_mod(ch, c, EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD) == 0)
				c->want_out = true;
			return;
		}
		conn_failed(ch, c, ST_CLOSED, n < 0 ? strerror(errno) : "send: nothing sent");
		return;
	}
	if (c->want_out && ep_mod(ch, c, EPOLLIN, EPOLL_CTL_MOD) == 0)
		c->want_out = false;
}

static void conn_open(struct bm_child *ch, struct bm_conn *c)
{
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		conn_failed(ch, c, ST_CONNECT, strerror(errno));
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)&cfg.addr, sizeof(cfg.addr)) &&
	    errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		conn_failed(ch, c, ST_CONNECT, strerror(e));
		return;
	}
	c->fd = fd;
	c->connecting = true;
	ch->connecting++;
	ch->fin.connects++;
	if (ep_mod(ch, c, EPOLLOUT, EPOLL_CTL_ADD))
		conn_failed(ch, c, ST_CONNECT, "epoll_ctl");
}

/* New connections, at most BM_CONNECTING_MAX in flight. */
static void connect_pump(struct bm_child *ch)
{
	while (ch->qlen && ch->connecting < BM_CONNECTING_MAX) {
		struct bm_conn *c = ch->queue[ch->qhead];
		ch->qhead = (ch->qhead + 1) % ch->qcap;
		ch->qlen--;
		c->queued = false;
		if (c->busy && c->fd < 0)
			conn_open(ch, c);
	}
}

/* Send c->req (the step's request), connecting first if need be. */
static void conn_send(struct bm_child *ch, struct bm_conn *c)
{
	c->busy = true;
	c->reqoff = c->hdrlen = c->clen = c->got = 0;
	c->status = 0;
	c->close_after = c->hdr_done = false;
	scan_reset(&c->scan);
	ch->fin.requests++;
	if (c->fd >= 0) {
		if (!c->connecting)
			conn_flush(ch, c);
		return;
	}
	if (!c->queued) {
		ch->queue[(ch->qhead + ch->qlen) % ch->qcap] = c;
		ch->qlen++;
		c->queued = true;
	}
	connect_pump(ch);
}

static void conn_request(struct bm_child *ch, struct bm_conn *c, enum bm_what what,
			 const char *method, const char *path, const char *token, const char *body)
{
	int n = snprintf(c->req, sizeof(c->req), "%s %s HTTP/1.1\r\nHost: %s\r\n"
			 "Authorization: Bearer %s\r\n", method, path, cfg.host_hdr, token);

	if (body)
		n += snprintf(c->req + n, sizeof(c->req) - (size_t)n, "Content-Type: "
			      "application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
	else
		n += snprintf(c->req + n, sizeof(c->req) - (size_t)n, "\r\n");
	c->reqlen = (size_t)n < sizeof(c->req) ? (size_t)n : sizeof(c->req) - 1;
	c->what = what;
	conn_send(ch, c);
}

/* "HTTP/1.1 200 OK" and the headers: status, Content-Length, Connection. */
static int conn_header(struct bm_conn *c)
{
	char *line, *save = NULL;
	bool have_len = false;

	c->hdr[c->hdrlen] = 0;
	if (sscanf(c->hdr, "HTTP/1.%*1[01] %3d", &c->status) != 1)
		return -EPROTO;
	for (line = strtok_r(c->hdr, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
		if (!strncasecmp(line, "Content-Length:", 15)) {
			char *end;
			unsigned long long v = strtoull(line + 15, &end, 10);
			if (end == line + 15 || v > BM_MAX_BODY)
				return -EPROTO;
			c->clen = (size_t)v;
			have_len = true;
		} else if (!strncasecmp(line, "Connection:", 11) && strcasestr(line + 11, "close")) {
			c->close_after = true;
		}
	}
	return have_len ? 0 : -EPROTO;
}

static void rank_answer(struct bm_child *ch, struct bm_rank *rk);
static void switch_answer(struct bm_child *ch, struct bm_switch *sw);

static void conn_feed(struct bm_child *ch, struct bm_conn *c, const char *b, size_t n)
{
	size_t off = 0;

	while (off < n) {
		if (!c->hdr_done) {
			c->hdr[c->hdrlen++] = b[off++];
			if (c->hdrlen >= 4 && !memcmp(c->hdr + c->hdrlen - 4, "\r\n\r\n", 4)) {
				if (conn_header(c)) {
					conn_failed(ch, c, ST_PROTO, "a status line or headers without "
						    "Content-Length");
					return;
				}
				c->hdr_done = true;
			} else if (c->hdrlen == sizeof(c->hdr) - 1) {
				conn_failed(ch, c, ST_PROTO, "headers longer than 1 KiB");
				return;
			} else {
				continue;
			}
		} else {
			size_t take = n - off < c->clen - c->got ? n - off : c->clen - c->got;
			scan_feed(&c->scan, b + off, take);
			c->got += take;
			off += take;
		}
		if (c->got == c->clen) {
			if (off < n) {
				conn_failed(ch, c, ST_PROTO, "more bytes than Content-Length");
				return;
			}
			c->busy = false;
			if (c->close_after)
				conn_close(ch, c);
			if (c->is_switch)
				switch_answer(ch, (struct bm_switch *)c);
			else
				rank_answer(ch, (struct bm_rank *)c);
			return;
		}
	}
}

static void conn_event(struct bm_child *ch, struct bm_conn *c, uint32_t events)
{
	if (c->fd < 0)
		return;
	if (c->connecting) {
		int err = 0;
		socklen_t len = sizeof(err);
		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;          /* an event of the connection this one replaced */
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
			conn_failed(ch, c, ST_CONNECT, strerror(err ? err : errno));
			return;
		}
		c->connecting = false;
		ch->connecting--;
		if (ep_mod(ch, c, EPOLLIN, EPOLL_CTL_MOD)) {
			conn_failed(ch, c, ST_CONNECT, "epoll_ctl");
			return;
		}
		if (c->busy)
			conn_flush(ch, c);
		return;
	}
	if ((events & EPOLLOUT) && c->busy)
		conn_flush(ch, c);
	if (c->fd < 0 || !(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	ssize_t n = recv(c->fd, ch->buf, sizeof(ch->buf), 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0 && !c->busy) {            /* a kept connection the manager let go */
		ch->fin.idle_closes++;
		conn_close(ch, c);
		return;
	}
	if (n <= 0)
		conn_failed(ch, c, ST_CLOSED, n ? strerror(errno) : "closed by the manager");
	else if (!c->busy)
		conn_failed(ch, c, ST_PROTO, "bytes with no request outstanding");
	else
		conn_feed(ch, c, ch->buf, (size_t)n);
}

/* ---- the roles ---- */

/* host h (< 65536 * 253) as run-manager-scale.sh numbers it */
static void host_ip(uint32_t h, char ip[16])
{
	snprintf(ip, 16, "10.%u.%u.%u", (1 + h / 65536) & 255, (h / 256) % 256, h % 256);
}

static void rank_send(struct bm_child *ch, struct bm_rank *rk)
{
	const struct bm_job *j = &cfg.jobs[rk->job];
	char path[160], body[160], ip[16];

	switch (rk->step) {
	case STEP_REGISTER:
		host_ip(rk->host, ip);
		snprintf(path, sizeof(path), "/v1/jobs/%s/ranks", j->id);
		snprintf(body, sizeof(body), "{\"rank\": %u, \"size\": %u, \"ip\": \"%s\"}", rk->r,
			 j->size, ip);
		conn_request(ch, &rk->c, W_REGISTER, "POST", path, cfg.tenant, body);
		break;
	case STEP_STATE:
		/* as libinca joins: its own and the next rank's member entries */
		snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%u?wait_ms=%d&members=ring", j->id,
			 rk->r, BM_WAIT_MS);
		conn_request(ch, &rk->c, W_STATE, "GET", path, cfg.tenant, NULL);
		break;
	case STEP_POLL:
		/* as libinca asks: the member list came with the join */
		snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%u?plan_ver=%lld&wait_ms=%d&members=0",
			 j->id, rk->r, rk->ver, BM_WAIT_MS);
		conn_request(ch, &rk->c, W_POLL, "GET", path, cfg.tenant, NULL);
		break;
	case STEP_ACK:
		snprintf(path, sizeof(path), "/v1/jobs/%s/ranks/%u/ack", j->id, rk->r);
		snprintf(body, sizeof(body), "{\"plan\": %u, \"next\": 1, \"first\": 1, \"keep\": 1}",
			 rk->acking);
		conn_request(ch, &rk->c, W_ACK, "POST", path, cfg.tenant, body);
		break;
	}
}

/* A plan seen by a rank: the kill's times, an acknowledgement if the plan
 * is new and has no cut yet, else the next poll. */
static void rank_plan(struct bm_child *ch, struct bm_rank *rk, const struct bm_plan *pl, double t)
{
	rk->ver = pl->version;
	if (pl->epoch > rk->epoch)
		rk->epoch = pl->epoch;
	if (ch->armed && pl->epoch > rk->epoch0) {
		if (!rk->affected && !rk->t_epoch)
			err_count(ch, rk->c.what, ST_STRAY, cfg.jobs[rk->job].id);
		if (!rk->t_epoch) {
			rk->t_epoch = t;
			rk->new_ring = pl->ring;
		}
		if (pl->cut && !rk->t_cut)
			rk->t_cut = t;
	}
	if (pl->epoch > 1 && pl->epoch > rk->acked && !pl->cut) {
		rk->step = STEP_ACK;
		rk->acking = pl->epoch;
	} else {
		rk->step = STEP_POLL;
	}
	rank_send(ch, rk);
}

static void rank_retry_later(struct bm_child *ch, struct bm_rank *rk)
{
	if (!rk->c.retry_at)
		ch->nretry++;
	rk->c.retry_at = now_s() + BM_RETRY_S;
}

static void rank_answer(struct bm_child *ch, struct bm_rank *rk)
{
	struct bm_conn *c = &rk->c;
	const char *state = c->scan.v.state;
	double t = now_s();
	struct bm_plan pl;

	if (c->status != 200) {
		err_count(ch, c->what, c->status, c->scan.v.error);
		/* a plan that moved on while acknowledging: poll for it */
		if (rk->step == STEP_ACK && c->status == 409)
			rk->step = STEP_POLL;
		rank_retry_later(ch, rk);
		return;
	}
	switch (rk->step) {
	case STEP_REGISTER:
		rk->t_reg = t;
		rk->step = STEP_STATE;
		rank_send(ch, rk);
		return;
	case STEP_STATE:
		if (!strcmp(state, "\"waiting\"") || !strcmp(state, "\"programming\"")) {
			rank_send(ch, rk);        /* its wait ran out: again */
			return;
		}
		if (strcmp(state, "\"ready\"") && strcmp(state, "\"ring\"")) {
			err_count(ch, c->what, ST_STATE, state);
			rank_retry_later(ch, rk);
			return;
		}
		break;
	case STEP_ACK:
	case STEP_POLL:
		break;
	}
	if (c->scan.trunc || plan_parse(c->scan.v.plan, &pl)) {
		err_count(ch, c->what, ST_JSON, "no readable \"plan\" in the answer");
		rank_retry_later(ch, rk);
		return;
	}
	if (rk->step == STEP_STATE) {
		rk->ready = true;
		rk->t_ready = t;
		rk->ring = !strcmp(state, "\"ring\"");
	}
	if (rk->step == STEP_ACK)
		rk->acked = rk->acking;
	rank_plan(ch, rk, &pl, t);
}

static void switch_send(struct bm_child *ch, struct bm_switch *sw)
{
	char path[80], body[80];

	snprintf(path, sizeof(path), "/v1/switches/%s/heartbeat", sw->name);
	snprintf(body, sizeof(body), "{\"applied\": %u, \"wait_ms\": %d}", sw->applied,
		 BM_WAIT_MS);
	sw->sent_at = now_s();
	conn_request(ch, &sw->c, W_HEARTBEAT, "POST", path, cfg.admin, body);
}

static void switch_answer(struct bm_child *ch, struct bm_switch *sw)
{
	char *end;
	unsigned long v = strtoul(sw->c.scan.v.version, &end, 10);
	double t = now_s();

	/* held at most half the dead time: longer is the manager late */
	if (t - sw->sent_at > ch->fin.hb_max_s) {
		ch->fin.hb_max_s = t - sw->sent_at;
		ch->fin.hb_max_at = t;
		snprintf(ch->fin.hb_max_switch, sizeof(ch->fin.hb_max_switch), "%s", sw->name);
	}

	if (sw->c.status != 200 || end == sw->c.scan.v.version || v > UINT32_MAX) {
		err_count(ch, W_HEARTBEAT, sw->c.status != 200 ? sw->c.status : ST_JSON,
			  sw->c.status != 200 ? sw->c.scan.v.error : "no \"version\" in the answer");
		if (!sw->c.retry_at)
			ch->nretry++;
		sw->c.retry_at = now_s() + BM_RETRY_S;
		return;
	}
	sw->applied = (uint32_t)v;       /* applied at once: the agent's next heartbeat says so */
	sw->answered = true;
	if (!sw->dead)
		switch_send(ch, sw);
}

/* ---- one process: the loop ---- */

static void child_retries(struct bm_child *ch, double t)
{
	for (int i = 0; i < ch->nsw && ch->nretry; i++) {
		struct bm_switch *sw = &ch->sws[i];
		if (sw->c.retry_at && t >= sw->c.retry_at) {
			sw->c.retry_at = 0;
			ch->nretry--;
			if (!sw->dead)
				switch_send(ch, sw);
		}
	}
	for (uint32_t i = 0; i < ch->nranks && ch->nretry; i++) {
		struct bm_rank *rk = &ch->ranks[i];
		if (rk->c.retry_at && t >= rk->c.retry_at) {
			rk->c.retry_at = 0;
			ch->nretry--;
			rank_send(ch, rk);
		}
	}
}

/* what: a letter, then n bytes of p (for 'S', 'R', 'D': when it became so) */
static void child_report(struct bm_child *ch, char what, const void *p, size_t n)
{
	if (write_full(ch->rep, &what, 1) || (n && write_full(ch->rep, p, n)))
		fprintf(stderr, "inca-bench-manager: process %d: cannot report to the parent\n", ch->id);
}

/* Whether a phase is done here: every switch answered (a), every rank
 * ready and holding its plan poll (b), every affected rank has the cut (d). */
static void child_progress(struct bm_child *ch)
{
	double t = now_s();
	bool all = true;

	if (ch->id == 0 && !ch->sent_s) {
		for (int i = 0; i < ch->nsw && all; i++)
			all = ch->sws[i].answered;
		if (all) {
			ch->sent_s = true;
			child_report(ch, 'S', &t, sizeof(t));
		}
	}
	all = true;
	if (ch->started && !ch->sent_r) {
		for (uint32_t i = 0; i < ch->nranks && all; i++)
			all = ch->ranks[i].ready && ch->ranks[i].step == STEP_POLL && ch->ranks[i].c.busy;
		if (all) {
			ch->sent_r = true;
			child_report(ch, 'R', &t, sizeof(t));
		}
	}
	all = true;
	if (ch->armed && !ch->sent_d) {
		for (uint32_t i = 0; i < ch->nranks && all; i++)
			all = !ch->ranks[i].affected || ch->ranks[i].t_cut;
		if (all) {
			ch->sent_d = true;
			child_report(ch, 'D', &t, sizeof(t));
		}
	}
}

/* A command from the parent: 'B' begin the ranks, 'A' the jobs the kill
 * touches, 'K' kill a switch, 'Q' quit. false: stop. */
static bool child_command(struct bm_child *ch)
{
	uint32_t n, k;
	char cmd;

	if (read_full(ch->cmd, &cmd, 1))
		return false;
	switch (cmd) {
	case 'B':
		ch->started = true;
		for (uint32_t i = 0; i < ch->nranks; i++)
			rank_send(ch, &ch->ranks[i]);
		return true;
	case 'A':
		if (read_full(ch->cmd, &n, sizeof(n)))
			return false;
		for (uint32_t i = 0; i < ch->nranks; i++)
			ch->ranks[i].epoch0 = ch->ranks[i].epoch;
		for (uint32_t i = 0; i < n; i++) {
			if (read_full(ch->cmd, &k, sizeof(k)))
				return false;
			for (uint32_t r = 0; r < ch->nranks; r++)
				ch->ranks[r].affected |= ch->ranks[r].job == (int)k;
		}
		ch->armed = true;
		child_report(ch, 'a', NULL, 0);
		return true;
	case 'K': {
		if (read_full(ch->cmd, &k, sizeof(k)) || (int)k >= ch->nsw)
			return false;
		struct bm_switch *sw = &ch->sws[k];
		sw->dead = true;
		conn_close(ch, &sw->c);
		sw->c.busy = false;
		double t0 = now_s();
		child_report(ch, 'k', &t0, sizeof(t0));
		return true;
	}
	default:
		return false;
	}
}

static void child_final(struct bm_child *ch)
{
	struct bm_job_stat *js = calloc((size_t)cfg.njobs, sizeof(*js));

	if (!js) {
		child_report(ch, 'F', &ch->fin, sizeof(ch->fin));
		return;
	}
	for (uint32_t i = 0; i < ch->nranks; i++) {
		const struct bm_rank *rk = &ch->ranks[i];
		struct bm_job_stat *s = &js[rk->job];
#define MAXT(a, b) do { if ((b) > (a)) (a) = (b); } while (0)
		s->ranks++;
		MAXT(s->reg_last, rk->t_reg);
		MAXT(s->ready_last, rk->t_ready);
		MAXT(s->epoch_last, rk->t_epoch);
		MAXT(s->cut_last, rk->t_cut);
#undef MAXT
		if (rk->t_epoch && (!s->epoch_first || rk->t_epoch < s->epoch_first))
			s->epoch_first = rk->t_epoch;
		s->ready += rk->ready;
		s->ring += rk->ring;
		s->moved += rk->t_epoch > 0;
		s->cut += rk->t_cut > 0;
		s->new_ring += rk->new_ring;
	}
	child_report(ch, 'F', &ch->fin, sizeof(ch->fin));
	if (write_full(ch->rep, js, sizeof(*js) * (size_t)cfg.njobs))
		fprintf(stderr, "inca-bench-manager: process %d: cannot report to the parent\n", ch->id);
	free(js);
}

/* Process id plays global ranks [first, first + n) and, as process 0, the
 * switches. Returns the exit status. */
static int child_run(int id, uint32_t first, uint32_t n, int cmd, int rep)
{
	static struct bm_child c;
	struct bm_child *ch = &c;
	struct epoll_event evs[256], ev = { .events = EPOLLIN, .data.ptr = NULL };
	double next_check = 0;
	bool quit = false;
	int job = 0;
	uint32_t base = 0;

	ch->id = id;
	ch->cmd = cmd;
	ch->rep = rep;
	ch->nranks = n;
	ch->nsw = id == 0 ? cfg.leaves + cfg.spines : 0;
	ch->ranks = calloc(n ? n : 1, sizeof(*ch->ranks));
	ch->sws = calloc(ch->nsw ? (size_t)ch->nsw : 1, sizeof(*ch->sws));
	ch->qcap = n + (size_t)ch->nsw + 1;
	ch->queue = calloc(ch->qcap, sizeof(*ch->queue));
	ch->ep = epoll_create1(EPOLL_CLOEXEC);
	if (!ch->ranks || !ch->sws || !ch->queue || ch->ep < 0 ||
	    epoll_ctl(ch->ep, EPOLL_CTL_ADD, cmd, &ev)) {
		fprintf(stderr, "inca-bench-manager: process %d: %s\n", id, strerror(errno));
		return 1;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct bm_rank *rk = &ch->ranks[i];
		uint32_t g = first + i;
		while (g >= base + cfg.jobs[job].size)
			base += cfg.jobs[job++].size;
		rk->c.fd = -1;
		rk->job = job;
		rk->r = g - base;
		rk->host = g;
	}
	for (int i = 0; i < ch->nsw; i++) {
		struct bm_switch *sw = &ch->sws[i];
		sw->c.fd = -1;
		sw->c.is_switch = true;
		if (i < cfg.leaves)
			snprintf(sw->name, sizeof(sw->name), "leaf%d", i);
		else
			snprintf(sw->name, sizeof(sw->name), "spine%d", i - cfg.leaves);
		switch_send(ch, sw);
	}
	while (!quit) {
		double t = now_s();
		if (t >= cfg.deadline)
			break;
		int k = epoll_wait(ch->ep, evs, 256, ch->nretry || ch->qlen ? 10 : 50);
		for (int i = 0; i < k && !quit; i++) {
			if (!evs[i].data.ptr)
				quit = !child_command(ch);
			else
				conn_event(ch, evs[i].data.ptr, evs[i].events);
		}
		t = now_s();
		connect_pump(ch);
		if (ch->nretry)
			child_retries(ch, t);
		if (t >= next_check) {
			child_progress(ch);
			next_check = t + 0.02;
		}
	}
	child_final(ch);
	return quit ? 0 : 3;
}

/* ---- the parent: phases, the manager's figures, the report ---- */

/* the manager as /proc shows it: CPU (% of a core since the last look),
 * RSS (MiB), threads, open descriptors */
enum { F_CPU, F_RSS, F_THREADS, F_FDS, F_N };
struct bm_proc {
	unsigned long long ticks;
	double t, fig[F_N];
};

enum bm_phase { PH_SWITCHES, PH_READY, PH_IDLE, PH_KILL, PH_END };
static const char *const phase_name[PH_END] = { "a) switches", "b) registration",
						"c) idle", "d) kill" };

static struct {
	int nproc;
	enum bm_phase phase;
	pid_t pid[BM_MAX_PROCS];
	int cmd[BM_MAX_PROCS], rep[BM_MAX_PROCS];
	bool eof[BM_MAX_PROCS], got[BM_MAX_PROCS][128];
	double when[BM_MAX_PROCS][128];       /* what 'S', 'R', 'D' and 'k' carry */
	double t0;                            /* the kill */
	struct bm_final fin[BM_MAX_PROCS];
	struct bm_job_stat *js[BM_MAX_PROCS];
	struct bm_proc last;
	double next_sample, min[PH_END][F_N], max[PH_END][F_N], healthz_max[PH_END];
	int nsamples[PH_END];
	unsigned probes;                      /* GET /healthz sent */
} P;

static int proc_read(struct bm_proc *pr)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	struct dirent *de;
	FILE *f;
	DIR *d;
	long v;

	if (!cfg.mgr_pid)
		return -ENOENT;
	pr->t = now_s();
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)cfg.mgr_pid);
	if (!(f = fopen(path, "r")))
		return -errno;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	/* after the name: state, 5 numbers, 5 counters, then utime and stime */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
		return -EINVAL;
	pr->ticks = ut + st;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)cfg.mgr_pid);
	if (!(f = fopen(path, "r")))
		return -errno;
	while (fgets(buf, sizeof(buf), f)) {
		if (sscanf(buf, "VmRSS: %ld", &v) == 1)
			pr->fig[F_RSS] = (double)v / 1024.0;
		else if (sscanf(buf, "Threads: %ld", &v) == 1)
			pr->fig[F_THREADS] = (double)v;
	}
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)cfg.mgr_pid);
	if (!(d = opendir(path)))
		return -errno;
	pr->fig[F_FDS] = 0;
	while ((de = readdir(d)))
		pr->fig[F_FDS] += de->d_name[0] != '.';
	closedir(d);
	return 0;
}

static double cpu_pct(const struct bm_proc *a, const struct bm_proc *b)
{
	return b->t > a->t ? (double)(b->ticks - a->ticks) / (double)sysconf(_SC_CLK_TCK) /
			     (b->t - a->t) * 100.0 : 0;
}

/* Once a second, and as a phase ends: the manager's figures since the last
 * look, kept as the phase's min and max. */
/* How long the manager takes to answer GET /healthz (through its HTTP
 * thread and its lock, as every request): is it answering at all? */
static double healthz_ms(void)
{
	char url[160], err[256];
	double t = now_s();
	long ms = (long)((cfg.deadline - t) * 1000.0);
	json_t *j = NULL;
	int st;

	if (ms <= 0)
		return 0;
	ms = ms < 2000 ? ms : 2000;     /* a probe never holds the phases up for long */
	snprintf(url, sizeof(url), "%s/healthz", cfg.url);
	st = inca_http("GET", url, NULL, NULL, ms, &j, NULL, err, sizeof(err));
	json_decref(j);
	P.probes++;
	return st == 200 ? (now_s() - t) * 1000.0 : (double)ms;
}

static void parent_sample(bool force)
{
	struct bm_proc pr;
	int ph = P.phase;
	double ms;

	if (!force && now_s() < P.next_sample)
		return;
	if (ph >= PH_END)
		return;
	ms = healthz_ms();
	P.healthz_max[ph] = ms > P.healthz_max[ph] ? ms : P.healthz_max[ph];
	P.next_sample = now_s() + 1.0;
	if (proc_read(&pr))
		return;
	if (P.last.t) {
		pr.fig[F_CPU] = cpu_pct(&P.last, &pr);
		for (int k = 0; k < F_N; k++) {
			if (!P.nsamples[ph] || pr.fig[k] < P.min[ph][k])
				P.min[ph][k] = pr.fig[k];
			if (!P.nsamples[ph] || pr.fig[k] > P.max[ph][k])
				P.max[ph][k] = pr.fig[k];
		}
		P.nsamples[ph]++;
	}
	P.last = pr;
}

static void parent_phase(enum bm_phase ph)
{
	parent_sample(true);
	P.phase = ph;
}

/* Read what the processes say until `until`; -EPIPE if one ended early. */
static int parent_pump(double until)
{
	struct pollfd pf[BM_MAX_PROCS];
	double t;

	while ((t = now_s()) < until) {
		double wake = until < P.next_sample ? until : P.next_sample;
		int n = poll(pf, (nfds_t)P.nproc, 0);
		for (int i = 0; i < P.nproc; i++)
			pf[i] = (struct pollfd){ .fd = P.eof[i] ? -1 : P.rep[i], .events = POLLIN };
		n = poll(pf, (nfds_t)P.nproc, wake > t ? (int)((wake - t) * 1000.0) + 1 : 0);
		for (int i = 0; i < P.nproc && n > 0; i++) {
			char what;
			if (!(pf[i].revents & (POLLIN | POLLHUP)))
				continue;
			if (read_full(P.rep[i], &what, 1)) {
				P.eof[i] = true;
				if (!P.got[i]['F'])
					return -EPIPE;
				continue;
			}
			if (strchr("SRDk", what) &&
			    read_full(P.rep[i], &P.when[i][(int)what], sizeof(double)))
				what = 0;
			if (what == 'F' && (read_full(P.rep[i], &P.fin[i], sizeof(P.fin[i])) ||
					    read_full(P.rep[i], P.js[i],
						      sizeof(*P.js[i]) * (size_t)cfg.njobs)))
				what = 0;
			P.got[i][(unsigned char)what & 127] = true;
		}
		parent_sample(false);
	}
	return 0;
}

/* Wait until process `who` (-1: every one) said `what`. */
static int parent_wait(char what, int who, double deadline)
{
	for (;;) {
		bool all = true;
		for (int i = 0; i < P.nproc; i++)
			if (who < 0 || who == i)
				all &= P.got[i][(int)what];
		if (all)
			return 0;
		if (now_s() >= deadline)
			return -ETIMEDOUT;
		double t = now_s() + 0.1;
		int rc = parent_pump(t < deadline ? t : deadline);
		if (rc)
			return rc;
	}
}

static void parent_tell(int who, char what, const void *p, size_t n)
{
	for (int i = 0; i < P.nproc; i++)
		if ((who < 0 || who == i) && !P.eof[i] &&
		    (write_full(P.cmd[i], &what, 1) || (n && write_full(P.cmd[i], p, n))) &&
		    what != 'Q')         /* at the time limit it may have stopped already */
			fprintf(stderr, "inca-bench-manager: cannot reach process %d\n", i);
}

/* An admin GET on the manager (libcurl): its JSON or its text. */
static int admin_get(const char *path, json_t **json, char **text)
{
	char url[256], err[512];
	json_t *j = NULL;
	int st;

	snprintf(url, sizeof(url), "%s%s", cfg.url, path);
	st = inca_http("GET", url, cfg.admin, NULL, 10000, &j, text, err, sizeof(err));
	if (st != 200) {
		fprintf(stderr, "inca-bench-manager: GET %s: %s\n", path, st < 0 ? err : "refused");
		json_decref(j);
		if (text) {
			free(*text);
			*text = NULL;
		}
		return -EIO;
	}
	if (json)
		*json = j;
	else
		json_decref(j);
	return 0;
}

struct bm_metrics {
	double held, requests, rank_polls, saves, save_max, failures;
	unsigned probes;       /* this tool's GET /healthz so far */
};

static int metrics_read(struct bm_metrics *m)
{
	char *text = NULL, *line, *save = NULL;

	*m = (struct bm_metrics){ -1, -1, -1, -1, -1, -1, P.probes };
	if (admin_get("/metrics", NULL, &text) || !text)
		return -EIO;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		sscanf(line, "inca_manager_long_polls_held %lf", &m->held);
		sscanf(line, "inca_manager_requests_total %lf", &m->requests);
		sscanf(line, "inca_manager_rank_polls_total %lf", &m->rank_polls);
		sscanf(line, "inca_manager_state_saves_total %lf", &m->saves);
		sscanf(line, "inca_manager_state_save_seconds_max %lf", &m->save_max);
		sscanf(line, "inca_manager_failures_total %lf", &m->failures);
	}
	free(text);
	return m->held < 0 || m->requests < 0 ? -EIO : 0;
}

/* what the phases found */
struct bm_run {
	double ta, tb0, tb1, tc0, tc1;
	struct bm_metrics m0, m1, m2;
	struct bm_proc c0, c1;
	bool idle_done;
	char victim[64];
	int big, sw;
	uint32_t *affected, naffected;
};

/* The root of the largest job's tree, and every job with a group on it. */
static int kill_target(struct bm_run *r)
{
	json_t *job = NULL, *jobs = NULL, *o, *sw;
	char path[96];
	const char *root;
	size_t i, s;

	for (int k = 1; k < cfg.njobs; k++)
		if (cfg.jobs[k].size > cfg.jobs[r->big].size)
			r->big = k;
	snprintf(path, sizeof(path), "/v1/jobs/%s", cfg.jobs[r->big].id);
	if (admin_get(path, &job, NULL))
		return -EIO;
	root = json_string_value(json_object_get(json_object_get(job, "tree"), "switch"));
	if (!root)
		fprintf(stderr, "inca-bench-manager: job %s has no tree (%s)\n",
			cfg.jobs[r->big].id, json_string_value(json_object_get(job, "reason")));
	snprintf(r->victim, sizeof(r->victim), "%s", root ? root : "");
	json_decref(job);
	if (!strncmp(r->victim, "leaf", 4))
		r->sw = atoi(r->victim + 4);
	else if (!strncmp(r->victim, "spine", 5))
		r->sw = cfg.leaves + atoi(r->victim + 5);
	if (!root || r->sw < 0 || r->sw >= cfg.leaves + cfg.spines || admin_get("/v1/jobs", &jobs, NULL))
		return -EINVAL;
	json_array_foreach(jobs, i, o) {
		const char *id = json_string_value(json_object_get(o, "id"));
		bool on = false;
		json_array_foreach(json_object_get(o, "switches"), s, sw)
			on |= json_is_string(sw) && !strcmp(json_string_value(sw), r->victim);
		for (int k = 0; on && id && k < cfg.njobs; k++)
			if (!strcmp(cfg.jobs[k].id, id))
				r->affected[r->naffected++] = (uint32_t)k;
	}
	json_decref(jobs);
	return 0;
}

/* The phases in turn: NULL, or which did not finish (*rc why). */
static const char *run_phases(struct bm_run *r, int *rc)
{
	r->ta = now_s();
	if ((*rc = parent_wait('S', 0, cfg.deadline)))
		return "a) not every switch's heartbeat was answered";
	printf("a) %d switches heartbeating, every one answered within %.2f s\n",
	       cfg.leaves + cfg.spines, P.when[0]['S'] - r->ta);
	fflush(stdout);

	parent_phase(PH_READY);
	r->tb0 = now_s();
	parent_tell(-1, 'B', NULL, 0);
	if ((*rc = parent_wait('R', -1, cfg.deadline)))
		return "b) not every rank registered, got ready and holds its plan poll";
	for (int i = 0; i < P.nproc; i++)
		r->tb1 = P.when[i]['R'] > r->tb1 ? P.when[i]['R'] : r->tb1;
	printf("b) %u ranks registered and ready, each holding its plan poll, %.2f s after the "
	       "first registration\n", cfg.nranks, r->tb1 - r->tb0);
	fflush(stdout);

	/* c) idle, once the manager holds every rank's poll */
	parent_phase(PH_IDLE);
	while (metrics_read(&r->m0) || r->m0.held < cfg.nranks) {
		if (now_s() + 0.2 >= cfg.deadline)
			*rc = -ETIMEDOUT;
		if (*rc || (*rc = parent_pump(now_s() + 0.2)))
			return "c) the manager did not hold every rank's poll";
	}
	r->tc0 = now_s();
	if (proc_read(&r->c0))
		fprintf(stderr, "inca-bench-manager: no /proc figures (give --manager-pid)\n");
	if (r->tc0 + cfg.idle_s >= cfg.deadline) {
		*rc = -ETIMEDOUT;
		return "c) idle: the idle time would end past the time limit";
	}
	if ((*rc = parent_pump(r->tc0 + cfg.idle_s)))
		return "c) idle";
	r->tc1 = now_s();
	proc_read(&r->c1);
	if (metrics_read(&r->m1))
		return "c) /metrics after the idle time";
	r->idle_done = true;

	/* d) the root switch of the largest job stops heartbeating at T0 */
	parent_phase(PH_KILL);
	if (kill_target(r))
		return "d) finding the root switch of the largest job and the jobs on it";
	parent_tell(-1, 'A', &r->naffected, sizeof(r->naffected));
	for (int i = 0; i < P.nproc; i++)
		if (!P.eof[i] && write_full(P.cmd[i], r->affected, sizeof(uint32_t) * r->naffected))
			fprintf(stderr, "inca-bench-manager: cannot reach process %d\n", i);
	if ((*rc = parent_wait('a', -1, cfg.deadline)))
		return "d) telling the processes which jobs the kill touches";
	uint32_t sw = (uint32_t)r->sw;
	parent_tell(0, 'K', &sw, sizeof(sw));
	if (!(*rc = parent_wait('k', 0, cfg.deadline)))
		P.t0 = P.when[0]['k'];
	if (*rc || (*rc = parent_wait('D', -1, cfg.deadline)))
		return "d) not every rank of the jobs on the killed switch has the new plan's cut";
	metrics_read(&r->m2);
	return NULL;
}

/* Every process's view of job k, merged. */
static struct bm_job_stat job_merged(int k)
{
	struct bm_job_stat s = { 0 };

	for (int i = 0; i < P.nproc; i++) {
		const struct bm_job_stat *x = &P.js[i][k];
		if (!P.got[i]['F'])
			continue;
		s.reg_last = x->reg_last > s.reg_last ? x->reg_last : s.reg_last;
		s.ready_last = x->ready_last > s.ready_last ? x->ready_last : s.ready_last;
		s.epoch_last = x->epoch_last > s.epoch_last ? x->epoch_last : s.epoch_last;
		s.cut_last = x->cut_last > s.cut_last ? x->cut_last : s.cut_last;
		if (x->epoch_first && (!s.epoch_first || x->epoch_first < s.epoch_first))
			s.epoch_first = x->epoch_first;
		s.ranks += x->ranks;
		s.ready += x->ready;
		s.ring += x->ring;
		s.moved += x->moved;
		s.cut += x->cut;
		s.new_ring += x->new_ring;
	}
	return s;
}

/* b) per job size, the worst job; returns the ranks that never got ready. */
static uint32_t report_ready(const struct bm_run *r)
{
	uint32_t not_ready = 0;

	printf("\nb) ready latency per job size (a job's last registration answered -> its "
	       "last rank saw ready;\n   the worst job of that size):\n"
	       "  %6s %5s %10s %12s %12s\n", "size", "jobs", "max ms", "all ready", "on the ring");
	for (int k = 0; k < cfg.njobs; k++) {
		struct bm_job_stat s = job_merged(k);
		not_ready += cfg.jobs[k].size - s.ready;
	}
	for (int k = 0; k < cfg.njobs; k++) {
		double worst = -1e9;
		int n = 0, ready = 0, ring = 0;
		bool seen = false;
		for (int q = 0; q < k; q++)
			seen |= cfg.jobs[q].size == cfg.jobs[k].size;
		for (int q = k; q < cfg.njobs && !seen; q++) {
			struct bm_job_stat s = job_merged(q);
			if (cfg.jobs[q].size != cfg.jobs[k].size)
				continue;
			n++;
			ring += s.ring > 0;
			if (s.ready < cfg.jobs[q].size)
				continue;
			ready++;
			if ((s.ready_last - s.reg_last) * 1000.0 > worst)
				worst = (s.ready_last - s.reg_last) * 1000.0;
		}
		if (!seen && ready)
			printf("  %6u %5d %10.1f %12d %12d\n", cfg.jobs[k].size, n, worst, ready, ring);
		else if (!seen)
			printf("  %6u %5d %10s %12d %12d\n", cfg.jobs[k].size, n, "-", ready, ring);
	}
	if (not_ready || !r->tb1)
		printf("  %u of %u ranks not ready\n", not_ready, cfg.nranks);
	return not_ready;
}

static void report_idle(const struct bm_run *r)
{
	/* less this tool's own: the /metrics that ends it, the /healthz probes */
	double s = r->tc1 - r->tc0, req = r->m1.requests - r->m0.requests - 1 -
					  (r->m1.probes - r->m0.probes);

	printf("\nc) idle %.1f s, every rank's plan poll held:\n", s);
	if (r->c0.t && r->c1.t)
		printf("  manager CPU %.2f%% of a core, RSS %.1f MiB, %.0f threads, %.0f open fds\n",
		       cpu_pct(&r->c0, &r->c1), r->c1.fig[F_RSS], r->c1.fig[F_THREADS],
		       r->c1.fig[F_FDS]);
	printf("  long-polls held %.0f at the start, %.0f at the end; requests %.1f/s (%.0f, "
	       "not counting this tool's probes)", r->m0.held, r->m1.held, req / s, req);
	if (r->m0.rank_polls >= 0 && r->m1.rank_polls >= 0)
		printf(", of which rank polls %.1f/s", (r->m1.rank_polls - r->m0.rank_polls) / s);
	printf("\n");
}

/* d) when the affected ranks saw the new plan and its cut; true if every
 * one did. */
static bool report_kill(const struct bm_run *r)
{
	uint32_t moved = 0, cut = 0, ranks = 0, ring = 0;
	double first = 0, last = 0, last_cut = 0;

	for (uint32_t a = 0; a < r->naffected; a++) {
		struct bm_job_stat s = job_merged((int)r->affected[a]);
		ranks += cfg.jobs[r->affected[a]].size;
		moved += s.moved;
		cut += s.cut;
		ring += s.new_ring;
		if (s.epoch_first && (!first || s.epoch_first < first))
			first = s.epoch_first;
		last = s.epoch_last > last ? s.epoch_last : last;
		last_cut = s.cut_last > last_cut ? s.cut_last : last_cut;
	}
	printf("\nd) %s, the root of %s's tree, stopped heartbeating at T0; %u jobs (%u ranks) "
	       "had a group on it:", r->victim, cfg.jobs[r->big].id, r->naffected, ranks);
	for (uint32_t a = 0; a < r->naffected && a < 12; a++)
		printf(" %s", cfg.jobs[r->affected[a]].id);
	printf("%s\n", r->naffected > 12 ? " ..." : "");
	if (P.t0 > 0 && first > 0)
		printf("  the manager's detection: T0 -> the first rank has the new plan %9.1f ms\n"
		       "  spread: the first -> the last rank has the new plan            %9.1f ms\n"
		       "  T0 -> the last rank has the new plan                           %9.1f ms\n",
		       (first - P.t0) * 1000.0, (last - first) * 1000.0, (last - P.t0) * 1000.0);
	if (P.t0 > 0 && last_cut > 0)
		printf("  T0 -> the last rank has the new plan's cut                     %9.1f ms\n",
		       (last_cut - P.t0) * 1000.0);
	printf("  ranks with the new plan %u, with its cut %u, of %u (new plan on the ring: %u)\n",
	       moved, cut, ranks, ring);
	if (r->m2.saves >= 0)
		printf("  the manager: %.0f failures logged (the kill is one), %.0f state saves, the "
		       "longest save since its start %.1f ms\n", r->m2.failures - r->m1.failures,
		       r->m2.saves - r->m1.saves, r->m2.save_max * 1000.0);
	return moved == ranks && cut == ranks;
}

static void report_samples(void)
{
	printf("\nthe manager once a second (min..max in each phase; /healthz: the longest "
	       "answer):\n  %-16s %15s %19s %12s %14s %12s\n", "", "CPU % of a core", "RSS MiB",
	       "threads", "open fds", "/healthz ms");
	for (int ph = 0; ph < PH_END; ph++) {
		const double *lo = P.min[ph], *hi = P.max[ph];
		if (!P.nsamples[ph])
			printf("  %-16s %-64s %9.1f\n", phase_name[ph], "(no sample)",
			       P.healthz_max[ph]);
		else
			printf("  %-16s %7.1f..%-7.1f %9.1f..%-9.1f %5.0f..%-6.0f %6.0f..%-6.0f "
			       "%9.1f\n", phase_name[ph], lo[F_CPU], hi[F_CPU], lo[F_RSS], hi[F_RSS],
			       lo[F_THREADS], hi[F_THREADS], lo[F_FDS], hi[F_FDS], P.healthz_max[ph]);
	}
}

/* What no phase expected; returns how many. */
static uint64_t report_errors(void)
{
	static const char *const kind[] = { "", "connect failed", "connection closed",
		"malformed HTTP", "unreadable JSON", "unexpected job state",
		"a new plan on a job the kill did not touch" };
	uint64_t total = 0, req = 0, conns = 0, closes = 0;

	for (int i = 0; i < P.nproc; i++) {
		for (uint32_t e = 0; e < P.fin[i].nerr; e++) {
			const struct bm_err *x = &P.fin[i].err[e];
			if (!total)
				printf("\nunexpected answers (process: request: what x count, e.g.):\n");
			if (x->status < 0)
				printf("  %d: %s: %s x%u (%s)\n", i, what_name[x->what], kind[-x->status],
				       x->count, x->sample);
			else
				printf("  %d: %s: HTTP %d x%u (%s)\n", i, what_name[x->what], x->status,
				       x->count, x->sample);
			total += x->count;
		}
		total += P.fin[i].err_overflow;
		req += P.fin[i].requests;
		conns += P.fin[i].connects;
		closes += P.fin[i].idle_closes;
		if (!P.got[i]['F'])
			printf("process %d gave no figures\n", i);
	}
	printf("\nthis tool: %llu requests, %llu connections opened, %llu kept connections closed "
	       "by the manager while idle\n", (unsigned long long)req, (unsigned long long)conns,
	       (unsigned long long)closes);
	if (P.fin[0].hb_max_s > 0)        /* the manager holds one half its dead time at most */
		printf("the longest heartbeat (sent -> answered): %.1f ms, %s, at %s %+.2f s\n",
		       P.fin[0].hb_max_s * 1000.0, P.fin[0].hb_max_switch, P.t0 ? "T0" : "the start",
		       P.fin[0].hb_max_at - (P.t0 ? P.t0 : cfg.start));
	return total;
}

static int parent_run(void)
{
	struct bm_run r = { .sw = -1, .affected = calloc((size_t)cfg.njobs, sizeof(uint32_t)) };
	char cpu[160] = "unknown CPU", line[256];
	const char *failed;
	FILE *f = fopen("/proc/cpuinfo", "r");
	int rc = 0;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
			snprintf(cpu, sizeof(cpu), "%s", strchr(line, ':') + 2);
			cpu[strcspn(cpu, "\n")] = 0;
			break;
		}
	if (f)
		fclose(f);
	printf("inca-bench-manager: %u ranks in %d jobs, %d switches (%d leaves, %d spines, %d "
	       "hosts a leaf), %d processes, manager %s\nmachine: %s, %ld cores online\n",
	       cfg.nranks, cfg.njobs, cfg.leaves + cfg.spines, cfg.leaves, cfg.spines,
	       cfg.hosts_per_leaf, P.nproc, cfg.url, cpu, sysconf(_SC_NPROCESSORS_ONLN));
	fflush(stdout);
	if (!r.affected)
		return 1;
	parent_phase(PH_SWITCHES);
	failed = run_phases(&r, &rc);
	parent_phase(PH_END);
	if (failed && rc == -EPIPE)
		fprintf(stderr, "inca-bench-manager: a process ended early\n");
	parent_tell(-1, 'Q', NULL, 0);
	parent_wait('F', -1, now_s() + 5.0);

	uint32_t not_ready = r.tb0 ? report_ready(&r) : cfg.nranks;
	if (r.idle_done)
		report_idle(&r);
	bool moved = r.victim[0] && report_kill(&r);
	report_samples();
	uint64_t errs = report_errors();
	if (!failed && not_ready)
		failed = "b) not every rank got ready";
	if (!failed && !moved)
		failed = "d) not every affected rank moved";
	if (!failed && errs)
		failed = "unexpected answers (above)";
	if (failed)
		printf("\nFAIL: %s%s\n", failed, rc == -ETIMEDOUT ? " (--time-limit)" : "");
	else
		printf("\nPASS: every phase done, every rank ready, every affected rank moved, no "
		       "unexpected answer\n");
	free(r.affected);
	return failed ? 1 : 0;
}

/* ---- options ---- */

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: inca-bench-manager --url http://127.0.0.1:PORT --admin-token-file F\n"
		"         (--tenant-token T | --tenant-token-file F) --jobs SPEC [options]\n"
		"\n"
		"Plays ranks and switch agents against a running inca-manager over HTTP/1.1\n"
		"keep-alive: a) every switch heartbeats, b) every rank registers and waits for\n"
		"ready, c) idle while every rank holds its plan poll, d) the root spine of the\n"
		"largest job stops heartbeating and every job on it moves to a new plan.\n"
		"tests/bench/run-manager-scale.sh makes the fabric and starts the manager.\n"
		"\n"
		"  --jobs SPEC            SIZExCOUNT,... e.g. 4096x1,2048x2,8x32; job ids jSIZE-K;\n"
		"                         hosts in rank order: host h is 10.(1+h/65536).(h/256%%256).(h%%256)\n"
		"  --hosts-per-leaf H     (default 32)  --leaves L (default: ranks / H, rounded up)\n"
		"  --spines S             (default 16); the switches are leafN and spineN\n"
		"  --procs P              processes sharing the connections (default 4)\n"
		"  --idle S               seconds of idle measurement (default 5)\n"
		"  --manager-pid PID      the manager's CPU, memory, threads, fds from /proc\n"
		"  --time-limit S         every process stops by then (default 240); a phase not\n"
		"                         done by then fails the run\n"
		"  --help                 this text\n"
		"Exit status: 0 every phase done and every figure as expected, 1 not, 2 usage.\n");
}

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "inca-bench-manager: %s: expected a number %g..%g, got '%s'\n", opt,
			lo, hi, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
	double v;
	int rc = parse_num(opt, s, lo, hi, &v);

	if (!rc && v != (int)v) {
		fprintf(stderr, "inca-bench-manager: %s: expected a whole number, got '%s'\n", opt, s);
		return -EINVAL;
	}
	if (!rc)
		*out = (int)v;
	return rc;
}

static int parse_jobs(const char *spec)
{
	char *copy = strdup(spec), *tok, *save = NULL;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned size, count, k = 0;
		int n = 0;
		if (sscanf(tok, "%ux%u%n", &size, &count, &n) != 2 || tok[n] || !size || !count ||
		    cfg.nranks + (uint64_t)size * count > 65536) {
			fprintf(stderr, "inca-bench-manager: --jobs: expected SIZExCOUNT,... (65536 "
				"ranks at most in all), got '%s'\n", tok);
			free(copy);
			return -EINVAL;
		}
		for (int q = 0; q < cfg.njobs; q++)
			k += cfg.jobs[q].size == size;     /* SIZE given twice: numbered on */
		struct bm_job *j = realloc(cfg.jobs, sizeof(*j) * (size_t)(cfg.njobs + (int)count));
		if (!j) {
			free(copy);
			return -ENOMEM;
		}
		cfg.jobs = j;
		for (unsigned c = 0; c < count; c++, cfg.njobs++, cfg.nranks += size) {
			j = &cfg.jobs[cfg.njobs];
			snprintf(j->id, sizeof(j->id), "j%u-%u", size, k + c);
			j->size = size;
		}
	}
	free(copy);
	return cfg.njobs ? 0 : -EINVAL;
}

static int parse_url(const char *url)
{
	char host[64];
	unsigned port;
	int n = 0;

	if (sscanf(url, "http://%63[0-9.]:%5u%n", host, &port, &n) != 2 ||
	    (url[n] && strcmp(url + n, "/")) || !port || port > 65535 ||
	    inet_pton(AF_INET, host, &cfg.addr.sin_addr) != 1) {
		fprintf(stderr, "inca-bench-manager: --url: expected http://IPV4:PORT (plain HTTP), "
			"got '%s'\n", url);
		return -EINVAL;
	}
	cfg.addr.sin_family = AF_INET;
	cfg.addr.sin_port = htons((uint16_t)port);
	snprintf(cfg.url, sizeof(cfg.url), "http://%s:%u", host, port);
	snprintf(cfg.host_hdr, sizeof(cfg.host_hdr), "%s:%u", host, port);
	return 0;
}

/* The options into cfg; 0, or the exit status. */
static int parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "url", 1, 0, 'u' }, { "admin-token-file", 1, 0, 'a' },
		{ "tenant-token", 1, 0, 't' }, { "tenant-token-file", 1, 0, 'T' },
		{ "jobs", 1, 0, 'j' }, { "hosts-per-leaf", 1, 0, 'H' }, { "leaves", 1, 0, 'L' },
		{ "spines", 1, 0, 'S' }, { "procs", 1, 0, 'p' }, { "idle", 1, 0, 'i' },
		{ "time-limit", 1, 0, 'l' }, { "manager-pid", 1, 0, 'm' }, { "help", 0, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *admin_file = NULL, *tenant_file = NULL, *tenant = NULL;
	int c, rc = 0, leaves = 0, pid = 0;
	char err[512];

	while (!rc && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'u': rc = parse_url(optarg); break;
		case 'a': admin_file = optarg; break;
		case 't': tenant = optarg; break;
		case 'T': tenant_file = optarg; break;
		case 'j': rc = parse_jobs(optarg); break;
		case 'H': rc = parse_int("--hosts-per-leaf", optarg, 1, 65536, &cfg.hosts_per_leaf); break;
		case 'L': rc = parse_int("--leaves", optarg, 1, 1024, &leaves); break;
		case 'S': rc = parse_int("--spines", optarg, 0, 256, &cfg.spines); break;
		case 'p': rc = parse_int("--procs", optarg, 1, BM_MAX_PROCS, &cfg.procs); break;
		case 'i': rc = parse_num("--idle", optarg, 0.5, 3600, &cfg.idle_s); break;
		case 'l': rc = parse_num("--time-limit", optarg, 1, 86400, &cfg.time_limit); break;
		case 'm': rc = parse_int("--manager-pid", optarg, 1, 1 << 22, &pid); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
	}
	if (rc)
		return 2;
	cfg.mgr_pid = (pid_t)pid;
	if (optind < argc || !cfg.url[0] || !admin_file || !cfg.njobs || !tenant == !tenant_file) {
		fprintf(stderr, "inca-bench-manager: --url, --admin-token-file, --jobs and one of "
			"--tenant-token, --tenant-token-file are required (try --help)\n");
		return 2;
	}
	if (inca_read_token_file(admin_file, cfg.admin, sizeof(cfg.admin), err, sizeof(err)) ||
	    (tenant_file && inca_read_token_file(tenant_file, cfg.tenant, sizeof(cfg.tenant), err,
						 sizeof(err)))) {
		fprintf(stderr, "inca-bench-manager: %s\n", err);
		return 2;
	}
	if (tenant && (strlen(tenant) < 16 || strlen(tenant) >= sizeof(cfg.tenant) ||
		       strpbrk(tenant, " \r\n"))) {
		fprintf(stderr, "inca-bench-manager: --tenant-token: expected 16..255 characters\n");
		return 2;
	}
	if (tenant)
		snprintf(cfg.tenant, sizeof(cfg.tenant), "%s", tenant);
	cfg.leaves = (int)((cfg.nranks + (uint32_t)cfg.hosts_per_leaf - 1) /
			   (uint32_t)cfg.hosts_per_leaf);
	if ((leaves && leaves != cfg.leaves) || cfg.leaves > 1024) {
		fprintf(stderr, "inca-bench-manager: %u ranks at %d hosts a leaf take %d leaves%s\n",
			cfg.nranks, cfg.hosts_per_leaf, cfg.leaves,
			cfg.leaves > 1024 ? ", more than this tool plays (1024)" : ", not --leaves");
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct rlimit rl;
	uint64_t need;
	int rc = parse_options(argc, argv);

	if (rc)
		return rc;
	P.nproc = cfg.procs < (int)cfg.nranks ? cfg.procs : (int)cfg.nranks;
	/* each process holds its ranks' connections, process 0 the switches' too */
	need = (cfg.nranks + (uint32_t)P.nproc - 1) / (uint32_t)P.nproc +
	       (uint64_t)(cfg.leaves + cfg.spines) + 64;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < need) {
		rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur < need) {
		fprintf(stderr, "inca-bench-manager: a process needs %llu descriptors, the limit is "
			"%llu: give more --procs\n", (unsigned long long)need,
			(unsigned long long)rl.rlim_cur);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	cfg.start = now_s();
	cfg.deadline = cfg.start + cfg.time_limit;
	fflush(stdout);
	for (int i = 0; i < P.nproc; i++) {
		uint32_t first = (uint32_t)((uint64_t)cfg.nranks * (uint64_t)i / (uint64_t)P.nproc);
		uint32_t end = (uint32_t)((uint64_t)cfg.nranks * (uint64_t)(i + 1) / (uint64_t)P.nproc);
		int down[2], up[2];

		P.js[i] = calloc((size_t)cfg.njobs, sizeof(*P.js[i]));
		if (!P.js[i] || pipe2(down, O_CLOEXEC) || pipe2(up, O_CLOEXEC) ||
		    (P.pid[i] = fork()) < 0) {
			fprintf(stderr, "inca-bench-manager: %s\n", strerror(errno));
			P.nproc = i;
			break;
		}
		if (P.pid[i] == 0) {
			close(down[1]);
			close(up[0]);
			for (int k = 0; k < i; k++) {
				close(P.cmd[k]);
				close(P.rep[k]);
			}
			_exit(child_run(i, first, end - first, down[0], up[1]));
		}
		close(down[0]);
		close(up[1]);
		P.cmd[i] = down[1];
		P.rep[i] = up[0];
	}
	rc = P.nproc ? parent_run() : 1;
	/* every process stops by its own deadline: wait for them, and end one
	 * still there 5 s later */
	double until = (now_s() > cfg.deadline ? now_s() : cfg.deadline) + 5.0;
	for (int i = 0; i < P.nproc; i++) {
		int st;
		while (waitpid(P.pid[i], &st, WNOHANG) == 0) {
			if (now_s() > until) {
				kill(P.pid[i], SIGKILL);
				waitpid(P.pid[i], &st, 0);
				break;
			}
			usleep(20000);
		}
	}
	return rc;
}
