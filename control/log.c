/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the manager says: one log function (stderr, "inca-manager: "
 * first, journald adds the time) and the failure log (the last
 * MGR_FAILURES_KEPT switches down and jobs failed, each also logged).
 */
#include <stdarg.h>
#include <stdio.h>

#include "mgr.h"

void mgr_log(const char *fmt, ...)
{
	va_list ap;

	fputs("inca-manager: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void mgr_failure(struct mgr *m, const char *what, const char *fmt, ...)
{
	struct mgr_failure *f = &m->failures[m->nfailures++ % MGR_FAILURES_KEPT];
	va_list ap;

	f->t = m->now();
	snprintf(f->what, sizeof(f->what), "%s", what);
	va_start(ap, fmt);
	vsnprintf(f->reason, sizeof(f->reason), fmt, ap);
	va_end(ap);
	mgr_log("%s: %s", f->what, f->reason);
}
