/* SPDX-License-Identifier: BSD-3-Clause */
/* Logging through a replaceable callback (quiet by default), and the
 * error messages every failing call leaves behind. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hl_priv.h"

static void default_sink(enum inca_log_level level, const char *msg, void *arg)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	(void)arg;
	fprintf(stderr, "libinca: %s: %s\n", names[level], msg);
}

static inca_log_fn sink = default_sink;
static void *sink_arg;
static enum inca_log_level max_level = INCA_LOG_ERROR;
static bool env_read;

static void read_env(void)
{
	const char *e = getenv("INCA_LOG");
	static const char *const names[] = { "error", "warn", "info", "debug" };

	env_read = true;
	if (!e)
		return;
	for (int i = 0; i < 4; i++)
		if (!strcasecmp(e, names[i]))
			max_level = (enum inca_log_level)i;
}

void inca_set_log(inca_log_fn fn, void *arg, enum inca_log_level level)
{
	env_read = true;
	sink = fn ? fn : default_sink;
	sink_arg = fn ? arg : NULL;
	max_level = level;
}

void hl_log(enum inca_log_level level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!env_read)
		read_env();
	if (level > max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sink(level, msg, sink_arg);
}

int hl_fail(struct inca_comm *c, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	va_end(ap);
	hl_log(INCA_LOG_ERROR, "rank %d: %s", c->rank, c->errmsg);
	return err;
}

const char *inca_strerror(int err)
{
	static const char *const msgs[] = {
		[0] = "success",
		[1] = "invalid argument",
		[2] = "out of memory",
		[3] = "missing or malformed group description",
		[4] = "transport failure",
		[5] = "deadline passed",
		[6] = "switch unavailable and no fallback (off, or it failed)",
		[7] = "a member was unreachable during fallback",
		[8] = "not supported by this build",
		[9] = "too many collectives in flight",
		[10] = "protocol violation by a peer",
		[11] = "manager refused or unreachable",
	};
	if (err > 0 || -err >= (int)(sizeof(msgs) / sizeof(msgs[0])))
		return "unknown libinca error";
	return msgs[-err];
}
