/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Several ranks per host (hl_hier.c, hl_team.c) without a network: the
 * ranks of one host as forked processes on a static group of one host, so
 * that every collective is the local phases alone. Exact results for
 * every collective, several dtypes and ops, multi-chunk sizes, in place,
 * nonblocking out of order; a rank that dies, a rank that is late (its
 * peers sleep, not spin), stale segments reclaimed, nothing left in
 * /dev/shm; and the layout's sources.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hl_priv.h"
#include "hl_team.h"

static char cfg_path[64];
static unsigned job_no;
static inca_hier_t hier_mode;     /* the ranks' INCA_HIER (forked: inherited) */

/* a static group of one host (its leader), size ranks on it */
static void write_cfg(void)
{
	snprintf(cfg_path, sizeof(cfg_path), "/tmp/inca-test-hier-%d.json", (int)getpid());
	FILE *f = fopen(cfg_path, "w");
	assert_non_null(f);
	fprintf(f, "{\"switch\": \"127.0.0.1\", \"group\": 7, \"qpn\": 256, \"qkey\": 1, "
		"\"window\": 4, \"elems_per_pkt\": 256, \"members\": "
		"[{\"ip\": \"127.0.0.1\", \"qpn\": 300}]}\n");
	fclose(f);
}

static int count_shm(void)
{
	char prefix[32];
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int n = 0;

	snprintf(prefix, sizeof(prefix), "inca-%u-", (unsigned)getuid());
	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "rank check failed (%s:%d): ", \
	__FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); fails++; } } while (0)

static inca_comm_t *make(int rank, int size, const char *job, unsigned timeout_ms)
{
	struct inca_comm_attr a = { .rank = rank, .size = size, .job = job,
				    .config_file = cfg_path, .timeout_ms = timeout_ms,
				    .hier = hier_mode };
	inca_comm_t *c = NULL;
	int rc = inca_comm_create(&a, &c);

	if (rc)
		fprintf(stderr, "rank %d: create: %s: %s\n", rank, inca_strerror(rc),
			inca_last_errmsg());
	return c;
}

/* Run body in size forked ranks; each exits with its failure count. */
typedef void (*body_fn)(int rank, int size, const char *job);

static void run_ranks(int size, body_fn body, int expect_fail_rank)
{
	char job[64];
	pid_t pid[16];

	snprintf(job, sizeof(job), "hier-%d-%u", (int)getpid(), job_no++);
	for (int r = 0; r < size; r++) {
		pid[r] = fork();
		assert_true(pid[r] >= 0);
		if (pid[r] == 0) {
			alarm(60);
			fails = 0;
			body(r, size, job);
			_exit(fails ? 1 : 0);
		}
	}
	for (int r = 0; r < size; r++) {
		int st;
		assert_int_equal(waitpid(pid[r], &st, 0), pid[r]);
		assert_true(WIFEXITED(st));
		if (r != expect_fail_rank)
			assert_int_equal(WEXITSTATUS(st), 0);
	}
}

static float f32_in(int r, size_t i)
{
	return (float)(r * 1000 + (int)(i % 97));
}

static void body_collectives(int rank, int P, const char *job)
{
	inca_comm_t *c = make(rank, P, job, 20000);
	static const size_t counts[] = { 1, 7, 70000, 200000 };
	unsigned calls = 0, rails = 0;
	/* the calls that take the rails: every kind, from INCA_RAIL_MIN_BYTES
	 * (of the vector; a reduce-scatter's input, an allgather's output) */
	const char *rm = getenv("INCA_RAIL_MIN_BYTES");
	size_t rail_min = rm ? strtoull(rm, NULL, 10) : 262144;
#define RAILS(bytes) (rails += hier_mode == INCA_HIER_RAILS && (bytes) >= rail_min)

	if (!c) {
		fails++;
		return;
	}
	CHECK(inca_comm_size(c) == P && inca_comm_rank(c) == rank, "rank/size");
	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
		size_t n = counts[ci];
		float *x = malloc(n * 4), *y = malloc(n * 4);
		uint16_t *h = malloc(n * 2);
		int32_t *k = malloc(n * 4);
		int64_t *l = malloc(n * 8);
		double *d = malloc(n * 8);

		/* fp32 sum, out of place and in place */
		for (size_t i = 0; i < n; i++)
			x[i] = f32_in(rank, i);
		CHECK(!inca_allreduce(c, x, y, n, INCA_FLOAT32, INCA_SUM), "%s", inca_comm_errmsg(c));
		calls++;
		RAILS(n * 4);
		for (size_t i = 0; i < n; i++) {
			float e = 0;
			for (int r = 0; r < P; r++)
				e += f32_in(r, i);
			if (y[i] != e) {
				CHECK(0, "fp32 sum n %zu [%zu]: %g, want %g", n, i, y[i], e);
				break;
			}
		}
		CHECK(!inca_allreduce(c, INCA_IN_PLACE, x, n, INCA_FLOAT32, INCA_SUM), "in place");
		calls++;
		RAILS(n * 4);
		CHECK(!memcmp(x, y, n * 4), "fp32 sum in place differs");
		/* fp16 sum: small integers, exact; rounding of the sum once */
		for (size_t i = 0; i < n; i++)
			h[i] = agg_fp32_to_fp16((float)(rank + 1 + (int)(i % 7)));
		CHECK(!inca_allreduce(c, INCA_IN_PLACE, h, n, INCA_FLOAT16, INCA_SUM), "fp16");
		calls++;
		RAILS(n * 2);
		for (size_t i = 0; i < n; i++) {
			float e = (float)(P * (P + 1) / 2 + P * (int)(i % 7));
			if (agg_fp16_to_fp32(h[i]) != e) {
				CHECK(0, "fp16 sum [%zu]: %g, want %g", i, agg_fp16_to_fp32(h[i]), e);
				break;
			}
		}
		/* bf16 max */
		for (size_t i = 0; i < n; i++)
			h[i] = agg_fp32_to_bf16((float)((rank * 7 + (int)i) % 11) - 5.0f);
		CHECK(!inca_allreduce(c, INCA_IN_PLACE, h, n, INCA_BFLOAT16, INCA_MAX), "bf16");
		calls++;
		RAILS(n * 2);
		for (size_t i = 0; i < n; i++) {
			int e = -100;
			for (int r = 0; r < P; r++)
				e = (r * 7 + (int)i) % 11 - 5 > e ? (r * 7 + (int)i) % 11 - 5 : e;
			if (agg_bf16_to_fp32(h[i]) != (float)e) {
				CHECK(0, "bf16 max [%zu]: %g, want %d", i, agg_bf16_to_fp32(h[i]), e);
				break;
			}
		}
		/* int32 band, int64 sum, fp64 prod */
		for (size_t i = 0; i < n; i++) {
			k[i] = (int32_t)(0x7fffffff ^ (1u << ((unsigned)(rank + i) % 31)));
			l[i] = (int64_t)rank * 10000000000LL + (int64_t)i;
			d[i] = (rank + i) % 3 ? 2.0 : 0.5;
		}
		CHECK(!inca_allreduce(c, INCA_IN_PLACE, k, n, INCA_INT32, INCA_BAND), "band");
		CHECK(!inca_allreduce(c, INCA_IN_PLACE, l, n, INCA_INT64, INCA_SUM), "int64");
		CHECK(!inca_allreduce(c, INCA_IN_PLACE, d, n, INCA_FLOAT64, INCA_PROD), "fp64");
		calls += 3;
		RAILS(n * 4);
		RAILS(n * 8);
		RAILS(n * 8);
		for (size_t i = 0; i < n; i++) {
			int32_t ek = 0x7fffffff;
			int64_t el = 0;
			double ed = 1;
			for (int r = 0; r < P; r++) {
				ek &= (int32_t)(0x7fffffff ^ (1u << ((unsigned)(r + i) % 31)));
				el += (int64_t)r * 10000000000LL + (int64_t)i;
				ed *= (r + i) % 3 ? 2.0 : 0.5;
			}
			if (k[i] != ek || l[i] != el || d[i] != ed) {
				CHECK(0, "int32/int64/fp64 [%zu]: %d %lld %g, want %d %lld %g", i,
				      k[i], (long long)l[i], d[i], ek, (long long)el, ed);
				break;
			}
		}
		/* reduce to every root, the others' recvbuf NULL */
		for (int root = 0; root < P; root++) {
			for (size_t i = 0; i < n; i++)
				x[i] = f32_in(rank, i);
			memset(y, 0, n * 4);
			CHECK(!inca_reduce(c, x, rank == root ? y : NULL, n, INCA_FLOAT32, INCA_SUM,
					   root), "reduce %d: %s", root, inca_comm_errmsg(c));
			calls++;
			RAILS(n * 4);
			for (size_t i = 0; rank == root && i < n; i++) {
				float e = 0;
				for (int r = 0; r < P; r++)
					e += f32_in(r, i);
				if (y[i] != e) {
					CHECK(0, "reduce root %d [%zu]: %g want %g", root, i, y[i], e);
					break;
				}
			}
		}
		/* bcast from every root */
		for (int root = 0; root < P; root++) {
			for (size_t i = 0; i < n; i++)
				k[i] = rank == root ? (int32_t)(root * 1000003 + (int)i) : -1;
			CHECK(!inca_bcast(c, k, n, INCA_INT32, root), "bcast %d", root);
			calls++;
			RAILS(n * 4);
			for (size_t i = 0; i < n; i++)
				if (k[i] != (int32_t)(root * 1000003 + (int)i)) {
					CHECK(0, "bcast root %d [%zu]: %d", root, i, k[i]);
					break;
				}
		}
		/* fp16 reduce to the last rank, in place there: summed in fp32,
		 * rounded once */
		for (size_t i = 0; i < n; i++)
			h[i] = agg_fp32_to_fp16((float)(rank + 1 + (int)(i % 7)));
		CHECK(!inca_reduce(c, rank == P - 1 ? INCA_IN_PLACE : h, rank == P - 1 ? h : NULL, n,
				   INCA_FLOAT16, INCA_SUM, P - 1), "fp16 reduce: %s", inca_comm_errmsg(c));
		calls++;
		RAILS(n * 2);
		for (size_t i = 0; rank == P - 1 && i < n; i++) {
			float e = (float)(P * (P + 1) / 2 + P * (int)(i % 7));
			if (agg_fp16_to_fp32(h[i]) != e) {
				CHECK(0, "fp16 reduce [%zu]: %g, want %g", i, agg_fp16_to_fp32(h[i]), e);
				break;
			}
		}
		free(x);
		free(y);
		free(h);
		free(k);
		free(l);
		free(d);
	}
	/* reduce-scatter and allgather, several chunks, in place too */
	size_t n = 30000;
	float *all = malloc(n * (size_t)P * 4), *mine = malloc(n * 4);
	int32_t *g = malloc(n * (size_t)P * 4), *gi = malloc(n * 4);
	for (int inplace = 0; inplace < 2; inplace++) {
		for (size_t i = 0; i < n * (size_t)P; i++)
			all[i] = f32_in(rank, i);
		CHECK(!inca_reduce_scatter(c, inplace ? INCA_IN_PLACE : all, inplace ? all : mine, n,
					   INCA_FLOAT32, INCA_SUM), "reduce_scatter");
		calls++;
		RAILS(n * (size_t)P * 4);
		float *res = inplace ? all : mine;
		for (size_t i = 0; i < n; i++) {
			float e = 0;
			for (int r = 0; r < P; r++)
				e += f32_in(r, (size_t)rank * n + i);
			if (res[i] != e) {
				CHECK(0, "reduce_scatter [%zu]: %g want %g", i, res[i], e);
				break;
			}
		}
		/* fp16: summed in fp32, rounded once into the caller's block */
		uint16_t *hin = malloc(n * (size_t)P * 2), *hout = malloc(n * 2);
		for (size_t i = 0; i < n * (size_t)P; i++)
			hin[i] = agg_fp32_to_fp16((float)(rank + 1 + (int)(i % 7)));
		CHECK(!inca_reduce_scatter(c, inplace ? INCA_IN_PLACE : hin, inplace ? hin : hout, n,
					   INCA_FLOAT16, INCA_SUM), "fp16 reduce_scatter");
		calls++;
		RAILS(n * (size_t)P * 2);
		for (size_t i = 0; i < n; i++) {
			float e = (float)(P * (P + 1) / 2 + P * (int)(((size_t)rank * n + i) % 7));
			float got = agg_fp16_to_fp32((inplace ? hin : hout)[i]);
			if (got != e) {
				CHECK(0, "fp16 reduce_scatter [%zu]: %g want %g", i, got, e);
				break;
			}
		}
		free(hin);
		free(hout);
		for (size_t i = 0; i < n; i++)
			gi[i] = rank * 100000 + (int32_t)i;
		memset(g, 0xff, n * (size_t)P * 4);
		if (inplace)
			memcpy(g + (size_t)rank * n, gi, n * 4);
		CHECK(!inca_allgather(c, inplace ? INCA_IN_PLACE : gi, g, n, INCA_INT32), "allgather");
		calls++;
		RAILS(n * (size_t)P * 4);
		for (size_t i = 0; i < n * (size_t)P; i++)
			if (g[i] != (int32_t)(i / n) * 100000 + (int32_t)(i % n)) {
				CHECK(0, "allgather [%zu]: %d", i, g[i]);
				break;
			}
	}
	free(all);
	free(mine);
	free(g);
	free(gi);
	CHECK(!inca_barrier(c), "barrier: %s", inca_comm_errmsg(c));
	calls++;
	RAILS(4);   /* an all-reduce of one int32 */
	/* nonblocking: 8 in flight, completed in reverse order, two of them
	 * by inca_test */
	int32_t v[8][1000];
	inca_request_t *req[8];
	for (int j = 0; j < 8; j++) {
		for (int i = 0; i < 1000; i++)
			v[j][i] = (rank + 1) * (j + 1) + i;
		CHECK(!inca_iallreduce(c, INCA_IN_PLACE, v[j], 1000, INCA_INT32, INCA_SUM, &req[j]),
		      "iallreduce %d", j);
		calls++;
		RAILS(4000);
	}
	for (int j = 7; j >= 0; j--) {
		int done = 0, rc = 0;
		if (j >= 6) {
			for (int t = 0; t < 100000 && !done; t++)
				rc = inca_test_timeout(req[j], 1000, &done);
			CHECK(done && !rc, "test %d: done %d rc %d", j, done, rc);
		} else {
			CHECK(!inca_wait(req[j]), "wait %d", j);
		}
		for (int i = 0; i < 1000; i++)
			if (v[j][i] != P * (P + 1) / 2 * (j + 1) + P * i) {
				CHECK(0, "iallreduce %d [%d]: %d", j, i, v[j][i]);
				break;
			}
	}
	/* as many small ones in flight as libinca takes, more than the
	 * team's HL_TEAM_SLOTS steps: the writers wait for a slot, none is
	 * overwritten before it is read */
	int32_t w[INCA_MAX_INFLIGHT][2];
	inca_request_t *wr[INCA_MAX_INFLIGHT];
	_Static_assert(INCA_MAX_INFLIGHT > HL_TEAM_SLOTS, "more in flight than slots");
	for (int j = 0; j < INCA_MAX_INFLIGHT; j++) {
		w[j][0] = rank * 1000 + j;
		w[j][1] = -j;
		CHECK(!inca_iallreduce(c, INCA_IN_PLACE, w[j], 2, INCA_INT32, INCA_MAX, &wr[j]),
		      "small iallreduce %d", j);
		calls++;
		RAILS(8);
	}
	for (int j = INCA_MAX_INFLIGHT - 1; j >= 0; j--) {
		CHECK(!inca_wait(wr[j]), "small wait %d", j);
		CHECK(w[j][0] == (P - 1) * 1000 + j && w[j][1] == -j, "small iallreduce %d: %d %d",
		      j, w[j][0], w[j][1]);
	}
	struct inca_stats st;
	CHECK(!inca_comm_stats(c, &st), "stats");
	CHECK(st.rail_calls == rails, "stats: %llu calls on the rails, want %u",
	      (unsigned long long)st.rail_calls, rails);
#undef RAILS
	CHECK(st.collectives == calls && st.hier_calls == calls && st.fallbacks == 0 &&
	      st.packets_sent == 0, "stats: %llu collectives, %llu hier, want %u",
	      (unsigned long long)st.collectives, (unsigned long long)st.hier_calls, calls);
	CHECK(st.local_bytes > 0, "no local bytes");
	inca_comm_destroy(c);
}

static void test_collectives(void **state)
{
	(void)state;
	int before = count_shm();
	run_ranks(3, body_collectives, -1);
	run_ranks(2, body_collectives, -1);
	assert_int_equal(count_shm(), before);
}

/* Rails on one host: every collective from INCA_RAIL_MIN_BYTES up is split
 * over the local ranks, by steps (k mod P: all-reduce, reduce, bcast) or
 * by blocks (reduce-scatter, allgather), and gathered from every rank's
 * down buffers; the rest as with one leader. The same exact checks (and
 * the count of calls on the rails), with 3 ranks (32 slots not a multiple
 * of P) and 4; then with every call on the rails (a vector of fewer steps
 * than ranks, more small ones in flight than slots). */
static void test_collectives_rails(void **state)
{
	(void)state;
	int before = count_shm();
	hier_mode = INCA_HIER_RAILS;
	run_ranks(3, body_collectives, -1);
	run_ranks(4, body_collectives, -1);
	setenv("INCA_RAIL_MIN_BYTES", "0", 1);
	run_ranks(3, body_collectives, -1);
	unsetenv("INCA_RAIL_MIN_BYTES");
	hier_mode = INCA_HIER_AUTO;
	assert_int_equal(count_shm(), before);
}

/* Two in flight, started and completed in different orders on different
 * ranks: rank 0 waits for the first before it starts the second, the
 * others start both first (the oldest collective's wait goes first) */
static void body_asym(int rank, int P, const char *job)
{
	inca_comm_t *c = make(rank, P, job, 20000);
	size_t n = 1u << 20;
	float *a = malloc(n * 4), *b = malloc(n * 4);
	inca_request_t *ra, *rb;

	if (!c || !a || !b) {
		fails++;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		a[i] = f32_in(rank, i);
		b[i] = (float)(rank + 1);
	}
	if (rank == 0) {
		CHECK(!inca_iallreduce(c, INCA_IN_PLACE, a, n, INCA_FLOAT32, INCA_SUM, &ra), "a");
		CHECK(!inca_wait(ra), "wait a");
		CHECK(!inca_iallreduce(c, INCA_IN_PLACE, b, n, INCA_FLOAT32, INCA_SUM, &rb), "b");
		CHECK(!inca_wait(rb), "wait b");
	} else {
		CHECK(!inca_iallreduce(c, INCA_IN_PLACE, a, n, INCA_FLOAT32, INCA_SUM, &ra), "a");
		CHECK(!inca_iallreduce(c, INCA_IN_PLACE, b, n, INCA_FLOAT32, INCA_SUM, &rb), "b");
		CHECK(!inca_wait(ra), "wait a");
		CHECK(!inca_wait(rb), "wait b");
	}
	for (size_t i = 0; i < n; i++) {
		float e = 0;
		for (int r = 0; r < P; r++)
			e += f32_in(r, i);
		if (a[i] != e || b[i] != (float)(P * (P + 1) / 2)) {
			CHECK(0, "asym [%zu]: %g %g", i, a[i], b[i]);
			break;
		}
	}
	free(a);
	free(b);
	inca_comm_destroy(c);
}

static void test_asymmetric_order(void **state)
{
	(void)state;
	run_ranks(3, body_asym, -1);
	hier_mode = INCA_HIER_RAILS;
	run_ranks(3, body_asym, -1);
	hier_mode = INCA_HIER_AUTO;
}

/* rank P-1 dies after joining: the others fail with INCA_ERR_PEER, soon */
static void body_dead(int rank, int P, const char *job)
{
	inca_comm_t *c = make(rank, P, job, 20000);
	float x[64] = { 0 };
	struct timespec t0, t1;

	if (!c) {
		fails++;
		return;
	}
	if (rank == P - 1)
		_exit(3);
	usleep(100 * 1000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = inca_allreduce(c, INCA_IN_PLACE, x, 64, INCA_FLOAT32, INCA_SUM);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* the leader waits on the dead rank; a local rank waits on the
	 * leader, which reports it through the team's end */
	if (rank == 0) {
		CHECK(rc == INCA_ERR_PEER, "rc %d (%s)", rc, inca_comm_errmsg(c));
		CHECK(strstr(inca_comm_errmsg(c), "is gone") != NULL, "errmsg: %s",
		      inca_comm_errmsg(c));
	} else {
		CHECK(rc == INCA_ERR_PEER, "rc %d", rc);
		CHECK(strstr(inca_comm_errmsg(c), "local rank 0 gave up") != NULL, "errmsg: %s",
		      inca_comm_errmsg(c));
	}
	CHECK(s < 10, "took %.1f s", s);
	/* and every later call, at once */
	rc = inca_allreduce(c, INCA_IN_PLACE, x, 64, INCA_FLOAT32, INCA_SUM);
	CHECK(rc != 0, "a later call succeeded");
	inca_comm_destroy(c);
}

static void test_dead_rank(void **state)
{
	(void)state;
	int before = count_shm();
	run_ranks(2, body_dead, 1);
	run_ranks(3, body_dead, 2);
	assert_int_equal(count_shm(), before);
}

/* rank 1 late by 400 ms: the others wait without burning the CPU */
static void body_late(int rank, int P, const char *job)
{
	inca_comm_t *c = make(rank, P, job, 20000);
	float x[16];
	struct rusage r0, r1;

	if (!c) {
		fails++;
		return;
	}
	for (int i = 0; i < 16; i++)
		x[i] = (float)rank;
	if (rank == 1)
		usleep(400 * 1000);
	getrusage(RUSAGE_SELF, &r0);
	CHECK(!inca_allreduce(c, INCA_IN_PLACE, x, 16, INCA_FLOAT32, INCA_SUM), "late");
	getrusage(RUSAGE_SELF, &r1);
	CHECK(x[3] == (float)(P * (P - 1) / 2), "late: %g", x[3]);
	double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec +
			      r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
		     (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec +
			      r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
	if (rank != 1)
		CHECK(cpu < 0.1, "rank %d used %.3f s of CPU waiting 0.4 s", rank, cpu);
	inca_comm_destroy(c);
}

static void test_late_rank(void **state)
{
	(void)state;
	run_ranks(3, body_late, -1);
}

/* a segment a crashed job left (its creator gone) is reclaimed */
static void test_stale_segment(void **state)
{
	(void)state;
	const char *name = "/inca-test-stale";
	pid_t dead = fork();
	char err[256];
	struct hl_team *t = NULL;
	int ranks[1] = { 5 };

	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	int32_t *hdr = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	hdr[0] = 0x494e4354;
	hdr[4] = (int32_t)dead;   /* the creator field */
	munmap(hdr, 4096);
	close(fd);
	assert_int_equal(hl_team_open(name, 0, 1, false, ranks, 5, hl_clock_us(NULL) + 2e6, &t, err,
				      sizeof(err)), 0);
	hl_team_close(t);
	/* unlinked once every local rank joined */
	assert_true(shm_open(name, O_RDONLY, 0) < 0);
	/* wrong sizes are refused */
	assert_int_equal(hl_team_open(name, 1, 1, false, ranks, 5, 0, &t, err, sizeof(err)),
			 INCA_ERR_CONFIG);
	assert_non_null(strstr(err, "local rank 1 of 1"));
}

/* A stream's two counters (hl_team.h): the writer's and the reader's move
 * apart with hl_team_post_one, together with hl_team_post. */
static void test_team_counters(void **state)
{
	(void)state;
	char name[64], err[256];
	struct hl_team *t = NULL;
	int ranks[1] = { 7 };

	snprintf(name, sizeof(name), "/inca-test-counters-%d", (int)getpid());
	assert_int_equal(hl_team_open(name, 0, 1, false, ranks, 7, hl_clock_us(NULL) + 2e6, &t, err,
				      sizeof(err)), 0);
	hl_team_post_one(t, HL_TEAM_UP, 4);          /* written ahead: steps 0..4 */
	assert_int_equal(hl_team_reached(t, HL_TEAM_UP, 0, 5), 1);
	assert_int_equal(hl_team_reached(t, HL_TEAM_UP, 0, 6), 0);
	assert_int_equal(hl_team_reached(t, HL_TEAM_UP_READ, 0, 1), 0);
	assert_int_equal(hl_team_reached(t, HL_TEAM_DOWN, 0, 1), 0);
	hl_team_post_one(t, HL_TEAM_UP_READ, 1);     /* taken: steps 0..1 */
	assert_int_equal(hl_team_reached(t, HL_TEAM_UP_READ, 0, 2), 1);
	assert_int_equal(hl_team_reached(t, HL_TEAM_UP_READ, 0, 3), 0);
	assert_int_equal(hl_team_reached(t, HL_TEAM_UP, 0, 5), 1);
	hl_team_post(t, HL_TEAM_DOWN, 2);            /* both of the down stream */
	assert_int_equal(hl_team_reached(t, HL_TEAM_DOWN, 0, 3), 1);
	assert_int_equal(hl_team_reached(t, HL_TEAM_DOWN_READ, 0, 3), 1);
	assert_int_equal(hl_team_reached(t, HL_TEAM_DOWN_READ, 0, 4), 0);
	assert_int_equal(hl_team_reached(t, HL_TEAM_UP_READ, 0, 3), 0);
	/* a wait on a counter already there returns at once */
	assert_int_equal(hl_team_wait(t, HL_TEAM_UP_READ, 0, 2, hl_clock_us(NULL) + 1e6, err,
				      sizeof(err)), 1);
	hl_team_close(t);
}

/* Local rank lrank in a child process: opens the team as global rank
 * my_rank after delay_us; the child exits 0 only when that fails with
 * INCA_ERR_CONFIG and exactly the message want (team_child_ok waits) */
static pid_t team_child(const char *name, int lrank, int lsize, bool rails, const int *ranks,
			int my_rank, unsigned delay_us, const char *want)
{
	pid_t p = fork();

	if (p == 0) {
		char err[256];
		struct hl_team *t = NULL;
		usleep(delay_us);
		int rc = hl_team_open(name, lrank, lsize, rails, ranks, my_rank,
				      hl_clock_us(NULL) + 10e6, &t, err, sizeof(err));
		if (rc != INCA_ERR_CONFIG || strcmp(err, want)) {
			fprintf(stderr, "local rank %d: %d '%s'\n", lrank, rc, err);
			_exit(1);
		}
		_exit(0);
	}
	return p;
}

static void team_child_ok(pid_t p)
{
	int st;

	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* the leader checks that local rank l is the layout's */
static void test_team_wrong_rank(void **state)
{
	(void)state;
	const char *name = "/inca-test-wrong";
	int ranks[2] = { 4, 5 };
	char err[256];
	struct hl_team *t = NULL;
	/* claims to be rank 9 */
	pid_t p = team_child(name, 1, 2, false, ranks, 9, 0,
			     "local team /inca-test-wrong failed: local rank 0: local rank 1 of "
			     "this host is rank 9, the layout says rank 5 (ranks must be "
			     "numbered host by host)");

	assert_int_equal(hl_team_open(name, 0, 2, false, ranks, 4, hl_clock_us(NULL) + 5e6, &t, err,
				      sizeof(err)), INCA_ERR_CONFIG);
	assert_string_equal(err, "local rank 1 of this host is rank 9, the layout says rank 5 "
			    "(ranks must be numbered host by host)");
	team_child_ok(p);
	assert_true(shm_open(name, O_RDONLY, 0) < 0);
	/* a local rank that never comes: named at the deadline */
	assert_int_equal(hl_team_open(name, 0, 2, false, ranks, 4, hl_clock_us(NULL) + 2e5, &t, err,
				      sizeof(err)), INCA_ERR_TIMEOUT);
	assert_non_null(strstr(err, "1 of 2 joined"));
	assert_non_null(strstr(err, ": 5"));
}

/* A local rank whose layout or INCA_HIER differs from its leader's refuses
 * the team: it fails at once, and so do the leader and the ranks that
 * joined, with the reason, long before the leader's deadline (it waited it
 * out before). 2 ranks, then 3: one joins, then one refuses. */
static void test_team_refused(void **state)
{
	(void)state;
	int ranks[3] = { 4, 5, 6 };
	char name[64], err[256], want[512], want_leader[512], want_joined[512];
	struct hl_team *t = NULL;

	for (int lsize = 2; lsize <= 3; lsize++) {
		int rl = lsize - 1;     /* the rank that refuses */
		snprintf(name, sizeof(name), "/inca-test-refused-%d-%d", (int)getpid(), lsize);
		char why[200];
		snprintf(why, sizeof(why), "local rank %d expects %d local ranks, rails; the team "
			 "is for %d, one leader: the ranks of one host must have the same layout "
			 "and INCA_HIER", rl, lsize, lsize);
		snprintf(want, sizeof(want), "shared memory %s: local rank 0 made it for %d local "
			 "ranks, one leader (version 5); local rank %d expects %d, rails (version "
			 "5): the ranks of one host must have the same layout and INCA_HIER", name,
			 lsize, rl, lsize);
		snprintf(want_leader, sizeof(want_leader), "local team %s: %s", name, why);
		snprintf(want_joined, sizeof(want_joined), "local team %s failed: %.180s", name,
			 why);
		pid_t joined = lsize == 3 ? team_child(name, 1, 3, false, ranks, ranks[1], 0,
						       want_joined) : 0;
		/* the refuser comes second (1 s: the first joiner is in by then) */
		pid_t refuser = team_child(name, rl, lsize, true, ranks, ranks[rl],
					   lsize == 3 ? 1000000 : 0, want);
		double t0 = hl_clock_us(NULL);
		assert_int_equal(hl_team_open(name, 0, lsize, false, ranks, 4, t0 + 10e6, &t, err,
					      sizeof(err)), INCA_ERR_CONFIG);
		assert_string_equal(err, want_leader);
		assert_true(hl_clock_us(NULL) - t0 < 5e6);
		if (joined)
			team_child_ok(joined);
		team_child_ok(refuser);
		assert_true(shm_open(name, O_RDONLY, 0) < 0);
	}
}

static void clear_env(void)
{
	static const char *vars[] = { "INCA_LAYOUT", "INCA_LOCAL_SIZE", "INCA_LOCAL_RANK",
		"LOCAL_WORLD_SIZE", "LOCAL_RANK", "WORLD_SIZE", "RANK",
		"OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
		"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "MPI_LOCALNRANKS",
		"MPI_LOCALRANKID", "PMI_SIZE", "PMI_RANK" };
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void test_layout(void **state)
{
	(void)state;
	struct hl_layout L;
	char err[256];
	struct inca_comm_attr a = { .rank = 4, .size = 8, .layout = "3,1,2,2" };

	clear_env();
	assert_int_equal(hl_layout_resolve(&a, NULL, &L, err, sizeof(err)), 0);
	assert_int_equal(L.nhosts, 4);
	assert_int_equal(L.host, 2);
	assert_int_equal(L.lrank, 0);
	assert_int_equal(L.lsize, 2);
	assert_int_equal(L.maxp, 3);
	assert_false(L.uniform);
	int first[5] = { 0, 3, 4, 6, 8 };
	assert_memory_equal(L.first, first, sizeof(first));
	hl_layout_free(&L);
	a.rank = 2;
	assert_int_equal(hl_layout_resolve(&a, NULL, &L, err, sizeof(err)), 0);
	assert_int_equal(L.host, 0);
	assert_int_equal(L.lrank, 2);
	hl_layout_free(&L);
	a.layout = "3,1,2";
	assert_int_equal(hl_layout_resolve(&a, NULL, &L, err, sizeof(err)), INCA_ERR_CONFIG);
	assert_string_equal(err, "the layout: the layout has 6 ranks, the job 8");
	a.layout = "4,x";
	assert_int_equal(hl_layout_resolve(&a, NULL, &L, err, sizeof(err)), INCA_ERR_CONFIG);
	assert_non_null(strstr(err, "expected ranks per host"));
	/* Open MPI's environment, when it describes this communicator */
	a.layout = NULL;
	a.rank = 5;
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
	setenv("OMPI_COMM_WORLD_RANK", "5", 1);
	assert_int_equal(hl_layout_resolve(&a, NULL, &L, err, sizeof(err)), 0);
	assert_int_equal(L.nhosts, 4);
	assert_int_equal(L.host, 2);
	assert_int_equal(L.lrank, 1);
	assert_true(L.uniform);
	hl_layout_free(&L);
	/* a sub-communicator (another size): not its layout */
	a.size = 4;
	a.rank = 1;
	assert_int_equal(hl_layout_resolve(&a, NULL, &L, err, sizeof(err)), 0);
	assert_int_equal(L.nhosts, 0);
	/* ranks mapped round-robin over hosts: not by host, one member per rank */
	a.size = 8;
	a.rank = 5;
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
	assert_int_equal(hl_layout_resolve(&a, NULL, &L, err, sizeof(err)), 0);
	assert_int_equal(L.nhosts, 0);
	clear_env();
	/* a static group of hosts, with and without their ranks */
	struct hl_member m[3] = { { .ip = 1, .nranks = 2 }, { .ip = 2, .nranks = 3 },
				  { .ip = 3, .nranks = 1 } };
	struct hl_group_desc g = { .nmembers = 3, .members = m };
	a.size = 6;
	a.rank = 4;
	assert_int_equal(hl_layout_resolve(&a, &g, &L, err, sizeof(err)), 0);
	assert_int_equal(L.host, 1);
	assert_int_equal(L.lrank, 2);
	assert_int_equal(L.lsize, 3);
	hl_layout_free(&L);
	m[1].nranks = 0;
	assert_int_equal(hl_layout_resolve(&a, &g, &L, err, sizeof(err)), INCA_ERR_CONFIG);
	assert_string_equal(err, "members: give \"ranks\" for every member or none");
	m[0].nranks = m[2].nranks = 0;
	assert_int_equal(hl_layout_resolve(&a, &g, &L, err, sizeof(err)), 0);
	assert_int_equal(L.lsize, 2);
	assert_int_equal(L.host, 2);
	assert_int_equal(L.lrank, 0);
	hl_layout_free(&L);
	/* a static group of a member per rank: one member per rank, whatever
	 * the layout says */
	a.layout = "2,1";
	a.size = 3;
	g.nmembers = 3;
	assert_int_equal(hl_layout_resolve(&a, &g, &L, err, sizeof(err)), 0);
	assert_int_equal(L.nhosts, 0);
	a.layout = NULL;
	a.size = 7;
	assert_int_equal(hl_layout_resolve(&a, &g, &L, err, sizeof(err)), INCA_ERR_CONFIG);
	assert_string_equal(err, "the group has 3 members but size is 7 (a "
			    "group of hosts: give each member its \"ranks\", or INCA_LAYOUT)");
}

/* INCA_HIER=off with a static group of hosts: the old error, with a hint */
static void test_hier_off(void **state)
{
	(void)state;
	struct inca_comm_attr a = { .rank = 0, .size = 2, .config_file = cfg_path,
				    .hier = INCA_HIER_OFF };
	inca_comm_t *c = NULL;

	assert_int_equal(inca_comm_create(&a, &c), INCA_ERR_CONFIG);
	assert_string_equal(inca_last_errmsg(), "the group has 1 members but size is 2 (a group "
			    "of hosts needs INCA_HIER auto or leader)");
	setenv("INCA_HIER", "sideways", 1);
	a.hier = INCA_HIER_AUTO;
	assert_int_equal(inca_comm_create(&a, &c), INCA_ERR_CONFIG);
	assert_string_equal(inca_last_errmsg(), "INCA_HIER: expected auto, off, leader or rails, "
			    "got 'sideways'");
	unsetenv("INCA_HIER");
}

/* INCA_HIER=rails with a static group of 2 hosts x 2 ranks: a file without
 * rails, and a rail of the wrong size, refused at once with what is wrong */
static void test_rails_config(void **state)
{
	(void)state;
	static const char *const files[2] = {
		"{\"switch\": \"127.0.0.1\", \"group\": 7, \"qpn\": 256, \"qkey\": 1, \"members\": "
		"[{\"ip\": \"127.0.0.1\", \"qpn\": 300}, {\"ip\": \"127.0.0.2\", \"qpn\": 301}]}",
		"{\"switch\": \"127.0.0.1\", \"group\": 7, \"qpn\": 256, \"qkey\": 1, \"members\": "
		"[{\"ip\": \"127.0.0.1\", \"qpn\": 300}, {\"ip\": \"127.0.0.2\", \"qpn\": 301}], "
		"\"rails\": [{\"group\": 8, \"qpn\": 257, \"members\": "
		"[{\"ip\": \"127.0.0.1\", \"qpn\": 302}]}]}",
	};
	static const char *const want[2] = {
		"INCA_HIER=rails with 2 ranks a host: the group lists 0 rails, it needs 1 "
		"(\"rails\": one group for each local rank past the first)",
		"INCA_HIER=rails: rails[0] has 1 members, the layout 2 hosts (one member per "
		"host, in host order)",
	};
	char path[64];

	snprintf(path, sizeof(path), "/tmp/inca-test-rails-%d.json", (int)getpid());
	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs(files[i], f);
		fclose(f);
		struct inca_comm_attr a = { .rank = 0, .size = 4, .config_file = path,
					    .layout = "2,2", .hier = INCA_HIER_RAILS,
					    .timeout_ms = 2000 };
		inca_comm_t *c = NULL;
		assert_int_equal(inca_comm_create(&a, &c), INCA_ERR_CONFIG);
		assert_null(c);
		assert_string_equal(inca_last_errmsg(), want[i]);
	}
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_hier_off),
		cmocka_unit_test(test_rails_config),
		cmocka_unit_test(test_stale_segment),
		cmocka_unit_test(test_team_counters),
		cmocka_unit_test(test_team_wrong_rank),
		cmocka_unit_test(test_team_refused),
		cmocka_unit_test(test_collectives),
		cmocka_unit_test(test_collectives_rails),
		cmocka_unit_test(test_late_rank),
		cmocka_unit_test(test_asymmetric_order),
		cmocka_unit_test(test_dead_rank),
	};
	int rc;

	clear_env();
	write_cfg();
	rc = cmocka_run_group_tests_name("hier", tests, NULL, NULL);
	unlink(cfg_path);
	return rc;
}
