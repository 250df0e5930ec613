/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for inca-manager's request handler (mgr_api, the
 * function of (method, path, token, body) the HTTP server calls): any
 * request, from anyone. The input is "METHOD\nPATH\nWHO\nBODY" (WHO: 0
 * none, 1 admin, 2 tenant a, 3 a wrong token; a missing part is empty).
 * No crash, no leak, no request held (the manager is "stopping", so
 * long-polls answer at once); every answer is a status 200..599 with a
 * body, JSON unless it is /metrics, and a refusal is {"error": "..."}.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "mgr.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

#define ADMIN "fuzz-admin-token-0123456789"
#define TENANT "fuzz-tenant-a-token-0123456789"

static const char topology[] =
	"{ \"switches\": ["
	"  { \"name\": \"spine\", \"role\": \"spine\", \"ip\": \"10.0.0.250\", \"max_groups\": 64,"
	"    \"max_slots\": 1024 },"
	"  { \"name\": \"leaf1\", \"role\": \"leaf\", \"ip\": \"10.0.0.251\" },"
	"  { \"name\": \"leaf2\", \"role\": \"leaf\", \"ip\": \"10.0.0.252\" } ],"
	"  \"hosts\": [ { \"name\": \"h1\", \"ip\": \"10.0.0.1\", \"leaf\": \"leaf1\" },"
	"    { \"name\": \"h2\", \"ip\": \"10.0.0.2\", \"leaf\": \"leaf1\" },"
	"    { \"name\": \"h3\", \"ip\": \"10.0.0.3\", \"leaf\": \"leaf2\" } ],"
	"  \"links\": [ { \"leaf\": \"leaf1\", \"spine\": \"spine\" },"
	"    { \"leaf\": \"leaf2\", \"spine\": \"spine\" } ],"
	"  \"tenants\": [ { \"name\": \"a\", \"token\": \"" TENANT "\","
	"    \"max_slots_per_switch\": 256, \"max_jobs\": 8 } ] }";

static struct mgr m;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[] = "/tmp/inca-fuzz-topo-XXXXXX", err[512];
	int fd = mkstemp(path);

	(void)argc;
	(void)argv;
	check(fd >= 0);
	check(write(fd, topology, sizeof(topology) - 1) == (ssize_t)(sizeof(topology) - 1));
	close(fd);
	if (mgr_init(&m, path, NULL, ADMIN, err, sizeof(err))) {
		fprintf(stderr, "fuzz_mgr_api: %s\n", err);
		abort();
	}
	unlink(path);
	m.stopping = true;
	return 0;
}

/* the next '\n'-terminated part of [*p, end) as a string (malloc'ed) */
static char *part(const uint8_t **p, const uint8_t *end, bool last)
{
	const uint8_t *nl = last ? NULL : memchr(*p, '\n', (size_t)(end - *p));
	size_t n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
	char *s = malloc(n + 1);

	check(s != NULL);
	memcpy(s, *p, n);
	s[n] = 0;
	*p += n + (nl ? 1 : 0);
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const who[] = { NULL, ADMIN, TENANT, "not-a-token-of-anyone-here" };
	const uint8_t *p = data, *end = data + size;
	char *method = part(&p, end, false), *path = part(&p, end, false);
	char *w = part(&p, end, false), *body = part(&p, end, true);
	const char *token = who[(w[0] - '0') & 3], *ctype = NULL;
	char *resp = NULL;
	int status;

	status = mgr_api(&m, method, path, token, p > data && *body ? body : NULL, &resp, &ctype);
	check(status >= 200 && status <= 599);
	check(resp != NULL && ctype != NULL);
	if (!strstr(ctype, "text/plain")) {
		json_error_t e;
		json_t *j = json_loads(resp, 0, &e);

		check(j != NULL);
		if (status >= 400)
			check(json_is_string(json_object_get(j, "error")));
		json_decref(j);
	}
	free(resp);
	free(method);
	free(path);
	free(w);
	free(body);
	/* leases and heartbeats age as the real manager's would */
	mgr_tick(&m);
	return 0;
}
