/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fallback: a host ring all-reduce over TCP among the group's members
 * (reduce-scatter then all-gather, N-1 steps each). Partials travel in the
 * accumulator format (fp32 for fp16/bf16), so rounding happens once, as in
 * the switch. Every message carries the collective's sequence number and
 * step; a mismatch is a protocol error, never a wrong result.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hl_priv.h"

#define RING_MAGIC 0x494e4352u   /* "INCR" */

struct ring_hello {
	uint32_t magic, rank, size, group;
};

struct ring_hdr {
	uint32_t magic, seq, step;
	uint64_t len;
};

void hl_ring_close(struct inca_comm *c)
{
	int *fds[] = { &c->ring_listen_fd, &c->ring_next_fd, &c->ring_prev_fd };

	for (int i = 0; i < 3; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

static int ms_left(struct inca_comm *c, double deadline_us)
{
	double left = (deadline_us - c->now_us(c)) / 1000;

	return left <= 0 ? 0 : left > 1000 ? 1000 : (int)left + 1;
}

static void ipstr(uint32_t ip, char *buf, size_t len)
{
	struct in_addr a = { htonl(ip) };

	inet_ntop(AF_INET, &a, buf, (socklen_t)len);
}

/* Move len bytes both ways at once (the ring's neighbours do the same,
 * so a blocking send would deadlock on large chunks). */
static int exchange(struct inca_comm *c, const void *sbuf, size_t slen, void *rbuf,
		    size_t rlen, double deadline_us)
{
	const uint8_t *s = sbuf;
	uint8_t *r = rbuf;
	size_t sent = 0, got = 0;

	while (sent < slen || got < rlen) {
		struct pollfd p[2] = {
			{ .fd = sent < slen ? c->ring_next_fd : -1, .events = POLLOUT },
			{ .fd = got < rlen ? c->ring_prev_fd : -1, .events = POLLIN },
		};
		int n = poll(p, 2, ms_left(c, deadline_us));

		if (n < 0 && errno != EINTR)
			return hl_fail(c, INCA_ERR_PEER, "ring: poll: %s", strerror(errno));
		if (n == 0 && c->now_us(c) >= deadline_us)
			return hl_fail(c, INCA_ERR_TIMEOUT, "ring: deadline passed waiting for "
				       "ranks %d/%d (%zu of %zu bytes sent, %zu of %zu received)",
				       (c->rank + c->size - 1) % c->size, (c->rank + 1) % c->size,
				       sent, slen, got, rlen);
		if (p[0].revents & (POLLOUT | POLLERR | POLLHUP)) {
			ssize_t k = send(c->ring_next_fd, s + sent, slen - sent,
					 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (k < 0 && errno != EAGAIN && errno != EINTR)
				return hl_fail(c, INCA_ERR_PEER, "ring: send to rank %d: %s",
					       (c->rank + 1) % c->size, strerror(errno));
			if (k > 0) {
				sent += (size_t)k;
				c->stats.ring_bytes_sent += (uint64_t)k;
			}
		}
		if (p[1].revents & (POLLIN | POLLERR | POLLHUP)) {
			ssize_t k = recv(c->ring_prev_fd, r + got, rlen - got, MSG_DONTWAIT);
			if (k == 0)
				return hl_fail(c, INCA_ERR_PEER, "ring: rank %d closed the connection",
					       (c->rank + c->size - 1) % c->size);
			if (k < 0 && errno != EAGAIN && errno != EINTR)
				return hl_fail(c, INCA_ERR_PEER, "ring: receive from rank %d: %s",
					       (c->rank + c->size - 1) % c->size, strerror(errno));
			if (k > 0)
				got += (size_t)k;
		}
	}
	return 0;
}

/* Listen for the previous rank, connect to the next, until the deadline. */
static int ring_connect(struct inca_comm *c, double deadline_us)
{
	int next = (c->rank + 1) % c->size, prev = (c->rank + c->size - 1) % c->size;
	const struct hl_member *me = &c->g.members[c->rank], *nx = &c->g.members[next];
	/* the ring may run on another network than the switch's (ring_ip) */
	uint32_t my_ring_ip = me->ring_ip ? me->ring_ip : c->my_ip;
	uint32_t nx_ring_ip = nx->ring_ip ? nx->ring_ip : nx->ip;
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_port = htons(me->ring_port),
				  .sin_addr.s_addr = htonl(my_ring_ip) };
	struct sockaddr_in na = { .sin_family = AF_INET, .sin_port = htons(nx->ring_port),
				  .sin_addr.s_addr = htonl(nx_ring_ip) };
	struct ring_hello hello = { RING_MAGIC, (uint32_t)c->rank, (uint32_t)c->size,
				    c->g.group_id }, theirs;
	char ip[INET_ADDRSTRLEN];
	int one = 1, fd, rc;
	bool connected = false;

	if (c->ring_listen_fd < 0) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return hl_fail(c, INCA_ERR_PEER, "ring: socket: %s", strerror(errno));
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&la, sizeof(la)) || listen(fd, 4)) {
			int e = errno;
			close(fd);
			ipstr(my_ring_ip, ip, sizeof(ip));
			return hl_fail(c, INCA_ERR_PEER, "ring: listen on %s:%u: %s", ip,
				       me->ring_port, strerror(e));
		}
		c->ring_listen_fd = fd;
	}
	ipstr(nx_ring_ip, ip, sizeof(ip));
	while (c->ring_next_fd < 0 || c->ring_prev_fd < 0) {
		if (c->now_us(c) >= deadline_us)
			return hl_fail(c, INCA_ERR_PEER, "ring: deadline passed connecting "
				       "(next rank %d at %s:%u %s, previous rank %d %s)", next,
				       ip, nx->ring_port, c->ring_next_fd >= 0 ? "connected" :
				       "unreachable", prev, c->ring_prev_fd >= 0 ? "connected" :
				       "not seen");
		if (c->ring_next_fd < 0) {
			fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			struct timeval tv = { 0, 200000 };
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			if (fd >= 0 && connect(fd, (struct sockaddr *)&na, sizeof(na)) == 0 &&
			    send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) == sizeof(hello)) {
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
				c->ring_next_fd = fd;
				connected = true;
			} else if (fd >= 0) {
				close(fd);
			}
		}
		if (c->ring_prev_fd < 0) {
			struct pollfd p = { .fd = c->ring_listen_fd, .events = POLLIN };
			if (poll(&p, 1, connected ? ms_left(c, deadline_us) : 100) > 0) {
				fd = accept4(c->ring_listen_fd, NULL, NULL, SOCK_CLOEXEC);
				if (fd < 0)
					continue;
				struct timeval tv = { 2, 0 };
				setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
				rc = (int)recv(fd, &theirs, sizeof(theirs), MSG_WAITALL);
				if (rc != sizeof(theirs) || theirs.magic != RING_MAGIC ||
				    theirs.rank != (uint32_t)prev || theirs.size != (uint32_t)c->size ||
				    theirs.group != c->g.group_id) {
					HL_WARN("rank %d: ring: refused a connection that is not "
						"rank %d of group %u", c->rank, prev, c->g.group_id);
					close(fd);
					continue;
				}
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
				c->ring_prev_fd = fd;
			}
		}
	}
	return 0;
}

/* The accumulator format's dtype: what partials are reduced as. */
static enum agg_dtype acc_dtype(enum agg_dtype d)
{
	return d == AGG_DTYPE_FP16 || d == AGG_DTYPE_BF16 ? AGG_DTYPE_FP32 : d;
}

static int step(struct inca_comm *c, uint32_t seq, uint32_t stepno, const void *sbuf,
		size_t slen, void *rbuf, size_t rlen, double deadline_us)
{
	struct ring_hdr sh = { RING_MAGIC, seq, stepno, slen }, rh;
	int rc = exchange(c, &sh, sizeof(sh), &rh, sizeof(rh), deadline_us);

	if (rc)
		return rc;
	if (rh.magic != RING_MAGIC || rh.seq != seq || rh.step != stepno || rh.len != rlen)
		return hl_fail(c, INCA_ERR_PROTOCOL, "ring: rank %d is at collective %u step "
			       "%u (%llu bytes), this rank at %u step %u (%zu bytes): the "
			       "ranks disagree on which collective fell back",
			       (c->rank + c->size - 1) % c->size, rh.seq, rh.step,
			       (unsigned long long)rh.len, seq, stepno, rlen);
	return exchange(c, sbuf, slen, rbuf, rlen, deadline_us);
}

int hl_ring_allreduce(struct inca_comm *c, const void *in, void *out, size_t count,
		      enum agg_dtype dtype, enum agg_op op, double deadline_us)
{
	enum agg_dtype ad = acc_dtype(dtype);
	size_t as = agg_dtype_acc_size(dtype), n = (size_t)c->size;
	uint32_t seq = c->next_seq - 1;      /* this collective's number */
	uint8_t *acc, *tmp;
	int rc;

	if (c->size == 1) {
		memmove(out, in, count * agg_dtype_size(dtype));
		return 0;
	}
	rc = ring_connect(c, deadline_us);
	if (rc) {
		hl_ring_close(c);
		return rc;
	}
	acc = malloc(count * as);
	tmp = malloc((count / n + 1) * as);
	if (!acc || !tmp) {
		free(acc);
		free(tmp);
		return hl_fail(c, INCA_ERR_NOMEM, "ring: out of memory");
	}
	agg_acc_load(dtype, acc, in, count);
#define CHUNK_LO(k) ((count * (size_t)(k)) / n)
#define CHUNK_LEN(k) (CHUNK_LO((k) + 1) - CHUNK_LO(k))
	/* reduce-scatter: after N-1 steps this rank holds chunk rank+1 reduced */
	for (size_t s = 0; s + 1 < n && !rc; s++) {
		size_t sc = ((size_t)c->rank + n - s) % n, rcv = ((size_t)c->rank + n - s - 1) % n;
		rc = step(c, seq, (uint32_t)s, acc + CHUNK_LO(sc) * as, CHUNK_LEN(sc) * as, tmp,
			  CHUNK_LEN(rcv) * as, deadline_us);
		if (!rc)
			agg_acc_reduce(ad, op, acc + CHUNK_LO(rcv) * as, tmp, CHUNK_LEN(rcv));
	}
	/* all-gather the reduced chunks */
	for (size_t s = 0; s + 1 < n && !rc; s++) {
		size_t sc = ((size_t)c->rank + 1 + n - s) % n, rcv = ((size_t)c->rank + n - s) % n;
		rc = step(c, seq, (uint32_t)(n + s), acc + CHUNK_LO(sc) * as, CHUNK_LEN(sc) * as,
			  acc + CHUNK_LO(rcv) * as, CHUNK_LEN(rcv) * as, deadline_us);
	}
#undef CHUNK_LO
#undef CHUNK_LEN
	if (!rc)
		agg_acc_store(dtype, out, acc, count);
	else
		hl_ring_close(c);       /* a broken ring is rebuilt next time */
	free(acc);
	free(tmp);
	return rc;
}
