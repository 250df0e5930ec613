/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-switch: a DPDK L2 switch that aggregates all-reduce contributions
 * in the network. EAL arguments first, then ours after "--".
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include "dp_priv.h"
#include "inca_http.h"

/* The --vdev devices the EAL is asked for (their names, up to the first
 * comma), read before rte_eal_init reorders argv. A vdev that fails to
 * probe (an af_packet PACKET_FANOUT refused, an interface that is gone)
 * does not fail rte_eal_init: the switch would run with one port fewer
 * and the others renumbered. */
#define MAX_VDEVS 64
struct vdev_names {
	unsigned n;
	char name[MAX_VDEVS][RTE_DEV_NAME_MAX_LEN];
};

static void vdevs_requested(int argc, char **argv, struct vdev_names *v)
{
	v->n = 0;
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		const char *a = NULL;
		if (!strcmp(argv[i], "--vdev") && i + 1 < argc)
			a = argv[++i];
		else if (!strncmp(argv[i], "--vdev=", 7))
			a = argv[i] + 7;
		if (!a || v->n == MAX_VDEVS)
			continue;
		size_t len = strcspn(a, ",");
		if (len >= RTE_DEV_NAME_MAX_LEN)
			len = RTE_DEV_NAME_MAX_LEN - 1;
		memcpy(v->name[v->n], a, len);
		v->name[v->n++][len] = '\0';
	}
}

/* 0 when every requested vdev is a port; else says which are not */
static int vdevs_check(const struct vdev_names *v)
{
	unsigned missing = 0;
	uint16_t port;

	for (unsigned i = 0; i < v->n; i++)
		if (rte_eth_dev_get_port_by_name(v->name[i], &port)) {
			fprintf(stderr, "inca-switch: --vdev %s did not come up as a port\n",
				v->name[i]);
			missing++;
		}
	if (missing)
		fprintf(stderr, "inca-switch: %u of the %u --vdev devices did not come up (the "
			"EAL's messages above say why): not starting without them, the others "
			"renumbered\n", missing, v->n);
	return missing ? -1 : 0;
}

static void usage(FILE *out, const char *prog)
{
	fprintf(out,
		"Usage: %s [EAL options] -- --config FILE [options]\n"
		"\n"
		"A DPDK switch that forwards Ethernet (L2 learning) and aggregates\n"
		"INCA all-reduce contributions (RoCEv2 UD to its address).\n"
		"Ports are whatever the EAL gives it: NICs, or vdevs such as\n"
		"  --vdev net_af_packet0,iface=veth0  --vdev net_af_xdp0,iface=veth1\n"
		"Every lcore but the main one is a worker.\n"
		"\n"
		"Options:\n"
		"  -c, --config FILE     switch address, ports and groups (JSON; see\n"
		"                        docs/switch.md). Required.\n"
		"  -r, --rate RATE       shape ports the config does not name, e.g. 1gbit\n"
		"  -i, --idle-sleep US   sleep US microseconds when idle instead of busy\n"
		"                        polling (for labs sharing a few cores)\n"
		"  -I, --idle-spin US    with --idle-sleep: keep polling US microseconds\n"
		"                        after the last packet before sleeping (200)\n"
		"  -s, --stats SEC       print a one-line summary every SEC seconds\n"
		"  -m, --impair SPEC     emulate link impairment on every port, both\n"
		"                        directions, netem-style: \"loss 1%% duplicate 1%%\n"
		"                        reorder 5%%\" (for kernels without tc netem)\n"
		"  -f, --forward-only    no aggregation path: L2 forwarding only\n"
		"                        (benchmark baseline)\n"
		"  -C, --crc NAME        the CRC-32 of the ICRC: slice-by-8, pclmulqdq,\n"
		"                        vpclmulqdq-avx2 or vpclmulqdq-avx512 (default: the\n"
		"                        widest this CPU has)\n"
		"  -M, --manager URL     take groups from inca-manager at URL (its agent\n"
		"                        registers and heartbeats; groups change at run time)\n"
		"  -n, --name NAME       this switch's name in the manager's topology\n"
		"  -k, --token-file FILE the manager's admin token (or INCA_MANAGER_TOKEN)\n"
		"  -b, --heartbeat-ms MS heartbeat period (default 200); group changes\n"
		"                        arrive at once (the heartbeat is a long-poll)\n"
		"  -P, --metrics ADDR:PORT serve the counters for Prometheus at\n"
		"                        http://ADDR:PORT/metrics (the management address;\n"
		"                        off by default)\n"
		"  -h, --help            this text\n"
		"\n"
		"Counters: dpdk-telemetry.py, commands /inca/info, /inca/ports,\n"
		"/inca/drops, /inca/groups, /inca/group,<id>, /inca/qos,<port>,\n"
		"/inca/pfc_watchdog; the same with --metrics, in Prometheus's format.\n", prog);
}

static void on_signal(int sig)
{
	(void)sig;
	dp_sw.quit = true;
}

struct opts {
	const char *config;
	const char *rate;
	long idle_us, spin_us;
	double stats_s;
	bool forward_only;
	const char *impair;
	const char *manager, *name, *token_file;
	const char *metrics;
	long heartbeat_ms;
	int crc;                 /* -1: the widest the CPU has */
};

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "rate", required_argument, NULL, 'r' },
		{ "idle-sleep", required_argument, NULL, 'i' },
		{ "idle-spin", required_argument, NULL, 'I' },
		{ "stats", required_argument, NULL, 's' },
		{ "forward-only", no_argument, NULL, 'f' },
		{ "impair", required_argument, NULL, 'm' },
		{ "manager", required_argument, NULL, 'M' },
		{ "name", required_argument, NULL, 'n' },
		{ "token-file", required_argument, NULL, 'k' },
		{ "heartbeat-ms", required_argument, NULL, 'b' },
		{ "metrics", required_argument, NULL, 'P' },
		{ "crc", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	o->idle_us = -1;
	o->spin_us = -1;
	o->heartbeat_ms = 200;
	o->crc = -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:r:i:I:s:fm:M:n:k:b:hP:C:", longopts, NULL)) != -1) {
		switch (c) {
		case 'C':
			o->crc = agg_crc32_impl_parse(optarg);
			if (o->crc < 0 || !agg_crc32_impl_available((enum agg_crc_impl)o->crc)) {
				fprintf(stderr, "inca-switch: --crc: '%s' is %s; this CPU has:", optarg,
					o->crc < 0 ? "not a CRC implementation" : "not on this CPU");
				for (int i = 0; i < AGG_CRC__COUNT; i++)
					if (agg_crc32_impl_available((enum agg_crc_impl)i))
						fprintf(stderr, " %s", agg_crc32_impl_name((enum agg_crc_impl)i));
				fprintf(stderr, "\n");
				return -1;
			}
			break;
		case 'c':
			o->config = optarg;
			break;
		case 'r':
			o->rate = optarg;
			break;
		case 'i':
			o->idle_us = strtol(optarg, &end, 10);
			if (*end || o->idle_us < 0 || o->idle_us > 1000000) {
				fprintf(stderr, "inca-switch: --idle-sleep: expected 0..1000000 "
					"microseconds, got '%s'\n", optarg);
				return -1;
			}
			break;
		case 'I':
			o->spin_us = strtol(optarg, &end, 10);
			if (*end || o->spin_us < 0 || o->spin_us > 1000000) {
				fprintf(stderr, "inca-switch: --idle-spin: expected 0..1000000 "
					"microseconds, got '%s'\n", optarg);
				return -1;
			}
			break;
		case 's':
			o->stats_s = strtod(optarg, &end);
			if (*end || !(o->stats_s >= 0.1 && o->stats_s <= 3600)) {
				fprintf(stderr, "inca-switch: --stats: expected 0.1..3600 "
					"seconds, got '%s'\n", optarg);
				return -1;
			}
			break;
		case 'f':
			o->forward_only = true;
			break;
		case 'm':
			o->impair = optarg;
			break;
		case 'M':
			o->manager = optarg;
			break;
		case 'n':
			o->name = optarg;
			break;
		case 'k':
			o->token_file = optarg;
			break;
		case 'P':
			o->metrics = optarg;
			break;
		case 'b':
			o->heartbeat_ms = strtol(optarg, &end, 10);
			if (*end || o->heartbeat_ms < 10 || o->heartbeat_ms > 60000) {
				fprintf(stderr, "inca-switch: --heartbeat-ms: expected 10..60000, "
					"got '%s'\n", optarg);
				return -1;
			}
			break;
		case 'h':
			usage(stdout, argv[0]);
			exit(0);
		default:
			usage(stderr, argv[0]);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "inca-switch: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (!o->config) {
		fprintf(stderr, "inca-switch: --config FILE is required (try --help)\n");
		return -1;
	}
	if (o->manager && !o->name) {
		fprintf(stderr, "inca-switch: --manager needs --name (this switch in the "
			"manager's topology)\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct dp_config cfg;
	struct dp_switch *sw = &dp_sw;
	struct opts o = { 0 };
	struct dp_agent *agent = NULL;
	struct dp_metrics *metrics = NULL;
	unsigned lcore;
	int rc, ret = 1;

	/* --help must work without EAL privileges or devices */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout, argv[0]);
			return 0;
		}
	static struct vdev_names vdevs;
	vdevs_requested(argc, argv, &vdevs);
	rc = rte_eal_init(argc, argv);
	if (rc < 0) {
		fprintf(stderr, "inca-switch: EAL initialisation failed: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}
	if (vdevs_check(&vdevs)) {
		rte_eal_cleanup();
		return 1;
	}
	argc -= rc;
	argv += rc;
	argv[0] = "inca-switch";
	if (parse_args(argc, argv, &o))
		goto err_eal;
	if (o.rate && dp_parse_rate(o.rate, &cfg.port_default.rate_bps)) {
		fprintf(stderr, "inca-switch: --rate: expected a rate such as 1gbit, "
			"got '%s'\n", o.rate);
		goto err_eal;
	}
	if (dp_config_load(&cfg, o.config))
		goto err_eal;
	if (o.crc >= 0)
		agg_crc32_impl_use((enum agg_crc_impl)o.crc);
	DP_LOG(INFO, "ICRC: CRC-32 with %s\n", agg_crc32_impl_name(agg_crc32_impl_best()));
	if (o.idle_us >= 0)
		cfg.idle_sleep_us = (uint32_t)o.idle_us;
	if (o.spin_us >= 0)
		cfg.idle_spin_us = (uint32_t)o.spin_us;
	if (o.impair) {
		const char *where = NULL;
		if (dp_parse_impair(o.impair, &cfg.impair, &where)) {
			fprintf(stderr, "inca-switch: --impair: expected \"loss 1%% duplicate 1%% "
				"reorder 5%%\", stuck at '%s'\n", where ? where : o.impair);
			goto err_config;
		}
	}
	if (cfg.impair.on)
		DP_LOG(WARNING, "emulating link impairment on every port: %s\n",
		       o.impair ? o.impair : "from the config file");
	cfg.forward_only = o.forward_only;
	/* precise short sleeps for the idle back-off */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	sw->cfg = &cfg;
	sw->tsc_hz = rte_get_tsc_hz();
	sw->start_tsc = rte_rdtsc();
	RTE_LCORE_FOREACH_WORKER(lcore) {
		struct dp_worker *w;
		char name[RTE_RING_NAMESIZE];

		if (sw->nworkers == DP_MAX_WORKERS)
			break;
		w = rte_zmalloc_socket("inca_worker", sizeof(*w), RTE_CACHE_LINE_SIZE,
				       (int)rte_lcore_to_socket_id(lcore));
		if (!w) {
			DP_LOG(ERR, "out of memory for worker state\n");
			goto err_workers;
		}
		w->index = sw->nworkers;
		w->lcore = lcore;
		snprintf(name, sizeof(name), "inca_handoff_%u", w->index);
		w->handoff = rte_ring_create(name, DP_HANDOFF_SIZE,
					     (int)rte_lcore_to_socket_id(lcore),
					     RING_F_SC_DEQ);
		sw->workers[sw->nworkers++] = w;
		if (!w->handoff) {
			DP_LOG(ERR, "handoff ring: %s\n", rte_strerror(rte_errno));
			goto err_workers;
		}
	}
	if (sw->nworkers == 0) {
		fprintf(stderr, "inca-switch: no worker lcore: give the EAL at least two "
			"(e.g. -l 0,1); the main lcore only does housekeeping\n");
		goto err_workers;
	}
	if (dp_qos_init(sw))
		goto err_workers;
	sw->l2 = dp_l2_create(65536);
	if (!sw->l2) {
		DP_LOG(ERR, "out of memory for the L2 table\n");
		goto err_workers;
	}
	if (dp_ports_init(sw))
		goto err_ports;
	if (dp_groups_init(sw))
		goto err_groups;
	dp_telemetry_init(sw);
	if (o.metrics) {
		char merr[200];
		metrics = dp_metrics_start(sw, o.metrics, merr, sizeof(merr));
		if (!metrics) {
			fprintf(stderr, "inca-switch: --metrics: %s\n", merr);
			goto err_groups;
		}
		DP_LOG(INFO, "counters for Prometheus at http://%s/metrics\n", o.metrics);
	}

	if (o.manager) {
		char token[256] = "";
		char terr[300];
		if (o.token_file) {
			if (inca_read_token_file(o.token_file, token, sizeof(token), terr,
						 sizeof(terr))) {
				fprintf(stderr, "inca-switch: --token-file %s\n", terr);
				goto err_groups;
			}
		} else if (getenv("INCA_MANAGER_TOKEN")) {
			snprintf(token, sizeof(token), "%s", getenv("INCA_MANAGER_TOKEN"));
		} else {
			fprintf(stderr, "inca-switch: --manager needs --token-file FILE or "
				"INCA_MANAGER_TOKEN\n");
			goto err_groups;
		}
		agent = dp_agent_create(o.manager, o.name, token);
		if (!agent) {
			fprintf(stderr, "inca-switch: cannot start the manager agent (libcurl)\n");
			goto err_groups;
		}
	}

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	sw->workers_running = true;
	for (unsigned i = 0; i < sw->nworkers; i++)
		rte_eal_remote_launch(dp_worker_main, sw->workers[i], sw->workers[i]->lcore);
	if (agent && (rc = dp_agent_start(agent, sw, (unsigned)o.heartbeat_ms))) {
		fprintf(stderr, "inca-switch: cannot start the manager agent's thread: %s\n",
			strerror(-rc));
		sw->quit = true;
	}

	{
		uint32_t a = cfg.switch_ip;
		printf("inca-switch: ready: %u ports, %u groups, %u workers, address "
		       "%u.%u.%u.%u\n", sw->nports, sw->ngroups, sw->nworkers, a >> 24,
		       (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
		fflush(stdout);
	}

	/* housekeeping: MAC ageing, the stats line */
	uint64_t next_stats = rte_rdtsc() + (uint64_t)(o.stats_s * (double)sw->tsc_hz);
	uint64_t next_age = rte_rdtsc() + sw->tsc_hz;
	while (!sw->quit) {
		uint64_t now = rte_rdtsc();

		if (now >= next_age) {
			dp_l2_age(sw->l2, now, (uint64_t)cfg.mac_age_s * sw->tsc_hz);
			next_age = now + sw->tsc_hz;
		}
		if (o.stats_s > 0 && now >= next_stats) {
			dp_stats_line(sw, o.stats_s);
			next_stats = now + (uint64_t)(o.stats_s * (double)sw->tsc_hz);
		}
		usleep(50000);
	}
	printf("inca-switch: stopping\n");
	/* the agent first: it may be deleting a group, which waits on the workers */
	dp_agent_destroy(agent);
	agent = NULL;
	dp_metrics_stop(metrics);
	metrics = NULL;
	rte_eal_mp_wait_lcore();
	sw->workers_running = false;
	if (o.stats_s > 0)
		dp_stats_line(sw, o.stats_s);
	ret = 0;

err_groups:
	dp_agent_destroy(agent);
	dp_metrics_stop(metrics);
	dp_groups_free(sw);
	dp_ports_close(sw);
err_ports:
	dp_l2_free(sw->l2);
err_workers:
	dp_qos_free(sw);
	for (unsigned i = 0; i < sw->nworkers; i++) {
		rte_ring_free(sw->workers[i]->handoff);
		rte_free(sw->workers[i]);
	}
err_config:
	dp_config_free(&cfg);
err_eal:
	rte_eal_cleanup();
	return ret;
}
