/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The worker loop: receive bursts from every port's queue for this worker,
 * classify (ARP/ICMP for the switch, RoCEv2 to the switch, L2 forwarding),
 * run the aggregation path for owned groups, shape and send.
 */
#include <sys/prctl.h>
#include <time.h>

#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_prefetch.h>
#include <rte_udp.h>

#include "dp_priv.h"

RTE_LOG_REGISTER_DEFAULT(dp_logtype, INFO);

struct dp_switch dp_sw;

static void egress(struct dp_worker *w, uint16_t port_idx, struct rte_mbuf *m)
{
	enum dp_qdrop why = dp_egress_enqueue(&w->egress[port_idx], m);

	if (unlikely(why != DP_Q_OK)) {
		unsigned tc = m->hash.sched.traffic_class & (DP_NUM_TC - 1);

		w->tc[port_idx][tc].drops[why]++;
		w->drops[DP_DROP_EGRESS_FULL]++;
		w->port[port_idx].egress_drops++;
		rte_pktmbuf_free(m);
	}
}

void dp_classify_local(struct dp_switch *sw, struct rte_mbuf *m, uint8_t dscp)
{
	m->hash.sched.queue_id = DP_NO_PORT;
	m->hash.sched.traffic_class = sw->cfg->qos.dscp_tc[dscp & 63];
}

/* xorshift64: the impairment emulation's coin */
static inline uint32_t coin(struct dp_worker *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return (uint32_t)(w->rng >> 32);
}

/* Loss and duplication as a link would do them; true if m was consumed. */
static bool impair_link(struct dp_switch *sw, struct dp_worker *w,
			struct rte_mbuf *m, struct rte_mbuf **dup)
{
	const struct dp_impair *im = &sw->cfg->impair;

	*dup = NULL;
	if (im->loss && coin(w) < im->loss) {
		w->impair_lost++;
		rte_pktmbuf_free(m);
		return true;
	}
	if (im->duplicate && coin(w) < im->duplicate) {
		*dup = rte_pktmbuf_copy(m, w->pool, 0, UINT32_MAX);
		if (*dup) {
			(*dup)->port = m->port;
			w->impair_duplicated++;
		}
	}
	return false;
}

void dp_tx(struct dp_switch *sw, struct dp_worker *w, uint16_t port_idx,
	   struct rte_mbuf *m)
{
	const struct dp_impair *im = &sw->cfg->impair;
	struct rte_mbuf *dup;

	if (likely(!im->on)) {
		egress(w, port_idx, m);
		return;
	}
	if (impair_link(sw, w, m, &dup))
		return;
	if (dup)
		egress(w, port_idx, dup);
	if (im->reorder && !w->held[port_idx] && coin(w) < im->reorder) {
		/* overtaken by the next packet to this port (or sent after 1 ms) */
		w->held[port_idx] = m;
		w->held_tsc[port_idx] = rte_rdtsc();
		w->impair_reordered++;
		return;
	}
	egress(w, port_idx, m);
	if (w->held[port_idx]) {
		egress(w, port_idx, w->held[port_idx]);
		w->held[port_idx] = NULL;
	}
}

static void flood(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m,
		  uint16_t in)
{
	uint16_t last = UINT16_MAX;

	w->floods++;
	for (uint16_t p = 0; p < sw->nports; p++) {
		if (p == in)
			continue;
		if (last != UINT16_MAX) {
			struct rte_mbuf *c = rte_pktmbuf_copy(m, w->pool, 0, UINT32_MAX);
			if (c)
				dp_tx(sw, w, last, c);
			else
				w->drops[DP_DROP_NO_MBUF]++;
		}
		last = p;
	}
	if (last == UINT16_MAX)
		rte_pktmbuf_free(m);     /* a one-port switch */
	else
		dp_tx(sw, w, last, m);
}

static void neigh_learn(struct dp_switch *sw, uint32_t ip, const struct rte_ether_addr *mac,
			uint16_t port)
{
	uint64_t mp = (uint64_t)port << 48;

	for (int k = 0; k < 6; k++)
		mp |= (uint64_t)mac->addr_bytes[k] << (8 * k);
	for (uint32_t i = 0; i < DP_NEIGH_SIZE; i++) {
		struct dp_neigh *n = &sw->neigh[(ip * 2654435761u + i) % DP_NEIGH_SIZE];
		uint32_t cur = __atomic_load_n(&n->ip, __ATOMIC_ACQUIRE);

		if (cur == ip) {
			__atomic_store_n(&n->macport, mp, __ATOMIC_RELAXED);
			return;
		}
		if (cur == 0) {
			__atomic_store_n(&n->macport, mp, __ATOMIC_RELAXED);
			/* claim the slot; another worker may have won it */
			if (__atomic_compare_exchange_n(&n->ip, &cur, ip, false,
							__ATOMIC_RELEASE, __ATOMIC_RELAXED) ||
			    cur == ip) {
				__atomic_store_n(&n->macport, mp, __ATOMIC_RELAXED);
				return;
			}
		}
	}
}

int dp_neigh_lookup(struct dp_switch *sw, uint32_t ip, struct rte_ether_addr *mac)
{
	for (uint32_t i = 0; i < DP_NEIGH_SIZE; i++) {
		struct dp_neigh *n = &sw->neigh[(ip * 2654435761u + i) % DP_NEIGH_SIZE];
		uint32_t cur = __atomic_load_n(&n->ip, __ATOMIC_ACQUIRE);

		if (cur == ip) {
			uint64_t mp = __atomic_load_n(&n->macport, __ATOMIC_RELAXED);
			for (int k = 0; k < 6; k++)
				mac->addr_bytes[k] = (uint8_t)(mp >> (8 * k));
			return (int)(mp >> 48);
		}
		if (cur == 0)
			return -1;
	}
	return -1;
}

void dp_arp_request(struct dp_switch *sw, struct dp_worker *w, uint32_t ip)
{
	for (uint16_t p = 0; p < sw->nports; p++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(w->pool);
		struct rte_ether_hdr *eth;
		struct rte_arp_hdr *arp;

		if (!m) {
			w->drops[DP_DROP_NO_MBUF]++;
			return;
		}
		eth = (struct rte_ether_hdr *)rte_pktmbuf_append(m, 60);
		if (!eth) {
			rte_pktmbuf_free(m);
			return;
		}
		memset(eth, 0, 60);
		memset(&eth->dst_addr, 0xff, 6);
		eth->src_addr = sw->port_mac[p];
		eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_ARP);
		arp = (struct rte_arp_hdr *)(eth + 1);
		arp->arp_hardware = RTE_BE16(RTE_ARP_HRD_ETHER);
		arp->arp_protocol = RTE_BE16(RTE_ETHER_TYPE_IPV4);
		arp->arp_hlen = 6;
		arp->arp_plen = 4;
		arp->arp_opcode = RTE_BE16(RTE_ARP_OP_REQUEST);
		arp->arp_data.arp_sha = sw->port_mac[p];
		arp->arp_data.arp_sip = rte_cpu_to_be_32(sw->cfg->switch_ip);
		arp->arp_data.arp_tip = rte_cpu_to_be_32(ip);
		dp_classify_local(sw, m, 0);
		w->arp_requests++;
		dp_tx(sw, w, p, m);
	}
}

/* ARP request for the switch's address: answer from the ingress port. */
static bool arp_input(struct dp_switch *sw, struct dp_worker *w,
		      struct rte_mbuf *m, uint16_t in, size_t off)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_arp_hdr *arp;

	if (m->data_len < off + sizeof(*arp)) {
		w->drops[DP_DROP_ARP_INVALID]++;
		rte_pktmbuf_free(m);
		return true;
	}
	arp = rte_pktmbuf_mtod_offset(m, struct rte_arp_hdr *, off);
	if (arp->arp_hardware != RTE_BE16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != RTE_BE16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_hlen != 6 || arp->arp_plen != 4) {
		w->drops[DP_DROP_ARP_INVALID]++;
		rte_pktmbuf_free(m);
		return true;
	}
	if (arp->arp_data.arp_tip != rte_cpu_to_be_32(sw->cfg->switch_ip))
		return false;        /* someone else's: forward */
	/* whoever talks ARP to us is a neighbour (a parent switch answers) */
	neigh_learn(sw, rte_be_to_cpu_32(arp->arp_data.arp_sip), &arp->arp_data.arp_sha, in);
	if (arp->arp_opcode != RTE_BE16(RTE_ARP_OP_REQUEST)) {
		rte_pktmbuf_free(m);     /* an answer to our request */
		return true;
	}

	arp->arp_opcode = RTE_BE16(RTE_ARP_OP_REPLY);
	arp->arp_data.arp_tha = arp->arp_data.arp_sha;
	arp->arp_data.arp_tip = arp->arp_data.arp_sip;
	arp->arp_data.arp_sha = sw->port_mac[in];
	arp->arp_data.arp_sip = rte_cpu_to_be_32(sw->cfg->switch_ip);
	eth->dst_addr = eth->src_addr;
	eth->src_addr = sw->port_mac[in];
	w->arp_replies++;
	dp_tx(sw, w, in, m);
	return true;
}

/* Packets for the switch's own address other than RoCEv2: ping is
 * answered (operators expect it), the rest is dropped and counted. */
static void local_input(struct dp_switch *sw, struct dp_worker *w,
			struct rte_mbuf *m, uint16_t in, size_t off)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, off);
	size_t ihl = (size_t)(ip->version_ihl & 0xf) * 4;
	size_t ip_len = rte_be_to_cpu_16(ip->total_length);

	if (ip->next_proto_id == IPPROTO_ICMP && ihl >= 20 &&
	    ip_len >= ihl + sizeof(struct rte_icmp_hdr) && off + ip_len <= m->data_len) {
		struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)((uint8_t *)ip + ihl);

		if (icmp->icmp_type == RTE_IP_ICMP_ECHO_REQUEST && icmp->icmp_code == 0) {
			rte_be32_t a = ip->src_addr;

			icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
			icmp->icmp_cksum = 0;
			icmp->icmp_cksum = (uint16_t)~rte_raw_cksum(icmp, ip_len - ihl);
			ip->src_addr = ip->dst_addr;
			ip->dst_addr = a;
			ip->time_to_live = 64;
			ip->hdr_checksum = 0;
			ip->hdr_checksum = rte_ipv4_cksum(ip);
			eth->dst_addr = eth->src_addr;
			eth->src_addr = sw->port_mac[in];
			w->icmp_replies++;
			dp_tx(sw, w, in, m);
			return;
		}
	}
	w->drops[DP_DROP_LOCAL_UNHANDLED]++;
	rte_pktmbuf_free(m);
}

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
		if (arp_input(sw, w, m, in, off))
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
				local_input(sw, w, m, in, off);
			return;
		}
	}

	if (rte_is_multicast_ether_addr(&eth->dst_addr)) {
		flood(sw, w, m, in);
		return;
	}
	out = dp_l2_lookup(sw->l2, &eth->dst_addr);
	if (out < 0) {
		flood(sw, w, m, in);
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

/* The rest of a contribution (its first line is on the way already). */
static inline void prefetch_contribution(const struct dp_switch *sw,
					 const struct rte_mbuf *m)
{
	if (!is_contribution(sw, m))
		return;
	const char *p = rte_pktmbuf_mtod(m, const char *);
	for (uint32_t off = RTE_CACHE_LINE_SIZE; off < m->data_len; off += RTE_CACHE_LINE_SIZE)
		rte_prefetch0(p + off);
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
	DP_LOG(INFO, "worker %u on lcore %u: %s%s\n", w->index, w->lcore,
	       idle_us ? "idle back-off" : "busy polling",
	       sw->cfg->impair.on ? ", emulating link impairment" : "");
	while (!sw->quit) {
		uint64_t start = rte_rdtsc();
		uint32_t got = 0;
		bool pending = false;

		/* no group reference survives a loop iteration */
		rte_rcu_qsbr_quiescent(sw->rcu, w->index);

		for (uint16_t p = 0; p < sw->nports; p++) {
			uint16_t n = rte_eth_rx_burst(sw->port_ids[p], (uint16_t)w->index,
						      pkts, DP_BURST);
			got += n;
			/* Headers of the whole burst first; the aggregation
			 * path reads every byte of a contribution, so each is
			 * pulled in whole PREFETCH_AHEAD packets before its
			 * turn (a whole burst of 4 KiB contributions would not
			 * fit in L1 and the early ones would be evicted). */
			for (uint16_t i = 0; i < n; i++)
				rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void *));
			for (uint16_t i = 0; i < n && i < PREFETCH_AHEAD; i++)
				prefetch_contribution(sw, pkts[i]);
			for (uint16_t i = 0; i < n; i++) {
				if (i + PREFETCH_AHEAD < n)
					prefetch_contribution(sw, pkts[i + PREFETCH_AHEAD]);
				w->port[p].rx_pkts++;
				w->port[p].rx_bytes += pkts[i]->pkt_len;
				/* not every PMD sets it (net_ring does not); the
				 * aggregation path and hand-offs rely on it */
				pkts[i]->port = sw->port_ids[p];
				if (unlikely(sw->cfg->impair.on)) {
					struct rte_mbuf *dup;
					if (impair_link(sw, w, pkts[i], &dup))
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

		uint64_t now = rte_rdtsc();
		if (w->index == 0)
			dp_pfc_housekeeping(sw, w, now);
		for (uint16_t p = 0; p < sw->nports; p++) {
			struct dp_egress *q = &w->egress[p];

			if (unlikely(w->held[p] != NULL) &&
			    now - w->held_tsc[p] > sw->tsc_hz / 1000) {
				egress(w, p, w->held[p]);
				w->held[p] = NULL;
			}

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
	dp_worker_stash_free(w);
	for (uint16_t p = 0; p < sw->nports; p++) {
		dp_egress_drain(&w->egress[p]);
		rte_pktmbuf_free(w->held[p]);
		w->held[p] = NULL;
	}
	return 0;
}
