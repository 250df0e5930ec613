/* SPDX-License-Identifier: BSD-3-Clause */
/* inca-switch's configuration: every error names file, field and what was
 * expected; a valid file gives exactly the values it says. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "dp_priv.h"

static char path[64];
static char errbuf[4096];

/* Load a config written from text; capture what it prints on stderr. */
static int load(const char *json, struct dp_config *cfg)
{
	FILE *f;
	int saved, rc;
	char errpath[] = "/tmp/inca-cfg-err-XXXXXX";
	int efd = mkstemp(errpath);

	snprintf(path, sizeof(path), "/tmp/inca-cfg-%d.json", getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(json, f);
	fclose(f);
	memset(cfg, 0, sizeof(*cfg));
	fflush(stderr);
	saved = dup(2);
	dup2(efd, 2);
	rc = dp_config_load(cfg, path);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	memset(errbuf, 0, sizeof(errbuf));
	lseek(efd, 0, SEEK_SET);
	ssize_t n = read(efd, errbuf, sizeof(errbuf) - 1);
	(void)n;
	close(efd);
	unlink(errpath);
	unlink(path);
	return rc;
}

#define MEMBERS "[{\"ip\":\"10.0.0.1\",\"qpn\":17},{\"ip\":\"10.0.0.2\",\"qpn\":18}]"
#define GROUP "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,\"qkey\":1,"

static void test_errors_name_the_field(void **state)
{
	static const struct { const char *json, *msg; } cases[] = {
		{ "{", "line 1 column 1: string or '}' expected near end of file" },
		{ "{}", ": switch: missing (needs at least \"ip\")" },
		{ "{\"switch\":{\"ip\":\"10.0.0\"}}",
		  ": switch.ip: expected an IPv4 address such as \"10.0.0.254\"" },
		{ "{\"switch\":{\"ip\":\"255.255.255.255\"}}",
		  ": switch.ip: expected a unicast IPv4 address, got 255.255.255.255" },
		{ "{\"switch\":{\"ip\":\"10.1.1.250\",\"gateway\":\"10.1.2.254\"}}",
		  ": switch.gateway: not another address in the switch's subnet (ip and "
		  "prefix_len, 24)" },
		{ "{\"switch\":{\"ip\":\"10.1.1.250\",\"gateway\":\"10.1.1.250\",\"prefix_len\":16}}",
		  ": switch.gateway: not another address in the switch's subnet (ip and "
		  "prefix_len, 16)" },
		{ "{\"switch\":{\"ip\":\"10.1.1.250\",\"prefix_len\":16}}",
		  ": switch.prefix_len: only with a gateway" },
		{ "{\"switch\":{\"ip\":\"10.1.1.250\",\"gateway\":\"10.1.1.254\",\"prefix_len\":33}}",
		  ": switch.prefix_len: expected 1..32, got 33" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"grups\":[]}",
		  ": grups: unknown field" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\",\"rate\":\"fast\"}}",
		  ": switch.rate: expected a rate such as \"1gbit\"" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\",\"idle_sleep_us\":-1}}",
		  ": switch.idle_sleep_us: expected 0..1000000, got -1" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\",\"idle_spin_us\":1000001}}",
		  ": switch.idle_spin_us: expected 0..1000000, got 1000001" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"ports\":[{\"port\":40}]}",
		  ": ports[0].port: expected 0..31, got 40" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"ports\":[{\"port\":1},{\"port\":1}]}",
		  ": ports[1].port: port 1 is listed twice" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,\"qkey\":1,"
		  "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":1}]}]}",
		  ": groups[0].members[0].qpn: expected 2..16777215, got 1" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,"
		  "\"members\":" MEMBERS "}]}",
		  ": groups[0].qkey: missing" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,\"qkey\":1,"
		  "\"window\":0,\"members\":" MEMBERS "}]}",
		  ": groups[0].window: expected 1..4096, got 0" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,\"qkey\":1,"
		  "\"dtypes\":[\"fp8\"],\"members\":" MEMBERS "}]}",
		  ": groups[0].dtypes[0]: expected one of fp32, fp16, bf16, int32, int64, fp64" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,\"qkey\":1,"
		  "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17},{\"ip\":\"10.0.0.1\",\"qpn\":17}]}]}",
		  ": groups[0]: members[]: two members share an address and QPN" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,\"qkey\":1,"
		  "\"members\":" MEMBERS "},{\"id\":5,\"qpn\":257,\"qkey\":1,\"members\":" MEMBERS "}]}",
		  ": groups[1].id: group 5 is defined twice" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,\"qkey\":1,"
		  "\"members\":" MEMBERS "},{\"id\":6,\"qpn\":256,\"qkey\":1,\"members\":" MEMBERS "}]}",
		  ": groups[1].qpn: QPN 256 is already group 5's" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,\"qkey\":1,"
		  "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"mac\":\"ff:ff:ff:ff:ff:ff\"}]}]}",
		  ": groups[0].members[0].mac: expected a unicast MAC address" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,\"qkey\":1,"
		  "\"membres\":[]}]}",
		  ": groups[0].membres: unknown field" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\",\"ip\":\"10.0.0.1\"}}",
		  "duplicate object key" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"groups\":[{\"id\":5,\"qpn\":256,\"qkey\":\"0xzz\","
		  "\"members\":" MEMBERS "}]}",
		  ": groups[0].qkey: expected an integer, got \"0xzz\"" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"qos\":{\"ecn\":{\"lossy\":1}}}",
		  ": qos.ecn.lossy: expected true or false" },
		/* the rank map of the rooted collectives */
		{ GROUP "\"first_rank\":65536,\"members\":" MEMBERS "}]}",
		  ": groups[0].first_rank: expected 0..65535, got 65536" },
		{ GROUP "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"ranks\":3}]}]}",
		  ": groups[0].members[0].ranks: expected a list of the job's ranks under this "
		  "member, such as [0, 3]" },
		{ GROUP "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"ranks\":[]}]}]}",
		  ": groups[0].members[0].ranks: expected a list" },
		{ GROUP "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"fanin\":2,"
		  "\"ranks\":[4]}]}]}",
		  ": groups[0].members[0].ranks: expected 2 ranks (the member's fanin), got 1" },
		{ GROUP "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"fanin\":2,"
		  "\"ranks\":[4,65536]}]}]}",
		  ": groups[0].members[0].ranks: element 1: expected a rank 0..65535" },
		{ GROUP "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"ranks\":[\"1\"]}]}]}",
		  ": groups[0].members[0].ranks: element 0: expected a rank 0..65535" },
		{ GROUP "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"ranks\":[0]},"
		  "{\"ip\":\"10.0.0.2\",\"qpn\":18}]}]}",
		  ": groups[0]: members[].ranks: every member needs its list once one has" },
		{ GROUP "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"ranks\":[3]},"
		  "{\"ip\":\"10.0.0.2\",\"qpn\":18,\"fanin\":2,\"ranks\":[1,3]}]}]}",
		  ": groups[0]: members[].ranks: a rank is listed twice" },
		/* every level of the path, through the common JSON layer */
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"qos\":{\"wrr_weights\":[1,1,0,1,1,1,1,1]}}",
		  ": qos.wrr_weights[2]: expected 1..100, got 0" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"qos\":{\"ecn\":{\"kmin_bytes\":9000,"
		  "\"kmax_bytes\":\"0x2000\"}}}",
		  ": qos.ecn.kmax_bytes: must be above kmin_bytes (9000), got 8192" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"qos\":{\"dscp_to_tc\":{\"26\":9}}}",
		  ": qos.dscp_to_tc.26: expected 0..7, got 9" },
		{ "{\"switch\":{\"ip\":\"10.0.0.254\"},\"qos\":{\"watchdog\":{\"action\":\"x\"}}}",
		  ": qos.watchdog.action: expected \"drop\", \"forward\" or \"alert\"" },
		{ GROUP "\"members\":" MEMBERS ",\"parent\":{\"ip\":\"10.0.0.9\",\"qpn\":300}}]}",
		  ": groups[0].parent.qkey: missing (the parent group's Q_Key)" },
		{ GROUP "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"fanin\":0}]}]}",
		  ": groups[0].members[0].fanin: expected 1..65535, got 0" },
		{ GROUP "\"first_rank\":2,\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,"
		  "\"ranks\":[3]}]}]}",
		  ": groups[0]: first_rank: not with members[].ranks (they name every rank)" },
		{ GROUP "\"first_rank\":65535,\"members\":" MEMBERS "}]}",
		  ": groups[0]: first_rank: its ranks (first_rank + total fan-in) exceed 65535" },
	};
	struct dp_config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = load(cases[i].json, &cfg);
		if (rc != -EINVAL || !strstr(errbuf, cases[i].msg) || !strstr(errbuf, path))
			fail_msg("case %zu: rc %d, stderr '%s', want '%s'", i, rc, errbuf,
				 cases[i].msg);
		assert_null(cfg.groups);
	}
	memset(&cfg, 0, sizeof(cfg));
	assert_int_equal(dp_config_load(&cfg, "/nonexistent/inca.json"), -EINVAL);
}

static void test_valid_config(void **state)
{
	struct dp_config cfg;

	(void)state;
	assert_int_equal(load(
		"{\"switch\":{\"ip\":\"10.1.2.3\",\"result_dscp\":46,\"idle_sleep_us\":20,"
		"\"idle_spin_us\":0,\"rate\":\"2.5gbit\",\"queue_kb\":64},"
		"\"ports\":[{\"port\":2,\"rate\":\"100mbit\"}],"
		"\"groups\":[{\"id\":7,\"qpn\":\"0x100\",\"qkey\":\"0xdeadbeef\",\"window\":16,"
		"\"elems_per_pkt\":512,\"dtypes\":[\"bf16\",\"int32\"],\"reproducible\":true,"
		"\"members\":[{\"ip\":\"10.1.2.4\",\"qpn\":17,\"mac\":\"02:00:00:00:00:04\"},"
		"{\"ip\":\"10.1.2.5\",\"qpn\":18,\"fanin\":3}]}]}", &cfg), 0);
	assert_int_equal(cfg.switch_ip, 0x0a010203);
	assert_int_equal(cfg.gateway, 0);          /* none: every address on-link */
	assert_int_equal(cfg.result_dscp, 46);
	assert_int_equal(cfg.idle_sleep_us, 20);
	assert_int_equal(cfg.idle_spin_us, 0);
	assert_true(cfg.port_default.rate_bps == 2500000000ull);
	assert_int_equal(cfg.port_default.queue_bytes, 64 * 1024);
	assert_true(cfg.ports[2].set);
	assert_true(cfg.ports[2].rate_bps == 100000000ull);
	assert_int_equal(cfg.ports[2].queue_bytes, 64 * 1024);   /* inherited */
	assert_false(cfg.ports[0].set);
	assert_int_equal(cfg.ngroups, 1);
	const struct agg_group_config *g = &cfg.groups[0].agg;
	assert_int_equal(g->group_id, 7);
	assert_int_equal(g->qpn, 0x100);
	assert_int_equal(g->qkey, 0xdeadbeef);
	assert_int_equal(g->window, 16);
	assert_int_equal(g->elems_per_pkt, 512);
	assert_int_equal(g->dtype_mask, (1u << AGG_DTYPE_BF16) | (1u << AGG_DTYPE_INT32));
	assert_true(g->reproducible);
	assert_int_equal(g->nmembers, 2);
	assert_int_equal(g->members[0].ip, 0x0a010204);
	assert_int_equal(g->members[0].mac[5], 4);
	assert_int_equal(g->members[0].fanin, 1);
	assert_int_equal(g->members[1].qpn, 18);
	assert_int_equal(g->members[1].fanin, 3);
	assert_int_equal(g->first_rank, 0);
	assert_null(g->members[0].ranks);
	dp_config_free(&cfg);
	/* the rank map: consecutive from first_rank, or listed per member */
	assert_int_equal(load(GROUP "\"first_rank\":12,\"members\":" MEMBERS "}]}", &cfg), 0);
	assert_int_equal(cfg.groups[0].agg.first_rank, 12);
	dp_config_free(&cfg);
	assert_int_equal(load(GROUP "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"fanin\":3,"
			      "\"ranks\":[0,5,3]},{\"ip\":\"10.0.0.2\",\"qpn\":18,\"ranks\":[65535]},"
			      "{\"ip\":\"10.0.0.3\",\"qpn\":18,\"fanin\":2,\"ranks\":[4,1]}]}]}",
			      &cfg), 0);
	g = &cfg.groups[0].agg;
	static const uint16_t want[3][3] = { { 0, 5, 3 }, { 65535 }, { 4, 1 } };
	static const uint16_t nwant[3] = { 3, 1, 2 };
	for (int m = 0; m < 3; m++) {
		assert_int_equal(g->members[m].nranks, nwant[m]);
		assert_memory_equal(g->members[m].ranks, want[m], nwant[m] * sizeof(uint16_t));
	}
	dp_config_free(&cfg);
	assert_null(cfg.groups);
	assert_null(cfg.groups);
	/* ECN on lossy classes: on by default, off when asked */
	assert_int_equal(load("{\"switch\":{\"ip\":\"10.1.2.3\"}}", &cfg), 0);
	assert_true(cfg.qos.ecn_lossy);
	dp_config_free(&cfg);
	assert_int_equal(load("{\"switch\":{\"ip\":\"10.1.2.3\"},\"qos\":{\"ecn\":{\"lossy\":false}}}",
			      &cfg), 0);
	assert_false(cfg.qos.ecn_lossy);
	assert_true(cfg.qos.ecn);
	dp_config_free(&cfg);
}

/* routed placement: off the subnet, frames go to the gateway */
static void test_gateway(void **state)
{
	struct dp_config cfg;

	(void)state;
	assert_int_equal(load("{\"switch\":{\"ip\":\"10.1.1.250\",\"gateway\":\"10.1.1.254\"}}",
			      &cfg), 0);
	assert_int_equal(cfg.gateway, 0x0a0101fe);
	assert_int_equal(cfg.prefix_len, 24);
	assert_int_equal(dp_next_hop(&cfg, 0x0a010101), 0x0a010101);    /* 10.1.1.1 */
	assert_int_equal(dp_next_hop(&cfg, 0x0a1f00fa), 0x0a0101fe);    /* 10.31.0.250 */
	dp_config_free(&cfg);
	assert_int_equal(load("{\"switch\":{\"ip\":\"10.1.1.250\",\"gateway\":\"10.1.0.1\","
			      "\"prefix_len\":16}}", &cfg), 0);
	assert_int_equal(dp_next_hop(&cfg, 0x0a0102fa), 0x0a0102fa);    /* 10.1.2.250 */
	assert_int_equal(dp_next_hop(&cfg, 0x0a1f00fa), 0x0a010001);
	dp_config_free(&cfg);
	/* no gateway: everything on-link */
	assert_int_equal(load("{\"switch\":{\"ip\":\"10.1.1.250\"}}", &cfg), 0);
	assert_int_equal(dp_next_hop(&cfg, 0x0a1f00fa), 0x0a1f00fa);
	dp_config_free(&cfg);
}

static void test_impair(void **state)
{
	struct dp_impair im;
	const char *bad = NULL;
	const char *spec = "loss 1% duplicate 0.5% reorder 100%";

	(void)state;
	assert_int_equal(dp_parse_impair(spec, &im, &bad), 0);
	assert_true(im.on);
	assert_int_equal(im.loss, (uint32_t)(0.01 * 4294967295.0));
	assert_int_equal(im.duplicate, (uint32_t)(0.005 * 4294967295.0));
	assert_int_equal(im.reorder, 4294967295u);
	assert_int_equal(dp_parse_impair("", &im, &bad), 0);
	assert_false(im.on);
	spec = "loss 1% delay 1ms";
	assert_int_equal(dp_parse_impair(spec, &im, &bad), -EINVAL);
	assert_string_equal(bad, "delay 1ms");
	spec = "loss 101%";
	assert_int_equal(dp_parse_impair(spec, &im, &bad), -EINVAL);
	assert_string_equal(bad, "101%");
	spec = "loss";
	assert_int_equal(dp_parse_impair(spec, &im, &bad), -EINVAL);
	assert_string_equal(bad, "loss");
	spec = "loss 1";
	assert_int_equal(dp_parse_impair(spec, &im, &bad), -EINVAL);
	assert_string_equal(bad, "1");
}

static void test_rates(void **state)
{
	uint64_t r;

	(void)state;
	assert_int_equal(dp_parse_rate("1gbit", &r), 0);
	assert_true(r == 1000000000ull);
	assert_int_equal(dp_parse_rate("100Mbit", &r), 0);
	assert_true(r == 100000000ull);
	assert_int_equal(dp_parse_rate("1500000", &r), 0);
	assert_true(r == 1500000ull);
	assert_int_equal(dp_parse_rate("0.5kbit", &r), -ERANGE);
	assert_int_equal(dp_parse_rate("1gbyte", &r), -EINVAL);
	assert_int_equal(dp_parse_rate("-1gbit", &r), -EINVAL);
	assert_int_equal(dp_parse_rate("", &r), -EINVAL);
	assert_int_equal(dp_parse_rate("nan", &r), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors_name_the_field),
		cmocka_unit_test(test_valid_config),
		cmocka_unit_test(test_rates),
		cmocka_unit_test(test_impair),
		cmocka_unit_test(test_gateway),
	};
	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
