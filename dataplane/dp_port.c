/* SPDX-License-Identifier: BSD-3-Clause */
/* Port set-up: one RX and one TX queue per worker on every port the EAL
 * gives us (PCI NICs or af_packet/af_xdp/ring/memif vdevs), promiscuous. */
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include "dp_priv.h"

#define RX_DESC 1024
#define TX_DESC 1024
/* Mbufs hold a whole frame in one segment: 9216 bytes (jumbo), enough for
 * IB MTU 4096 contributions (AGG_MAX_FRAME_LEN, 4202 bytes with a VLAN
 * tag) and for the hosts' 9000-byte TCP frames that cross the switch. */
#define MBUF_DATA_ROOM (RTE_PKTMBUF_HEADROOM + DP_MAX_FRAME)

/* The lossy classes' tail-drop limit per (worker, port, class): queue_kb
 * as configured for the port, else the switch's, else about 4 ms at the
 * port's shaped rate (128 KiB .. 512 KiB; 512 KiB unshaped). Deeper queues
 * at a slow port make one direction's TCP data and the other's ACKs wait
 * behind each other: at 200 Mbit/s a 512 KiB queue is 21 ms, and two TCP
 * flows in opposite directions through the switch moved 13 and 23 MB/s
 * instead of 22 and 23 with 128 KiB. */
static uint32_t lossy_queue_bytes(const struct dp_port_cfg *pc, const struct dp_port_cfg *def)
{
	uint64_t q;

	if (pc->queue_bytes)
		return pc->queue_bytes;
	if (def->queue_bytes)
		return def->queue_bytes;
	if (!pc->rate_bps)
		return 512 * 1024;
	q = pc->rate_bps / 8 / 250;         /* 4 ms */
	return (uint32_t)(q < 128 * 1024 ? 128 * 1024 : q > 512 * 1024 ? 512 * 1024 : q);
}

static int port_setup(struct dp_switch *sw, uint16_t idx)
{
	uint16_t port = sw->port_ids[idx];
	struct rte_eth_conf conf = { 0 };
	struct rte_eth_dev_info info;
	uint16_t rxd = RX_DESC, txd = TX_DESC;
	int rc;

	rc = rte_eth_dev_info_get(port, &info);
	if (rc)
		return rc;
	if (info.max_rx_queues < sw->nworkers || info.max_tx_queues < sw->nworkers) {
		DP_LOG(ERR, "port %u (%s) has %u rx / %u tx queues, %u workers need "
		       "one each (use fewer worker lcores, or qpairs=N on the vdev)\n",
		       port, info.driver_name, info.max_rx_queues, info.max_tx_queues,
		       sw->nworkers);
		return -EINVAL;
	}
	/* jumbo frames, as far as the port allows */
	uint32_t mtu = DP_MAX_FRAME - RTE_ETHER_HDR_LEN - RTE_VLAN_HLEN;
	if (info.max_mtu && info.max_mtu < mtu)
		mtu = info.max_mtu;
	if (info.max_rx_pktlen && info.max_rx_pktlen < mtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN)
		mtu = info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN + RTE_ETHER_MIN_MTU ?
		      info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_VLAN_HLEN : RTE_ETHER_MTU;
	conf.rxmode.mtu = mtu;
	/* results are chained mbufs where the port sends chains (below):
	 * asked for, or a NIC's driver may pick a transmit path that sends
	 * only a chain's first segment */
	conf.txmode.offloads = info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	/* slots spread over the workers by the UDP ports (docs/switch.md,
	 * "Slots and workers"): RSS on what the NIC can hash */
	uint64_t rss = info.flow_type_rss_offloads &
		       (RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_L4_SRC_ONLY);
	if (sw->nworkers > 1 && (rss & RTE_ETH_RSS_NONFRAG_IPV4_UDP)) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf = rss;
	}
	rc = rte_eth_dev_configure(port, (uint16_t)sw->nworkers,
				   (uint16_t)sw->nworkers, &conf);
	if (rc == -EINVAL && mtu > RTE_ETHER_MTU) {
		DP_LOG(WARNING, "port %u (%s): MTU %u refused, using %u: frames above "
		       "%u bytes are dropped\n", port, info.driver_name, mtu, RTE_ETHER_MTU,
		       RTE_ETHER_MTU + RTE_ETHER_HDR_LEN);
		mtu = RTE_ETHER_MTU;
		conf.rxmode.mtu = mtu;
		rc = rte_eth_dev_configure(port, (uint16_t)sw->nworkers,
					   (uint16_t)sw->nworkers, &conf);
	}
	if (rc) {
		DP_LOG(ERR, "port %u: configure: %s\n", port, rte_strerror(-rc));
		return rc;
	}
	sw->port_mtu[idx] = (uint16_t)mtu;
	/* results share one payload by chaining mbufs where the port sends
	 * chains: NICs that say so, and in-memory ports that pass mbufs on */
	sw->port_multiseg[idx] = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) ||
				 !strcmp(info.driver_name, "net_ring");
	sw->multiseg_any |= sw->port_multiseg[idx];
	DP_LOG(DEBUG, "port %u (%s): tx offloads 0x%llx\n", port, info.driver_name,
	       (unsigned long long)info.tx_offload_capa);
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
	if (rc)
		return rc;
	for (unsigned w = 0; w < sw->nworkers; w++) {
		rc = rte_eth_rx_queue_setup(port, (uint16_t)w, rxd,
					    rte_eth_dev_socket_id(port), NULL,
					    sw->workers[w]->pool);
		if (rc) {
			DP_LOG(ERR, "port %u: rx queue %u: %s\n", port, w, rte_strerror(-rc));
			return rc;
		}
		rc = rte_eth_tx_queue_setup(port, (uint16_t)w, txd,
					    rte_eth_dev_socket_id(port), NULL);
		if (rc) {
			DP_LOG(ERR, "port %u: tx queue %u: %s\n", port, w, rte_strerror(-rc));
			return rc;
		}
	}
	rc = rte_eth_dev_start(port);
	if (rc) {
		DP_LOG(ERR, "port %u: start: %s\n", port, rte_strerror(-rc));
		return rc;
	}
	/* an L2 switch must see every frame; a PMD without promiscuous
	 * mode (e.g. net_ring) already does */
	rc = rte_eth_promiscuous_enable(port);
	if (rc && rc != -ENOTSUP)
		DP_LOG(WARNING, "port %u: promiscuous mode: %s\n", port, rte_strerror(-rc));
	rte_eth_macaddr_get(port, &sw->port_mac[idx]);
	return 0;
}

int dp_ports_init(struct dp_switch *sw)
{
	uint16_t port;
	unsigned n = 0;
	char name[RTE_MEMPOOL_NAMESIZE];
	int rc;

	RTE_ETH_FOREACH_DEV(port) {
		if (n == DP_MAX_PORTS) {
			DP_LOG(ERR, "more than %d ports\n", DP_MAX_PORTS);
			return -E2BIG;
		}
		sw->port_index[port] = (uint16_t)n;
		sw->port_ids[n++] = port;
	}
	if (n == 0) {
		DP_LOG(ERR, "no ports: give the EAL NICs (-a PCI) or vdevs "
		       "(--vdev net_af_packet0,iface=veth0)\n");
		return -ENODEV;
	}
	sw->nports = (uint16_t)n;

	/* descriptors a NIC fills, plus what waits in the egress queues */
	unsigned nb_mbufs = sw->cfg->pool_mbufs ? sw->cfg->pool_mbufs :
			    RTE_MAX(8192u, n * (RX_DESC + 512) + 2048);
	for (unsigned w = 0; w < sw->nworkers; w++) {
		struct dp_worker *wk = sw->workers[w];

		snprintf(name, sizeof(name), "inca_pool_%u", w);
		wk->pool = rte_pktmbuf_pool_create(name, nb_mbufs, 512, 0,
						   MBUF_DATA_ROOM,
						   (int)rte_lcore_to_socket_id(wk->lcore));
		if (!wk->pool) {
			DP_LOG(ERR, "mbuf pool for worker %u (%u mbufs): %s\n", w,
			       nb_mbufs, rte_strerror(rte_errno));
			return -rte_errno;
		}
		/* the headers of results that share their body and ICRC */
		snprintf(name, sizeof(name), "inca_hdr_%u", w);
		wk->hdr_pool = rte_pktmbuf_pool_create(name, nb_mbufs, 512, 0,
						       RTE_PKTMBUF_HEADROOM + 128,
						       (int)rte_lcore_to_socket_id(wk->lcore));
		if (!wk->hdr_pool) {
			DP_LOG(ERR, "header pool for worker %u (%u mbufs): %s\n", w,
			       nb_mbufs, rte_strerror(rte_errno));
			return -rte_errno;
		}
		wk->hdr_data_off = (uint32_t)(sizeof(struct rte_mbuf) +
					      rte_pktmbuf_priv_size(wk->hdr_pool) +
					      RTE_PKTMBUF_HEADROOM);
	}
	for (uint16_t i = 0; i < n; i++) {
		rc = port_setup(sw, i);
		if (rc)
			return rc;
		const struct dp_port_cfg *pc = sw->cfg->ports[i].set ? &sw->cfg->ports[i]
								    : &sw->cfg->port_default;
		uint32_t queue_bytes = lossy_queue_bytes(pc, &sw->cfg->port_default);
		for (unsigned w = 0; w < sw->nworkers; w++)
			/* each worker shapes its share of the port's rate */
			dp_egress_init(&sw->workers[w]->egress[i],
				       pc->rate_bps / sw->nworkers,
				       queue_bytes, sw->tsc_hz, sw->qos, i,
				       sw->port_ids[i], (uint16_t)w,
				       sw->workers[w]->tc[i]);
		/* PFC quanta are bit times at the port's rate: the shaped
		 * rate, else what the link reports */
		struct rte_eth_link link = { 0 };
		sw->qos->port_bps[i] = pc->rate_bps;
		if (!sw->qos->port_bps[i] && !rte_eth_link_get_nowait(sw->port_ids[i], &link) &&
		    link.link_speed && link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN)
			sw->qos->port_bps[i] = (uint64_t)link.link_speed * 1000000ull;
		if (!sw->qos->port_bps[i])
			sw->qos->port_bps[i] = 10000000000ull;
		char mac[RTE_ETHER_ADDR_FMT_SIZE];
		rte_ether_format_addr(mac, sizeof(mac), &sw->port_mac[i]);
		DP_LOG(INFO, "port %u (dpdk port %u): %s, MTU %u, rate %s%.3g Mbit/s\n", i,
		       sw->port_ids[i], mac, sw->port_mtu[i], pc->rate_bps ? "" : "unshaped, ",
		       (double)pc->rate_bps / 1e6);
	}
	for (unsigned i = 0; i < DP_MAX_PORTS; i++)
		if (sw->cfg->ports[i].set && i >= n) {
			DP_LOG(ERR, "%s: ports: port %u is configured but the EAL "
			       "gave only %u ports\n", sw->cfg->path, i, n);
			return -EINVAL;
		}
	return 0;
}

bool dp_port_link_up(const struct dp_switch *sw, uint16_t port)
{
	struct rte_eth_dev_info info;
	struct rte_eth_link link;

	/* a port on a kernel interface (af_packet, af_xdp) has the kernel's
	 * carrier: af_packet's ethdev reports its link up whatever the
	 * interface does, and a veth whose peer went down loses IFF_RUNNING */
	if (rte_eth_dev_info_get(sw->port_ids[port], &info) == 0 && info.if_index) {
		struct ifreq ifr = { 0 };
		int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		bool up = true;

		if (s >= 0 && if_indextoname(info.if_index, ifr.ifr_name) &&
		    ioctl(s, SIOCGIFFLAGS, &ifr) == 0)
			up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
		else if (s >= 0)
			up = false;          /* the interface is gone */
		if (s >= 0)
			close(s);
		return up;
	}
	if (rte_eth_link_get_nowait(sw->port_ids[port], &link) != 0)
		return true;                 /* a PMD that cannot say */
	return link.link_status == RTE_ETH_LINK_UP;
}

void dp_ports_close(struct dp_switch *sw)
{
	for (uint16_t i = 0; i < sw->nports; i++) {
		rte_eth_dev_stop(sw->port_ids[i]);
		rte_eth_dev_close(sw->port_ids[i]);
	}
}
