/* SPDX-License-Identifier: BSD-3-Clause */
/* One request to the manager (inca_http.h), alone or on a kept connection. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "inca_http.h"

struct buf {
	char *p;
	size_t n;
};

static size_t collect(char *d, size_t sz, size_t nm, void *u)
{
	struct buf *b = u;
	char *p = realloc(b->p, b->n + sz * nm + 1);

	if (!p)
		return 0;
	memcpy(p + b->n, d, sz * nm);
	b->p = p;
	b->n += sz * nm;
	p[b->n] = 0;
	return sz * nm;
}

struct inca_http_client {
	CURLM *multi;                /* keeps the connection (and its TLS session) */
	CURL *easy;
	int interrupted;             /* atomic; taken by the request it ends */
};

struct inca_http_client *inca_http_client_new(void)
{
	struct inca_http_client *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->multi = curl_multi_init();
	h->easy = curl_easy_init();
	if (!h->multi || !h->easy) {
		inca_http_client_free(h);
		return NULL;
	}
	return h;
}

void inca_http_client_free(struct inca_http_client *h)
{
	if (!h)
		return;
	if (h->easy)
		curl_easy_cleanup(h->easy);
	if (h->multi)
		curl_multi_cleanup(h->multi);
	free(h);
}

void inca_http_client_interrupt(struct inca_http_client *h)
{
	__atomic_store_n(&h->interrupted, 1, __ATOMIC_RELEASE);
	curl_multi_wakeup(h->multi);
}

/* Run the easy handle to its end on the client's multi handle, which
 * inca_http_client_interrupt can wake. */
static CURLcode perform(struct inca_http_client *h)
{
	CURLcode rc = CURLE_OK;
	int running = 1;

	if (curl_multi_add_handle(h->multi, h->easy) != CURLM_OK)
		return CURLE_FAILED_INIT;
	while (running) {
		if (__atomic_exchange_n(&h->interrupted, 0, __ATOMIC_ACQ_REL)) {
			rc = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
		if (curl_multi_perform(h->multi, &running) != CURLM_OK) {
			rc = CURLE_FAILED_INIT;
			break;
		}
		if (running && curl_multi_poll(h->multi, NULL, 0, 1000, NULL) != CURLM_OK) {
			rc = CURLE_FAILED_INIT;
			break;
		}
	}
	if (!running) {
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(h->multi, &left)))
			if (msg->msg == CURLMSG_DONE && msg->easy_handle == h->easy)
				rc = msg->data.result;
	}
	curl_multi_remove_handle(h->multi, h->easy);
	return rc;
}

int inca_http_call(struct inca_http_client *h, const char *method, const char *url,
		   const char *token, const char *body, long timeout_ms, json_t **json,
		   char **text, char *err, size_t errlen)
{
	CURL *c = h->easy;
	struct curl_slist *hdr = NULL;
	struct buf b = { 0 };
	char auth[300];
	char detail[CURL_ERROR_SIZE] = "";
	const char *ca = getenv("INCA_MANAGER_CACERT");
	long status = 0;
	CURLcode rc;

	*json = NULL;
	if (text)
		*text = NULL;
	if (token && *token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		hdr = curl_slist_append(hdr, auth);
	}
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	curl_easy_reset(c);          /* options only: the connection stays */
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 1000 ? timeout_ms : 1000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
	/* https: the peer is verified (libcurl's default), against this CA
	 * when given (a lab's own, deploy/lab-ca), else the system's */
	if (ca && *ca)
		curl_easy_setopt(c, CURLOPT_CAINFO, ca);
	rc = perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	else if (rc == CURLE_ABORTED_BY_CALLBACK)
		snprintf(err, errlen, "%s: interrupted", url);
	else
		snprintf(err, errlen, "%s: %s%s%s", url, curl_easy_strerror(rc),
			 *detail ? ": " : "", detail);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(hdr);
	if (b.p)
		*json = json_loads(b.p, 0, NULL);
	if (rc == CURLE_OK && status >= 400) {
		const char *e = json_string_value(json_object_get(*json, "error"));
		snprintf(err, errlen, "%s %s: %ld: %s", method, url, status, e ? e : (b.p ? b.p : ""));
	}
	if (text)
		*text = b.p;
	else
		free(b.p);
	return rc == CURLE_OK ? (int)status : -1;
}

int inca_http(const char *method, const char *url, const char *token, const char *body,
	      long timeout_ms, json_t **json, char **text, char *err, size_t errlen)
{
	struct inca_http_client *h = inca_http_client_new();
	int rc;

	*json = NULL;
	if (text)
		*text = NULL;
	if (!h) {
		snprintf(err, errlen, "libcurl: cannot start");
		return -1;
	}
	rc = inca_http_call(h, method, url, token, body, timeout_ms, json, text, err, errlen);
	inca_http_client_free(h);
	return rc;
}

int inca_read_token_file(const char *path, char *out, size_t len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	n = fread(out, 1, len - 1, f);
	fclose(f);
	out[n] = 0;
	while (n && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
		out[--n] = 0;
	if (n < 16) {
		snprintf(err, errlen, "%s: expected a token of 16..255 characters", path);
		return -1;
	}
	return 0;
}
