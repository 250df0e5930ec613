/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The worker loop and classification: receive bursts from every port's
 * queue for this worker, then for each packet PFC (dp_pfc.c), L2 learning,
 * its traffic class, ARP and ping for the switch (dp_neigh.c), RoCEv2 to
 * the switch (dp_agg.c), or L2 forwarding; every path ends in dp_tx.c.
 * Then the hand-off ring, PFC housekeeping and the egress queues.
 */
#include <sys/prctl.h>
#include <time.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_prefetch.h>
#include <rte_udp.h>

#include "dp_priv.h"

static void process(struct dp_switch *sw, struct dp_worker *w,
		    struct rte_mbuf *m, uint16_t in, uint64_t now)
{
	struct rte_ether_hdr *eth;
	uint16_t etype;
	size_t off = sizeof(struct rte_ether_hdr);
	int out;

	if (unlikely(m->data_len < off)) {
		w->drops[DP_DROP_RUNT]++;
		rte_pktmbuf_free(m);
		return;
	}
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	/* 01:80:C2:00:00:0X: PFC and other link-local control, never forwarded */
	if (unlikely(eth->dst_addr.addr_bytes[0] == 0x01 &&
		     eth->dst_addr.addr_bytes[1] == 0x80 &&
		     eth->dst_addr.addr_bytes[2] == 0xc2 &&
		     !eth->dst_addr.addr_bytes[3] && !eth->dst_addr.addr_bytes[4] &&
		     eth->dst_addr.addr_bytes[5] < 0x10)) {
		dp_pfc_input(sw, w, m, in, now);
		return;
	}
	if (likely(!rte_is_multicast_ether_addr(&eth->src_addr)))
		dp_l2_learn(sw->l2, &eth->src_addr, in, now);
	etype = eth->ether_type;
	if (etype == RTE_BE16(RTE_ETHER_TYPE_VLAN) && m->data_len >= off + 4) {
		etype = *rte_pktmbuf_mtod_offset(m, uint16_t *, off + 2);
		off += 4;
	}

	/* traffic class from DSCP; everything else is the default class */
	unsigned tc = sw->cfg->qos.dscp_tc[0];
	if (etype == RTE_BE16(RTE_ETHER_TYPE_IPV4) &&
	    m->data_len >= off + sizeof(struct rte_ipv4_hdr))
		tc = sw->cfg->qos.dscp_tc[rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *,
								  off)->type_of_service >> 2];
	m->hash.sched.traffic_class = (uint8_t)tc;
	m->hash.sched.queue_id = in;
	if (unlikely(sw->cfg->qos.watchdog && sw->cfg->qos.wd_action == DP_WD_DROP &&
		     __atomic_load_n(&sw->qos->pq[in][tc].wd_stormed, __ATOMIC_RELAXED) &&
		     dp_tc_lossless(&sw->cfg->qos, tc))) {
		/* the stormed port's lossless TC is dropped both ways */
		w->drops[DP_DROP_PFC_WATCHDOG]++;
		w->tc[in][tc].drops[DP_QDROP_WATCHDOG]++;
		rte_pktmbuf_free(m);
		return;
	}

	if (etype == RTE_BE16(RTE_ETHER_TYPE_ARP)) {
		if (dp_arp_input(sw, w, m, in, off))
			return;
	} else if (etype == RTE_BE16(RTE_ETHER_TYPE_IPV4) && !sw->cfg->forward_only &&
		   m->data_len >= off + sizeof(struct rte_ipv4_hdr)) {
		struct rte_ipv4_hdr *ip =
			rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, off);

		if (ip->dst_addr == rte_cpu_to_be_32(sw->cfg->switch_ip)) {
			struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);

			if (ip->next_proto_id == IPPROTO_UDP &&
			    m->data_len >= off + sizeof(*ip) + sizeof(*udp) &&
			    udp->dst_port == RTE_BE16(AGG_ROCEV2_UDP_PORT))
				dp_agg_input(sw, w, m, false);
			else
				dp_local_input(sw, w, m, in, off);
			return;
		}
	}

	if (rte_is_multicast_ether_addr(&eth->dst_addr)) {
		dp_flood(sw, w, m, in);
		return;
	}
	out = dp_l2_lookup(sw->l2, &eth->dst_addr);
	if (out < 0) {
		dp_flood(sw, w, m, in);
	} else if (unlikely(out == in)) {
		w->drops[DP_DROP_HAIRPIN]++;
		rte_pktmbuf_free(m);
	} else {
		dp_tx(sw, w, (uint16_t)out, m);
	}
}

/* Untagged IPv4/UDP to the switch's address and port 4791? (Only a hint
 * for prefetching; process() does the real classification.) */
static inline bool is_contribution(const struct dp_switch *sw,
				   const struct rte_mbuf *m)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(eth + 1);
	const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)(ip + 1);

	return m->data_len >= 64 && !sw->cfg->forward_only &&
	       eth->ether_type == RTE_BE16(RTE_ETHER_TYPE_IPV4) &&
	       ip->dst_addr == rte_cpu_to_be_32(sw->cfg->switch_ip) &&
	       ip->next_proto_id == IPPROTO_UDP &&
	       udp->dst_port == RTE_BE16(AGG_ROCEV2_UDP_PORT);
}

#define PREFETCH_AHEAD 2
#define HDR_AHEAD 4
#define MBUF_AHEAD 8

/* The rest of a contribution (its first line is on the way already). */
static inline void prefetch_contribution(const struct dp_switch *sw,
					 const struct rte_mbuf *m)
{
	if (!is_contribution(sw, m))
		return;
	const char *p = rte_pktmbuf_mtod(m, const char *);
	for (uint32_t off = RTE_CACHE_LINE_SIZE; off < m->data_len; off += RTE_CACHE_LINE_SIZE)
		rte_prefetch1(p + off);
}

/* Both lines of an mbuf: the first for its data's address and length,
 * the second (next) for freeing it */
static inline void prefetch_mbuf(const struct rte_mbuf *m)
{
	rte_prefetch0(m);
	rte_prefetch0(&m->cacheline1);
}

/* The same, a few lines at a time as the packets before it are reduced:
 * the CRC foldings ask for them (agg_prefetch_stream). Where the packets
 * before it are not contributions, what is left goes at once when the
 * next is set, one packet ahead; where the ICRC's CRC uses tables (nothing
 * folds), all of it at once. */
static inline void stream_contribution(const struct dp_switch *sw, const struct rte_mbuf *m)
{
	if (!is_contribution(sw, m))
		return;
	const char *p = rte_pktmbuf_mtod(m, const char *);
	if (m->data_len > RTE_CACHE_LINE_SIZE)
		agg_prefetch_stream(p + RTE_CACHE_LINE_SIZE, m->data_len - RTE_CACHE_LINE_SIZE);
}

int dp_worker_main(void *arg)
{
	struct dp_worker *w = arg;
	struct dp_switch *sw = &dp_sw;
	struct rte_mbuf *pkts[DP_BURST];
	const uint32_t idle_us = sw->cfg->idle_sleep_us;
	const uint64_t spin_tsc = (uint64_t)sw->cfg->idle_spin_us * sw->tsc_hz / 1000000;

	w->rng = rte_rdtsc() ^ ((uint64_t)w->lcore << 32) ^ 0x9e3779b97f4a7c15ull;
	rte_rcu_qsbr_thread_register(sw->rcu, w->index);
	rte_rcu_qsbr_thread_online(sw->rcu, w->index);
	/* the idle back-off sleeps idle_us, not idle_us plus the kernel's
	 * default 50 µs of timer slack: that slack added itself to every
	 * packet that found the worker asleep (a ping to the switch took a
	 * median 79 µs on the testbed) */
	if (idle_us)
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	w->last_qpn = DP_NO_QPN;   /* (reset at every quiescent point too) */
	DP_LOG(INFO, "worker %u on lcore %u: %s%s\n", w->index, w->lcore,
	       idle_us ? "idle back-off" : "busy polling",
	       sw->cfg->impair.on ? ", emulating link impairment" : "");
	while (!sw->quit) {
		uint64_t start = rte_rdtsc();
		uint32_t got = 0;
		bool pending = false;

		/* no group reference survives a loop iteration (nor the
		 * last group looked up: dp_agg_input) */
		rte_rcu_qsbr_quiescent(sw->rcu, w->index);
		w->last_qpn = DP_NO_QPN;

		for (uint16_t p = 0; p < sw->nports; p++) {
			uint16_t n = rte_eth_rx_burst(sw->port_ids[p], (uint16_t)w->index,
						      pkts, DP_BURST);
			got += n;
			/* The mbufs MBUF_AHEAD packets before their turn, their
			 * headers HDR_AHEAD, one a packet (a whole burst's at
			 * once filled the core's miss buffers); the
			 * aggregation path reads every byte of a contribution,
			 * so each is brought into L2 PREFETCH_AHEAD packets
			 * before its turn (the first of a burst at once), a
			 * few lines at a time (stream_contribution; whole 4 KiB
			 * contributions in L1 would evict one another). */
			for (uint16_t i = 0; i < n && i < MBUF_AHEAD; i++)
				prefetch_mbuf(pkts[i]);
			for (uint16_t i = 0; i < n && i < HDR_AHEAD; i++)
				rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void *));
			for (uint16_t i = 0; i < n && i < PREFETCH_AHEAD; i++)
				prefetch_contribution(sw, pkts[i]);
			for (uint16_t i = 0; i < n; i++) {
				if (i + MBUF_AHEAD < n)
					prefetch_mbuf(pkts[i + MBUF_AHEAD]);
				if (i + HDR_AHEAD < n)
					rte_prefetch0(rte_pktmbuf_mtod(pkts[i + HDR_AHEAD], void *));
				if (i + PREFETCH_AHEAD < n)
					stream_contribution(sw, pkts[i + PREFETCH_AHEAD]);
				w->port[p].rx_pkts++;
				w->port[p].rx_bytes += pkts[i]->pkt_len;
				/* not every PMD sets it (net_ring does not); the
				 * aggregation path and hand-offs rely on it */
				pkts[i]->port = sw->port_ids[p];
				if (unlikely(sw->cfg->impair.on)) {
					struct rte_mbuf *dup;
					if (dp_impair_link(sw, w, pkts[i], &dup))
						continue;
					if (dup)
						process(sw, w, dup, p, start);
				}
				process(sw, w, pkts[i], p, start);
			}
		}
		unsigned n = rte_ring_dequeue_burst(w->handoff, (void **)pkts, DP_BURST, NULL);
		got += n;
		for (unsigned i = 0; i < n; i++)
			dp_agg_input(sw, w, pkts[i], true);
		dp_free_spent(w);

		uint64_t now = rte_rdtsc();
		if (w->index == 0)
			dp_pfc_housekeeping(sw, w, now);
		for (uint16_t p = 0; p < sw->nports; p++) {
			struct dp_egress *q = &w->egress[p];

			dp_tx_release_held(sw, w, p, now);
			w->port[p].tx_pkts += dp_egress_flush(q, now);
			pending |= dp_egress_busy(q);
		}
		if (got) {
			w->busy_tsc += rte_rdtsc() - start;
			w->last_rx_tsc = start;
		} else if (idle_us && start - w->last_rx_tsc >= spin_tsc) {
			/* share the machine: sleep when idle (for idle_spin_us
			 * after the last packet, keep polling: the rest of a
			 * collective's contributions, and the next collective,
			 * come within microseconds, and a sleeper on a VM
			 * whose idle vCPU halts wakes tens of µs late),
			 * briefly when a shaped queue waits for tokens */
			struct timespec ts = { 0, (long)(pending ? 5 : idle_us) * 1000 };
			nanosleep(&ts, NULL);
		}
	}
	rte_rcu_qsbr_thread_offline(sw->rcu, w->index);
	rte_rcu_qsbr_thread_unregister(sw->rcu, w->index);
	dp_free_spent(w);
	dp_worker_stash_free(w);
	for (uint16_t p = 0; p < sw->nports; p++) {
		dp_egress_drain(&w->egress[p]);
		rte_pktmbuf_free(w->held[p]);
		w->held[p] = NULL;
	}
	return 0;
}

