/* SPDX-License-Identifier: BSD-3-Clause */
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

int inca_http(const char *method, const char *url, const char *token, const char *body,
	      long timeout_ms, json_t **json, char **text, char *err, size_t errlen)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	struct buf b = { 0 };
	char auth[300];
	char detail[CURL_ERROR_SIZE] = "";
	const char *ca = getenv("INCA_MANAGER_CACERT");
	long status = 0;
	CURLcode rc;

	*json = NULL;
	if (text)
		*text = NULL;
	if (!c) {
		snprintf(err, errlen, "libcurl: cannot start");
		return -1;
	}
	if (token && *token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		h = curl_slist_append(h, auth);
	}
	h = curl_slist_append(h, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
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
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	else
		snprintf(err, errlen, "%s: %s%s%s", url, curl_easy_strerror(rc),
			 *detail ? ": " : "", detail);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
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
