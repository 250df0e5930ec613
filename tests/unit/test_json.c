/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The JSON-reading layer (common/inca_json.h): numbers as integers or
 * strings in C notation, ranges, the field path in every message, unknown
 * keys, optional members left at their defaults.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "inca_json.h"

static json_t *doc(const char *text)
{
	json_error_t e;
	json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &e);

	assert_non_null(v);
	return v;
}

static void test_numbers(void **state)
{
	json_t *o = doc("{\"a\": 4096, \"b\": \"0x1f\", \"c\": \"12\", \"d\": -1,"
			" \"e\": \"0x\", \"f\": 1.5, \"g\": \"99999999999999999999\","
			" \"h\": \" 3\", \"i\": \"-3\"}");
	struct inca_json j;
	uint64_t u = 7;
	uint32_t w = 7;

	(void)state;
	inca_json_init(&j, "f.json");
	assert_int_equal(inca_json_get_uint(&j, o, "a", 1, 4096, &u), 0);
	assert_int_equal(u, 4096);
	assert_int_equal(inca_json_get_u32(&j, o, "b", 0, 31, &w), 0);
	assert_int_equal(w, 31);
	assert_int_equal(inca_json_get_u32(&j, o, "c", 0, 12, &w), 0);
	assert_int_equal(w, 12);
	assert_false(j.failed);
	assert_string_equal(j.path, "");

	static const struct { const char *key; uint64_t max; const char *msg; } bad[] = {
		{ "a", 4095, "f.json: a: expected 1..4095, got 4096" },
		{ "b", 30, "f.json: b: expected 1..30, got 0x1f" },
		{ "d", 10, "f.json: d: expected 1..10, got -1" },
		{ "e", 10, "f.json: e: expected an integer, got \"0x\"" },
		{ "f", 10, "f.json: f: expected an integer" },
		{ "g", 10, "f.json: g: expected 1..10, got 99999999999999999999" },
		{ "h", 10, "f.json: h: expected an integer, got \" 3\"" },
		{ "i", 10, "f.json: i: expected an integer, got \"-3\"" },
		{ "z", 10, "f.json: z: missing, expected an integer 1..10" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		inca_json_init(&j, "f.json");
		u = 7;
		assert_int_equal(inca_json_get_uint(&j, o, bad[i].key, 1, bad[i].max, &u),
				 -EINVAL);
		assert_int_equal(u, 7);
		assert_true(j.failed);
		assert_string_equal(j.msg, bad[i].msg);
		assert_string_equal(j.path, "");
	}
	json_decref(o);
}

static void test_optional_and_first_error(void **state)
{
	json_t *o = doc("{\"x\": 5, \"s\": \"abc\", \"t\": true}");
	struct inca_json j;
	uint32_t w = 64;
	char s[4] = "";
	bool b = false;

	(void)state;
	inca_json_init(&j, "POST /v1/jobs");
	assert_int_equal(inca_json_opt_u32(&j, o, "window", 1, 4096, &w), 0);
	assert_int_equal(w, 64);
	assert_int_equal(inca_json_opt_u32(&j, o, "x", 1, 4096, &w), 0);
	assert_int_equal(w, 5);
	assert_int_equal(inca_json_get_string(&j, o, "s", s, sizeof(s)), 0);
	assert_string_equal(s, "abc");
	assert_int_equal(inca_json_opt_bool(&j, o, "t", &b), 0);
	assert_true(b);
	assert_int_equal(inca_json_get_string(&j, o, "missing", s, sizeof(s)), -EINVAL);
	assert_string_equal(j.msg, "POST /v1/jobs: missing: expected a string");
	/* the first error stays */
	assert_int_equal(inca_json_get_string(&j, o, "s", s, 3), -EINVAL);
	assert_string_equal(j.msg, "POST /v1/jobs: missing: expected a string");
	inca_json_init(&j, "POST /v1/jobs");
	assert_int_equal(inca_json_get_string(&j, o, "s", s, 3), -EINVAL);
	assert_string_equal(j.msg, "POST /v1/jobs: s: expected 1..2 characters, got 3");
	json_decref(o);
}

static void test_paths_and_keys(void **state)
{
	json_t *o = doc("{\"groups\": [{\"members\": [{\"qpn\": \"0x1000000\"}]},"
			" {\"membres\": []}], \"ip\": \"10.0.0.300\", \"ip2\": \"255.255.255.255\","
			" \"ip3\": \"10.1.2.3\", \"r\": 0.5}");
	static const char *const top[] = { "groups", "ip", "ip2", "ip3", "r", NULL };
	static const char *const grp[] = { "members", NULL };
	struct inca_json j;
	uint32_t q = 0, ip = 0;
	double r = 0;
	size_t m1, m2, m3;

	(void)state;
	inca_json_init(&j, "sw.json");
	assert_int_equal(inca_json_object(&j, o, top), 0);
	json_t *g = json_object_get(o, "groups");
	assert_int_equal(inca_json_array(&j, g, 1, 2), 2);
	m1 = inca_json_enter(&j, "groups");
	m2 = inca_json_enter(&j, "[%d]", 0);
	assert_string_equal(j.path, "groups[0]");
	assert_int_equal(inca_json_object(&j, json_array_get(g, 0), grp), 0);
	m3 = inca_json_enter(&j, "members[%d]", 0);
	assert_string_equal(j.path, "groups[0].members[0]");
	json_t *mem = json_array_get(json_object_get(json_array_get(g, 0), "members"), 0);
	assert_int_equal(inca_json_get_u32(&j, mem, "qpn", 2, 0xffffff, &q), -EINVAL);
	assert_string_equal(j.msg, "sw.json: groups[0].members[0].qpn: "
			    "expected 2..16777215, got 0x1000000");
	assert_string_equal(j.path, "groups[0].members[0]");
	inca_json_leave(&j, m3);
	inca_json_leave(&j, m2);
	assert_string_equal(j.path, "groups");

	inca_json_init(&j, "sw.json");
	inca_json_at(&j, "groups[%d]", 1);
	assert_int_equal(inca_json_object(&j, json_array_get(g, 1), grp), -EINVAL);
	assert_string_equal(j.msg, "sw.json: groups[1].membres: unknown field");
	assert_string_equal(j.path, "groups[1]");
	inca_json_leave(&j, m1);
	assert_string_equal(j.path, "");

	inca_json_init(&j, "sw.json");
	assert_int_equal(inca_json_array(&j, g, 3, 8), -EINVAL);
	assert_string_equal(j.msg, "sw.json: expected 3..8 elements, got 2");

	inca_json_init(&j, "sw.json");
	inca_json_at(&j, "ip");
	assert_int_equal(inca_json_ipv4(&j, json_object_get(o, "ip"), &ip), -EINVAL);
	assert_string_equal(j.msg, "sw.json: ip: expected an IPv4 address such as \"10.0.0.254\"");
	inca_json_init(&j, "sw.json");
	assert_int_equal(inca_json_ipv4(&j, json_object_get(o, "ip2"), &ip), -EINVAL);
	assert_string_equal(j.msg, "sw.json: expected a unicast IPv4 address, got 255.255.255.255");
	assert_int_equal(inca_json_ipv4(&j, json_object_get(o, "ip3"), &ip), 0);
	assert_int_equal(ip, 0x0a010203);
	inca_json_init(&j, "sw.json");
	assert_int_equal(inca_json_real(&j, json_object_get(o, "r"), 0, 1, &r), 0);
	assert_true(r == 0.5);
	assert_int_equal(inca_json_real(&j, json_object_get(o, "r"), 0.75, 1, &r), -EINVAL);
	assert_string_equal(j.msg, "sw.json: expected 0.75..1, got 0.5");
	inca_json_init(&j, "sw.json");
	assert_int_equal(inca_json_get_u32(&j, g, "qpn", 0, 1, &q), -EINVAL);
	assert_string_equal(j.msg, "sw.json: expected an object");
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_optional_and_first_error),
		cmocka_unit_test(test_paths_and_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
