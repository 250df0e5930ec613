/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-switch microbenchmark on in-memory ports (net_ring): the main lcore
 * generates contributions from M members (fresh keys every round, so every
 * packet is real work) into port 0 and drains what the switch sends; one
 * worker lcore runs the switch's own code. The same packets are then sent
 * through the same binary in forwarding-only mode (L2 to port 1). Figures:
 * wall-clock rate, and rate per busy worker core (the worker's cycles spent
 * on bursts that carried packets), plus the ratio of the two modes.
 * Prints figures; asserts nothing about speed.
 */
#define _GNU_SOURCE    /* nftw */
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include "dp_priv.h"

#define RING_SIZE 4096
#define SWITCH_IP 0x0a0000feu
#define GROUP_QPN 0x100
#define QKEY 0x5eed
#define WINDOW 64

static struct rte_ring *rx_ring[2], *tx_ring[2];
static struct rte_mempool *gen_pool;

struct result {
	double seconds, mpps_wall, mpps_busy, gbps_busy, ns_per_pkt;
	uint64_t pkts, out;
};

static void drain(uint64_t *out)
{
	struct rte_mbuf *b[64];
	for (int p = 0; p < 2; p++) {
		unsigned n;
		while ((n = rte_ring_dequeue_burst(tx_ring[p], (void **)b, 64, NULL))) {
			rte_pktmbuf_free_bulk(b, n);
			*out += n;
		}
	}
}

/* One phase: launch the worker, feed rounds * WINDOW * members packets. */
static int run_phase(struct dp_switch *sw, uint16_t members, uint16_t elems,
		     long rounds, bool forward_only, struct result *res)
{
	struct dp_worker *w = sw->workers[0];
	static uint8_t payload[AGG_MAX_PAYLOAD];
	static uint32_t seq_base;   /* keys keep growing across phases */
	uint64_t sent = 0, out = 0;
	struct rte_ether_addr sw_mac = sw->port_mac[0];
	/* a station behind port 1 for the forwarding baseline */
	struct rte_ether_addr far = { { 0x02, 0, 0, 0, 0xfa, 0x01 } };

	sw->cfg->forward_only = forward_only;
	sw->quit = false;
	memset(w->port, 0, sizeof(w->port));
	w->busy_tsc = 0;
	rte_eal_remote_launch(dp_worker_main, w, w->lcore);

	/* teach the switch where "far" is */
	struct rte_mbuf *l = rte_pktmbuf_alloc(gen_pool);
	struct rte_ether_hdr *eh = l ? (struct rte_ether_hdr *)rte_pktmbuf_append(l, 60) : NULL;
	if (!eh)
		return -ENOMEM;
	memset(eh, 0, 60);
	eh->src_addr = far;
	memset(&eh->dst_addr, 0xff, 6);
	eh->ether_type = RTE_BE16(0x88b5);   /* local experimental */
	rte_ring_enqueue(rx_ring[1], l);
	rte_delay_ms(50);
	drain(&out);
	out = 0;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i & 0x3f);
	uint64_t t0 = rte_rdtsc();
	for (long r = 0; r < rounds; r++) {
		for (uint16_t s = 0; s < WINDOW; s++) {
			struct rte_mbuf *batch[64];
			unsigned nb = 0;

			for (uint16_t m = 0; m < members; m++) {
				struct rte_mbuf *mb = rte_pktmbuf_alloc(gen_pool);
				while (!mb) {
					drain(&out);
					mb = rte_pktmbuf_alloc(gen_pool);
				}
				struct agg_frame_spec sp = {
					.src_ip = 0x0a000001u + m, .dst_ip = SWITCH_IP,
					.dest_qp = GROUP_QPN, .qkey = QKEY,
					.src_qp = 0x200u + m,
					.hdr = { .version = 1, .type = AGG_TYPE_CONTRIB,
						 .dtype = AGG_DTYPE_FP32, .op = AGG_OP_SUM,
						 .flags = (uint8_t)((seq_base + r) & 1),
						 .count = elems,
						 .group_id = 1, .rank = m, .fanin = 1,
						 .slot = s, .coll_seq = seq_base + (uint32_t)r,
						 .pkt_idx = s },
				};
				sp.src_mac[0] = 0x02;
				sp.src_mac[5] = (uint8_t)m;
				memcpy(sp.dst_mac, forward_only ? far.addr_bytes
								: sw_mac.addr_bytes, 6);
				int len = agg_encode(rte_pktmbuf_mtod(mb, void *),
						     rte_pktmbuf_tailroom(mb), &sp, payload);
				mb->data_len = (uint16_t)len;
				mb->pkt_len = (uint32_t)len;
				batch[nb++] = mb;
			}
			unsigned done = 0;
			while (done < nb) {
				done += rte_ring_enqueue_burst(rx_ring[0], (void **)batch + done,
							       nb - done, NULL);
				drain(&out);
			}
			sent += nb;
		}
	}
	/* wait until everything came out (or stopped coming) */
	uint64_t want = sent, last = out, idle = 0;
	while (out < want && idle < 200) {
		drain(&out);
		rte_delay_us_sleep(1000);
		idle = out == last ? idle + 1 : 0;
		last = out;
	}
	uint64_t t1 = rte_rdtsc();
	seq_base += (uint32_t)rounds;
	sw->quit = true;
	rte_eal_wait_lcore(w->lcore);
	drain(&out);

	double hz = (double)sw->tsc_hz;
	res->pkts = sent;
	res->out = out;
	res->seconds = (double)(t1 - t0) / hz;
	res->mpps_wall = (double)sent / res->seconds / 1e6;
	double busy_s = (double)w->busy_tsc / hz;
	res->mpps_busy = (double)sent / busy_s / 1e6;
	res->ns_per_pkt = busy_s * 1e9 / (double)sent;
	size_t frame = AGG_FRAME_HDR_LEN + (size_t)elems * 4 + AGG_ICRC_LEN;
	res->gbps_busy = res->mpps_busy * 1e6 * (double)frame * 8 / 1e9;
	return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int main(int argc, char **argv)
{
	static struct dp_config cfg;
	static struct agg_member members_cfg[64];
	struct dp_switch *sw = &dp_sw;
	char prefix[64];
	int members = 8, elems = 256, runs = 5;
	long rounds = 2000;
	int opt;

	while ((opt = getopt(argc, argv, "m:e:r:n:h")) != -1) {
		switch (opt) {
		case 'm': members = atoi(optarg); break;
		case 'e': elems = atoi(optarg); break;
		case 'r': rounds = atol(optarg); break;
		case 'n': runs = atoi(optarg); break;
		case 'h':
			printf("Usage: inca-bench-switch [-m MEMBERS (8)] [-e FP32 ELEMENTS "
			       "PER PACKET (256 = 1 KiB)] [-r ROUNDS OF %d SLOTS (2000)] "
			       "[-n RUNS (5)]\n", WINDOW);
			return 0;
		default:
			return 2;
		}
	}
	if (members < 1 || members > 64 || elems < 1 || elems > 1024 || rounds < 1 ||
	    runs < 1 || runs > 99) {
		fprintf(stderr, "inca-bench-switch: need 1..64 members, 1..1024 elements, "
			"1..99 runs\n");
		return 2;
	}
	snprintf(prefix, sizeof(prefix), "--file-prefix=inca-bench-%d", getpid());
	char *eal[] = { argv[0], "-l", "0,1", "--no-huge", "-m", "1024", "--no-pci",
			prefix, "--log-level=inca-switch,warning", NULL };
	if (rte_eal_init(9, eal) < 0) {
		fprintf(stderr, "inca-bench-switch: EAL: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	if (rte_lcore_count() < 2) {
		fprintf(stderr, "inca-bench-switch: needs 2 lcores\n");
		return 1;
	}
	for (int p = 0; p < 2; p++) {
		char n[32];
		snprintf(n, sizeof(n), "bench_rx%d", p);
		rx_ring[p] = rte_ring_create(n, RING_SIZE, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
		snprintf(n, sizeof(n), "bench_tx%d", p);
		tx_ring[p] = rte_ring_create(n, RING_SIZE, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
		snprintf(n, sizeof(n), "net_bench%d", p);
		if (!rx_ring[p] || !tx_ring[p] ||
		    rte_eth_from_rings(n, &rx_ring[p], 1, &tx_ring[p], 1, 0) < 0) {
			fprintf(stderr, "inca-bench-switch: ring port: %s\n",
				rte_strerror(rte_errno));
			return 1;
		}
	}
	gen_pool = rte_pktmbuf_pool_create("bench_gen", 16384, 256, 0,
					   RTE_MBUF_DEFAULT_BUF_SIZE, 0);

	cfg.switch_ip = SWITCH_IP;
	cfg.result_dscp = 26;
	cfg.mac_age_s = 300;
	cfg.port_default.queue_bytes = 4 << 20;
	snprintf(cfg.path, sizeof(cfg.path), "(benchmark)");
	for (int m = 0; m < members; m++)
		members_cfg[m] = (struct agg_member){ .ip = 0x0a000001u + (uint32_t)m,
						      .qpn = 0x200u + (uint32_t)m,
						      .fanin = 1 };
	struct dp_group_cfg gc = { .agg = { .group_id = 1, .qpn = GROUP_QPN,
		.qkey = QKEY, .nmembers = (uint16_t)members, .window = WINDOW,
		.elems_per_pkt = (uint16_t)elems, .members = members_cfg } };
	cfg.groups = &gc;
	cfg.ngroups = 1;

	sw->cfg = &cfg;
	sw->tsc_hz = rte_get_tsc_hz();
	unsigned lcore = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
	struct dp_worker *w = rte_zmalloc(NULL, sizeof(*w), RTE_CACHE_LINE_SIZE);
	w->lcore = lcore;
	w->handoff = rte_ring_create("bench_handoff", DP_HANDOFF_SIZE, 0, RING_F_SC_DEQ);
	sw->workers[0] = w;
	sw->nworkers = 1;
	sw->l2 = dp_l2_create(4096);
	dp_qos_cfg_default(&cfg.qos);
	if (dp_qos_init(sw) || !gen_pool || !w->handoff || !sw->l2 || dp_ports_init(sw) || dp_groups_init(sw)) {
		fprintf(stderr, "inca-bench-switch: set-up failed\n");
		return 1;
	}

	printf("# inca-switch on net_ring ports, 1 worker core + 1 generator core; "
	       "%d members, fp32 sum, %d B payload (%zu B frames), %ld x %d slots per "
	       "run, median of %d runs\n", members, elems * 4,
	       AGG_FRAME_HDR_LEN + (size_t)elems * 4 + 4, rounds, WINDOW, runs);
	printf("%-13s %12s %14s %14s %12s %10s\n", "mode", "Mpps(wall)",
	       "Mpps/busy-core", "Gbit/s/busy", "ns/packet", "out/in");
	double med[2];
	for (int mode = 0; mode < 2; mode++) {
		struct result r[99];
		for (int k = 0; k < runs; k++)
			run_phase(sw, (uint16_t)members, (uint16_t)elems, rounds, mode == 1, &r[k]);
		/* median by per-busy-core rate */
		for (int a = 0; a < runs; a++)
			for (int b = a + 1; b < runs; b++)
				if (r[b].mpps_busy < r[a].mpps_busy) {
					struct result t = r[a]; r[a] = r[b]; r[b] = t;
				}
		struct result *m = &r[runs / 2];
		med[mode] = m->mpps_busy;
		printf("%-13s %12.3f %14.3f %14.2f %12.1f %10.3f\n",
		       mode ? "forward-only" : "aggregation", m->mpps_wall, m->mpps_busy,
		       m->gbps_busy, m->ns_per_pkt, (double)m->out / (double)m->pkts);
	}
	printf("aggregation / forwarding, per busy core: %.2f\n", med[0] / med[1]);
	const struct agg_group_stats *st = agg_group_stats(sw->groups[0].agg);
	printf("# group over all aggregation runs: %llu contributions, %llu completions, "
	       "%llu stale, %llu mismatched\n",
	       (unsigned long long)st->contributions, (unsigned long long)st->completions,
	       (unsigned long long)st->drops[AGG_E_STALE],
	       (unsigned long long)st->drops[AGG_E_MISMATCH]);
	dp_groups_free(sw);
	dp_ports_close(sw);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);   /* leave nothing behind */
	return 0;
}
