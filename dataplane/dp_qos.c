/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Egress: per (worker, port) one FIFO per traffic class, a scheduler
 * (strict priority for the strict TCs, deficit round robin weighted by
 * wrr_weights for the rest), PFC pauses honoured per TC, ECN marking at
 * dequeue (lossless TCs, and lossy ones unless ecn.lossy is off), and a token bucket so that a veth link behaves
 * like a link with a line rate and congestion builds in these queues.
 *
 * Buffer: lossy TCs tail-drop at the port's queue limit; lossless TCs are
 * admitted against the ingress port's occupancy (XOFF + headroom), which
 * PFC keeps below the limit when the sender honours it.
 */
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_malloc.h>

#include "dp_priv.h"

/* Bytes a frame occupies on the wire: preamble + SFD 8, FCS 4, IFG 12. */
#define WIRE_OVERHEAD 24
/* DRR quantum per unit of weight: at least one jumbo frame, so that every
 * visit of a backlogged TC sends at least one packet. */
#define DRR_QUANTUM   9216

const char *const dp_qdrop_names[DP_QDROP_END] = {
	[DP_Q_OK] = "ok",
#define DP_X_QNAME(n, c) [DP_QDROP_##n] = c,
	DP_QDROPS(DP_X_QNAME)
#undef DP_X_QNAME
};

void dp_qos_cfg_default(struct dp_qos_cfg *q)
{
	memset(q, 0, sizeof(*q));
	q->dscp_tc[26] = 3;              /* RoCE data: lossless */
	q->dscp_tc[48] = 6;              /* CNP: strict priority */
	q->lossless_mask = 1u << 3;
	q->strict_mask = 1u << 6;
	for (unsigned t = 0; t < DP_NUM_TC; t++)
		q->wrr_weight[t] = 1;
	q->pfc = true;
	q->xoff_bytes = 128 * 1024;
	q->xon_bytes = 64 * 1024;
	q->headroom_bytes = 256 * 1024;
	q->pause_quanta = 0xffff;
	q->ecn = true;
	q->ecn_lossy = true;
	q->kmin_bytes = 32 * 1024;
	q->kmax_bytes = 128 * 1024;
	q->pmax = 0.2;
	q->cnp = true;
	q->cnp_interval_us = 50;
	q->cnp_dscp = 48;
	q->watchdog = true;
	q->wd_detect_ms = 200;
	q->wd_restore_ms = 200;
	q->wd_action = DP_WD_DROP;
}

int dp_qos_init(struct dp_switch *sw)
{
	sw->qos = rte_zmalloc("inca_qos", sizeof(*sw->qos), RTE_CACHE_LINE_SIZE);
	if (!sw->qos) {
		DP_LOG(ERR, "out of memory for the QoS state\n");
		return -ENOMEM;
	}
	sw->qos->cfg = &sw->cfg->qos;
	sw->qos->tsc_hz = sw->tsc_hz;
	rte_spinlock_init(&sw->qos->ev_lock);
	return 0;
}

void dp_qos_free(struct dp_switch *sw)
{
	rte_free(sw->qos);
	sw->qos = NULL;
}

void dp_egress_init(struct dp_egress *q, uint64_t rate_bps, uint32_t limit,
		    uint64_t tsc_hz, struct dp_qos *qos, uint16_t port_idx,
		    uint16_t port_id, uint16_t txq, struct dp_tc_stats *stats)
{
	memset(q, 0, sizeof(*q));
	q->limit_bytes = limit;
	q->rate_bps = rate_bps;
	q->qos = qos;
	q->port_idx = port_idx;
	q->port_id = port_id;
	q->txq = txq;
	q->stats = stats;
	q->drr_fresh = true;
	q->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)port_idx << 32 | txq);
	if (rate_bps) {
		q->bytes_per_tsc = (double)rate_bps / 8.0 / (double)tsc_hz;
		/* 1 ms of line rate, at least two jumbo frames */
		q->burst = RTE_MAX((double)rate_bps / 8.0 / 1000.0, 2.0 * 9018);
		q->tokens = q->burst;
	}
}

static inline struct dp_pq *pq_of(struct dp_qos *qos, uint32_t port, unsigned tc)
{
	return &qos->pq[port][tc];
}

static inline bool wd_stormed(struct dp_qos *qos, uint16_t port, unsigned tc)
{
	return __atomic_load_n(&qos->pq[port][tc].wd_stormed, __ATOMIC_RELAXED);
}

enum dp_qdrop dp_egress_enqueue(struct dp_egress *q, struct rte_mbuf *m)
{
	const struct dp_qos_cfg *cfg = q->qos->cfg;
	unsigned tc = m->hash.sched.traffic_class & (DP_NUM_TC - 1);
	uint32_t in = m->hash.sched.queue_id;
	struct dp_tcq *t = &q->q[tc];
	uint32_t len = m->pkt_len;

	if (t->tail - t->head >= DP_TC_SLOTS)
		return DP_QDROP_RING_FULL;
	if (dp_tc_lossless(cfg, tc)) {
		if (cfg->watchdog && cfg->wd_action == DP_WD_DROP &&
		    wd_stormed(q->qos, q->port_idx, tc))
			return DP_QDROP_WATCHDOG;
		if (in != DP_NO_PORT) {
			struct dp_pq *ip = pq_of(q->qos, in, tc);
			uint32_t cur = __atomic_load_n(&ip->ingress_bytes, __ATOMIC_RELAXED);

			if (cur + len > cfg->xoff_bytes + cfg->headroom_bytes)
				return DP_QDROP_HEADROOM;
			cur = __atomic_add_fetch(&ip->ingress_bytes, len, __ATOMIC_RELAXED);
			if (cur > __atomic_load_n(&ip->ingress_peak, __ATOMIC_RELAXED))
				__atomic_store_n(&ip->ingress_peak, cur, __ATOMIC_RELAXED);
		}
	} else if (t->bytes + len > q->limit_bytes) {
		return DP_QDROP_LOSSY_FULL;
	}
	t->slots[t->tail++ % DP_TC_SLOTS] = m;
	t->bytes += len;
	q->bytes += len;
	q->nonempty |= (uint8_t)(1u << tc);
	q->stats[tc].enq_pkts++;
	return DP_Q_OK;
}

/* The packet leaves the switch's buffer (sent or dropped). */
static inline void release(struct dp_egress *q, const struct rte_mbuf *m)
{
	unsigned tc = m->hash.sched.traffic_class & (DP_NUM_TC - 1);
	uint32_t in = m->hash.sched.queue_id;

	if (in != DP_NO_PORT && dp_tc_lossless(q->qos->cfg, tc))
		__atomic_sub_fetch(&q->qos->pq[in][tc].ingress_bytes, m->pkt_len,
				   __ATOMIC_RELAXED);
}

/* Lossless TCs with packets that the peer has paused (unless the watchdog
 * overrides the pause). The pause state is read once per flush, not once
 * per packet. */
static uint8_t paused_mask(struct dp_egress *q, uint64_t now)
{
	const struct dp_qos_cfg *cfg = q->qos->cfg;
	uint8_t ll = q->nonempty & cfg->lossless_mask, paused = 0;

	if (!cfg->pfc)
		return 0;
	for (unsigned tc = 0; ll; tc++, ll >>= 1) {
		if (!(ll & 1))
			continue;
		struct dp_pq *p = pq_of(q->qos, q->port_idx, tc);
		if (__atomic_load_n(&p->paused_until, __ATOMIC_RELAXED) <= now)
			continue;
		if (cfg->watchdog && cfg->wd_action != DP_WD_ALERT &&
		    __atomic_load_n(&p->wd_stormed, __ATOMIC_RELAXED))
			continue;    /* stormed: pauses are ignored */
		paused |= (uint8_t)(1u << tc);
	}
	return paused;
}

/* Which TC's head packet goes next, or -1. Strict TCs first (highest
 * first), then DRR over the others. Does not dequeue; commit() does. */
static int pick(struct dp_egress *q, uint8_t e)
{
	const struct dp_qos_cfg *cfg = q->qos->cfg;
	uint8_t strict = e & cfg->strict_mask;

	if (strict)
		return 31 - __builtin_clz(strict);
	e &= (uint8_t)~cfg->strict_mask;
	if (!e)
		return -1;
	for (unsigned i = 0; i < 2 * DP_NUM_TC + 1; i++) {
		unsigned tc = q->drr_cur;
		struct dp_tcq *t = &q->q[tc];

		if (!(e >> tc & 1)) {
			if (t->tail == t->head)
				q->deficit[tc] = 0;
			q->drr_cur = (uint8_t)((tc + 1) % DP_NUM_TC);
			q->drr_fresh = true;
			continue;
		}
		if (q->drr_fresh) {
			q->deficit[tc] += (int32_t)cfg->wrr_weight[tc] * DRR_QUANTUM;
			q->drr_fresh = false;
		}
		if (q->deficit[tc] >= (int32_t)t->slots[t->head % DP_TC_SLOTS]->pkt_len)
			return (int)tc;
		q->drr_cur = (uint8_t)((tc + 1) % DP_NUM_TC);
		q->drr_fresh = true;
	}
	return -1;   /* not reached: a fresh quantum covers any frame */
}

static inline uint32_t coin(struct dp_egress *q)
{
	q->rng ^= q->rng << 13;
	q->rng ^= q->rng >> 7;
	q->rng ^= q->rng << 17;
	return (uint32_t)(q->rng >> 32);
}

/* RED-like marking on the queue's instantaneous bytes: 0 at Kmin, Pmax at
 * Kmax, every ECT packet beyond Kmax. A lossy class tail-drops at
 * limit_bytes, which may lie below Kmax: there the curve is pulled inside
 * the queue (Kmin at most a quarter of it, Kmax at most half), so that ECN
 * senders such as TCP back off before the queue drops. IPv4 checksum
 * rewritten; the ICRC masks the TOS byte, so it stays valid. */
static void ecn_mark(struct dp_egress *q, struct rte_mbuf *m, uint32_t qbytes,
		     unsigned tc, bool lossless)
{
	const struct dp_qos_cfg *cfg = q->qos->cfg;
	uint32_t kmin = cfg->kmin_bytes, kmax = cfg->kmax_bytes;
	size_t off;
	struct rte_ipv4_hdr *ip;

	if (!lossless) {
		kmin = RTE_MIN(kmin, q->limit_bytes / 4);
		kmax = RTE_MIN(kmax, q->limit_bytes / 2);
		if (kmax <= kmin)
			kmax = kmin + 1;
	}
	if (qbytes <= kmin)
		return;
	off = dp_ipv4_offset(m);
	if (!off)
		return;
	ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, off);
	if ((ip->type_of_service & 3) == 0 || (ip->type_of_service & 3) == 3)
		return;      /* not ECN-capable, or already CE */
	if (qbytes < kmax) {
		double p = cfg->pmax * (double)(qbytes - kmin) / (double)(kmax - kmin);
		if ((double)coin(q) >= p * 4294967296.0)
			return;
	}
	ip->type_of_service |= 3;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	q->stats[tc].ecn_marked++;
}

static uint32_t transmit(struct dp_egress *q, struct rte_mbuf **burst, uint32_t n)
{
	uint32_t sent = rte_eth_tx_burst(q->port_id, q->txq, burst, (uint16_t)n);

	for (uint32_t i = 0; i < sent; i++) {
		unsigned tc = burst[i]->hash.sched.traffic_class & (DP_NUM_TC - 1);

		q->stats[tc].tx_pkts++;
		q->stats[tc].tx_bytes += burst[i]->pkt_len;
		release(q, burst[i]);
	}
	/* the NIC queue is full: keep the rest, in order, for next time */
	q->npending = n - sent;
	for (uint32_t i = 0; i < q->npending; i++)
		q->pending[i] = burst[sent + i];
	return sent;
}

uint32_t dp_egress_flush(struct dp_egress *q, uint64_t now)
{
	const struct dp_qos_cfg *cfg = q->qos->cfg;
	struct rte_mbuf *burst[DP_BURST];
	uint32_t total = 0;

	if (!dp_egress_busy(q))
		return 0;
	if (q->rate_bps) {
		q->tokens += (double)(now - q->last_tsc) * q->bytes_per_tsc;
		if (q->tokens > q->burst)
			q->tokens = q->burst;
	}
	q->last_tsc = now;

	if (q->npending) {
		uint32_t n = q->npending;

		memcpy(burst, q->pending, n * sizeof(burst[0]));
		total += transmit(q, burst, n);
		if (q->npending)
			return total;
	}
	const uint8_t paused = paused_mask(q, now);
	for (;;) {
		uint32_t n = 0;

		while (n < DP_BURST) {
			/* TCs that may send: non-empty and not paused */
			uint8_t e = q->nonempty & (uint8_t)~paused;
			int tc = e ? pick(q, e) : -1;
			struct dp_tcq *t;
			struct rte_mbuf *m;

			if (tc < 0)
				break;
			t = &q->q[tc];
			m = t->slots[t->head % DP_TC_SLOTS];
			double cost = m->pkt_len + WIRE_OVERHEAD;
			bool discard = dp_tc_lossless(cfg, (unsigned)tc) && cfg->watchdog &&
				       cfg->wd_action == DP_WD_DROP &&
				       wd_stormed(q->qos, q->port_idx, (unsigned)tc);

			if (!discard && q->rate_bps && q->tokens < cost)
				break;
			/* commit */
			uint32_t qbytes = t->bytes;
			t->head++;
			t->bytes -= m->pkt_len;
			q->bytes -= m->pkt_len;
			if (t->head == t->tail)
				q->nonempty &= (uint8_t)~(1u << tc);
			if (!(cfg->strict_mask >> tc & 1))
				q->deficit[tc] -= (int32_t)m->pkt_len;
			if (discard) {
				q->stats[tc].drops[DP_QDROP_WATCHDOG]++;
				q->stats[tc].discarded++;
				release(q, m);
				rte_pktmbuf_free(m);
				continue;
			}
			if (cfg->ecn) {
				bool ll = dp_tc_lossless(cfg, (unsigned)tc);

				if (ll || cfg->ecn_lossy)
					ecn_mark(q, m, qbytes, (unsigned)tc, ll);
			}
			if (q->rate_bps)
				q->tokens -= cost;
			burst[n++] = m;
		}
		if (n == 0)
			break;
		total += transmit(q, burst, n);
		if (q->npending)
			break;
	}
	return total;
}

void dp_egress_drain(struct dp_egress *q)
{
	for (uint32_t i = 0; i < q->npending; i++) {
		release(q, q->pending[i]);
		rte_pktmbuf_free(q->pending[i]);
	}
	q->npending = 0;
	for (unsigned tc = 0; tc < DP_NUM_TC; tc++) {
		struct dp_tcq *t = &q->q[tc];

		while (t->head != t->tail) {
			struct rte_mbuf *m = t->slots[t->head++ % DP_TC_SLOTS];
			release(q, m);
			rte_pktmbuf_free(m);
		}
		t->bytes = 0;
	}
	q->bytes = 0;
	q->nonempty = 0;
}
