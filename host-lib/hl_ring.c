/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fallback: the collectives over a TCP ring among the group's members.
 * All-reduce is reduce-scatter then all-gather (N-1 steps each); reduce is
 * an all-reduce kept at the root; reduce-scatter is the first half with
 * the shards where they belong; allgather the second half; bcast a
 * pipeline of chunks from the root round the ring. Partials travel in the
 * accumulator format (fp32 for fp16/bf16), so rounding happens once, as in
 * the switch; allgather and bcast only move bytes (bit-exact, -0.0 and NaN
 * payloads kept). Every message carries the collective's sequence number,
 * kind and step; a mismatch is a protocol error, never a wrong result.
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
/* bcast moves this much per step: relays forward one chunk while they
 * receive the next */
#define RING_BCAST_CHUNK (256 * 1024)
/* a message's step names the collective too */
#define RING_STEP(coll, n) ((uint32_t)(coll) << 24 | (uint32_t)(n))
/* ... or the agreement at a static group's fallback (hl_ring_agree) */
#define RING_AGREE 0xa9u

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

int hl_ring_listen(struct inca_comm *c)
{
	const struct hl_member *me = &c->g.members[c->rank];
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_port = htons(me->ring_port),
				  .sin_addr.s_addr = htonl(me->ring_ip ? me->ring_ip : c->my_ip) };
	int one = 1, fd, e;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&la, sizeof(la)) || listen(fd, 4)) {
		e = errno;
		close(fd);
		return e;
	}
	c->ring_listen_fd = fd;
	return 0;
}

bool hl_ring_peer_waiting(struct inca_comm *c)
{
	struct pollfd p = { .fd = c->ring_listen_fd, .events = POLLIN };

	return c->ring_listen_fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* A next rank that neither answers nor refuses (no route, no ARP reply,
 * connect timing out) for this long: the ring's network is down, not the
 * rank late. Without it a ring through the failed switch (no INCA_RING_IP
 * on another network) held the call to its deadline (libinca-mpi: 30 s)
 * before its own recovery over MPI. Longer than a link flap's few
 * seconds. */
#define RING_UNREACHABLE_US 5e6

/* Listen for the previous rank, connect to the next, until the deadline
 * (or the next rank unreachable for RING_UNREACHABLE_US). */
static int ring_connect(struct inca_comm *c, double deadline_us)
{
	int next = (c->rank + 1) % c->size, prev = (c->rank + c->size - 1) % c->size;
	const struct hl_member *me = &c->g.members[c->rank], *nx = &c->g.members[next];
	/* the ring may run on another network than the switch's (ring_ip) */
	uint32_t my_ring_ip = me->ring_ip ? me->ring_ip : c->my_ip;
	uint32_t nx_ring_ip = nx->ring_ip ? nx->ring_ip : nx->ip;
	struct sockaddr_in na = { .sin_family = AF_INET, .sin_port = htons(nx->ring_port),
				  .sin_addr.s_addr = htonl(nx_ring_ip) };
	struct ring_hello hello = { RING_MAGIC, (uint32_t)c->rank, (uint32_t)c->size,
				    c->ring_id }, theirs;
	char ip[INET_ADDRSTRLEN];
	int one = 1, fd, rc;
	bool connected = false;
	double unreachable_since = 0;

	if (c->ring_listen_fd < 0 && (rc = hl_ring_listen(c))) {
		ipstr(my_ring_ip, ip, sizeof(ip));
		return hl_fail(c, INCA_ERR_PEER, "ring: listen on %s:%u: %s", ip, me->ring_port,
			       strerror(rc));
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
			} else {
				int e = errno;
				double now = c->now_us(c);
				if (fd >= 0)
					close(fd);
				if (e == ECONNREFUSED)
					unreachable_since = 0;      /* there, not listening yet */
				else if (!unreachable_since)
					unreachable_since = now;
				else if (now - unreachable_since > RING_UNREACHABLE_US)
					return hl_fail(c, INCA_ERR_PEER, "ring: next rank %d at %s:%u "
						       "unreachable for %.0f s (%s): the ring's network "
						       "is down (INCA_RING_IP: one that does not go "
						       "through the switch)", next, ip, nx->ring_port,
						       RING_UNREACHABLE_US / 1e6, strerror(e));
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
				    theirs.group != c->ring_id) {
					HL_WARN("rank %d: ring: refused a connection that is not "
						"rank %d of group %u", c->rank, prev, c->ring_id);
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

/* One message each way: to the next rank (step sstep, slen bytes) if send,
 * from the previous one (step rstep, rlen bytes) if recv; headers first. */
static int xfer(struct inca_comm *c, uint32_t seq, bool send, uint32_t sstep, const void *sbuf,
		size_t slen, bool recv, uint32_t rstep, void *rbuf, size_t rlen, double deadline_us)
{
	struct ring_hdr sh = { RING_MAGIC, seq, sstep, slen }, rh = { 0 };
	int rc = exchange(c, &sh, send ? sizeof(sh) : 0, &rh, recv ? sizeof(rh) : 0, deadline_us);

	if (rc)
		return rc;
	if (recv && (rh.magic != RING_MAGIC || rh.seq != seq || rh.step != rstep || rh.len != rlen))
		return hl_fail(c, INCA_ERR_PROTOCOL, "ring: rank %d is at collective %u step "
			       "%u:%u (%llu bytes), this rank at %u step %u:%u (%zu bytes): the "
			       "ranks disagree on which collective fell back",
			       (c->rank + c->size - 1) % c->size, rh.seq, rh.step >> 24,
			       rh.step & 0xffffff, (unsigned long long)rh.len, seq, rstep >> 24,
			       rstep & 0xffffff, rlen);
	return exchange(c, sbuf, send ? slen : 0, rbuf, recv ? rlen : 0, deadline_us);
}

static int step(struct inca_comm *c, uint32_t seq, uint32_t stepno, const void *sbuf,
		size_t slen, void *rbuf, size_t rlen, double deadline_us)
{
	return xfer(c, seq, true, stepno, sbuf, slen, true, stepno, rbuf, rlen, deadline_us);
}

static int ring_open(struct inca_comm *c, double deadline_us)
{
	int rc = ring_connect(c, deadline_us);

	if (rc)
		hl_ring_close(c);
	return rc;
}

int hl_ring_agree(struct inca_comm *c, uint32_t *first, uint32_t *keep, double deadline_us)
{
	int rc = c->size > 1 ? ring_open(c, deadline_us) : 0;

	/* after step s a rank has the positions of the s + 2 ranks up to
	 * itself: after N - 1 steps, everyone's */
	for (int s = 0; s + 1 < c->size && !rc; s++) {
		uint32_t mine[2] = { *first, *keep }, got[2];

		rc = step(c, 0, RING_STEP(RING_AGREE, s), mine, sizeof(mine), got, sizeof(got),
			  deadline_us);
		if (rc)
			break;
		if (hl_seq_diff(got[0], *first) < 0)
			*first = got[0];
		if (hl_seq_diff(got[1], *keep) > 0)
			*keep = got[1];
	}
	if (rc)
		hl_ring_close(c);
	return rc;
}

static int ring_allreduce(struct inca_comm *c, enum agg_coll coll, uint32_t seq, const void *in,
			  void *out, size_t count, enum agg_dtype dtype, enum agg_op op,
			  double deadline_us)
{
	enum agg_dtype ad = acc_dtype(dtype);
	size_t as = agg_dtype_acc_size(dtype), n = (size_t)c->size;
	uint8_t *acc, *tmp;
	int rc;

	if (c->size == 1) {
		memmove(out, in, count * agg_dtype_size(dtype));
		return 0;
	}
	rc = ring_open(c, deadline_us);
	if (rc)
		return rc;
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
		rc = step(c, seq, RING_STEP(coll, s), acc + CHUNK_LO(sc) * as, CHUNK_LEN(sc) * as,
			  tmp, CHUNK_LEN(rcv) * as, deadline_us);
		if (!rc)
			agg_acc_reduce(ad, op, acc + CHUNK_LO(rcv) * as, tmp, CHUNK_LEN(rcv));
	}
	/* all-gather the reduced chunks */
	for (size_t s = 0; s + 1 < n && !rc; s++) {
		size_t sc = ((size_t)c->rank + 1 + n - s) % n, rcv = ((size_t)c->rank + n - s) % n;
		rc = step(c, seq, RING_STEP(coll, n + s), acc + CHUNK_LO(sc) * as,
			  CHUNK_LEN(sc) * as, acc + CHUNK_LO(rcv) * as, CHUNK_LEN(rcv) * as,
			  deadline_us);
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

int hl_ring_allreduce(struct inca_comm *c, uint32_t seq, const void *in, void *out,
		      size_t count, enum agg_dtype dtype, enum agg_op op, double deadline_us)
{
	return ring_allreduce(c, AGG_COLL_ALLREDUCE, seq, in, out, count, dtype, op,
			      deadline_us);
}

int hl_ring_reduce(struct inca_comm *c, uint32_t seq, const void *in, void *out, size_t count,
		   enum agg_dtype dtype, enum agg_op op, int root, double deadline_us)
{
	void *tmp = NULL;
	int rc;

	if (c->rank != root) {
		tmp = malloc(count * agg_dtype_size(dtype));
		if (!tmp)
			return hl_fail(c, INCA_ERR_NOMEM, "ring: out of memory");
		out = tmp;
	}
	rc = ring_allreduce(c, AGG_COLL_REDUCE, seq, in, out, count, dtype, op, deadline_us);
	free(tmp);
	return rc;
}

int hl_ring_reduce_scatter(struct inca_comm *c, uint32_t seq, const void *in, void *out,
			   size_t count, enum agg_dtype dtype, enum agg_op op, double deadline_us)
{
	enum agg_dtype ad = acc_dtype(dtype);
	size_t as = agg_dtype_acc_size(dtype), n = (size_t)c->size, r = (size_t)c->rank;
	size_t shard = count * as;
	uint8_t *acc, *tmp;
	int rc;

	if (c->size == 1) {
		memmove(out, in, count * agg_dtype_size(dtype));
		return 0;
	}
	rc = ring_open(c, deadline_us);
	if (rc)
		return rc;
	acc = malloc(n * shard);
	tmp = malloc(shard);
	if (!acc || !tmp) {
		free(acc);
		free(tmp);
		return hl_fail(c, INCA_ERR_NOMEM, "ring: out of memory");
	}
	agg_acc_load(dtype, acc, in, n * count);
	/* step s: shard r-s-1 goes on (ours, then what came and was reduced),
	 * shard r-s-2 comes: after N-1 steps, shard r holds every rank's */
	for (size_t s = 0; s + 1 < n && !rc; s++) {
		size_t sc = (r + 2 * n - s - 1) % n, rcv = (r + 2 * n - s - 2) % n;
		rc = step(c, seq, RING_STEP(AGG_COLL_REDUCE_SCATTER, s), acc + sc * shard, shard,
			  tmp, shard, deadline_us);
		if (!rc)
			agg_acc_reduce(ad, op, acc + rcv * shard, tmp, count);
	}
	if (!rc)
		agg_acc_store(dtype, out, acc + r * shard, count);
	else
		hl_ring_close(c);
	free(acc);
	free(tmp);
	return rc;
}

int hl_ring_allgather(struct inca_comm *c, uint32_t seq, void *buf, size_t shard_bytes,
		      double deadline_us)
{
	size_t n = (size_t)c->size, r = (size_t)c->rank;
	uint8_t *b = buf;
	int rc;

	if (c->size == 1)
		return 0;
	rc = ring_open(c, deadline_us);
	/* step s: shard r-s goes on, shard r-s-1 comes */
	for (size_t s = 0; s + 1 < n && !rc; s++) {
		size_t sc = (r + n - s) % n, rcv = (r + 2 * n - s - 1) % n;
		rc = step(c, seq, RING_STEP(AGG_COLL_ALLGATHER, s), b + sc * shard_bytes,
			  shard_bytes, b + rcv * shard_bytes, shard_bytes, deadline_us);
	}
	if (rc)
		hl_ring_close(c);
	return rc;
}

int hl_ring_bcast(struct inca_comm *c, uint32_t seq, void *buf, size_t bytes, int root,
		  double deadline_us)
{
	size_t n = (size_t)c->size, d = ((size_t)c->rank + n - (size_t)root) % n;
	size_t chunks = (bytes + RING_BCAST_CHUNK - 1) / RING_BCAST_CHUNK;
	uint8_t *b = buf;
	int rc;

	if (c->size == 1)
		return 0;
	rc = ring_open(c, deadline_us);
	/* d ranks after the root: in round i the root sends chunk i, a relay
	 * receives chunk i and passes on chunk i-1, the last one only receives */
#define CHUNK_LEN(k) ((k) + 1 < chunks ? RING_BCAST_CHUNK : bytes - (k) * RING_BCAST_CHUNK)
	for (size_t i = 0; i <= chunks && !rc; i++) {
		bool recv = d > 0 && i < chunks;
		bool send = d == 0 ? i < chunks : d + 1 < n && i > 0;
		size_t sc = d == 0 || i == 0 ? i : i - 1;
		if (!send && !recv)
			continue;
		rc = xfer(c, seq, send, RING_STEP(AGG_COLL_BCAST, sc),
			  b + sc * RING_BCAST_CHUNK, send ? CHUNK_LEN(sc) : 0,
			  recv, RING_STEP(AGG_COLL_BCAST, i), b + i * RING_BCAST_CHUNK,
			  recv ? CHUNK_LEN(i) : 0, deadline_us);
	}
#undef CHUNK_LEN
	if (rc)
		hl_ring_close(c);
	return rc;
}
