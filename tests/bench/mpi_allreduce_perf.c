/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The baseline: Open MPI's MPI_Allreduce (float sum), timed and printed in
 * the same columns as inca-allreduce-perf, so the two can be compared line
 * by line. The all-reduce itself is Open MPI's (its ring when told to use
 * coll_tuned algorithm 4); only this harness is ours.
 * Usage: mpirun ... mpi-allreduce-perf [-b MIN] [-e MAX] [-f F] [-n N] [-N N] [-w W] [-o]
 * -N: iterations for sizes up to 64 KiB (default -n).
 * The time is the median over the timed iterations of the slowest rank's
 * time; cpu is a rank's user+system CPU seconds per GB reduced (mean over
 * ranks; Open MPI's daemons not counted).
 * -o: the OSU micro-benchmarks' table (# Size  Avg Latency(us)) instead.
 * Run it with libinca-mpi preloaded and the same binary's MPI_Allreduce
 * goes through the switch (tests/bench/run-mpi.sh).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_stats.h"

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
	int iters = 20, small_iters = 0, warmup = 5, opt, rank, size, osu = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	while ((opt = getopt(argc, argv, "b:e:f:n:N:w:o")) != -1) {
		switch (opt) {
		case 'b': minb = parse_size(optarg); break;
		case 'e': maxb = parse_size(optarg); break;
		case 'f': factor = atof(optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 'N': small_iters = atoi(optarg); break;
		case 'w': warmup = atoi(optarg); break;
		case 'o': osu = 1; break;
		default:
			if (rank == 0)
				fprintf(stderr, "usage: mpi-allreduce-perf [-b MIN] [-e MAX] [-f F] "
					"[-n N] [-N N] [-w W] [-o]\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	if (!small_iters)
		small_iters = iters;
	if (minb < 4 || maxb < minb || factor <= 1 || iters < 1 || small_iters < 1) {
		if (rank == 0)
			fprintf(stderr, "mpi-allreduce-perf: need 4 <= -b <= -e, -f > 1, -n >= 1\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	long total_wrong = 0;
	float *in = malloc(maxb), *out = malloc(maxb);
	int max_iters = iters > small_iters ? iters : small_iters;
	double *its = malloc(sizeof(double) * (size_t)max_iters);
	double *slowest = malloc(sizeof(double) * (size_t)max_iters);
	if (!in || !out || !its || !slowest)
		MPI_Abort(MPI_COMM_WORLD, 1);
	if (rank == 0 && osu) {
		printf("# OSU-style MPI Allreduce Latency Test (mpi-allreduce-perf), %d ranks\n"
		       "# Size       Avg Latency(us)\n", size);
	} else if (rank == 0) {
		printf("# mpi-allreduce-perf: %d ranks, Open MPI MPI_Allreduce, %d iterations (%d up "
		       "to 64 KiB), %d warm-up\n", size, iters, small_iters, warmup);
		printf("#%11s %12s %9s %6s %11s %9s %9s %7s %9s\n", "size", "count", "type", "redop",
		       "time", "algbw", "busbw", "#wrong", "cpu");
		printf("#%11s %12s %9s %6s %11s %9s %9s %7s %9s\n", "(B)", "(elements)", "", "",
		       "(us)", "(GB/s)", "(GB/s)", "", "(s/GB)");
	}
	for (size_t bytes = minb; bytes <= maxb; bytes = (size_t)((double)bytes * factor + 0.5)) {
		size_t count = bytes / 4;
		long wrong = 0;
		int n_it = bytes <= PERF_SMALL_BYTES ? small_iters : iters;
		for (size_t i = 0; i < count; i++)
			in[i] = (float)((int)((rank * 131 + i * 17) % 41) - 20);
		for (int w = 0; w < warmup; w++)
			MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		double cpu0 = perf_cpu_s(), t0 = MPI_Wtime(), mean_us;
		for (int it = 0; it < n_it; it++) {
			double ti = MPI_Wtime();
			MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			its[it] = (MPI_Wtime() - ti) * 1e6;
		}
		mean_us = (MPI_Wtime() - t0) * 1e6 / n_it;
		double cpu = perf_cpu_s() - cpu0, cpu_sum = 0;
		for (size_t i = 0; i < count; i++) {
			float want = 0;
			for (int r = 0; r < size; r++)
				want += (float)((int)((r * 131 + i * 17) % 41) - 20);
			wrong += out[i] != want;
		}
		/* MPI_Reduce: not intercepted by libinca-mpi, so these do not
		 * count among the calls measured */
		long wrong_all = 0;
		MPI_Reduce(its, slowest, n_it, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		MPI_Reduce(&cpu, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
		total_wrong += wrong;
		double us = perf_median(slowest, n_it);
		double algbw = (double)bytes / us / 1e3;
		double cpu_per_gb = cpu_sum / size / ((double)bytes * n_it / 1e9);
		wrong = wrong_all;
		if (rank == 0 && osu)
			printf("%-10zu %18.2f%s\n", bytes, mean_us, wrong ? "  WRONG" : "");
		else if (rank == 0)
			printf("%12zu %12zu %9s %6s %11.1f %9.3f %9.3f %7ld %9.2f\n", bytes, count,
			       "float", "sum", us, algbw, algbw * 2.0 * (size - 1) / size, wrong,
			       cpu_per_gb);
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
