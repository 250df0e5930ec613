/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch as an IP host: its neighbour table (IPv4 -> MAC and port,
 * learnt from ARP, shared by the workers without locks), the next hop
 * (a parent switch itself, or the gateway when it is in another subnet),
 * ARP requests for it, answers to ARP for its address, and ping.
 */
#include <rte_arp.h>
#include <rte_ethdev.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include "dp_priv.h"

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
bool dp_arp_input(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m,
		  uint16_t in, size_t off)
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
void dp_local_input(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m,
		    uint16_t in, size_t off)
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
