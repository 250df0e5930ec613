// SPDX-License-Identifier: (BSD-3-Clause OR GPL-2.0)
/*
 * Chooses, among the SO_REUSEPORT sockets of one address's udp transport
 * (one per communicator), the one that owns the packet's BTH DestQP. The
 * context's data starts at the UDP header (the kernel's UDP lookup runs
 * after the IP header was pulled; tools/testing/selftests/bpf's
 * test_select_reuseport_kern.c reads its UDP header at offset 0).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "hl_udp_steer.h"

struct {
	__uint(type, BPF_MAP_TYPE_REUSEPORT_SOCKARRAY);
	__uint(max_entries, HL_UDP_STEER_MAX_SOCKS);
	__type(key, __u32);
	__type(value, __u64);   /* 8 bytes: user-space lookups return the cookie */
} socks SEC(".maps");

/* destination QPN -> its owner's sockarray index */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HL_UDP_STEER_MAX_QPNS);
	__type(key, __u32);
	__type(value, struct hl_udp_steer_owner);
} qpns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HL_UDP_STEER_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&counters, &which);

	if (n)
		(*n)++;
}

SEC("sk_reuseport")
int inca_udp_steer(struct sk_reuseport_md *md)
{
	struct hl_udp_steer_owner *owner;
	__u8 qp[3];
	__u32 qpn, index;

	/* not RoCEv2: the kernel's choice; the library drops and counts it */
	if (md->len < HL_UDP_STEER_UDP_HLEN + HL_UDP_STEER_BTH_LEN ||
	    bpf_skb_load_bytes(md, HL_UDP_STEER_UDP_HLEN + 5, qp, sizeof(qp))) {
		count(HL_UDP_STEER_SHORT);
		return SK_PASS;
	}
	qpn = (__u32)qp[0] << 16 | (__u32)qp[1] << 8 | qp[2];
	owner = bpf_map_lookup_elem(&qpns, &qpn);
	if (!owner) {
		count(HL_UDP_STEER_UNOWNED);
		return SK_DROP;
	}
	index = owner->index;
	/* fails when the owner's socket closed (the kernel emptied its slot) */
	if (bpf_sk_select_reuseport(md, &socks, &index, 0)) {
		count(HL_UDP_STEER_UNOWNED);
		return SK_DROP;
	}
	return SK_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
