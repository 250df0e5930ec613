/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Plans: where a job's collectives run, and the cut at which every rank
 * moves to a new one (docs/manager.md, "Plans").
 *
 * A plan is the job's tree (in-network) or the ranks' host ring when no
 * tree can be built (a quota or capacity refusal, no path, a switch down).
 * A job gets a new plan when a switch of its tree stops heartbeating or
 * reports its port towards the tree's next switch down (a tree that
 * avoids it, else the ring), when a rank sees its tree stop answering
 * while the switches still heartbeat dead_after later (the ring; a tree
 * again 10 s on, twice as long after each tree that stalled within a
 * minute), and when a job on the ring can have a tree again (capacity
 * freed, a switch or link back).
 *
 * Every rank acknowledges a new plan with where it is: the next collective
 * it would start (it starts none from there until the cut is known), the
 * first it has not completed, and the first it can replay from the inputs
 * it keeps. With every rank's answer the manager makes the cut: cut_seq,
 * the highest "next" (no rank has started a collective from there); the
 * collectives before it run on the ring, those from it on on the new plan.
 * When the old plan was a tree that died (plan_dead), the collectives from
 * cut_from, the lowest "first", are run again on the ring: a rank that
 * completed some of them replays them from the inputs it kept (so that the
 * others complete theirs) and keeps its results. So every rank runs every
 * collective on the same path.
 *
 * Collective numbers are libinca's 32-bit sequence (mod 2^32): compared as
 * differences.
 *
 * Rails: the jobs of a family (a job's rails, struct mgr_job) are planned
 * as one. Their first plan waits for every rank of every rail; a rail that
 * cannot have a tree puts every rail on the ring (never some in-network
 * and some not), and they come back together; a stall on one moves all.
 * A rail whose tree fails gets a new one alone when every rail keeps one.
 * Every rail that moves acknowledges its own plan, and the cut is made
 * once all of them have, from all their answers: one collective for the
 * whole job (libinca numbers a family's collectives alike on every rail:
 * a rail that does not carry one skips its number).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgr.h"

/* a - b as a signed distance on the 32-bit circle */
static int32_t seq_diff(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b);
}

void mgr_job_release(struct mgr *m, struct mgr_job *j)
{
	for (int g = 0; g < j->ngroups; g++)
		m->sw[j->groups[g].sw].version++;
	if (j->ngroups)
		m->capacity_gen++;
	free(j->groups);
	j->groups = NULL;
	j->ngroups = 0;
	mgr_tree_free(&j->tree);
	j->have_tree = false;
}

/* A new plan for j begins: epoch, time, no cut yet (plan 1 needs none),
 * every rank's acknowledgement to come; waiting ranks are woken by
 * plan_ver. dead: the plan before it was a tree that failed. */
static void plan_begin(struct mgr *m, struct mgr_job *j, bool dead)
{
	if (j->plan > 1 && j->cut_done && j->cut_ver) {
		if (j->npast == MGR_PAST_PLANS)
			memmove(&j->past[0], &j->past[1], --j->npast * sizeof(j->past[0]));
		struct mgr_past_plan *pp = &j->past[j->npast++];
		pp->epoch = j->plan;
		pp->cut_seq = j->cut_seq;
		pp->cut_from = j->cut_from;
		pp->cut_ver = j->cut_ver;
		pp->ring = j->plan_ring;
		pp->dead = j->plan_dead;
		snprintf(pp->cut_error, sizeof(pp->cut_error), "%s", j->cut_error);
		snprintf(pp->reason, sizeof(pp->reason), "%s", j->reason);
	}
	j->plan++;
	j->plan_at = m->now();
	j->stall_at = 0;
	j->plan_dead = dead;
	j->cut_done = j->plan == 1;        /* the first plan runs from the start */
	j->cut_seq = j->cut_from = 0;
	j->cut_error[0] = 0;
	j->plan_ver++;
	for (int r = 0; r < j->size; r++)
		j->ranks[r].ack_plan = 0;
}

/* ---- families ---- */

/* The length of the family's name: "<job>" of "<job>.rail<l>". */
static size_t base_len(const struct mgr_job *j)
{
	const char *d = j->rail > 0 ? strrchr(j->id, '.') : NULL;

	return d ? (size_t)(d - j->id) : strlen(j->id);
}

int mgr_job_family(struct mgr *m, struct mgr_job *j, struct mgr_job **f)
{
	size_t bl = base_len(j);

	if (j->nrails < 2) {
		f[0] = j;
		return 1;
	}
	for (int l = 0; l < j->nrails; l++)
		f[l] = NULL;
	for (struct mgr_job *k = m->jobs; k; k = k->next)
		if (k->nrails == j->nrails && k->tenant == j->tenant && k->rail < k->nrails &&
		    base_len(k) == bl && !strncmp(k->id, j->id, bl))
			f[k->rail] = k;
	return j->nrails;
}

/* Every rank of j registered: a rail that is still coming (deleted and
 * joining again) takes no part in its family's plans until then. */
static bool all_in(const struct mgr_job *j)
{
	for (int r = 0; r < j->size; r++)
		if (!j->ranks[r].registered)
			return false;
	return true;
}

bool mgr_family_complete(struct mgr *m, struct mgr_job *j)
{
	struct mgr_job *f[MGR_MAX_RAILS];
	int n = mgr_job_family(m, j, f);

	for (int l = 0; l < n; l++)
		if (!f[l] || !all_in(f[l]))
			return false;
	return true;
}

unsigned mgr_tenant_jobs(struct mgr *m, int tenant)
{
	unsigned n = 0;

	for (struct mgr_job *k = m->jobs; k; k = k->next) {
		struct mgr_job *f[MGR_MAX_RAILS];
		int nf, l0;
		if (k->tenant != tenant)
			continue;
		nf = mgr_job_family(m, k, f);
		l0 = mgr_family_first(f, nf);
		n += l0 < nf && f[l0] == k;   /* a family at its first rail here */
	}
	return n;
}

/* Trees for the jobs of f marked in want (the others keep theirs): all of
 * them, or none (those made are released again, quietly: the capacity
 * they held for a moment is no news for jobs on the ring). false: *bad is
 * the rail refused, its reason says why. */
static bool allocate_all(struct mgr *m, struct mgr_job **f, int n, const bool *want, int *bad)
{
	uint64_t gen = m->capacity_gen;
	enum mgr_job_state st[MGR_MAX_RAILS];
	uint32_t gid[MGR_MAX_RAILS];

	for (int l = 0; l < n; l++) {
		if (!f[l] || !want[l])
			continue;
		st[l] = f[l]->state;
		gid[l] = f[l]->group_id;
		if (!mgr_job_allocate(m, f[l]))
			continue;
		/* the ones made go again, as they were (their state, group) */
		*bad = l;
		for (int k = 0; k < l; k++)
			if (f[k] && want[k]) {
				mgr_job_release(m, f[k]);
				f[k]->state = st[k];
				f[k]->group_id = gid[k];
			}
		m->capacity_gen = gen;
		return false;
	}
	return true;
}

/* The host ring for j (its new plan begun): why it went there. */
static void to_ring(struct mgr *m, struct mgr_job *j, const char *why)
{
	snprintf(j->reason, sizeof(j->reason), "on the host ring: %.230s", why);
	j->plan_ring = true;
	j->state = MGR_JOB_RING;
	m->plans_ring++;
}

void mgr_job_replan(struct mgr *m, struct mgr_job *j, bool dead)
{
	struct mgr_job *f[MGR_MAX_RAILS];
	bool want[MGR_MAX_RAILS] = { false };
	char why[sizeof(j->reason)];
	int n = mgr_job_family(m, j, f), bad = 0;

	/* a rail that joins again (deleted, or its lease gone) while the
	 * others run on the ring joins them there: the job comes back
	 * in-network as one, when mgr_jobs_retry says (after a stall, not
	 * before its back-off) */
	for (int l = 0; n > 1 && !j->plan && l < n; l++)
		if (f[l] && f[l] != j && f[l]->plan && f[l]->plan_ring) {
			plan_begin(m, j, false);
			snprintf(why, sizeof(why), "every rail: on the host ring with the job's "
				 "other rails (job %.47s: %.120s)", f[l]->id, f[l]->reason);
			to_ring(m, j, why);
			j->retry_at = f[l]->retry_at;
			j->stalls = f[l]->stalls;
			return;
		}
	/* the rails that need a tree: this one, any without one (the first
	 * plan: all of them); their new plans begin (the old ones go into
	 * their past with their reasons) */
	for (int l = 0; l < n; l++) {
		if (f[l] && f[l] != j && !all_in(f[l]))
			f[l] = NULL;       /* still coming: its first plan when it is in */
		want[l] = f[l] && (f[l] == j || !f[l]->ngroups);
		/* a rail released with j (their trees failed together) moves
		 * from a tree that failed too */
		if (want[l])
			plan_begin(m, f[l], f[l] == j ? dead : f[l]->plan && !f[l]->plan_ring);
	}
	if (allocate_all(m, f, n, want, &bad)) {
		for (int l = 0; l < n; l++) {
			if (!want[l])
				continue;
			f[l]->plan_ring = false;
			m->plans_tree++;
		}
		if (dead)
			m->rebuilds++;
		return;
	}
	/* one rail without a tree: every rail on the ring; those that keep a
	 * tree move from it as from a tree that failed (what they completed
	 * on it and another rank did not runs again on the ring) */
	snprintf(why, sizeof(why), "%s", f[bad]->reason);
	for (int l = 0; l < n; l++) {
		if (!f[l])
			continue;
		if (!want[l]) {
			mgr_job_release(m, f[l]);
			plan_begin(m, f[l], true);
		}
		if (n == 1) {
			to_ring(m, f[l], why);
			continue;
		}
		char rw[sizeof(j->reason)];
		snprintf(rw, sizeof(rw), "every rail: rail %d (job %s): %.180s", bad, f[bad]->id,
			 why);
		to_ring(m, f[l], rw);
	}
	if (n == 1)
		mgr_failure(m, j->id, "job on the host ring (plan %u): %s", j->plan, why);
	else
		mgr_failure(m, f[0] ? f[0]->id : j->id, "job on the host ring with its %d rails: "
			    "rail %d (job %s): %s", n, bad, f[bad]->id, why);
}

/* Where the ranks of j still in it are: the highest next, the lowest
 * first (and its rank). false: one has not acknowledged j's plan yet. */
static bool acked_all(const struct mgr_job *j, bool *any, uint32_t *next, uint32_t *first,
		      int *lo)
{
	*any = false;
	for (int r = 0; r < j->size; r++) {
		const struct mgr_rank *rk = &j->ranks[r];
		if (rk->left)
			continue;
		if (rk->ack_plan != j->plan)
			return false;
		if (!*any) {
			*any = true;
			*lo = r;
			*next = rk->ack_next;
			*first = rk->ack_first;
			continue;
		}
		if (seq_diff(rk->ack_next, *next) > 0)
			*next = rk->ack_next;
		if (seq_diff(rk->ack_first, *first) < 0) {
			*first = rk->ack_first;
			*lo = r;
		}
	}
	return true;
}

/* j's cut at collective `next` (its ranks' lowest first: first, lo's). */
static void cut_one(struct mgr *m, struct mgr_job *j, uint32_t next, uint32_t first, int lo,
		    const char *who)
{
	j->cut_seq = next;
	j->cut_from = j->plan_dead ? first : next;
	/* a rank that completed collectives from cut_from on replays them: it
	 * must still hold their inputs */
	for (int r = 0; j->plan_dead && r < j->size; r++) {
		const struct mgr_rank *rk = &j->ranks[r];
		if (rk->left || seq_diff(rk->ack_first, first) <= 0)
			continue;
		if (seq_diff(rk->ack_keep, first) > 0) {
			snprintf(j->cut_error, sizeof(j->cut_error), "collective %u: rank %d completed "
				 "it on the tree that failed, rank %d did not, and rank %d no longer "
				 "holds its input (it keeps collectives from %u on: INCA_KEEP)",
				 first, r, lo, r, rk->ack_keep);
			break;
		}
	}
	j->cut_done = true;
	j->plan_ver++;
	j->cut_ver = j->plan_ver;
	if (j->plan_dead)
		mgr_log("job %s: plan %u (%s) from collective %u%s; collectives %u.. run again on "
			"the host ring", j->id, j->plan, j->plan_ring ? "host ring" : "tree",
			j->cut_seq, who, j->cut_from);
	else
		mgr_log("job %s: plan %u (%s) from collective %u%s", j->id, j->plan,
			j->plan_ring ? "host ring" : "tree", j->cut_seq, who);
	if (j->cut_error[0])
		mgr_failure(m, j->id, "job cannot move to plan %u: %s", j->plan, j->cut_error);
}

/* Every rank still in the job has acknowledged the plan: the cut. With
 * rails, every rank of every rail whose plan awaits its cut: one cut for
 * all of them, at the highest next of all. */
static void make_cut(struct mgr *m, struct mgr_job *j)
{
	struct mgr_job *f[MGR_MAX_RAILS];
	uint32_t next[MGR_MAX_RAILS], first[MGR_MAX_RAILS], top = 0;
	int lo[MGR_MAX_RAILS], n = mgr_job_family(m, j, f), moving = 0;
	bool any[MGR_MAX_RAILS], have = false;

	for (int l = 0; l < n; l++) {
		if (f[l] && !f[l]->plan)
			f[l] = NULL;       /* not planned yet (still coming) */
		if (!f[l] || f[l]->cut_done)
			continue;
		if (!acked_all(f[l], &any[l], &next[l], &first[l], &lo[l]))
			return;
		if (!any[l])
			continue;
		moving++;
		if (!have || seq_diff(next[l], top) > 0)
			top = next[l];
		have = true;
	}
	if (!have)
		return;
	char who[64] = "";
	if (moving > 1)
		snprintf(who, sizeof(who), " (with %d rails of the job)", moving);
	for (int l = 0; l < n; l++)
		if (f[l] && !f[l]->cut_done && any[l])
			cut_one(m, f[l], top, first[l], lo[l], who);
	mgr_changed(m);
}

void mgr_job_cut_check(struct mgr *m, struct mgr_job *j)
{
	struct mgr_job *f[MGR_MAX_RAILS];
	int n = mgr_job_family(m, j, f);

	/* from any rail still here (j itself may be gone: teardown) */
	for (int l = 0; l < n; l++)
		if (f[l] && f[l]->plan && !f[l]->cut_done) {
			make_cut(m, f[l]);
			return;
		}
}

const struct mgr_past_plan *mgr_job_unseen_cut(const struct mgr_job *j, long long ver)
{
	/* a version 0 or none is no view yet: the current plan. A plan's cut
	 * comes before the next plan begins, so a rank that saw any version
	 * of a later plan saw it (ver >= its cut_ver). */
	if (ver <= 0)
		return NULL;
	for (int k = 0; k < j->npast; k++)
		if (ver < (long long)j->past[k].cut_ver)
			return &j->past[k];
	return NULL;
}

int mgr_job_ack(struct mgr *m, struct mgr_job *j, int r, uint32_t plan, uint32_t next,
		uint32_t first, uint32_t keep, char *why, size_t whylen)
{
	struct mgr_rank *rk = &j->ranks[r];

	if (!rk->registered) {
		snprintf(why, whylen, "rank %d has not registered", r);
		return 409;
	}
	if (plan != j->plan) {
		snprintf(why, whylen, "plan %u is not the job's (%u)", plan, j->plan);
		return 409;
	}
	if (seq_diff(first, next) > 0 || seq_diff(keep, first) > 0) {
		snprintf(why, whylen, "expected keep <= first <= next, got %u, %u, %u", keep, first,
			 next);
		return 400;
	}
	if (j->cut_done)
		return 0;     /* again: the cut stands */
	rk->ack_plan = plan;
	rk->ack_next = next;
	rk->ack_first = first;
	rk->ack_keep = keep;
	mgr_rank_touched(j, r);
	make_cut(m, j);
	return 0;
}

void mgr_job_stall(struct mgr *m, struct mgr_job *j, int r, uint32_t plan, uint32_t ms)
{
	if (plan != j->plan || j->plan_ring || !j->ngroups || j->stall_at)
		return;         /* an older plan, nothing to leave, or heard already */
	/* a switch that died is seen by its missing heartbeats within
	 * dead_after: that gives the job a new tree; only a tree whose
	 * switches all heartbeat past then goes to the ring (mgr_jobs_stalled) */
	j->stall_at = m->now();
	j->stall_rank = r;
	j->stall_ms = ms;
}

/* A tree that stalls again within this long of being made counts as the
 * same trouble: its job's next try for a tree waits twice as long as the
 * last, from STALL_RETRY_S up to STALL_RETRY_MAX_S. A path that keeps
 * breaking (a link the manager cannot see) so costs one short stall per
 * back-off, not a tree/ring flap every few seconds. */
#define STALL_QUIET_S     60.0
#define STALL_RETRY_S     10.0
#define STALL_RETRY_MAX_S 320.0

bool mgr_jobs_stalled(struct mgr *m)
{
	double now = m->now();
	bool any = false;

	for (struct mgr_job *j = m->jobs; j; j = j->next) {
		if (!j->stall_at || now - j->stall_at < m->dead_after_s)
			continue;
		bool down = false;
		for (int g = 0; g < j->ngroups; g++)
			down |= !m->sw[j->groups[g].sw].up;
		j->stall_at = 0;
		if (down || j->plan_ring || !j->ngroups)
			continue;       /* mgr_tick rebuilt around it, or it moved already */
		j->stalls = now - j->plan_at < STALL_QUIET_S ? j->stalls + 1 : 1;
		double wait = STALL_RETRY_S;
		for (unsigned k = 1; k < j->stalls && wait < STALL_RETRY_MAX_S; k++)
			wait *= 2;
		if (wait > STALL_RETRY_MAX_S)
			wait = STALL_RETRY_MAX_S;
		mgr_failure(m, j->id, "rank %d saw no results from its tree for %u ms while every "
			    "switch of it heartbeats: the job goes to the host ring%s, a tree again "
			    "in %.0f s at the earliest (stall %u in a row)", j->stall_rank,
			    j->stall_ms, j->nrails > 1 ? " with every rail" : "", wait, j->stalls);
		/* with rails, all of them (never some in-network, some not) */
		struct mgr_job *f[MGR_MAX_RAILS];
		int n = mgr_job_family(m, j, f);
		for (int l = 0; l < n; l++) {
			struct mgr_job *k = f[l];
			if (!k || !k->plan)
				continue;          /* still coming: planned when it is in */
			bool had = k->ngroups || !k->plan_ring;
			mgr_job_release(m, k);
			plan_begin(m, k, had);
			k->plan_ring = true;
			k->state = MGR_JOB_RING;
			if (k == j)
				snprintf(k->reason, sizeof(k->reason), "on the host ring: rank %d saw "
					 "no results from its tree for %u ms", j->stall_rank,
					 j->stall_ms);
			else
				snprintf(k->reason, sizeof(k->reason), "on the host ring: every rail: "
					 "rail %d (job %s): rank %d saw no results from its tree for "
					 "%u ms", j->rail, j->id, j->stall_rank, j->stall_ms);
			k->retry_at = now + wait;
			k->stalls = j->stalls;
			k->stall_at = 0;
			m->plans_ring++;
		}
		any = true;
	}
	if (any)
		mgr_changed(m);
	return any;
}

bool mgr_jobs_retry(struct mgr *m)
{
	double now = m->now();
	bool any = false;

	for (struct mgr_job *j = m->jobs; j; j = j->next) {
		struct mgr_job *f[MGR_MAX_RAILS];
		bool want[MGR_MAX_RAILS] = { false };
		int n = mgr_job_family(m, j, f), bad;
		bool due = true;

		/* a family is tried as one, from its first rail here, once every
		 * rail is on the ring with its cut made */
		for (int l = 0; l < n; l++)
			if (f[l] && !f[l]->plan)
				f[l] = NULL;       /* still coming: planned when it is in */
		int l0 = mgr_family_first(f, n);
		due = l0 < n && f[l0] == j;
		for (int l = 0; due && l < n; l++) {
			struct mgr_job *k = f[l];
			want[l] = k != NULL;
			if (k && (k->state != MGR_JOB_RING || !k->cut_done || now < k->retry_at ||
				  k->retry_gen == m->capacity_gen))
				due = false;
		}
		if (!due)
			continue;
		for (int l = 0; l < n; l++)
			if (f[l])
				f[l]->retry_gen = m->capacity_gen;
		/* only while it would work: a quiet attempt (the failure log
		 * hears of the job when it moves); the reasons stay the ring
		 * plans' until then */
		char (*keep)[sizeof(j->reason)] = malloc(sizeof(*keep) * (size_t)n);
		if (!keep)
			continue;
		for (int l = 0; l < n; l++)
			if (f[l])
				snprintf(keep[l], sizeof(keep[l]), "%s", f[l]->reason);
		bool ok = allocate_all(m, f, n, want, &bad);
		for (int l = 0; l < n; l++)
			if (f[l])
				snprintf(f[l]->reason, sizeof(f[l]->reason), "%s", keep[l]);
		free(keep);
		if (!ok)
			continue;
		/* trees: the new plans, from the ring (alive); the ring plans'
		 * reasons go with them into the jobs' past */
		for (int l = 0; l < n; l++) {
			struct mgr_job *k = f[l];
			if (!k)
				continue;
			plan_begin(m, k, false);
			k->reason[0] = 0;
			k->plan_ring = false;
			k->retry_at = 0;
			m->plans_tree++;
		}
		if (n > 1)
			mgr_log("job %s: trees again for its %d rails (plan %u): back in-network at "
				"the cut", j->id, n, j->plan);
		else
			mgr_log("job %s: a tree again (plan %u): back in-network at the cut", j->id,
				j->plan);
		any = true;
	}
	if (any)
		mgr_changed(m);
	return any;
}
