/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libinca-mpi: a PMPI interposer that makes an unmodified MPI program's
 * collectives use INCA. Loaded with LD_PRELOAD (mpirun -x LD_PRELOAD=...)
 * or linked with -linca-mpi. This file: start-up, settings, the log and
 * the per-collective table printed at MPI_Finalize (docs/mpi.md).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "im_priv.h"

struct im_config im_cfg;
struct im_counter im_count[IM_NCOLL];
struct im_host_first im_host_first;
struct im_pass_forms im_pass_forms;
struct im_groups im_groups;

static const char *const coll_names[IM_NCOLL] = {
	[IM_ALLREDUCE] = "MPI_Allreduce", [IM_IALLREDUCE] = "MPI_Iallreduce",
	[IM_REDUCE] = "MPI_Reduce", [IM_IREDUCE] = "MPI_Ireduce",
	[IM_REDUCE_SCATTER_BLOCK] = "MPI_Reduce_scatter_block",
	[IM_IREDUCE_SCATTER_BLOCK] = "MPI_Ireduce_scatter_block",
	[IM_REDUCE_SCATTER] = "MPI_Reduce_scatter", [IM_IREDUCE_SCATTER] = "MPI_Ireduce_scatter",
	[IM_ALLGATHER] = "MPI_Allgather", [IM_IALLGATHER] = "MPI_Iallgather",
	[IM_BCAST] = "MPI_Bcast", [IM_IBCAST] = "MPI_Ibcast",
	[IM_BARRIER] = "MPI_Barrier", [IM_IBARRIER] = "MPI_Ibarrier",
};

/* the columns of why calls passed through (enum im_why) */
static const char *const why_names[IM_NWHY] = {
	[IM_WHY_COMM] = "p_comm", [IM_WHY_TYPE] = "p_type", [IM_WHY_OP] = "p_op",
	[IM_WHY_SIZE] = "p_size", [IM_WHY_SHAPE] = "p_shape", [IM_WHY_FAILED] = "p_failed",
};

static int world_rank = -1;

double im_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* level 0: errors (always), 1: decisions (INCA_MPI_VERBOSE=1), 2: details */
void im_log(int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (level > im_cfg.verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "libinca-mpi[%d]: %s\n", world_rank, msg);
}

static bool env_true(const char *name, bool def)
{
	const char *s = getenv(name);

	if (!s || !*s)
		return def;
	return strcmp(s, "0") && strcasecmp(s, "off") && strcasecmp(s, "false") &&
	       strcasecmp(s, "no");
}

/* a byte count: digits with an optional K, M or G suffix */
static int env_bytes(const char *name, size_t def, size_t *out)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	*out = def;
	if (!s || !*s)
		return 0;
	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'K': case 'k': v <<= 10; end++; break;
	case 'M': case 'm': v <<= 20; end++; break;
	case 'G': case 'g': v <<= 30; end++; break;
	}
	if (*end || end == s) {
		fprintf(stderr, "libinca-mpi: %s='%s': expected a byte count such as 4096 or "
			"64K; using %zu\n", name, s, def);
		return -1;
	}
	*out = (size_t)v;
	return 0;
}

/* the job id's prefix: INCA_JOB, else the launcher's job, else "mpi" */
static void job_prefix(char *out, size_t len)
{
	const char *src = getenv("INCA_JOB");
	size_t n = 0;

	if (!src)
		src = getenv("OMPI_MCA_ess_base_jobid");
	if (!src)
		src = getenv("PMIX_NAMESPACE");
	if (!src || !*src)
		src = "mpi";
	for (; *src && n + 1 < len; src++) {
		char c = *src;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '-' || c == '_';
		out[n++] = ok ? c : '-';
	}
	out[n] = 0;
}

/* A communicator is offloaded at its OFFLOAD_AFTER-th offloadable call;
 * the calls before pass through. Creating its group (the manager, the
 * switch) took 9-33 ms on the lab testbed: a program that makes a
 * communicator for one broadcast and an all-reduce and frees it ran 25x
 * slower offloaded than with Open MPI alone (8 ranks, 2 per host). */
#define OFFLOAD_AFTER 4

/* Freed offloaded communicators whose group a process keeps for the next
 * communicator of the same ranks (manager mode): creating a group took
 * 3-6 ms and freeing it 1.5-2.7 ms on the lab testbed, taking a kept one
 * a few collectives on the new communicator. A kept group is a job on the
 * manager (with its slots) until it is taken, pushed out or MPI ends. */
#define POOL 2

static void configure(void)
{
	const char *s = getenv("INCA_MPI_VERBOSE");

	im_cfg.enabled = env_true("INCA_MPI", true);
	im_cfg.verbose = s ? atoi(s) : 0;
	im_cfg.stats = env_true("INCA_MPI_STATS", false);
	im_cfg.pass_settled = env_true("INCA_MPI_PASS_SETTLED", true);
	env_bytes("INCA_MPI_MIN_BYTES", 0, &im_cfg.min_bytes);
	env_bytes("INCA_MPI_MAX_BYTES", 0, &im_cfg.max_bytes);
	s = getenv("INCA_MPI_CREATE_TIMEOUT_MS");
	im_cfg.create_timeout_ms = s && atoi(s) > 0 ? (unsigned)atoi(s) : 30000;
	s = getenv("INCA_MPI_OFFLOAD_AFTER");
	im_cfg.offload_after = s && atoi(s) > 0 ? (unsigned)atoi(s) : OFFLOAD_AFTER;
	s = getenv("INCA_MPI_POOL");
	im_cfg.pool = s && atoi(s) >= 0 ? (unsigned)atoi(s) : POOL;
	job_prefix(im_cfg.job_prefix, sizeof(im_cfg.job_prefix));
}

static void started(void)
{
	PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
	configure();
	if (!im_cfg.enabled) {
		im_log(1, "INCA_MPI=0: every call goes to MPI");
		return;
	}
	im_progress_init();
	if (world_rank == 0)
		im_log(1, "libinca-mpi %d.%d: all-reduce, reduce, reduce-scatter, allgather, "
		       "bcast and barrier (blocking and nonblocking) are offloaded where "
		       "they map (min %zu bytes%s)",
		       INCA_VERSION_MAJOR, INCA_VERSION_MINOR, im_cfg.min_bytes,
		       im_cfg.max_bytes ? ", with a maximum" : "");
}

/* The library built for one MPI ABI preloaded into a program of the other
 * (libinca-mpi.so under MPICH, libinca-mpi-mpich.so under Open MPI): the
 * handles it was compiled with mean nothing to that MPI, and the first
 * call would crash or worse. The program's MPI answers
 * MPI_Get_library_version before MPI_Init (the program's MPI library
 * comes before ours in symbol lookup); said, and the program ends. */
static void abi_check(void)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
	int len = 0;
	bool open_mpi;

	if (PMPI_Get_library_version(v, &len) != MPI_SUCCESS)
		return;
	open_mpi = strstr(v, "Open MPI") != NULL;
	v[strcspn(v, "\n")] = 0;       /* MPICH's runs over several lines */
#ifdef OPEN_MPI
	if (open_mpi)
		return;
	fprintf(stderr, "libinca-mpi: this is libinca-mpi.so, built for Open MPI, but the "
		"program runs on \"%.80s\": preload libinca-mpi-mpich.so (MPICH's ABI) "
		"instead\n", v);
#else
	if (!open_mpi)
		return;
	fprintf(stderr, "libinca-mpi: this is libinca-mpi-mpich.so, built for MPICH's ABI, "
		"but the program runs on \"%.80s\": preload libinca-mpi.so instead\n", v);
#endif
	/* not exit(): the other MPI's destructors crash on its state */
	fflush(stderr);
	_exit(1);
}

int MPI_Init(int *argc, char ***argv)
{
	int rc;

	abi_check();
	rc = PMPI_Init(argc, argv);

	if (rc == MPI_SUCCESS)
		started();
	return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int rc;

	abi_check();
	rc = PMPI_Init_thread(argc, argv, required, provided);

	if (rc == MPI_SUCCESS)
		started();
	return rc;
}

/* INCA_MPI_STATS=1: the table of every rank's calls, summed, from rank 0:
 * the collectives no rank called are left out */
#define NCOL (6 + IM_NWHY)
static void print_stats(void)
{
	double sums[IM_NCOLL][NCOL], mine[IM_NCOLL][NCOL];
	int size;

	for (int k = 0; k < IM_NCOLL; k++) {
		const struct im_counter *c = &im_count[k];
		double v[6] = { (double)c->offloaded, (double)c->passed,
				(double)c->bytes_offloaded, (double)c->bytes_passed,
				c->us_offloaded, c->us_passed };
		memcpy(mine[k], v, sizeof(v));
		for (int w = 0; w < IM_NWHY; w++)
			mine[k][6 + w] = (double)c->why[w];
	}
	double hf[7] = { (double)im_host_first.calls, (double)im_host_first.all,
			 (double)im_groups.created, (double)im_groups.reused,
			 (double)im_host_first.rails, (double)im_pass_forms.served,
			 (double)im_pass_forms.settled }, hfs[7];
	PMPI_Comm_size(MPI_COMM_WORLD, &size);
	PMPI_Reduce(mine, sums, IM_NCOLL * NCOL, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	PMPI_Reduce(hf, hfs, 7, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	if (world_rank != 0)
		return;
	fprintf(stderr, "libinca-mpi: calls summed over %d ranks (time: mean per call; "
		"passed through because: p_comm its communicator is not offloaded, p_type "
		"the type, p_op the op, p_size the size, p_shape counts/types/root, p_failed "
		"the switch failed)\n%-26s %10s %10s %14s %14s %12s %12s", size, "# collective",
		"offloaded", "passed", "bytes_offl", "bytes_passed", "us_offl", "us_passed");
	for (int w = 0; w < IM_NWHY; w++)
		fprintf(stderr, " %9s", why_names[w]);
	fputc('\n', stderr);
	for (int k = 0; k < IM_NCOLL; k++) {
		if (!sums[k][0] && !sums[k][1])
			continue;
		fprintf(stderr, "%-26s %10.0f %10.0f %14.0f %14.0f %12.1f %12.1f",
			coll_names[k], sums[k][0], sums[k][1], sums[k][2], sums[k][3],
			sums[k][0] ? sums[k][4] / sums[k][0] : 0,
			sums[k][1] ? sums[k][5] / sums[k][1] : 0);
		for (int w = 0; w < IM_NWHY; w++)
			fprintf(stderr, " %9.0f", sums[k][6 + w]);
		fputc('\n', stderr);
	}
	fprintf(stderr, "libinca-mpi: %.0f of libinca's %.0f collectives reduced inside the "
		"host first (several ranks per host), %.0f of them on rails\n", hfs[0], hfs[1],
		hfs[4]);
	fprintf(stderr, "libinca-mpi: communicators offloaded: %.0f with a new group, %.0f "
		"with a freed communicator's (INCA_MPI_POOL)\n",
		hfs[2], hfs[3]);
	fprintf(stderr, "libinca-mpi: blocking calls passed through on offloaded communicators: "
		"%.0f waited for nonblocking, serving recoveries (an offloaded call before them "
		"may not be complete on every rank, or the switch failed), %.0f with MPI's "
		"blocking call\n", hfs[5], hfs[6]);
}

int MPI_Finalize(void)
{
	if (im_cfg.enabled) {
		im_comm_release_all();
		im_progress_fini();
		if (im_cfg.stats)
			print_stats();
	}
	return PMPI_Finalize();
}

int MPI_Comm_free(MPI_Comm *comm)
{
	if (im_cfg.enabled && comm)
		im_comm_release(*comm);
	return PMPI_Comm_free(comm);
}

/* Making a communicator is a collective on its parent that the
 * interposer does not offload: the parent's calls in flight are finished
 * first, so that every rank's calls on it stay in the same order (a rank
 * that redoes one through MPI after a switch failure meets the others). */
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	if (im_cfg.enabled)
		im_comm_pass(comm, NULL);
	return PMPI_Comm_dup(comm, newcomm);
}

int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request)
{
	if (im_cfg.enabled)
		im_comm_pass(comm, NULL);
	return PMPI_Comm_idup(comm, newcomm, request);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	if (im_cfg.enabled)
		im_comm_pass(comm, NULL);
	return PMPI_Comm_split(comm, color, key, newcomm);
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm)
{
	if (im_cfg.enabled)
		im_comm_pass(comm, NULL);
	return PMPI_Comm_split_type(comm, type, key, info, newcomm);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
	if (im_cfg.enabled)
		im_comm_pass(comm, NULL);
	return PMPI_Comm_create(comm, group, newcomm);
}
