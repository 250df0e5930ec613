/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The baseline: Open MPI's MPI_Allreduce (float sum), timed and printed in
 * the same columns as inca-allreduce-perf, so the two can be compared line
 * by line. The all-reduce itself is Open MPI's (its ring when told to use
 * coll_tuned algorithm 4); only this harness is ours.
 * Usage: mpirun ... mpi-allreduce-perf [-b MIN] [-e MAX] [-f F] [-n N] [-w W] [-o]
 * -o: the OSU micro-benchmarks' table (# Size  Avg Latency(us)) instead.
 * Run it with libinca-mpi preloaded and the same binary's MPI_Allreduce
 * goes through the switch (tests/bench/run-mpi.sh).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	int iters = 20, warmup = 5, opt, rank, size, osu = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	while ((opt = getopt(argc, argv, "b:e:f:n:w:o")) != -1) {
		switch (opt) {
		case 'b': minb = parse_size(optarg); break;
		case 'e': maxb = parse_size(optarg); break;
		case 'f': factor = atof(optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 'w': warmup = atoi(optarg); break;
		case 'o': osu = 1; break;
		default:
			if (rank == 0)
				fprintf(stderr, "usage: mpi-allreduce-perf [-b MIN] [-e MAX] [-f F] "
					"[-n N] [-w W] [-o]\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	if (minb < 4 || maxb < minb || factor <= 1 || iters < 1) {
		if (rank == 0)
			fprintf(stderr, "mpi-allreduce-perf: need 4 <= -b <= -e, -f > 1, -n >= 1\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	long total_wrong = 0;
	float *in = malloc(maxb), *out = malloc(maxb);
	if (!in || !out)
		MPI_Abort(MPI_COMM_WORLD, 1);
	if (rank == 0 && osu) {
		printf("# OSU-style MPI Allreduce Latency Test (mpi-allreduce-perf), %d ranks\n"
		       "# Size       Avg Latency(us)\n", size);
	} else if (rank == 0) {
		printf("# mpi-allreduce-perf: %d ranks, Open MPI MPI_Allreduce, %d iterations, "
		       "%d warm-up\n", size, iters, warmup);
		printf("#%11s %12s %9s %6s %11s %9s %9s %7s\n", "size", "count", "type", "redop",
		       "time", "algbw", "busbw", "#wrong");
	}
	for (size_t bytes = minb; bytes <= maxb; bytes = (size_t)((double)bytes * factor + 0.5)) {
		size_t count = bytes / 4;
		long wrong = 0;
		for (size_t i = 0; i < count; i++)
			in[i] = (float)((int)((rank * 131 + i * 17) % 41) - 20);
		for (int w = 0; w < warmup; w++)
			MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int it = 0; it < iters; it++)
			MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double us = (MPI_Wtime() - t0) * 1e6 / iters;
		for (size_t i = 0; i < count; i++) {
			float want = 0;
			for (int r = 0; r < size; r++)
				want += (float)((int)((r * 131 + i * 17) % 41) - 20);
			wrong += out[i] != want;
		}
		total_wrong += wrong;
		double algbw = (double)bytes / us / 1e3;
		if (rank == 0 && osu)
			printf("%-10zu %18.2f%s\n", bytes, us, wrong ? "  WRONG" : "");
		else if (rank == 0)
			printf("%12zu %12zu %9s %6s %11.1f %9.3f %9.3f %7ld\n", bytes, count, "float",
			       "sum", us, algbw, algbw * 2.0 * (size - 1) / size, wrong);
		fflush(stdout);
	}
	free(in);
	free(out);
	MPI_Finalize();
	if (total_wrong)
		fprintf(stderr, "mpi-allreduce-perf: %ld wrong elements: these figures do not count\n",
			total_wrong);
	return total_wrong ? 1 : 0;
}
