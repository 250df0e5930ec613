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

/* Read a token (16..255 characters, trailing whitespace dropped).
 * 0, or -1 with err filled. */
int inca_read_token_file(const char *path, char *out, size_t len, char *err, size_t errlen);

#endif /* INCA_HTTP_H */
