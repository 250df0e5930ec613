/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Honouring 802.1Qbb PFC on the host: a NIC with PFC stops sending a
 * priority when the switch pauses it. The udp and xdp transports send
 * through the kernel, which does not, so libinca does it itself: a packet
 * socket on the member's interface receives the MAC control frames
 * (EtherType 0x8808), and sends wait while the data priority is paused
 * (quanta of 512 bit times at the line rate; quanta 0 resumes).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hl_priv.h"

/* An interface's pauses, shared by the process's communicators on it
 * (hl_priv.h says why it outlives them). */
struct hl_pfc_port {
	struct hl_pfc_port *next;
	int ifindex;
	int fd;
	unsigned refs;
	pthread_mutex_t lock;          /* fd's reads and until_us */
	double until_us[AGG_PFC_CLASSES];
};

static struct hl_pfc_port *ports;
static pthread_mutex_t ports_lock = PTHREAD_MUTEX_INITIALIZER;

/* ifindex's port, with a reference, or NULL */
static struct hl_pfc_port *port_get(int ifindex)
{
	struct hl_pfc_port *p;
	uint8_t buf[128];

	pthread_mutex_lock(&ports_lock);
	for (p = ports; p && p->ifindex != ifindex; p = p->next)
		;
	if (p && p->refs++ == 0) {
		/* unread while no communicator used it: old news */
		while (recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
		for (unsigned i = 0; i < AGG_PFC_CLASSES; i++)
			p->until_us[i] = 0;
	}
	pthread_mutex_unlock(&ports_lock);
	return p;
}

/* The interface that holds ip (host byte order), into name. */
static int iface_of(uint32_t ip, char *name, size_t len)
{
	struct ifaddrs *ifa, *i;
	int rc = -1;

	if (getifaddrs(&ifa))
		return -1;
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) == ip) {
			snprintf(name, len, "%s", i->ifa_name);
			rc = 0;
			break;
		}
	freeifaddrs(ifa);
	return rc;
}

int hl_pfc_open(struct inca_comm *c, bool required)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET,
				   .sll_protocol = htons(AGG_ETHERTYPE_MAC_CONTROL) };
	char ifname[sizeof(c->ifname)] = "";
	const char *why;
	int fd;

	c->pfc = NULL;
	if (c->ifname[0])
		snprintf(ifname, sizeof(ifname), "%s", c->ifname);
	else if (iface_of(c->my_ip, ifname, sizeof(ifname))) {
		why = "no interface holds the member's address";
		errno = ENODEV;
		goto fail;
	}
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	if (!sll.sll_ifindex) {
		why = "unknown interface";
		goto fail;
	}
	if ((c->pfc = port_get(sll.sll_ifindex)))
		return INCA_OK;
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    htons(AGG_ETHERTYPE_MAC_CONTROL));
	if (fd < 0) {
		why = "packet socket (needs CAP_NET_RAW)";
		goto fail;
	}
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll))) {
		why = "bind";
		close(fd);
		goto fail;
	}
	if (hl_pfc_attach(c, sll.sll_ifindex, fd)) {
		why = "out of memory";
		errno = ENOMEM;
		goto fail;
	}
	HL_DEBUG("PFC: honouring pauses of priority %u on %s at %.3g Gbit/s", c->pfc_prio,
		 ifname, c->line_bps / 1e9);
	return INCA_OK;
fail:
	if (required)
		return hl_fail(c, INCA_ERR_TRANSPORT, "PFC on %s: %s: %s",
			       ifname[0] ? ifname : "?", why, strerror(errno));
	HL_WARN("PFC pauses will not be honoured (%s: %s: %s); set INCA_PFC=0 to "
		"silence this", ifname[0] ? ifname : "?", why, strerror(errno));
	return INCA_OK;
}

int hl_pfc_attach(struct inca_comm *c, int ifindex, int fd)
{
	struct hl_pfc_port *p = port_get(ifindex);

	if (p) {
		if (fd >= 0)
			close(fd);
		c->pfc = p;
		return INCA_OK;
	}
	if (fd < 0)
		return INCA_ERR_INVAL;
	if (!(p = calloc(1, sizeof(*p)))) {
		close(fd);
		return INCA_ERR_NOMEM;
	}
	p->ifindex = ifindex;
	p->fd = fd;
	p->refs = 1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_lock(&ports_lock);
	p->next = ports;
	ports = p;
	pthread_mutex_unlock(&ports_lock);
	c->pfc = p;
	return INCA_OK;
}

void hl_pfc_close(struct inca_comm *c)
{
	if (!c->pfc)
		return;
	pthread_mutex_lock(&ports_lock);
	c->pfc->refs--;        /* kept open for the next communicator */
	pthread_mutex_unlock(&ports_lock);
	c->pfc = NULL;
}

double hl_pfc_wait_us(struct inca_comm *c, double now)
{
	struct hl_pfc_port *p = c->pfc;
	uint8_t buf[128];
	ssize_t n;
	double until;

	if (!p)
		return 0;
	pthread_mutex_lock(&p->lock);
	while ((n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		struct agg_pfc pfc;

		if (agg_pfc_decode(buf, (size_t)n, &pfc)) {
			c->stats.pfc_malformed++;
			continue;
		}
		c->stats.pfc_frames++;
		for (unsigned i = 0; i < AGG_PFC_CLASSES; i++)
			if (pfc.enable >> i & 1)
				p->until_us[i] = now + (double)agg_pfc_quanta_ns(pfc.quanta[i],
						(uint64_t)c->line_bps) / 1000.0;
	}
	until = p->until_us[c->pfc_prio];
	pthread_mutex_unlock(&p->lock);
	return until > now ? until - now : 0;
}
