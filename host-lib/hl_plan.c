/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Following the manager's plan (INCA_MANAGER; docs/hostlib.md, "Plans"):
 * where this communicator's collectives run — the job's tree, or the
 * ranks' host ring — and the collective at which every rank moves to a new
 * plan, so that no two ranks ever run a collective on different paths.
 *
 * A thread of the communicator long-polls the manager for the job's plan
 * (each poll held until the plan changes, up to 20 s: an idle job costs a
 * request per rank every 20 s, and the polls renew the job's lease). It is
 * the only thread that talks to the manager while the job runs: the
 * caller's thread never waits on it. When a new plan comes the thread
 * acknowledges it with where this rank is: the
 * next collective it would start (from then on it starts none there until
 * the cut is known: the "hold"), the first it has not completed, and the
 * first it can replay. The manager answers every rank with the cut: the
 * collectives before it run on the ring, those from it on the new plan.
 * Every rank applies every cut, in order: a plan the manager replaced
 * before this thread saw its cut is answered first, with its cut (the
 * manager keeps the last few: mgr_job_unseen_cut), and one whose cut came
 * while the caller was away between calls waits in `missed`.
 * When the old plan was a tree that failed, the collectives from the cut's
 * "from" run again on the ring, in order, at every rank: those this rank
 * had not completed for real, those it had completed (but another rank
 * had not) as replays from their kept inputs, whose results it drops.
 *
 * The caller's thread does the rest at its next call: it applies the cut
 * (hl_coll_recover), routes every new collective (hl_plan_route), installs
 * the new tree's group at the cut (the transport retargeted, the stream
 * started afresh), notes when its tree stops answering (hl_plan_stalled:
 * the thread's poll is cut short and the thread tells the manager) and
 * keeps the inputs of the collectives it completes in-network
 * (hl_keep.c; INCA_KEEP of them, INCA_KEEP_MB at most).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hl_priv.h"



static double mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ---- the thread ---- */

static void *watch(void *arg)
{
	struct inca_comm *c = arg;
	struct hl_plan *pl = c->plan;
	uint32_t ver = 0;      /* none: the first poll answers at once */
	bool complained = false;

	while (!__atomic_load_n(&pl->stop, __ATOMIC_ACQUIRE)) {
		struct hl_plan_msg pm;
		char err[256];

		pthread_mutex_lock(&pl->lock);
		bool stall = pl->stall_due;
		uint32_t stall_epoch = pl->stall_epoch;
		unsigned stall_ms = pl->stall_ms;
		pl->stall_due = false;
		pthread_mutex_unlock(&pl->lock);
		if (stall && hl_manager_stall(c->mgr, stall_epoch, stall_ms)) {
			/* not delivered (an interrupt meant for the poll may have
			 * ended it): again, unless a newer stall came meanwhile */
			pthread_mutex_lock(&pl->lock);
			pl->stall_due = true;
			pthread_mutex_unlock(&pl->lock);
			usleep(20000);
			continue;
		}

		int rc = hl_manager_poll(c->mgr, ver, &pm, err, sizeof(err));

		if (__atomic_load_n(&pl->stop, __ATOMIC_ACQUIRE)) {
			if (!rc && pm.have_group)
				hl_group_free(&pm.g);
			break;
		}
		if (rc && __atomic_load_n(&pl->stall_due, __ATOMIC_ACQUIRE))
			continue;       /* cut short to tell the manager of a stall */
		if (rc) {
			if (!complained)
				HL_WARN("rank %d: the manager's plan for job %s: %s (retrying)",
					c->rank, c->job, err);
			complained = true;
			usleep(200000);
			continue;
		}
		if (complained)
			HL_INFO("rank %d: the manager answers again", c->rank);
		complained = false;
		ver = pm.version;

		pthread_mutex_lock(&pl->lock);
		/* Every rank applies every plan's cut, in order. A newer plan
		 * that comes before the caller applied the cut of the one it
		 * replaces (the caller away between its calls while its job
		 * went to the ring and back to a tree, say) leaves that cut
		 * here for it: a rank that skipped the ring's would not run
		 * again on the ring what the others run again there ("the
		 * ranks disagree on which collective fell back"). */
		if (pm.epoch > pl->msg.epoch && pl->msg.cut && pl->msg.epoch > pl->adopted_epoch &&
		    !pl->missed_overflow) {
			if (pl->nmissed == HL_PLAN_MISSED) {
				pl->missed_overflow = true;
			} else {
				struct hl_plan_msg *o = &pl->missed[pl->nmissed++];
				*o = pl->msg;
				o->have_group = false;
				memset(&o->g, 0, sizeof(o->g));
			}
		}
		if (pl->msg.have_group)
			hl_group_free(&pl->msg.g);
		pl->msg = pm;
		__atomic_store_n(&pl->news, true, __ATOMIC_RELEASE);
		/* a plan this rank has not acknowledged and whose cut is to be
		 * made: where it is, and hold there */
		bool ack = pm.epoch > pl->acked && pm.epoch > pl->adopted_epoch && !pm.cut &&
			   pm.epoch > 1;
		uint32_t next = pl->next, first = pl->first, keep = pl->keep;
		if (ack) {
			pl->holding = true;
			if (pm.epoch > pl->hold_epoch)
				pl->hold_epoch = pm.epoch;
			/* until the cut of every plan acknowledged (a newer
			 * one may come before the cut of a dead one) */
			__atomic_store_n(&pl->hold_dead, pl->hold_dead || pm.dead,
					 __ATOMIC_RELEASE);
		}
		if (pm.epoch > pl->adopted_epoch && !pl->seen_us)
			pl->seen_us = mono_us();
		pthread_mutex_unlock(&pl->lock);
		if (ack) {
			rc = hl_manager_ack(c->mgr, pm.epoch, next, first, keep, err, sizeof(err));
			pthread_mutex_lock(&pl->lock);
			if (!rc)
				pl->acked = pm.epoch;
			pthread_mutex_unlock(&pl->lock);
			if (rc == INCA_ERR_MANAGER) {
				HL_WARN("rank %d: acknowledging plan %u: %s (retrying)", c->rank,
					pm.epoch, err);
				/* read it again, at once: a version just below
				 * this one (not 0, which would skip a cut the
				 * manager gives first: mgr_job_unseen_cut) */
				ver = pm.version > 1 ? pm.version - 1 : 0;
				usleep(200000);
			} else if (!rc) {
				HL_INFO("rank %d: plan %u (%s%s) acknowledged at collective %u "
					"(first not completed %u, inputs kept from %u)", c->rank,
					pm.epoch, pm.ring ? "host ring" : "tree",
					pm.dead ? ", the old tree failed" : "", next, first, keep);
			}
		}
		pthread_cond_broadcast(&pl->cond);
	}
	return NULL;
}

int hl_plan_start(struct inca_comm *c, const struct hl_plan_msg *first)
{
	struct hl_plan *pl = calloc(1, sizeof(*pl));

	if (!pl)
		return hl_fail(c, INCA_ERR_NOMEM, "out of memory");
	pthread_mutex_init(&pl->lock, NULL);
	pthread_cond_init(&pl->cond, NULL);
	pl->next = pl->first = pl->keep = c->next_seq;
	/* the first plan: plan 1 runs from the first collective; a later one
	 * (the job changed plans before this rank joined) from its cut, the
	 * ring until then */
	pl->adopted_epoch = first->epoch == 1 ? 1 : 0;
	pl->tree = first->epoch == 1 && !first->ring;
	pl->switch_seq = c->next_seq;
	c->switch_failed = !pl->tree;
	c->plan = pl;
	if (pthread_create(&pl->thread, NULL, watch, c)) {
		c->plan = NULL;
		free(pl);
		return hl_fail(c, INCA_ERR_NOMEM, "cannot start the plan's thread");
	}
	pl->thread_on = true;
	if (first->ring)
		HL_WARN("rank %d: job %s: %s; it moves in-network when the manager offers a tree",
			c->rank, c->job, first->reason[0] ? first->reason : "on the host ring");
	return 0;
}

void hl_plan_stop(struct inca_comm *c)
{
	struct hl_plan *pl = c->plan;

	if (!pl)
		return;
	__atomic_store_n(&pl->stop, true, __ATOMIC_RELEASE);
	hl_manager_interrupt(c->mgr);
	if (pl->thread_on)
		pthread_join(pl->thread, NULL);
	if (pl->msg.have_group)
		hl_group_free(&pl->msg.g);
	pthread_mutex_destroy(&pl->lock);
	pthread_cond_destroy(&pl->cond);
	free(pl);
	c->plan = NULL;
}

/* Where this rank is, for the next acknowledgement. */
static void position(struct inca_comm *c)
{
	struct hl_plan *pl = c->plan;

	pthread_mutex_lock(&pl->lock);
	pl->next = c->next_seq;
	pl->first = hl_coll_first(c);
	pl->keep = hl_keep_from(c);
	pthread_mutex_unlock(&pl->lock);
}

/* ---- the caller's side ---- */

/* Install the new tree's group: from now on the stream goes to it. */
static int install(struct inca_comm *c, const struct hl_group_desc *g)
{
	c->g.switch_ip = g->switch_ip;
	c->g.group_id = g->group_id;
	c->g.group_qpn = g->group_qpn;
	c->g.qkey = g->qkey;
	c->g.reproducible = g->reproducible;
	c->g.ring = false;
	/* mtu auto: the path to this switch (every rank's is the fabric's) */
	uint16_t mtu = g->ib_mtu ? g->ib_mtu : hl_path_ib_mtu(c, g->switch_ip);
	if (mtu < c->g.ib_mtu)      /* the stream's frames hold the first one */
		c->g.ib_mtu = mtu;
	c->member_index = (uint16_t)(g->member_index >= 0 ? g->member_index : c->rank);
	hl_coll_restart(c);
	if (c->tp->retarget) {
		int rc = c->tp->retarget(c);
		if (rc)
			return rc;
	}
	c->switch_failed = false;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	HL_INFO("rank %d: in-network on group %u via switch %u.%u.%u.%u (member %u) at %.3f",
		c->rank, g->group_id, g->switch_ip >> 24, (g->switch_ip >> 16) & 255,
		(g->switch_ip >> 8) & 255, g->switch_ip & 255, c->member_index,
		(double)now.tv_sec + (double)now.tv_nsec / 1e9);
	return 0;
}

/* Apply one plan's cut (m: its message, without its group). 0, or an
 * INCA error (the cut cannot be made: every call fails so from now on). */
static int apply_cut(struct inca_comm *c, const struct hl_plan_msg *m)
{
	struct hl_plan *pl = c->plan;
	int rc;

	if (m->error[0]) {
		snprintf(pl->broken, sizeof(pl->broken), "the job cannot move to the manager's "
			 "plan %u: %.200s", m->epoch, m->error);
		HL_ERR("rank %d: %s", c->rank, pl->broken);
		hl_coll_fail_all(c, hl_fail(c, INCA_ERR_SWITCH, "%s", pl->broken));
		return INCA_ERR_SWITCH;
	}
	/* the old tree failed: everything from the cut's "from" again, on the
	 * ring, in order */
	if (m->dead) {
		hl_keep_drop_before(c, m->cut_from);
		rc = hl_coll_recover(c, m->cut_from);
		if (rc) {
			/* the ranks are no longer at the same collective: this
			 * one could not run them all again, others may have. No
			 * later cut can mend that: every call fails from now on,
			 * at once (not another recovery per call). */
			snprintf(pl->broken, sizeof(pl->broken), "the collectives from %u could "
				 "not run again on the host ring after the tree failed (plan %u): "
				 "%.160s", m->cut_from, m->epoch, c->errmsg);
			HL_ERR("rank %d: %s", c->rank, pl->broken);
			hl_coll_fail_all(c, hl_fail(c, INCA_ERR_SWITCH, "%s", pl->broken));
			return INCA_ERR_SWITCH;
		}
	}
	pl->tree = !m->ring;
	pl->switch_seq = m->cut_seq;
	pl->installed = false;
	pl->stalled = 0;
	if (m->ring)
		c->switch_failed = true;
	pthread_mutex_lock(&pl->lock);
	pl->adopted_epoch = m->epoch;
	/* a newer plan acknowledged meanwhile (this one was missed): the
	 * hold stays until its cut. Its acknowledgement may still be on its
	 * way (pl->acked is set when the manager has answered, and a retry
	 * after a failed one takes 200 ms or a manager's restart): the hold
	 * is the newest plan held for, not the newest acknowledged, or this
	 * older cut let the caller start the collective the pending
	 * acknowledgement names as next, and send it on a dead tree */
	if (pl->hold_epoch <= m->epoch) {
		pl->holding = false;
		__atomic_store_n(&pl->hold_dead, false, __ATOMIC_RELEASE);
	}
	double seen = pl->seen_us;
	pl->seen_us = 0;
	pthread_mutex_unlock(&pl->lock);
	c->stats.plan_changes++;
	if (m->ring && m->dead)
		HL_WARN("rank %d: plan %u: the host ring from collective %u (its tree failed: "
			"from %u again there): %s", c->rank, m->epoch, m->cut_seq, m->cut_from,
			m->reason[0] ? m->reason : "no tree");
	else if (m->ring)
		HL_WARN("rank %d: plan %u: the host ring from collective %u: %s", c->rank,
			m->epoch, m->cut_seq, m->reason[0] ? m->reason : "no tree");
	else
		HL_INFO("rank %d: plan %u: in-network from collective %u (%.1f ms after the plan "
			"was seen)", c->rank, m->epoch, m->cut_seq,
			seen ? (mono_us() - seen) / 1e3 : 0);
	position(c);
	return 0;
}

static int apply_all(struct inca_comm *c);

/* Newer plans with their cuts: apply them, in order. 0, or an INCA error
 * (a cut cannot be made: every call fails so from now on). */
static int apply(struct inca_comm *c)
{
	struct hl_plan *pl = c->plan;
	int rc;

	if (!__atomic_load_n(&pl->news, __ATOMIC_ACQUIRE) || pl->applying)
		return pl->broken[0] ? INCA_ERR_SWITCH : 0;
	/* one cut at a time: a cut's recovery runs collectives, and a newer
	 * cut applied from inside it would be undone when it returns */
	pl->applying = true;
	rc = apply_all(c);
	pl->applying = false;
	return rc;
}

static int apply_all(struct inca_comm *c)
{
	struct hl_plan *pl = c->plan;
	struct hl_plan_msg m;
	int rc;

	for (;;) {
		pthread_mutex_lock(&pl->lock);
		bool missed = pl->nmissed > 0, overflow = pl->missed_overflow;
		if (missed) {
			m = pl->missed[0];
			memmove(&pl->missed[0], &pl->missed[1],
				--pl->nmissed * sizeof(pl->missed[0]));
		} else {
			__atomic_store_n(&pl->news, false, __ATOMIC_RELAXED);
			m = pl->msg;
			m.have_group = false;     /* the thread owns its group: route takes it */
			memset(&m.g, 0, sizeof(m.g));
		}
		pthread_mutex_unlock(&pl->lock);
		if (overflow && !pl->broken[0]) {
			snprintf(pl->broken, sizeof(pl->broken), "more than %d of the manager's "
				 "plans for job %s came and were cut while this rank made no call: "
				 "it cannot follow them in order", HL_PLAN_MISSED, c->job);
			HL_ERR("rank %d: %s", c->rank, pl->broken);
			hl_coll_fail_all(c, hl_fail(c, INCA_ERR_SWITCH, "%s", pl->broken));
		}
		if (pl->broken[0])
			return INCA_ERR_SWITCH;
		if (m.epoch > pl->adopted_epoch && m.cut) {
			rc = apply_cut(c, &m);
			if (rc)
				return rc;
		}
		if (!missed)
			return 0;
	}
}

int hl_plan_progress(struct inca_comm *c)
{
	return c->plan ? apply(c) : 0;
}

int hl_plan_route(struct inca_comm *c, bool *ring, uint32_t *seq)
{
	struct hl_plan *pl = c->plan;
	double deadline = c->now_us(c) + (double)c->timeout_ms * 1000;
	int rc;

	for (;;) {
		rc = apply(c);
		if (rc)
			return pl->broken[0] ? hl_fail(c, INCA_ERR_SWITCH, "%s", pl->broken) : rc;
		pthread_mutex_lock(&pl->lock);
		bool hold = pl->holding;
		if (!hold) {
			*seq = c->next_seq++;
			pl->next = c->next_seq;
		}
		pthread_mutex_unlock(&pl->lock);
		if (!hold)
			break;
		/* acknowledged a plan at this collective: none starts before its
		 * cut; meanwhile the collectives in flight go on */
		if (c->now_us(c) > deadline)
			return hl_fail(c, INCA_ERR_TIMEOUT, "no cut for the manager's new plan "
				       "within %u ms (is every rank of job %s running?)",
				       c->timeout_ms, c->job);
		hl_coll_idle_progress(c, 1000);
	}
	*ring = !pl->tree || hl_seq_diff(*seq, pl->switch_seq) < 0;
	if (*ring || pl->installed)
		return 0;
	/* the first collective of the new tree: its group, once programmed */
	for (;;) {
		pthread_mutex_lock(&pl->lock);
		bool ready = pl->msg.epoch == pl->adopted_epoch && pl->msg.ready &&
			     pl->msg.have_group && !pl->msg.ring;
		if (ready) {
			pl->pending = pl->msg.g;
			pl->pending.members = NULL;
			pl->pending.nmembers = 0;
		}
		bool newer = pl->msg.epoch > pl->adopted_epoch ||
			     (pl->msg.epoch == pl->adopted_epoch && pl->msg.replaced);
		pthread_mutex_unlock(&pl->lock);
		if (ready)
			break;
		if (newer) {
			/* superseded before it was programmed (or the manager
			 * says so with the plan's cut): this collective on the
			 * ring, the next plan's cut is past it */
			*ring = true;
			return 0;
		}
		if (c->now_us(c) > deadline)
			return hl_fail(c, INCA_ERR_TIMEOUT, "the manager's tree for job %s was not "
				       "programmed within %u ms", c->job, c->timeout_ms);
		usleep(1000);
	}
	rc = install(c, &pl->pending);
	if (rc)
		return rc;
	pl->installed = true;
	return 0;
}

void hl_plan_stalled(struct inca_comm *c, unsigned ms)
{
	struct hl_plan *pl = c->plan;

	if (pl->stalled == pl->adopted_epoch)
		return;
	pl->stalled = pl->adopted_epoch;
	HL_WARN("rank %d: no result from switch %u.%u.%u.%u for %u ms: telling the manager, "
		"waiting for its plan", c->rank, c->g.switch_ip >> 24, (c->g.switch_ip >> 16) & 255,
		(c->g.switch_ip >> 8) & 255, c->g.switch_ip & 255, ms);
	/* the plan thread tells it: this thread does not wait on the manager */
	pthread_mutex_lock(&pl->lock);
	pl->stall_epoch = pl->adopted_epoch;
	pl->stall_ms = ms;
	__atomic_store_n(&pl->stall_due, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&pl->lock);
	hl_manager_interrupt(c->mgr);
}

void hl_plan_position(struct inca_comm *c)
{
	if (c->plan)
		position(c);
}

/* This rank acknowledged a plan whose old tree failed, and its cut is not
 * applied yet: the stream sends no packet for the first time (hl_coll.c's
 * send_due; retransmissions go on). The cut runs every collective from its
 * "from" again on the ring, so holding back costs nothing, and it keeps
 * the acknowledgement true: another rank drops a kept input as complete
 * everywhere once this rank has sent the packets that follow its results
 * by a window (hl_keep.c), and a packet sent only after this rank's
 * acknowledgement could so have it drop one this rank acknowledged as not
 * completed, should the old tree still carry packets (a link back, a
 * switch whose heartbeats stopped and not its data path). The manager
 * then refused the cut: a rank no longer held the input. Read without
 * the lock: results are taken in, and position() takes the lock, before
 * the sends that depend on them are decided. */
bool hl_plan_hold_dead(const struct inca_comm *c)
{
	return c->plan && __atomic_load_n(&c->plan->hold_dead, __ATOMIC_ACQUIRE);
}

/* A rank's acknowledgement told the manager from which collective it can
 * replay (keep), and the cut's recovery counts on every rank running
 * every collective from the cut's "from". Until the cut is applied the
 * tree may go on completing collectives (a link back after a few
 * seconds), and the frontier rule would drop inputs as complete at every
 * rank: a rank that dropped one would skip it in the recovery while
 * another, which has it finished in its stream, replays it, and the ring
 * stops on "the ranks disagree" (read from the code, not seen: what the
 * soak of 2026-11-27 hit was hl_coll_recover's search). So nothing is
 * dropped from the acknowledgement to the cut, and a drop and the keep
 * position the thread acknowledges change under one lock. */
bool hl_plan_keep_begin(struct inca_comm *c)
{
	struct hl_plan *pl = c->plan;

	if (!pl)
		return true;
	pthread_mutex_lock(&pl->lock);
	if (pl->holding) {
		pthread_mutex_unlock(&pl->lock);
		return false;
	}
	return true;
}

void hl_plan_keep_end(struct inca_comm *c)
{
	struct hl_plan *pl = c->plan;

	if (!pl)
		return;
	pl->keep = hl_keep_from(c);
	pthread_mutex_unlock(&pl->lock);
}
