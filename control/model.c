/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The model's small pieces every other file uses: the clock, job states'
 * names, freeing a job.
 */
#include <stdlib.h>
#include <time.h>

#include "mgr.h"

double mgr_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *mgr_job_state_name(enum mgr_job_state s)
{
	static const char *const n[] = { "waiting", "programming", "ready", "failed", "ring" };
	return s <= MGR_JOB_RING ? n[s] : "?";
}

void mgr_job_free(struct mgr_job *j)
{
	if (!j)
		return;
	free(j->ranks);
	free(j->groups);
	mgr_tree_free(&j->tree);   /* zeroed when it has none */
	free(j);
}
