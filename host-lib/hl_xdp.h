/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the XDP program (hl_xdp.bpf.c) and its loader (hl_xdp.c). */
#ifndef HL_XDP_H
#define HL_XDP_H

#define HL_XDP_MAX_SOCKS 64      /* XSKMAP entries: one per owner of an interface */
#define HL_XDP_MAX_QPNS 256      /* QPNs steered to AF_XDP sockets, stale ones included */
#define HL_XDP_ROCE_PORT 4791

#endif
