/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The HTTP API's insides, shared by api.c (authentication, the route
 * table, dispatch), its handlers (api_jobs.c, api_switches.c, metrics.c)
 * and render.c (what they answer). A request flows one way: api.c → a
 * handler → jobs.c / alloc.c → persist.c, and the answer from render.c.
 *
 * Handlers return the HTTP status; the answer is in *q->resp. They run
 * with m->lock held; one that would wait parks the request (mgr_hold) and
 * returns MGR_PARKED, and is called again, resumed, to answer.
 */
#ifndef MGR_API_H
#define MGR_API_H

#include "mgr.h"

/* Which members a rank's group description lists: all of them (an array,
 * the static config's format), none ("members": false: a plan poll, the
 * rank has them), or its ring's (an object: "size" and, by rank, itself and
 * the next rank, all the host ring needs: a join's answer stays O(1) in a
 * job of thousands). */
enum mgr_members { MGR_MEMBERS_ALL, MGR_MEMBERS_NONE, MGR_MEMBERS_RING };

struct mgr_req {
	struct mgr *m;
	int tenant;          /* -1: admin */
	json_t *body;        /* NULL: none */
	long wait_ms;        /* ?wait_ms= (long-poll) */
	long long plan_ver;  /* ?plan_ver=; -1: none */
	enum mgr_members members;   /* ?members=: which members a group lists */
	struct mgr_parked *park;
	char **resp;
	const char **ctype;
};

/* Answer j (consumed) with status; mgr_error answers {"error", "status"}. */
int mgr_reply(struct mgr_req *q, int status, json_t *j);
__attribute__((format(printf, 3, 4)))
int mgr_error(struct mgr_req *q, int status, const char *fmt, ...);
/* Hold the request on job j (a rank's state request, plan_ver as
 * mgr_parked says) or, j NULL, on switch sw's version moving on from
 * applied, for wait_ms: true when it was parked (return MGR_PARKED), false
 * when it is to be answered now (done already, no wait, asked again after
 * a wake, or the manager stopping). */
bool mgr_hold(struct mgr_req *q, struct mgr_job *j, int sw, uint32_t applied,
	      long long plan_ver, long wait_ms);
/* Whether the request's token may see or change job j. */
bool mgr_may_touch(const struct mgr_req *q, const struct mgr_job *j);

/* render.c */
json_t *mgr_ip_json(uint32_t ip);
json_t *mgr_switch_groups_json(struct mgr *m, int s);
/* Rank r's group description, its "members" as `members` says. */
json_t *mgr_rank_json(struct mgr *m, struct mgr_job *j, int r, enum mgr_members members);
json_t *mgr_plan_json(const struct mgr_job *j);
json_t *mgr_past_plan_json(const struct mgr_past_plan *pp);
json_t *mgr_job_json(struct mgr *m, struct mgr_job *j, bool detail);
json_t *mgr_switch_json(struct mgr *m, int s, bool counters);
json_t *mgr_failures_json(struct mgr *m, unsigned n);

/* What a route's pattern matched: {name}, {id}, {rank}; and {id}'s job for
 * the routes that need one (api.c finds it and checks the token first). */
struct mgr_route_args {
	char name[MGR_NAME_LEN + 1];   /* a switch */
	char id[MGR_NAME_LEN + 1];     /* a job */
	unsigned rank;
	struct mgr_job *job;
};

/* The handlers, one per route (api.c's table). */
typedef int mgr_handler(struct mgr_req *q, const struct mgr_route_args *a);
/* api_jobs.c */
mgr_handler mgr_api_jobs, mgr_api_register, mgr_api_job_show, mgr_api_job_delete,
	mgr_api_job_renew, mgr_api_rank, mgr_api_rank_leave, mgr_api_rank_ack,
	mgr_api_rank_stall;
/* api_switches.c */
mgr_handler mgr_api_heartbeat, mgr_api_switches, mgr_api_groups, mgr_api_topology,
	mgr_api_failures;
/* metrics.c */
mgr_handler mgr_api_metrics;

#endif /* MGR_API_H */
