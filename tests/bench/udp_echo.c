/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The latency floor beside INCA's 8-byte all-reduce: 8-byte UDP datagrams
 * echoed through the same switch, timed round trip by round trip with the
 * same clock and the same kernel socket path libinca's udp transport uses
 * (a blocking wait, no busy polling).
 * Usage: udp-echo -s [-p PORT]                   serve until killed
 *        udp-echo -c HOST [-p PORT] [-n N]       N round trips (after 10
 *                                                warm-up); prints min,
 *                                                median and p99 in µs
 * Exit status 1 if an echo is lost (no answer within 1 s) or wrong.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int serve(int fd)
{
	uint8_t buf[64];
	struct sockaddr_in from;

	for (;;) {
		socklen_t len = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len);
		if (n < 0 && errno != EINTR) {
			perror("udp-echo: recvfrom");
			return 1;
		}
		if (n > 0)
			sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, len);
	}
}

static int client(int fd, const char *host, int port, int n)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tmo = { 1, 0 };
	double *rtt = malloc(sizeof(double) * (size_t)n);

	if (!rtt || inet_pton(AF_INET, host, &to.sin_addr) != 1) {
		fprintf(stderr, "udp-echo: -c wants an IPv4 address, got '%s'\n", host);
		return 2;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo));
	for (int i = -10; i < n; i++) {
		uint64_t seq = (uint64_t)(i + 10), got = 0;
		double t0 = now_us();
		errno = 0;
		if (sendto(fd, &seq, sizeof(seq), 0, (struct sockaddr *)&to, sizeof(to)) < 0 ||
		    recv(fd, &got, sizeof(got), 0) != (ssize_t)sizeof(got) || got != seq) {
			fprintf(stderr, "udp-echo: round trip %d to %s:%d: %s\n", i + 10, host, port,
				got != seq && errno == 0 ? "wrong answer" : strerror(errno));
			free(rtt);
			return 1;
		}
		if (i >= 0)
			rtt[i] = now_us() - t0;
	}
	qsort(rtt, (size_t)n, sizeof(double), cmp_double);
	printf("udp-echo: 8 B to %s:%d, %d round trips: min %.1f us, median %.1f us, "
	       "p99 %.1f us\n", host, port, n, rtt[0], rtt[n / 2], rtt[(n * 99) / 100]);
	free(rtt);
	return 0;
}

int main(int argc, char **argv)
{
	const char *host = NULL;
	int port = 7007, n = 1000, srv = 0, opt, fd;
	struct sockaddr_in me = { .sin_family = AF_INET };

	while ((opt = getopt(argc, argv, "sc:p:n:h")) != -1) {
		switch (opt) {
		case 's': srv = 1; break;
		case 'c': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'n': n = atoi(optarg); break;
		default:
			fprintf(opt == 'h' ? stdout : stderr,
				"Usage: udp-echo -s [-p PORT] | -c HOST [-p PORT] [-n N]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (srv == !!host || port < 1 || port > 65535 || n < 1) {
		fprintf(stderr, "Usage: udp-echo -s [-p PORT] | -c HOST [-p PORT] [-n N]\n");
		return 2;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("udp-echo: socket");
		return 1;
	}
	if (srv) {
		me.sin_port = htons((uint16_t)port);
		if (bind(fd, (struct sockaddr *)&me, sizeof(me))) {
			perror("udp-echo: bind");
			return 1;
		}
		return serve(fd);
	}
	return client(fd, host, port, n);
}
