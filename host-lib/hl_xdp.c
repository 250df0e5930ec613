/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The xdp transport: an AF_XDP socket on the member's interface, and an XDP
 * program (libbpf skeleton of hl_xdp.bpf.c) that steers packets for this
 * worker's QPN to it while ARP, TCP and everything else go to the kernel.
 * Frames are built whole by the library (the same bytes the udp transport's
 * kernel sends) and the switch's MAC comes from the kernel's ARP table.
 * One xdp communicator per interface queue (AF_XDP binds one socket per
 * queue); the program is detached on close, and a leftover one from a
 * worker that died is replaced.
 */
#include "hl_priv.h"

#ifdef INCA_HAVE_XDP
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <xdp/xsk.h>

#include "hl_xdp.h"
#include "hl_xdp.skel.h"

#define FRAME_SIZE 2048
#define NUM_FRAMES 2048          /* 4 MiB of UMEM: under the 8 MiB memlock */
#define RX_FRAMES 1024           /* first half for the fill ring */
#define RING_SIZE 1024

struct xdp_state {
	struct hl_xdp_bpf *skel;
	int ifindex;
	uint32_t xdp_mode;
	void *umem_area;
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	uint64_t free_tx[NUM_FRAMES - RX_FRAMES];
	unsigned nfree_tx;
	uint64_t refill[64];
	unsigned nrefill;
	uint8_t src_mac[6], dst_mac[6];
};

static int find_ifname(struct inca_comm *c)
{
	struct ifaddrs *ifs, *i;

	if (c->ifname[0])
		return 0;
	if (getifaddrs(&ifs))
		return -1;
	for (i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) == c->my_ip) {
			snprintf(c->ifname, sizeof(c->ifname), "%s", i->ifa_name);
			break;
		}
	freeifaddrs(ifs);
	return c->ifname[0] ? 0 : -1;
}

/* The switch's MAC from the ARP table, asking the kernel to resolve it
 * (a datagram to the discard port) when it is not there yet. */
static int resolve_mac(struct inca_comm *c, uint8_t mac[6])
{
	char ip[INET_ADDRSTRLEN], line[256];
	struct in_addr a = { htonl(c->g.switch_ip) };

	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	for (int attempt = 0; attempt < 40; attempt++) {
		FILE *f = fopen("/proc/net/arp", "r");
		if (f) {
			while (fgets(line, sizeof(line), f)) {
				char aip[64], hw[64], dev[64];
				unsigned flags, m[6];
				if (sscanf(line, "%63s %*s %x %63s %*s %63s", aip, &flags, hw, dev) == 4 &&
				    !strcmp(aip, ip) && (flags & 0x2) &&
				    sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3],
					   &m[4], &m[5]) == 6) {
					for (int k = 0; k < 6; k++)
						mac[k] = (uint8_t)m[k];
					fclose(f);
					return 0;
				}
			}
			fclose(f);
		}
		if (attempt % 10 == 0) {
			int fd = socket(AF_INET, SOCK_DGRAM, 0);
			struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons(9),
						 .sin_addr = a };
			if (fd >= 0) {
				sendto(fd, "", 0, 0, (struct sockaddr *)&d, sizeof(d));
				close(fd);
			}
		}
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return -1;
}

static void xdp_close(struct inca_comm *c)
{
	struct xdp_state *x = c->tp_state;

	if (!x)
		return;
	if (x->xsk)
		xsk_socket__delete(x->xsk);
	if (x->umem)
		xsk_umem__delete(x->umem);
	if (x->skel) {
		bpf_xdp_detach(x->ifindex, x->xdp_mode, NULL);
		hl_xdp_bpf__destroy(x->skel);
	}
	free(x->umem_area);
	free(x);
	c->tp_state = NULL;
}

/* Attach our program; replace a leftover copy of it, refuse anything else. */
static int attach_prog(struct inca_comm *c, struct xdp_state *x)
{
	int fd = bpf_program__fd(x->skel->progs.inca_steer);
	uint32_t modes[] = { XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE };
	uint32_t old_id = 0;
	int rc = -1;

	for (int i = 0; i < 2 && rc; i++) {
		if (bpf_xdp_query_id(x->ifindex, modes[i], &old_id) == 0 && old_id) {
			struct bpf_prog_info info = { 0 };
			uint32_t len = sizeof(info);
			int ofd = bpf_prog_get_fd_by_id(old_id);
			bool ours = ofd >= 0 && !bpf_obj_get_info_by_fd(ofd, &info, &len) &&
				    !strcmp(info.name, "inca_steer");
			if (ofd >= 0)
				close(ofd);
			if (!ours)
				return hl_fail(c, INCA_ERR_TRANSPORT, "%s already runs an XDP "
					       "program (id %u) that is not INCA's", c->ifname,
					       old_id);
			HL_WARN("rank %d: replacing a leftover INCA XDP program on %s",
				c->rank, c->ifname);
			bpf_xdp_detach(x->ifindex, modes[i], NULL);
		}
		rc = bpf_xdp_attach(x->ifindex, fd, modes[i], NULL);
		if (!rc)
			x->xdp_mode = modes[i];
	}
	if (rc)
		return hl_fail(c, INCA_ERR_TRANSPORT, "attach XDP program to %s: %s", c->ifname,
			       strerror(-rc));
	return 0;
}

static int xdp_open(struct inca_comm *c)
{
	struct xdp_state *x = calloc(1, sizeof(*x));
	struct ifreq ifr = { 0 };
	uint32_t key = 0, qpn = c->my_qpn, idx = 0;
	int rc, fd;

	if (!x)
		return hl_fail(c, INCA_ERR_NOMEM, "out of memory");
	c->tp_state = x;
	if (find_ifname(c)) {
		xdp_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "no interface has member %d's address "
			       "(set INCA_IFNAME)", c->rank);
	}
	x->ifindex = (int)if_nametoindex(c->ifname);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%.15s", c->ifname);
	if (!x->ifindex || fd < 0 || ioctl(fd, SIOCGIFHWADDR, &ifr)) {
		if (fd >= 0)
			close(fd);
		xdp_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "interface %s: %s", c->ifname,
			       strerror(errno));
	}
	close(fd);
	memcpy(x->src_mac, ifr.ifr_hwaddr.sa_data, 6);
	if (resolve_mac(c, x->dst_mac)) {
		xdp_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "the switch's MAC address did not "
			       "resolve (ARP on %s for 2 s)", c->ifname);
	}

	/* the socket first: it fails cleanly if another worker has the queue */
	if (posix_memalign(&x->umem_area, 4096, (size_t)NUM_FRAMES * FRAME_SIZE)) {
		xdp_close(c);
		return hl_fail(c, INCA_ERR_NOMEM, "out of memory for the UMEM");
	}
	struct xsk_umem_config ucfg = { .fill_size = RING_SIZE, .comp_size = RING_SIZE,
					.frame_size = FRAME_SIZE };
	rc = xsk_umem__create(&x->umem, x->umem_area, (uint64_t)NUM_FRAMES * FRAME_SIZE,
			      &x->fill, &x->comp, &ucfg);
	if (rc) {
		xdp_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "AF_XDP UMEM (%d KiB): %s (locked memory "
			       "limit?)", NUM_FRAMES * FRAME_SIZE / 1024, strerror(-rc));
	}
	struct xsk_socket_config scfg = { .rx_size = RING_SIZE, .tx_size = RING_SIZE,
					  .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD };
	rc = xsk_socket__create(&x->xsk, c->ifname, 0, x->umem, &x->rx, &x->tx, &scfg);
	if (rc) {
		xdp_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "AF_XDP socket on %s queue 0: %s%s",
			       c->ifname, strerror(-rc), rc == -EBUSY ? " (another xdp "
			       "communicator has this queue: one per interface queue)" : "");
	}
	x->skel = hl_xdp_bpf__open_and_load();
	if (!x->skel) {
		rc = errno;
		xdp_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "load the XDP program: %s", strerror(rc));
	}
	rc = attach_prog(c, x);
	if (rc) {
		hl_xdp_bpf__destroy(x->skel);
		x->skel = NULL;
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", c->errmsg);
		xdp_close(c);
		return hl_fail(c, rc, "%s", msg);
	}
	fd = xsk_socket__fd(x->xsk);
	if (bpf_map_update_elem(bpf_map__fd(x->skel->maps.xsks), &key, &fd, 0) ||
	    bpf_map_update_elem(bpf_map__fd(x->skel->maps.qpns), &qpn, &idx, 0)) {
		rc = errno;
		xdp_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "XDP maps: %s", strerror(rc));
	}

	uint32_t at;
	if (xsk_ring_prod__reserve(&x->fill, RX_FRAMES, &at) != RX_FRAMES) {
		xdp_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "AF_XDP fill ring");
	}
	for (uint32_t i = 0; i < RX_FRAMES; i++)
		*xsk_ring_prod__fill_addr(&x->fill, at + i) = (uint64_t)i * FRAME_SIZE;
	xsk_ring_prod__submit(&x->fill, RX_FRAMES);
	for (uint32_t i = 0; i < NUM_FRAMES - RX_FRAMES; i++)
		x->free_tx[x->nfree_tx++] = (uint64_t)(RX_FRAMES + i) * FRAME_SIZE;
	HL_INFO("rank %d: xdp: %s queue 0 (%s mode), QPN %u steered to AF_XDP", c->rank,
		c->ifname, x->xdp_mode == XDP_FLAGS_DRV_MODE ? "native" : "generic", qpn);
	return 0;
}

static void reap_tx(struct xdp_state *x)
{
	uint32_t at, n = xsk_ring_cons__peek(&x->comp, RING_SIZE, &at);

	for (uint32_t i = 0; i < n; i++)
		x->free_tx[x->nfree_tx++] = *xsk_ring_cons__comp_addr(&x->comp, at + i);
	xsk_ring_cons__release(&x->comp, n);
}

static int xdp_send(struct inca_comm *c, const struct hl_frame *f, unsigned n)
{
	struct xdp_state *x = c->tp_state;
	uint32_t at;

	reap_tx(x);
	if (n > x->nfree_tx)
		n = x->nfree_tx;
	if (n == 0 || xsk_ring_prod__reserve(&x->tx, n, &at) != n)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t addr = x->free_tx[--x->nfree_tx];
		uint8_t *p = xsk_umem__get_data(x->umem_area, addr);
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&x->tx, at + i);

		memcpy(p, f[i].data, f[i].len);
		memcpy(p, x->dst_mac, 6);
		memcpy(p + 6, x->src_mac, 6);
		d->addr = addr;
		d->len = f[i].len;
	}
	xsk_ring_prod__submit(&x->tx, n);
	if (sendto(xsk_socket__fd(x->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 &&
	    errno != EAGAIN && errno != EBUSY && errno != ENOBUFS)
		return hl_fail(c, INCA_ERR_TRANSPORT, "AF_XDP send: %s", strerror(errno));
	return (int)n;
}

static int xdp_recv(struct inca_comm *c, struct hl_rx *rx, unsigned max, int timeout_us)
{
	struct xdp_state *x = c->tp_state;
	uint32_t at, n;
	int out = 0;

	/* what the previous call handed out goes back to the fill ring */
	if (x->nrefill && xsk_ring_prod__reserve(&x->fill, x->nrefill, &at) == x->nrefill) {
		for (unsigned i = 0; i < x->nrefill; i++)
			*xsk_ring_prod__fill_addr(&x->fill, at + i) = x->refill[i];
		xsk_ring_prod__submit(&x->fill, x->nrefill);
		x->nrefill = 0;
	}
	if (max > 64)
		max = 64;
	n = xsk_ring_cons__peek(&x->rx, max, &at);
	if (n == 0 && timeout_us > 0) {
		struct pollfd p = { .fd = xsk_socket__fd(x->xsk), .events = POLLIN };
		struct timespec ts = { timeout_us / 1000000, (timeout_us % 1000000) * 1000L };
		ppoll(&p, 1, &ts, NULL);
		n = xsk_ring_cons__peek(&x->rx, max, &at);
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&x->rx, at + i);
		uint8_t *p = xsk_umem__get_data(x->umem_area, d->addr);
		struct agg_pkt pkt;

		x->refill[x->nrefill++] = d->addr;
		if (agg_decode(p, d->len, true, &pkt) || pkt.dest_qp != c->my_qpn ||
		    (pkt.kind == AGG_PKT_INCA && pkt.qkey != c->g.qkey)) {
			c->stats.rx_dropped++;
			continue;
		}
		rx[out++] = (struct hl_rx){
			.kind = pkt.kind == AGG_PKT_CNP ? HL_RX_CNP : HL_RX_MSG,
			.msg = pkt.payload ? pkt.payload - AGG_INCA_HLEN : NULL,
			.len = pkt.payload_len + AGG_INCA_HLEN,
			.src_qp = pkt.src_qp,
			.len_wire = d->len,
		};
	}
	xsk_ring_cons__release(&x->rx, n);
	reap_tx(x);
	return out;
}

const struct hl_transport_ops hl_xdp_ops = {
	.name = "xdp", .host_pfc = true,
	.open = xdp_open,
	.close = xdp_close,
	.send = xdp_send,
	.recv = xdp_recv,
};

#else /* !INCA_HAVE_XDP */

static int xdp_unavailable(struct inca_comm *c)
{
	return hl_fail(c, INCA_ERR_UNSUPPORTED, "libinca was built without the xdp "
		       "transport (install libbpf-dev, libxdp-dev, clang and bpftool, "
		       "then rebuild)");
}

static void xdp_none(struct inca_comm *c)
{
	(void)c;
}

const struct hl_transport_ops hl_xdp_ops = {
	.name = "xdp", .host_pfc = true,
	.open = xdp_unavailable,
	.close = xdp_none,
};
#endif
