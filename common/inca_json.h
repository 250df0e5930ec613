/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reading JSON documents the same way everywhere: the switch's config file,
 * the manager's topology and API bodies, libinca's group config. A reader
 * keeps where the document came from ("switch.json", "POST /v1/jobs") and
 * the path of the field being read ("groups[2].members[0].qpn"), so that
 * every error reads "ORIGIN: PATH: what was expected, got what".
 *
 * Numbers are JSON integers or strings holding one in C notation
 * ("0x1234abcd", "4096"): keys and QPNs are easier to read in hex. Every
 * getter checks a range. Functions return 0, or -EINVAL with the message
 * in j->msg (the first error is kept; later ones do not overwrite it).
 * An empty or NULL origin (an API body) leaves the message as "PATH: why".
 */
#ifndef INCA_JSON_H
#define INCA_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct inca_json {
	const char *origin;   /* a file name or a request line; not copied */
	char path[192];       /* the field being read, "" at the top */
	char msg[384];        /* the first error: "ORIGIN: PATH: why" */
	bool failed;
};

/* Start reading a document from origin (kept as a pointer). */
void inca_json_init(struct inca_json *j, const char *origin);

/*
 * The path. inca_json_enter appends ".key" (or "key" at the top) when fmt
 * names a key, "[3]" when it starts with '[', and returns a mark that
 * inca_json_leave takes back to. inca_json_at replaces the whole path.
 */
__attribute__((format(printf, 2, 3)))
size_t inca_json_enter(struct inca_json *j, const char *fmt, ...);
void inca_json_leave(struct inca_json *j, size_t mark);
__attribute__((format(printf, 2, 3)))
void inca_json_at(struct inca_json *j, const char *fmt, ...);

/* Record an error at the current path (inca_json_bad_at: at its member
 * key); returns -EINVAL. */
__attribute__((format(printf, 2, 3)))
int inca_json_bad(struct inca_json *j, const char *fmt, ...);
__attribute__((format(printf, 3, 4)))
int inca_json_bad_at(struct inca_json *j, const char *key, const char *fmt, ...);

/*
 * Values. v may be NULL (a missing field): that is an error for these.
 * inca_json_uint: an integer or a string holding one, min..max.
 * inca_json_real: any JSON number, min..max.
 * inca_json_string: a string of 1..size-1 bytes, copied into out.
 * inca_json_ipv4: a unicast dotted quad, host byte order.
 */
int inca_json_uint(struct inca_json *j, json_t *v, uint64_t min, uint64_t max,
		   uint64_t *out);
int inca_json_u32(struct inca_json *j, json_t *v, uint32_t min, uint32_t max,
		  uint32_t *out);
int inca_json_real(struct inca_json *j, json_t *v, double min, double max,
		   double *out);
int inca_json_bool(struct inca_json *j, json_t *v, bool *out);
int inca_json_string(struct inca_json *j, json_t *v, char *out, size_t size);
int inca_json_ipv4(struct inca_json *j, json_t *v, uint32_t *out);

/*
 * Members of obj (which must be an object): the path names the key while
 * it is read. The _opt forms leave *out as it is when the key is absent
 * (so the caller sets the default first); the plain forms require it.
 */
int inca_json_get_u32(struct inca_json *j, json_t *obj, const char *key,
		      uint32_t min, uint32_t max, uint32_t *out);
int inca_json_opt_u32(struct inca_json *j, json_t *obj, const char *key,
		      uint32_t min, uint32_t max, uint32_t *out);
int inca_json_get_uint(struct inca_json *j, json_t *obj, const char *key,
		       uint64_t min, uint64_t max, uint64_t *out);
int inca_json_opt_uint(struct inca_json *j, json_t *obj, const char *key,
		       uint64_t min, uint64_t max, uint64_t *out);
int inca_json_get_string(struct inca_json *j, json_t *obj, const char *key,
			 char *out, size_t size);
int inca_json_opt_string(struct inca_json *j, json_t *obj, const char *key,
			 char *out, size_t size);
int inca_json_opt_bool(struct inca_json *j, json_t *obj, const char *key, bool *out);
int inca_json_get_ipv4(struct inca_json *j, json_t *obj, const char *key, uint32_t *out);

/* obj must be an object whose keys are all in known (NULL-terminated):
 * a typo in a config must not be silently ignored. */
int inca_json_object(struct inca_json *j, json_t *obj, const char *const *known);

/* v must be an array of min..max elements; returns its size or -EINVAL. */
int inca_json_array(struct inca_json *j, json_t *v, size_t min, size_t max);

#endif /* INCA_JSON_H */
