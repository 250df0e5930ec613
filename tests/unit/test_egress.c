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

static struct rte_mbuf *pkt(uint16_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	assert_non_null(m);
	assert_non_null(rte_pktmbuf_append(m, len));
	return m;
}

static unsigned sent_count(void)
{
	struct rte_mbuf *b[64];
	unsigned n, total = 0;

	while ((n = rte_ring_dequeue_burst(txr, (void **)b, 64, NULL))) {
		rte_pktmbuf_free_bulk(b, n);
		total += n;
	}
	return total;
}

static void test_token_bucket(void **state)
{
	static struct dp_egress q;
	const uint64_t hz = 1000000000;   /* a 1 GHz "TSC" */
	uint64_t bytes = 0;

	(void)state;
	/* 8 Mbit/s = 1000 bytes per ms; the bucket holds max(1 ms, 2 jumbo
	 * frames) = 18036 bytes; a 1000-byte frame costs 1024 with preamble,
	 * FCS and gap */
	dp_egress_init(&q, 8000000, 200 * 1000, hz);
	for (int i = 0; i < 100; i++)
		assert_true(dp_egress_enqueue(&q, pkt(1000)));
	assert_int_equal(q.bytes, 100000);
	uint64_t t = 5 * hz;
	assert_int_equal(dp_egress_flush(&q, port, 0, t, &bytes), 17);   /* 18036 / 1024 */
	assert_int_equal(sent_count(), 17);
	assert_int_equal(bytes, 17000);
	/* 1 ms later: 1000 more bytes of credit, 628 left over: one frame */
	t += hz / 1000;
	assert_int_equal(dp_egress_flush(&q, port, 0, t, &bytes), 1);
	/* 100 ms later: 100000 bytes of credit, capped at the bucket: 17 */
	t += hz / 10;
	assert_int_equal(dp_egress_flush(&q, port, 0, t, &bytes), 17);
	assert_int_equal(sent_count(), 18);
	assert_int_equal(q.tail - q.head, 100 - 35);
	assert_int_equal(q.bytes, 65000);
	dp_egress_drain(&q);
	assert_int_equal(q.bytes, 0);
	assert_int_equal(q.tail, q.head);
}

static void test_queue_limit_and_unshaped(void **state)
{
	static struct dp_egress q;
	uint64_t bytes = 0;

	(void)state;
	dp_egress_init(&q, 0, 50 * 1000, 1000000000);
	for (int i = 0; i < 50; i++)
		assert_true(dp_egress_enqueue(&q, pkt(1000)));
	struct rte_mbuf *m = pkt(1000);
	assert_false(dp_egress_enqueue(&q, m));     /* 51 000 > 50 000: tail drop */
	rte_pktmbuf_free(m);
	/* no rate: everything goes, in bursts of 32, as the ring takes it */
	assert_int_equal(dp_egress_flush(&q, port, 0, 1, &bytes), 50);
	assert_int_equal(sent_count(), 50);
	assert_int_equal(bytes, 50000);
	assert_int_equal(q.bytes, 0);
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
