/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * All-reduce through the switch: the buffer is split into packets of E
 * elements; packet k uses slot (gbase + k) mod W and shadow set
 * ((gbase + k) / W) mod 2; a slot's next packet (k + W) is sent only when
 * k's result is in (self-clocking), so state is O(W) whatever the count.
 * Retransmission on an adaptive timeout (RFC 6298 estimator, Karn's rule,
 * exponential back-off), DCQCN pacing, a deadline on everything, and the
 * TCP ring when the switch does not answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hl_priv.h"

#define SEND_BATCH 32
#define RECV_BATCH 64
/* A transport that took less than offered (socket buffer or TX ring full)
 * is retried after this long, not in a busy loop that would starve the
 * switch and the other ranks on a shared machine. */
#define TX_FULL_WAIT_US 50
/* while paused by PFC, look for an XON this often */
#define PFC_RECHECK_US 100

struct hl_slot {
	int64_t pkt;           /* outstanding packet index, -1: slot done */
	double sent_us;        /* the latest transmission */
	double first_sent_us;  /* the first one */
	bool sent;
	unsigned retx;
};

struct hl_coll {
	struct inca_comm *c;
	const uint8_t *in;
	uint8_t *out;
	uint8_t *copy;         /* in-place input kept for the fallback */
	size_t count, esize;
	enum agg_dtype dtype;
	enum agg_op op;
	uint32_t elems, npkts, done_pkts, seq, gbase;
	uint32_t oldest;       /* lowest packet whose result is not in */
	uint16_t window;
	struct hl_slot *slots;
	uint8_t *frames;
	size_t frame_cap;
	double start_us, deadline_us, last_progress_us;
	/* the first transmission of the latest-sent packet whose result is
	 * in: an outstanding packet first sent before it was probably lost */
	double newest_done_sent_us;
	double next_probe_us;  /* no result at all: the next probe, not before */
	unsigned probes;       /* probes since the last result */
	int result;
	bool finished;
};

/* ---- RFC 6298 retransmission timeout ---- */

void hl_rto_init(struct hl_rto *r, double min_us, double max_us)
{
	*r = (struct hl_rto){ .min = min_us, .max = max_us < min_us ? min_us : max_us };
	/* before any sample: 5 ms, a few switch RTTs on a loaded lab machine */
	r->rto = 5000 < r->min ? r->min : 5000 > r->max ? r->max : 5000;
}

void hl_rto_sample(struct hl_rto *r, double rtt)
{
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
}

void hl_rto_backoff(struct hl_rto *r)
{
	r->rto *= 2;
	if (r->rto > r->max)
		r->rto = r->max;
}

/* ---- the operation ---- */

static uint32_t pkt_count(const struct hl_coll *op, uint32_t k)
{
	size_t first = (size_t)k * op->elems;
	size_t n = op->count - first;

	return (uint32_t)(n < op->elems ? n : op->elems);
}

int hl_allreduce_start(struct inca_comm *c, const void *sendbuf, void *recvbuf,
		       size_t count, enum agg_dtype dtype, enum agg_op op_code,
		       struct hl_coll **out)
{
	struct hl_coll *op;
	size_t esize = agg_dtype_size(dtype);

	if (!c || !recvbuf || !sendbuf || agg_op_check(dtype, op_code) || count == 0)
		return c ? hl_fail(c, INCA_ERR_INVAL, "allreduce: need buffers, count > 0 and "
				   "an op valid for the dtype (%s %s)", agg_dtype_name(dtype),
				   agg_op_name(op_code)) : INCA_ERR_INVAL;
	if (c->active)
		return hl_fail(c, INCA_ERR_BUSY, "allreduce: another operation is in progress");
	if (c->mgr && !c->switch_failed && c->fallback != INCA_FALLBACK_FORCE) {
		/* renews the job's lease now and then, and learns if its
		 * tree failed (a switch went down) */
		char why[256];
		if (hl_manager_renew(c->mgr, why, sizeof(why))) {
			if (c->fallback == INCA_FALLBACK_OFF)
				return hl_fail(c, INCA_ERR_SWITCH, "the manager says the job "
					       "failed: %s (fallback is off)", why);
			HL_WARN("rank %d: the manager says the job failed: %s: falling back "
				"to the host ring over TCP", c->rank, why);
			c->warned_fallback = true;
			c->switch_failed = true;
		}
	}
	if (count > ((size_t)UINT32_MAX - 1) * c->g.elems_per_pkt / 2)
		return hl_fail(c, INCA_ERR_INVAL, "allreduce: count %zu too large", count);
	op = calloc(1, sizeof(*op));
	if (!op)
		return hl_fail(c, INCA_ERR_NOMEM, "allreduce: out of memory");
	op->c = c;
	op->out = recvbuf;
	op->in = sendbuf == INCA_IN_PLACE ? recvbuf : sendbuf;
	op->count = count;
	op->esize = esize;
	op->dtype = dtype;
	op->op = op_code;
	/* E elements, and the INCA header plus elements within the IB MTU: a
	 * UD message never exceeds the path MTU (every rank computes the same) */
	op->elems = c->g.elems_per_pkt;
	if (AGG_INCA_HLEN + (size_t)op->elems * esize > c->g.ib_mtu)
		op->elems = (uint32_t)((c->g.ib_mtu - AGG_INCA_HLEN) / esize);
	op->npkts = (uint32_t)((count + op->elems - 1) / op->elems);
	op->window = c->g.window;
	op->seq = c->next_seq++;
	op->gbase = c->gcount;
	c->gcount += op->npkts;
	op->start_us = op->last_progress_us = c->now_us(c);
	op->deadline_us = op->start_us + (double)c->timeout_ms * 1000;
	op->result = INCA_OK;

	if (sendbuf == INCA_IN_PLACE && c->fallback == INCA_FALLBACK_AUTO &&
	    !c->switch_failed) {
		/* results overwrite the input: keep it for a fallback */
		op->copy = malloc(count * esize);
		if (!op->copy) {
			free(op);
			return hl_fail(c, INCA_ERR_NOMEM, "allreduce: out of memory for the "
				       "in-place copy (%zu bytes)", count * esize);
		}
		memcpy(op->copy, recvbuf, count * esize);
		op->in = op->copy;
	}
	op->slots = calloc(op->window, sizeof(*op->slots));
	op->frame_cap = AGG_FRAME_HDR_LEN + (size_t)op->elems * esize + 8;
	op->frames = malloc(op->frame_cap * SEND_BATCH);
	if (!op->slots || !op->frames) {
		free(op->slots);
		free(op->frames);
		free(op->copy);
		free(op);
		return hl_fail(c, INCA_ERR_NOMEM, "allreduce: out of memory");
	}
	for (uint32_t s = 0; s < op->window; s++)
		op->slots[s].pkt = -1;
	for (uint32_t k = 0; k < op->npkts && k < op->window; k++)
		op->slots[(op->gbase + k) % op->window].pkt = k;
	c->active = op;
	*out = op;
	return INCA_OK;
}

static int build_frame(struct hl_coll *op, uint32_t k, bool retx, struct hl_frame *f,
		       uint8_t *buf)
{
	struct inca_comm *c = op->c;
	uint32_t g = op->gbase + k;
	struct agg_frame_spec s = {
		.src_ip = c->my_ip, .dst_ip = c->g.switch_ip,
		.dscp = 26, .ecn = 2,                  /* ECT(0): DCQCN needs marks */
		.udp_sport = AGG_ROCEV2_UDP_PORT,
		.dest_qp = c->g.group_qpn, .qkey = c->g.qkey, .src_qp = c->my_qpn,
		.psn = (uint32_t)c->stats.packets_sent + (uint32_t)c->stats.retransmissions,
		.hdr = {
			.version = AGG_VERSION, .type = AGG_TYPE_CONTRIB,
			.dtype = (uint8_t)op->dtype, .op = (uint8_t)op->op,
			.flags = (uint8_t)(((g / op->window) & 1) |
					   (retx ? AGG_FLAG_RETRANSMIT : 0)),
			.count = (uint16_t)pkt_count(op, k), .group_id = c->g.group_id,
			.rank = c->member_index, .fanin = 1,
			.slot = (uint16_t)(g % op->window),
			.coll_seq = op->seq, .pkt_idx = k,
		},
	};
	int len = agg_encode(buf, op->frame_cap, &s,
			     op->in + (size_t)k * op->elems * op->esize);
	if (len < 0)
		return hl_fail(c, INCA_ERR_INVAL, "encode: %s", agg_strerror(len));
	f->data = buf;
	f->len = (uint16_t)len;
	f->bth_off = (uint16_t)agg_spec_bth_offset(&s);
	f->msg_off = (uint16_t)(f->bth_off + AGG_BTH_LEN + AGG_DETH_LEN);
	f->msg_len = (uint16_t)(AGG_INCA_HLEN + s.hdr.count * op->esize);
	return 0;
}

/* Hand n built frames to the transport and account for those it took.
 * Returns how many it took, or a negative INCA code. */
static int send_batch(struct hl_coll *op, const struct hl_frame *frames,
		      const uint32_t *which, const bool *retx, unsigned n, double now)
{
	struct inca_comm *c = op->c;
	int rc = n ? c->tp->send(c, frames, n) : 0;

	for (int i = 0; i < rc; i++) {
		struct hl_slot *sl = &op->slots[(op->gbase + which[i]) % op->window];

		sl->sent_us = now;
		if (!sl->sent)
			sl->first_sent_us = now;
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

/* Send what is due: first sends and retransmissions, paced by DCQCN.
 * Returns 0 or a negative INCA code; *next_due is when to look again. */
static int send_due(struct hl_coll *op, double now, double *next_due)
{
	struct inca_comm *c = op->c;
	struct hl_frame frames[SEND_BATCH];
	uint32_t which[SEND_BATCH];
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
	while (op->oldest < op->npkts &&
	       op->slots[(op->gbase + op->oldest) % op->window].pkt != (int64_t)op->oldest)
		op->oldest++;
	for (uint32_t i = 0; i < op->window; i++) {
		uint32_t s = (op->gbase + op->oldest + i) % op->window;
		if (n == SEND_BATCH) {
			rc = send_batch(op, frames, which, retx, n, now);
			if (rc < 0)
				return rc;
			if ((unsigned)rc < n) {   /* the transport is full: later */
				*next_due = now + TX_FULL_WAIT_US;
				return 0;
			}
			n = 0;
		}
		struct hl_slot *sl = &op->slots[s];
		if (sl->pkt < 0)
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
		if (sl->sent && sl->first_sent_us >= op->newest_done_sent_us) {
			if (now < op->next_probe_us) {
				if (op->next_probe_us < *next_due)
					*next_due = op->next_probe_us;
				continue;
			}
			/* a stall's probes back off until a result comes */
			double wait = rto * (double)(1u << (op->probes < 6 ? op->probes : 6));
			op->next_probe_us = now + (wait < c->rto.max ? wait : c->rto.max);
			op->probes++;
			c->stats.probes++;
		}
		uint8_t *buf = op->frames + op->frame_cap * n;
		rc = build_frame(op, (uint32_t)sl->pkt, sl->sent, &frames[n], buf);
		if (rc)
			return rc;
		if (c->dcqcn_on && !hl_dcqcn_may_send(&c->dcqcn, now, frames[n].len)) {
			/* the rate limiter says wait: send what we have, then stop */
			c->stats.pause_waits++;
			*next_due = now + (double)frames[n].len / c->dcqcn.rc;
			break;
		}
		which[n] = (uint32_t)sl->pkt;
		retx[n] = sl->sent;
		/* one back-off per timeout event, not one per lost packet */
		if (retx[n] && now - c->last_backoff_us > rto) {
			hl_rto_backoff(&c->rto);
			c->last_backoff_us = now;
		}
		n++;
	}
	rc = send_batch(op, frames, which, retx, n, now);
	if (rc < 0)
		return rc;
	if ((unsigned)rc < n)
		*next_due = now + TX_FULL_WAIT_US;
	return 0;
}

static void accept_result(struct hl_coll *op, const struct hl_rx *rx, double now)
{
	struct inca_comm *c = op->c;
	struct agg_hdr h;
	const uint8_t *pl;
	struct hl_slot *sl;

	if (agg_decode_msg(rx->msg, rx->len, &h, &pl) || h.type != AGG_TYPE_RESULT ||
	    (h.flags & AGG_FLAG_COLL) || h.group_id != c->g.group_id || h.coll_seq != op->seq ||
	    h.pkt_idx >= op->npkts || h.rank != c->member_index) {
		c->stats.duplicates++;
		return;
	}
	sl = &op->slots[(op->gbase + h.pkt_idx) % op->window];
	if (sl->pkt != (int64_t)h.pkt_idx) {
		c->stats.duplicates++;          /* late or duplicate */
		return;
	}
	if (h.dtype != op->dtype || h.op != op->op || h.count != pkt_count(op, h.pkt_idx)) {
		hl_fail(c, INCA_ERR_PROTOCOL, "result %u: %s %s x %u, expected %s %s x %u",
			h.pkt_idx, agg_dtype_name(h.dtype), agg_op_name(h.op), h.count,
			agg_dtype_name(op->dtype), agg_op_name(op->op),
			pkt_count(op, h.pkt_idx));
		c->stats.duplicates++;
		return;
	}
	memcpy(op->out + (size_t)h.pkt_idx * op->elems * op->esize, pl,
	       (size_t)h.count * op->esize);
	/* Karn: first sends only. And one sample per round trip, as TCP
	 * takes them (RFC 6298's gains assume it): with one per packet the
	 * estimator would forget a stall within a window and time out again at
	 * the next one */
	if (sl->retx == 0 && sl->sent &&
	    (!c->rto.have_sample || now - c->last_rtt_sample_us >= c->rto.srtt)) {
		hl_rto_sample(&c->rto, now - sl->sent_us);
		c->last_rtt_sample_us = now;
	}
	/* a probe's answer says the stall ended, not that the packets sent
	 * with it were lost: its first transmission counts */
	if (sl->sent && sl->first_sent_us > op->newest_done_sent_us)
		op->newest_done_sent_us = sl->first_sent_us;
	c->stats.results++;
	c->stats.bytes_received += rx->len_wire;
	op->done_pkts++;
	op->last_progress_us = now;
	op->probes = 0;
	uint64_t next = h.pkt_idx + (uint64_t)op->window;
	sl->pkt = next < op->npkts ? (int64_t)next : -1;
	sl->sent = false;
	sl->retx = 0;
}

static int fall_back(struct hl_coll *op, const char *why)
{
	struct inca_comm *c = op->c;
	int rc;

	if (c->fallback == INCA_FALLBACK_OFF)
		return hl_fail(c, INCA_ERR_SWITCH, "%s (fallback is off)", why);
	if (!c->warned_fallback && c->fallback == INCA_FALLBACK_AUTO) {
		HL_WARN("rank %d: %s: falling back to the host ring over TCP for this "
			"and later collectives", c->rank, why);
		c->warned_fallback = true;
	}
	c->switch_failed = true;
	rc = hl_ring_allreduce(c, op->in, op->out, op->count, op->dtype, op->op,
			       op->deadline_us);
	if (rc == 0)
		c->stats.fallbacks++;
	return rc;
}

int hl_coll_progress(struct hl_coll *op, double budget_us)
{
	struct inca_comm *c = op->c;
	struct hl_rx rx[RECV_BATCH];
	double now = c->now_us(c), until = now + budget_us;
	int rc;

	if (op->finished)
		return 1;
	if (c->switch_failed || c->fallback == INCA_FALLBACK_FORCE) {
		rc = c->fallback == INCA_FALLBACK_FORCE
			     ? hl_ring_allreduce(c, op->in, op->out, op->count, op->dtype,
						 op->op, op->deadline_us)
			     : fall_back(op, "the switch failed earlier");
		if (rc == 0 && c->fallback == INCA_FALLBACK_FORCE)
			c->stats.fallbacks++;
		op->result = rc;
		op->finished = true;
		return rc ? rc : 1;
	}
	for (;;) {
		double next_due;

		rc = send_due(op, now, &next_due);
		if (rc < 0)
			goto fail;
		double wait = next_due - now;
		if (wait > until - now)
			wait = until - now;
		if (wait < 0)
			wait = 0;
		if (wait > 100000)
			wait = 100000;
		/* everything already queued is taken before the timers are looked
		 * at again: a rank kept off the CPU for longer than the RTO finds
		 * its results waiting, and must not retransmit them */
		do {
			rc = c->tp->recv(c, rx, RECV_BATCH, (int)wait);
			if (rc < 0)
				goto fail;
			now = c->now_us(c);
			for (int i = 0; i < rc; i++) {
				if (rx[i].kind == HL_RX_CNP)
					hl_dcqcn_on_cnp(&c->dcqcn, now);
				else
					accept_result(op, &rx[i], now);
			}
			wait = 0;
		} while (rc > 0 && op->done_pkts < op->npkts);
		if (c->dcqcn_on)
			hl_dcqcn_advance(&c->dcqcn, now, 0);
		if (op->done_pkts == op->npkts) {
			op->finished = true;
			c->stats.collectives++;
			return 1;
		}
		if (now - op->last_progress_us > (double)c->switch_timeout_ms * 1000) {
			char why[160];
			snprintf(why, sizeof(why), "no result from switch %u.%u.%u.%u for %u ms "
				 "(%u of %u packets done)", c->g.switch_ip >> 24,
				 (c->g.switch_ip >> 16) & 255, (c->g.switch_ip >> 8) & 255,
				 c->g.switch_ip & 255, c->switch_timeout_ms, op->done_pkts,
				 op->npkts);
			rc = fall_back(op, why);
			op->result = rc;
			op->finished = true;
			if (rc == 0)
				c->stats.collectives++;
			return rc ? rc : 1;
		}
		if (now > op->deadline_us) {
			rc = hl_fail(c, INCA_ERR_TIMEOUT, "allreduce: deadline of %u ms passed "
				     "(%u of %u packets done)", c->timeout_ms, op->done_pkts,
				     op->npkts);
			goto fail;
		}
		if (now >= until)
			return 0;
	}
fail:
	op->result = rc;
	op->finished = true;
	return rc;
}

int hl_coll_finish(struct hl_coll *op)
{
	int rc = op->result;

	op->c->active = NULL;
	free(op->slots);
	free(op->frames);
	free(op->copy);
	free(op);
	return rc;
}

/* ---- the public calls ---- */

struct inca_request {
	struct hl_coll *op;
};

int inca_iallreduce(inca_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
		    inca_dtype_t dtype, inca_op_t op, inca_request_t **req)
{
	struct hl_coll *coll;
	int rc;

	if (!req)
		return c ? hl_fail(c, INCA_ERR_INVAL, "iallreduce: req is NULL") : INCA_ERR_INVAL;
	*req = NULL;
	rc = hl_allreduce_start(c, sendbuf, recvbuf, count, (enum agg_dtype)dtype,
				(enum agg_op)op, &coll);
	if (rc)
		return rc;
	*req = malloc(sizeof(**req));
	if (!*req) {
		hl_coll_finish(coll);
		return hl_fail(c, INCA_ERR_NOMEM, "iallreduce: out of memory");
	}
	(*req)->op = coll;
	return INCA_OK;
}

int inca_test(inca_request_t *req, int *done)
{
	return inca_test_timeout(req, 0, done);
}

int inca_test_timeout(inca_request_t *req, unsigned timeout_us, int *done)
{
	int rc;

	if (!req || !done)
		return INCA_ERR_INVAL;
	rc = hl_coll_progress(req->op, timeout_us);
	*done = rc != 0;
	if (rc == 0)
		return INCA_OK;
	rc = hl_coll_finish(req->op);
	free(req);
	return rc;
}

int inca_wait(inca_request_t *req)
{
	int rc;

	if (!req)
		return INCA_ERR_INVAL;
	do
		rc = hl_coll_progress(req->op, 1e6);
	while (rc == 0);
	rc = hl_coll_finish(req->op);
	free(req);
	return rc;
}

int inca_allreduce(inca_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
		   inca_dtype_t dtype, inca_op_t op)
{
	inca_request_t *req;
	int rc = inca_iallreduce(c, sendbuf, recvbuf, count, dtype, op, &req);

	return rc ? rc : inca_wait(req);
}

int inca_barrier(inca_comm_t *c)
{
	int32_t one = 1;

	if (!c)
		return INCA_ERR_INVAL;
	int rc = inca_allreduce(c, INCA_IN_PLACE, &one, 1, INCA_INT32, INCA_SUM);
	if (rc == 0 && one != c->size)
		return hl_fail(c, INCA_ERR_PROTOCOL, "barrier: counted %d ranks, expected %d",
			       one, c->size);
	return rc;
}

int inca_bcast(inca_comm_t *c, void *buf, size_t count, inca_dtype_t dtype, int root)
{
	size_t esize = agg_dtype_size((enum agg_dtype)dtype), bytes, words;
	uint32_t *tmp;
	int rc;

	if (!c)
		return INCA_ERR_INVAL;
	if (!buf || !esize || count == 0 || root < 0 || root >= c->size)
		return hl_fail(c, INCA_ERR_INVAL, "bcast: need a buffer, count > 0, a dtype "
			       "and 0 <= root < %d", c->size);
	/* bitwise OR of int32 words, zeros from everyone but the root: exact
	 * for any dtype, NaN payloads and signed zeros included */
	bytes = count * esize;
	words = (bytes + 3) / 4;
	tmp = calloc(words, 4);
	if (!tmp)
		return hl_fail(c, INCA_ERR_NOMEM, "bcast: out of memory");
	if (c->rank == root)
		memcpy(tmp, buf, bytes);
	rc = inca_allreduce(c, INCA_IN_PLACE, tmp, words, INCA_INT32, INCA_BOR);
	if (rc == 0 && c->rank != root)   /* the root's buffer is only read */
		memcpy(buf, tmp, bytes);
	free(tmp);
	return rc;
}
