/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the all-reduce benchmarks (inca-allreduce-perf and the Open MPI
 * baseline mpi-allreduce-perf), so both sides are measured the same way. */
#ifndef PERF_STATS_H
#define PERF_STATS_H

#ifndef _GNU_SOURCE
#error "perf_stats.h needs _GNU_SOURCE (cpu_set_t, CPU_COUNT): define it on the command line"
#endif
#include <ctype.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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

/* The busy time of the CPUs this process may run on: their wall time less
 * the time they idled, which the kernel's cpuidle keeps per CPU and idle
 * state in microseconds (/sys/devices/system/cpu/cpuN/cpuidle/stateK/time).
 * Where every rank of a job is confined to the same CPUs, and only there
 * (run-allreduce.sh --rank-cpus), that is the ranks' core: it counts what
 * getrusage does not charge them (the kernel's receive work in softirq,
 * switching among them) and whatever else runs on those CPUs. The kernel
 * adds an idle spell to the time when it ends: exact for one CPU, the one
 * this runs on (busy when it reads); on several, a spell under way at
 * either end is missed or counted whole. A virtual CPU's steal counts as
 * busy. */
struct perf_core {
	double wall_s;   /* CLOCK_MONOTONIC */
	double idle_s;   /* summed over the CPUs */
	int ncpu;        /* the CPUs: the process's when it read them */
	bool ok;         /* confined to fewer CPUs than are online, all read */
};

/* the idle microseconds of CPU cpu, summed over its idle states; -1 when
 * the kernel keeps none (no cpuidle driver) */
static inline double perf_cpu_idle_us(int cpu)
{
	double sum = 0;
	int states = 0;

	for (int k = 0; k < 16; k++) {
		char path[96];
		unsigned long long us;

		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/time", cpu, k);
		FILE *f = fopen(path, "r");
		if (!f)
			break;
		int got = fscanf(f, "%llu", &us);
		fclose(f);
		if (got != 1)
			return -1;
		sum += (double)us;
		states++;
	}
	return states ? sum : -1;
}

static inline struct perf_core perf_core_now(void)
{
	struct perf_core c = { 0 };
	struct timespec ts;
	cpu_set_t set;
	long online = sysconf(_SC_NPROCESSORS_ONLN);

	clock_gettime(CLOCK_MONOTONIC, &ts);
	c.wall_s = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
	if (sched_getaffinity(0, sizeof(set), &set) || online < 1 ||
	    CPU_COUNT(&set) >= online)
		return c;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &set))
			continue;
		double us = perf_cpu_idle_us(cpu);
		if (us < 0)
			return c;
		c.idle_s += us * 1e-6;
	}
	c.ncpu = CPU_COUNT(&set);
	c.ok = true;
	return c;
}

/* busy CPU seconds of the process's CPUs from a to b; -1 when either
 * could not be read, the process was not confined or its CPUs changed */
static inline double perf_core_busy_s(struct perf_core a, struct perf_core b)
{
	if (!a.ok || !b.ok || a.ncpu != b.ncpu)
		return -1;
	double busy = (b.wall_s - a.wall_s) * a.ncpu - (b.idle_s - a.idle_s);
	return busy > 0 ? busy : 0;
}

/* seconds spent over n_it calls of bytes each, per GB and per rank of size */
static inline double perf_per_gb(double s, int size, size_t bytes, int n_it)
{
	return s / size / ((double)bytes * n_it / 1e9);
}

/* the core column: the busy seconds of rank 0's CPUs a GB over the ranks
 * (perf_core_busy_s() from a to b), or "-" */
static inline void perf_core_col(char *col, size_t len, struct perf_core a, struct perf_core b,
				 int size, size_t bytes, int n_it)
{
	double core = perf_core_busy_s(a, b);

	if (bytes && core >= 0)
		snprintf(col, len, "%.2f", perf_per_gb(core, size, bytes, n_it));
	else
		snprintf(col, len, "-");
}

/* What the online CPUs did (the first PERF_MAX_CPUS of them), from
 * /proc/stat: each one's time in clock ticks (USER_HZ, 10 ms) as user (with
 * nice), system, irq and softirq, idle (with iowait) and steal. A row of a
 * sweep shorter than a second or so is too short for them. */
#define PERF_MAX_CPUS 64
struct perf_cpustat {
	int n;
	int id[PERF_MAX_CPUS];
	unsigned long long t[PERF_MAX_CPUS][5];   /* user system softirq idle steal */
};

static inline struct perf_cpustat perf_cpustat_now(void)
{
	struct perf_cpustat st = { 0 };
	char line[512];
	FILE *f = fopen("/proc/stat", "r");

	if (!f)
		return st;
	while (fgets(line, sizeof(line), f) && st.n < PERF_MAX_CPUS) {
		unsigned long long v[8] = { 0 };
		int cpu;

		/* cpuN lines only, not the machine's "cpu " total */
		if (strncmp(line, "cpu", 3) || !isdigit((unsigned char)line[3]) ||
		    sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0],
			   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 9)
			continue;
		st.id[st.n] = cpu;
		st.t[st.n][0] = v[0] + v[1];
		st.t[st.n][1] = v[2];
		st.t[st.n][2] = v[5] + v[6];
		st.t[st.n][3] = v[3] + v[4];
		st.t[st.n][4] = v[7];
		st.n++;
	}
	fclose(f);
	return st;
}

/* A row's comment line: "# row B bytes: period P us, spin S us; cpu0 user U
 * system S softirq Q idle I steal T ticks K; cpu1 ...", P the wall time of
 * this rank's timed calls over their count (back to back: the rate calls go
 * at, where the row's time is each call's slowest rank), S the CPU a rank
 * spent a call polling for results not there yet (libinca's spin_cpu_us,
 * mean over the ranks; left out when spin_us < 0), then the shares of each
 * CPU's time from a to b (none when /proc/stat could not be read) */
static inline void perf_row_print(FILE *out, size_t bytes, double period_us, double spin_us,
				  const struct perf_cpustat *a, const struct perf_cpustat *b)
{
	static const char *const names[5] = { "user", "system", "softirq", "idle", "steal" };

	fprintf(out, "# row %zu B: period %.1f us", bytes, period_us);
	if (spin_us >= 0)
		fprintf(out, ", spin %.1f us", spin_us);
	for (int c = 0; c < a->n && a->n == b->n && a->id[c] == b->id[c]; c++) {
		unsigned long long d[5], sum = 0;

		for (int k = 0; k < 5; k++)
			sum += d[k] = b->t[c][k] - a->t[c][k];
		fprintf(out, "; cpu%d", a->id[c]);
		for (int k = 0; k < 5; k++)
			fprintf(out, " %s %.3f", names[k], sum ? (double)d[k] / (double)sum : 0);
		fprintf(out, " ticks %llu", sum);
	}
	fprintf(out, "\n");
}

/* Rank 0's probes of its CPUs for a row: busy time (core) and, with rows,
 * each CPU's shares; nothing on the other ranks (left zero: no figure) */
static inline void perf_probe(int rank, bool rows, struct perf_core *core,
			      struct perf_cpustat *cs)
{
	if (rank != 0)
		return;
	*core = perf_core_now();
	if (rows)
		*cs = perf_cpustat_now();
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
