/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The xdp transport: AF_XDP sockets on queue 0 of the member's interface,
 * and an XDP program (libbpf skeleton of hl_xdp.bpf.c) that steers each
 * RoCEv2 packet by its BTH DestQP to the socket that owns it, while ARP,
 * TCP and everything else go to the kernel. Frames are built whole by the
 * library (the same bytes the udp transport's kernel sends) and the
 * switch's MAC comes from the kernel's ARP table.
 *
 * Many owners per interface, demultiplexed by QP (DESIGN.md): every
 * communicator, in whatever process, has its own socket with its own RX
 * and TX rings, bound with XDP_SHARED_UMEM to queue 0 (a redirect reaches
 * only sockets of the packet's queue, which veth chooses). The owners share
 * one UMEM with its fill and completion rings. The UMEM lives in a file
 * every owner maps, /dev/shm/inca-xdp-if<ifindex>-net<netns inode>.umem
 * (tmpfs: the kernel does not pin other files' pages for long), after
 * a header with a robust process-shared mutex (fill-ring producer,
 * completion-ring consumer, the free TX frames) and the owners' table (pid,
 * fd and cookie of the socket, QPN; the entry's index is the socket's
 * XSKMAP index). A newcomer takes a live owner's socket with pidfd_getfd
 * to bind to, and reaches the program by the id in the header and the maps
 * through the program: no bpffs is needed. Owners join and leave under
 * flock(/run/inca/xdp-if<ifindex>-net<netns inode>.lock); the last one
 * detaches the program and removes the file; a group whose owners all died
 * is rebuilt by the next one. The UMEM counts once against the locked
 * memory limit, charged to the owner that registered it.
 *
 * One file over 500 lines on purpose (about 1050): the rings, the shared
 * UMEM group and the program are one state (struct xdp_state) under one
 * lock discipline, private to this transport; hl_transport_ops is all the
 * rest of libinca sees of it.
 */
#include "hl_priv.h"

#ifdef INCA_HAVE_XDP
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>

#include "hl_shared.h"
#include "hl_xdp.h"
#include "hl_xdp.skel.h"

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#define FRAME_SIZE 4096          /* holds IB MTU 2048 frames after the RX headroom */
#define NUM_FRAMES 1024          /* 4 MiB of UMEM per interface: under the 8 MiB memlock */
#define RX_FRAMES 512            /* first half for the fill ring */
#define TX_FRAMES (NUM_FRAMES - RX_FRAMES)
#define RING_SIZE 1024           /* fill and completion: each holds every frame of its half */
/* each socket's RX and TX ring: an owner that does not call recv holds at
 * most this many RX frames (what arrived for its QPN), so one idle owner
 * cannot hold the whole RX half; and one owner's queued sends leave TX
 * frames to the others */
#define SOCK_RING 256
/* what the kernel puts before a received frame in its chunk (copy mode) */
#define RX_HEADROOM 256
#define KICKS 16                 /* sendto calls per kick while the kernel takes frames */
#define BIND_RETRY_MS 1000       /* a closed group's queue is released by a workqueue */
#define SHARED_HDR (64 * 1024)   /* the header before the UMEM in the shared file */
#define SHARED_LEN (SHARED_HDR + (size_t)NUM_FRAMES * FRAME_SIZE)
#define SHARED_MAGIC 0x3250445841434e49ull   /* "INCAXDP2": 4096-byte frames */
#define LOCK_WAIT_MS 5000
#define DRAIN_MS 100             /* for our TX ring to empty before we leave */
#define BATCH 64
/* bytes around the INCA message in a frame, at most: Ethernet (with a VLAN
 * tag), IPv4, UDP, BTH, DETH, immediate data, ICRC */
#define XDP_FRAME_OVERHEAD (AGG_ETH_HLEN + AGG_VLAN_HLEN + AGG_IPV4_HLEN + AGG_UDP_HLEN + \
			    AGG_BTH_LEN + AGG_DETH_LEN + AGG_IMM_LEN + AGG_ICRC_LEN)
/* the UMEM's file: shmem (tmpfs), which the kernel pins for long */
#define XDP_SHM_DIR "/dev/shm"

/* An owner (communicator) of the interface. */
struct xdp_owner {
	int32_t pid;             /* 0: a free entry */
	int32_t fd;              /* its socket, in pid's descriptor table */
	uint64_t cookie;         /* SO_COOKIE: tells the socket from a reused fd */
	uint32_t qpn;
	uint32_t pad;
};

/* The header of the shared file. owners and prog_id change under the
 * flock, the rest under mu. */
struct xdp_shared {
	uint64_t magic;          /* written last by the owner that builds it */
	uint32_t prog_id;        /* the group's XDP program */
	uint32_t xdp_mode;       /* XDP_FLAGS_DRV_MODE or XDP_FLAGS_SKB_MODE */
	pthread_mutex_t mu;      /* robust, process-shared */
	struct xdp_owner owners[HL_XDP_MAX_SOCKS];
	uint32_t nfree_tx;
	uint64_t free_tx[TX_FRAMES];
};
_Static_assert(sizeof(struct xdp_shared) <= SHARED_HDR, "the shared header outgrew its room");

/* One mmapped AF_XDP ring. */
struct xdp_ring {
	uint32_t *producer, *consumer;
	void *descs;
	uint32_t size;           /* entries, a power of two */
	void *map;
	size_t map_len;
};

struct xdp_state {
	pid_t pid;               /* the process that opened it (a fork's child only unmaps) */
	int ifindex;
	int fd;                  /* our socket */
	int lock_fd;             /* >= 0 while we hold the group's flock */
	int prog_fd, xsks_fd, qpns_fd;
	int slot;                /* our owners[] entry and XSKMAP index; -1: none */
	struct xdp_shared *sh;
	uint8_t *umem;
	struct xdp_ring fill, comp, rx, tx;   /* fill, comp: the group's */
	uint64_t refill[BATCH];  /* received frames the fill ring has not taken back yet */
	unsigned nrefill;
	uint8_t *rxbuf;          /* BATCH frames: the last recv's messages, copied out */
	uint64_t tx_refused;     /* frames longer than a UMEM frame, not sent */
	uint8_t src_mac[6], dst_mac[6];
	char shm_path[PATH_MAX - 16], lock_path[PATH_MAX];
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

/* The next hop towards the switch on our interface: the gateway of the
 * longest matching route in /proc/net/route, or the switch itself when it
 * is on the link (routed placement: a switch in another subnet). */
static uint32_t next_hop(const struct inca_comm *c)
{
	char line[256], dev[64];
	unsigned dst, gw, flags, mask;
	uint32_t hop = c->g.switch_ip, best = 0;
	bool found = false;
	FILE *f = fopen("/proc/net/route", "r");

	if (!f)
		return hop;
	while (fgets(line, sizeof(line), f)) {
		/* Iface Destination Gateway Flags RefCnt Use Metric Mask: network order, hex */
		if (sscanf(line, "%63s %x %x %x %*s %*s %*s %x", dev, &dst, &gw, &flags,
			   &mask) != 5 || strcmp(dev, c->ifname) || !(flags & 1))
			continue;
		uint32_t d = ntohl(dst), m = ntohl(mask);
		if ((c->g.switch_ip & m) != d || (found && m < best))
			continue;
		found = true;
		best = m;
		hop = (flags & 2) && gw ? ntohl(gw) : c->g.switch_ip;   /* RTF_GATEWAY */
	}
	fclose(f);
	return hop;
}

/* The next hop's MAC from the ARP table, asking the kernel to resolve it
 * (a datagram to the switch's discard port) when it is not there yet. */
static int resolve_mac(struct inca_comm *c, uint8_t mac[6])
{
	char ip[INET_ADDRSTRLEN], line[256];
	struct in_addr a = { htonl(c->g.switch_ip) }, hop = { htonl(next_hop(c)) };

	inet_ntop(AF_INET, &hop, ip, sizeof(ip));
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

/* ---- rings: we are the only producer of a ring we fill (the fill ring
 * under the group's mutex) and the only consumer of one we drain ---- */

static uint32_t ring_room(const struct xdp_ring *r)
{
	return r->size - (__atomic_load_n(r->producer, __ATOMIC_RELAXED) -
			    __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE));
}

static void ring_submit(struct xdp_ring *r, uint32_t n)
{
	__atomic_store_n(r->producer, __atomic_load_n(r->producer, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELEASE);
}

static uint32_t ring_ready(const struct xdp_ring *r)
{
	return __atomic_load_n(r->producer, __ATOMIC_ACQUIRE) -
	       __atomic_load_n(r->consumer, __ATOMIC_RELAXED);
}

static void ring_release(struct xdp_ring *r, uint32_t n)
{
	__atomic_store_n(r->consumer, __atomic_load_n(r->consumer, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELEASE);
}

/* Descriptors our TX ring holds that the kernel has not taken yet. */
static uint32_t tx_pending(const struct xdp_ring *r)
{
	return __atomic_load_n(r->producer, __ATOMIC_RELAXED) -
	       __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE);
}

static int ring_map(int fd, const struct xdp_ring_offset *o, off_t pgoff, size_t desc_size,
		    uint32_t size, struct xdp_ring *r)
{
	r->size = size;
	r->map_len = o->desc + size * desc_size;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
		      pgoff);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		return -errno;
	}
	r->producer = (uint32_t *)((uint8_t *)r->map + o->producer);
	r->consumer = (uint32_t *)((uint8_t *)r->map + o->consumer);
	r->descs = (uint8_t *)r->map + o->desc;
	return 0;
}

static void ring_unmap(struct xdp_ring *r)
{
	if (r->map)
		munmap(r->map, r->map_len);
	r->map = NULL;
}

/* The group's mutex; an owner that died holding it left the rings
 * consistent (indices are published after the entries they cover). */
static int group_lock(struct xdp_state *x)
{
	int rc = pthread_mutex_lock(&x->sh->mu);

	if (rc == EOWNERDEAD) {
		HL_WARN("xdp: an owner of %s died holding its lock; going on", x->shm_path);
		rc = pthread_mutex_consistent(&x->sh->mu);
		if (rc)
			pthread_mutex_unlock(&x->sh->mu);
	}
	return rc;
}

static void group_unlock(struct xdp_state *x)
{
	pthread_mutex_unlock(&x->sh->mu);
}

/* Under the mutex: frames back to the fill ring; returns how many fit. */
static unsigned fill_put(struct xdp_state *x, const uint64_t *addr, unsigned n)
{
	uint32_t prod = __atomic_load_n(x->fill.producer, __ATOMIC_RELAXED);
	uint64_t *d = x->fill.descs;

	if (n > ring_room(&x->fill))
		n = ring_room(&x->fill);
	for (unsigned i = 0; i < n; i++)
		d[(prod + i) & (x->fill.size - 1)] = addr[i];
	ring_submit(&x->fill, n);
	return n;
}

/* Under the mutex: sent frames, any owner's, back to the free TX list.
 * Entries are copied out and the ring released before the list's count is
 * published: an owner dying in between loses those frames to the group,
 * where publishing first would let the next lock holder (EOWNERDEAD) reap
 * the same entries again and hand one frame out twice. */
static void comp_reap(struct xdp_state *x)
{
	const uint64_t *d = x->comp.descs;
	struct xdp_shared *sh = x->sh;
	uint64_t addr[BATCH];
	uint32_t n;

	while ((n = ring_ready(&x->comp)) > 0) {
		uint32_t cons = *x->comp.consumer, nf = sh->nfree_tx;

		if (n > BATCH)
			n = BATCH;
		for (uint32_t i = 0; i < n; i++)
			addr[i] = d[(cons + i) & (x->comp.size - 1)];
		ring_release(&x->comp, n);
		if (nf > TX_FRAMES)
			nf = TX_FRAMES;
		for (uint32_t i = 0; i < n && nf + i < TX_FRAMES; i++)
			sh->free_tx[nf + i] = addr[i];
		__atomic_store_n(&sh->nfree_tx, nf + n < TX_FRAMES ? nf + n : TX_FRAMES,
				 __ATOMIC_RELEASE);
	}
}

/* Have the kernel send what our TX ring holds: copy mode sends a batch per
 * sendto, so call again while it makes progress (bounded). Returns 0 or an
 * INCA code. */
static int tx_kick(struct inca_comm *c, struct xdp_state *x)
{
	for (int i = 0; i < KICKS && tx_pending(&x->tx); i++) {
		uint32_t before = __atomic_load_n(x->tx.consumer, __ATOMIC_ACQUIRE);

		if (sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno != EAGAIN &&
		    errno != EBUSY && errno != ENOBUFS && errno != EINTR)
			return c ? hl_fail(c, INCA_ERR_TRANSPORT, "AF_XDP send: %s",
					   strerror(errno)) : INCA_ERR_TRANSPORT;
		if (__atomic_load_n(x->tx.consumer, __ATOMIC_ACQUIRE) == before)
			break;
	}
	return 0;
}

/* ---- the group: owners, the shared file, the program ---- */

/* Is owner o alive: its process has the socket still (same cookie)? With
 * sock, a descriptor for that socket in this process (or -1 when it could
 * not be had). */
static bool owner_alive(const struct xdp_owner *o, int *sock)
{
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);
	int pidfd, fd;
	bool alive;

	if (sock)
		*sock = -1;
	if (!o->pid)
		return false;
	pidfd = (int)syscall(SYS_pidfd_open, o->pid, 0);
	if (pidfd < 0)
		return errno != ESRCH;
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, o->fd, 0);
	/* EBADF: no such descriptor; ESRCH: exited. EPERM and the like: it
	 * may be alive, we cannot tell */
	alive = fd >= 0 || (errno != EBADF && errno != ESRCH);
	close(pidfd);
	if (fd < 0)
		return alive;
	alive = !getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) && cookie == o->cookie;
	if (alive && sock)
		*sock = fd;
	else
		close(fd);
	return alive;
}

static uint32_t prog_id_of(int prog_fd)
{
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);

	return bpf_obj_get_info_by_fd(prog_fd, &info, &len) ? 0 : info.id;
}

/* Under the flock: map the group's file. *fresh: it had to be (re)built
 * (none, an empty or unfinished one, or no owner alive), and we build it.
 * A file we cannot map, or one of another size (another libinca's layout?),
 * is refused and left alone: its owners may be alive. */
static int shared_map(struct inca_comm *c, struct xdp_state *x, bool *fresh)
{
	pthread_mutexattr_t ma;
	char tmp[PATH_MAX];
	struct stat st;
	int fd, live = 0;

	*fresh = true;
	fd = open(x->shm_path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return hl_fail(c, INCA_ERR_TRANSPORT, "open %s (the shared UMEM): %s",
			       x->shm_path, strerror(errno));
	if (fd >= 0) {
		if (fstat(fd, &st)) {
			int e = errno;
			close(fd);
			return hl_fail(c, INCA_ERR_TRANSPORT, "stat %s: %s", x->shm_path,
				       strerror(e));
		}
		/* an empty file holds nothing anyone could map: a leftover */
		if (st.st_size != 0 && (size_t)st.st_size != SHARED_LEN) {
			close(fd);
			return hl_fail(c, INCA_ERR_TRANSPORT, "%s has %lld bytes, not the %zu "
				       "this libinca uses (a group of another version?); remove "
				       "it once no INCA process uses %s", x->shm_path,
				       (long long)st.st_size, SHARED_LEN, c->ifname);
		}
		if (st.st_size != 0) {
			x->sh = mmap(NULL, SHARED_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (x->sh == MAP_FAILED) {
				int e = errno;
				x->sh = NULL;
				close(fd);
				return hl_fail(c, INCA_ERR_TRANSPORT, "map %s (the shared UMEM): %s",
					       x->shm_path, strerror(e));
			}
			for (int i = 0; x->sh->magic == SHARED_MAGIC && i < HL_XDP_MAX_SOCKS; i++)
				live += owner_alive(&x->sh->owners[i], NULL);
			*fresh = live == 0;
		}
		close(fd);
	}
	if (!*fresh) {
		x->umem = (uint8_t *)x->sh + SHARED_HDR;
		return 0;
	}
	if (x->sh) {
		HL_INFO("rank %d: xdp: %s had no live owner: rebuilding it", c->rank,
			x->shm_path);
		munmap(x->sh, SHARED_LEN);
		x->sh = NULL;
	}
	/* a new file, built aside and renamed over the old one (whoever still
	 * maps that keeps its pages): the path never shows a partial file */
	snprintf(tmp, sizeof(tmp), "%s.%d", x->shm_path, (int)getpid());
	unlink(tmp);
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)SHARED_LEN)) {
		int e = errno;
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		return hl_fail(c, INCA_ERR_TRANSPORT, "create %s (%zu KiB, the shared UMEM): %s",
			       tmp, SHARED_LEN / 1024, strerror(e));
	}
	x->sh = mmap(NULL, SHARED_LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	if (x->sh == MAP_FAILED) {
		int e = errno;
		x->sh = NULL;
		unlink(tmp);
		return hl_fail(c, INCA_ERR_TRANSPORT, "map %s: %s", tmp, strerror(e));
	}
	x->umem = (uint8_t *)x->sh + SHARED_HDR;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&x->sh->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	for (uint32_t i = 0; i < TX_FRAMES; i++)
		x->sh->free_tx[i] = (uint64_t)(RX_FRAMES + i) * FRAME_SIZE;
	x->sh->nfree_tx = TX_FRAMES;
	__atomic_store_n(&x->sh->magic, SHARED_MAGIC, __ATOMIC_RELEASE);
	if (rename(tmp, x->shm_path)) {
		int e = errno;
		unlink(tmp);
		return hl_fail(c, INCA_ERR_TRANSPORT, "rename %s to %s: %s", tmp, x->shm_path,
			       strerror(e));
	}
	return 0;
}

/* Our socket: the UMEM's first (peer < 0: registers it, with the fill
 * and completion rings) or one more on it (bound with XDP_SHARED_UMEM to
 * peer, a live owner's socket); then its rings and the group's mapped. */
static int sock_open(struct inca_comm *c, struct xdp_state *x, int peer)
{
	struct sockaddr_xdp sa = { .sxdp_family = AF_XDP, .sxdp_ifindex = (uint32_t)x->ifindex };
	struct xdp_umem_reg reg = { .addr = (uintptr_t)x->umem,
				    .len = (uint64_t)NUM_FRAMES * FRAME_SIZE,
				    .chunk_size = FRAME_SIZE };
	struct xdp_mmap_offsets off;
	socklen_t len = sizeof(off);
	int n = RING_SIZE, ns = SOCK_RING, rc;

	x->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (x->fd < 0)
		return hl_fail(c, INCA_ERR_TRANSPORT, "AF_XDP socket: %s", strerror(errno));
	if (peer < 0 && setsockopt(x->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)))
		return hl_fail(c, INCA_ERR_TRANSPORT, "AF_XDP UMEM (%d KiB in %s): %s (locked "
			       "memory limit?)", NUM_FRAMES * FRAME_SIZE / 1024, x->shm_path,
			       strerror(errno));
	if ((peer < 0 && (setsockopt(x->fd, SOL_XDP, XDP_UMEM_FILL_RING, &n, sizeof(n)) ||
			  setsockopt(x->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n, sizeof(n)))) ||
	    setsockopt(x->fd, SOL_XDP, XDP_RX_RING, &ns, sizeof(ns)) ||
	    setsockopt(x->fd, SOL_XDP, XDP_TX_RING, &ns, sizeof(ns)) ||
	    getsockopt(x->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len))
		return hl_fail(c, INCA_ERR_TRANSPORT, "AF_XDP rings: %s", strerror(errno));
	if (peer >= 0) {
		sa.sxdp_flags = XDP_SHARED_UMEM;
		sa.sxdp_shared_umem_fd = (uint32_t)peer;
	}
	/* a group closed just before still has the queue until a kernel
	 * workqueue releases its UMEM: a fresh group waits for that */
	for (int ms = 0; (rc = bind(x->fd, (struct sockaddr *)&sa, sizeof(sa))) &&
	     errno == EBUSY && peer < 0 && ms < BIND_RETRY_MS; ms += 10) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (rc)
		return hl_fail(c, INCA_ERR_TRANSPORT, "AF_XDP socket on %s queue 0%s: %s%s",
			       c->ifname, peer >= 0 ? " (shared UMEM)" : "", strerror(errno),
			       errno == EBUSY && peer < 0 ? " for 1 s (another AF_XDP socket, "
			       "outside INCA's group, has this queue)" : "");
	/* the fill and completion rings of a shared UMEM are mapped through
	 * any of its sockets once bound (Linux 6.x) */
	rc = ring_map(x->fd, &off.fr, XDP_UMEM_PGOFF_FILL_RING, sizeof(uint64_t), RING_SIZE,
		      &x->fill);
	if (!rc)
		rc = ring_map(x->fd, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, sizeof(uint64_t),
			      RING_SIZE, &x->comp);
	if (!rc)
		rc = ring_map(x->fd, &off.rx, XDP_PGOFF_RX_RING, sizeof(struct xdp_desc),
			      SOCK_RING, &x->rx);
	if (!rc)
		rc = ring_map(x->fd, &off.tx, XDP_PGOFF_TX_RING, sizeof(struct xdp_desc),
			      SOCK_RING, &x->tx);
	if (rc)
		return hl_fail(c, INCA_ERR_TRANSPORT, "map the AF_XDP rings: %s%s", strerror(-rc),
			       peer >= 0 ? " (a kernel that maps a shared UMEM's fill ring "
			       "only before bind?)" : "");
	return 0;
}

/* Have prog_fd (id prog_id) attached: keep it if it is, replace a leftover
 * copy of INCA's program, refuse anything else. */
static int attach_prog(struct inca_comm *c, struct xdp_state *x, int prog_fd, uint32_t prog_id)
{
	uint32_t modes[] = { XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE };
	int rc = -1;

	for (int i = 0; i < 2; i++) {
		uint32_t old_id = 0;

		if (bpf_xdp_query_id(x->ifindex, modes[i], &old_id) || !old_id)
			continue;
		if (old_id == prog_id) {
			x->sh->xdp_mode = modes[i];
			return 0;
		}
		struct bpf_prog_info info = { 0 };
		uint32_t len = sizeof(info);
		int ofd = bpf_prog_get_fd_by_id(old_id);
		bool ours = ofd >= 0 && !bpf_obj_get_info_by_fd(ofd, &info, &len) &&
			    !strcmp(info.name, "inca_steer");
		if (ofd >= 0)
			close(ofd);
		if (!ours)
			return hl_fail(c, INCA_ERR_TRANSPORT, "%s already runs an XDP program "
				       "(id %u) that is not INCA's", c->ifname, old_id);
		HL_WARN("rank %d: replacing a leftover INCA XDP program on %s", c->rank,
			c->ifname);
		bpf_xdp_detach(x->ifindex, modes[i], NULL);
	}
	for (int i = 0; i < 2 && rc; i++) {
		rc = bpf_xdp_attach(x->ifindex, prog_fd, modes[i], NULL);
		if (!rc)
			x->sh->xdp_mode = modes[i];
	}
	if (rc)
		return hl_fail(c, INCA_ERR_TRANSPORT, "attach XDP program to %s: %s", c->ifname,
			       strerror(-rc));
	return 0;
}

/* The first owner: load the program, attach it, publish its id. */
static int prog_load(struct inca_comm *c, struct xdp_state *x)
{
	struct hl_xdp_bpf *skel = hl_xdp_bpf__open_and_load();
	int rc, fd;

	if (!skel)
		return hl_fail(c, INCA_ERR_TRANSPORT, "load the XDP program: %s", strerror(errno));
	fd = bpf_program__fd(skel->progs.inca_steer);
	rc = attach_prog(c, x, fd, prog_id_of(fd));
	if (!rc) {
		x->prog_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		x->xsks_fd = fcntl(bpf_map__fd(skel->maps.xsks), F_DUPFD_CLOEXEC, 0);
		x->qpns_fd = fcntl(bpf_map__fd(skel->maps.qpns), F_DUPFD_CLOEXEC, 0);
		x->sh->prog_id = prog_id_of(fd);
		if (x->prog_fd < 0 || x->xsks_fd < 0 || x->qpns_fd < 0)
			rc = hl_fail(c, INCA_ERR_TRANSPORT, "XDP program: %s", strerror(errno));
	}
	hl_xdp_bpf__destroy(skel);
	return rc;
}

/* A later owner: the group's program by its id, its maps through it; and
 * attached again if someone took it off. */
static int prog_find(struct inca_comm *c, struct xdp_state *x)
{
	uint32_t ids[4], len;
	struct bpf_prog_info info = { 0 };

	x->prog_fd = bpf_prog_get_fd_by_id(x->sh->prog_id);
	if (x->prog_fd < 0)
		return hl_fail(c, INCA_ERR_TRANSPORT, "the XDP program (id %u) of %s's owners: "
			       "%s", x->sh->prog_id, c->ifname, strerror(errno));
	info.nr_map_ids = 4;
	info.map_ids = (uintptr_t)ids;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(x->prog_fd, &info, &len))
		return hl_fail(c, INCA_ERR_TRANSPORT, "XDP program %u: %s", x->sh->prog_id,
			       strerror(errno));
	for (uint32_t i = 0; i < info.nr_map_ids && i < 4; i++) {
		struct bpf_map_info mi = { 0 };
		uint32_t mlen = sizeof(mi);
		int fd = bpf_map_get_fd_by_id(ids[i]);

		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &mi, &mlen)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (!strcmp(mi.name, "xsks") && x->xsks_fd < 0)
			x->xsks_fd = fd;
		else if (!strcmp(mi.name, "qpns") && x->qpns_fd < 0)
			x->qpns_fd = fd;
		else
			close(fd);
	}
	if (x->xsks_fd < 0 || x->qpns_fd < 0)
		return hl_fail(c, INCA_ERR_TRANSPORT, "XDP program %u has no xsks and qpns maps",
			       x->sh->prog_id);
	return attach_prog(c, x, x->prog_fd, x->sh->prog_id);
}

/* Under the flock: forget owners that died (their QPNs too). */
static void owners_prune(struct xdp_state *x)
{
	for (int i = 0; i < HL_XDP_MAX_SOCKS; i++) {
		struct xdp_owner *o = &x->sh->owners[i];
		uint32_t idx;

		if (!o->pid || owner_alive(o, NULL))
			continue;
		if (!bpf_map_lookup_elem(x->qpns_fd, &o->qpn, &idx) && idx == (uint32_t)i)
			bpf_map_delete_elem(x->qpns_fd, &o->qpn);
		memset(o, 0, sizeof(*o));
	}
}

/* Under the flock, leaving: what we hold goes back to the group (frames
 * still in our RX ring, the last recv's, our unsent TX once sent). */
static void sock_drain(struct xdp_state *x)
{
	uint64_t addr[BATCH];
	uint32_t n;

	for (int ms = 0; ms < DRAIN_MS && tx_pending(&x->tx); ms++) {
		struct timespec ts = { 0, 1000 * 1000 };
		tx_kick(NULL, x);
		nanosleep(&ts, NULL);
	}
	if (group_lock(x))
		return;
	fill_put(x, x->refill, x->nrefill);
	x->nrefill = 0;
	while ((n = ring_ready(&x->rx)) > 0) {
		uint32_t cons = *x->rx.consumer;
		const struct xdp_desc *d = x->rx.descs;

		if (n > BATCH)
			n = BATCH;
		for (uint32_t i = 0; i < n; i++)
			addr[i] = d[(cons + i) & (x->rx.size - 1)].addr;
		fill_put(x, addr, n);
		ring_release(&x->rx, n);
	}
	comp_reap(x);
	group_unlock(x);
}

/* Detach the group's program when it is the one attached. */
static void prog_detach(struct xdp_state *x)
{
	uint32_t modes[] = { XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE }, id;

	for (int i = 0; i < 2; i++)
		if (!bpf_xdp_query_id(x->ifindex, modes[i], &id) && id && id == x->sh->prog_id)
			bpf_xdp_detach(x->ifindex, modes[i], NULL);
}

/* This process's part: descriptors, mappings, memory. */
static void state_free(struct xdp_state *x)
{
	if (x->fd >= 0)
		close(x->fd);   /* the kernel empties our XSKMAP entry */
	ring_unmap(&x->fill);
	ring_unmap(&x->comp);
	ring_unmap(&x->rx);
	ring_unmap(&x->tx);
	if (x->sh)
		munmap(x->sh, SHARED_LEN);
	if (x->prog_fd >= 0)
		close(x->prog_fd);
	if (x->xsks_fd >= 0)
		close(x->xsks_fd);
	if (x->qpns_fd >= 0)
		close(x->qpns_fd);
	if (x->lock_fd >= 0)
		close(x->lock_fd);
	free(x->rxbuf);
	free(x);
}

static void xdp_close(struct inca_comm *c)
{
	struct xdp_state *x = c->tp_state;
	bool last = true;

	if (!x)
		return;
	c->tp_state = NULL;
	/* a forked child's copy: the socket, its table entry and the program
	 * are the parent's, which goes on using them */
	if (x->pid != getpid()) {
		state_free(x);
		return;
	}
	if (x->lock_fd < 0 && x->sh)
		x->lock_fd = hl_run_lock(x->lock_path, LOCK_WAIT_MS);
	if (x->slot >= 0) {
		uint32_t idx, slot = (uint32_t)x->slot;

		/* no new frames for us before we give ours back */
		if (!bpf_map_lookup_elem(x->qpns_fd, &c->my_qpn, &idx) && idx == slot)
			bpf_map_delete_elem(x->qpns_fd, &c->my_qpn);
		bpf_map_delete_elem(x->xsks_fd, &slot);
		sock_drain(x);
		memset(&x->sh->owners[slot], 0, sizeof(x->sh->owners[slot]));
	}
	if (x->fd >= 0)
		close(x->fd);
	x->fd = -1;
	if (x->sh) {
		for (int i = 0; i < HL_XDP_MAX_SOCKS && last; i++)
			last = !owner_alive(&x->sh->owners[i], NULL);
		/* without the flock someone may be joining: leave it all */
		if (last && x->lock_fd >= 0) {
			if (x->sh->magic == SHARED_MAGIC && x->sh->prog_id)
				prog_detach(x);
			unlink(x->shm_path);
		}
	}
	state_free(x);
}

/* Under the flock: join (or build) the interface's group. */
static int group_join(struct inca_comm *c, struct xdp_state *x)
{
	uint32_t qpn = c->my_qpn, slot;
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);
	bool fresh;
	int rc, peer = -1;

	rc = shared_map(c, x, &fresh);
	if (rc)
		return rc;
	if (fresh) {
		rc = sock_open(c, x, -1);
		if (rc)
			return rc;
		uint64_t addr[RX_FRAMES];
		for (uint32_t i = 0; i < RX_FRAMES; i++)
			addr[i] = (uint64_t)i * FRAME_SIZE;
		if (group_lock(x) == 0) {
			fill_put(x, addr, RX_FRAMES);
			group_unlock(x);
		}
		rc = prog_load(c, x);
		if (rc)
			return rc;
	} else {
		rc = prog_find(c, x);
		if (rc)
			return rc;
		owners_prune(x);
		for (int i = 0; i < HL_XDP_MAX_SOCKS; i++)
			if (x->sh->owners[i].pid && x->sh->owners[i].qpn == qpn)
				return hl_fail(c, INCA_ERR_TRANSPORT, "QPN %u on %s is already "
					       "owned by another communicator (pid %d)", qpn,
					       c->ifname, x->sh->owners[i].pid);
		for (int i = 0; i < HL_XDP_MAX_SOCKS && peer < 0; i++)
			owner_alive(&x->sh->owners[i], &peer);
		if (peer < 0)
			return hl_fail(c, INCA_ERR_TRANSPORT, "no socket of %s's xdp owners could "
				       "be reached (pidfd_getfd needs ptrace rights over them)",
				       c->ifname);
		rc = sock_open(c, x, peer);
		close(peer);
		if (rc)
			return rc;
	}
	for (slot = 0; slot < HL_XDP_MAX_SOCKS && x->sh->owners[slot].pid; slot++)
		;
	if (slot == HL_XDP_MAX_SOCKS)
		return hl_fail(c, INCA_ERR_TRANSPORT, "%s already has %d xdp communicators, the "
			       "most one interface can carry", c->ifname, HL_XDP_MAX_SOCKS);
	if (getsockopt(x->fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) ||
	    bpf_map_update_elem(x->xsks_fd, &slot, &x->fd, 0) ||
	    bpf_map_update_elem(x->qpns_fd, &qpn, &slot, 0))
		return hl_fail(c, INCA_ERR_TRANSPORT, "XDP maps: %s", strerror(errno));
	x->sh->owners[slot] = (struct xdp_owner){ .pid = getpid(), .fd = x->fd,
						  .cookie = cookie, .qpn = qpn };
	x->slot = (int)slot;
	HL_INFO("rank %d: xdp: %s queue 0 (%s mode), QPN %u is socket %u of the shared UMEM "
		"(%s)", c->rank, c->ifname, x->sh->xdp_mode == XDP_FLAGS_DRV_MODE ? "native" :
		"generic", qpn, slot, fresh ? "built it" : "joined");
	return 0;
}

static int xdp_open(struct inca_comm *c)
{
	struct xdp_state *x;
	struct ifreq ifr = { 0 };
	unsigned long net = hl_ns_inode("/proc/self/ns/net");
	unsigned frame_max = XDP_FRAME_OVERHEAD + c->g.ib_mtu;
	int rc, fd;

	/* a frame (received: after the kernel's headroom) fits one chunk */
	if (frame_max > FRAME_SIZE - RX_HEADROOM)
		return hl_fail(c, INCA_ERR_CONFIG, "mtu %u: frames of up to %u bytes, an AF_XDP "
			       "frame holds %d; mtu 2048 at most (or the udp transport)",
			       c->g.ib_mtu, frame_max, FRAME_SIZE - RX_HEADROOM);
	x = calloc(1, sizeof(*x));
	if (x)
		x->rxbuf = malloc((size_t)BATCH * FRAME_SIZE);
	if (!x || !x->rxbuf) {
		free(x);
		return hl_fail(c, INCA_ERR_NOMEM, "out of memory");
	}
	x->pid = getpid();
	x->fd = x->lock_fd = x->prog_fd = x->xsks_fd = x->qpns_fd = x->slot = -1;
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
	/* no switch yet: a job on the host ring (the manager's plan) */
	if (c->g.switch_ip && resolve_mac(c, x->dst_mac)) {
		xdp_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "the switch's MAC address did not "
			       "resolve (ARP on %s for 2 s)", c->ifname);
	}

	/* an interface index is unique in its network namespace */
	snprintf(x->shm_path, sizeof(x->shm_path), XDP_SHM_DIR "/inca-xdp-if%d-net%lu.umem",
		 x->ifindex, net);
	snprintf(x->lock_path, sizeof(x->lock_path), HL_RUN_DIR "/xdp-if%d-net%lu.lock",
		 x->ifindex, net);
	x->lock_fd = hl_run_lock(x->lock_path, LOCK_WAIT_MS);
	if (x->lock_fd < 0) {
		rc = -x->lock_fd;
		xdp_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "%s: %s", x->lock_path, rc == ETIMEDOUT ?
			       "still locked by another process after 5 s" : strerror(rc));
	}
	rc = group_join(c, x);
	if (rc) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", c->errmsg);
		xdp_close(c);
		return hl_fail(c, rc, "%s", msg);
	}
	close(x->lock_fd);
	x->lock_fd = -1;
	return 0;
}

static int xdp_send(struct inca_comm *c, const struct hl_frame *f, unsigned n)
{
	struct xdp_state *x = c->tp_state;
	struct xdp_desc *d = x->tx.descs;
	uint64_t addr[BATCH];
	unsigned i, want = 0, cap, put = 0;
	uint32_t prod, nf;
	int rc;

	if (n > BATCH)
		n = BATCH;
	if (group_lock(x))
		return hl_fail(c, INCA_ERR_TRANSPORT, "xdp: the lock of %s is unusable",
			       x->shm_path);
	comp_reap(x);
	nf = x->sh->nfree_tx;
	if (nf > TX_FRAMES)
		nf = TX_FRAMES;
	cap = ring_room(&x->tx) < nf ? ring_room(&x->tx) : nf;
	/* the frames we take: one per sendable frame; one that does not fit a
	 * UMEM frame (or has no Ethernet header) is refused, not sent */
	for (i = 0; i < n; i++) {
		if (f[i].len > FRAME_SIZE || f[i].len < AGG_ETH_HLEN)
			continue;
		if (want == cap)
			break;
		want++;
	}
	n = i;
	memcpy(addr, &x->sh->free_tx[nf - want], want * sizeof(addr[0]));
	__atomic_store_n(&x->sh->nfree_tx, nf - want, __ATOMIC_RELEASE);
	group_unlock(x);
	prod = *x->tx.producer;
	for (i = 0; i < n; i++) {
		if (f[i].len > FRAME_SIZE || f[i].len < AGG_ETH_HLEN) {
			if (!x->tx_refused++)
				HL_WARN("rank %d: xdp: a frame of %u bytes is not sent (a UMEM "
					"frame holds %d)", c->rank, f[i].len, FRAME_SIZE);
			continue;
		}
		uint8_t *p = x->umem + addr[put];
		struct xdp_desc *e = &d[(prod + put) & (x->tx.size - 1)];

		memcpy(p, f[i].data, f[i].len);
		memcpy(p, x->dst_mac, 6);
		memcpy(p + 6, x->src_mac, 6);
		e->addr = addr[put];
		e->len = f[i].len;
		e->options = 0;
		put++;
	}
	ring_submit(&x->tx, put);
	/* also when nothing new was queued: what is queued must go out */
	rc = tx_kick(c, x);
	return rc ? rc : (int)n;
}

static int xdp_recv(struct inca_comm *c, struct hl_rx *rx, unsigned max, int timeout_us)
{
	struct xdp_state *x = c->tp_state;
	const struct xdp_desc *d = x->rx.descs;
	uint32_t cons, n;
	int out = 0, rc;

	/* our sends go on while we wait for results */
	rc = tx_kick(c, x);
	if (rc)
		return rc;
	if (max > BATCH - x->nrefill)
		max = BATCH - x->nrefill;
	n = ring_ready(&x->rx);
	if (n == 0 && timeout_us > 0) {
		struct pollfd p = { .fd = x->fd, .events = POLLIN };
		struct timespec ts = { timeout_us / 1000000, (timeout_us % 1000000) * 1000L };
		ppoll(&p, 1, &ts, NULL);
		n = ring_ready(&x->rx);
	}
	if (n > max)
		n = max;
	/* each message is copied out (valid until our next call) and its frame
	 * goes back to the fill ring now: the group's RX frames are not held
	 * by an owner that stops receiving */
	cons = *x->rx.consumer;
	for (uint32_t i = 0; i < n; i++) {
		const struct xdp_desc *e = &d[(cons + i) & (x->rx.size - 1)];
		uint8_t *p = x->rxbuf + (size_t)out * FRAME_SIZE;
		struct agg_pkt pkt;

		x->refill[x->nrefill++] = e->addr;
		if (e->len > FRAME_SIZE ||
		    e->addr > (uint64_t)NUM_FRAMES * FRAME_SIZE - e->len) {
			c->stats.rx_dropped++;
			continue;
		}
		memcpy(p, x->umem + e->addr, e->len);
		if (agg_decode(p, e->len, true, &pkt) || !hl_rx_accept(c, &pkt, e->len, &rx[out])) {
			c->stats.rx_dropped++;
			continue;
		}
		out++;
	}
	ring_release(&x->rx, n);
	if (x->nrefill) {
		unsigned put;

		if (group_lock(x))
			return hl_fail(c, INCA_ERR_TRANSPORT, "xdp: the lock of %s is unusable",
				       x->shm_path);
		put = fill_put(x, x->refill, x->nrefill);
		comp_reap(x);
		group_unlock(x);
		memmove(x->refill, x->refill + put, (x->nrefill - put) * sizeof(x->refill[0]));
		x->nrefill -= put;
	}
	return out;
}

/* The group moved to another switch (the manager's plan): its next hop's
 * MAC. */
static int xdp_retarget(struct inca_comm *c)
{
	struct xdp_state *x = c->tp_state;

	if (resolve_mac(c, x->dst_mac))
		return hl_fail(c, INCA_ERR_TRANSPORT, "the switch's MAC address did not "
			       "resolve (ARP on %s for 2 s)", c->ifname);
	return 0;
}

const struct hl_transport_ops hl_xdp_ops = {
	.name = "xdp", .host_pfc = true,
	/* one UMEM frame per packet (no XDP_USE_SG multi-buffer): 4096 less
	 * the 256-byte headroom holds IB MTU 2048's frames, not 4096's */
	.max_ib_mtu = 2048,
	.open = xdp_open,
	.close = xdp_close,
	.send = xdp_send,
	.recv = xdp_recv,
	.retarget = xdp_retarget,
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
