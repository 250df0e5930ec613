/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-allreduce-perf: bandwidth and latency of libinca's collectives
 * (all-reduce by default; -c reduce_scatter, allgather, bcast, reduce,
 * barrier), printed like nccl-tests' *_perf: the size is the whole buffer
 * as nccl-tests counts it, busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n
 * (reduce_scatter, allgather) or 1 (bcast, reduce). One process per rank;
 * rank and size come from INCA_RANK/INCA_SIZE (or Open MPI's
 * OMPI_COMM_WORLD_*), the group from INCA_CONFIG or INCA_SWITCH... (see
 * inca.h). The time is the median over the timed iterations of the slowest
 * rank's time; cpu is the user+system CPU time of a rank (mean over ranks)
 * per GB of the buffer.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inca.h"
#include "inca/agg.h"
#include "expect.h"
#include "perf_stats.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: inca-allreduce-perf [options]\n"
		"  -c COLL   allreduce reduce_scatter allgather bcast reduce barrier\n"
		"            (default allreduce)\n"
		"  -r ROOT   root of bcast and reduce (default 0)\n"
		"  -b SIZE   smallest size in bytes (default 8; K, M, G suffixes)\n"
		"  -e SIZE   largest size in bytes (default 64M)\n"
		"  -f F      multiply the size by F each step (default 2)\n"
		"  -d TYPE   float half bfloat16 int32 int64 double, or all (default float)\n"
		"  -o OP     sum prod min max band bor bxor, or all (default sum); allgather,\n"
		"            bcast and barrier only copy (redop none)\n"
		"  -n N      timed iterations per size (default 20)\n"
		"  -N N      timed iterations per size up to 64 KiB (default: -n)\n"
		"  -w N      warm-up iterations per size (default 5)\n"
		"  -C 0|1    check every element of every result on every rank against a\n"
		"            locally computed exact reference (default 1)\n"
		"  -F        fallback only: run the host ring over TCP (the baseline)\n"
		"  -R        after each row a '# row' line: the calls' period and what each\n"
		"            CPU did (below)\n"
		"  -h, --help  this text\n"
		"Rank and size: INCA_RANK/INCA_SIZE or OMPI_COMM_WORLD_RANK/SIZE. The group:\n"
		"INCA_CONFIG=file.json, or INCA_SWITCH, INCA_GROUP, INCA_GROUP_QPN, INCA_QKEY,\n"
		"INCA_MEMBERS. Transport: INCA_TRANSPORT=udp|xdp|verbs.\n"
		"size: the whole buffer as nccl-tests counts it (reduce_scatter: the send buffer\n"
		"of n shards, allgather: the receive buffer), rounded down to whole shards;\n"
		"count: its elements. busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n\n"
		"(reduce_scatter, allgather), 1 (bcast, reduce). barrier: one row, size 0.\n"
		"time: the median over the timed iterations of the slowest rank (bcast and\n"
		"reduce: each timed call after an untimed barrier, as OSU's benchmarks do); cpu: user +\n"
		"system CPU seconds per GB of the buffer, per rank (mean over ranks); core: the\n"
		"busy seconds per GB of the CPUs rank 0 may run on (wall less the kernel's\n"
		"cpuidle time) over the ranks, '-' unless it is confined to fewer CPUs than are\n"
		"online: where every rank is confined to the same CPUs, their core's whole\n"
		"work for them, the kernel's softirq included. -R: after each row a '# row' line:\n"
		"period, rank 0's timed calls' wall time over their count (they run back to\n"
		"back: the rate calls go at; bcast and reduce: with their barriers), spin,\n"
		"the CPU a rank spent a call polling for results not there yet (mean over\n"
		"ranks; part of cpu), and each online CPU's shares of its time over them\n"
		"(/proc/stat, 10 ms ticks: rows shorter than a second are too short).\n"
		"Exit status 1 when a result is wrong on any rank, or (without -F) when any\n"
		"call fell back to the host ring.\n");
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	double v = strtod(s, &end);
	double mult = 1;

	if (end == s || v < 0)
		return -1;
	switch (*end) {
	case 'K': case 'k': mult = 1024; end++; break;
	case 'M': case 'm': mult = 1024 * 1024; end++; break;
	case 'G': case 'g': mult = 1024.0 * 1024 * 1024; end++; break;
	}
	if (*end)
		return -1;
	*out = (size_t)(v * mult);
	return 0;
}

static const char *const type_names[] = { "float", "half", "bfloat16", "int32", "int64", "double" };
static const char *const op_names[] = { "sum", "min", "max", "prod", "band", "bor", "bxor" };

enum coll { ALLREDUCE, REDUCE_SCATTER, ALLGATHER, BCAST, REDUCE, BARRIER, NCOLL };
static const char *const coll_names[] = { "allreduce", "reduce_scatter", "allgather", "bcast",
					  "reduce", "barrier" };

/* One call of the collective on the whole buffer of count elements. */
static int run(inca_comm_t *comm, enum coll c, const void *in, void *out, size_t count,
	       int dt, int op, int root, int size)
{
	switch (c) {
	case ALLREDUCE: return inca_allreduce(comm, in, out, count, dt, op);
	case REDUCE_SCATTER:
		return inca_reduce_scatter(comm, in, out, count / (size_t)size, dt, op);
	case ALLGATHER: return inca_allgather(comm, in, out, count / (size_t)size, dt);
	case BCAST: return inca_bcast(comm, out, count, dt, root);
	case REDUCE: return inca_reduce(comm, in, out, count, dt, op, root);
	default: return inca_barrier(comm);
	}
}

/* This rank's input: its elements (allreduce, reduce, the n shards of
 * reduce_scatter), its shard (allgather), the root's buffer (bcast). */
static void prepare(enum coll c, int dt, int op, int rank, int size, int root, void *in,
		    void *out, size_t count)
{
	size_t es = agg_dtype_size((enum agg_dtype)dt);

	if (c == ALLGATHER) {
		fill(dt, op, rank, in, count / (size_t)size);
	} else if (c == BCAST) {
		if (rank == root)
			fill(dt, op, root, out, count);
		else          /* a bcast that did nothing must show */
			memset(out, 0xa5, count * es);
	} else if (c != BARRIER) {
		fill(dt, op, rank, in, count);
	}
}

/* Elements of this rank's result that differ from the exact reference. */
static long check_result(enum coll c, int dt, int op, int rank, int size, int root,
			 const void *out, void *want, size_t count)
{
	size_t es = agg_dtype_size((enum agg_dtype)dt), shard = count / (size_t)size, n = count;
	const uint8_t *got = out;
	uint8_t *w = want;
	long wrong = 0;

	switch (c) {
	case ALLREDUCE:
		expected(dt, op, size, want, count);
		break;
	case REDUCE:
		if (rank != root)
			return 0;
		expected(dt, op, size, want, count);
		break;
	case REDUCE_SCATTER:
		expected(dt, op, size, want, count);
		w += (size_t)rank * shard * es;
		n = shard;
		break;
	case ALLGATHER:
		for (int r = 0; r < size; r++)
			fill(dt, op, r, w + (size_t)r * shard * es, shard);
		break;
	case BCAST:
		fill(dt, op, root, want, count);
		break;
	default:
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		wrong += memcmp(got + i * es, w + i * es, es) != 0;
	return wrong;
}

int main(int argc, char **argv)
{
	size_t minb = 8, maxb = 64 << 20;
	double factor = 2;
	int iters = 20, small_iters = 0, warmup = 5, check = 1, opt, dts[6] = { INCA_FLOAT32 };
	int ndt = 1;
	int ops[7] = { INCA_SUM }, nop = 1;
	bool ring_only = false, rows = false;
	struct inca_comm_attr attr = { 0 };
	enum coll coll = ALLREDUCE;
	int root = 0;

	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' },
						   { NULL, 0, NULL, 0 } };
	while ((opt = getopt_long(argc, argv, "c:r:b:e:f:d:o:n:N:w:C:FRh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': {
			int k = 0;
			while (k < NCOLL && strcmp(optarg, coll_names[k]))
				k++;
			if (k == NCOLL) {
				fprintf(stderr, "inca-allreduce-perf: -c: unknown collective '%s'\n",
					optarg);
				return 2;
			}
			coll = (enum coll)k;
			break;
		}
		case 'r': root = atoi(optarg); break;
		case 'b':
		case 'e':
			if (parse_size(optarg, opt == 'b' ? &minb : &maxb)) {
				fprintf(stderr, "inca-allreduce-perf: -%c: bad size '%s'\n", opt, optarg);
				return 2;
			}
			break;
		case 'f':
			factor = atof(optarg);
			break;
		case 'd':
			ndt = 0;
			for (int i = 0; i < 6; i++)
				if (!strcmp(optarg, "all") || !strcmp(optarg, type_names[i]) ||
				    agg_dtype_parse(optarg) == i)
					dts[ndt++] = i;
			if (!ndt) {
				fprintf(stderr, "inca-allreduce-perf: -d: unknown type '%s'\n", optarg);
				return 2;
			}
			break;
		case 'o':
			nop = 0;
			for (int i = 0; i < 7; i++)
				if (!strcmp(optarg, "all") || !strcmp(optarg, op_names[i]))
					ops[nop++] = i;
			if (!nop) {
				fprintf(stderr, "inca-allreduce-perf: -o: unknown op '%s'\n", optarg);
				return 2;
			}
			break;
		case 'n': iters = atoi(optarg); break;
		case 'N': small_iters = atoi(optarg); break;
		case 'w': warmup = atoi(optarg); break;
		case 'C': check = atoi(optarg); break;
		case 'F': ring_only = true; break;
		case 'R': rows = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!small_iters)
		small_iters = iters;
	if (minb < 1 || maxb < minb || factor <= 1 || iters < 1 || small_iters < 1 || warmup < 0) {
		fprintf(stderr, "inca-allreduce-perf: need 1 <= -b <= -e, -f > 1, -n and -N >= 1\n");
		return 2;
	}
	const char *r = getenv("INCA_RANK") ? getenv("INCA_RANK") : getenv("OMPI_COMM_WORLD_RANK");
	const char *s = getenv("INCA_SIZE") ? getenv("INCA_SIZE") : getenv("OMPI_COMM_WORLD_SIZE");
	if (!r || !s) {
		fprintf(stderr, "inca-allreduce-perf: set INCA_RANK and INCA_SIZE (or run "
			"under mpirun)\n");
		return 2;
	}
	attr.rank = atoi(r);
	attr.size = atoi(s);
	if (root < 0 || root >= attr.size) {
		fprintf(stderr, "inca-allreduce-perf: -r %d: not a rank (0..%d)\n", root,
			attr.size - 1);
		return 2;
	}
	if (ring_only)
		attr.fallback = INCA_FALLBACK_FORCE;

	inca_comm_t *comm;
	int rc = inca_comm_create(&attr, &comm);
	if (rc) {
		fprintf(stderr, "inca-allreduce-perf: rank %d: %s: %s\n", attr.rank,
			inca_strerror(rc), inca_last_errmsg());
		return 1;
	}
	int rank = inca_comm_rank(comm), size = inca_comm_size(comm);
	void *sendbuf = malloc(maxb + 8), *recvbuf = malloc(maxb + 8), *want = malloc(maxb + 8);
	int max_iters = iters > small_iters ? iters : small_iters;
	double *its = malloc(sizeof(double) * (size_t)max_iters);
	if (!sendbuf || !recvbuf || !want || !its) {
		fprintf(stderr, "inca-allreduce-perf: out of memory for %zu bytes\n", maxb);
		return 1;
	}
	if (rank == 0) {
		char what[64] = "";
		if (coll != ALLREDUCE)
			snprintf(what, sizeof(what), ", %s%s", coll_names[coll],
				 coll == BCAST || coll == REDUCE ? (root ? " (root set)" : " (root 0)")
								 : "");
		printf("# inca-allreduce-perf: %d ranks, transport %s%s, %d iterations (%d up to "
		       "64 KiB), %d warm-up\n", size, ring_only ? "tcp ring (fallback only)" :
		       inca_comm_transport(comm), what, iters, small_iters, warmup);
		printf("#%11s %12s %9s %6s %11s %9s %9s %7s %13s %9s %9s\n", "size", "count",
		       "type", "redop", "time", "algbw", "busbw", "#wrong", "wire/rank", "cpu",
		       "core");
		printf("#%11s %12s %9s %6s %11s %9s %9s %7s %13s %9s %9s\n", "(B)", "(elements)",
		       "", "", "(us)", "(GB/s)", "(GB/s)", "", "(B)", "(s/GB)", "(s/GB)");
	}
	long total_wrong = 0, fell_back = 0;
	int status = 0;
	const bool sharded = coll == REDUCE_SCATTER || coll == ALLGATHER;
	const bool reduces = coll == ALLREDUCE || coll == REDUCE_SCATTER || coll == REDUCE;
	const double busf = coll == ALLREDUCE ? 2.0 * (size - 1) / size :
			    sharded ? (double)(size - 1) / size : 1.0;
	if (!reduces) {          /* one op: the data is only copied */
		ops[0] = INCA_SUM;
		nop = 1;
	}
	if (coll == BARRIER) {   /* one row: sizes mean nothing */
		dts[0] = INCA_INT32;
		ndt = 1;
		minb = maxb = 4;
	}
	for (int di = 0; di < ndt && !status; di++)
		for (int oi = 0; oi < nop && !status; oi++) {
			int dt = dts[di], op = ops[oi];
			size_t es = agg_dtype_size((enum agg_dtype)dt);
			if (agg_op_check((enum agg_dtype)dt, (enum agg_op)op))
				continue;
			for (size_t bytes = minb; bytes <= maxb && !status;
			     bytes = (size_t)ceil((double)bytes * factor)) {
				/* whole shards of whole elements */
				size_t count = sharded ? bytes / es / (size_t)size * (size_t)size
						       : bytes / es;
				size_t buf_bytes = coll == BARRIER ? 0 : count * es;
				long wrong = 0;
				int n_it = bytes <= PERF_SMALL_BYTES ? small_iters : iters;
				if (count == 0)
					continue;
				prepare(coll, dt, op, rank, size, root, sendbuf, recvbuf, count);
				for (int w = 0; w < warmup && !rc; w++)
					rc = run(comm, coll, sendbuf, recvbuf, count, dt, op, root, size);
				if (coll == BCAST)
					prepare(coll, dt, op, rank, size, root, sendbuf, recvbuf, count);
				struct inca_stats st0, st1;
				inca_comm_stats(comm, &st0);
				/* rank 0's probes of its CPUs, outside the window
				 * the CPU and the period are measured over */
				struct perf_core core0 = { 0 }, core1 = { 0 };
				struct perf_cpustat cs0 = { 0 }, cs1 = { 0 };
				perf_probe(rank, rows, &core0, &cs0);
				double cpu0 = perf_cpu_s(), start = now_s();
				for (int it = 0; it < n_it && !rc; it++) {
					/* rooted: a barrier first (not timed), as OSU's
					 * osu_bcast/osu_reduce, so that one call's time
					 * is one call's latency on every rank */
					if (coll == BCAST || coll == REDUCE)
						rc = inca_barrier(comm);
					double t0 = now_s();
					if (!rc)
						rc = run(comm, coll, sendbuf, recvbuf, count, dt, op,
							 root, size);
					its[it] = (now_s() - t0) * 1e6;
				}
				double period_us = (now_s() - start) * 1e6 / n_it;
				double cpu = perf_cpu_s() - cpu0;
				perf_probe(rank, rows, &core1, &cs1);
				inca_comm_stats(comm, &st1);
				if (rc) {
					fprintf(stderr, "inca-allreduce-perf: rank %d: %s: %s\n", rank,
						inca_strerror(rc), inca_comm_errmsg(comm));
					status = 1;
					break;
				}
				if (check)
					wrong = check_result(coll, dt, op, rank, size, root, recvbuf, want,
							     count);
				/* every rank's view, through the communicator itself:
				 * each iteration's slowest rank, the CPU and the wrong
				 * elements summed (not counted in wire/rank) */
				double sums[4] = { cpu, (double)wrong,
						   (double)(st1.fallbacks - st0.fallbacks),
						   st1.spin_cpu_us - st0.spin_cpu_us };
				rc = inca_allreduce(comm, INCA_IN_PLACE, its, (size_t)n_it,
						    INCA_FLOAT64, INCA_MAX);
				if (!rc)
					rc = inca_allreduce(comm, INCA_IN_PLACE, sums, 4,
							    INCA_FLOAT64, INCA_SUM);
				if (rc) {
					fprintf(stderr, "inca-allreduce-perf: rank %d: gathering the "
						"figures: %s: %s\n", rank, inca_strerror(rc),
						inca_comm_errmsg(comm));
					status = 1;
					break;
				}
				wrong = (long)sums[1];
				total_wrong += wrong;
				/* a row some rank completed on the host ring is not an
				 * in-network figure */
				if (sums[2] > 0 && !ring_only)
					fell_back++;
				double us = perf_median(its, n_it);
				double cpu_per_gb = buf_bytes ?
					perf_per_gb(sums[0], size, buf_bytes, n_it) : 0;
				/* rank 0's CPUs, shared by the ranks confined there */
				char core_col[32];
				perf_core_col(core_col, sizeof(core_col), core0, core1, size,
					      buf_bytes, n_it);
				double algbw = (double)buf_bytes / us / 1e3;
				double busbw = algbw * busf;
				uint64_t wire = (st1.bytes_sent + st1.ring_bytes_sent -
						 st0.bytes_sent - st0.ring_bytes_sent) / (uint64_t)n_it;
				if (rank == 0)
					printf("%12zu %12zu %9s %6s %11.1f %9.3f %9.3f %7ld %13llu "
					       "%9.2f %9s\n", buf_bytes, coll == BARRIER ? (size_t)0 : count,
					       type_names[dt], reduces ? op_names[op] : "none", us,
					       algbw, busbw, check ? wrong : -1L,
					       (unsigned long long)wire, cpu_per_gb, core_col);
				if (rank == 0 && sums[2] > 0 && !ring_only)
					printf("# ^ %.0f calls of this row fell back to the host ring: "
					       "not an in-network figure\n", sums[2]);
				if (rank == 0 && rows)
					perf_row_print(stdout, buf_bytes, period_us,
						       sums[3] / size / n_it, &cs0, &cs1);
				fflush(stdout);
			}
		}
	struct inca_stats st;
	inca_comm_stats(comm, &st);
	if (rank == 0)
		printf("# packets sent %llu, retransmissions %llu (%.3f%%; %llu of them probes), "
		       "duplicates ignored %llu, CNPs %llu, fallbacks %llu\n"
		       "# out of bounds values : %ld %s\n", (unsigned long long)st.packets_sent,
		       (unsigned long long)st.retransmissions,
		       st.packets_sent ? 100.0 * (double)st.retransmissions /
					 (double)st.packets_sent : 0.0,
		       (unsigned long long)st.probes,
		       (unsigned long long)st.duplicates, (unsigned long long)st.cnps,
		       (unsigned long long)st.fallbacks, total_wrong, total_wrong ? "FAILED" : "OK");
	if (rank == 0)
		printf("# retransmission timeout at the end %.0f us\n", st.rto_us);
	inca_comm_destroy(comm);
	free(sendbuf);
	free(recvbuf);
	free(want);
	free(its);
	if (fell_back && rank == 0)
		fprintf(stderr, "inca-allreduce-perf: %ld rows fell back to the host ring: "
			"these figures do not count\n", fell_back);
	return status ? status : total_wrong || fell_back ? 1 : 0;
}
