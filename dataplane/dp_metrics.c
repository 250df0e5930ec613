/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch's counters for Prometheus: GET /metrics on the management
 * address given by --metrics ADDR:PORT, the text dp_metrics_text renders
 * from the same sums as the /inca/ telemetry commands. Its own thread
 * (libmicrohttpd's), never a worker's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "dp_priv.h"

struct dp_metrics {
	struct MHD_Daemon *d;
	struct dp_switch *sw;
};

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *ctype,
			      char *body, bool owned)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(strlen(body), body,
					    owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		if (owned)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", ctype);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "GET");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	struct dp_metrics *m = cls;
	char *text;

	(void)version;
	(void)upload;
	if (!*con_cls) {             /* headers only so far */
		*con_cls = m;
		return MHD_YES;
	}
	if (*upload_size) {          /* no body is wanted: drop it */
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
			      "only GET /metrics is served here\n", false);
	if (strcmp(url, "/metrics"))
		return answer(c, MHD_HTTP_NOT_FOUND, "text/plain",
			      "not found: the counters are at /metrics\n", false);
	text = dp_metrics_text(m->sw);
	if (!text)
		return answer(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain",
			      "out of memory\n", false);
	return answer(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, true);
}

struct dp_metrics *dp_metrics_start(struct dp_switch *sw, const char *listen_at, char *err,
				    size_t errlen)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	const char *colon = strrchr(listen_at, ':');
	struct dp_metrics *m;
	char host[64], *end;
	long port = colon ? strtol(colon + 1, &end, 10) : -1;

	if (!colon || *end || port < 1 || port > 65535 ||
	    (size_t)(colon - listen_at) >= sizeof(host)) {
		snprintf(err, errlen, "expected ADDR:PORT such as 0.0.0.0:9473, got '%s'",
			 listen_at);
		return NULL;
	}
	memcpy(host, listen_at, (size_t)(colon - listen_at));
	host[colon - listen_at] = 0;
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		snprintf(err, errlen, "'%s' is not an IPv4 address", host);
		return NULL;
	}
	sa.sin_port = htons((uint16_t)port);
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	m->sw = sw;
	m->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
				NULL, handler, m, MHD_OPTION_SOCK_ADDR, &sa,
				MHD_OPTION_CONNECTION_TIMEOUT, 10u,
				MHD_OPTION_CONNECTION_LIMIT, 16u, MHD_OPTION_END);
	if (!m->d) {
		snprintf(err, errlen, "cannot listen on %s: %s", listen_at, strerror(errno));
		free(m);
		return NULL;
	}
	return m;
}

void dp_metrics_stop(struct dp_metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d);
	free(m);
}
