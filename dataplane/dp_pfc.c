/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Priority flow control (IEEE 802.1Qbb) and the PFC watchdog.
 *
 * Reception (any worker): a PFC frame pauses the named lossless TCs of the
 * port it came in on for quanta x 512 bit times at the port's rate; quanta
 * 0 resumes them. Lossy TCs ignore PFC. Malformed frames are counted by
 * reason and ignored; nothing to 01:80:C2:00:00:0X is ever forwarded.
 *
 * Generation (worker 0): when the bytes a lossless TC holds from one
 * ingress port reach XOFF, an XOFF goes out of that port, refreshed at
 * half its pause time while above XON, and an XON (quanta 0) when the
 * occupancy falls to XON.
 *
 * Watchdog (worker 0, SONiC semantics): an egress TC that stays paused for
 * the detection time while pause frames keep arriving and packets wait is
 * stormed: action drop discards its queue and what arrives for it (and
 * what arrives on that port in that TC), forward ignores the pauses, alert
 * only reports. Restored after the restoration time without a pause frame.
 */
#include <rte_ethdev.h>

#include "dp_priv.h"

int dp_pfc_send(struct dp_switch *sw, struct dp_worker *w, uint16_t port_idx,
		uint8_t enable, uint16_t quanta)
{
	struct agg_pfc pfc = { .enable = enable };
	struct rte_mbuf *m = rte_pktmbuf_alloc(w->pool);
	int len;

	if (!m) {
		w->drops[DP_DROP_NO_MBUF]++;
		return -ENOMEM;
	}
	for (unsigned i = 0; i < AGG_PFC_CLASSES; i++)
		pfc.quanta[i] = quanta;
	len = agg_pfc_encode(rte_pktmbuf_mtod(m, void *), rte_pktmbuf_tailroom(m),
			     sw->port_mac[port_idx].addr_bytes, &pfc);
	if (len < 0) {
		rte_pktmbuf_free(m);
		return len;
	}
	m->data_len = (uint16_t)len;
	m->pkt_len = (uint32_t)len;
	/* MAC control goes out ahead of the queues: it is what drains them */
	if (rte_eth_tx_burst(sw->port_ids[port_idx], (uint16_t)w->index, &m, 1) != 1) {
		rte_pktmbuf_free(m);
		w->drops[DP_DROP_EGRESS_FULL]++;
		return -EAGAIN;
	}
	w->port[port_idx].tx_pkts++;
	w->port[port_idx].tx_bytes += (uint64_t)len;
	return 0;
}

void dp_pfc_input(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m,
		  uint16_t in, uint64_t now)
{
	struct dp_qos *qos = sw->qos;
	const struct dp_qos_cfg *cfg = qos->cfg;
	struct agg_pfc pfc;
	int rc;

	rc = agg_pfc_decode(rte_pktmbuf_mtod(m, void *), m->data_len, &pfc);
	if (rc == -AGG_PFC_E_NOT_CONTROL) {
		/* LLDP, STP and the like: link-local, never forwarded */
		w->drops[DP_DROP_LINK_LOCAL]++;
		goto out;
	}
	if (rc) {
		w->port[in].pfc_malformed[-rc]++;
		w->drops[DP_DROP_PFC_MALFORMED]++;
		goto out;
	}
	for (unsigned tc = 0; tc < AGG_PFC_CLASSES; tc++) {
		struct dp_pq *p = &qos->pq[in][tc];

		if (!(pfc.enable >> tc & 1))
			continue;
		if (!cfg->pfc || !dp_tc_lossless(cfg, tc)) {
			__atomic_add_fetch(&p->pfc_rx_lossy, 1, __ATOMIC_RELAXED);
			continue;
		}
		uint64_t until = now + agg_pfc_quanta_ns(pfc.quanta[tc], qos->port_bps[in]) *
				 qos->tsc_hz / 1000000000ull;
		uint64_t old = __atomic_exchange_n(&p->paused_until, until, __ATOMIC_RELAXED);
		uint64_t from = old > now ? old : now;

		/* paused time: what this frame adds to (or cuts from) the pause */
		if (until > from)
			__atomic_add_fetch(&p->paused_tsc, until - from, __ATOMIC_RELAXED);
		else if (old > until)
			__atomic_sub_fetch(&p->paused_tsc, old - until, __ATOMIC_RELAXED);
		if (pfc.quanta[tc]) {
			__atomic_add_fetch(&p->pfc_rx, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&p->last_xoff_rx, now, __ATOMIC_RELAXED);
		} else {
			__atomic_add_fetch(&p->pfc_rx_xon, 1, __ATOMIC_RELAXED);
		}
	}
out:
	rte_pktmbuf_free(m);
}

static void wd_event(struct dp_switch *sw, uint16_t port, unsigned tc, bool storm,
		     uint64_t now)
{
	static const char *const actions[] = { "drop", "forward", "alert" };
	struct dp_qos *qos = sw->qos;
	struct dp_wd_event *e;

	rte_spinlock_lock(&qos->ev_lock);
	e = &qos->events[qos->nevents++ % DP_WD_EVENTS];
	e->t_s = (double)(now - sw->start_tsc) / (double)sw->tsc_hz;
	e->port = port;
	e->tc = (uint8_t)tc;
	e->storm = storm;
	rte_spinlock_unlock(&qos->ev_lock);
	if (storm)
		DP_LOG(WARNING, "PFC watchdog: storm detected on port %u TC %u (paused "
		       "%u ms with packets waiting), action %s\n", port, tc,
		       qos->cfg->wd_detect_ms, actions[qos->cfg->wd_action]);
	else
		DP_LOG(WARNING, "PFC watchdog: port %u TC %u restored (no pause for %u ms)\n",
		       port, tc, qos->cfg->wd_restore_ms);
}

/* Packets of (port, tc) waiting in any worker's queue. */
static bool tc_backlogged(struct dp_switch *sw, uint16_t port, unsigned tc)
{
	for (unsigned i = 0; i < sw->nworkers; i++) {
		const struct dp_tcq *t = &sw->workers[i]->egress[port].q[tc];
		if (__atomic_load_n(&t->tail, __ATOMIC_RELAXED) !=
		    __atomic_load_n(&t->head, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

static void watchdog(struct dp_switch *sw, uint16_t port, unsigned tc, uint64_t now)
{
	struct dp_qos *qos = sw->qos;
	const struct dp_qos_cfg *cfg = qos->cfg;
	struct dp_pq *p = &qos->pq[port][tc];
	uint64_t last_rx = __atomic_load_n(&p->last_xoff_rx, __ATOMIC_RELAXED);

	if (__atomic_load_n(&p->wd_stormed, __ATOMIC_RELAXED)) {
		if (now - last_rx >= (uint64_t)cfg->wd_restore_ms * qos->tsc_hz / 1000) {
			__atomic_store_n(&p->wd_stormed, 0, __ATOMIC_RELAXED);
			__atomic_add_fetch(&p->wd_restores, 1, __ATOMIC_RELAXED);
			p->pause_since = 0;
			wd_event(sw, port, tc, false, now);
		}
		return;
	}
	if (__atomic_load_n(&p->paused_until, __ATOMIC_RELAXED) <= now ||
	    !tc_backlogged(sw, port, tc)) {
		p->pause_since = 0;
		return;
	}
	if (!p->pause_since) {
		p->pause_since = now;
		p->pfc_rx_at_since = __atomic_load_n(&p->pfc_rx, __ATOMIC_RELAXED);
		return;
	}
	/* paused the whole detection time, and pause frames kept coming */
	if (now - p->pause_since >= (uint64_t)cfg->wd_detect_ms * qos->tsc_hz / 1000 &&
	    __atomic_load_n(&p->pfc_rx, __ATOMIC_RELAXED) > p->pfc_rx_at_since) {
		__atomic_store_n(&p->wd_stormed, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&p->wd_storms, 1, __ATOMIC_RELAXED);
		wd_event(sw, port, tc, true, now);
	}
}

void dp_pfc_housekeeping(struct dp_switch *sw, struct dp_worker *w, uint64_t now)
{
	struct dp_qos *qos = sw->qos;
	const struct dp_qos_cfg *cfg = qos->cfg;

	if (!cfg->lossless_mask)
		return;
	for (uint16_t port = 0; port < sw->nports; port++) {
		uint8_t xoff = 0, xon = 0;

		for (unsigned tc = 0; tc < DP_NUM_TC; tc++) {
			struct dp_pq *p = &qos->pq[port][tc];
			uint32_t occ;

			if (!dp_tc_lossless(cfg, tc))
				continue;
			if (cfg->watchdog)
				watchdog(sw, port, tc, now);
			if (!cfg->pfc)
				continue;
			occ = __atomic_load_n(&p->ingress_bytes, __ATOMIC_RELAXED);
			if (!p->xoff_on) {
				if (occ >= cfg->xoff_bytes)
					xoff |= (uint8_t)(1u << tc);
			} else if (occ <= cfg->xon_bytes) {
				xon |= (uint8_t)(1u << tc);
			} else if (now >= p->xoff_refresh) {
				xoff |= (uint8_t)(1u << tc);
			}
		}
		if (xoff && !dp_pfc_send(sw, w, port, xoff, cfg->pause_quanta)) {
			/* refresh at half the pause, so the peer never resumes
			 * while the buffer is still above XON */
			uint64_t half = agg_pfc_quanta_ns(cfg->pause_quanta, qos->port_bps[port]) *
					qos->tsc_hz / 2000000000ull;
			for (unsigned tc = 0; tc < DP_NUM_TC; tc++)
				if (xoff >> tc & 1) {
					struct dp_pq *p = &qos->pq[port][tc];
					p->xoff_on = true;
					p->xoff_refresh = now + half;
					__atomic_add_fetch(&p->xoff_tx, 1, __ATOMIC_RELAXED);
				}
		}
		if (xon && !dp_pfc_send(sw, w, port, xon, 0)) {
			for (unsigned tc = 0; tc < DP_NUM_TC; tc++)
				if (xon >> tc & 1) {
					struct dp_pq *p = &qos->pq[port][tc];
					p->xoff_on = false;
					__atomic_add_fetch(&p->xon_tx, 1, __ATOMIC_RELAXED);
				}
		}
	}
}
