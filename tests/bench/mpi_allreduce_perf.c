/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The baseline: Open MPI's collectives (float sum where they reduce), timed
 * and printed in the same columns as inca-allreduce-perf, so the two can be
 * compared line by line. The collectives are Open MPI's (MPI_Allreduce,
 * MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast, MPI_Reduce,
 * MPI_Barrier); only this harness is ours.
 * Usage: mpirun ... mpi-allreduce-perf [-c COLL] [-r ROOT] [-b MIN] [-e MAX]
 *                   [-f F] [-n N] [-N N] [-w W] [-W W] [-o] [-R]
 * -c: allreduce (default), reduce_scatter, allgather, bcast, reduce, barrier.
 *     The size is the whole buffer as nccl-tests counts it (reduce_scatter:
 *     the send buffer, N shards; allgather: the receive buffer), rounded
 *     down to whole shards; busbw = algbw x 2(N-1)/N (allreduce), (N-1)/N
 *     (reduce_scatter, allgather), 1 (bcast, reduce).
 * -r: the root of bcast and reduce (default 0); each of their timed calls
 *     follows an untimed barrier (as in OSU's osu_bcast and osu_reduce).
 * -N: iterations for sizes up to 64 KiB (default -n); -W: warm-up calls
 * for them (default -w; OSU's benchmarks warm small sizes up with 200).
 * The time is the median over the timed iterations of the slowest rank's
 * time; cpu is a rank's user+system CPU seconds per GB reduced (mean over
 * ranks; Open MPI's daemons not counted); core the busy seconds per GB of the
 * CPUs rank 0 may run on, over the ranks ('-' unless confined to fewer CPUs
 * than are online: perf_stats.h), and with -R after each row a '# row' line: rank 0's
 * calls' period back to back and each online CPU's shares of its time
 * (/proc/stat).
 * -o: the OSU micro-benchmarks' table (# Size  Avg Latency(us): the mean
 *     over the ranks of each rank's mean timed call, as OSU's) instead.
 * Run it with libinca-mpi preloaded and the same binary's MPI_Allreduce
 * goes through the switch (tests/bench/run-mpi.sh).
 */
#include <getopt.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_stats.h"

enum coll { ALLREDUCE, REDUCE_SCATTER, ALLGATHER, BCAST, REDUCE, BARRIER };
static const char *const coll_names[] = { "allreduce", "reduce_scatter", "allgather",
					  "bcast", "reduce", "barrier" };

/* every rank's input element i, small integers so float sums are exact */
static float value(int rank, size_t i)
{
	return (float)((int)((rank * 131 + i * 17) % 41) - 20);
}

static void run(enum coll c, const float *in, float *out, size_t count, int root, int size)
{
	switch (c) {
	case ALLREDUCE:
		MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case REDUCE_SCATTER:
		MPI_Reduce_scatter_block(in, out, (int)(count / (size_t)size), MPI_FLOAT, MPI_SUM,
					 MPI_COMM_WORLD);
		break;
	case ALLGATHER:
		MPI_Allgather(in, (int)(count / (size_t)size), MPI_FLOAT, out,
			      (int)(count / (size_t)size), MPI_FLOAT, MPI_COMM_WORLD);
		break;
	case BCAST:
		MPI_Bcast(out, (int)count, MPI_FLOAT, root, MPI_COMM_WORLD);
		break;
	case REDUCE:
		MPI_Reduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD);
		break;
	case BARRIER:
		MPI_Barrier(MPI_COMM_WORLD);
		break;
	}
}

/* elements of this rank's result that are wrong */
static long check(enum coll c, const float *out, size_t count, int root, int rank, int size)
{
	size_t shard = count / (size_t)size;
	long wrong = 0;

	switch (c) {
	case ALLREDUCE:
	case REDUCE:
		if (c == REDUCE && rank != root)
			break;
		for (size_t i = 0; i < count; i++) {
			float want = 0;
			for (int r = 0; r < size; r++)
				want += value(r, i);
			wrong += out[i] != want;
		}
		break;
	case REDUCE_SCATTER:
		for (size_t j = 0; j < shard; j++) {
			float want = 0;
			for (int r = 0; r < size; r++)
				want += value(r, (size_t)rank * shard + j);
			wrong += out[j] != want;
		}
		break;
	case ALLGATHER:
		for (int r = 0; r < size; r++)
			for (size_t j = 0; j < shard; j++)
				wrong += out[(size_t)r * shard + j] != value(r, j);
		break;
	case BCAST:
		for (size_t i = 0; i < count; i++)
			wrong += out[i] != value(root, i);
		break;
	case BARRIER:
		break;
	}
	return wrong;
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'K': case 'k': v *= 1024; break;
	case 'M': case 'm': v *= 1024 * 1024; break;
	case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
	}
	return (size_t)v;
}

int main(int argc, char **argv)
{
	size_t minb = 8, maxb = 64 << 20;
	double factor = 2;
	int iters = 20, small_iters = 0, warmup = 5, small_warmup = -1, opt, rank, size, osu = 0, root = 0;
	int rows = 0;
	enum coll coll = ALLREDUCE;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' },
						   { NULL, 0, NULL, 0 } };

	while ((opt = getopt_long(argc, argv, "c:r:b:e:f:n:N:w:W:oRh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': {
			int k = -1;
			for (int i = 0; i <= BARRIER; i++)
				if (!strcmp(optarg, coll_names[i]))
					k = i;
			if (k < 0) {
				if (rank == 0)
					fprintf(stderr, "mpi-allreduce-perf: -c %s: expected allreduce, "
						"reduce_scatter, allgather, bcast, reduce or barrier\n",
						optarg);
				MPI_Abort(MPI_COMM_WORLD, 2);
			}
			coll = (enum coll)k;
			break;
		}
		case 'r': root = atoi(optarg); break;
		case 'b': minb = parse_size(optarg); break;
		case 'e': maxb = parse_size(optarg); break;
		case 'f': factor = atof(optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 'N': small_iters = atoi(optarg); break;
		case 'w': warmup = atoi(optarg); break;
		case 'W': small_warmup = atoi(optarg); break;
		case 'o': osu = 1; break;
		case 'R': rows = 1; break;
		case 'h':
			if (rank == 0)
				printf("usage: mpirun ... mpi-allreduce-perf [-c COLL] [-r ROOT] [-b MIN] "
				       "[-e MAX] [-f F] [-n N] [-N N] [-w W] [-W W] [-o] [-R]\n"
				       "  -c COLL  allreduce (default), reduce_scatter, allgather, bcast, "
				       "reduce, barrier\n"
				       "  -r ROOT  root of bcast and reduce (default 0)\n"
				       "  -b, -e   smallest and largest size in bytes (default 8, 64M; "
				       "K, M, G suffixes)\n"
				       "  -f F     multiply the size by F each step (default 2)\n"
				       "  -n N     timed iterations per size (default 20); -N N: up to "
				       "64 KiB (default -n)\n"
				       "  -w W     warm-up iterations per size (default 5); -W W: up to "
				       "64 KiB (default -w)\n"
				       "  -o       the OSU micro-benchmarks' table instead\n"
				       "  -R       after each row a '# row' line: rank 0's calls' period "
				       "back to back\n"
				       "           and each online CPU's shares of its time (/proc/stat)\n");
			MPI_Finalize();
			return 0;
		default:
			if (rank == 0)
				fprintf(stderr, "usage: mpi-allreduce-perf [-c COLL] [-r ROOT] [-b MIN] "
					"[-e MAX] [-f F] [-n N] [-N N] [-w W] [-W W] [-o] [-R]\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	if (!small_iters)
		small_iters = iters;
	if (small_warmup < 0)
		small_warmup = warmup;
	if (minb < 4 || maxb < minb || factor <= 1 || iters < 1 || small_iters < 1 || warmup < 0 ||
	    root < 0 || root >= size) {
		if (rank == 0)
			fprintf(stderr, "mpi-allreduce-perf: need 4 <= -b <= -e, -f > 1, -n >= 1, -w >= 0, "
				"0 <= -r < %d\n", size);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const bool sharded = coll == REDUCE_SCATTER || coll == ALLGATHER;
	const double busf = coll == ALLREDUCE ? 2.0 * (size - 1) / size :
			    sharded ? (double)(size - 1) / size : 1.0;
	const char *redop = coll == ALLREDUCE || coll == REDUCE_SCATTER || coll == REDUCE ?
			    "sum" : "none";
	long total_wrong = 0;
	float *in = malloc(maxb), *out = malloc(maxb);
	int max_iters = iters > small_iters ? iters : small_iters;
	double *its = malloc(sizeof(double) * (size_t)max_iters);
	double *slowest = malloc(sizeof(double) * (size_t)max_iters);
	if (!in || !out || !its || !slowest)
		MPI_Abort(MPI_COMM_WORLD, 1);
	if (rank == 0 && osu) {
		printf("# OSU-style MPI %s Latency Test (mpi-allreduce-perf), %d ranks\n"
		       "# Size       Avg Latency(us)\n", coll_names[coll], size);
	} else if (rank == 0) {
		printf("# mpi-allreduce-perf: %d ranks, Open MPI %s%s, %d iterations (%d up "
		       "to 64 KiB), %d warm-up (%d up to 64 KiB)\n", size, coll_names[coll],
		       coll == BCAST || coll == REDUCE ? (root ? " (root set)" : " (root 0)") : "",
		       iters, small_iters, warmup, small_warmup);
		printf("#%11s %12s %9s %6s %11s %9s %9s %7s %9s %9s\n", "size", "count", "type",
		       "redop", "time", "algbw", "busbw", "#wrong", "cpu", "core");
		printf("#%11s %12s %9s %6s %11s %9s %9s %7s %9s %9s\n", "(B)", "(elements)", "", "",
		       "(us)", "(GB/s)", "(GB/s)", "", "(s/GB)", "(s/GB)");
	}
	for (size_t b = minb; b <= maxb; b = (size_t)((double)b * factor + 0.5)) {
		/* whole shards of whole elements */
		size_t count = sharded ? b / 4 / (size_t)size * (size_t)size : b / 4;
		size_t bytes = coll == BARRIER ? 0 : count * 4;
		long wrong = 0;
		int n_it = b <= PERF_SMALL_BYTES ? small_iters : iters;
		int n_w = b <= PERF_SMALL_BYTES ? small_warmup : warmup;
		if (count == 0 && coll != BARRIER)
			continue;
		/* allgather sends its own shard: value(rank, j) for j < shard */
		for (size_t i = 0; i < count; i++)
			in[i] = value(rank, i);
		if (coll == BCAST)
			for (size_t i = 0; i < count; i++)
				out[i] = rank == root ? value(root, i) : -1000.0f;
		for (int w = 0; w < n_w; w++)
			run(coll, in, out, count, root, size);
		/* rank 0's probes of its CPUs, before the barrier that starts
		 * the timed calls together */
		struct perf_core core0 = { 0 }, core1 = { 0 };
		struct perf_cpustat cs0 = { 0 }, cs1 = { 0 };
		perf_probe(rank, rows, &core0, &cs0);
		MPI_Barrier(MPI_COMM_WORLD);
		if (coll == BCAST)   /* a bcast that did nothing must show */
			for (size_t i = 0; i < count; i++)
				out[i] = rank == root ? value(root, i) : -1000.0f;
		double cpu0 = perf_cpu_s(), mean_us = 0, start = MPI_Wtime();
		for (int it = 0; it < n_it; it++) {
			/* rooted: an untimed barrier first, as OSU's osu_bcast and
			 * osu_reduce do, or a root that returns at once would
			 * pipeline the calls and time none of them */
			if (coll == BCAST || coll == REDUCE)
				MPI_Barrier(MPI_COMM_WORLD);
			double ti = MPI_Wtime();
			run(coll, in, out, count, root, size);
			its[it] = (MPI_Wtime() - ti) * 1e6;
		}
		/* the timed calls only, not the barriers before them */
		double my_mean = 0;
		for (int it = 0; it < n_it; it++)
			my_mean += its[it] / n_it;
		double period_us = (MPI_Wtime() - start) * 1e6 / n_it;
		double cpu = perf_cpu_s() - cpu0, cpu_sum = 0;
		perf_probe(rank, rows, &core1, &cs1);
		wrong = check(coll, out, count, root, rank, size);
		/* after the timed calls: not among the calls measured */
		long wrong_all = 0;
		MPI_Reduce(its, slowest, n_it, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		MPI_Reduce(&cpu, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
		MPI_Reduce(&my_mean, &mean_us, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		mean_us /= size;
		total_wrong += wrong;
		double us = perf_median(slowest, n_it);
		double algbw = (double)bytes / us / 1e3;
		double cpu_per_gb = bytes ? perf_per_gb(cpu_sum, size, bytes, n_it) : 0;
		/* rank 0's CPUs, shared by the ranks confined there */
		char core_col[32];
		perf_core_col(core_col, sizeof(core_col), core0, core1, size, bytes, n_it);
		wrong = wrong_all;
		if (rank == 0 && osu)
			printf("%-10zu %18.2f%s\n", bytes, mean_us, wrong ? "  WRONG" : "");
		else if (rank == 0)
			printf("%12zu %12zu %9s %6s %11.1f %9.3f %9.3f %7ld %9.2f %9s\n", bytes,
			       count, "float", redop, us, algbw, algbw * busf, wrong, cpu_per_gb,
			       core_col);
		if (rank == 0 && !osu && rows)
			perf_row_print(stdout, bytes, period_us, -1, &cs0, &cs1);
		if (coll == BARRIER)
			break;      /* one row: sizes mean nothing */
		fflush(stdout);
	}
	free(in);
	free(out);
	free(its);
	free(slowest);
	MPI_Finalize();
	if (total_wrong)
		fprintf(stderr, "mpi-allreduce-perf: %ld wrong elements: these figures do not count\n",
			total_wrong);
	return total_wrong ? 1 : 0;
}
