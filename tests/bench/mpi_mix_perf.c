/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that mixes communicators libinca-mpi offloads with ones it
 * passes through, as solvers and frameworks do. Each step, at S bytes:
 *   world    MPI_Allreduce (float sum) on MPI_COMM_WORLD      offloaded
 *   column   MPI_Allreduce on a split of the world (rank % 2:
 *            one rank of each host), made once                 offloaded
 *   user op  MPI_Allreduce on the world with a user MPI_Op     passed (op)
 *   short    MPI_Comm_dup of the world, MPI_Bcast and
 *            MPI_Allreduce on it, MPI_Comm_free: a communicator
 *            with fewer calls than INCA_MPI_OFFLOAD_AFTER      passed (comm)
 * Every result is checked; a wrong one fails the run. Prints the median
 * time of a step (the slowest rank's) per size, and of each part alone.
 * Run it with and without libinca-mpi preloaded (tests/bench/run-mpi.sh
 * --mix).
 * Usage: mpirun ... mpi-mix-perf [-n STEPS] [-s BYTES]...
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { P_WORLD, P_COLUMN, P_USEROP, P_SHORT, NPARTS };

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* a float sum MPI cannot know is one: the interposer passes it through */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
	(void)dt;
	for (int i = 0; i < *len; i++)
		((float *)inout)[i] += ((const float *)in)[i];
}

static float input(int rank, size_t i, int step)
{
	return (float)((rank * 3 + (int)i + step) % 11);
}

/* the sum over the ranks of comm whose world ranks are first, first +
 * stride, ...: n of them */
static long check_sum(const float *got, size_t n, int first, int stride, int nranks, int step)
{
	long wrong = 0;

	for (size_t i = 0; i < n; i++) {
		float want = 0;
		for (int k = 0; k < nranks; k++)
			want += input(first + k * stride, i, step);
		wrong += got[i] != want;
	}
	return wrong;
}

int main(int argc, char **argv)
{
	int steps = 50, rank, size, opt, nsizes = 0;
	size_t sizes[16];
	MPI_Comm column;
	MPI_Op op;
	long bad = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	while ((opt = getopt(argc, argv, "n:s:")) != -1) {
		switch (opt) {
		case 'n': steps = atoi(optarg); break;
		case 's':
			if (nsizes < 16)
				sizes[nsizes++] = strtoull(optarg, NULL, 0);
			break;
		default:
			if (rank == 0)
				fprintf(stderr, "usage: mpi-mix-perf [-n STEPS] [-s BYTES]...\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	if (steps < 1 || size < 2) {
		if (rank == 0)
			fprintf(stderr, "mpi-mix-perf: -n must be >= 1 and the world >= 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (!nsizes) {
		sizes[0] = 8;
		sizes[1] = 4096;
		nsizes = 2;
	}
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &column);
	int csize;
	MPI_Comm_size(column, &csize);
	MPI_Op_create(user_sum, 1, &op);
	double *t = malloc(sizeof(double) * (size_t)steps * (NPARTS + 1));
	if (rank == 0)
		printf("# mpi-mix-perf: %d ranks, %d steps a size; a step: an all-reduce on the "
		       "world, one on a split (rank %% 2), one with a user op, and a dup'ed "
		       "communicator with a bcast and an all-reduce, freed\n"
		       "# Size  step(us,median)  world  column  user-op  short-lived\n",
		       size, steps);
	for (int s = 0; s < nsizes; s++) {
		size_t n = sizes[s] / 4 ? sizes[s] / 4 : 1;
		float *in = malloc(n * 4), *out = malloc(n * 4);
		if (!in || !out) {
			fprintf(stderr, "mpi-mix-perf: out of memory\n");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		/* step -1 warms up (the offloaded communicators are made in it) */
		for (int st = -5; st < steps; st++) {
			double part[NPARTS], t0, tp;
			MPI_Comm dup;

			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
			for (size_t i = 0; i < n; i++)
				in[i] = input(rank, i, st);
			tp = MPI_Wtime();
			MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			bad += check_sum(out, n, 0, 1, size, st);
			part[P_WORLD] = MPI_Wtime() - tp;
			tp = MPI_Wtime();
			MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, column);
			bad += check_sum(out, n, rank % 2, 2, csize, st);
			part[P_COLUMN] = MPI_Wtime() - tp;
			tp = MPI_Wtime();
			MPI_Allreduce(in, out, (int)n, MPI_FLOAT, op, MPI_COMM_WORLD);
			bad += check_sum(out, n, 0, 1, size, st);
			part[P_USEROP] = MPI_Wtime() - tp;
			tp = MPI_Wtime();
			MPI_Comm_dup(MPI_COMM_WORLD, &dup);
			memcpy(out, in, n * 4);
			MPI_Bcast(out, (int)n, MPI_FLOAT, st & 1 ? size - 1 : 0, dup);
			bad += check_sum(out, n, st & 1 ? size - 1 : 0, 1, 1, st);
			MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, dup);
			bad += check_sum(out, n, 0, 1, size, st);
			MPI_Comm_free(&dup);
			part[P_SHORT] = MPI_Wtime() - tp;
			double mine[NPARTS + 1] = { MPI_Wtime() - t0 }, all[NPARTS + 1];
			memcpy(mine + 1, part, sizeof(part));
			MPI_Allreduce(mine, all, NPARTS + 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
			if (st >= 0)
				for (int k = 0; k <= NPARTS; k++)
					t[(size_t)k * (size_t)steps + (size_t)st] = all[k];
		}
		if (rank == 0) {
			printf("%-7zu", n * 4);
			for (int k = 0; k <= NPARTS; k++) {
				double *tk = t + (size_t)k * (size_t)steps;
				qsort(tk, (size_t)steps, sizeof(double), cmp_double);
				printf(k ? " %8.2f" : " %12.2f", tk[steps / 2] * 1e6);
			}
			printf("\n");
		}
		free(in);
		free(out);
	}
	long all = 0;
	MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("# wrong elements: %ld\n", all);
		if (all)
			fprintf(stderr, "mpi-mix-perf: %ld wrong elements: the figures above are void\n",
				all);
	}
	MPI_Op_free(&op);
	MPI_Comm_free(&column);
	free(t);
	MPI_Finalize();
	return all ? 1 : 0;
}
