/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The JSON-reading layer (inca_json.h): a path kept beside the reader, and
 * the getters every component reads its documents with.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inca_json.h"

void inca_json_init(struct inca_json *j, const char *origin)
{
	memset(j, 0, sizeof(*j));
	j->origin = origin ? origin : "";
}

__attribute__((format(printf, 2, 0)))
static void path_vappend(struct inca_json *j, const char *fmt, va_list ap)
{
	size_t n = strlen(j->path);

	if (n && fmt[0] != '[' && n + 1 < sizeof(j->path))
		j->path[n++] = '.';
	if (n < sizeof(j->path))
		vsnprintf(j->path + n, sizeof(j->path) - n, fmt, ap);
}

size_t inca_json_enter(struct inca_json *j, const char *fmt, ...)
{
	size_t mark = strlen(j->path);
	va_list ap;

	va_start(ap, fmt);
	path_vappend(j, fmt, ap);
	va_end(ap);
	return mark;
}

void inca_json_leave(struct inca_json *j, size_t mark)
{
	if (mark < sizeof(j->path))
		j->path[mark] = '\0';
}

void inca_json_at(struct inca_json *j, const char *fmt, ...)
{
	va_list ap;

	j->path[0] = '\0';
	va_start(ap, fmt);
	path_vappend(j, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 2, 0)))
static int vbad(struct inca_json *j, const char *fmt, va_list ap)
{
	size_t n = 0;
	int k;

	if (j->failed)
		return -EINVAL;
	j->failed = true;
	j->msg[0] = '\0';
	if (j->origin[0]) {
		k = snprintf(j->msg, sizeof(j->msg), "%s: ", j->origin);
		n = k > 0 ? (size_t)k : 0;
	}
	if (j->path[0] && n < sizeof(j->msg)) {
		k = snprintf(j->msg + n, sizeof(j->msg) - n, "%s: ", j->path);
		n += k > 0 ? (size_t)k : 0;
	}
	if (n < sizeof(j->msg))
		vsnprintf(j->msg + n, sizeof(j->msg) - n, fmt, ap);
	return -EINVAL;
}

int inca_json_bad(struct inca_json *j, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vbad(j, fmt, ap);
	va_end(ap);
	return rc;
}

int inca_json_bad_at(struct inca_json *j, const char *key, const char *fmt, ...)
{
	size_t mark = inca_json_enter(j, "%s", key);
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vbad(j, fmt, ap);
	va_end(ap);
	inca_json_leave(j, mark);
	return rc;
}

int inca_json_uint(struct inca_json *j, json_t *v, uint64_t min, uint64_t max,
		   uint64_t *out)
{
	uint64_t u;

	if (!v)
		return inca_json_bad(j, "missing, expected an integer %llu..%llu",
				     (unsigned long long)min, (unsigned long long)max);
	if (json_is_string(v)) {      /* "0x1234" for keys and QPNs */
		const char *s = json_string_value(v);
		char *end;

		errno = 0;
		u = strtoull(s, &end, 0);
		if (errno == ERANGE)
			return inca_json_bad(j, "expected %llu..%llu, got %s",
					     (unsigned long long)min,
					     (unsigned long long)max, s);
		if (errno || end == s || *end || s[0] == '-' || s[0] == '+' ||
		    s[0] == ' ')
			return inca_json_bad(j, "expected an integer, got \"%s\"", s);
		if (u < min || u > max)
			return inca_json_bad(j, "expected %llu..%llu, got %s",
					     (unsigned long long)min,
					     (unsigned long long)max, s);
	} else if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);

		if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
			return inca_json_bad(j, "expected %llu..%llu, got %lld",
					     (unsigned long long)min,
					     (unsigned long long)max, (long long)i);
		u = (uint64_t)i;
	} else {
		return inca_json_bad(j, "expected an integer");
	}
	*out = u;
	return 0;
}

int inca_json_u32(struct inca_json *j, json_t *v, uint32_t min, uint32_t max,
		  uint32_t *out)
{
	uint64_t u;
	int rc = inca_json_uint(j, v, min, max, &u);

	if (!rc)
		*out = (uint32_t)u;
	return rc;
}

int inca_json_real(struct inca_json *j, json_t *v, double min, double max,
		   double *out)
{
	double d;

	if (!v || !json_is_number(v))
		return inca_json_bad(j, "expected a number %g..%g", min, max);
	d = json_number_value(v);
	if (!(d >= min && d <= max))
		return inca_json_bad(j, "expected %g..%g, got %g", min, max, d);
	*out = d;
	return 0;
}

int inca_json_bool(struct inca_json *j, json_t *v, bool *out)
{
	if (!v || !json_is_boolean(v))
		return inca_json_bad(j, "expected true or false");
	*out = json_is_true(v);
	return 0;
}

int inca_json_string(struct inca_json *j, json_t *v, char *out, size_t size)
{
	size_t len;

	if (!v || !json_is_string(v))
		return inca_json_bad(j, "expected a string");
	len = json_string_length(v);
	if (len == 0 || len >= size)
		return inca_json_bad(j, "expected 1..%zu characters, got %zu", size - 1, len);
	if (strlen(json_string_value(v)) != len)
		return inca_json_bad(j, "expected a string without NUL characters");
	memcpy(out, json_string_value(v), len + 1);
	return 0;
}

int inca_json_ipv4(struct inca_json *j, json_t *v, uint32_t *out)
{
	struct in_addr a;
	uint32_t ip;

	if (!v || !json_is_string(v) || inet_pton(AF_INET, json_string_value(v), &a) != 1)
		return inca_json_bad(j, "expected an IPv4 address such as \"10.0.0.254\"");
	ip = ntohl(a.s_addr);
	if (ip == 0 || ip == 0xffffffffu)
		return inca_json_bad(j, "expected a unicast IPv4 address, got %s",
				     json_string_value(v));
	*out = ip;
	return 0;
}

/* A member's getter: the path names the key while the value is read. */
#define MEMBER(j, obj, key, optional, call)                                  \
	do {                                                                  \
		json_t *v_;                                                   \
		size_t mark_;                                                 \
		int rc_;                                                      \
		if (!json_is_object(obj))                                     \
			return inca_json_bad(j, "expected an object");        \
		v_ = json_object_get(obj, key);                               \
		if (!v_ && (optional))                                        \
			return 0;                                             \
		mark_ = inca_json_enter(j, "%s", key);                        \
		rc_ = (call);                                                 \
		inca_json_leave(j, mark_);                                    \
		return rc_;                                                   \
	} while (0)

int inca_json_get_u32(struct inca_json *j, json_t *obj, const char *key,
		      uint32_t min, uint32_t max, uint32_t *out)
{
	MEMBER(j, obj, key, false, inca_json_u32(j, v_, min, max, out));
}

int inca_json_opt_u32(struct inca_json *j, json_t *obj, const char *key,
		      uint32_t min, uint32_t max, uint32_t *out)
{
	MEMBER(j, obj, key, true, inca_json_u32(j, v_, min, max, out));
}

int inca_json_get_uint(struct inca_json *j, json_t *obj, const char *key,
		       uint64_t min, uint64_t max, uint64_t *out)
{
	MEMBER(j, obj, key, false, inca_json_uint(j, v_, min, max, out));
}

int inca_json_opt_uint(struct inca_json *j, json_t *obj, const char *key,
		       uint64_t min, uint64_t max, uint64_t *out)
{
	MEMBER(j, obj, key, true, inca_json_uint(j, v_, min, max, out));
}

int inca_json_get_string(struct inca_json *j, json_t *obj, const char *key,
			 char *out, size_t size)
{
	MEMBER(j, obj, key, false, inca_json_string(j, v_, out, size));
}

int inca_json_opt_string(struct inca_json *j, json_t *obj, const char *key,
			 char *out, size_t size)
{
	MEMBER(j, obj, key, true, inca_json_string(j, v_, out, size));
}

int inca_json_opt_bool(struct inca_json *j, json_t *obj, const char *key, bool *out)
{
	MEMBER(j, obj, key, true, inca_json_bool(j, v_, out));
}

int inca_json_get_ipv4(struct inca_json *j, json_t *obj, const char *key, uint32_t *out)
{
	MEMBER(j, obj, key, false, inca_json_ipv4(j, v_, out));
}

int inca_json_object(struct inca_json *j, json_t *obj, const char *const *known)
{
	const char *key;
	json_t *v;

	if (!obj || !json_is_object(obj))
		return inca_json_bad(j, "expected an object");
	json_object_foreach(obj, key, v) {
		size_t i;

		for (i = 0; known[i] && strcmp(known[i], key); i++)
			;
		if (!known[i]) {
			size_t mark = inca_json_enter(j, "%s", key);
			int rc = inca_json_bad(j, "unknown field");

			inca_json_leave(j, mark);
			return rc;
		}
	}
	return 0;
}

int inca_json_array(struct inca_json *j, json_t *v, size_t min, size_t max)
{
	size_t n;

	if (!v || !json_is_array(v))
		return inca_json_bad(j, "expected an array");
	n = json_array_size(v);
	if (n < min || n > max)
		return inca_json_bad(j, "expected %zu..%zu elements, got %zu", min, max, n);
	return (int)n;
}
