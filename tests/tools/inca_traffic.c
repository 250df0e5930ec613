/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-traffic: test traffic for the lossless-fabric tests.
 *
 *   send  paced UDP frames of one DSCP/ECN from a raw socket, honouring
 *         802.1Qbb PFC for their priority like a RoCE NIC would;
 *   recv  count them (per flow: unique, duplicates, CE-marked);
 *   pfc   send PFC frames: one, a storm, or malformed ones.
 *
 * Every mode is bounded in count and time and prints one line of
 * key=value figures the tests compare.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "inca/agg.h"

#define MAGIC 0x1ca7f10u
#define MAX_SEQ (1u << 22)

struct opts {
	const char *iface;
	uint8_t dst_mac[6];
	bool have_dst_mac;
	uint32_t src_ip, dst_ip;     /* network order */
	unsigned dscp, ecn, prio;
	unsigned count, size, port, flow;
	double rate_bps, link_bps;
	double deadline_s, idle_s;
	bool honor_pfc;
	/* pfc mode */
	unsigned vector, quanta, interval_us;
	const char *malformed;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: inca-traffic send --iface IF --dst-mac MAC --src-ip A --dst-ip B\n"
		"                         [--dscp 26] [--ecn 0] [--count 1000] [--size 1000]\n"
		"                         [--rate 50mbit] [--port 9000] [--flow 0]\n"
		"                         [--honor-pfc] [--prio 3] [--link-rate 100mbit]\n"
		"       inca-traffic recv --port 9000 [--count N] [--deadline-s 30] [--idle-s 2]\n"
		"       inca-traffic pfc --iface IF [--vector 0x08] [--quanta 65535]\n"
		"                        [--count 1] [--interval-us 10000]\n"
		"                        [--malformed opcode|zero|short|link-pause|reserved]\n"
		"\n"
		"send: paced UDP frames (payload: flow, sequence) from a raw socket; with\n"
		"  --honor-pfc it stops while its priority is paused (quanta are 512 bit\n"
		"  times at --link-rate). Prints sent=, pfc_frames=, paused_ms=.\n"
		"recv: counts frames per flow until --count arrive or nothing came for\n"
		"  --idle-s. Prints received=, unique=, duplicates=, ce=, first_ce=, last_ce=.\n"
		"pfc: sends PFC frames. Prints sent=.\n");
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
	struct timespec ts = { (time_t)t, (long)((t - (double)(time_t)t) * 1e9) };

	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static int parse_rate(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || !(v > 0))
		return -1;
	if (!strcasecmp(end, "gbit"))
		v *= 1e9;
	else if (!strcasecmp(end, "mbit"))
		v *= 1e6;
	else if (!strcasecmp(end, "kbit"))
		v *= 1e3;
	else if (*end && strcasecmp(end, "bit"))
		return -1;
	*out = v;
	return 0;
}

static int parse_uint(const char *name, const char *s, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || end == s || v > max) {
		fprintf(stderr, "inca-traffic: %s: expected 0..%u, got '%s'\n", name, max, s);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

static int raw_socket(const char *iface, uint16_t proto, int *ifindex, uint8_t mac[6])
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(proto) };
	struct ifreq ifr = { 0 };
	int fd = socket(AF_PACKET, SOCK_RAW, htons(proto));

	if (fd < 0) {
		fprintf(stderr, "inca-traffic: raw socket: %s (needs CAP_NET_RAW)\n",
			strerror(errno));
		return -1;
	}
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface);
	if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0) {
		fprintf(stderr, "inca-traffic: interface %s: %s\n", iface, strerror(errno));
		close(fd);
		return -1;
	}
	*ifindex = ifr.ifr_ifindex;
	if (mac) {
		if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
			fprintf(stderr, "inca-traffic: %s: MAC: %s\n", iface, strerror(errno));
			close(fd);
			return -1;
		}
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	}
	sll.sll_ifindex = *ifindex;
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		fprintf(stderr, "inca-traffic: bind %s: %s\n", iface, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* The PFC state a host keeps: until when each priority is paused. */
struct pfc_rx {
	int fd;
	double until[AGG_PFC_CLASSES];
	unsigned long frames, bad;
};

static void pfc_poll(struct pfc_rx *p, double link_bps)
{
	uint8_t buf[256];
	ssize_t n;

	while ((n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		struct agg_pfc pfc;
		double t = now_s();

		if (agg_pfc_decode(buf, (size_t)n, &pfc)) {
			p->bad++;
			continue;
		}
		p->frames++;
		for (unsigned c = 0; c < AGG_PFC_CLASSES; c++)
			if (pfc.enable >> c & 1)
				p->until[c] = t + (double)agg_pfc_quanta_ns(pfc.quanta[c],
						(uint64_t)link_bps) * 1e-9;
	}
}

static uint16_t csum(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		s += (uint32_t)p[len - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static int do_send(const struct opts *o)
{
	uint8_t frame[9000], mac[6];
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_halen = 6 };
	struct pfc_rx pfc = { .fd = -1 };
	int ifindex, fd;
	unsigned sent = 0;
	double paused = 0, t0, next, gap;

	if (!o->iface || !o->have_dst_mac || !o->src_ip || !o->dst_ip) {
		fprintf(stderr, "inca-traffic send: --iface, --dst-mac, --src-ip and --dst-ip "
			"are required\n");
		return 2;
	}
	if (o->size < 64 || o->size > sizeof(frame)) {
		fprintf(stderr, "inca-traffic send: --size: expected 64..%zu\n", sizeof(frame));
		return 2;
	}
	fd = raw_socket(o->iface, 0, &ifindex, mac);
	if (fd < 0)
		return 1;
	if (o->honor_pfc) {
		pfc.fd = raw_socket(o->iface, AGG_ETHERTYPE_MAC_CONTROL, &ifindex, NULL);
		if (pfc.fd < 0)
			return 1;
	}
	to.sll_ifindex = ifindex;
	memcpy(to.sll_addr, o->dst_mac, 6);

	memset(frame, 0, o->size);
	memcpy(frame, o->dst_mac, 6);
	memcpy(frame + 6, mac, 6);
	frame[12] = 0x08;
	struct iphdr *ip = (struct iphdr *)(frame + 14);
	ip->version = 4;
	ip->ihl = 5;
	ip->tos = (uint8_t)(o->dscp << 2 | o->ecn);
	ip->tot_len = htons((uint16_t)(o->size - 14));
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->saddr = o->src_ip;
	ip->daddr = o->dst_ip;
	uint8_t *udp = frame + 34;
	*(uint16_t *)(udp + 0) = htons((uint16_t)o->port);
	*(uint16_t *)(udp + 2) = htons((uint16_t)o->port);
	*(uint16_t *)(udp + 4) = htons((uint16_t)(o->size - 34));
	uint32_t *pl = (uint32_t *)(udp + 8);
	pl[0] = htonl(MAGIC);
	pl[1] = htonl(o->flow);

	gap = o->rate_bps > 0 ? (double)(o->size + 24) * 8.0 / o->rate_bps : 0;
	t0 = now_s();
	next = t0;
	while (sent < o->count) {
		double t = now_s();

		if (t - t0 > o->deadline_s) {
			fprintf(stderr, "inca-traffic send: deadline: %u of %u sent\n", sent,
				o->count);
			break;
		}
		if (pfc.fd >= 0) {
			pfc_poll(&pfc, o->link_bps);
			if (pfc.until[o->prio] > t) {
				/* paused: wait for the pause to end or an XON */
				struct pollfd pf = { .fd = pfc.fd, .events = POLLIN };
				double w = pfc.until[o->prio] - t;
				int ms = (int)(w * 1000.0) + 1;
				poll(&pf, 1, ms > 10 ? 10 : ms);
				paused += now_s() - t;
				next = now_s();
				continue;
			}
		}
		if (gap > 0) {
			if (next > t)
				sleep_until(next);
			next += gap;
			if (next < t - 0.01)    /* do not burst to catch up */
				next = t;
		}
		pl[2] = htonl(sent);
		ip->check = 0;
		ip->check = htons(csum(ip, 20));
		if (sendto(fd, frame, o->size, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
			if (errno == ENOBUFS || errno == EAGAIN) {
				usleep(100);
				continue;
			}
			fprintf(stderr, "inca-traffic send: %s\n", strerror(errno));
			break;
		}
		sent++;
	}
	printf("sent=%u pfc_frames=%lu pfc_bad=%lu paused_ms=%.0f seconds=%.3f\n", sent,
	       pfc.frames, pfc.bad, paused * 1000.0, now_s() - t0);
	close(fd);
	if (pfc.fd >= 0)
		close(pfc.fd);
	return sent == o->count ? 0 : 1;
}

static int do_recv(const struct opts *o)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port) };
	uint8_t *seen = calloc(MAX_SEQ, 1);
	unsigned long received = 0, unique = 0, dup = 0, ce = 0, foreign = 0;
	unsigned maxseq = 0;
	int one = 1, buf = 16 << 20;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	double t0 = now_s(), last = t0;
	int first_ce = -1, last_ce = -1;

	if (fd < 0 || !seen) {
		perror("inca-traffic recv");
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fprintf(stderr, "inca-traffic recv: port %u: %s\n", o->port, strerror(errno));
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	while (!o->count || unique < o->count) {
		uint8_t data[9000], cbuf[64];
		struct iovec iov = { data, sizeof(data) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		double t = now_s();

		if (t - t0 > o->deadline_s || (received && t - last > o->idle_s))
			break;
		if (poll(&pf, 1, 50) <= 0)
			continue;
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);
		if (n < 12)
			continue;
		const uint32_t *pl = (const uint32_t *)data;
		if (ntohl(pl[0]) != MAGIC || ntohl(pl[1]) != o->flow) {
			foreign++;
			continue;
		}
		uint32_t seq = ntohl(pl[2]);
		int tos = -1;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS)
				tos = *(uint8_t *)CMSG_DATA(c);
		last = now_s();
		received++;
		if (seq >= MAX_SEQ)
			continue;
		if (seen[seq]) {
			dup++;
			continue;
		}
		seen[seq] = 1;
		unique++;
		bool is_ce = tos >= 0 && (tos & 3) == 3;
		ce += is_ce;
		if (seq == 0)
			first_ce = is_ce;
		if (o->count && seq == o->count - 1)
			last_ce = is_ce;
		if (seq > maxseq)
			maxseq = seq;
	}
	printf("received=%lu unique=%lu duplicates=%lu ce=%lu first_ce=%d last_ce=%d "
	       "foreign=%lu\n", received, unique, dup, ce, first_ce, last_ce, foreign);
	free(seen);
	close(fd);
	return 0;
}

static int do_pfc(const struct opts *o)
{
	uint8_t frame[AGG_PFC_FRAME_LEN], mac[6];
	struct agg_pfc pfc = { .enable = (uint8_t)o->vector };
	size_t len = AGG_PFC_FRAME_LEN;
	int ifindex, fd;
	unsigned sent = 0;
	double t0 = now_s();

	if (!o->iface) {
		fprintf(stderr, "inca-traffic pfc: --iface is required\n");
		return 2;
	}
	fd = raw_socket(o->iface, AGG_ETHERTYPE_MAC_CONTROL, &ifindex, mac);
	if (fd < 0)
		return 1;
	for (unsigned c = 0; c < AGG_PFC_CLASSES; c++)
		pfc.quanta[c] = (uint16_t)o->quanta;
	agg_pfc_encode(frame, sizeof(frame), mac, &pfc);
	if (o->malformed) {
		if (!strcmp(o->malformed, "opcode")) {
			frame[15] = 0x02;
		} else if (!strcmp(o->malformed, "zero")) {
			frame[17] = 0;
		} else if (!strcmp(o->malformed, "short")) {
			len = 20;
		} else if (!strcmp(o->malformed, "link-pause")) {
			frame[14] = 0x00;
			frame[15] = 0x01;
		} else if (!strcmp(o->malformed, "reserved")) {
			frame[16] = 0x80;
		} else {
			fprintf(stderr, "inca-traffic pfc: --malformed: expected opcode, zero, "
				"short, link-pause or reserved\n");
			close(fd);
			return 2;
		}
	}
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = ifindex,
				  .sll_halen = 6 };
	memcpy(to.sll_addr, agg_pfc_dst_mac, 6);
	double next = t0;
	for (unsigned i = 0; i < o->count && now_s() - t0 < o->deadline_s; i++) {
		if (i) {
			next += (double)o->interval_us * 1e-6;
			sleep_until(next);
		}
		if (sendto(fd, frame, len, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
			fprintf(stderr, "inca-traffic pfc: %s\n", strerror(errno));
			break;
		}
		sent++;
	}
	printf("sent=%u\n", sent);
	close(fd);
	return sent == o->count ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "iface", 1, 0, 'i' }, { "dst-mac", 1, 0, 'M' }, { "src-ip", 1, 0, 's' },
		{ "dst-ip", 1, 0, 'd' }, { "dscp", 1, 0, 'D' }, { "ecn", 1, 0, 'E' },
		{ "count", 1, 0, 'c' }, { "size", 1, 0, 'S' }, { "rate", 1, 0, 'r' },
		{ "port", 1, 0, 'p' }, { "flow", 1, 0, 'f' }, { "honor-pfc", 0, 0, 'H' },
		{ "prio", 1, 0, 'P' }, { "link-rate", 1, 0, 'L' },
		{ "deadline-s", 1, 0, 'T' }, { "idle-s", 1, 0, 'I' },
		{ "vector", 1, 0, 'V' }, { "quanta", 1, 0, 'Q' },
		{ "interval-us", 1, 0, 'N' }, { "malformed", 1, 0, 'm' },
		{ "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
	};
	struct opts o = {
		.dscp = 26, .prio = 3, .count = 1000, .size = 1000, .port = 9000,
		.link_bps = 100e6, .deadline_s = 30, .idle_s = 2,
		.vector = 0x08, .quanta = 0xffff, .interval_us = 10000,
	};
	const char *mode;
	unsigned v;
	int c;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	mode = argv[1];
	if (!strcmp(mode, "recv"))
		o.count = 0;
	if (!strcmp(mode, "pfc"))
		o.count = 1;
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		int rc = 0;
		struct in_addr a;

		switch (c) {
		case 'i': o.iface = optarg; break;
		case 'M':
			if (sscanf(optarg, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &o.dst_mac[0],
				   &o.dst_mac[1], &o.dst_mac[2], &o.dst_mac[3], &o.dst_mac[4],
				   &o.dst_mac[5]) != 6) {
				fprintf(stderr, "inca-traffic: --dst-mac: expected aa:bb:cc:dd:ee:ff\n");
				return 2;
			}
			o.have_dst_mac = true;
			break;
		case 's':
		case 'd':
			if (inet_pton(AF_INET, optarg, &a) != 1) {
				fprintf(stderr, "inca-traffic: expected an IPv4 address, got '%s'\n",
					optarg);
				return 2;
			}
			*(c == 's' ? &o.src_ip : &o.dst_ip) = a.s_addr;
			break;
		case 'D': rc = parse_uint("--dscp", optarg, 63, &o.dscp); break;
		case 'E': rc = parse_uint("--ecn", optarg, 3, &o.ecn); break;
		case 'c': rc = parse_uint("--count", optarg, MAX_SEQ, &o.count); break;
		case 'S': rc = parse_uint("--size", optarg, 9000, &o.size); break;
		case 'p': rc = parse_uint("--port", optarg, 65535, &o.port); break;
		case 'f': rc = parse_uint("--flow", optarg, 1u << 30, &o.flow); break;
		case 'P': rc = parse_uint("--prio", optarg, 7, &o.prio); break;
		case 'V': rc = parse_uint("--vector", optarg, 255, &o.vector); break;
		case 'Q': rc = parse_uint("--quanta", optarg, 65535, &o.quanta); break;
		case 'N': rc = parse_uint("--interval-us", optarg, 10000000, &o.interval_us); break;
		case 'T': rc = parse_uint("--deadline-s", optarg, 3600, &v); o.deadline_s = v; break;
		case 'I': rc = parse_uint("--idle-s", optarg, 3600, &v); o.idle_s = v; break;
		case 'H': o.honor_pfc = true; break;
		case 'm': o.malformed = optarg; break;
		case 'r':
		case 'L':
			if (parse_rate(optarg, c == 'r' ? &o.rate_bps : &o.link_bps)) {
				fprintf(stderr, "inca-traffic: expected a rate such as 50mbit, got "
					"'%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (rc)
			return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "inca-traffic: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!strcmp(mode, "send"))
		return do_send(&o);
	if (!strcmp(mode, "recv"))
		return do_recv(&o);
	if (!strcmp(mode, "pfc"))
		return do_pfc(&o);
	fprintf(stderr, "inca-traffic: unknown mode '%s' (send, recv or pfc)\n", mode);
	return 2;
}
