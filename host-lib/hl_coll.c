/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Collectives through the switch: each is split into packets (which of
 * them carry elements: docs/protocol.md 2.1), numbered in one stream per
 * communicator; packet g of the stream uses slot g mod W and shadow set
 * (g / W) mod 2 and is sent only once g - W's result is in (self-clocking),
 * so up to HL_MAX_INFLIGHT collectives are pipelined in O(W) state.
 * Retransmission on an adaptive timeout (RFC 6298 estimator, Karn's rule,
 * exponential back-off), DCQCN pacing, a deadline on everything, and the
 * TCP ring when the switch does not answer (with a manager: when its plan
 * says, hl_plan.c).
 *
 * One file over 500 lines on purpose (about 920): the collectives' packet
 * plans, the window and the retransmission engine share the stream's
 * invariants (packet g, its slot and set, its result) and are read
 * together; the ring fallback is hl_ring.c, the calls hl_calls.c.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hl_priv.h"

#define SEND_BATCH 32
#define RECV_BATCH 64
/* A transport that took less than offered (socket buffer or TX ring full)
 * is retried after this long, not in a busy loop that would starve the
 * switch and the other ranks on a shared machine. */
#define TX_FULL_WAIT_US 50
/* a static group's rank without results looks this often for a peer's
 * ring connection (a peer that fell back) */
#define PEER_CHECK_US 10000
/* while paused by PFC, look for an XON this often */
#define PFC_RECHECK_US 100
/* Wake-up coalescing: with at least COALESCE_MIN packets outstanding, and
 * more packets started than the window holds, a rank sleeps until about
 * half of them should have been answered (at the measured pace, scaled down
 * where naps oversleep: NAP_SCALE_MIN), then takes the results and refills
 * the window in one
 * batch: one wake-up, one receive and one send call per batch instead of
 * per packet. Half the window stays in flight, far more than a link's
 * round trip needs, so the link stays as full. Naps shorter than
 * COALESCE_MIN_NAP_US are not worth a sleep; none is longer than
 * COALESCE_MAX_NAP_US or a quarter of the RTO. */
#define COALESCE_MIN 8
#define COALESCE_MIN_NAP_US 30
#define COALESCE_MAX_NAP_US 4000
#define PACE_SAMPLE_US 500
/* A nap that finds three quarters or more of what was outstanding already
 * answered overslept: the results came faster than the pace says (in a
 * burst: the switch sends a set's results as its last contribution comes,
 * a shaper's bucket lets many go at once) or the rank woke late (a CPU
 * shared with other ranks runs them first). The next naps are then half as
 * long, down to a sixteenth; a nap that finds half or less answered lets
 * them grow back by an eighth, and one scaled below COALESCE_MIN_NAP_US
 * (not taken) by 1/128. */
#define NAP_SCALE_MIN (1.0 / 16)
/* Before sleeping in the transport for a result, a rank polls for it for
 * up to spin_us, yielding the CPU between polls: INCA_SPIN_US (0: sleep at
 * once), or by default SPIN_US when the rank is bound to some of the
 * machine's CPUs (a launcher, a cpuset or taskset placed it) and 0 when it
 * may run on all of them. On a virtual machine whose idle vCPUs halt
 * (cpuidle haltpoll with guest_halt_poll_ns=0, as here), waking a sleeper
 * costs tens of µs more than the result's trip through the switch: with
 * the ranks on the lab's CPU 0 and the switch's worker on CPU 1, polling
 * took 8 B all-reduces from 73 to 51 µs (4 ranks), from 192 to 107 µs (8
 * ranks, 2 a host) and through libinca-mpi from 126 to 53 µs (AMD EPYC,
 * 2026-11-27). A rank that may run anywhere may poll on the CPU of
 * whatever must run for its result (on the lab, the switch's worker) and
 * delay it, sched_yield or not: with 4 ranks pinned to the worker's CPU
 * every call took 350 µs (docs/hostlib.md), so such a rank does not poll
 * unless told to. "Bound" is the calling thread's affinity against the
 * machine's online CPUs: a container's cpuset or isolcpus count as bound. */
#define SPIN_US 50

/* this thread's CPU time, µs: what the polls cost (inca_stats.spin_cpu_us;
 * one system call, read once a poll that found nothing) */
static double thread_cpu_us(void)
{
	struct timespec ts = { 0 };

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static double default_spin_us(void)
{
	int only;
	bool all;

	return hl_cpus_allowed(&only, &all) > 0 && !all ? SPIN_US : 0;
}

struct hl_coll {
	struct inca_comm *c;
	enum agg_coll coll;
	const uint8_t *in;     /* what this rank contributes: the buffer, the
				  shards (reduce-scatter), its shard (allgather) */
	uint8_t *out;          /* NULL: reduce at a rank that is not the root */
	uint8_t *copy;         /* in-place input kept for the fallback */
	size_t copy_cap;       /* its allocation (hl_keep_buffer) */
	size_t count;          /* elements of the buffer, or of one shard */
	size_t esize;
	enum agg_dtype dtype;
	enum agg_op op;
	int root;
	uint32_t elems;        /* per packet */
	uint32_t pps;          /* packets per shard (reduce-scatter, allgather; shard
				  k mod N's packets are k = s, s + N, ...) */
	uint32_t npkts, done_pkts, seq;
	uint64_t gbase;        /* its first packet in the stream */
	double start_us, deadline_us;
	int result;
	bool ring;             /* completes on the TCP ring */
	bool finished;
};

/* What one packet of a collective is, for this rank. */
struct hl_use {
	uint32_t count;
	uint16_t root;         /* the header's root: the shard's rank, the root */
	const uint8_t *src;    /* our elements; NULL: we send no data */
	bool want_data;        /* its result carries elements for us */
	uint8_t *dst;          /* where they go; NULL: we have them already */
};

const char *hl_coll_name(enum agg_coll coll)
{
	static const char *const names[AGG_COLL_COUNT] = {
		[AGG_COLL_ALLREDUCE] = "allreduce", [AGG_COLL_REDUCE] = "reduce",
		[AGG_COLL_REDUCE_SCATTER] = "reduce_scatter",
		[AGG_COLL_ALLGATHER] = "allgather", [AGG_COLL_BCAST] = "bcast",
	};
	return coll < AGG_COLL_COUNT ? names[coll] : "?";
}

static bool sharded(enum agg_coll coll)
{
	return coll == AGG_COLL_REDUCE_SCATTER || coll == AGG_COLL_ALLGATHER;
}

/* ---- RFC 6298 retransmission timeout ---- */

void hl_rto_init(struct hl_rto *r, double min_us, double max_us)
{
	*r = (struct hl_rto){ .min = min_us, .max = max_us < min_us ? min_us : max_us };
	/* before any sample: 5 ms, a few switch RTTs on a loaded lab machine */
	r->rto = 5000 < r->min ? r->min : 5000 > r->max ? r->max : 5000;
}

/*
 * A result's round trip is ours plus the wait for every other member's
 * contribution. One that takes longer than the RTO waited for a member that
 * was late or lost a packet and timed out itself (a rank starting a job or
 * a collective after the others, a loss on another link): taking it would
 * raise the RTO towards whatever the others' timers were, and every later
 * loss would cost that long (the impaired-link test once crawled at 1.25 s
 * per loss from 640 ms samples taken while one rank was still starting).
 * Such samples are left out; a real rise of the round trip still raises the
 * RTO through the back-off when a timer fires, and the samples that follow
 * are then taken. Returns whether the sample was taken.
 */
bool hl_rto_sample(struct hl_rto *r, double rtt)
{
	if (rtt > r->rto)
		return false;
	if (!r->have_sample) {
		r->srtt = rtt;
		r->rttvar = rtt / 2;
		r->have_sample = true;
	} else {
		double err = r->srtt > rtt ? r->srtt - rtt : rtt - r->srtt;
		r->rttvar = 0.75 * r->rttvar + 0.25 * err;
		r->srtt = 0.875 * r->srtt + 0.125 * rtt;
	}
	r->rto = r->srtt + 4 * r->rttvar;
	if (r->rto < r->min)
		r->rto = r->min;
	if (r->rto > r->max)
		r->rto = r->max;
	return true;
}

void hl_rto_backoff(struct hl_rto *r)
{
	r->rto *= 2;
	if (r->rto > r->max)
		r->rto = r->max;
}

/* ---- packets ---- */

static void pkt_use(const struct hl_coll *op, uint32_t k, struct hl_use *u)
{
	int me = op->c->rank;
	uint32_t n = (uint32_t)op->c->size;
	/* sharded: packet k is the (k / N)-th of shard k mod N: the shards
	 * take turns, so that an allgather's hosts send (their own) and
	 * receive (the others') at once, where one shard after the other
	 * would use each link one way at a time */
	uint32_t shard = sharded(op->coll) ? k % n : 0;
	size_t first = (size_t)(sharded(op->coll) ? k / n : k) * op->elems;
	size_t left = op->count - first, es = op->esize;

	u->count = (uint32_t)(left < op->elems ? left : op->elems);
	u->root = (uint16_t)(sharded(op->coll) ? shard : (uint32_t)op->root);
	u->src = NULL;
	u->dst = NULL;
	u->want_data = true;
	switch (op->coll) {
	case AGG_COLL_ALLREDUCE:
		u->src = op->in + first * es;
		u->dst = op->out + first * es;
		break;
	case AGG_COLL_REDUCE:
		u->src = op->in + first * es;
		u->want_data = me == op->root;
		u->dst = u->want_data ? op->out + first * es : NULL;
		break;
	case AGG_COLL_REDUCE_SCATTER:
		u->src = op->in + ((size_t)shard * op->count + first) * es;
		u->want_data = (int)shard == me;
		u->dst = u->want_data ? op->out + first * es : NULL;
		break;
	case AGG_COLL_ALLGATHER:
		/* the owner has the result: the switch's answer has no data */
		u->want_data = (int)shard != me;
		if (!u->want_data)
			u->src = op->in + first * es;
		else
			u->dst = op->out + ((size_t)shard * op->count + first) * es;
		break;
	case AGG_COLL_BCAST:
		u->want_data = op->root != me;
		if (!u->want_data)
			u->src = op->in + first * es;     /* the root's buffer is only read */
		else
			u->dst = op->out + first * es;
		break;
	default:
		break;
	}
}

/* The collective packet g of the stream belongs to. */
static struct hl_coll *op_of_packet(struct inca_comm *c, uint64_t g)
{
	struct hl_stream *st = &c->stream;

	for (unsigned i = 0; i < st->nops; i++) {
		struct hl_coll *op = st->ops[i];
		if (!op->ring && !op->finished && g >= op->gbase && g - op->gbase < op->npkts)
			return op;
	}
	return NULL;
}

/* Forget every packet in flight: the next packets start a fresh use of
 * each slot (the switch serves a newer key, section 3.2). */
static void stream_reset(struct inca_comm *c)
{
	struct hl_stream *st = &c->stream;
	uint64_t w = st->window;

	for (uint64_t s = 0; s < w; s++)
		st->slots[s] = (struct hl_slot){ .g = c->gcount + (s + w - c->gcount % w) % w };
	st->oldest = c->gcount;
	/* the frontier jumps without results: kept inputs from before are
	 * no longer known complete elsewhere (hl_plan.c) */
	c->stream_gen++;
	st->unanswered = 0;
	st->probes = 0;
}

int hl_stream_init(struct inca_comm *c)
{
	struct hl_stream *st = &c->stream;

	st->window = c->g.window ? c->g.window : 1;
	st->nap_scale = 1;
	const char *co = getenv("INCA_COALESCE");
	st->coalesce = !co || strcmp(co, "0");
	const char *sp = getenv("INCA_SPIN_US");
	char *end = NULL;
	st->spin_us = sp ? strtod(sp, &end) : default_spin_us();
	bool given = sp != NULL;
	if (sp && (end == sp || *end || !(st->spin_us >= 0 && st->spin_us <= 1e6))) {
		st->spin_us = default_spin_us();
		given = false;
		HL_WARN("INCA_SPIN_US=%s: expected 0..1000000 microseconds; using the default, "
			"%.0f", sp, st->spin_us);
	}
	if (st->spin_us > 0)
		HL_INFO("polling up to %.0f us for results before sleeping (%s)", st->spin_us,
			given ? "INCA_SPIN_US" : "bound to some of the CPUs; INCA_SPIN_US=0: never");
	st->slots = calloc(st->window, sizeof(*st->slots));
	/* the largest frame: the INCA header and elements fill the IB MTU */
	st->frame_cap = AGG_FRAME_HDR_LEN + (size_t)c->g.ib_mtu + 8;
	st->frames = malloc(st->frame_cap * SEND_BATCH);
	if (!st->slots || !st->frames) {
		free(st->slots);
		free(st->frames);
		st->slots = NULL;
		st->frames = NULL;
		return INCA_ERR_NOMEM;
	}
	stream_reset(c);
	return 0;
}

static void op_free(struct hl_coll *op)
{
	hl_keep_unbuffer(op->c, op->copy, op->copy_cap);
	free(op);
}

void hl_stream_free(struct inca_comm *c)
{
	struct hl_stream *st = &c->stream;

	for (unsigned i = 0; i < st->nops; i++)
		op_free(st->ops[i]);
	st->nops = 0;
	free(st->slots);
	free(st->frames);
	st->slots = NULL;
	st->frames = NULL;
}

/* ---- starting a collective ---- */

/* Can the ring run a collective again after the switch failed? On a
 * static group with fallback auto; with a manager whatever the policy
 * (its plan's cut moves every rank to the ring). Then its input is kept. */
static bool may_rerun(const struct inca_comm *c)
{
	return c->fallback == INCA_FALLBACK_AUTO || c->plan;
}

int hl_coll_start(struct inca_comm *c, const struct hl_coll_args *a, struct hl_coll **out)
{
	struct hl_stream *st = &c->stream;
	const char *name = hl_coll_name(a->coll);
	size_t esize = agg_dtype_size(a->dtype), n = (size_t)c->size;
	bool in_place = a->sendbuf == INCA_IN_PLACE;
	struct hl_coll *op;
	int rc;

	if (st->nops == HL_MAX_INFLIGHT)
		return hl_fail(c, INCA_ERR_BUSY, "%s: %d collectives are in flight on this "
			       "communicator: complete one first (inca_wait, inca_test)", name,
			       HL_MAX_INFLIGHT);
	/* with a manager, its plan says where (and numbers the collective) */
	bool plan_ring = false;
	uint32_t plan_seq = 0;
	if (c->plan && (rc = hl_plan_route(c, &plan_ring, &plan_seq)))
		return rc;
	op = calloc(1, sizeof(*op));
	if (!op)
		return hl_fail(c, INCA_ERR_NOMEM, "%s: out of memory", name);
	*op = (struct hl_coll){ .c = c, .coll = a->coll, .count = a->count, .esize = esize,
				.dtype = a->dtype, .op = a->op, .root = a->root,
				.result = INCA_OK };
	/* E elements, and the INCA header plus elements within the IB MTU: a
	 * UD message never exceeds the path MTU (every rank computes the same) */
	op->elems = c->g.elems_per_pkt;
	if (AGG_INCA_HLEN + (size_t)op->elems * esize > c->g.ib_mtu)
		op->elems = (uint32_t)((c->g.ib_mtu - AGG_INCA_HLEN) / esize);
	size_t pps = (a->count + op->elems - 1) / op->elems;
	if (a->count > SIZE_MAX / esize / n || pps > UINT32_MAX / (sharded(a->coll) ? n : 1)) {
		free(op);
		return hl_fail(c, INCA_ERR_INVAL, "%s: count %zu too large", name, a->count);
	}
	op->pps = (uint32_t)pps;
	op->npkts = (uint32_t)(sharded(a->coll) ? pps * n : pps);
	op->ring = c->plan ? plan_ring || c->fallback == INCA_FALLBACK_FORCE :
		   c->switch_failed || c->fallback == INCA_FALLBACK_FORCE;
	/* the input kept aside where results overwrite it before the ring
	 * could need it (in place, reduce at the root, reduce-scatter's
	 * shards) */
	size_t keep = 0;
	switch (a->coll) {
	case AGG_COLL_ALLREDUCE:
	case AGG_COLL_REDUCE:
		op->out = a->recvbuf;
		op->in = in_place ? a->recvbuf : a->sendbuf;
		/* with a manager whatever the policy: a plan's cut can move
		 * this collective to the ring after results overwrote part of
		 * the buffer (libinca-mpi, INCA_FALLBACK_OFF, gave wrong sums) */
		if (in_place && may_rerun(c) && !op->ring)
			keep = a->count * esize;
		break;
	case AGG_COLL_REDUCE_SCATTER:
		/* in place, shard 0's input is where our shard's result goes */
		op->out = a->recvbuf;
		op->in = in_place ? a->recvbuf : a->sendbuf;
		if (in_place && !op->ring)
			keep = a->count * n * esize;
		break;
	case AGG_COLL_ALLGATHER:
		op->out = a->recvbuf;
		op->in = op->out + (size_t)c->rank * a->count * esize;
		if (!in_place)
			memcpy(op->out + (size_t)c->rank * a->count * esize, a->sendbuf,
			       a->count * esize);
		break;
	case AGG_COLL_BCAST:
		op->out = a->recvbuf;
		op->in = a->recvbuf;
		break;
	default:
		free(op);
		return hl_fail(c, INCA_ERR_INVAL, "collective %d unknown", a->coll);
	}
	if (keep) {
		op->copy = hl_keep_buffer(c, keep, &op->copy_cap);
		if (!op->copy) {
			free(op);
			return hl_fail(c, INCA_ERR_NOMEM, "%s: out of memory for the in-place "
				       "copy (%zu bytes)", name, keep);
		}
		memcpy(op->copy, op->in, keep);
		op->in = op->copy;
	}
	op->seq = c->plan ? plan_seq : c->next_seq++;
	op->start_us = c->now_us(c);
	op->deadline_us = op->start_us + (double)c->timeout_ms * 1000;
	if (!op->ring) {
		op->gbase = c->gcount;
		c->gcount += op->npkts;
	}
	st->ops[st->nops++] = op;
	hl_plan_position(c);
	*out = op;
	return INCA_OK;
}

/* ---- the stream ---- */

static int build_frame(struct inca_comm *c, struct hl_coll *op, uint32_t k, bool retx,
		       struct hl_frame *f, uint8_t *buf)
{
	struct hl_stream *st = &c->stream;
	uint64_t g = op->gbase + k;
	struct hl_use u;
	static const uint8_t none[4];

	pkt_use(op, k, &u);
	struct agg_frame_spec s = {
		.src_ip = c->my_ip, .dst_ip = c->g.switch_ip,
		.dscp = 26, .ecn = 2,                  /* ECT(0): DCQCN needs marks */
		.udp_sport = c->fixed_sport ? AGG_ROCEV2_UDP_PORT :
			     hl_slot_sport(c->g.group_id, (uint32_t)(g % st->window)),
		.dest_qp = c->g.group_qpn, .qkey = c->g.qkey, .src_qp = c->my_qpn,
		.psn = (uint32_t)c->stats.packets_sent + (uint32_t)c->stats.retransmissions,
		.hdr = {
			.version = AGG_VERSION, .type = AGG_TYPE_CONTRIB,
			.dtype = (uint8_t)op->dtype, .op = (uint8_t)op->op,
			.flags = (uint8_t)(((g / st->window) & 1) |
					   (retx ? AGG_FLAG_RETRANSMIT : 0) |
					   (op->coll != AGG_COLL_ALLREDUCE ? AGG_FLAG_COLL : 0) |
					   (u.src ? 0 : AGG_FLAG_NO_DATA)),
			.coll = (uint8_t)op->coll, .root = u.root,
			.count = (uint16_t)u.count, .group_id = c->g.group_id,
			.rank = c->member_index, .fanin = 1,
			.slot = (uint16_t)(g % st->window),
			.coll_seq = op->seq, .pkt_idx = k,
		},
	};
	int len = agg_encode(buf, st->frame_cap, &s, u.src ? u.src : none);
	if (len < 0)
		return hl_fail(c, INCA_ERR_INVAL, "encode: %s", agg_strerror(len));
	f->data = buf;
	f->len = (uint16_t)len;
	f->bth_off = (uint16_t)agg_spec_bth_offset(&s);
	f->msg_off = (uint16_t)(f->bth_off + AGG_BTH_LEN + AGG_DETH_LEN);
	f->msg_len = (uint16_t)(AGG_INCA_HLEN + (u.src ? s.hdr.count * op->esize : 0));
	return 0;
}

/* Hand n built frames to the transport and account for those it took.
 * Returns how many it took, or a negative INCA code. */
static int send_batch(struct inca_comm *c, const struct hl_frame *frames,
		      struct hl_slot *const *which, const bool *retx, unsigned n, double now)
{
	struct hl_stream *st = &c->stream;
	int rc = n ? c->tp->send(c, frames, n) : 0;

	for (int i = 0; i < rc; i++) {
		struct hl_slot *sl = which[i];

		sl->sent_us = now;
		if (!sl->sent) {
			/* the switch timeout counts from the first packet sent
			 * to an idle stream, not from a call made long before */
			if (st->unanswered++ == 0)
				st->last_progress_us = now;
			sl->first_sent_us = now;
		}
		sl->sent = true;
		if (retx[i]) {
			sl->retx++;
			c->stats.retransmissions++;
		} else {
			c->stats.packets_sent++;
		}
		c->stats.bytes_sent += frames[i].len;
		hl_dcqcn_advance(&c->dcqcn, now, frames[i].len);
	}
	return rc;
}

uint64_t hl_stream_frontier(struct inca_comm *c)
{
	struct hl_stream *st = &c->stream;

	while (st->oldest < c->gcount && st->slots[st->oldest % st->window].g != st->oldest)
		st->oldest++;
	return st->oldest;
}

/* Send what is due: first sends and retransmissions, paced by DCQCN.
 * Returns 0 or a negative INCA code; *next_due is when to look again. */
static int send_due(struct inca_comm *c, double now, double *next_due)
{
	struct hl_stream *st = &c->stream;
	struct hl_frame frames[SEND_BATCH];
	struct hl_slot *which[SEND_BATCH];
	bool retx[SEND_BATCH];
	unsigned n = 0;
	double rto = c->rto.rto;
	int rc;

	*next_due = now + rto;
	/* the switch paused our priority: send nothing until it ends (look
	 * again soon: an XON may end it early) */
	double paused = hl_pfc_wait_us(c, now);
	if (paused > 0) {
		c->stats.pfc_waits++;
		*next_due = now + (paused < PFC_RECHECK_US ? paused : PFC_RECHECK_US);
		return 0;
	}
	/* oldest packet first, as every rank does: results then complete in
	 * about the order each rank sent them, which is what makes "a packet
	 * sent after it completed" evidence of a loss */
	hl_stream_frontier(c);
	bool hold = hl_plan_hold_dead(c);         /* no first sends (hl_plan.c) */
	for (uint32_t i = 0; i < st->window; i++) {
		struct hl_slot *sl = &st->slots[(st->oldest + i) % st->window];
		if (n == SEND_BATCH) {
			rc = send_batch(c, frames, which, retx, n, now);
			if (rc < 0)
				return rc;
			if ((unsigned)rc < n) {   /* the transport is full: later */
				*next_due = now + TX_FULL_WAIT_US;
				return 0;
			}
			n = 0;
		}
		if (sl->g >= c->gcount)
			continue;             /* idle: no collective needs it yet */
		if (!sl->op && !(sl->op = op_of_packet(c, sl->g)))
			continue;
		if (!sl->sent && hold)
			continue;
		/* exponential back-off per packet on repeated timeouts, never
		 * beyond the RTO ceiling (several tries fit in the switch
		 * timeout) */
		double backoff = rto * (double)(1u << (sl->retx < 6 ? sl->retx : 6));
		if (backoff > c->rto.max)
			backoff = c->rto.max;
		double due = !sl->sent ? now : sl->sent_us + backoff;
		if (due > now) {
			if (due < *next_due)
				*next_due = due;
			continue;
		}
		/* A timeout alone is weak evidence on a shared machine: a slot's
		 * result waits for every member, and one rank kept off the CPU
		 * stalls them all. A packet is retransmitted when one first sent
		 * after it has completed; with no such evidence only one probe
		 * goes per RTO (backed off), the rest wait for its answer. */
		/* The first use of each of a slot's two sets (packets 0 .. 2W-1
		 * of the communicator) is the exception. A switch that served
		 * an earlier job on the group drops every member's first copy
		 * (docs/protocol.md 3.2, step 2) and opens the set only for the
		 * copies sent after all of them: nothing completes until each
		 * is sent twice, and with one probe at a time a restart cost
		 * one RTO per slot (16 slots at the RTO ceiling took 20 s).
		 * For these, a packet sent in the same batch as one that has
		 * completed (every member is there) counts as lost too. Until
		 * one completes they go one probe at a time like the rest:
		 * every copy of a packet held by a tree's leaf sends its partial
		 * up again, so copies of every unanswered packet per RTO would
		 * load a tree waiting for a late rank; the switch's WAITs keep
		 * the ranks from taking such a wait for a failure. */
		bool first_use = sl->g < 2u * st->window;
		if (sl->sent && (first_use ? sl->first_sent_us > st->newest_done_sent_us
					   : sl->first_sent_us >= st->newest_done_sent_us)) {
			if (now < st->next_probe_us) {
				if (st->next_probe_us < *next_due)
					*next_due = st->next_probe_us;
				continue;
			}
			/* a stall's probes back off until a result comes */
			double wait = rto * (double)(1u << (st->probes < 6 ? st->probes : 6));
			st->next_probe_us = now + (wait < c->rto.max ? wait : c->rto.max);
			st->probes++;
			c->stats.probes++;
		}
		uint8_t *buf = st->frames + st->frame_cap * n;
		rc = build_frame(c, sl->op, (uint32_t)(sl->g - sl->op->gbase), sl->sent,
				 &frames[n], buf);
		if (rc)
			return rc;
		if (c->dcqcn_on && !hl_dcqcn_may_send(&c->dcqcn, now, frames[n].len)) {
			/* the rate limiter says wait: send what we have, then stop */
			c->stats.pause_waits++;
			*next_due = now + (double)frames[n].len / c->dcqcn.rc;
			break;
		}
		which[n] = sl;
		retx[n] = sl->sent;
		/* one back-off per timeout event, not one per lost packet;
		 * none while the sets are first used: the members may start
		 * a job up to seconds apart (the per-packet back-off above
		 * spaces those copies) and the RTO would keep it all job long */
		if (retx[n] && !first_use && now - c->last_backoff_us > rto) {
			hl_rto_backoff(&c->rto);
			c->last_backoff_us = now;
		}
		n++;
	}
	rc = send_batch(c, frames, which, retx, n, now);
	if (rc < 0)
		return rc;
	if ((unsigned)rc < n)
		*next_due = now + TX_FULL_WAIT_US;
	return 0;
}

/* op ended. With a plan, where this rank is changes now, not at the
 * caller's next call: the plan thread's acknowledgement says which
 * collective this rank completed first, and a caller that collects its
 * collectives latest first (or is between calls) has completed the
 * earlier ones long before it collects them. Acknowledged as not
 * completed, such a collective made the manager ask every rank that
 * completed it for a replay, which a rank that knew it complete
 * everywhere had no input for (the soak's "rank 2 no longer holds its
 * input" of 2026-11-28, a job failed for nothing). */
static void op_done(struct hl_coll *op, int rc)
{
	op->result = rc;
	op->finished = true;
	if (rc == 0)
		op->c->stats.collectives++;
	hl_plan_position(op->c);
}

/* A result that breaks the protocol: said, ignored (its packet is
 * retransmitted, and a switch that keeps answering so ends in a fallback). */
static void bad_result(struct inca_comm *c, const struct hl_coll *op, const struct agg_hdr *h,
		       const struct hl_use *u)
{
	hl_fail(c, INCA_ERR_PROTOCOL, "%s %u result %u: %s %s x %u, coll %u root %u%s, "
		"expected %s %s x %u, coll %u root %u%s", hl_coll_name(op->coll), op->seq,
		h->pkt_idx, agg_dtype_name(h->dtype), agg_op_name(h->op), h->count, h->coll,
		h->root, agg_hdr_has_data(h) ? "" : " without data", agg_dtype_name(op->dtype),
		agg_op_name(op->op), u->count, op->coll, op->coll ? u->root : 0,
		u->want_data ? "" : " without data");
	c->stats.duplicates++;
}

static void accept_result(struct inca_comm *c, const struct hl_rx *rx, double now)
{
	struct hl_stream *st = &c->stream;
	struct hl_coll *op = NULL;
	struct agg_hdr h;
	const uint8_t *pl;
	struct hl_slot *sl;
	struct hl_use u;

	if (agg_decode_msg(rx->msg, rx->len, &h, &pl) ||
	    (h.type != AGG_TYPE_RESULT && h.type != AGG_TYPE_WAIT) ||
	    h.group_id != c->g.group_id || h.rank != c->member_index) {
		c->stats.duplicates++;
		return;
	}
	for (unsigned i = 0; i < st->nops && !op; i++)
		if (st->ops[i]->seq == h.coll_seq && !st->ops[i]->ring && !st->ops[i]->finished)
			op = st->ops[i];
	if (!op || h.pkt_idx >= op->npkts) {
		c->stats.duplicates++;          /* a collective already done */
		return;
	}
	sl = &st->slots[(op->gbase + h.pkt_idx) % st->window];
	if (sl->g != op->gbase + h.pkt_idx) {
		c->stats.duplicates++;          /* late or duplicate */
		return;
	}
	if (h.type == AGG_TYPE_WAIT) {
		/* the switch holds the packet and waits for other ranks
		 * (docs/protocol.md 3.2, "Waiting"): it is there, so no
		 * fallback yet; the packet stays unanswered, and the call's
		 * deadline (INCA_TIMEOUT_MS) still bounds the wait */
		c->stats.switch_waits++;
		st->last_progress_us = now;
		return;
	}
	pkt_use(op, h.pkt_idx, &u);
	if (h.dtype != op->dtype || h.op != op->op || h.count != u.count ||
	    !(h.flags & AGG_FLAG_COLL) != (op->coll == AGG_COLL_ALLREDUCE) ||
	    (op->coll != AGG_COLL_ALLREDUCE && (h.coll != op->coll || h.root != u.root)) ||
	    (agg_hdr_has_data(&h) != u.want_data &&
	     /* a switch from before 2026-11-28 sends an allgather's owner
	      * and a bcast's root their own elements too: not used */
	     !(!u.want_data && u.src && op->coll >= AGG_COLL_ALLGATHER))) {
		bad_result(c, op, &h, &u);
		return;
	}
	if (u.dst)
		memcpy(u.dst, pl, (size_t)h.count * op->esize);
	/* Karn: first sends only. And one sample per round trip, as TCP
	 * takes them (RFC 6298's gains assume it): with one per packet the
	 * estimator would forget a stall within a window and time out again at
	 * the next one */
	if (sl->retx == 0 && sl->sent &&
	    (!c->rto.have_sample || now - c->last_rtt_sample_us >= c->rto.srtt) &&
	    hl_rto_sample(&c->rto, now - sl->sent_us))
		c->last_rtt_sample_us = now;
	/* a probe's answer says the stall ended, not that the packets sent
	 * with it were lost: its first transmission counts */
	if (sl->sent && sl->first_sent_us > st->newest_done_sent_us)
		st->newest_done_sent_us = sl->first_sent_us;
	if (sl->sent)
		st->unanswered--;
	c->stats.results++;
	/* the pace is measured from a result on: the wait for the first one
	 * is the round trip and the other ranks' turn to send, not the pace */
	if (st->pace_on) {
		st->pace_results++;
	} else {
		st->pace_on = true;
		st->pace_t0_us = now;
		st->pace_results = 0;
	}
	if (!st->unanswered)
		st->pace_on = false;   /* the time until the next call is no pace */
	c->stats.bytes_received += rx->len_wire;
	st->last_progress_us = now;
	st->probes = 0;
	/* the slot's next packet, maybe of a later collective */
	*sl = (struct hl_slot){ .g = sl->g + st->window };
	if (++op->done_pkts == op->npkts)
		op_done(op, 0);
}

/* Complete op on the ring. */
static void ring_complete(struct hl_coll *op)
{
	struct inca_comm *c = op->c;
	size_t es = op->esize;
	int rc;

	switch (op->coll) {
	case AGG_COLL_ALLREDUCE:
		rc = hl_ring_allreduce(c, op->seq, op->in, op->out, op->count, op->dtype, op->op,
				       op->deadline_us);
		break;
	case AGG_COLL_REDUCE:
		rc = hl_ring_reduce(c, op->seq, op->in, op->out, op->count, op->dtype, op->op,
				    op->root, op->deadline_us);
		break;
	case AGG_COLL_REDUCE_SCATTER:
		rc = hl_ring_reduce_scatter(c, op->seq, op->in, op->out, op->count, op->dtype,
					    op->op, op->deadline_us);
		break;
	case AGG_COLL_ALLGATHER:
		rc = hl_ring_allgather(c, op->seq, op->out, op->count * es, op->deadline_us);
		break;
	case AGG_COLL_BCAST:
		rc = hl_ring_bcast(c, op->seq, op->out, op->count * es, op->root, op->deadline_us);
		break;
	default:
		rc = INCA_ERR_INVAL;
		break;
	}
	if (rc == 0)
		c->stats.fallbacks++;
	op_done(op, rc);
}

/* The ring completes collectives in the order they were started, as
 * every rank does: those before op first. */
static void ring_until(struct inca_comm *c, struct hl_coll *op)
{
	struct hl_stream *st = &c->stream;

	for (unsigned i = 0; i < st->nops && !op->finished; i++)
		if (!st->ops[i]->finished && st->ops[i]->ring)
			ring_complete(st->ops[i]);
}

/* Every collective on the switch's path ends with err (its message set). */
static void fail_in_flight(struct inca_comm *c, int err)
{
	struct hl_stream *st = &c->stream;

	for (unsigned i = 0; i < st->nops; i++)
		if (!st->ops[i]->finished && !st->ops[i]->ring)
			op_done(st->ops[i], err);
	stream_reset(c);
}

/* A static group's ranks fall back each at its own collective: one may
 * have completed a collective in-network (its results came before the
 * switch died) that another has not. First the ranks agree on the lowest
 * collective any of them has not completed; from there every rank runs
 * them on the ring, in order: for real where it has not completed them,
 * as replays from the kept inputs where it has (hl_coll_recover). */
static int static_recover(struct inca_comm *c)
{
	uint32_t mine = hl_coll_first(c), first = mine, keep = hl_keep_from(c);
	int rc = hl_ring_agree(c, &first, &keep,
			       c->now_us(c) + (double)c->timeout_ms * 1000);

	if (rc)
		return rc;
	if (hl_seq_diff(keep, first) > 0)
		return hl_fail(c, INCA_ERR_SWITCH, "ring: collective %u is to run again "
			       "for a rank that did not complete it, but a rank no longer "
			       "keeps its input (it keeps them from collective %u: INCA_KEEP, "
			       "INCA_KEEP_MB)", first, keep);
	hl_keep_drop_before(c, first);
	if (first != mine)
		HL_INFO("rank %d: collectives %u to %u, completed here, run again on the "
			"ring for another rank", c->rank, first, mine - 1);
	rc = hl_coll_recover(c, first);
	/* from now on every collective runs on the ring: none is replayed */
	hl_keep_drop_before(c, c->next_seq);
	return rc;
}

/* The switch does not answer: the collectives in flight complete on the
 * ring (from now on, every collective does), or fail with fallback off. */
static void fall_back(struct inca_comm *c, struct hl_coll *op, const char *why)
{
	struct hl_stream *st = &c->stream;

	if (c->fallback == INCA_FALLBACK_OFF) {
		fail_in_flight(c, hl_fail(c, INCA_ERR_SWITCH, "%s (fallback is off)", why));
		return;
	}
	if (!c->warned_fallback && c->fallback == INCA_FALLBACK_AUTO) {
		HL_WARN("rank %d: %s: falling back to the host ring over TCP for this "
			"and later collectives", c->rank, why);
		c->warned_fallback = true;
	}
	c->switch_failed = true;
	for (unsigned i = 0; i < st->nops; i++)
		if (!st->ops[i]->finished)
			st->ops[i]->ring = true;
	stream_reset(c);
	if (!c->plan && c->size > 1) {
		int rc = static_recover(c);
		if (rc) {
			hl_coll_fail_all(c, rc);
			return;
		}
	}
	ring_until(c, op);
}

/* Packets done and in all of the collectives in flight. */
static void in_flight_counts(struct inca_comm *c, uint64_t *done, uint64_t *total)
{
	struct hl_stream *st = &c->stream;

	*done = *total = 0;
	for (unsigned i = 0; i < st->nops; i++)
		if (!st->ops[i]->finished && !st->ops[i]->ring) {
			*done += st->ops[i]->done_pkts;
			*total += st->ops[i]->npkts;
		}
}

/* The oldest collective in flight still in the network (not finished,
 * not on the ring), or NULL */
static const struct hl_coll *oldest_open(const struct hl_stream *st)
{
	for (unsigned i = 0; i < st->nops; i++)
		if (!st->ops[i]->finished && !st->ops[i]->ring)
			return st->ops[i];
	return NULL;
}

/* How long to sleep before looking for results, at most wait: 0 to wait
 * in the transport (woken by the first result). Also keeps the pace
 * estimate: results per unit of time while many were outstanding. */
static double coalesce_nap(struct inca_comm *c, double now, double wait)
{
	struct hl_stream *st = &c->stream;
	double nap;

	/* no nap with coalescing off or few packets outstanding, nor when
	 * every packet started has its slot: no window to refill in one
	 * batch, and a nap could only sleep through the call's end.
	 * With those naps 8 ranks on one CPU at 200 Mbit/s took 2.6-2.9 ms a
	 * 32 KiB call against 1.9-2.2 without (they slept through whole
	 * calls: AMD EPYC guest, 2026-11-29) */
	if (!st->coalesce || st->unanswered < COALESCE_MIN ||
	    c->gcount <= hl_stream_frontier(c) + st->window) {
		st->pace_on = false;       /* idle or nearly: not a pace */
		return 0;
	}
	if (st->pace_on && now - st->pace_t0_us >= PACE_SAMPLE_US && st->pace_results) {
		double gap = (now - st->pace_t0_us) / st->pace_results;
		st->gap_us = st->gap_us > 0 ? st->gap_us + (gap - st->gap_us) / 4 : gap;
		st->pace_t0_us = now;
		st->pace_results = 0;
	}
	if (st->gap_us <= 0)
		return 0;
	nap = st->gap_us * st->unanswered / 2;
	/* scaled down (NAP_SCALE_MIN); a nap scaled below the shortest worth
	 * taking is not taken, and lets the scale grow by 1/128, so that
	 * naps come back (and are tried again) where they would be long */
	if (nap >= COALESCE_MIN_NAP_US && nap * st->nap_scale < COALESCE_MIN_NAP_US &&
	    st->nap_scale < 1)
		st->nap_scale = st->nap_scale + 1.0 / 128 < 1 ? st->nap_scale + 1.0 / 128 : 1;
	nap *= st->nap_scale;
	/* not past the oldest collective's last result but one: a nap that
	 * holds a completion holds whoever waits for it (the caller, the
	 * local ranks of a host's leader), and with small collectives in
	 * flight it slows the very pace it is measured on (8 B
	 * MPI_Iallreduce, 1000 in flight, 2 ranks per host: 52 us a call
	 * with such naps, 35-43 without). A large collective naps as before. */
	const struct hl_coll *o = oldest_open(st);
	double left = o ? st->gap_us * (o->npkts - o->done_pkts - 1.0) : nap;
	if (nap > left)
		nap = left;
	if (nap > COALESCE_MAX_NAP_US)
		nap = COALESCE_MAX_NAP_US;
	if (nap > c->rto.rto / 4)
		nap = c->rto.rto / 4;
	if (nap > wait)
		nap = wait;
	return nap >= COALESCE_MIN_NAP_US ? nap : 0;
}

static void nap_us(double us)
{
	struct timespec ts = { (time_t)(us / 1e6), (long)((us - (double)(long)(us / 1e6) * 1e6) * 1e3) };

	nanosleep(&ts, NULL);
}

int hl_coll_progress(struct hl_coll *op, double budget_us)
{
	struct inca_comm *c = op->c;
	struct hl_stream *st = &c->stream;
	struct hl_rx rx[RECV_BATCH];
	double now = c->now_us(c), until = now + budget_us;
	int rc;

	if (op->finished)
		return 1;
	if (op->ring) {
		ring_until(c, op);
		return 1;
	}
	for (;;) {
		double next_due;

		if (c->plan) {
			/* a new plan's cut may move this collective to the ring */
			rc = hl_plan_progress(c);
			if (rc < 0 && !op->finished) {
				/* every collective not finished, on the ring too (a
				 * failed recovery leaves them there): none may end as
				 * if it had its result */
				hl_coll_fail_all(c, rc);
				return 1;
			}
			if (op->finished)
				return 1;
			if (op->ring) {
				ring_until(c, op);
				return 1;
			}
		}
		rc = send_due(c, now, &next_due);
		if (rc < 0) {
			fail_in_flight(c, rc);
			return 1;
		}
		double wait = next_due - now;
		if (wait > until - now)
			wait = until - now;
		if (wait < 0)
			wait = 0;
		if (wait > 100000)
			wait = 100000;
		double nap = coalesce_nap(c, now, wait);
		uint64_t results0 = c->stats.results;
		unsigned unanswered0 = st->unanswered;
		if (nap > 0) {
			st->naps++;
			nap_us(nap);
			now = c->now_us(c);
			wait = next_due > now ? next_due - now : 0;
			if (wait > until - now)
				wait = until - now > 0 ? until - now : 0;
			if (wait > 100000)
				wait = 100000;
		}
		/* everything already queued is taken before the timers are looked
		 * at again: a rank kept off the CPU for longer than the RTO finds
		 * its results waiting, and must not retransmit them */
		/* a rank about to sleep for its results polls for them first,
		 * for up to spin_us (not when coalescing, which sleeps on
		 * purpose): see SPIN_US */
		double spin_end = nap > 0 ? 0 : now + st->spin_us;
		double spin_cpu = -1;   /* the CPU clock since the last empty poll (or the
					   first poll's start), spinning */
		bool again;
		do {
			bool spin = wait > 0 && now < spin_end;
			double t0 = now;

			if (spin && spin_cpu < 0)
				spin_cpu = thread_cpu_us();

			rc = c->tp->recv(c, rx, RECV_BATCH, spin ? 0 : (int)wait);
			if (rc < 0) {
				fail_in_flight(c, rc);
				return 1;
			}
			now = c->now_us(c);
			for (int i = 0; i < rc; i++) {
				if (rx[i].kind == HL_RX_CNP)
					hl_dcqcn_on_cnp(&c->dcqcn, now);
				else
					accept_result(c, &rx[i], now);
			}
			again = rc > 0;
			if (rc == 0 && spin) {
				/* nothing yet: CPU spent waiting, not working (the
				 * poll, and the yield before it if any) */
				double cpu = thread_cpu_us();
				c->stats.spin_polls++;
				c->stats.spin_cpu_us += cpu - spin_cpu;
				spin_cpu = cpu;
				/* let whatever shares this CPU run (the switch,
				 * another rank), then look again */
				wait -= now - t0;
				if (wait > 0) {
					sched_yield();
					now = c->now_us(c);
					again = true;
					continue;
				}
			}
			spin_cpu = -1;
			wait = 0;
		} while (again && !op->finished);
		if (nap > 0) {
			/* NAP_SCALE_MIN: how the nap went */
			uint64_t took = c->stats.results - results0;
			if (took * 4 >= (uint64_t)unanswered0 * 3)
				st->nap_scale = st->nap_scale / 2 > NAP_SCALE_MIN ? st->nap_scale / 2
										  : NAP_SCALE_MIN;
			else if (took * 2 <= unanswered0)
				st->nap_scale = st->nap_scale + 0.125 < 1 ? st->nap_scale + 0.125 : 1;
		}
		if (c->dcqcn_on)
			hl_dcqcn_advance(&c->dcqcn, now, 0);
		if (op->finished)
			return 1;
		uint64_t done, total;
		/* a static group's rank that fell back connects to its next
		 * rank's ring port, which every rank listens on from the start:
		 * seen while this rank waits, it goes too. Without it a tree
		 * whose leaf died would hold the ranks under the other leaves
		 * (the spine answers them with WAITs) to their deadline. */
		if (!c->plan && st->unanswered && c->ring_listen_fd >= 0 &&
		    now - st->last_progress_us > PEER_CHECK_US &&
		    now >= st->next_peer_check_us) {
			st->next_peer_check_us = now + PEER_CHECK_US;
			if (hl_ring_peer_waiting(c)) {
				fall_back(c, op, "the previous rank fell back (it "
					  "connected to this rank's ring port)");
				return 1;
			}
		}
		if (st->unanswered &&
		    now - st->last_progress_us > (double)c->switch_timeout_ms * 1000) {
			char why[160];
			in_flight_counts(c, &done, &total);
			if (c->plan) {
				/* the manager decides, for every rank at once,
				 * whatever the policy: ranks that failed here
				 * while others took a plan's cut to the ring
				 * would be in two places (libinca-mpi's own
				 * recovery against the cut); without a plan
				 * the call's deadline ends the wait */
				hl_plan_stalled(c, c->switch_timeout_ms);
				st->last_progress_us = now;
				continue;
			}
			snprintf(why, sizeof(why), "no result from switch %u.%u.%u.%u for %u ms "
				 "(%llu of %llu packets done)", c->g.switch_ip >> 24,
				 (c->g.switch_ip >> 16) & 255, (c->g.switch_ip >> 8) & 255,
				 c->g.switch_ip & 255, c->switch_timeout_ms,
				 (unsigned long long)done, (unsigned long long)total);
			fall_back(c, op, why);
			return 1;
		}
		/* the oldest collective's deadline: those after it wait for its
		 * slots, so all in flight end with it */
		const struct hl_coll *o = oldest_open(st);
		if (o && now > o->deadline_us) {
			in_flight_counts(c, &done, &total);
			fail_in_flight(c, hl_fail(c, INCA_ERR_TIMEOUT, "%s: deadline of %u ms passed "
						  "(%llu of %llu packets done)", hl_coll_name(o->coll),
						  c->timeout_ms, (unsigned long long)done,
						  (unsigned long long)total));
			return 1;
		}
		if (now >= until)
			return 0;
	}
}

/* Its input, kept for a replay (hl_keep.c): what the ring would need. */
static void keep_input(struct hl_coll *op)
{
	struct inca_comm *c = op->c;
	size_t n = op->count * op->esize * (op->coll == AGG_COLL_REDUCE_SCATTER ?
					     (size_t)c->size : 1);
	struct hl_kept k = { .seq = op->seq, .coll = op->coll, .dtype = op->dtype,
			     .op = op->op, .root = op->root, .count = op->count,
			     .esize = op->esize, .bytes = n, .gend = op->gbase + op->npkts,
			     .gen = c->stream_gen };

	if (op->copy && op->in == op->copy) {
		k.in = op->copy;            /* in place: the copy made at the start */
		k.cap = op->copy_cap;
		op->copy = NULL;
	} else if ((k.in = hl_keep_buffer(c, n, &k.cap))) {
		memcpy(k.in, op->in, n);
	} else {
		k.bytes = SIZE_MAX;         /* not kept: counted as lost */
	}
	hl_keep_put(c, &k);
}

int hl_coll_finish(struct hl_coll *op)
{
	struct inca_comm *c = op->c;
	struct hl_stream *st = &c->stream;
	int rc = op->result;

	/* in-network here, maybe not yet at another rank: should the switch
	 * die first, the ring may need it again (a static group's fallback;
	 * a plan's cut, which comes whatever the policy) */
	if (op->finished && rc == 0 && !op->ring) {
		if (may_rerun(c) && c->size > 1 && !c->switch_failed)
			keep_input(op);
		else
			hl_keep_lost(c, op->seq);
	} else if (op->finished && rc == 0) {
		hl_keep_ring_done(c, op->seq);
	}

	if (!op->finished) {
		/* ended without its result (the progress path never hands one
		 * back so): an error, never success with the buffer unwritten;
		 * its slots must not point at it */
		bool in_network = !op->ring;
		rc = hl_fail(c, INCA_ERR_INVAL, "%s %u ended without its result", hl_coll_name(op->coll),
			     op->seq);
		op_done(op, rc);
		if (in_network)
			stream_reset(op->c);
	}
	for (unsigned i = 0; i < st->nops; i++)
		if (st->ops[i] == op) {
			memmove(&st->ops[i], &st->ops[i + 1], sizeof(st->ops[0]) * (st->nops - i - 1));
			st->nops--;
			break;
		}
	op_free(op);
	hl_plan_position(c);
	return rc;
}

/* ---- for the manager's plans (hl_plan.c) ---- */


/* The lowest sequence number in the stream (of its unfinished collectives
 * only, if unfinished), else the next one's. */
static uint32_t stream_lowest(struct inca_comm *c, bool unfinished)
{
	struct hl_stream *st = &c->stream;
	uint32_t low = c->next_seq;

	for (unsigned i = 0; i < st->nops; i++)
		if (!(unfinished && st->ops[i]->finished) && hl_seq_diff(st->ops[i]->seq, low) < 0)
			low = st->ops[i]->seq;
	return low;
}

uint32_t hl_coll_first(struct inca_comm *c)
{
	return stream_lowest(c, true);
}

uint32_t hl_coll_oldest(struct inca_comm *c)
{
	return stream_lowest(c, false);
}

void hl_coll_fail_all(struct inca_comm *c, int err)
{
	struct hl_stream *st = &c->stream;

	for (unsigned i = 0; i < st->nops; i++)
		if (!st->ops[i]->finished)
			op_done(st->ops[i], err);
	stream_reset(c);
}

void hl_coll_restart(struct inca_comm *c)
{
	c->gcount = 0;
	stream_reset(c);
	c->stream.newest_done_sent_us = 0;
	c->stream.next_probe_us = 0;
}

void hl_coll_idle_progress(struct inca_comm *c, double budget_us)
{
	struct hl_stream *st = &c->stream;

	for (unsigned i = 0; i < st->nops; i++)
		if (!st->ops[i]->finished && !st->ops[i]->ring) {
			hl_coll_progress(st->ops[i], budget_us);
			return;
		}
	nap_us(budget_us);
}

int hl_coll_skip(struct inca_comm *c)
{
	bool ring;
	uint32_t seq;

	if (!c->plan) {
		c->next_seq++;
		return 0;
	}
	/* routed as a collective is: a new plan's cut applied here, held at
	 * an acknowledged one (the manager's cut counts this number); where
	 * this rank is moves past it (nothing to complete or replay there) */
	int rc = hl_plan_route(c, &ring, &seq);
	if (!rc)
		hl_plan_position(c);
	return rc;
}

/* A collective this rank completed, run again on the ring for the others;
 * its results are dropped. */
static int replay(struct inca_comm *c, uint32_t seq, enum agg_coll coll, enum agg_dtype dtype,
		  enum agg_op op, int root, size_t count, size_t es, const uint8_t *in,
		  double deadline)
{
	size_t n = (size_t)c->size, bytes = count * es;
	uint8_t *tmp = malloc(coll == AGG_COLL_ALLGATHER ? bytes * n : bytes ? bytes : 1);
	int rc;

	if (!tmp)
		return hl_fail(c, INCA_ERR_NOMEM, "replay of collective %u: out of memory", seq);
	switch (coll) {
	case AGG_COLL_ALLREDUCE:
		rc = hl_ring_allreduce(c, seq, in, tmp, count, dtype, op, deadline);
		break;
	case AGG_COLL_REDUCE:
		rc = hl_ring_reduce(c, seq, in, tmp, count, dtype, op, root, deadline);
		break;
	case AGG_COLL_REDUCE_SCATTER:
		rc = hl_ring_reduce_scatter(c, seq, in, tmp, count, dtype, op, deadline);
		break;
	case AGG_COLL_ALLGATHER:
		memcpy(tmp + (size_t)c->rank * bytes, in, bytes);
		rc = hl_ring_allgather(c, seq, tmp, bytes, deadline);
		break;
	case AGG_COLL_BCAST:
		memcpy(tmp, in, bytes);
		rc = hl_ring_bcast(c, seq, tmp, bytes, root, deadline);
		break;
	default:
		rc = INCA_ERR_INVAL;
		break;
	}
	free(tmp);
	if (rc == 0)
		c->stats.replays++;
	return rc;
}

int hl_coll_recover(struct inca_comm *c, uint32_t from)
{
	struct hl_stream *st = &c->stream;
	const struct hl_kept *kept = c->keep.kept;
	unsigned nkept = c->keep.n;
	int rc = 0;

	/* every collective of the stream goes to the ring: none is left on
	 * the failed tree */
	for (unsigned i = 0; i < st->nops; i++)
		if (!st->ops[i]->finished)
			st->ops[i]->ring = true;
	stream_reset(c);
	/* then in sequence order from `from`: the unfinished for real, the
	 * finished (in-network, not yet collected) and the kept as replays */
	for (uint32_t s = from;; s++) {
		const struct hl_kept *k = NULL;
		struct hl_coll *op = NULL;
		bool later = false;

		for (unsigned i = 0; i < st->nops; i++) {
			if (st->ops[i]->seq == s)
				op = st->ops[i];
			else if (hl_seq_diff(st->ops[i]->seq, s) > 0 &&
				 (!st->ops[i]->finished || !st->ops[i]->ring))
				later = true;
		}
		/* the kept inputs after s count too when s is in the stream:
		 * collected out of order (the later one first), a kept input
		 * can follow the last collective of the stream, and a
		 * recovery that stopped there left its replay out while the
		 * other ranks ran it ("the ranks disagree") */
		for (unsigned i = 0; i < nkept; i++) {
			if (kept[i].seq == s) {
				if (!op)
					k = &kept[i];
			} else if (hl_seq_diff(kept[i].seq, s) > 0) {
				later = true;
			}
		}
		/* each replay has the deadline a call has; with a plan, so do
		 * the real ones (a call that waited for the cut is not out of
		 * time on the ring for it, at one rank and not another) */
		double deadline = c->now_us(c) + (double)c->timeout_ms * 1000;
		if (op && !op->finished) {
			if (c->plan && op->deadline_us < deadline)
				op->deadline_us = deadline;
			ring_complete(op);
			/* with a plan a failure ends the recovery: the plan is
			 * then broken, every later call fails, and the next
			 * would wait as long only to fail too. A static group's
			 * ranks go on through every collective, failed or
			 * not, so that their next calls stay in step. */
			if (c->plan)
				rc = op->result;
		} else if (op && op->result == 0 && !op->ring) {
			/* completed in-network here, maybe not elsewhere */
			rc = replay(c, s, op->coll, op->dtype, op->op, op->root, op->count,
				    op->esize, op->in, deadline);
		} else if (k) {
			rc = replay(c, s, k->coll, k->dtype, k->op, k->root, k->count, k->esize,
				    k->in, deadline);
		}
		if (rc)
			return rc;
		if (!later)
			break;
	}
	return 0;
}
