/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Many nonblocking all-reduces in flight, completed out of order, as real
 * programs do (a solver that overlaps its dot products, a framework that
 * buckets gradients): rounds of W MPI_Iallreduce calls of S bytes (float
 * sum) on separate buffers, then completed in a shuffled order (the same
 * on every rank) by MPI_Wait, MPI_Test loops and MPI_Waitany. Every
 * result is checked; a wrong one fails the run. Prints the time per call
 * (median over the rounds of the slowest rank's time) per size.
 * Run it with and without libinca-mpi preloaded (tests/bench/run-mpi.sh
 * --nb).
 * Usage: mpirun ... mpi-nb-perf [-w W] [-r ROUNDS] [-s SIZE]...
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* one round: W calls of n floats; returns the number of wrong elements */
static long round_of(int w, size_t n, float **in, float **out, MPI_Request *req, int *order,
		     int rank, int size, unsigned seed)
{
	long wrong = 0;
	int left = w;

	for (int k = 0; k < w; k++) {
		for (size_t i = 0; i < n; i++)
			in[k][i] = (float)((rank + k + (int)i + (int)seed) % 7);
		MPI_Iallreduce(in[k], out[k], (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[k]);
	}
	/* a shuffled order, the same on every rank */
	for (int k = 0; k < w; k++)
		order[k] = k;
	srand(seed);
	for (int k = w - 1; k > 0; k--) {
		int j = rand() % (k + 1), t = order[k];
		order[k] = order[j];
		order[j] = t;
	}
	for (int k = 0; k < w; k++) {
		int idx = order[k], done = 0;
		if (req[idx] == MPI_REQUEST_NULL)
			continue;
		switch (k % 3) {
		case 0:
			MPI_Wait(&req[idx], MPI_STATUS_IGNORE);
			break;
		case 1:
			while (!done)
				MPI_Test(&req[idx], &done, MPI_STATUS_IGNORE);
			break;
		default:
			MPI_Waitany(w, req, &idx, MPI_STATUS_IGNORE);
			break;
		}
		left--;
	}
	MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
	(void)left;
	for (int k = 0; k < w; k++)
		for (size_t i = 0; i < n; i++) {
			float want = 0;
			for (int r = 0; r < size; r++)
				want += (float)((r + k + (int)i + (int)seed) % 7);
			wrong += out[k][i] != want;
		}
	return wrong;
}

int main(int argc, char **argv)
{
	int w = 100, rounds = 20, rank, size, opt, nsizes = 0;
	size_t sizes[16];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	while ((opt = getopt(argc, argv, "w:r:s:")) != -1) {
		switch (opt) {
		case 'w': w = atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 's':
			if (nsizes < 16)
				sizes[nsizes++] = strtoull(optarg, NULL, 0);
			break;
		default:
			if (rank == 0)
				fprintf(stderr, "usage: mpi-nb-perf [-w CALLS_IN_FLIGHT] [-r ROUNDS] "
					"[-s BYTES]...\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	if (!nsizes) {
		sizes[0] = 8;
		sizes[1] = 4096;
		nsizes = 2;
	}
	if (w < 1 || rounds < 1) {
		if (rank == 0)
			fprintf(stderr, "mpi-nb-perf: -w and -r must be >= 1\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	float **in = malloc(sizeof(*in) * (size_t)w), **out = malloc(sizeof(*out) * (size_t)w);
	MPI_Request *req = malloc(sizeof(*req) * (size_t)w);
	int *order = malloc(sizeof(int) * (size_t)w);
	double *t = malloc(sizeof(double) * (size_t)rounds);
	long bad = 0;
	if (rank == 0)
		printf("# mpi-nb-perf: %d ranks, %d MPI_Iallreduce in flight, completed out of order, "
		       "%d rounds\n# Size  us/call(median)  calls\n", size, w, rounds);
	for (int s = 0; s < nsizes; s++) {
		size_t n = sizes[s] / 4 ? sizes[s] / 4 : 1;
		for (int k = 0; k < w; k++) {
			in[k] = malloc(n * 4);
			out[k] = malloc(n * 4);
		}
		round_of(w, n, in, out, req, order, rank, size, 999);   /* warm-up */
		for (int r = 0; r < rounds; r++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			bad += round_of(w, n, in, out, req, order, rank, size, (unsigned)r + 1);
			double mine = MPI_Wtime() - t0;
			MPI_Allreduce(&mine, &t[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		}
		qsort(t, (size_t)rounds, sizeof(double), cmp_double);
		if (rank == 0)
			printf("%-7zu %12.2f  %d\n", n * 4, t[rounds / 2] * 1e6 / w, w * rounds);
		for (int k = 0; k < w; k++) {
			free(in[k]);
			free(out[k]);
		}
	}
	long all = 0;
	MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("# wrong elements: %ld\n", all);
		if (all)
			fprintf(stderr, "mpi-nb-perf: %ld wrong elements: the figures above are void\n",
				all);
	}
	free(in);
	free(out);
	free(req);
	free(order);
	free(t);
	MPI_Finalize();
	return all ? 1 : 0;
}
