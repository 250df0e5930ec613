// SPDX-License-Identifier: (BSD-3-Clause OR GPL-2.0)
/*
 * Steers RoCEv2 packets whose BTH destination QP belongs to an INCA worker
 * received on queue 0 to that worker's AF_XDP socket; everything else (ARP,
 * TCP, other QPs, other queues) goes on to the kernel.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "hl_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, HL_XDP_MAX_SOCKS);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* destination QPN -> XSKMAP index (its owner's socket) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HL_XDP_MAX_QPNS);
	__type(key, __u32);
	__type(value, __u32);
} qpns SEC(".maps");

SEC("xdp")
int inca_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;
	__u8 *bth, *l3;
	__u16 proto;
	__u32 qpn, *idx;

	/* every owner's socket is bound to queue 0: a redirect from another
	 * queue would find none (and be dropped), the kernel takes it instead */
	if (ctx->rx_queue_index != 0)
		return XDP_PASS;
	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	proto = eth->h_proto;
	l3 = (__u8 *)(eth + 1);
	if (proto == bpf_htons(ETH_P_8021Q)) {
		if ((void *)(l3 + 4) > end)
			return XDP_PASS;
		proto = *(__u16 *)(l3 + 2);
		l3 += 4;
	}
	if (proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (struct iphdr *)l3;
	if ((void *)(ip + 1) > end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	udp = (struct udphdr *)(ip + 1);
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(HL_XDP_ROCE_PORT))
		return XDP_PASS;
	bth = (__u8 *)(udp + 1);
	if ((void *)(bth + 12) > end)
		return XDP_PASS;
	qpn = (__u32)bth[5] << 16 | (__u32)bth[6] << 8 | bth[7];
	idx = bpf_map_lookup_elem(&qpns, &qpn);
	if (!idx)
		return XDP_PASS;
	return bpf_redirect_map(&xsks, *idx, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
