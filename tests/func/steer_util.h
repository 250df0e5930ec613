/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by inca-udp-steer and inca-xdp-steer (the exact tests of QPN
 * steering on one address): arguments, and the owners' counting loop. */
#ifndef STEER_UTIL_H
#define STEER_UTIL_H

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "hl_priv.h"

#define MAX_COMMS 8
#define DRAIN_US 300000.0          /* after DONE: late frames still count */
#define LIMIT_US 60000000.0        /* no owner runs longer */

static inline double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* prog: the program's name, for the message */
static inline int parse_ip(const char *prog, const char *s, uint32_t *ip)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1) {
		fprintf(stderr, "%s: '%s' is not an IPv4 address\n", prog, s);
		return -1;
	}
	*ip = ntohl(a.s_addr);
	return 0;
}

/* comma-separated unsigned numbers */
static inline int parse_list(const char *s, unsigned long *out, int max)
{
	char *end;
	int n = 0;

	while (n < max) {
		out[n++] = strtoul(s, &end, 0);
		if (end == s || (*end && *end != ','))
			return -1;
		if (!*end)
			return n;
		s = end + 1;
	}
	return -1;
}

/* Create READY, then receive on the n communicators until the file DONE
 * exists (and DRAIN_US after), counting per communicator the frames that
 * are its own (a result whose group id is its QPN) and the others.
 * Returns 0, or 1 (DONE never came, or a receive failed: said on stderr). */
static inline int steer_count(const char *prog, inca_comm_t **comms, const unsigned long *qpns,
			      int n, const char *ready, const char *done, uint64_t *got,
			      uint64_t *foreign)
{
	double start = now_us(), done_at = 0;
	FILE *f = fopen(ready, "w");

	if (!f) {
		perror(ready);
		return 1;
	}
	fclose(f);
	while (now_us() - start < LIMIT_US) {
		if (!done_at && access(done, F_OK) == 0)
			done_at = now_us();
		if (done_at && now_us() - done_at > DRAIN_US)
			return 0;
		for (int i = 0; i < n; i++) {
			struct hl_rx rx[64];
			int k = comms[i]->tp->recv(comms[i], rx, 64, 2000);

			if (k < 0) {
				fprintf(stderr, "%s: recv: %s\n", prog, inca_comm_errmsg(comms[i]));
				return 1;
			}
			for (int j = 0; j < k; j++) {
				struct agg_hdr h;
				const uint8_t *payload;

				if (!agg_decode_msg(rx[j].msg, rx[j].len, &h, &payload) &&
				    h.group_id == qpns[i])
					got[i]++;
				else
					foreign[i]++;
			}
		}
	}
	fprintf(stderr, "%s: %s did not appear in %.0f s\n", prog, done, LIMIT_US / 1e6);
	return 1;
}

#endif
