/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Egress shaping: a software FIFO per (worker, port) drained by a token
 * bucket, so a veth link behaves like a link with a line rate and
 * congestion builds in the switch's queue (tail drop past the limit).
 */
#include <rte_ethdev.h>

#include "dp_priv.h"

/* Bytes a frame occupies on the wire: preamble + SFD 8, FCS 4, IFG 12. */
#define WIRE_OVERHEAD 24

void dp_egress_init(struct dp_egress *q, uint64_t rate_bps, uint32_t limit,
		    uint64_t tsc_hz)
{
	memset(q, 0, sizeof(*q));
	q->limit_bytes = limit;
	q->rate_bps = rate_bps;
	if (rate_bps) {
		q->bytes_per_tsc = (double)rate_bps / 8.0 / (double)tsc_hz;
		/* 1 ms of line rate, at least two jumbo frames */
		q->burst = RTE_MAX((double)rate_bps / 8.0 / 1000.0, 2.0 * 9018);
		q->tokens = q->burst;
	}
}

bool dp_egress_enqueue(struct dp_egress *q, struct rte_mbuf *m)
{
	if (q->tail - q->head >= DP_EGRESS_SLOTS ||
	    q->bytes + m->pkt_len > q->limit_bytes)
		return false;
	q->slots[q->tail++ % DP_EGRESS_SLOTS] = m;
	q->bytes += m->pkt_len;
	return true;
}

uint32_t dp_egress_flush(struct dp_egress *q, uint16_t port, uint16_t txq,
			 uint64_t now, uint64_t *tx_bytes)
{
	struct rte_mbuf *burst[DP_BURST];
	uint32_t n = 0, sent, total = 0;
	double tokens;

	if (q->tail == q->head)
		return 0;
	if (q->rate_bps) {
		q->tokens += (double)(now - q->last_tsc) * q->bytes_per_tsc;
		if (q->tokens > q->burst)
			q->tokens = q->burst;
	}
	q->last_tsc = now;

	for (;;) {
		tokens = q->tokens;
		n = 0;
		while (n < DP_BURST && q->head + n != q->tail) {
			struct rte_mbuf *m = q->slots[(q->head + n) % DP_EGRESS_SLOTS];
			double cost = m->pkt_len + WIRE_OVERHEAD;

			if (q->rate_bps && tokens < cost)
				break;
			tokens -= cost;
			burst[n++] = m;
		}
		if (n == 0)
			break;
		sent = rte_eth_tx_burst(port, txq, burst, (uint16_t)n);
		for (uint32_t i = 0; i < sent; i++) {
			q->bytes -= burst[i]->pkt_len;
			*tx_bytes += burst[i]->pkt_len;
			if (q->rate_bps)
				q->tokens -= burst[i]->pkt_len + WIRE_OVERHEAD;
		}
		q->head += sent;
		total += sent;
		if (sent < n)     /* the NIC queue is full: try next loop */
			break;
	}
	return total;
}

void dp_egress_drain(struct dp_egress *q)
{
	while (q->head != q->tail)
		rte_pktmbuf_free(q->slots[q->head++ % DP_EGRESS_SLOTS]);
	q->bytes = 0;
}
