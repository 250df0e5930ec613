/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-udp-steer: the parts of udp_steer.sh, the exact test of the udp
 * transport's QPN steering (several communicators on one address): owners
 * that count what reaches each communicator, a sender of well-formed RoCEv2
 * frames, the duplicate-QPN check and the reuseport program's counters.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hl_priv.h"
#include "steer_util.h"

#define PROG "inca-udp-steer"

#define QKEY 0x5eed0001u
#define SWITCH_QPN 0x100u

/* One udp communicator owning qpn on ip, alone in its group. */
static int comm_open(uint32_t ip, uint32_t qpn, inca_comm_t **out)
{
	struct hl_member m = { .ip = ip, .qpn = qpn };
	struct hl_group_desc g = { .switch_ip = ip, .group_id = 1, .group_qpn = SWITCH_QPN,
				   .qkey = QKEY, .window = 1, .elems_per_pkt = 1,
				   .ring_port = 18515, .member_index = -1, .nmembers = 1,
				   .members = &m };
	struct inca_comm_attr attr = { .rank = 0, .size = 1, .pfc = -1 };

	return hl_comm_create(&attr, &g, &hl_udp_ops, NULL, out);
}

/* own IP QPNS EXPECTS DROPPED READY DONE: open one communicator per QPN,
 * create READY, count until DONE exists (then drain). Exit 0 when each got
 * exactly its expected frames, all its own, and the communicators dropped
 * DROPPED packets in all. */
static int cmd_own(char **argv)
{
	unsigned long qpns[MAX_COMMS], expect[MAX_COMMS], want_dropped;
	uint64_t got[MAX_COMMS] = { 0 }, foreign[MAX_COMMS] = { 0 }, dropped = 0;
	inca_comm_t *comms[MAX_COMMS] = { 0 };
	int n, rc = 1;
	uint32_t ip;

	n = parse_list(argv[1], qpns, MAX_COMMS);
	if (parse_ip(PROG, argv[0], &ip) || n < 1 || parse_list(argv[2], expect, MAX_COMMS) != n ||
	    parse_list(argv[3], &want_dropped, 1) != 1) {
		fprintf(stderr, "inca-udp-steer own: expected IP QPN,... COUNT,... DROPPED "
			"READY DONE\n");
		return 2;
	}
	for (int i = 0; i < n; i++)
		if (comm_open(ip, (uint32_t)qpns[i], &comms[i])) {
			fprintf(stderr, "inca-udp-steer: QPN %lu: %s\n", qpns[i],
				inca_last_errmsg());
			goto close_comms;
		}
	rc = steer_count(PROG, comms, qpns, n, argv[4], argv[5], got, foreign);
	for (int i = 0; i < n; i++) {
		dropped += comms[i]->stats.rx_dropped;
		printf("qpn %lu: %llu frames (want %lu), %llu foreign, %llu dropped\n", qpns[i],
		       (unsigned long long)got[i], expect[i], (unsigned long long)foreign[i],
		       (unsigned long long)comms[i]->stats.rx_dropped);
		if (got[i] != expect[i] || foreign[i])
			rc = 1;
	}
	if (dropped != want_dropped) {
		printf("dropped by the communicators: %llu, want %lu\n",
		       (unsigned long long)dropped, want_dropped);
		rc = 1;
	}
close_comms:
	for (int i = 0; i < n; i++)
		inca_comm_destroy(comms[i]);
	return rc;
}

/* send IP QPN COUNT: COUNT well-formed results for QPN (marked with it in
 * the group id field); short IP COUNT: datagrams too short for a BTH. */
static int cmd_send(char **argv, bool too_short)
{
	unsigned long qpn = 0, count;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(AGG_ROCEV2_UDP_PORT) };
	uint8_t frame[AGG_MAX_FRAME_LEN];
	uint32_t ip;
	int fd, len, rc = 0;

	if (parse_ip(PROG, argv[0], &ip) || (!too_short && parse_list(argv[1], &qpn, 1) != 1) ||
	    parse_list(argv[too_short ? 1 : 2], &count, 1) != 1) {
		fprintf(stderr, "inca-udp-steer send: expected IP QPN COUNT\n");
		return 2;
	}
	to.sin_addr.s_addr = htonl(ip);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	for (unsigned long i = 0; i < count && !rc; i++) {
		float one = 1.0f;
		struct agg_frame_spec spec = {
			.src_ip = ip, .dst_ip = ip, .dest_qp = (uint32_t)qpn, .psn = (uint32_t)i,
			.qkey = QKEY, .src_qp = SWITCH_QPN,
			.hdr = { .version = AGG_VERSION, .type = AGG_TYPE_RESULT,
				 .dtype = AGG_DTYPE_FP32, .op = AGG_OP_SUM, .count = 1,
				 .group_id = (uint32_t)qpn, .fanin = 1, .coll_seq = 1,
				 .pkt_idx = (uint32_t)i },
		};
		size_t off = agg_spec_bth_offset(&spec);

		len = too_short ? (int)off + 4 : agg_encode(frame, sizeof(frame), &spec, &one);
		if (len < 0) {
			fprintf(stderr, "inca-udp-steer: agg_encode: %d\n", len);
			rc = 1;
		} else if (sendto(fd, frame + off, (size_t)len - off, 0, (struct sockaddr *)&to,
				  sizeof(to)) != (ssize_t)((size_t)len - off)) {
			perror("sendto");
			rc = 1;
		}
		/* a pause now and then: the receivers' buffers never fill */
		if (i % 32 == 31)
			usleep(2000);
	}
	close(fd);
	return rc;
}

/* dup IP QPN: opening QPN must fail because a live owner has it. */
static int cmd_dup(char **argv)
{
	unsigned long qpn;
	inca_comm_t *c = NULL;
	uint32_t ip;

	if (parse_ip(PROG, argv[0], &ip) || parse_list(argv[1], &qpn, 1) != 1)
		return 2;
	if (!comm_open(ip, (uint32_t)qpn, &c)) {
		printf("QPN %lu opened a second time\n", qpn);
		inca_comm_destroy(c);
		return 1;
	}
	printf("%s\n", inca_last_errmsg());
	return strstr(inca_last_errmsg(), "is already owned by another communicator") ? 0 : 1;
}

/* counters IP: the reuseport program's counters (exit 1: no group; 77: no
 * eBPF in this build) */
static int cmd_counters(char **argv)
{
	uint64_t unowned, too_short;
	uint32_t ip;
	int rc;

	if (parse_ip(PROG, argv[0], &ip))
		return 2;
	rc = hl_udp_steer_dropped(ip, &unowned, &too_short);
	if (rc == INCA_ERR_UNSUPPORTED)
		return 77;
	if (rc) {
		printf("no steering group on %s\n", argv[0]);
		return 1;
	}
	printf("unowned=%llu short=%llu\n", (unsigned long long)unowned,
	       (unsigned long long)too_short);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct { const char *name; int nargs; } cmds[] = {
		{ "own", 6 }, { "send", 3 }, { "short", 2 }, { "dup", 2 }, { "counters", 1 },
	};

	for (size_t i = 0; argc >= 2 && i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name))
			continue;
		if (argc - 2 != cmds[i].nargs)
			break;
		switch (i) {
		case 0: return cmd_own(argv + 2);
		case 1: return cmd_send(argv + 2, false);
		case 2: return cmd_send(argv + 2, true);
		case 3: return cmd_dup(argv + 2);
		default: return cmd_counters(argv + 2);
		}
	}
	fprintf(stderr, "Usage: inca-udp-steer own IP QPN,... COUNT,... DROPPED READY DONE\n"
		"       inca-udp-steer send IP QPN COUNT | short IP COUNT\n"
		"       inca-udp-steer dup IP QPN | counters IP\n");
	return 2;
}
