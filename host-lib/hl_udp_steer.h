/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the reuseport program (hl_udp_steer.bpf.c) and its loader
 * (hl_udp.c): map sizes, counter indices and the QPN map's value. */
#ifndef HL_UDP_STEER_H
#define HL_UDP_STEER_H

#include <linux/types.h>

#define HL_UDP_STEER_MAX_SOCKS 64    /* owners (communicators) per address */
#define HL_UDP_STEER_MAX_QPNS 1024   /* QPN map entries, stale ones included */
#define HL_UDP_STEER_UDP_HLEN 8
#define HL_UDP_STEER_BTH_LEN 12

/* per-CPU counters of the program */
enum hl_udp_steer_counter {
	HL_UDP_STEER_UNOWNED = 0,    /* well-formed, no live owner: dropped */
	HL_UDP_STEER_SHORT = 1,      /* shorter than UDP + BTH: left to the kernel */
	HL_UDP_STEER_NCOUNTERS
};

/* QPN map value: the owner's sockarray index, and its socket cookie so a
 * later owner can tell a live entry from one a dead process left behind */
struct hl_udp_steer_owner {
	__u32 index;
	__u32 pad;
	__u64 cookie;
};

#endif
