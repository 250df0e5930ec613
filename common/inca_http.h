/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The small HTTP+JSON client the manager's clients share (incactl, the
 * switch's agent, libinca's manager mode): one request with a bearer token,
 * bounded in time, the answer parsed as JSON; and reading a token file.
 */
#ifndef INCA_HTTP_H
#define INCA_HTTP_H

#include <stddef.h>

#include <jansson.h>

/*
 * method url (absolute), Authorization: Bearer token (NULL: none), body
 * JSON text or NULL. Returns the HTTP status, or -1 if the server could not
 * be reached (err says why). *json: the answer parsed (NULL if empty or not
 * JSON); *text (if text is non-NULL): the raw answer, malloc'ed. On a 4xx or
 * 5xx status err holds "METHOD URL: STATUS: the answer's error".
 * An https URL's server is verified against $INCA_MANAGER_CACERT (a PEM
 * file of CA certificates) when set, else the system's CAs.
 */
int inca_http(const char *method, const char *url, const char *token, const char *body,
	      long timeout_ms, json_t **json, char **text, char *err, size_t errlen);

/*
 * A client that keeps its connection (and TLS session) between requests,
 * for a thread that asks the manager again and again (libinca's plan
 * thread). One thread calls it at a time; inca_http_client_interrupt may be
 * called from any thread and ends the request in progress (or, if none is,
 * the next one) at once with -1 ("interrupted"). new: NULL if libcurl
 * cannot start.
 */
struct inca_http_client;
struct inca_http_client *inca_http_client_new(void);
void inca_http_client_free(struct inca_http_client *h);
void inca_http_client_interrupt(struct inca_http_client *h);
/* inca_http on h's connection. */
int inca_http_call(struct inca_http_client *h, const char *method, const char *url,
		   const char *token, const char *body, long timeout_ms, json_t **json,
		   char **text, char *err, size_t errlen);

/* Read a token (16..255 characters, trailing whitespace dropped).
 * 0, or -1 with err filled. */
int inca_read_token_file(const char *path, char *out, size_t len, char *err, size_t errlen);

#endif /* INCA_HTTP_H */
