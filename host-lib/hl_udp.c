/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The udp transport: the library builds RoCEv2 (BTH, DETH, INCA, ICRC) and
 * a kernel UDP socket on port 4791 carries it, batched with sendmmsg and
 * recvmmsg. The socket is unconnected with IP_PMTUDISC_DO, so Linux sends
 * IPv4 ID 0 and DF, which the ICRC was computed with (docs/protocol.md 6).
 * One socket per local address: several workers on one host each bind
 * their own address (INCA_LOCAL_IP), or use the xdp transport.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hl_priv.h"

#define RX_SLOTS 64
#define RX_BUF 4608
/* Ethernet + IPv4 + UDP around what the socket sees, for counters */
#define WIRE_EXTRA (AGG_ETH_HLEN + AGG_IPV4_HLEN + AGG_UDP_HLEN)

struct udp_state {
	int fd;
	struct sockaddr_in dst;
	uint8_t bufs[RX_SLOTS][RX_BUF];
};

static int udp_open(struct inca_comm *c)
{
	struct udp_state *u = calloc(1, sizeof(*u));
	int one = 1, pmtu = IP_PMTUDISC_DO, tos = 26 << 2 | 2, buf = 4 << 20;
	struct sockaddr_in me = { .sin_family = AF_INET,
				  .sin_port = htons(AGG_ROCEV2_UDP_PORT),
				  .sin_addr.s_addr = htonl(c->my_ip) };
	char ip[INET_ADDRSTRLEN];

	if (!u)
		return hl_fail(c, INCA_ERR_NOMEM, "out of memory");
	inet_ntop(AF_INET, &me.sin_addr, ip, sizeof(ip));
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0 ||
	    setsockopt(u->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) ||
	    setsockopt(u->fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) ||
	    setsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf)) ||
	    setsockopt(u->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf))) {
		int e = errno;
		if (u->fd >= 0)
			close(u->fd);
		free(u);
		return hl_fail(c, INCA_ERR_TRANSPORT, "UDP socket: %s", strerror(e));
	}
	/* UDP checksum 0, as RoCEv2 NICs and the xdp transport send it (the
	 * ICRC protects the packet): the same bytes on the wire */
	setsockopt(u->fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one));
	if (bind(u->fd, (struct sockaddr *)&me, sizeof(me))) {
		int e = errno;
		close(u->fd);
		free(u);
		if (e == EADDRINUSE)
			return hl_fail(c, INCA_ERR_TRANSPORT, "UDP %s:4791 is in use (another "
				       "RoCEv2 endpoint on this address?): give each worker "
				       "its own address (INCA_LOCAL_IP) or use the xdp transport",
				       ip);
		if (e == EADDRNOTAVAIL)
			return hl_fail(c, INCA_ERR_TRANSPORT, "UDP bind %s:4791: this host "
				       "does not have member %d's address %s (set INCA_LOCAL_IP "
				       "or fix the member list)", ip, c->rank, ip);
		return hl_fail(c, INCA_ERR_TRANSPORT, "UDP bind %s:4791: %s", ip, strerror(e));
	}
	u->dst = (struct sockaddr_in){ .sin_family = AF_INET,
				       .sin_port = htons(AGG_ROCEV2_UDP_PORT),
				       .sin_addr.s_addr = htonl(c->g.switch_ip) };
	c->tp_state = u;
	return 0;
}

static void udp_close(struct inca_comm *c)
{
	struct udp_state *u = c->tp_state;

	if (!u)
		return;
	close(u->fd);
	free(u);
	c->tp_state = NULL;
}

static int udp_send(struct inca_comm *c, const struct hl_frame *f, unsigned n)
{
	struct udp_state *u = c->tp_state;
	struct mmsghdr msgs[64];
	struct iovec iov[64];
	int rc;

	if (n > 64)
		n = 64;
	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = f[i].data + f[i].bth_off;
		iov[i].iov_len = f[i].len - f[i].bth_off;
		msgs[i].msg_hdr = (struct msghdr){ .msg_name = &u->dst,
						   .msg_namelen = sizeof(u->dst),
						   .msg_iov = &iov[i], .msg_iovlen = 1 };
	}
	rc = sendmmsg(u->fd, msgs, n, 0);
	if (rc < 0) {
		if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR)
			return 0;
		/* an ICMP error from an earlier send: not fatal for UDP */
		if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH)
			return 0;
		return hl_fail(c, INCA_ERR_TRANSPORT, "sendmmsg: %s", strerror(errno));
	}
	return rc;
}

static int udp_recv(struct inca_comm *c, struct hl_rx *rx, unsigned max, int timeout_us)
{
	struct udp_state *u = c->tp_state;
	struct mmsghdr msgs[RX_SLOTS];
	struct iovec iov[RX_SLOTS];
	int n, out = 0;

	if (max > RX_SLOTS)
		max = RX_SLOTS;
	for (unsigned i = 0; i < max; i++) {
		iov[i] = (struct iovec){ .iov_base = u->bufs[i], .iov_len = RX_BUF };
		msgs[i].msg_hdr = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1 };
	}
	n = recvmmsg(u->fd, msgs, max, MSG_DONTWAIT, NULL);
	if (n < 0 && (errno == EAGAIN || errno == EINTR) && timeout_us > 0) {
		struct pollfd p = { .fd = u->fd, .events = POLLIN };
		struct timespec ts = { timeout_us / 1000000, (timeout_us % 1000000) * 1000L };
		if (ppoll(&p, 1, &ts, NULL) > 0)
			n = recvmmsg(u->fd, msgs, max, MSG_DONTWAIT, NULL);
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR || errno == ECONNREFUSED)
			return 0;
		return hl_fail(c, INCA_ERR_TRANSPORT, "recvmmsg: %s", strerror(errno));
	}
	for (int i = 0; i < n; i++) {
		struct agg_pkt p;

		if (agg_decode_bth(u->bufs[i], msgs[i].msg_len, &p) || p.dest_qp != c->my_qpn ||
		    (p.kind == AGG_PKT_INCA && p.qkey != c->g.qkey)) {
			c->stats.rx_dropped++;
			continue;
		}
		rx[out] = (struct hl_rx){
			.kind = p.kind == AGG_PKT_CNP ? HL_RX_CNP : HL_RX_MSG,
			.msg = p.payload ? p.payload - AGG_INCA_HLEN : NULL,
			.len = p.payload_len + AGG_INCA_HLEN,
			.src_qp = p.src_qp,
			.len_wire = msgs[i].msg_len + WIRE_EXTRA,
		};
		out++;
	}
	return out;
}

const struct hl_transport_ops hl_udp_ops = {
	.name = "udp", .host_pfc = true,
	.open = udp_open,
	.close = udp_close,
	.send = udp_send,
	.recv = udp_recv,
};
