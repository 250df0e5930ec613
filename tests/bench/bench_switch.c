/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-switch microbenchmark on in-memory ports (net_ring): the switch's own
 * worker code on 1 or 2 worker lcores, fed by rings filled before the clock
 * starts (so two workers can be measured on a 2-core machine: the main
 * lcore only sleeps while they run). M members contribute to one group,
 * fresh keys every round, every slot's packets in the queue of the worker
 * that owns it (what a port hashing the UDP source port alone does). The same
 * packets then go through forwarding-only (L2 to port 1).
 *
 * Per busy worker core (its cycles in loop iterations that carried
 * packets): Mpps, elements/s (fp32 unless -d), ns per packet, payload bytes/s; and the
 * rate of all workers together. Beside them, the bound of a core's memory:
 * the same packets, generated the same way into the same pool, read by one
 * worker lcore with nothing else to do (stream-read: every payload byte
 * once, the frame two packets on prefetched as it goes, as the switch's
 * kernels do theirs), and read with one result payload written per set
 * into an mbuf of a pool like the switch's (stream-rw: what aggregation
 * cannot do without);
 * the aggregation's payload bytes/s is printed as a fraction of both.
 * Frames out are freed on the worker once those waiting in the port's tx
 * ring would hold more than 1024 descriptors (-t: a NIC's driver with the
 * switch's 1024 tx descriptors, a result frame taking two; 0 keeps them all
 * until the run ends, when every result mbuf the switch takes is a cold
 * one); stream-rw keeps as many sets' results.
 * It checks that the work was done: every
 * contribution accepted, every set completed, one result per contribution
 * (out/in = 1; forwarding: every packet out), every frame out whole with a
 * right ICRC (those still in the tx rings after the clock, and one in 251
 * of those freed during the run), no drop anywhere. Otherwise it
 * says what is wrong and exits 1. Prints figures; asserts nothing on speed.
 */
#define _GNU_SOURCE    /* nftw */
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include "dp_priv.h"

#define SWITCH_IP 0x0a0000feu
#define GROUP_QPN 0x100
#define QKEY 0x5eed
#define WINDOW 64
#define MAX_W 2

static struct rte_ring *rx_ring[2][MAX_W], *tx_ring[2][MAX_W];
static struct rte_mempool *gen_pool;
static unsigned ring_size;

struct result {
	double wall_s, busy_s[MAX_W], mpps_core, ns_pkt, mpps_all;
	uint64_t pkts, out, pkts_w[MAX_W];
};

/* Frames out that are not whole RoCEv2 frames with a right ICRC (the
 * learning frame aside): results are built in pieces, which must add up.
 * The main lcore's count (drain), the workers' (tx_done) added to it after
 * the run. */
static uint64_t bad_frames;

/* m is a whole RoCEv2 frame with a right ICRC, or the learning frame. buf:
 * room for a frame, the caller's own (the workers check at the same time). */
static bool frame_ok(const struct rte_mbuf *m, uint8_t *buf)
{
	const struct rte_ether_hdr *eh = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	struct agg_pkt pkt;

	if (eh->ether_type == RTE_BE16(0x88b5))
		return true;
	const void *p = m->pkt_len <= AGG_MAX_FRAME_LEN ? rte_pktmbuf_read(m, 0, m->pkt_len, buf)
							: NULL;
	return p && !agg_decode(p, m->pkt_len, true, &pkt);
}

/* Transmit completions as a NIC's driver does them (-t TXD): once the
 * frames waiting in a port's tx ring would hold more than TXD descriptors
 * (one a segment: a result frame, its headers and the body it shares,
 * takes two; the switch configures 1024), the worker frees the oldest, a
 * batch of up to TX_FREE_BATCH at a time as drivers do, so result mbufs
 * come back to its pools as they would on a NIC instead of all waiting in
 * the ring until the run ends, cold. Every CHECK_EVERY-th frame freed
 * during the run is checked (reading it whole and its ICRC cost more than
 * the switch spends on a result; a prime, so that the frames checked
 * rotate over the members), the rest after the clock by drain(). */
#define CHECK_EVERY 251
#define TX_FREE_BATCH 32

struct tx_done {
	struct rte_ring *ring;
	uint32_t descs;     /* the descriptors the frames in the ring hold */
	uint32_t seq;
	uint64_t freed, bad;
	uint8_t buf[AGG_MAX_FRAME_LEN];
};
static struct tx_done tx_done[2][MAX_W];
static unsigned txd = 1024;

static uint16_t tx_complete(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n,
			    void *arg)
{
	struct tx_done *d = arg;
	struct rte_mbuf *b[TX_FREE_BATCH];
	uint32_t need = 0;

	(void)port;
	(void)queue;
	for (uint16_t i = 0; i < n; i++)
		need += pkts[i]->nb_segs;
	while (d->descs + need > txd) {
		unsigned k = rte_ring_dequeue_burst(d->ring, (void **)b, RTE_DIM(b), NULL);

		if (!k)
			break;
		for (unsigned i = 0; i < k; i++) {
			if (d->seq++ % CHECK_EVERY == 0 && !frame_ok(b[i], d->buf))
				d->bad++;
			d->descs -= RTE_MIN(d->descs, (uint32_t)b[i]->nb_segs);
		}
		rte_pktmbuf_free_bulk(b, k);
		d->freed += k;
	}
	d->descs += need;
	return n;
}

static uint64_t drain(unsigned nw)
{
	static uint8_t buf[AGG_MAX_FRAME_LEN];
	struct rte_mbuf *b[64];
	uint64_t out = 0;

	for (int p = 0; p < 2; p++)
		for (unsigned q = 0; q < nw; q++) {
			unsigned n;
			while ((n = rte_ring_dequeue_burst(tx_ring[p][q], (void **)b, 64, NULL))) {
				for (unsigned i = 0; i < n; i++)
					bad_frames += !frame_ok(b[i], buf);
				rte_pktmbuf_free_bulk(b, n);
				out += n;
			}
			out += tx_done[p][q].freed;
			bad_frames += tx_done[p][q].bad;
			tx_done[p][q].freed = tx_done[p][q].bad = 0;
			tx_done[p][q].descs = 0;
		}
	return out;
}

static uint64_t switch_drops(struct dp_switch *sw)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < sw->nworkers; i++) {
		struct dp_worker *w = sw->workers[i];
		for (int d = 0; d < DP_DROP_COUNT; d++)
			n += w->drops[d];
		for (int d = 0; d < AGG_E__COUNT; d++)
			n += w->agg_drops[d];
	}
	return n;
}

static void print_drops(struct dp_switch *sw)
{
	struct agg_group_stats st;

	for (unsigned i = 0; i < sw->nworkers; i++) {
		struct dp_worker *w = sw->workers[i];
		for (int d = 0; d < DP_DROP_COUNT; d++)
			if (w->drops[d])
				fprintf(stderr, "  worker %u: %s %llu\n", i, dp_drop_names[d],
					(unsigned long long)w->drops[d]);
		for (int d = 1; d < AGG_E__COUNT; d++)
			if (w->agg_drops[d])
				fprintf(stderr, "  worker %u: %s %llu\n", i, agg_errname(-d),
					(unsigned long long)w->agg_drops[d]);
	}
	agg_group_stats_sum(sw->groups[0].agg, &st);
	for (int d = 1; d < AGG_E__COUNT; d++)
		if (st.drops[d])
			fprintf(stderr, "  group: %s %llu\n", agg_errname(-d),
				(unsigned long long)st.drops[d]);
}

/* One core streaming the payloads: see the header. */
struct stream_job {
	struct rte_mbuf **pkts;
	uint64_t n;
	uint16_t members;
	size_t off, len;
	struct rte_mempool *res_pool;   /* NULL: read only */
	struct rte_mbuf **res;          /* the results written */
	uint64_t keep;                  /* as many kept (a tx ring's), 0: all */
	uint64_t tsc, written, freed;   /* res[freed..written) still held */
	int rc;
};

typedef uint64_t v4u64 __attribute__((vector_size(32)));
static volatile uint64_t stream_sink;

static int stream_main(void *arg)
{
	struct stream_job *j = arg;
	static uint8_t result[AGG_MAX_PAYLOAD] __attribute__((aligned(64)));
	v4u64 a0 = { 0 }, a1 = { 0 }, a2 = { 0 }, a3 = { 0 };
	uint64_t t0 = rte_rdtsc();

	/* the frame two packets on comes in a line every 64 bytes read, as
	 * the switch's kernels bring theirs (agg_prefetch_stream): with the
	 * hardware's prefetchers alone this loop took 10-25% longer (AMD
	 * EPYC: 264-304 ns a 4 KiB packet against 227-242) */
	const uint8_t *pc = NULL, *pe = NULL;
	for (uint64_t i = 0; i < j->n; i++) {
		const uint8_t *p = rte_pktmbuf_mtod(j->pkts[i], const uint8_t *) + j->off;
		size_t k = 0;
		for (; pc < pe; pc += RTE_CACHE_LINE_SIZE)
			rte_prefetch1(pc);
		if (i + 2 < j->n) {
			const uint8_t *f = rte_pktmbuf_mtod(j->pkts[i + 2], const uint8_t *);
			pc = RTE_PTR_ALIGN_FLOOR(f, RTE_CACHE_LINE_SIZE);
			pe = f + j->off + j->len;
		}
		for (; k + 128 <= j->len; k += 128) {
			v4u64 x0, x1, x2, x3;
			for (int q = 0; q < 2 && pc < pe; q++, pc += RTE_CACHE_LINE_SIZE)
				rte_prefetch1(pc);
			memcpy(&x0, p + k, 32);
			memcpy(&x1, p + k + 32, 32);
			memcpy(&x2, p + k + 64, 32);
			memcpy(&x3, p + k + 96, 32);
			a0 ^= x0;
			a1 ^= x1;
			a2 ^= x2;
			a3 ^= x3;
		}
		for (; k < j->len; k++)
			a0[0] += p[k];
		if (j->res_pool && i % j->members == (uint64_t)j->members - 1u) {
			struct rte_mbuf *r = rte_pktmbuf_alloc(j->res_pool);
			void *d = r ? rte_pktmbuf_append(r, (uint16_t)j->len) : NULL;
			if (!d) {
				j->rc = -ENOMEM;
				rte_pktmbuf_free(r);
				return -ENOMEM;
			}
			rte_memcpy(d, result, j->len);
			j->res[j->written++] = r;
			if (j->keep && j->written - j->freed > j->keep)
				rte_pktmbuf_free(j->res[j->freed++]);
		}
	}
	j->tsc = rte_rdtsc() - t0;
	a0 ^= a1 ^ a2 ^ a3;
	stream_sink = a0[0] ^ a0[1] ^ a0[2] ^ a0[3];
	return 0;
}

static struct rte_mempool *res_pool;   /* stream-rw's results */
static enum agg_dtype dtype = AGG_DTYPE_FP32;   /* -d */
static size_t dsize = 4;

/* Fill the rx rings with rounds x WINDOW x members contributions (slot s
 * into queue s % nw), then run the workers until they are empty. stream:
 * 0 that; 1 the same contributions read by one core (stream-read), 2 read
 * with a result written per set (stream-rw) instead. */
static int run_phase(struct dp_switch *sw, uint16_t members, uint16_t elems,
		     long rounds, bool forward_only, int stream, struct result *res)
{
	static struct rte_mbuf **gen, **gen_res;
	uint64_t ngen = 0;
	static uint8_t payload[AGG_MAX_PAYLOAD];
	static uint32_t seq_base;   /* keys keep growing across phases */
	unsigned nw = sw->nworkers;
	uint64_t sent = 0, out;
	struct rte_ether_addr sw_mac = sw->port_mac[0];
	/* a station behind port 1 for the forwarding baseline */
	struct rte_ether_addr far = { { 0x02, 0, 0, 0, 0xfa, 0x01 } };

	memset(res, 0, sizeof(*res));
	sw->cfg->forward_only = forward_only;
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i & 0x3f);

	/* teach the switch where "far" is, once: one broadcast frame in on
	 * port 1 (flooded to port 0: one packet out more than in) */
	static bool taught;
	uint64_t extra = 0;
	if (!taught) {
		struct rte_mbuf *l = rte_pktmbuf_alloc(gen_pool);
		struct rte_ether_hdr *eh = l ? (struct rte_ether_hdr *)
					   rte_pktmbuf_append(l, 60) : NULL;
		if (!eh)
			return -ENOMEM;
		memset(eh, 0, 60);
		eh->src_addr = far;
		memset(&eh->dst_addr, 0xff, 6);
		eh->ether_type = RTE_BE16(0x88b5);   /* local experimental */
		rte_ring_enqueue(rx_ring[1][0], l);
		taught = true;
		extra = 1;
	}

	if (stream && !gen) {
		gen = calloc((size_t)rounds * WINDOW * members, sizeof(*gen));
		gen_res = calloc((size_t)rounds * WINDOW + 1, sizeof(*gen_res));
		if (!gen || !gen_res)
			return -ENOMEM;
	}
	for (long r = 0; r < rounds; r++)
		for (uint16_t s = 0; s < WINDOW; s++)
			for (uint16_t m = 0; m < members; m++) {
				struct rte_mbuf *mb = rte_pktmbuf_alloc(gen_pool);
				if (!mb) {
					fprintf(stderr, "inca-bench-switch: generator pool too small\n");
					return -ENOMEM;
				}
				struct agg_frame_spec sp = {
					.src_ip = 0x0a000001u + m, .dst_ip = SWITCH_IP,
					.dest_qp = GROUP_QPN, .qkey = QKEY,
					.src_qp = 0x200u + m,
					/* docs/protocol.md 1.3 */
					.udp_sport = (uint16_t)(0xc000 | ((1 + s) & 0x3fff)),
					.hdr = { .version = 1, .type = AGG_TYPE_CONTRIB,
						 .dtype = (uint8_t)dtype, .op = AGG_OP_SUM,
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
				if (len < 0) {
					fprintf(stderr, "inca-bench-switch: encode: %s\n",
						agg_strerror(len));
					return len;
				}
				mb->data_len = (uint16_t)len;
				mb->pkt_len = (uint32_t)len;
				if (stream) {
					gen[ngen++] = mb;
					sent++;
					continue;
				}
				/* the queue hashing the source port gives it:
				 * its owner's (group 1 + slot) % workers */
				if (rte_ring_enqueue(rx_ring[0][(1 + s) % nw], mb)) {
					fprintf(stderr, "inca-bench-switch: rx ring full\n");
					return -ENOSPC;
				}
				sent++;
			}
	seq_base += (uint32_t)rounds;
	if (stream) {
		struct stream_job j = { .pkts = gen, .n = ngen, .members = members,
					.off = AGG_FRAME_HDR_LEN, .len = (size_t)elems * dsize,
					.res_pool = stream == 2 ? res_pool : NULL,
					.res = gen_res,
					/* as many sets' bodies as the switch's
					 * results keep: a set's frames hold
					 * two descriptors each */
					.keep = txd ? RTE_MAX(txd / (2u * members), 1u) : 0 };
		unsigned lc = sw->workers[0]->lcore;
		rte_eal_remote_launch(stream_main, &j, lc);
		rte_eal_wait_lcore(lc);
		rte_pktmbuf_free_bulk(gen, (unsigned)ngen);
		rte_pktmbuf_free_bulk(gen_res + j.freed, (unsigned)(j.written - j.freed));
		if (j.rc)
			return j.rc;
		if (stream == 2 && j.written != ngen / members)
			return -EIO;
		res->pkts = sent;
		res->out = sent;
		res->busy_s[0] = (double)j.tsc / (double)sw->tsc_hz;
		res->mpps_core = (double)sent / res->busy_s[0] / 1e6;
		res->ns_pkt = res->busy_s[0] * 1e9 / (double)sent;
		res->mpps_all = res->mpps_core;
		return 0;
	}

	/* the clock: workers run until their rings are empty; the main
	 * lcore sleeps */
	sw->quit = false;
	for (unsigned i = 0; i < nw; i++) {
		struct dp_worker *w = sw->workers[i];
		memset(w->port, 0, sizeof(w->port));
		w->busy_tsc = 0;
	}
	uint64_t t0 = rte_rdtsc();
	for (unsigned i = 0; i < nw; i++)
		rte_eal_remote_launch(dp_worker_main, sw->workers[i], sw->workers[i]->lcore);
	for (int k = 0; k < 60000; k++) {     /* at most 60 s */
		struct timespec ts = { 0, 1000000 };
		unsigned left = 0;
		for (unsigned q = 0; q < nw; q++)
			left += rte_ring_count(rx_ring[0][q]) + rte_ring_count(rx_ring[1][q]) +
				rte_ring_count(sw->workers[q]->handoff);
		if (!left)
			break;
		nanosleep(&ts, NULL);
	}
	struct timespec ts = { 0, 2000000 };  /* the last bursts leave */
	nanosleep(&ts, NULL);
	sw->quit = true;
	rte_eal_mp_wait_lcore();
	uint64_t t1 = rte_rdtsc();
	out = drain(nw) - extra;

	double hz = (double)sw->tsc_hz, max_busy = 0, busy = 0;
	res->pkts = sent;
	res->out = out;
	res->wall_s = (double)(t1 - t0) / hz;
	for (unsigned i = 0; i < nw; i++) {
		res->busy_s[i] = (double)sw->workers[i]->busy_tsc / hz;
		res->pkts_w[i] = sw->workers[i]->port[0].rx_pkts;
		busy += res->busy_s[i];
		if (res->busy_s[i] > max_busy)
			max_busy = res->busy_s[i];
	}
	res->mpps_core = (double)sent / busy / 1e6;
	res->ns_pkt = busy * 1e9 / (double)sent;
	res->mpps_all = (double)sent / max_busy / 1e6;
	return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* The EAL's runtime directory goes too, whatever happened. */
static int eal_done(int rc)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	return rc;
}

static int cmp_core(const void *a, const void *b)
{
	const struct result *x = a, *y = b;
	return (x->mpps_core > y->mpps_core) - (x->mpps_core < y->mpps_core);
}

int main(int argc, char **argv)
{
	static struct dp_config cfg;
	static struct agg_member members_cfg[64];
	struct dp_switch *sw = &dp_sw;
	char prefix[64];
	int members = 8, elems = 256, runs = 5, workers = 1, modes = 7;
	long pkts_per_run = 16384;
	int opt, failed = 0;
	const char *huge_dir = NULL;

	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' },
						   { NULL, 0, NULL, 0 } };

	while ((opt = getopt_long(argc, argv, "m:e:d:p:n:w:H:C:t:afh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm': members = atoi(optarg); break;
		case 'e': elems = atoi(optarg); break;
		case 'p': pkts_per_run = atol(optarg); break;
		case 'n': runs = atoi(optarg); break;
		case 'w': workers = atoi(optarg); break;
		case 'H': huge_dir = optarg; break;
		case 't': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 0 || v > 65536) {
				fprintf(stderr, "inca-bench-switch: -t: 0 to 65536 frames, not "
					"'%s'\n", optarg);
				return 2;
			}
			txd = (unsigned)v;
			break;
		}
		case 'C': {
			int impl = agg_crc32_impl_parse(optarg);
			if (impl < 0 || agg_crc32_impl_use((enum agg_crc_impl)impl)) {
				fprintf(stderr, "inca-bench-switch: -C: '%s' is not a CRC "
					"implementation this CPU has\n", optarg);
				return 2;
			}
			break;
		}
		case 'a': modes = 1; break;
		case 'd':
			for (dtype = 0; dtype < AGG_DTYPE_COUNT; dtype++)
				if (!strcmp(optarg, agg_dtype_name(dtype)))
					break;
			if (dtype == AGG_DTYPE_COUNT) {
				fprintf(stderr, "inca-bench-switch: -d: fp32, fp16, bf16, int32, "
					"int64 or fp64, not '%s'\n", optarg);
				return 2;
			}
			dsize = agg_dtype_size(dtype);
			break;
		case 'f': modes = 2; break;
		case 'h':
			printf("Usage: inca-bench-switch [-m MEMBERS (8)] [-d DTYPE (fp32)] [-e ELEMENTS "
			       "PER PACKET (fp32: 256 = IB MTU 1024, 1024 = IB MTU 4096)]\n"
			       "  [-w WORKERS 1|2 (1)]\n"
			       "  [-p PACKETS PER RUN (16384)] [-n RUNS (5)] [-a aggregation only | "
			       "-f forwarding only; else both and the streaming bound]\n"
			       "  [-H HUGETLBFS DIR: hugepages, else --no-huge]\n"
			       "  [-t TXD: frames out freed on the worker, as a NIC's driver "
			       "with TXD tx descriptors\n"
			       "   does (1024, the switch's; a result frame takes two); 0: kept "
			       "until the run ends]\n"
			       "  [-C CRC: slice-by-8, pclmulqdq, vpclmulqdq-avx2, vpclmulqdq-avx512;\n"
			       "   default the widest this CPU has]\n"
			       "Exits 1 when the switch did not do the work (drops, out/in, "
			       "completions).\n");
			return 0;
		default:
			fprintf(stderr, "inca-bench-switch: -h for the options\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "inca-bench-switch: unexpected argument '%s' (-h for the options)\n",
			argv[optind]);
		return 2;
	}
	if (members < 1 || members > 64 || elems < 1 || (size_t)elems * dsize > AGG_MAX_PAYLOAD ||
	    runs < 1 || runs > 99 || workers < 1 || workers > MAX_W || pkts_per_run < 1 ||
	    pkts_per_run > (1 << 20)) {
		fprintf(stderr, "inca-bench-switch: need 1..64 members, 1..%d elements of %s "
			"(4096 bytes), 1..%d workers, 1..99 runs, 1..1048576 packets\n",
			(int)(AGG_MAX_PAYLOAD / dsize), agg_dtype_name(dtype), MAX_W);
		return 2;
	}
	long rounds = (pkts_per_run + WINDOW * members - 1) / (WINDOW * members);
	uint64_t pkts = (uint64_t)rounds * WINDOW * (uint64_t)members;
	ring_size = (unsigned)rte_align32pow2((uint32_t)pkts + 64);

	snprintf(prefix, sizeof(prefix), "--file-prefix=inca-bench-%d", getpid());
	/* main lcore 0 on CPU 0 (sleeps while the workers run); worker
	 * lcores 1 (CPU 1) and 2 (CPU 0) */
	char lcores[64];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	snprintf(lcores, sizeof(lcores), workers == 1 ? "0@0,1@%d" : "0@0,1@%d,2@0",
		 ncpu > 1 ? 1 : 0);
	char huge[PATH_MAX + 16];
	snprintf(huge, sizeof(huge), "--huge-dir=%s", huge_dir ? huge_dir : "");
	char *eal[] = { argv[0], "--lcores", lcores, huge_dir ? huge : "--no-huge",
			"--no-pci", prefix, "--log-level=inca-switch,warning",
			/* without hugepages: memory for the mbufs of a run */
			"-m", "3072", NULL };
	if (rte_eal_init(huge_dir ? 7 : 9, eal) < 0) {
		fprintf(stderr, "inca-bench-switch: EAL: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	for (int p = 0; p < 2; p++) {
		for (int q = 0; q < workers; q++) {
			char n[32];
			snprintf(n, sizeof(n), "bench_rx%d_%d", p, q);
			rx_ring[p][q] = rte_ring_create(n, ring_size, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
			snprintf(n, sizeof(n), "bench_tx%d_%d", p, q);
			tx_ring[p][q] = rte_ring_create(n, ring_size, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
			if (!rx_ring[p][q] || !tx_ring[p][q]) {
				fprintf(stderr, "inca-bench-switch: ring: %s\n", rte_strerror(rte_errno));
				return eal_done(1);
			}
		}
		char n[32];
		snprintf(n, sizeof(n), "net_bench%d", p);
		if (rte_eth_from_rings(n, rx_ring[p], (unsigned)workers, tx_ring[p],
				       (unsigned)workers, 0) < 0) {
			fprintf(stderr, "inca-bench-switch: ring port: %s\n", rte_strerror(rte_errno));
			return eal_done(1);
		}
	}
	size_t frame = AGG_FRAME_HDR_LEN + (size_t)elems * dsize + AGG_ICRC_LEN;
	gen_pool = rte_pktmbuf_pool_create("bench_gen", (unsigned)pkts + 4096, 512, 0,
					   (uint16_t)(RTE_PKTMBUF_HEADROOM + frame), 0);
	/* stream-rw's results: mbufs as the switch's pool has them */
	res_pool = rte_pktmbuf_pool_create("bench_res", (unsigned)(pkts / (uint64_t)members) + 1024,
					   256, 0, RTE_MBUF_DEFAULT_BUF_SIZE + AGG_MAX_PAYLOAD, 0);

	cfg.switch_ip = SWITCH_IP;
	cfg.result_dscp = 26;
	cfg.mac_age_s = 300;
	cfg.port_default.queue_bytes = 4 << 20;
	/* with -t 0 every result waits in a tx ring until the run ends */
	cfg.pool_mbufs = (uint32_t)pkts + 4096;
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
	unsigned lcore = rte_get_main_lcore();
	for (int i = 0; i < workers; i++) {
		char n[32];
		struct dp_worker *w = rte_zmalloc(NULL, sizeof(*w), RTE_CACHE_LINE_SIZE);
		if (!w)
			return eal_done(1);
		lcore = rte_get_next_lcore(lcore, 1, 0);
		w->lcore = lcore;
		w->index = (unsigned)i;
		snprintf(n, sizeof(n), "bench_handoff%d", i);
		w->handoff = rte_ring_create(n, DP_HANDOFF_SIZE, 0, RING_F_SC_DEQ);
		if (!w->handoff || lcore >= RTE_MAX_LCORE) {
			fprintf(stderr, "inca-bench-switch: worker %d: no lcore or ring\n", i);
			return eal_done(1);
		}
		sw->workers[i] = w;
	}
	sw->nworkers = (unsigned)workers;
	sw->l2 = dp_l2_create(4096);
	dp_qos_cfg_default(&cfg.qos);
	if (dp_qos_init(sw) || !gen_pool || !res_pool || !sw->l2 || dp_ports_init(sw) ||
	    dp_groups_init(sw)) {
		fprintf(stderr, "inca-bench-switch: set-up failed\n");
		return eal_done(1);
	}
	for (uint16_t p = 0; txd && p < 2; p++)
		for (int q = 0; q < workers; q++) {
			tx_done[p][q].ring = tx_ring[p][q];
			if (!rte_eth_add_tx_callback(sw->port_ids[p], (uint16_t)q, tx_complete,
						     &tx_done[p][q])) {
				fprintf(stderr, "inca-bench-switch: -t: no tx callbacks (%s)\n",
					rte_strerror(rte_errno));
				return eal_done(1);
			}
		}

	printf("# inca-switch on net_ring ports: %d worker%s, rings filled before the clock; "
	       "%d members, %s sum, %zu B payload (%zu B frames), %llu packets per run, "
	       "median of %d runs; ICRC with %s\n", workers, workers > 1 ? "s" : "", members,
	       agg_dtype_name(dtype), (size_t)elems * dsize,
	       frame, (unsigned long long)pkts, runs, agg_crc32_impl_name(agg_crc32_impl_best()));
	printf("%-13s %7s %6s %2s %12s %14s %9s %12s %12s %7s\n", "mode", "members", "elems",
	       "w", "Mpps/core", "elements/s/core", "ns/pkt", "GB/s/core", "Mpps(all)",
	       "out/in");
	static const char *const mode_name[] = { "aggregation", "forward-only", "stream-read",
						 "stream-rw" };
	double med[4] = { 0, 0, 0, 0 };
	for (int mode = 0; mode < 4; mode++) {
		if (!(modes & (1 << (mode < 2 ? mode : 2))))
			continue;
		bool fwd = mode == 1;
		int stream = mode >= 2 ? mode - 1 : 0;
		struct result r[99];
		struct agg_group_stats before, after;

		agg_group_stats_sum(sw->groups[0].agg, &before);
		uint64_t drops0 = switch_drops(sw);
		bad_frames = 0;
		for (int k = 0; k < runs; k++)
			if (run_phase(sw, (uint16_t)members, (uint16_t)elems, rounds, fwd, stream,
				      &r[k])) {
				dp_groups_free(sw);
				dp_ports_close(sw);
				fprintf(stderr, "inca-bench-switch: FAILED: could not run\n");
				return eal_done(1);
			}
		agg_group_stats_sum(sw->groups[0].agg, &after);
		uint64_t drops = switch_drops(sw) - drops0;
		uint64_t in = 0, outp = 0;
		for (int k = 0; k < runs; k++) {
			in += r[k].pkts;
			outp += r[k].out;
		}
		/* did it do the work? */
		uint64_t contrib = after.contributions - before.contributions;
		uint64_t compl = after.completions - before.completions;
		uint64_t gdrops = 0;
		for (int d = 1; d < AGG_E__COUNT; d++)
			gdrops += after.drops[d] - before.drops[d];
		bool ok = drops == 0 && gdrops == 0 && outp == in && bad_frames == 0;
		if (stream)         /* the switch idle; the stream's own count in run_phase */
			ok = ok && contrib == 0;
		else if (!fwd)
			ok = ok && contrib == in && compl == in / (uint64_t)members;
		else
			ok = ok && contrib == 0;
		qsort(r, (size_t)runs, sizeof(r[0]), cmp_core);
		struct result *m = &r[runs / 2];
		med[mode] = m->mpps_core;
		printf("%-13s %7d %6d %2d %12.3f %14.3e %9.1f %12.2f %12.3f %7.3f\n",
		       mode_name[mode], members, elems, stream ? 1 : workers,
		       m->mpps_core, m->mpps_core * 1e6 * elems, m->ns_pkt,
		       m->mpps_core * 1e6 * elems * (double)dsize / 1e9, m->mpps_all,
		       (double)outp / (double)in);
		if (workers > 1)
			printf("#   packets per worker in the median run: %llu / %llu\n",
			       (unsigned long long)m->pkts_w[0], (unsigned long long)m->pkts_w[1]);
		if (!ok) {
			fprintf(stderr, "inca-bench-switch: FAILED (%s): the switch did not do "
				"the work: %llu packets in, %llu out (want %llu); %llu contributions "
				"(want %llu), %llu completions (want %llu), %llu switch drops, "
				"%llu group drops, %llu frames out that do not decode (ICRC)\n",
				mode_name[mode],
				(unsigned long long)in, (unsigned long long)outp,
				(unsigned long long)in, (unsigned long long)contrib,
				fwd || stream ? 0ull : (unsigned long long)in, (unsigned long long)compl,
				fwd || stream ? 0ull : (unsigned long long)(in / (uint64_t)members),
				(unsigned long long)drops, (unsigned long long)gdrops,
				(unsigned long long)bad_frames);
			print_drops(sw);
			failed = 1;
		}
	}
	if ((modes & 3) == 3)
		printf("aggregation / forwarding, per busy core: %.2f\n", med[0] / med[1]);
	if ((modes & 5) == 5)
		printf("aggregation / streaming bound, payload bytes per busy core: %.2f of "
		       "stream-read, %.2f of stream-rw\n", med[0] / med[2], med[0] / med[3]);
	dp_groups_free(sw);
	dp_ports_close(sw);
	if (failed)
		fprintf(stderr, "inca-bench-switch: FAILED: figures above are not valid\n");
	return eal_done(failed);   /* leave nothing behind */
}
