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

void mgr_job_replan(struct mgr *m, struct mgr_job *j, bool dead)
{
	char why[sizeof(j->reason)];

	plan_begin(m, j, dead);
	if (!mgr_job_allocate(m, j)) {
		j->plan_ring = false;
		m->plans_tree++;
		if (dead)
			m->rebuilds++;
		return;
	}
	snprintf(why, sizeof(why), "%s", j->reason);
	snprintf(j->reason, sizeof(j->reason), "on the host ring: %.230s", why);
	j->plan_ring = true;
	j->state = MGR_JOB_RING;
	m->plans_ring++;
	mgr_failure(m, j->id, "job on the host ring (plan %u): %s", j->plan, why);
}

/* Every rank still in the job has acknowledged the plan: the cut. */
static void make_cut(struct mgr *m, struct mgr_job *j)
{
	int base = -1, lo = -1;
	uint32_t next = 0, first = 0;

	for (int r = 0; r < j->size; r++) {
		const struct mgr_rank *rk = &j->ranks[r];
		if (rk->left)
			continue;
		if (rk->ack_plan != j->plan)
			return;
		if (base < 0) {
			base = lo = r;
			next = rk->ack_next;
			first = rk->ack_first;
			continue;
		}
		if (seq_diff(rk->ack_next, next) > 0)
			next = rk->ack_next;
		if (seq_diff(rk->ack_first, first) < 0) {
			first = rk->ack_first;
			lo = r;
		}
	}
	if (base < 0)
		return;
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
		mgr_log("job %s: plan %u (%s) from collective %u; collectives %u.. run again on "
			"the host ring", j->id, j->plan, j->plan_ring ? "host ring" : "tree",
			j->cut_seq, j->cut_from);
	else
		mgr_log("job %s: plan %u (%s) from collective %u", j->id, j->plan,
			j->plan_ring ? "host ring" : "tree", j->cut_seq);
	if (j->cut_error[0])
		mgr_failure(m, j->id, "job cannot move to plan %u: %s", j->plan, j->cut_error);
	mgr_changed(m);
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
			    "switch of it heartbeats: the job goes to the host ring, a tree again "
			    "in %.0f s at the earliest (stall %u in a row)", j->stall_rank,
			    j->stall_ms, wait, j->stalls);
		mgr_job_release(m, j);
		plan_begin(m, j, true);
		j->plan_ring = true;
		j->state = MGR_JOB_RING;
		snprintf(j->reason, sizeof(j->reason), "on the host ring: rank %d saw no results "
			 "from its tree for %u ms", j->stall_rank, j->stall_ms);
		j->retry_at = now + wait;
		m->plans_ring++;
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
		if (j->state != MGR_JOB_RING || !j->cut_done || now < j->retry_at ||
		    j->retry_gen == m->capacity_gen)
			continue;
		j->retry_gen = m->capacity_gen;
		/* only while it would work: a quiet attempt (the failure log
		 * hears of the job when it moves) */
		char keep[sizeof(j->reason)];
		snprintf(keep, sizeof(keep), "%s", j->reason);
		if (mgr_job_allocate(m, j)) {
			snprintf(j->reason, sizeof(j->reason), "%s", keep);
			continue;
		}
		/* it has a tree: the new plan, from the ring (alive); the ring
		 * plan's reason goes with it into the job's past */
		snprintf(j->reason, sizeof(j->reason), "%s", keep);
		plan_begin(m, j, false);
		j->reason[0] = 0;
		j->plan_ring = false;
		j->retry_at = 0;
		m->plans_tree++;
		mgr_log("job %s: a tree again (plan %u): back in-network at the cut", j->id, j->plan);
		any = true;
	}
	if (any)
		mgr_changed(m);
	return any;
}
