/* SPDX-License-Identifier: BSD-3-Clause */
/* Egress shaping: the token bucket and queue limit, on a net_ring port
 * with a clock the test controls (--no-huge --in-memory). */
#define _GNU_SOURCE    /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "dp_priv.h"

static struct rte_ring *txr, *rxr;
static struct rte_mempool *pool;
static uint16_t port;

static int setup(void **state)
{
	char prefix[48];
	char *argv[] = { "test_egress", "--no-huge", "-m", "256", "--no-shconf",
			 "--no-pci", "--log-level=error", prefix, NULL };
	struct rte_eth_conf conf = { 0 };

	(void)state;
	snprintf(prefix, sizeof(prefix), "--file-prefix=inca-test-%d", getpid());
	if (rte_eal_init(8, argv) < 0)
		return -1;
	pool = rte_pktmbuf_pool_create("test_pool", 1024, 0, 0,
				       RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	txr = rte_ring_create("test_tx", 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
	rxr = rte_ring_create("test_rx", 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (!pool || !txr || !rxr)
		return -1;
	int p = rte_eth_from_rings("net_test", &rxr, 1, &txr, 1, 0);
	if (p < 0)
		return -1;
	port = (uint16_t)p;
	if (rte_eth_dev_configure(port, 1, 1, &conf) ||
	    rte_eth_rx_queue_setup(port, 0, 64, 0, NULL, pool) ||
	    rte_eth_tx_queue_setup(port, 0, 64, 0, NULL) || rte_eth_dev_start(port))
		return -1;
	return 0;
}

static struct dp_qos qos;
static struct dp_tc_stats stats[DP_NUM_TC];
static struct dp_qos_cfg qcfg;
static const uint64_t HZ = 1000000000;   /* a 1 GHz "TSC" */

static void init(struct dp_egress *q, uint64_t rate, uint32_t limit)
{
	memset(&qos, 0, sizeof(qos));
	memset(stats, 0, sizeof(stats));
	dp_qos_cfg_default(&qcfg);
	qos.cfg = &qcfg;
	qos.tsc_hz = HZ;
	qos.port_bps[0] = 100000000;
	dp_egress_init(q, rate, limit, HZ, &qos, 0, port, 0, stats);
}

/* An IPv4/UDP frame of len bytes in traffic class tc, from ingress port
 * index in, TOS byte tos; the first payload byte is tag. */
static struct rte_mbuf *pkt_tc(uint16_t len, unsigned tc, uint32_t in, uint8_t tos,
			       uint8_t tag)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	uint8_t *p;

	assert_non_null(m);
	p = (uint8_t *)rte_pktmbuf_append(m, len);
	assert_non_null(p);
	memset(p, 0, len);
	p[12] = 0x08;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(p + 14);
	ip->version_ihl = 0x45;
	ip->type_of_service = tos;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(len - 14));
	ip->time_to_live = 64;
	ip->next_proto_id = 17;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	p[42] = tag;
	m->hash.sched.traffic_class = (uint8_t)tc;
	m->hash.sched.queue_id = in;
	return m;
}

static struct rte_mbuf *pkt(uint16_t len)
{
	return pkt_tc(len, 0, DP_NO_PORT, 0, 0);
}

/* Take what the port sent; tags[i] = tag of the i-th, ce[i] = CE-marked,
 * and every IPv4 checksum must still be right. */
static unsigned take_sent(uint8_t *tags, bool *ce, unsigned max)
{
	struct rte_mbuf *b[64];
	unsigned n, total = 0;

	while ((n = rte_ring_dequeue_burst(txr, (void **)b, 64, NULL))) {
		for (unsigned i = 0; i < n; i++) {
			struct rte_ipv4_hdr *ip =
				rte_pktmbuf_mtod_offset(b[i], struct rte_ipv4_hdr *, 14);
			uint16_t c = ip->hdr_checksum;
			ip->hdr_checksum = 0;
			assert_int_equal(rte_ipv4_cksum(ip), c);
			if (total < max) {
				tags[total] = rte_pktmbuf_mtod(b[i], uint8_t *)[42];
				ce[total] = (ip->type_of_service & 3) == 3;
			}
			total++;
		}
		rte_pktmbuf_free_bulk(b, n);
	}
	return total;
}

static unsigned sent_count(void)
{
	uint8_t t[1];
	bool c[1];
	return take_sent(t, c, 0);
}

static void test_token_bucket(void **state)
{
	static struct dp_egress q;

	(void)state;
	/* 8 Mbit/s = 1000 bytes per ms; the bucket holds max(1 ms, 2 jumbo
	 * frames) = 18036 bytes; a 1000-byte frame costs 1024 with preamble,
	 * FCS and gap */
	init(&q, 8000000, 200 * 1000);
	for (int i = 0; i < 100; i++)
		assert_int_equal(dp_egress_enqueue(&q, pkt(1000)), DP_Q_OK);
	assert_int_equal(q.bytes, 100000);
	uint64_t t = 5 * HZ;
	assert_int_equal(dp_egress_flush(&q, t), 17);   /* 18036 / 1024 */
	assert_int_equal(sent_count(), 17);
	assert_int_equal(stats[0].tx_bytes, 17000);
	/* 1 ms later: 1000 more bytes of credit, 628 left over: one frame */
	t += HZ / 1000;
	assert_int_equal(dp_egress_flush(&q, t), 1);
	/* 100 ms later: 100000 bytes of credit, capped at the bucket: 17 */
	t += HZ / 10;
	assert_int_equal(dp_egress_flush(&q, t), 17);
	assert_int_equal(sent_count(), 18);
	assert_int_equal(q.q[0].tail - q.q[0].head, 100 - 35);
	assert_int_equal(q.bytes, 65000);
	assert_int_equal(stats[0].tx_pkts, 35);
	dp_egress_drain(&q);
	assert_int_equal(q.bytes, 0);
	assert_false(dp_egress_busy(&q));
}

static void test_queue_limit_and_unshaped(void **state)
{
	static struct dp_egress q;

	(void)state;
	init(&q, 0, 50 * 1000);
	for (int i = 0; i < 50; i++)
		assert_int_equal(dp_egress_enqueue(&q, pkt(1000)), DP_Q_OK);
	struct rte_mbuf *m = pkt(1000);
	/* 51 000 > 50 000: a lossy TC tail-drops */
	assert_int_equal(dp_egress_enqueue(&q, m), DP_QDROP_LOSSY_FULL);
	rte_pktmbuf_free(m);
	/* no rate: everything goes, in bursts of 32, as the ring takes it */
	assert_int_equal(dp_egress_flush(&q, 1), 50);
	assert_int_equal(sent_count(), 50);
	assert_int_equal(stats[0].tx_bytes, 50000);
	assert_int_equal(q.bytes, 0);
}

/* Strict priority for TC6, then DRR 3:1 between TC0 and TC1 by bytes. */
static void test_scheduler(void **state)
{
	static struct dp_egress q;
	uint8_t tags[64];
	bool ce[64];

	(void)state;
	init(&q, 0, 1 << 20);
	qcfg.wrr_weight[0] = 3;
	qcfg.wrr_weight[1] = 1;
	for (int i = 0; i < 20; i++)
		assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1536, 0, DP_NO_PORT, 0, 0)), DP_Q_OK);
	for (int i = 0; i < 20; i++)
		assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1536, 1, DP_NO_PORT, 0, 1)), DP_Q_OK);
	for (int i = 0; i < 3; i++)
		assert_int_equal(dp_egress_enqueue(&q, pkt_tc(200, 6, DP_NO_PORT, 0, 6)), DP_Q_OK);
	assert_int_equal(dp_egress_flush(&q, 1), 43);
	assert_int_equal(take_sent(tags, ce, 64), 43);
	/* the strict TC first */
	assert_int_equal(tags[0], 6);
	assert_int_equal(tags[1], 6);
	assert_int_equal(tags[2], 6);
	/* then a round: TC0 3 x 9216 / 1536 = 18 frames, TC1 6 frames */
	unsigned n0 = 0, n1 = 0;
	for (int i = 3; i < 3 + 24; i++)
		if (tags[i] == 0) n0++; else n1++;
	assert_int_equal(n0, 18);
	assert_int_equal(n1, 6);
	for (int i = 3; i < 21; i++)
		assert_int_equal(tags[i], 0);
	for (int i = 21; i < 27; i++)
		assert_int_equal(tags[i], 1);
	assert_int_equal(tags[27], 0);
	dp_egress_drain(&q);
}

/* A paused lossless TC waits, the others go; XON-less expiry resumes it. */
static void test_pause_per_tc(void **state)
{
	static struct dp_egress q;
	uint8_t tags[64];
	bool ce[64];

	(void)state;
	init(&q, 0, 1 << 20);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 3, 1, 0, 3)), DP_Q_OK);
		assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 0, 1, 0, 0)), DP_Q_OK);
	}
	/* lossless bytes are held against the ingress port, lossy are not */
	assert_int_equal(qos.pq[1][3].ingress_bytes, 5000);
	assert_int_equal(qos.pq[1][0].ingress_bytes, 0);
	qos.pq[0][3].paused_until = 1000;       /* the peer paused TC3 */
	qos.pq[0][0].paused_until = 1000;       /* lossy: ignored */
	assert_int_equal(dp_egress_flush(&q, 10), 5);
	assert_int_equal(take_sent(tags, ce, 64), 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(tags[i], 0);
	assert_int_equal(qos.pq[1][3].ingress_bytes, 5000);
	assert_int_equal(dp_egress_flush(&q, 1000), 5);
	assert_int_equal(take_sent(tags, ce, 64), 5);
	assert_int_equal(tags[0], 3);
	assert_int_equal(qos.pq[1][3].ingress_bytes, 0);
	/* with PFC off the pause is not honoured */
	qcfg.pfc = false;
	qos.pq[0][3].paused_until = 1 << 30;
	assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 3, 1, 0, 3)), DP_Q_OK);
	assert_int_equal(dp_egress_flush(&q, 2000), 1);
	assert_int_equal(sent_count(), 1);
}

/* sonic-mgmt test_dequeue_ecn: with the egress paused and 100 packets
 * queued, the first dequeued is CE-marked and the last is not. */
static void test_dequeue_ecn(void **state)
{
	static struct dp_egress q;
	uint8_t tags[128];
	bool ce[128];

	(void)state;
	init(&q, 0, 1 << 20);
	qcfg.kmin_bytes = 10000;
	qcfg.kmax_bytes = 50000;
	qcfg.pmax = 1.0;
	qos.pq[0][3].paused_until = 1000;
	for (int i = 0; i < 100; i++)
		assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 3, 2, 26 << 2 | 2, (uint8_t)i)),
				 DP_Q_OK);
	/* a non-ECT packet is never marked */
	assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 3, 2, 26 << 2, 100)), DP_Q_OK);
	assert_int_equal(dp_egress_flush(&q, 10), 0);
	assert_int_equal(dp_egress_flush(&q, 1000), 101);
	assert_int_equal(take_sent(tags, ce, 128), 101);
	assert_int_equal(tags[0], 0);
	assert_true(ce[0]);           /* 101 000 queued bytes > Kmax */
	assert_false(ce[99]);         /* 2 000 < Kmin */
	assert_false(ce[100]);
	/* beyond Kmax every packet is marked: queue >= 50 000 for 52 of them */
	unsigned marked = 0;
	for (int i = 0; i < 101; i++)
		marked += ce[i];
	assert_true(marked >= 52);
	assert_true(marked <= 92);     /* nothing at or below Kmin (10 000) */
	for (int i = 92; i < 101; i++)
		assert_false(ce[i]);
	assert_int_equal(stats[3].ecn_marked, marked);
	/* with ecn.lossy off, lossy TCs are not marked */
	qcfg.ecn_lossy = false;
	for (int i = 0; i < 60; i++)
		assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 0, 2, 2, 0)), DP_Q_OK);
	assert_int_equal(dp_egress_flush(&q, 2000), 60);
	assert_int_equal(take_sent(tags, ce, 128), 60);
	for (int i = 0; i < 60; i++)
		assert_false(ce[i]);
}

/* A lossy TC is marked too (ecn.lossy, on by default), on a curve pulled
 * inside its queue: Kmin at most a quarter of the limit, Kmax at most half,
 * so that TCP with ECN backs off before the tail drop. */
static void test_lossy_ecn(void **state)
{
	static struct dp_egress q;
	uint8_t tags[64];
	bool ce[64];
	unsigned marked = 0;

	(void)state;
	init(&q, 0, 40000);
	assert_true(qcfg.ecn_lossy);
	qcfg.pmax = 1.0;             /* Kmin 32 KiB, Kmax 128 KiB: beyond the queue */
	for (int i = 0; i < 40; i++)
		assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 0, DP_NO_PORT, 2, (uint8_t)i)),
				 DP_Q_OK);
	assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 0, DP_NO_PORT, 2, 40)),
			 DP_QDROP_LOSSY_FULL);
	assert_int_equal(dp_egress_flush(&q, 10), 40);
	assert_int_equal(take_sent(tags, ce, 64), 40);
	/* the i-th leaves with (40 - i) * 1000 B queued: always marked from
	 * the pulled-in Kmax (20 000) up, never at or below Kmin (10 000) */
	for (int i = 0; i < 40; i++) {
		assert_int_equal(tags[i], i);
		if (i <= 20)
			assert_true(ce[i]);
		if (i >= 30)
			assert_false(ce[i]);
		marked += ce[i];
	}
	assert_in_range(marked, 21, 30);
	assert_int_equal(stats[0].ecn_marked, marked);
	/* not ECN-capable: never marked, however full the queue */
	for (int i = 0; i < 40; i++)
		assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 0, DP_NO_PORT, 0, 0)), DP_Q_OK);
	assert_int_equal(dp_egress_flush(&q, 20), 40);
	assert_int_equal(take_sent(tags, ce, 64), 40);
	for (int i = 0; i < 40; i++)
		assert_false(ce[i]);
	assert_int_equal(stats[0].ecn_marked, marked);
}

/* Lossless admission: XOFF + headroom per ingress port, then drops; the
 * watchdog's drop action discards the stormed queue. */
static void test_headroom_and_watchdog(void **state)
{
	static struct dp_egress q;

	(void)state;
	init(&q, 0, 1 << 20);
	qcfg.xoff_bytes = 10000;
	qcfg.xon_bytes = 5000;
	qcfg.headroom_bytes = 20000;
	qos.pq[0][3].paused_until = 1 << 30;
	for (int i = 0; i < 30; i++)
		assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 3, 1, 0, 0)), DP_Q_OK);
	struct rte_mbuf *m = pkt_tc(1000, 3, 1, 0, 0);
	assert_int_equal(dp_egress_enqueue(&q, m), DP_QDROP_HEADROOM);
	/* another ingress port has its own share */
	assert_int_equal(dp_egress_enqueue(&q, m), DP_QDROP_HEADROOM);
	m->hash.sched.queue_id = 2;
	assert_int_equal(dp_egress_enqueue(&q, m), DP_Q_OK);
	assert_int_equal(qos.pq[1][3].ingress_peak, 30000);
	assert_int_equal(dp_egress_flush(&q, 10), 0);
	qos.pq[0][3].wd_stormed = 1;
	m = pkt_tc(1000, 3, 1, 0, 0);
	assert_int_equal(dp_egress_enqueue(&q, m), DP_QDROP_WATCHDOG);
	rte_pktmbuf_free(m);
	assert_int_equal(dp_egress_flush(&q, 10), 0);
	assert_int_equal(stats[3].drops[DP_QDROP_WATCHDOG], 31);
	assert_int_equal(sent_count(), 0);
	assert_int_equal(qos.pq[1][3].ingress_bytes, 0);
	assert_int_equal(qos.pq[2][3].ingress_bytes, 0);
	assert_false(dp_egress_busy(&q));
	/* action forward: pauses ignored, packets go */
	qcfg.wd_action = DP_WD_FORWARD;
	assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 3, 1, 0, 0)), DP_Q_OK);
	assert_int_equal(dp_egress_flush(&q, 10), 1);
	assert_int_equal(sent_count(), 1);
	/* action alert: the pause still holds */
	qcfg.wd_action = DP_WD_ALERT;
	assert_int_equal(dp_egress_enqueue(&q, pkt_tc(1000, 3, 1, 0, 0)), DP_Q_OK);
	assert_int_equal(dp_egress_flush(&q, 10), 0);
	dp_egress_drain(&q);
	assert_int_equal(qos.pq[1][3].ingress_bytes, 0);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_token_bucket),
		cmocka_unit_test(test_queue_limit_and_unshaped),
		cmocka_unit_test(test_scheduler),
		cmocka_unit_test(test_pause_per_tc),
		cmocka_unit_test(test_dequeue_ecn),
		cmocka_unit_test(test_lossy_ecn),
		cmocka_unit_test(test_headroom_and_watchdog),
	};
	int failed = cmocka_run_group_tests_name("egress", tests, setup, NULL);

	/* leave no runtime directory behind */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	if (nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS))
		fprintf(stderr, "test_egress: could not remove %s\n", dir);
	return failed;
}
