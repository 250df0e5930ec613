/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The jobs' routes: a rank registers (the job is created with its first
 * rank; when all are in, plans.c gives it its first plan: its tree, or the
 * host ring), asks for its group and plan (held until the job is ready or
 * on the ring, or until its plan moves on), acknowledges a new plan or
 * says its tree stopped answering (plans.c), renews the lease, leaves; a
 * job is listed, shown and deleted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

int mgr_api_register(struct mgr_req *q, const struct mgr_route_args *args)
{
	const char *id = args->id;
	struct mgr *m = q->m;
	struct mgr_job *j = mgr_job_find(m, id), *other;
	uint32_t rank, size, qpn = 0, ring_port = 0, ip, ring_ip = 0, window, elems, mtu;
	uint32_t nrails = 0, rail = 0;
	int tenant = q->tenant, host, who;
	struct inca_json in;
	const char *tname;
	char a[16];

	if (!mgr_valid_name(id))
		return mgr_error(q, 400, "job id: expected 1..47 characters of a-z A-Z 0-9 - _ .");
	if (!json_is_object(q->body))
		return mgr_error(q, 400, "body: expected a JSON object {rank, size, ip[, qpn, ring_port]}");
	inca_json_init(&in, NULL);
	window = m->default_window;
	elems = m->default_elems;
	mtu = m->default_mtu;
	if (inca_json_get_u32(&in, q->body, "size", 1, MGR_MAX_JOB_RANKS, &size) ||
	    inca_json_get_u32(&in, q->body, "rank", 0, size - 1, &rank) ||
	    inca_json_opt_u32(&in, q->body, "window", 1, AGG_MAX_WINDOW, &window) ||
	    inca_json_opt_u32(&in, q->body, "elems_per_pkt", 1, AGG_MAX_ELEMS, &elems) ||
	    inca_json_opt_u32(&in, q->body, "mtu", 0, AGG_MAX_PAYLOAD, &mtu))
		return mgr_error(q, 400, "%s", in.msg);
	/* rails: the family's size, this job's place in it (plans.c) */
	if (inca_json_opt_u32(&in, q->body, "rails", 1, MGR_MAX_RAILS, &nrails) ||
	    inca_json_opt_u32(&in, q->body, "rail", 0, nrails ? nrails - 1 : 0, &rail))
		return mgr_error(q, 400, "%s", in.msg);
	if (nrails < 2)
		nrails = 0;
	if (rail) {
		char want[MGR_NAME_LEN + 16];
		size_t il = strlen(id);
		snprintf(want, sizeof(want), ".rail%u", rail);
		if (il <= strlen(want) || strcmp(id + il - strlen(want), want))
			return mgr_error(q, 400, "rail %u: expected the job id <job>%s, got %s",
					 rail, want, id);
	}
	/* a rank may bring its own, else the manager assigns one */
	if (inca_json_opt_u32(&in, q->body, "qpn", 2, AGG_QPN_MASK, &qpn) ||
	    inca_json_opt_u32(&in, q->body, "ring_port", 1, 65535, &ring_port))
		return mgr_error(q, 400, "%s (or none: the manager assigns one)", in.msg);
	if (mgr_parse_ip(json_string_value(json_object_get(q->body, "ip")), &ip))
		return mgr_error(q, 400, "ip: expected the rank's IPv4 address");
	if (json_object_get(q->body, "ring_ip") &&
	    mgr_parse_ip(json_string_value(json_object_get(q->body, "ring_ip")), &ring_ip))
		return mgr_error(q, 400, "ring_ip: expected the IPv4 address of the rank's fallback "
			     "ring");
	host = mgr_topo_host_by_ip(&m->topo, ip);
	mgr_ip_str(ip, a);
	if (host < 0)
		return mgr_error(q, 400, "ip %s is not a host of the topology", a);
	if ((tname = json_string_value(json_object_get(q->body, "tenant")))) {
		int t = -1;
		for (int i = 0; i < m->topo.ntenants; i++)
			if (!strcmp(m->topo.tenants[i].name, tname))
				t = i;
		if (t < 0)
			return mgr_error(q, 400, "tenant '%s' is not in the topology", tname);
		if (q->tenant >= 0 && t != q->tenant)
			return mgr_error(q, 403, "your token is tenant %s's, not %s's",
				     m->topo.tenants[q->tenant].name, tname);
		tenant = t;
	}
	if (tenant < 0)
		return mgr_error(q, 400, "tenant: the admin token must name the job's tenant");
	if (!j) {
		/* a job's rails are one job: a rail of a job here (or on its
		 * way) makes none */
		struct mgr_job probe = { .tenant = tenant, .nrails = (int)nrails, .rail = (int)rail };
		struct mgr_job *f[MGR_MAX_RAILS];
		bool family = false;
		memcpy(probe.id, id, strlen(id) + 1);   /* mgr_valid_name: it fits */
		int nf = mgr_job_family(m, &probe, f);
		for (int l = 0; nrails > 1 && l < nf; l++) {
			if (!f[l] || f[l] == &probe)
				continue;
			if (f[l]->size != (int)size)
				return mgr_error(q, 409, "job %s has %d ranks, its rail %s %u (a rail has "
						 "one rank per host)", f[l]->id, f[l]->size, id, size);
			family = true;
		}
		unsigned njobs = mgr_tenant_jobs(m, tenant);
		if (!family && njobs >= m->topo.tenants[tenant].max_jobs)
			return mgr_error(q, 409, "quota: tenant %s has %u jobs, its maximum",
				     m->topo.tenants[tenant].name, njobs);
	} else {
		if (!mgr_may_touch(q, j))
			return mgr_error(q, 403, "job %s belongs to tenant %s", id,
				     m->topo.tenants[j->tenant].name);
		if ((int)size != j->size)
			return mgr_error(q, 409, "job %s has size %d, not %u", id, j->size, size);
		if ((int)nrails != j->nrails || (int)rail != j->rail)
			return mgr_error(q, 409, "job %s is rail %d of %d, not rail %u of %u", id,
					 j->rail, j->nrails ? j->nrails : 1, rail, nrails ? nrails : 1);
		if (j->state == MGR_JOB_FAILED)      /* only saved by an older manager */
			return mgr_error(q, 409, "job %s failed: %s (delete it and create it again)",
				     id, j->reason);
		/* registering again keeps what the rank was given */
		struct mgr_rank *rk = &j->ranks[rank];
		if (rk->registered && rk->ip != ip)
			return mgr_error(q, 409, "job %s rank %u is registered with another address",
				     id, rank);
		if (rk->registered && qpn && rk->qpn != qpn)
			return mgr_error(q, 409, "qpn: job %s rank %u is registered with QPN %u", id,
				     rank, rk->qpn);
		if (rk->registered && ring_port && rk->ring_port && rk->ring_port != ring_port)
			return mgr_error(q, 409, "ring_port: job %s rank %u is registered with port %u",
				     id, rank, rk->ring_port);
		if (rk->registered) {
			qpn = rk->qpn;
			ring_port = ring_port ? ring_port : rk->ring_port;
		}
	}
	/* the QPN and ring port: the rank's own if free on its address, else one
	 * the manager picks */
	if (qpn && (other = mgr_rank_value_holder(m, false, ip, qpn, j, (int)rank, &who)))
		return mgr_error(q, 409, "qpn: job %s rank %d already uses %s QPN %u", other->id, who,
			     a, qpn);
	if (!qpn && mgr_rank_value_free(m, false, ip, j, (int)rank, MGR_QPN_FIRST, AGG_QPN_MASK, &qpn))
		return mgr_error(q, 409, "qpn: no free QPN on %s", a);
	uint32_t raddr = ring_ip ? ring_ip : ip;
	char ra[16];
	mgr_ip_str(raddr, ra);
	if (ring_port && (other = mgr_rank_value_holder(m, true, raddr, ring_port, j, (int)rank, &who)))
		return mgr_error(q, 409, "ring_port: job %s rank %d already uses %s port %u",
			     other->id, who, ra, ring_port);
	if (!ring_port && mgr_rank_value_free(m, true, raddr, j, (int)rank, MGR_RING_PORT_FIRST, 65535,
				     &ring_port))
		return mgr_error(q, 409, "ring_port: no free TCP port on %s from %u up", ra,
			     MGR_RING_PORT_FIRST);
	if (!j) {
		j = calloc(1, sizeof(*j));
		if (!j || !(j->ranks = calloc(size, sizeof(*j->ranks)))) {
			free(j);
			return mgr_error(q, 500, "out of memory");
		}
		memcpy(j->id, id, strlen(id) + 1);   /* mgr_valid_name: it fits */
		j->dirty_lo = j->dirty_hi = -1;
		j->tenant = tenant;
		j->size = (int)size;
		j->window = window;
		j->elems_per_pkt = elems;
		j->mtu = mtu;
		j->nrails = (int)nrails;
		j->rail = (int)rail;
		j->created = m->now();
		j->next = m->jobs;
		m->jobs = j;
	}
	struct mgr_rank *rk = &j->ranks[rank];
	rk->registered = true;
	rk->ip = ip;
	rk->qpn = qpn;
	rk->ring_ip = ring_ip;
	rk->ring_port = ring_port;
	rk->host = host;
	mgr_rank_touched(j, (int)rank);
	j->lease_until = m->now() + m->lease_s;
	int n = 0;
	for (int r = 0; r < j->size; r++)
		n += j->ranks[r].registered;
	/* all in (with rails: every rank of every rail): the first plan, its
	 * tree or (refused, full, no path) the host ring, which is a warning
	 * for the ranks, not an error */
	if (n == j->size && j->state == MGR_JOB_WAITING && mgr_family_complete(m, j)) {
		struct mgr_job *f[MGR_MAX_RAILS];
		int nf = mgr_job_family(m, j, f);
		for (int l = 0; l < nf; l++)
			if (!f[l]->plan)      /* those joining now, not the rails running */
				f[l]->registered_at = m->now();
		mgr_job_replan(m, j, false);
	}
	mgr_job_check_ready(m, j);
	mgr_save(m);
	json_t *o = mgr_job_json(m, j, false);
	json_object_set_new(o, "qpn", json_integer(qpn));
	json_object_set_new(o, "ring_port", json_integer(ring_port));
	/* the ranks' state requests renew the lease: how often they must */
	json_object_set_new(o, "lease_s", json_real(m->lease_s));
	return mgr_reply(q, 200, o);
}

/* A rank's state request is answered once its job is ready, on the ring,
 * failed or gone; with plan_ver, once the plan moved on from it. A rank
 * that asks is alive: the job's lease goes on. */
int mgr_api_rank(struct mgr_req *q, const struct mgr_route_args *a)
{
	struct mgr_job *j = a->job;
	int r = (int)a->rank;
	json_t *o;

	if (!q->park || !q->park->resumed)
		q->m->rank_polls++;
	j->lease_until = q->m->now() + q->m->lease_s;
	if (mgr_hold(q, j, 0, 0, q->plan_ver, q->wait_ms))
		return MGR_PARKED;
	/* a plan cut and replaced since this rank's view: that one first,
	 * without a group (its tree is gone); the rank asks again at once */
	const struct mgr_past_plan *pp = mgr_job_unseen_cut(j, q->plan_ver);
	o = json_pack("{s:s, s:s, s:o}", "state", mgr_job_state_name(j->state), "reason",
		      pp ? pp->reason : j->reason, "plan",
		      pp ? mgr_past_plan_json(pp) : mgr_plan_json(j));
	if (!pp && (j->state == MGR_JOB_READY || j->state == MGR_JOB_RING))
		json_object_set_new(o, "group", mgr_rank_json(q->m, j, r, q->members));
	return mgr_reply(q, 200, o);
}

/* {plan, next, first, keep}: where the rank is as it takes the new plan. */
int mgr_api_rank_ack(struct mgr_req *q, const struct mgr_route_args *a)
{
	uint32_t plan, next, first, keep;
	struct inca_json in;
	char why[300];
	int st;

	inca_json_init(&in, NULL);
	if (!json_is_object(q->body) ||
	    inca_json_get_u32(&in, q->body, "plan", 1, UINT32_MAX, &plan) ||
	    inca_json_get_u32(&in, q->body, "next", 0, UINT32_MAX, &next) ||
	    inca_json_get_u32(&in, q->body, "first", 0, UINT32_MAX, &first) ||
	    inca_json_get_u32(&in, q->body, "keep", 0, UINT32_MAX, &keep))
		return mgr_error(q, 400, "%s", json_is_object(q->body) ? in.msg :
				 "body: expected {plan, next, first, keep}");
	st = mgr_job_ack(q->m, a->job, (int)a->rank, plan, next, first, keep, why, sizeof(why));
	if (st)
		return mgr_error(q, st, "%s", why);
	mgr_save(q->m);
	return mgr_reply(q, 200, json_pack("{s:o}", "plan", mgr_plan_json(a->job)));
}

/* {plan, ms}: the rank saw no results from its tree for ms. */
int mgr_api_rank_stall(struct mgr_req *q, const struct mgr_route_args *a)
{
	uint32_t plan, ms;
	struct inca_json in;

	inca_json_init(&in, NULL);
	if (!json_is_object(q->body) ||
	    inca_json_get_u32(&in, q->body, "plan", 1, UINT32_MAX, &plan) ||
	    inca_json_get_u32(&in, q->body, "ms", 0, UINT32_MAX, &ms))
		return mgr_error(q, 400, "%s", json_is_object(q->body) ? in.msg :
				 "body: expected {plan, ms}");
	q->m->stall_reports++;
	mgr_job_stall(q->m, a->job, (int)a->rank, plan, ms);
	mgr_save(q->m);
	return mgr_reply(q, 200, json_pack("{s:o}", "plan", mgr_plan_json(a->job)));
}

int mgr_api_jobs(struct mgr_req *q, const struct mgr_route_args *a)
{
	json_t *arr = json_array();

	(void)a;
	(void)a;
	for (struct mgr_job *j = q->m->jobs; j; j = j->next)
		if (mgr_may_touch(q, j))
			json_array_append_new(arr, mgr_job_json(q->m, j, false));
	return mgr_reply(q, 200, arr);
}

int mgr_api_job_show(struct mgr_req *q, const struct mgr_route_args *a)
{
	return mgr_reply(q, 200, mgr_job_json(q->m, a->job, true));
}

int mgr_api_job_delete(struct mgr_req *q, const struct mgr_route_args *a)
{
	mgr_log("job %s deleted", a->id);
	mgr_job_teardown(q->m, a->job);
	mgr_save(q->m);
	return mgr_reply(q, 200, json_pack("{s:s}", "deleted", a->id));
}

int mgr_api_job_renew(struct mgr_req *q, const struct mgr_route_args *a)
{
	struct mgr_job *j = a->job;

	j->lease_until = q->m->now() + q->m->lease_s;
	return mgr_reply(q, 200, json_pack("{s:s, s:s, s:f}", "state",
					   mgr_job_state_name(j->state), "reason", j->reason,
					   "lease_s", q->m->lease_s));
}

int mgr_api_rank_leave(struct mgr_req *q, const struct mgr_route_args *a)
{
	struct mgr_job *j = a->job;
	bool all = true;

	j->ranks[a->rank].left = true;
	mgr_rank_touched(j, (int)a->rank);
	for (int k = 0; k < j->size; k++)
		all &= j->ranks[k].left || !j->ranks[k].registered;
	if (all) {
		mgr_log("job %s: every rank left", a->id);
		mgr_job_teardown(q->m, j);
	} else {
		mgr_job_cut_check(q->m, j);     /* the cut no longer waits for it */
	}
	mgr_save(q->m);
	return mgr_reply(q, 200, json_pack("{s:b}", "removed", all));
}
