/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Local teams over POSIX shared memory (hl_team.h): the segment, joining
 * and its checks, the step counters and their futex waits.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hl_priv.h"
#include "hl_team.h"

#define TEAM_MAGIC 0x494e4354u   /* "INCT" */
#define TEAM_VERSION 5u

enum { ST_NEW = 0, ST_OPEN = 1, ST_READY = 2, ST_FAILED = 3 };

struct seg_rank {
	_Atomic int32_t pid;
	int32_t rank;                   /* global */
	_Atomic uint32_t cnt[HL_TEAM_COUNTERS];      /* steps done, per counter */
	_Atomic uint32_t waiters[HL_TEAM_COUNTERS];  /* sleepers on cnt[] */
	_Atomic int32_t cpu;            /* its one CPU + 1; 0: several (see spins_for) */
	uint8_t pad[20];
};
_Static_assert(sizeof(struct seg_rank) == 64, "one cache line per rank");

struct seg_hdr {
	uint32_t magic, version;
	int32_t lsize;
	_Atomic uint32_t state;         /* ST_* */
	_Atomic int32_t creator;        /* the leader's pid */
	_Atomic uint32_t joined;        /* ranks that have it mapped */
	uint64_t bytes;
	int32_t ndown;                  /* down areas: 1 (the leader's), or lsize */
	_Atomic uint32_t fail_claim;    /* 1: msg is being written by whoever claimed it */
	char msg[200];                  /* ST_FAILED: why */
	_Atomic uint32_t broken;        /* a rank gave up on the team: */
	char bmsg[200];                 /*   why */
	_Atomic uint32_t posts;         /* rails: every rank's posts, counted */
	_Atomic uint32_t posts_waiters; /* sleepers on posts */
};

struct hl_team {
	uint8_t *base;
	size_t bytes;
	int lrank, lsize, ndown;
	struct seg_hdr *hdr;
	struct seg_rank *ranks;
	struct hl_team_note *notes;     /* [HL_TEAM_SLOTS] */
	uint8_t *up, *down;
	int32_t cpu;                    /* this rank's one CPU + 1, or 0 */
};

/* A wait polls the counter of the rank it waits for TEAM_SPINS times
 * before it sleeps on it, unless both ranks are bound to the same one CPU:
 * then the rank it waits for can run only when this one stops, and polling
 * only keeps it off (8 ranks of 2 per host all pinned to one CPU of the
 * lab: a fifth of that CPU went to polling, and an 8 B all-reduce took
 * 255 us against 205-231 without). Each rank records its one CPU (plus 1;
 * 0: several, or not known) in its slot when it opens the team. */
#define TEAM_SPINS 256

static int32_t my_cpu_mark(void)
{
	int only;
	bool all;

	return hl_cpus_allowed(&only, &all) == 1 ? only + 1 : 0;
}

/* Polls before sleeping on local rank lrank (< 0: on any of the others) */
static int spins_for(struct hl_team *t, int lrank)
{
	if (!t->cpu)
		return TEAM_SPINS;
	for (int l = lrank < 0 ? 0 : lrank; l < (lrank < 0 ? t->lsize : lrank + 1); l++)
		if (l != t->lrank && atomic_load(&t->ranks[l].cpu) != t->cpu)
			return TEAM_SPINS;
	return 0;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#else
	__asm__ volatile("" ::: "memory");
#endif
}

static size_t align_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

static void layout(struct hl_team *t, uint8_t *base, int lsize, int ndown)
{
	size_t off = align_up(sizeof(struct seg_hdr), 64);

	t->base = base;
	t->hdr = (struct seg_hdr *)base;
	t->ranks = (struct seg_rank *)(base + off);
	off += sizeof(struct seg_rank) * (size_t)lsize;
	t->notes = (struct hl_team_note *)(base + align_up(off, 64));
	off = align_up(off, 64) + HL_TEAM_SLOTS * sizeof(struct hl_team_note);
	off = align_up(off, 4096);
	t->up = base + off;
	off += (size_t)lsize * HL_TEAM_SLOTS * HL_TEAM_CHUNK;
	t->down = base + off;
	off += (size_t)ndown * HL_TEAM_SLOTS * HL_TEAM_CHUNK;
	t->bytes = off;
}

static size_t seg_bytes(int lsize, int ndown)
{
	struct hl_team t;

	layout(&t, NULL, lsize, ndown);
	return t.bytes;
}

/* A process that exited is gone even while its parent has not reaped it
 * (a zombie still answers kill 0). */
static bool pid_alive(int32_t pid)
{
	char path[32], buf[256], *p;
	ssize_t n;
	int fd;

	if (pid <= 0 || (kill(pid, 0) && errno == ESRCH))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	/* "pid (comm) S ...": the state after the last ')' */
	p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val, double us)
{
	struct timespec ts = { .tv_sec = (time_t)(us / 1e6),
			       .tv_nsec = (long)((us - (double)(time_t)(us / 1e6) * 1e6) * 1e3) };

	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void nap(void)
{
	struct timespec ts = { 0, 500 * 1000 };

	nanosleep(&ts, NULL);
}

/* The leader: make the segment, reclaiming one a crashed job left. */
static int create_seg(const char *name, size_t bytes, double deadline_us, int *fdp, char *err,
		      size_t errlen)
{
	int32_t holder = 0;

	for (;;) {
		int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			/* the pages reserved now: on a full /dev/shm a sparse
			 * segment would kill the first rank to touch a page with
			 * SIGBUS */
			int e = posix_fallocate(fd, 0, (off_t)bytes);
			if (e) {
				snprintf(err, errlen, "shared memory %s: %zu bytes: %s (the size "
					 "of /dev/shm: df /dev/shm)", name, bytes, strerror(e));
				close(fd);
				shm_unlink(name);
				return INCA_ERR_NOMEM;
			}
			*fdp = fd;
			return 0;
		}
		if (errno != EEXIST) {
			snprintf(err, errlen, "shared memory %s: %s", name, strerror(errno));
			return INCA_ERR_TRANSPORT;
		}
		/* someone's: a running job's, or one a crash left */
		fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
		if (fd >= 0) {
			struct stat st;
			bool stale = false;
			if (!fstat(fd, &st)) {
				if ((size_t)st.st_size < sizeof(struct seg_hdr)) {
					stale = time(NULL) - st.st_mtime > 2;
				} else {
					struct seg_hdr *h = mmap(NULL, sizeof(*h), PROT_READ,
								 MAP_SHARED, fd, 0);
					if (h != MAP_FAILED) {
						holder = atomic_load(&h->creator);
						stale = !pid_alive(holder) &&
							(holder || time(NULL) - st.st_mtime > 2);
						munmap(h, sizeof(*h));
					}
				}
			}
			close(fd);
			if (stale) {
				HL_INFO("shared memory %s: left by a process that is gone (pid %d): "
					"reclaimed", name, (int)holder);
				shm_unlink(name);
				continue;
			}
		}
		if (hl_clock_us(NULL) > deadline_us) {
			snprintf(err, errlen, "shared memory %s is held by running process %d "
				 "(another job with the same name and host?)", name, (int)holder);
			return INCA_ERR_TIMEOUT;
		}
		nap();
	}
}

static int map_seg(struct hl_team *t, int fd, const char *name, char *err, size_t errlen)
{
	size_t bytes = seg_bytes(t->lsize, t->ndown);
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED) {
		snprintf(err, errlen, "shared memory %s: mmap %zu bytes: %s", name, bytes,
			 strerror(errno));
		return INCA_ERR_NOMEM;
	}
	layout(t, p, t->lsize, t->ndown);
	return 0;
}

/* Wait for *w to reach until_val, while joining: 1, 0 at the deadline,
 * INCA_ERR_PEER when pid is gone, INCA_ERR_CONFIG when refused (not NULL)
 * turns ST_FAILED (a joiner refused the team). */
static int wait_word(_Atomic uint32_t *w, uint32_t until_val, int32_t pid, double deadline_us,
		     _Atomic uint32_t *refused)
{
	for (;;) {
		uint32_t v = atomic_load(w);
		if (v >= until_val)
			return 1;
		if (refused && atomic_load(refused) == ST_FAILED)
			return INCA_ERR_CONFIG;
		if (pid && !pid_alive(pid))
			return INCA_ERR_PEER;
		double now = hl_clock_us(NULL);
		if (now >= deadline_us)
			return 0;
		futex_wait(w, v, deadline_us - now < 20000 ? deadline_us - now : 20000);
	}
}

/* Fail an open team, saying why: the first to claim the header's message
 * writes it and then publishes ST_FAILED; whoever comes after leaves both
 * alone. Local rank 0 does it when the team cannot be made, a joiner when
 * the team is not the one it expects (so that local rank 0 and the ranks
 * that joined fail at once, not at their deadline). */
static void team_fail(struct seg_hdr *h, const char *why)
{
	uint32_t unclaimed = 0, open = ST_OPEN;

	if (atomic_load(&h->state) != ST_OPEN ||
	    !atomic_compare_exchange_strong(&h->fail_claim, &unclaimed, 1))
		return;
	snprintf(h->msg, sizeof(h->msg), "%s", why);
	if (atomic_compare_exchange_strong(&h->state, &open, ST_FAILED)) {
		futex_wake(&h->joined);
		futex_wake(&h->state);
	}
}

/* The same through a segment this rank has not mapped: only for one of
 * this version, whose header this rank knows. */
static void refuse(int fd, const char *why)
{
	struct seg_hdr *h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (h == MAP_FAILED)
		return;
	team_fail(h, why);
	munmap(h, sizeof(*h));
}

static int lead(struct hl_team *t, const char *name, const int *ranks, int my_rank,
		double deadline_us, char *err, size_t errlen)
{
	int fd, rc = create_seg(name, seg_bytes(t->lsize, t->ndown), deadline_us, &fd, err,
				errlen);

	if (rc)
		return rc;
	rc = map_seg(t, fd, name, err, errlen);
	close(fd);
	if (rc) {
		shm_unlink(name);
		return rc;
	}
	t->hdr->magic = TEAM_MAGIC;
	t->hdr->version = TEAM_VERSION;
	t->hdr->lsize = t->lsize;
	t->hdr->ndown = t->ndown;
	t->hdr->bytes = t->bytes;
	atomic_store(&t->ranks[0].pid, (int32_t)getpid());
	t->ranks[0].rank = my_rank;
	atomic_store(&t->ranks[0].cpu, t->cpu);
	atomic_store(&t->hdr->creator, (int32_t)getpid());
	atomic_store(&t->hdr->joined, 1);
	atomic_store(&t->hdr->state, ST_OPEN);
	rc = wait_word(&t->hdr->joined, (uint32_t)t->lsize, 0, deadline_us, &t->hdr->state);
	if (rc == INCA_ERR_CONFIG) {
		/* a joiner refused it and said why in msg; the others see it */
		snprintf(err, errlen, "local team %s: %.200s", name, t->hdr->msg);
		shm_unlink(name);
		return rc;
	}
	if (rc != 1) {
		int n = 0;
		char *p = err;
		n = snprintf(p, errlen, "local ranks missing at the deadline (%d of %d joined "
			     "%s):", (int)atomic_load(&t->hdr->joined), t->lsize, name);
		for (int l = 1; l < t->lsize && n > 0 && (size_t)n < errlen; l++)
			if (!atomic_load(&t->ranks[l].pid))
				n += snprintf(p + n, errlen - (size_t)n, " %d", ranks[l]);
		rc = INCA_ERR_TIMEOUT;
		goto fail;
	}
	for (int l = 1; l < t->lsize; l++)
		if (t->ranks[l].rank != ranks[l]) {
			snprintf(err, errlen, "local rank %d of this host is rank %d, the layout "
				 "says rank %d (ranks must be numbered host by host)", l,
				 t->ranks[l].rank, ranks[l]);
			rc = INCA_ERR_CONFIG;
			goto fail;
		}
	shm_unlink(name);
	uint32_t open = ST_OPEN;
	if (!atomic_compare_exchange_strong(&t->hdr->state, &open, ST_READY)) {
		/* refused at the last moment by a rank that does not count */
		snprintf(err, errlen, "local team %s: %.200s", name, t->hdr->msg);
		return INCA_ERR_CONFIG;
	}
	futex_wake(&t->hdr->state);
	return 0;
fail: {
	char why[200];
	snprintf(why, sizeof(why), "local rank 0: %s", err);
	team_fail(t->hdr, why);      /* unless a joiner refused it first */
	shm_unlink(name);
	return rc;
}
}

static int join(struct hl_team *t, const char *name, int my_rank, double deadline_us,
		char *err, size_t errlen)
{
	int32_t creator = 0;
	int rc;

	for (;; nap()) {
		if (hl_clock_us(NULL) > deadline_us) {
			snprintf(err, errlen, "shared memory %s: local rank 0 (pid %d) did not "
				 "make it by the deadline", name, (int)creator);
			return INCA_ERR_TIMEOUT;
		}
		int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
		struct stat st;
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			snprintf(err, errlen, "shared memory %s: %s", name, strerror(errno));
			return INCA_ERR_TRANSPORT;
		}
		if (fstat(fd, &st) || (size_t)st.st_size < sizeof(struct seg_hdr)) {
			close(fd);
			continue;
		}
		/* the header first: made for this team, and done? */
		struct seg_hdr *h = mmap(NULL, sizeof(*h), PROT_READ, MAP_SHARED, fd, 0);
		if (h == MAP_FAILED) {
			close(fd);
			continue;
		}
		creator = atomic_load(&h->creator);
		uint32_t state = atomic_load(&h->state);
		bool mine = h->magic == TEAM_MAGIC && h->version == TEAM_VERSION;
		bool open = state == ST_OPEN && h->magic == TEAM_MAGIC && pid_alive(creator);
		if (mine && state == ST_FAILED && pid_alive(creator)) {
			/* failed before this rank came: say why now */
			snprintf(err, errlen, "local team %s failed: %.180s", name, h->msg);
			munmap(h, sizeof(*h));
			close(fd);
			return INCA_ERR_CONFIG;
		}
		struct seg_hdr hc = *h;
		munmap(h, sizeof(*h));
		if (!open) {
			/* not made yet, or left by a crash: the leader replaces it */
			close(fd);
			continue;
		}
		if (hc.version != TEAM_VERSION || hc.lsize != t->lsize || hc.ndown != t->ndown) {
			snprintf(err, errlen, "shared memory %s: local rank 0 made it for %d local "
				 "ranks, %s (version %u); local rank %d expects %d, %s (version "
				 "%u): the ranks of one host must have the same layout and "
				 "INCA_HIER", name, hc.lsize, hc.ndown > 1 ? "rails" : "one leader",
				 hc.version, t->lrank,
				 t->lsize, t->ndown > 1 ? "rails" : "one leader", TEAM_VERSION);
			if (hc.version == TEAM_VERSION) {
				char why[200];
				snprintf(why, sizeof(why), "local rank %d expects %d local ranks, "
					 "%s; the team is for %d, %s: the ranks of one host must "
					 "have the same layout and INCA_HIER", t->lrank, t->lsize,
					 t->ndown > 1 ? "rails" : "one leader", hc.lsize,
					 hc.ndown > 1 ? "rails" : "one leader");
				refuse(fd, why);
			}
			close(fd);
			return INCA_ERR_CONFIG;
		}
		if ((size_t)st.st_size < seg_bytes(t->lsize, t->ndown)) {
			close(fd);
			continue;
		}
		rc = map_seg(t, fd, name, err, errlen);
		close(fd);
		if (rc)
			return rc;
		break;
	}
	int32_t zero = 0;
	struct seg_rank *me = &t->ranks[t->lrank];
	if (!atomic_compare_exchange_strong(&me->pid, &zero, (int32_t)getpid())) {
		snprintf(err, errlen, "local rank %d of %s is taken by pid %d (two ranks with the "
			 "same number?)", t->lrank, name, (int)zero);
		char why[200];
		snprintf(why, sizeof(why), "local rank %d came twice (pids %d and %d)", t->lrank,
			 (int)zero, (int)getpid());
		team_fail(t->hdr, why);
		return INCA_ERR_CONFIG;
	}
	me->rank = my_rank;
	atomic_store(&me->cpu, t->cpu);
	atomic_fetch_add(&t->hdr->joined, 1);
	futex_wake(&t->hdr->joined);
	rc = wait_word(&t->hdr->state, ST_READY, creator, deadline_us, NULL);
	if (rc == 1 && atomic_load(&t->hdr->state) == ST_READY)
		return 0;
	if (rc == INCA_ERR_PEER) {
		snprintf(err, errlen, "local rank 0 (pid %d) is gone", (int)creator);
		return rc;
	}
	if (rc == 0) {
		snprintf(err, errlen, "local rank 0 did not see every local rank by the deadline");
		return INCA_ERR_TIMEOUT;
	}
	snprintf(err, errlen, "local team %s failed: %.180s", name, t->hdr->msg);
	return INCA_ERR_CONFIG;
}

int hl_team_open(const char *name, int lrank, int lsize, bool rails, const int *ranks,
		 int my_rank, double deadline_us, struct hl_team **out, char *err, size_t errlen)
{
	struct hl_team *t;
	int rc;

	*out = NULL;
	if (lsize < 1 || lsize > HL_TEAM_MAX || lrank < 0 || lrank >= lsize) {
		snprintf(err, errlen, "local rank %d of %d: need 0 <= local rank < local size <= "
			 "%d", lrank, lsize, HL_TEAM_MAX);
		return INCA_ERR_CONFIG;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return INCA_ERR_NOMEM;
	}
	t->lrank = lrank;
	t->lsize = lsize;
	t->ndown = rails ? lsize : 1;
	t->cpu = my_cpu_mark();
	rc = lrank == 0 ? lead(t, name, ranks, my_rank, deadline_us, err, errlen) :
			  join(t, name, my_rank, deadline_us, err, errlen);
	if (rc) {
		hl_team_close(t);
		return rc;
	}
	*out = t;
	return 0;
}

void hl_team_close(struct hl_team *t)
{
	if (!t)
		return;
	if (t->base)
		munmap(t->base, t->bytes);
	free(t);
}

uint8_t *hl_team_buf(struct hl_team *t, enum hl_team_stream st, int lrank, uint32_t s)
{
	if (st == HL_TEAM_DOWN)
		return t->down + ((size_t)(lrank < t->ndown ? lrank : 0) * HL_TEAM_SLOTS +
				  s % HL_TEAM_SLOTS) * HL_TEAM_CHUNK;
	return t->up + ((size_t)lrank * HL_TEAM_SLOTS + s % HL_TEAM_SLOTS) * HL_TEAM_CHUNK;
}

struct hl_team_note *hl_team_note(struct hl_team *t, uint32_t s)
{
	return &t->notes[s % HL_TEAM_SLOTS];
}

void hl_team_post_one(struct hl_team *t, enum hl_team_stream counter, uint32_t s)
{
	struct seg_rank *me = &t->ranks[t->lrank];

	atomic_store(&me->cnt[counter], s + 1);
	if (atomic_load(&me->waiters[counter]))
		futex_wake(&me->cnt[counter]);
	if (t->ndown > 1) {
		atomic_fetch_add(&t->hdr->posts, 1);
		if (atomic_load(&t->hdr->posts_waiters))
			futex_wake(&t->hdr->posts);
	}
}

void hl_team_post(struct hl_team *t, enum hl_team_stream st, uint32_t s)
{
	/* the reader's first: a rank that sees the writer's counter pass s
	 * may look at the reader's next */
	hl_team_post_one(t, st == HL_TEAM_UP ? HL_TEAM_UP_READ : HL_TEAM_DOWN_READ, s);
	hl_team_post_one(t, st, s);
}

int hl_team_reached(struct hl_team *t, enum hl_team_stream st, int lrank, uint32_t n)
{
	return (int32_t)(atomic_load_explicit(&t->ranks[lrank].cnt[st], memory_order_acquire) -
			 n) >= 0;
}

/* What a wait waits for: local rank lrank's counter of a stream at n, or
 * (lrank < 0) the team's post count past n. */
static bool wait_done(struct hl_team *t, enum hl_team_stream st, int lrank, uint32_t n)
{
	return lrank >= 0 ? hl_team_reached(t, st, lrank, n) != 0 :
			    atomic_load(&t->hdr->posts) != n;
}

/* Spin a little, then sleep on the word until done, until_us (0), or rank
 * who is gone or the team broken (INCA_ERR_PEER). */
static int sleep_until(struct hl_team *t, _Atomic uint32_t *word, _Atomic uint32_t *waiters,
		       enum hl_team_stream st, int lrank, uint32_t n, int who, double until_us,
		       char *err, size_t errlen)
{
	for (int i = spins_for(t, lrank); i > 0; i--) {
		if (wait_done(t, st, lrank, n))
			return 1;
		cpu_relax();
	}
	for (;;) {
		double now = hl_clock_us(NULL);
		if (now >= until_us)
			return 0;
		atomic_fetch_add(waiters, 1);
		uint32_t v = atomic_load(word);
		if (!wait_done(t, st, lrank, n))
			futex_wait(word, v, until_us - now < 20000 ? until_us - now : 20000);
		atomic_fetch_sub(waiters, 1);
		if (wait_done(t, st, lrank, n))
			return 1;
		int rc = hl_team_check(t, who, err, errlen);
		if (rc)
			return rc;
	}
}

int hl_team_wait(struct hl_team *t, enum hl_team_stream st, int lrank, uint32_t n,
		 double until_us, char *err, size_t errlen)
{
	struct seg_rank *r = &t->ranks[lrank];

	return sleep_until(t, &r->cnt[st], &r->waiters[st], st, lrank, n, lrank, until_us, err,
			   errlen);
}

uint32_t hl_team_posts(struct hl_team *t)
{
	return atomic_load(&t->hdr->posts);
}

int hl_team_wait_post(struct hl_team *t, uint32_t seen, int lrank, double until_us, char *err,
		      size_t errlen)
{
	return sleep_until(t, &t->hdr->posts, &t->hdr->posts_waiters, HL_TEAM_UP, -1, seen, lrank,
			   until_us, err, errlen);
}

/* The team's break, if a rank gave up: its reason in err */
static int broken(struct hl_team *t, char *err, size_t errlen)
{
	uint32_t b = atomic_load(&t->hdr->broken);

	if (!b)
		return 0;
	snprintf(err, errlen, "%.190s", b == 2 ? t->hdr->bmsg : "another local rank gave up");
	return INCA_ERR_PEER;
}

int hl_team_check(struct hl_team *t, int lrank, char *err, size_t errlen)
{
	struct seg_rank *r = &t->ranks[lrank];
	int rc = broken(t, err, errlen);

	if (rc)
		return rc;
	int32_t pid = atomic_load(&r->pid);
	if (!pid_alive(pid)) {
		/* it may have given up, said why and left since the look
		 * above: its reason, not only that it is gone (unit hier's
		 * dead-rank case failed so, 1 run in 7 under ASan) */
		if ((rc = broken(t, err, errlen)))
			return rc;
		snprintf(err, errlen, "local rank %d (rank %d, pid %d) is gone", lrank, r->rank,
			 (int)pid);
		return INCA_ERR_PEER;
	}
	return 0;
}

void hl_team_break(struct hl_team *t, const char *why)
{
	uint32_t zero = 0;

	/* claimed (1), its reason written, then published (2) */
	if (!t || !atomic_compare_exchange_strong(&t->hdr->broken, &zero, 1))
		return;
	snprintf(t->hdr->bmsg, sizeof(t->hdr->bmsg), "local rank %d gave up: %.170s",
		 t->lrank, why);
	atomic_store(&t->hdr->broken, 2);
	/* the sleepers look at it when they wake */
	for (int l = 0; l < t->lsize; l++)
		for (int st = 0; st < HL_TEAM_COUNTERS; st++)
			futex_wake(&t->ranks[l].cnt[st]);
}
