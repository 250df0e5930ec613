/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-xdp-steer: the parts of xdp_steer.sh, the exact test of the xdp
 * transport's sharing of one interface (several communicators, in several
 * processes, on one UMEM, steered by QPN): owners that count what reaches
 * each communicator, a sender of well-formed RoCEv2 frames on the peer's
 * end of the link, and the duplicate-QPN check.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hl_priv.h"
#include "steer_util.h"

#define PROG "inca-xdp-steer"

#define QKEY 0x5eed0002u
#define SWITCH_QPN 0x100u

/* One xdp communicator owning qpn on ip (its interface), alone in its
 * group; the peer's address stands for the switch (its MAC by ARP). */
static int comm_open_mtu(uint32_t ip, uint32_t peer, uint32_t qpn, uint16_t mtu,
			 inca_comm_t **out)
{
	struct hl_member m = { .ip = ip, .qpn = qpn };
	struct hl_group_desc g = { .switch_ip = peer, .group_id = 1, .group_qpn = SWITCH_QPN,
				   .qkey = QKEY, .window = 1, .elems_per_pkt = 1,
				   .ring_port = 18515, .member_index = -1, .nmembers = 1,
				   .ib_mtu = mtu, .members = &m };
	struct inca_comm_attr attr = { .rank = 0, .size = 1, .pfc = -1 };

	return hl_comm_create(&attr, &g, &hl_xdp_ops, NULL, out);
}

static int comm_open(uint32_t ip, uint32_t peer, uint32_t qpn, inca_comm_t **out)
{
	return comm_open_mtu(ip, peer, qpn, 0, out);
}

/* own IP PEER QPNS EXPECTS READY DONE: open one communicator per QPN,
 * create READY, count until DONE exists (then drain). Exit 0 when each got
 * exactly its expected frames, all its own, and none was dropped. With
 * forked, a child first destroys its copies of the communicators: the
 * parent's must go on as they were. */
static int cmd_own(char **argv, bool forked)
{
	unsigned long qpns[MAX_COMMS], expect[MAX_COMMS];
	uint64_t got[MAX_COMMS] = { 0 }, foreign[MAX_COMMS] = { 0 };
	inca_comm_t *comms[MAX_COMMS] = { 0 };
	int n, rc = 1;
	uint32_t ip, peer;

	n = parse_list(argv[2], qpns, MAX_COMMS);
	if (parse_ip(PROG, argv[0], &ip) || parse_ip(PROG, argv[1], &peer) || n < 1 ||
	    parse_list(argv[3], expect, MAX_COMMS) != n) {
		fprintf(stderr, "inca-xdp-steer own: expected IP PEER QPN,... COUNT,... READY "
			"DONE\n");
		return 2;
	}
	for (int i = 0; i < n; i++)
		if (comm_open(ip, peer, (uint32_t)qpns[i], &comms[i])) {
			fprintf(stderr, "inca-xdp-steer: QPN %lu: %s\n", qpns[i],
				inca_last_errmsg());
			goto close_comms;
		}
	if (forked) {
		int st;
		pid_t child = fork();

		if (child == 0) {
			for (int i = 0; i < n; i++)
				inca_comm_destroy(comms[i]);
			_exit(0);
		}
		if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			fprintf(stderr, "inca-xdp-steer: the forked child failed\n");
			goto close_comms;
		}
		printf("a forked child destroyed its copies\n");
		fflush(stdout);
	}
	rc = steer_count(PROG, comms, qpns, n, argv[4], argv[5], got, foreign);
	for (int i = 0; i < n; i++) {
		printf("qpn %lu: %llu frames (want %lu), %llu foreign, %llu dropped\n", qpns[i],
		       (unsigned long long)got[i], expect[i], (unsigned long long)foreign[i],
		       (unsigned long long)comms[i]->stats.rx_dropped);
		if (got[i] != expect[i] || foreign[i] || comms[i]->stats.rx_dropped)
			rc = 1;
	}
close_comms:
	for (int i = 0; i < n; i++)
		inca_comm_destroy(comms[i]);
	return rc;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned m[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)m[i];
	return 0;
}

/* send IFNAME SRC_MAC SRC_IP DST_MAC DST_IP QPN COUNT: COUNT well-formed
 * results for QPN (marked with it in the group id field), whole frames on
 * IFNAME through a packet socket. */
static int cmd_send(char **argv)
{
	struct agg_frame_spec spec = {
		.src_qp = SWITCH_QPN, .qkey = QKEY,
		.hdr = { .version = AGG_VERSION, .type = AGG_TYPE_RESULT,
			 .dtype = AGG_DTYPE_FP32, .op = AGG_OP_SUM, .count = 1,
			 .fanin = 1, .coll_seq = 1 },
	};
	unsigned long qpn, count;
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_halen = 6 };
	uint8_t frame[AGG_MAX_FRAME_LEN];
	int fd, len, rc = 0;

	if (parse_mac(argv[1], spec.src_mac) || parse_ip(PROG, argv[2], &spec.src_ip) ||
	    parse_mac(argv[3], spec.dst_mac) || parse_ip(PROG, argv[4], &spec.dst_ip) ||
	    parse_list(argv[5], &qpn, 1) != 1 || parse_list(argv[6], &count, 1) != 1 ||
	    !(to.sll_ifindex = (int)if_nametoindex(argv[0]))) {
		fprintf(stderr, "inca-xdp-steer send: expected IFNAME SRC_MAC SRC_IP DST_MAC "
			"DST_IP QPN COUNT\n");
		return 2;
	}
	memcpy(to.sll_addr, spec.dst_mac, 6);
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	for (unsigned long i = 0; i < count && !rc; i++) {
		float one = 1.0f;

		spec.dest_qp = (uint32_t)qpn;
		spec.psn = (uint32_t)i;
		spec.hdr.group_id = (uint32_t)qpn;
		spec.hdr.pkt_idx = (uint32_t)i;
		len = agg_encode(frame, sizeof(frame), &spec, &one);
		if (len < 0) {
			fprintf(stderr, "inca-xdp-steer: agg_encode: %d\n", len);
			rc = 1;
		} else if (sendto(fd, frame, (size_t)len, 0, (struct sockaddr *)&to,
				  sizeof(to)) != len) {
			perror("sendto");
			rc = 1;
		}
		/* a pause now and then: the receivers' rings never fill */
		if (i % 32 == 31)
			usleep(2000);
	}
	close(fd);
	return rc;
}

/* dup IP PEER QPN: opening QPN must fail because a live owner has it. */
static int cmd_dup(char **argv)
{
	unsigned long qpn;
	inca_comm_t *c = NULL;
	uint32_t ip, peer;

	if (parse_ip(PROG, argv[0], &ip) || parse_ip(PROG, argv[1], &peer) ||
	    parse_list(argv[2], &qpn, 1) != 1)
		return 2;
	if (!comm_open(ip, peer, (uint32_t)qpn, &c)) {
		printf("QPN %lu opened a second time\n", qpn);
		inca_comm_destroy(c);
		return 1;
	}
	printf("%s\n", inca_last_errmsg());
	return strstr(inca_last_errmsg(), "is already owned by another communicator") ? 0 : 1;
}

/* idle IP PEER QPN READY DONE: own QPN but never receive, until DONE. */
static int cmd_idle(char **argv)
{
	unsigned long qpn;
	inca_comm_t *c = NULL;
	uint32_t ip, peer;
	double start = now_us();
	FILE *f;

	if (parse_ip(PROG, argv[0], &ip) || parse_ip(PROG, argv[1], &peer) ||
	    parse_list(argv[2], &qpn, 1) != 1)
		return 2;
	if (comm_open(ip, peer, (uint32_t)qpn, &c)) {
		fprintf(stderr, "inca-xdp-steer: QPN %lu: %s\n", qpn, inca_last_errmsg());
		return 1;
	}
	f = fopen(argv[3], "w");
	if (f)
		fclose(f);
	while (access(argv[4], F_OK) && now_us() - start < LIMIT_US)
		usleep(10000);
	inca_comm_destroy(c);
	return 0;
}

/* tx IP PEER QPN COUNT: send COUNT frames to PEER's QPN through the
 * transport (many more than the group's TX frames), then receive for a
 * while without sending: every frame must be accepted within 10 s, and the
 * kernel given them all (the caller counts them on the peer). A frame
 * longer than a UMEM frame comes first: it is refused, never copied. */
static int cmd_tx(char **argv)
{
	struct agg_frame_spec spec = {
		.src_qp = SWITCH_QPN, .qkey = QKEY,
		.hdr = { .version = AGG_VERSION, .type = AGG_TYPE_CONTRIB,
			 .dtype = AGG_DTYPE_FP32, .op = AGG_OP_SUM, .count = 1,
			 .fanin = 1, .coll_seq = 1 },
	};
	static uint8_t frames[64][256], big[8192];
	struct hl_frame f[64];
	unsigned long qpn, count, sent = 0;
	inca_comm_t *c = NULL;
	uint32_t ip, peer;
	double start;
	int len;

	if (parse_ip(PROG, argv[0], &ip) || parse_ip(PROG, argv[1], &peer) ||
	    parse_list(argv[2], &qpn, 1) != 1 || parse_list(argv[3], &count, 1) != 1)
		return 2;
	if (comm_open(ip, peer, 60, &c)) {
		fprintf(stderr, "inca-xdp-steer: %s\n", inca_last_errmsg());
		return 1;
	}
	spec.src_ip = ip;
	spec.dst_ip = peer;
	spec.dest_qp = (uint32_t)qpn;
	for (int i = 0; i < 64; i++) {
		float one = 1.0f;

		spec.psn = (uint32_t)i;
		len = agg_encode(frames[i], sizeof(frames[i]), &spec, &one);
		if (len < 0) {
			fprintf(stderr, "inca-xdp-steer: agg_encode: %d\n", len);
			inca_comm_destroy(c);
			return 1;
		}
		f[i] = (struct hl_frame){ .data = frames[i], .len = (uint16_t)len };
	}
	f[0] = (struct hl_frame){ .data = big, .len = sizeof(big) - 48 };
	start = now_us();
	while (sent < count + 1 && now_us() - start < 10e6) {
		unsigned want = count + 1 - sent > 64 ? 64 : (unsigned)(count + 1 - sent);
		int k = c->tp->send(c, sent ? f + 1 : f, sent ? (want < 63 ? want : 63) : want);

		if (k < 0) {
			fprintf(stderr, "inca-xdp-steer: send: %s\n", inca_comm_errmsg(c));
			break;
		}
		sent += (unsigned long)k;
	}
	/* only receiving now: what is still queued goes out too */
	for (int i = 0; i < 20; i++) {
		struct hl_rx rx[64];

		c->tp->recv(c, rx, 64, 10000);
	}
	printf("%lu of %lu frames accepted in %.0f ms (the first, of %zu bytes, refused)\n",
	       sent ? sent - 1 : 0, count, (now_us() - start) / 1e3, sizeof(big) - 48);
	inca_comm_destroy(c);
	return sent == count + 1 ? 0 : 1;
}

/* mtu IP PEER MTU: opening with that IB MTU must be refused, saying why. */
static int cmd_mtu(char **argv)
{
	unsigned long mtu;
	inca_comm_t *c = NULL;
	uint32_t ip, peer;
	int rc;

	if (parse_ip(PROG, argv[0], &ip) || parse_ip(PROG, argv[1], &peer) ||
	    parse_list(argv[2], &mtu, 1) != 1)
		return 2;
	rc = comm_open_mtu(ip, peer, 70, (uint16_t)mtu, &c);
	if (!rc) {
		printf("mtu %lu was accepted\n", mtu);
		inca_comm_destroy(c);
		return 1;
	}
	printf("%s (%d)\n", inca_last_errmsg(), rc);
	return rc == INCA_ERR_CONFIG ? 0 : 1;
}

/* reopen IP PEER QPN N: build the group, close it, N times in a row. */
static int cmd_reopen(char **argv)
{
	unsigned long qpn, n;
	uint32_t ip, peer;

	if (parse_ip(PROG, argv[0], &ip) || parse_ip(PROG, argv[1], &peer) ||
	    parse_list(argv[2], &qpn, 1) != 1 || parse_list(argv[3], &n, 1) != 1)
		return 2;
	for (unsigned long i = 0; i < n; i++) {
		inca_comm_t *c = NULL;

		if (comm_open(ip, peer, (uint32_t)qpn, &c)) {
			printf("open %lu of %lu: %s\n", i + 1, n, inca_last_errmsg());
			return 1;
		}
		inca_comm_destroy(c);
	}
	return 0;
}

/* open IP PEER QPN: open and close one communicator, printing the error. */
static int cmd_open(char **argv)
{
	unsigned long qpn;
	inca_comm_t *c = NULL;
	uint32_t ip, peer;

	if (parse_ip(PROG, argv[0], &ip) || parse_ip(PROG, argv[1], &peer) ||
	    parse_list(argv[2], &qpn, 1) != 1)
		return 2;
	if (comm_open(ip, peer, (uint32_t)qpn, &c)) {
		printf("%s\n", inca_last_errmsg());
		return 1;
	}
	inca_comm_destroy(c);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct { const char *name; int nargs; } cmds[] = {
		{ "own", 6 }, { "send", 7 }, { "dup", 3 }, { "open", 3 }, { "ownfork", 6 },
		{ "idle", 5 }, { "tx", 4 }, { "mtu", 3 }, { "reopen", 4 },
	};

	for (size_t i = 0; argc >= 2 && i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name))
			continue;
		if (argc - 2 != cmds[i].nargs)
			break;
		switch (i) {
		case 0: return cmd_own(argv + 2, false);
		case 1: return cmd_send(argv + 2);
		case 2: return cmd_dup(argv + 2);
		case 3: return cmd_open(argv + 2);
		case 4: return cmd_own(argv + 2, true);
		case 5: return cmd_idle(argv + 2);
		case 6: return cmd_tx(argv + 2);
		case 7: return cmd_mtu(argv + 2);
		default: return cmd_reopen(argv + 2);
		}
	}
	fprintf(stderr, "Usage: inca-xdp-steer own IP PEER QPN,... COUNT,... READY DONE\n"
		"       inca-xdp-steer send IFNAME SRC_MAC SRC_IP DST_MAC DST_IP QPN COUNT\n"
		"       inca-xdp-steer ownfork (as own; a forked child destroys its copies)\n"
		"       inca-xdp-steer idle IP PEER QPN READY DONE\n"
		"       inca-xdp-steer tx IP PEER QPN COUNT | mtu IP PEER MTU\n"
		"       inca-xdp-steer reopen IP PEER QPN N\n"
		"       inca-xdp-steer dup IP PEER QPN | open IP PEER QPN\n");
	return 2;
}
