/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The udp transport: the library builds RoCEv2 (BTH, DETH, INCA, ICRC) and
 * a kernel UDP socket on port 4791 carries it, batched with sendmmsg and
 * recvmmsg. The socket is unconnected with IP_PMTUDISC_DO, so Linux sends
 * IPv4 ID 0 and DF, which the ICRC was computed with (docs/protocol.md 6).
 * With CAP_NET_RAW the frames leave through an IPPROTO_RAW socket instead,
 * from the IPv4 header on exactly as built (ID 0, DF, checksum 0), so that
 * each slot can have its own UDP source port (ECMP/RSS entropy); the UDP
 * socket still receives everything (results go to port 4791).
 *
 * Many owners per address, demultiplexed by QP (DESIGN.md): every
 * communicator binds its own SO_REUSEPORT socket to ip:4791 and a reuseport
 * program (hl_udp_steer.bpf.c) gives each packet to the socket that owns
 * its BTH DestQP, or drops and counts it when no live socket does. Owners
 * in different processes share the program and its maps through bpffs, in
 * <bpffs>/inca/udp-A_B_C_D-net<netns inode>/ (bpffs: /run/inca/bpffs, which
 * `ip netns exec` keeps visible, else /sys/fs/bpf), and set them up under
 * flock(/run/inca/udp-A_B_C_D-net<netns inode>.lock); the last owner to leave
 * removes the pins. Without eBPF (not built, no bpffs, no permission) there
 * is one exclusive socket per address, as before. Either way udp_recv still
 * checks QPN and Q_Key (hl_rx_accept).
 *
 * Over 500 lines (about 580) on purpose: the sockets, the steering
 * program's pins and send/receive share struct udp_state, private to this
 * transport.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "hl_priv.h"
#include "hl_shared.h"

#ifdef INCA_HAVE_UDP_STEER
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/magic.h>

#include "hl_udp_steer.h"
#include "hl_udp_steer.skel.h"
#endif

#define RX_SLOTS 64
#define RX_BUF 4608
/* Ethernet + IPv4 + UDP around what the socket sees, for counters */
#define WIRE_EXTRA (AGG_ETH_HLEN + AGG_IPV4_HLEN + AGG_UDP_HLEN)
#define STEER_LOCK_WAIT_MS 5000

/* This communicator's place in its address's steering group. */
struct udp_steer {
	void *skel;               /* struct hl_udp_steer_bpf */
	int prog_fd;              /* the group's program */
	bool own_prog;            /* prog_fd belongs to skel */
	uint32_t qpn;
	uint64_t cookie;          /* our socket's, as the sockarray holds it */
	char dir[PATH_MAX - 64];  /* pins */
	char lock[PATH_MAX];
};

struct udp_state {
	int fd;
	int raw_fd;               /* IPPROTO_RAW for sending; -1: send on fd */
	struct sockaddr_in dst;
	struct udp_steer *steer;  /* NULL: one exclusive socket per address */
	uint8_t bufs[RX_SLOTS][RX_BUF];
};

/* bind() failed: today's messages, for both kinds of socket */
static int bind_fail(struct inca_comm *c, int e, const char *ip)
{
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

#ifdef INCA_HAVE_UDP_STEER

#define STEER_UNAVAILABLE 1      /* steer_open: use one exclusive socket */
#define HL_UDP_STEER_RUN_BPFFS "/run/inca/bpffs"

static const char *const steer_pins[] = { "prog", "socks", "qpns", "counters" };

static bool is_bpffs(const char *path)
{
	struct statfs st;

	return !statfs(path, &st) && st.f_type == BPF_FS_MAGIC;
}

/* A bpffs every owner on this host sees. `ip netns exec` mounts a fresh
 * /sys in a private mount namespace, hiding /sys/fs/bpf, so a bpffs at
 * /run/inca/bpffs comes first (mounts under /run are shared with it); then
 * /sys/fs/bpf, mounted when missing if we are in the host's namespace; then
 * the host's through /proc/1/root. */
static const char *steer_bpffs(bool may_mount)
{
	unsigned long mine;

	if (is_bpffs(HL_UDP_STEER_RUN_BPFFS))
		return HL_UDP_STEER_RUN_BPFFS;
	if (is_bpffs("/sys/fs/bpf"))
		return "/sys/fs/bpf";
	mine = hl_ns_inode("/proc/self/ns/mnt");
	if (may_mount && mine && mine == hl_ns_inode("/proc/1/ns/mnt") &&
	    !mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"))
		return "/sys/fs/bpf";
	if (is_bpffs("/proc/1/root/sys/fs/bpf"))
		return "/proc/1/root/sys/fs/bpf";
	return NULL;
}

/* Pins and lock of ip's group in this network namespace (an address is
 * only unique within one); bpffs refuses names with dots. */
static int steer_paths(uint32_t ip, bool may_mount, char *dir, size_t dirlen, char *lock,
		       size_t locklen)
{
	const char *fs = steer_bpffs(may_mount);
	unsigned long net = hl_ns_inode("/proc/self/ns/net");
	char name[64];

	if (!fs)
		return -ENOENT;
	snprintf(name, sizeof(name), "udp-%u_%u_%u_%u-net%lu", ip >> 24, (ip >> 16) & 255,
		 (ip >> 8) & 255, ip & 255, net);
	snprintf(dir, dirlen, "%s/inca/%s", fs, name);
	if (lock)
		snprintf(lock, locklen, "/run/inca/%s.lock", name);
	return 0;
}

/* Sum one per-CPU counter of the program. */
static int steer_counter(int map_fd, uint32_t which, uint64_t *sum)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v;

	if (ncpu <= 0)
		return -EINVAL;
	v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return -ENOMEM;
	*sum = 0;
	if (bpf_map_lookup_elem(map_fd, &which, v)) {
		free(v);
		return -errno;
	}
	for (int i = 0; i < ncpu; i++)
		*sum += v[i];
	free(v);
	return 0;
}

int hl_udp_steer_dropped(uint32_t ip, uint64_t *unowned, uint64_t *too_short)
{
	char dir[PATH_MAX - 64], path[PATH_MAX];
	int fd, rc;

	if (steer_paths(ip, false, dir, sizeof(dir), NULL, 0))
		return INCA_ERR_TRANSPORT;
	snprintf(path, sizeof(path), "%s/counters", dir);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return INCA_ERR_TRANSPORT;
	rc = steer_counter(fd, HL_UDP_STEER_UNOWNED, unowned) ||
	     steer_counter(fd, HL_UDP_STEER_SHORT, too_short);
	close(fd);
	return rc ? INCA_ERR_TRANSPORT : INCA_OK;
}

/* Does any socket sit in the group's sockarray? */
static bool steer_has_owner(int socks_fd)
{
	uint64_t cookie;

	for (uint32_t i = 0; i < HL_UDP_STEER_MAX_SOCKS; i++)
		if (!bpf_map_lookup_elem(socks_fd, &i, &cookie))
			return true;
	return false;
}

/* Under the lock: reuse the pinned maps and program, or load and pin them
 * (the first owner, or after a crash between pinning maps and program).
 * Returns 0 or -errno. */
static int steer_load(struct udp_steer *s)
{
	struct hl_udp_steer_bpf *skel;
	struct bpf_map *maps[3];
	char path[PATH_MAX], *slash;
	int rc;

	snprintf(path, sizeof(path), "%s", s->dir);
	slash = strrchr(path, '/');
	*slash = '\0';
	if ((mkdir(path, 0700) && errno != EEXIST) || (mkdir(s->dir, 0700) && errno != EEXIST))
		return -errno;
	skel = hl_udp_steer_bpf__open();
	if (!skel)
		return -errno;
	maps[0] = skel->maps.socks;
	maps[1] = skel->maps.qpns;
	maps[2] = skel->maps.counters;
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", s->dir, steer_pins[i + 1]);
		rc = bpf_map__set_pin_path(maps[i], path);
		if (rc)
			goto destroy_skel;
	}
	snprintf(path, sizeof(path), "%s/prog", s->dir);
	s->prog_fd = bpf_obj_get(path);
	if (s->prog_fd >= 0)
		bpf_program__set_autoload(skel->progs.inca_udp_steer, false);
	rc = hl_udp_steer_bpf__load(skel);
	if (rc)
		goto close_prog;
	if (s->prog_fd < 0) {
		s->prog_fd = bpf_program__fd(skel->progs.inca_udp_steer);
		s->own_prog = true;
		rc = bpf_program__pin(skel->progs.inca_udp_steer, path);
		if (rc)
			goto destroy_skel;
	}
	s->skel = skel;
	return 0;

close_prog:
	if (s->prog_fd >= 0 && !s->own_prog)
		close(s->prog_fd);
destroy_skel:
	s->prog_fd = -1;
	s->own_prog = false;
	hl_udp_steer_bpf__destroy(skel);
	return rc < 0 ? rc : -EINVAL;
}

/* Under the lock: bind into the group, refuse a live duplicate QPN, claim a
 * sockarray slot, publish QPN -> slot and attach the program. */
static int steer_join(struct inca_comm *c, struct udp_state *u, const struct sockaddr_in *me,
		      const char *ip)
{
	struct udp_steer *s = u->steer;
	struct hl_udp_steer_bpf *skel = s->skel;
	int socks = bpf_map__fd(skel->maps.socks), qpns = bpf_map__fd(skel->maps.qpns);
	struct hl_udp_steer_owner owner;
	uint32_t qpn = c->my_qpn, idx = 0, i;
	uint64_t live, fd64 = (uint64_t)u->fd;
	int one = 1, probe;

	/* the address is bound already: by one of the group, or by someone who
	 * would lose packets to us (an exclusive socket, another bpffs) */
	for (int tries = 0; (probe = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) >= 0; tries++) {
		bool taken = bind(probe, (const struct sockaddr *)me, sizeof(*me)) &&
			     errno == EADDRINUSE;
		close(probe);
		if (!taken || steer_has_owner(socks))
			break;
		/* once in ~50 communicators made and freed in quick succession
		 * (func mpi, short-lived communicators) the address was still
		 * bound with the sockarray already empty, cause not found: a
		 * socket on its way out gets 50 ms */
		if (tries == 25)
			return hl_fail(c, INCA_ERR_TRANSPORT, "UDP %s:4791 is in use by an "
				       "endpoint outside INCA's QPN steering group %s (an "
				       "exclusive RoCEv2 socket, or a process that sees "
				       "another bpffs)", ip, s->dir);
		usleep(2000);
	}
	if (!bpf_map_lookup_elem(qpns, &qpn, &owner) &&
	    !bpf_map_lookup_elem(socks, &owner.index, &live) && live == owner.cookie)
		return hl_fail(c, INCA_ERR_TRANSPORT, "QPN %u on %s is already owned by "
			       "another communicator", qpn, ip);
	if (setsockopt(u->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
		return hl_fail(c, INCA_ERR_TRANSPORT, "SO_REUSEPORT: %s", strerror(errno));
	if (bind(u->fd, (const struct sockaddr *)me, sizeof(*me)))
		return bind_fail(c, errno, ip);
	for (i = 0; i < HL_UDP_STEER_MAX_SOCKS; i++) {
		idx = (qpn + i) % HL_UDP_STEER_MAX_SOCKS;
		if (!bpf_map_update_elem(socks, &idx, &fd64, BPF_NOEXIST))
			break;
		if (errno != EEXIST)
			return hl_fail(c, INCA_ERR_TRANSPORT, "steering sockarray %s: %s",
				       s->dir, strerror(errno));
	}
	if (i == HL_UDP_STEER_MAX_SOCKS)
		return hl_fail(c, INCA_ERR_TRANSPORT, "%s already has %d udp communicators, "
			       "the most one address can carry", ip, HL_UDP_STEER_MAX_SOCKS);
	if (bpf_map_lookup_elem(socks, &idx, &s->cookie))
		return hl_fail(c, INCA_ERR_TRANSPORT, "steering sockarray %s: %s", s->dir,
			       strerror(errno));
	owner = (struct hl_udp_steer_owner){ .index = idx, .cookie = s->cookie };
	s->qpn = qpn;
	if (bpf_map_update_elem(qpns, &qpn, &owner, BPF_ANY))
		return hl_fail(c, INCA_ERR_TRANSPORT, "steering QPN map %s: %s", s->dir,
			       strerror(errno));
	/* one program per reuseport group: attaching it again is harmless */
	if (setsockopt(u->fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &s->prog_fd,
		       sizeof(s->prog_fd)))
		return hl_fail(c, INCA_ERR_TRANSPORT, "SO_ATTACH_REUSEPORT_EBPF: %s",
			       strerror(errno));
	HL_INFO("rank %d: udp %s:4791 shared by QPN (eBPF, %s): QPN %u is socket %u",
		c->rank, ip, s->dir, qpn, idx);
	return 0;
}

/* Join ip's steering group. 0: joined; STEER_UNAVAILABLE: no eBPF here (why
 * says what), use an exclusive socket; < 0: failed (message set). */
static int steer_open(struct inca_comm *c, struct udp_state *u, const struct sockaddr_in *me,
		      const char *ip, char *why, size_t whylen)
{
	struct udp_steer *s = calloc(1, sizeof(*s));
	int lock_fd, rc;

	if (!s)
		return hl_fail(c, INCA_ERR_NOMEM, "out of memory");
	s->prog_fd = -1;
	if (steer_paths(c->my_ip, true, s->dir, sizeof(s->dir), s->lock, sizeof(s->lock))) {
		snprintf(why, whylen, "no bpffs at %s or /sys/fs/bpf: mount one (at %s "
			 "for programs started with `ip netns exec`, which mounts its own "
			 "/sys)", HL_UDP_STEER_RUN_BPFFS, HL_UDP_STEER_RUN_BPFFS);
		free(s);
		return STEER_UNAVAILABLE;
	}
	lock_fd = hl_run_lock(s->lock, STEER_LOCK_WAIT_MS);
	if (lock_fd == -ETIMEDOUT) {
		rc = hl_fail(c, INCA_ERR_TRANSPORT, "%s: still locked by another process "
			     "after %d ms", s->lock, STEER_LOCK_WAIT_MS);
		free(s);
		return rc;
	}
	if (lock_fd < 0) {
		snprintf(why, whylen, "lock %s: %s", s->lock, strerror(-lock_fd));
		free(s);
		return STEER_UNAVAILABLE;
	}
	rc = steer_load(s);
	if (rc) {
		snprintf(why, whylen, "load the reuseport program into %s: %s", s->dir,
			 strerror(-rc));
		close(lock_fd);
		free(s);
		return STEER_UNAVAILABLE;
	}
	u->steer = s;
	rc = steer_join(c, u, me, ip);
	close(lock_fd);
	return rc;
}

/* Before our socket closes: forget our QPN (a later owner overwrites a
 * stale entry anyway). */
static void steer_unpublish(struct udp_state *u)
{
	struct udp_steer *s = u->steer;
	struct hl_udp_steer_bpf *skel = s->skel;
	struct hl_udp_steer_owner owner;
	uint64_t unowned = 0;

	if (s->cookie && !bpf_map_lookup_elem(bpf_map__fd(skel->maps.qpns), &s->qpn, &owner) &&
	    owner.cookie == s->cookie)
		bpf_map_delete_elem(bpf_map__fd(skel->maps.qpns), &s->qpn);
	if (!steer_counter(bpf_map__fd(skel->maps.counters), HL_UDP_STEER_UNOWNED, &unowned))
		HL_DEBUG("udp %s: %llu packets for QPNs no socket owned were dropped",
			 s->dir, (unsigned long long)unowned);
}

/* After our socket closed (the kernel emptied its slot): the last owner
 * removes the pins, under the lock so that no one is joining meanwhile. */
static void steer_release(struct udp_steer *s)
{
	struct hl_udp_steer_bpf *skel = s->skel;
	char path[PATH_MAX];
	int lock_fd = hl_run_lock(s->lock, STEER_LOCK_WAIT_MS);

	if (lock_fd >= 0 && !steer_has_owner(bpf_map__fd(skel->maps.socks))) {
		for (size_t i = 0; i < sizeof(steer_pins) / sizeof(steer_pins[0]); i++) {
			snprintf(path, sizeof(path), "%s/%s", s->dir, steer_pins[i]);
			unlink(path);
		}
		rmdir(s->dir);
	}
	if (lock_fd >= 0)
		close(lock_fd);
	if (!s->own_prog && s->prog_fd >= 0)
		close(s->prog_fd);
	hl_udp_steer_bpf__destroy(skel);
	free(s);
}

#else /* !INCA_HAVE_UDP_STEER */

int hl_udp_steer_dropped(uint32_t ip, uint64_t *unowned, uint64_t *too_short)
{
	(void)ip;
	*unowned = *too_short = 0;
	return INCA_ERR_UNSUPPORTED;
}
#endif

/* Close the socket, leaving the steering group if we joined one. */
static void udp_free(struct udp_state *u)
{
#ifdef INCA_HAVE_UDP_STEER
	if (u->steer)
		steer_unpublish(u);
#endif
	if (u->fd >= 0)
		close(u->fd);
	if (u->raw_fd >= 0)
		close(u->raw_fd);
#ifdef INCA_HAVE_UDP_STEER
	if (u->steer)
		steer_release(u->steer);
#endif
	free(u);
}

static int udp_open(struct inca_comm *c)
{
	static bool told_exclusive;
	struct udp_state *u = calloc(1, sizeof(*u));
	int one = 1, pmtu = IP_PMTUDISC_DO, tos = 26 << 2 | 2, buf = 4 << 20, rc;
	struct sockaddr_in me = { .sin_family = AF_INET,
				  .sin_port = htons(AGG_ROCEV2_UDP_PORT),
				  .sin_addr.s_addr = htonl(c->my_ip) };
	char ip[INET_ADDRSTRLEN], why[PATH_MAX + 64] = "libinca was built without it "
		"(needs libbpf-dev, clang and bpftool)";

	if (!u)
		return hl_fail(c, INCA_ERR_NOMEM, "out of memory");
	inet_ntop(AF_INET, &me.sin_addr, ip, sizeof(ip));
	u->raw_fd = -1;
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0 ||
	    setsockopt(u->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) ||
	    setsockopt(u->fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) ||
	    setsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf)) ||
	    setsockopt(u->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf))) {
		int e = errno;
		udp_free(u);
		return hl_fail(c, INCA_ERR_TRANSPORT, "UDP socket: %s", strerror(e));
	}
	/* UDP checksum 0, as RoCEv2 NICs and the xdp transport send it (the
	 * ICRC protects the packet): the same bytes on the wire */
	setsockopt(u->fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one));
#ifdef INCA_HAVE_UDP_STEER
	rc = steer_open(c, u, &me, ip, why, sizeof(why));
	if (rc < 0) {
		udp_free(u);
		return rc;
	}
#else
	rc = 1;
#endif
	if (rc) {
		/* once per process: the address has room for one owner only */
		if (!__atomic_exchange_n(&told_exclusive, true, __ATOMIC_RELAXED))
			HL_INFO("udp: one communicator per address (QPN steering with eBPF "
				"is unavailable: %s)", why);
		if (bind(u->fd, (struct sockaddr *)&me, sizeof(me))) {
			rc = bind_fail(c, errno, ip);
			udp_free(u);
			return rc;
		}
	}
	u->dst = (struct sockaddr_in){ .sin_family = AF_INET,
				       .sin_port = htons(AGG_ROCEV2_UDP_PORT),
				       .sin_addr.s_addr = htonl(c->g.switch_ip) };
	/* a source port per slot needs the whole IPv4 header: a raw socket
	 * (it receives nothing: IPPROTO_RAW is send-only) */
	u->raw_fd = getenv("INCA_UDP_RAW") && !strcmp(getenv("INCA_UDP_RAW"), "0") ? -1 :
		    socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_RAW);
	if (u->raw_fd >= 0 &&
	    setsockopt(u->raw_fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf))) {
		close(u->raw_fd);
		u->raw_fd = -1;
	}
	/* routed from this rank's address, as its UDP socket is: on a host
	 * with an address per link (a NIC per rank) the rules that send from
	 * an address through its own link apply to the raw socket too */
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(c->my_ip) };
	if (u->raw_fd >= 0 && c->my_ip && bind(u->raw_fd, (struct sockaddr *)&src, sizeof(src)))
		HL_WARN("rank %d: udp: raw socket: bind to its address: %s (sent as the "
			"routes to the switch say)", c->rank, strerror(errno));
	c->fixed_sport = u->raw_fd < 0;
	if (c->fixed_sport)
		HL_INFO("rank %d: udp: sending from port 4791 (no raw socket: %s): one "
			"source port for every slot", c->rank, strerror(errno));
	c->tp_state = u;
	return 0;
}

static void udp_close(struct inca_comm *c)
{
	struct udp_state *u = c->tp_state;

	if (!u)
		return;
	udp_free(u);
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
	/* from the IPv4 header (raw) or the BTH (UDP socket) on */
	unsigned from = u->raw_fd >= 0 ? AGG_IPV4_HLEN + AGG_UDP_HLEN : 0;
	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = f[i].data + f[i].bth_off - from;
		iov[i].iov_len = f[i].len - f[i].bth_off + from;
		msgs[i].msg_hdr = (struct msghdr){ .msg_name = &u->dst,
						   .msg_namelen = sizeof(u->dst),
						   .msg_iov = &iov[i], .msg_iovlen = 1 };
	}
	rc = sendmmsg(u->raw_fd >= 0 ? u->raw_fd : u->fd, msgs, n, 0);
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

		if (agg_decode_bth(u->bufs[i], msgs[i].msg_len, &p) ||
		    !hl_rx_accept(c, &p, msgs[i].msg_len + WIRE_EXTRA, &rx[out])) {
			c->stats.rx_dropped++;
			continue;
		}
		out++;
	}
	return out;
}

/* The group moved to another switch (the manager's plan). */
static int udp_retarget(struct inca_comm *c)
{
	struct udp_state *u = c->tp_state;

	u->dst.sin_addr.s_addr = htonl(c->g.switch_ip);
	return 0;
}

const struct hl_transport_ops hl_udp_ops = {
	.name = "udp", .host_pfc = true,
	.open = udp_open,
	.close = udp_close,
	.send = udp_send,
	.recv = udp_recv,
	.retarget = udp_retarget,
};
