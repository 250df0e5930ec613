/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the all-reduce benchmarks (inca-allreduce-perf and the Open MPI
 * baseline mpi-allreduce-perf), so both sides are measured the same way. */
#ifndef PERF_STATS_H
#define PERF_STATS_H

#include <stdlib.h>
#include <sys/resource.h>

/* sizes up to this take -N iterations: their medians need more samples */
#define PERF_SMALL_BYTES (64 * 1024)

/* user + system CPU seconds of this process so far */
static inline double perf_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static inline int perf_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* the median of v[0..n-1] (n >= 1; v is sorted in place) */
static inline double perf_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), perf_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
