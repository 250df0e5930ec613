/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libinca against a mocked transport: a switch made of the aggregation
 * engine in the same process, with a virtual clock and scripted loss,
 * duplication and reordering. Checks splitting, windowing, retransmission,
 * errors, and the DCQCN and RTO arithmetic with exact values.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <math.h>
#include <sched.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hl_priv.h"
#include "expect.h"

#define NPKT_MAX 4096

struct mock {
	double now;
	struct agg_group *sw;
	/* results waiting to be received (full frames) */
	uint8_t frames[8192][AGG_FRAME_HDR_LEN + 1024 + 8];
	uint16_t lens[8192];
	int nq;
	/* scripted faults, applied to the first attempt of a packet index */
	int drop_contrib_mod, drop_contrib_rem;
	int drop_result_mod, drop_result_rem;
	bool dup_results, reverse, dead;
	uint32_t mute_seq;    /* with mute: this collective is never answered */
	bool mute;
	uint8_t contrib_seen[NPKT_MAX], result_dropped[NPKT_MAX];
	/* window check: per slot, the packet index whose result is pending */
	int64_t slot_open[AGG_MAX_WINDOW];
	int violations;
	unsigned contributions, dropped;
	uint32_t max_seq;     /* the highest collective a contribution was of */
	unsigned bad_sport;   /* contributions whose UDP source port is not their slot's */
	/* receives that found nothing: polls (timeout 0) before the first
	 * sleep (a timeout), and whether a sleep came yet */
	unsigned polls_before_sleep;
	unsigned empty_polls; /* all of them, before the first sleep or after */
	bool slept;
	double recv_us;       /* time a receive with results takes (0: 5 µs) */
	int recv_max;         /* results a receive returns at most (0: 64); then the
				 next finds none (the rest still on their way) */
	bool recv_paused;
};

static struct mock M;

static double mock_now(struct inca_comm *c)
{
	(void)c;
	return M.now;
}

static int mock_open(struct inca_comm *c)
{
	(void)c;
	return 0;
}

static void mock_close(struct inca_comm *c)
{
	(void)c;
}

static int mock_send(struct inca_comm *c, const struct hl_frame *f, unsigned n)
{
	struct agg_result_l2 l2 = { .switch_ip = c->g.switch_ip };

	for (unsigned i = 0; i < n; i++) {
		struct agg_pkt p;
		struct agg_result res;
		uint16_t member;

		/* what the transport was handed must be a valid frame */
		assert_int_equal(agg_decode(f[i].data, f[i].len, true, &p), 0);
		assert_int_equal(f[i].msg_len, AGG_INCA_HLEN + p.payload_len);
		if (p.udp_sport != hl_slot_sport(c->g.group_id, p.hdr.slot))
			M.bad_sport++;
		M.contributions++;
		if (p.hdr.coll_seq > M.max_seq)
			M.max_seq = p.hdr.coll_seq;
		if (M.dead)
			continue;
		uint32_t k = p.hdr.pkt_idx;
		if (M.mute && p.hdr.coll_seq == M.mute_seq)
			continue;
		int64_t *open = &M.slot_open[p.hdr.slot];
		/* self-clocking: a slot carries a new packet only after the
		 * previous one's result went out */
		if (*open >= 0 && *open != (int64_t)k && (p.hdr.flags & AGG_FLAG_RETRANSMIT) == 0)
			M.violations++;
		*open = k;
		if (M.drop_contrib_mod && k < NPKT_MAX && !M.contrib_seen[k] &&
		    (int)(k % (uint32_t)M.drop_contrib_mod) == M.drop_contrib_rem) {
			M.contrib_seen[k] = 1;
			M.dropped++;
			continue;
		}
		if (k < NPKT_MAX)
			M.contrib_seen[k] = 1;
		int v = agg_group_ingest(M.sw, &p, &res, &member);
		if (v != AGG_V_COMPLETE && v != AGG_V_RETRANSMIT)
			continue;
		if (M.drop_result_mod && k < NPKT_MAX && !M.result_dropped[k] &&
		    (int)(k % (uint32_t)M.drop_result_mod) == M.drop_result_rem) {
			M.result_dropped[k] = 1;
			M.dropped++;
			continue;
		}
		for (int copy = 0; copy < (M.dup_results ? 2 : 1); copy++) {
			assert_true(M.nq < 8192);
			int len = agg_result_encode(M.sw, member, &res, &l2, NULL,
						    M.frames[M.nq], sizeof(M.frames[0]));
			assert_true(len > 0);
			M.lens[M.nq++] = (uint16_t)len;
		}
		*open = -1;
	}
	return (int)n;
}

static int mock_recv(struct inca_comm *c, struct hl_rx *rx, unsigned max, int timeout_us)
{
	static uint8_t held[64][AGG_FRAME_HDR_LEN + 1024 + 8];
	unsigned n = 0;

	if (M.recv_paused) {
		M.recv_paused = false;
		M.now += timeout_us > 0 ? timeout_us : 1;
		return 0;
	}
	if (M.nq == 0) {
		if (timeout_us > 0)
			M.slept = true;
		else if (!M.slept)
			M.polls_before_sleep++;
		M.empty_polls += timeout_us <= 0;
		M.now += timeout_us > 0 ? timeout_us : 1;   /* time passes */
		return 0;
	}
	M.now += M.recv_us > 0 ? M.recv_us : 5;   /* a 5 µs round trip */
	while (n < max && M.nq > 0) {
		/* reverse: newest first */
		int i = M.reverse ? M.nq - 1 : 0;
		struct agg_pkt p;

		memcpy(held[n], M.frames[i], M.lens[i]);
		assert_int_equal(agg_decode(held[n], M.lens[i], true, &p), 0);
		rx[n] = (struct hl_rx){ .kind = HL_RX_MSG, .msg = p.payload - AGG_INCA_HLEN,
					.len = AGG_INCA_HLEN + p.payload_len,
					.src_qp = p.src_qp, .len_wire = M.lens[i] };
		if (!M.reverse)
			memmove(&M.frames[0], &M.frames[1], sizeof(M.frames[0]) * (size_t)(M.nq - 1)),
			memmove(&M.lens[0], &M.lens[1], sizeof(M.lens[0]) * (size_t)(M.nq - 1));
		M.nq--;
		n++;
		if (n == 64)
			break;
		if ((int)n == M.recv_max) {
			M.recv_paused = true;
			break;
		}
	}
	(void)c;
	return (int)n;
}

static const struct hl_transport_ops mock_ops = {
	.name = "mock", .open = mock_open, .close = mock_close,
	.send = mock_send, .recv = mock_recv,
};

static struct hl_member one_member[1] = { { .ip = 0x0a000001, .qpn = 17 } };

/* The mock afresh: no faults, every slot free, its switch a group of gc
 * (M.sw NULL if that fails). */
static void mock_reset(const struct agg_group_config *gc)
{
	memset(&M, 0, sizeof(M));
	for (int i = 0; i < AGG_MAX_WINDOW; i++)
		M.slot_open[i] = -1;
	M.sw = agg_group_create(gc, NULL);
}

/* A one-rank group: the switch's result is the rank's own contribution,
 * so the engine's splitting, windowing and recovery are what is tested. */
static inca_comm_t *mk_comm(uint16_t window, uint16_t elems, inca_fallback_t fb, int dcqcn)
{
	struct hl_group_desc g = { .switch_ip = 0x0a0000fe, .group_id = 9,
				   .group_qpn = 256, .qkey = 0xabc, .window = window,
				   .elems_per_pkt = elems, .ring_port = 18515, .nmembers = 1,
				   .members = one_member, .ib_mtu = 1024 };
	struct inca_comm_attr attr = { .rank = 0, .size = 1, .fallback = fb,
				       .timeout_ms = 2000, .switch_timeout_ms = 200,
				       .dcqcn = dcqcn };
	struct agg_member am = { .ip = 0x0a000001, .qpn = 17, .fanin = 1 };
	struct agg_group_config gc = { .group_id = 9, .qpn = 256, .qkey = 0xabc,
				       .nmembers = 1, .window = window,
				       .elems_per_pkt = elems, .members = &am };
	inca_comm_t *c;

	mock_reset(&gc);
	assert_non_null(M.sw);
	assert_int_equal(hl_comm_create(&attr, &g, &mock_ops, NULL, &c), 0);
	c->now_us = mock_now;
	hl_dcqcn_init(&c->dcqcn, &c->dcqcn.p, 0);
	return c;
}

static void done_comm(inca_comm_t *c)
{
	inca_comm_destroy(c);
	agg_group_destroy(M.sw);
	M.sw = NULL;
}

static void test_split_and_window(void **state)
{
	inca_comm_t *c = mk_comm(4, 64, INCA_FALLBACK_OFF, -1);
	static float in[1000], out[1000];
	struct inca_stats st;

	(void)state;
	for (int i = 0; i < 1000; i++)
		in[i] = (float)i * 0.5f - 17;
	assert_int_equal(inca_allreduce(c, in, out, 1000, INCA_FLOAT32, INCA_SUM), 0);
	assert_memory_equal(in, out, sizeof(in));
	inca_comm_stats(c, &st);
	assert_int_equal(st.packets_sent, 16);          /* ceil(1000 / 64) */
	assert_int_equal(st.retransmissions, 0);
	assert_int_equal(st.results, 16);
	assert_int_equal(st.collectives, 1);
	assert_int_equal(M.violations, 0);
	assert_int_equal(M.bad_sport, 0);     /* slot s of group 9: 0xC000 | (9 + s) */
	/* a second call continues the slot/set sequence: 16 more packets */
	assert_int_equal(inca_allreduce(c, in, out, 1, INCA_FLOAT32, INCA_MAX), 0);
	assert_true(out[0] == in[0]);
	inca_comm_stats(c, &st);
	assert_int_equal(st.packets_sent, 17);
	assert_int_equal(c->gcount, 17);
	assert_int_equal(c->next_seq, 3);
	done_comm(c);
}

static void test_every_dtype_in_place(void **state)
{
	static uint8_t buf[8 * 777], orig[8 * 777];

	(void)state;
	for (int dt = 0; dt < AGG_DTYPE_COUNT; dt++) {
		inca_comm_t *c = mk_comm(8, 100, INCA_FALLBACK_AUTO, 0);
		size_t es = agg_dtype_size(dt);
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)(i * 13 + 1) & 0x3f;   /* finite values */
		memcpy(orig, buf, sizeof(buf));
		assert_int_equal(inca_allreduce(c, INCA_IN_PLACE, buf, 777, dt, INCA_MIN), 0);
		assert_memory_equal(buf, orig, 777 * es);
		done_comm(c);
	}
}

static void test_loss_is_retransmitted(void **state)
{
	inca_comm_t *c = mk_comm(8, 32, INCA_FALLBACK_OFF, -1);
	static int32_t in[3200], out[3200];
	struct inca_stats st;

	(void)state;
	for (int i = 0; i < 3200; i++)
		in[i] = i * 7 - 1000;
	M.drop_contrib_mod = 7;    /* packets 3, 10, 17, ... lose their first send */
	M.drop_contrib_rem = 3;
	M.drop_result_mod = 11;    /* packets 5, 16, 27, ... lose their first result */
	M.drop_result_rem = 5;
	assert_int_equal(inca_allreduce(c, in, out, 3200, INCA_INT32, INCA_SUM), 0);
	assert_memory_equal(in, out, sizeof(in));
	inca_comm_stats(c, &st);
	/* 100 packets: 14 lose the contribution, 9 the result, one each */
	assert_int_equal(M.dropped, 14 + 9);
	assert_int_equal(st.packets_sent, 100);
	assert_int_equal(st.retransmissions, 23);
	assert_int_equal(st.results, 100);
	assert_int_equal(M.violations, 0);
	/* the switch answered the 9 lost results from its retained copies */
	assert_int_equal(agg_group_stats(M.sw)->retransmits, 9);
	assert_true(st.rto_us >= 200);
	done_comm(c);
}

static void test_duplicates_and_reordering(void **state)
{
	inca_comm_t *c = mk_comm(16, 16, INCA_FALLBACK_OFF, -1);
	static double in[1600], out[1600];
	struct inca_stats st;

	(void)state;
	for (int i = 0; i < 1600; i++)
		in[i] = 1.0 / (i + 1);
	M.dup_results = true;
	M.reverse = true;
	assert_int_equal(inca_allreduce(c, in, out, 1600, INCA_FLOAT64, INCA_PROD), 0);
	assert_memory_equal(in, out, sizeof(in));
	inca_comm_stats(c, &st);
	assert_int_equal(st.results, 100);
	assert_int_equal(st.duplicates, 100);           /* every copy ignored */
	assert_int_equal(st.retransmissions, 0);
	done_comm(c);
}

static void test_switch_dead(void **state)
{
	float x[10] = { 0 };
	inca_comm_t *c = mk_comm(4, 64, INCA_FALLBACK_OFF, -1);

	(void)state;
	M.dead = true;
	assert_int_equal(inca_allreduce(c, x, x, 10, INCA_FLOAT32, INCA_SUM), INCA_ERR_SWITCH);
	assert_non_null(strstr(inca_comm_errmsg(c), "no result from switch 10.0.0.254 for "
					       "200 ms (0 of 1 packets done)"));
	/* retransmitted with back-off, not a storm: RTO 5 ms doubling per
	 * retry within 200 ms is a handful of sends */
	assert_true(M.contributions >= 3 && M.contributions <= 8);
	done_comm(c);
	/* a one-rank group can always fall back: the ring is the identity */
	c = mk_comm(4, 64, INCA_FALLBACK_AUTO, -1);
	M.dead = true;
	float y[3] = { 1, 2, 3 }, z[3];
	assert_int_equal(inca_allreduce(c, y, z, 3, INCA_FLOAT32, INCA_SUM), 0);
	assert_memory_equal(y, z, sizeof(y));
	struct inca_stats st;
	inca_comm_stats(c, &st);
	assert_int_equal(st.fallbacks, 1);
	/* sticky: the next call goes straight to the ring */
	unsigned before = M.contributions;
	assert_int_equal(inca_allreduce(c, y, z, 3, INCA_FLOAT32, INCA_SUM), 0);
	assert_int_equal(M.contributions, before);
	done_comm(c);
}

/* INCA_SPIN_US=N: a rank waiting for results polls for N µs before it
 * sleeps (each empty poll here is 1 µs of mock time), every such poll
 * counted in spin_polls and its CPU in spin_cpu_us; 0: it sleeps at
 * once; unset or not a number (warned): the default, 50 µs for a rank
 * bound to some of the machine's CPUs, else 0. The switch is dead so that
 * every wait is seen. */
static unsigned polls_for(unsigned window, size_t count, const char *spin)
{
	static float x[1024];
	inca_comm_t *c;

	if (spin)
		setenv("INCA_SPIN_US", spin, 1);
	else
		unsetenv("INCA_SPIN_US");
	c = mk_comm((uint16_t)window, 64, INCA_FALLBACK_OFF, -1);
	M.dead = true;
	assert_int_equal(inca_allreduce(c, x, x, count, INCA_FLOAT32, INCA_SUM), INCA_ERR_SWITCH);
	/* every empty poll while spinning counted, and its CPU */
	struct inca_stats st;
	assert_int_equal(inca_comm_stats(c, &st), INCA_OK);
	assert_int_equal(st.spin_polls, M.empty_polls);
	assert_true(M.empty_polls ? st.spin_cpu_us > 0 : st.spin_cpu_us == 0);
	done_comm(c);
	unsetenv("INCA_SPIN_US");
	return M.polls_before_sleep;
}

static cpu_set_t spin_was;      /* the affinity test_spin_before_sleeping restores */
static bool spin_was_saved;

static int restore_affinity(void **state)
{
	(void)state;
	if (spin_was_saved)
		sched_setaffinity(0, sizeof(spin_was), &spin_was);
	spin_was_saved = false;
	return 0;
}

/* Unset, the default: 50 µs when the rank is bound to some of the
 * machine's CPUs, none when it may run on all of them (this test pins
 * itself to one CPU to see both; restore_affinity undoes it, also when an
 * assert fails). */
static void test_spin_before_sleeping(void **state)
{
	cpu_set_t was, one;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(was), &was), 0);
	spin_was = was;
	spin_was_saved = true;
	bool bound = online >= 2 && CPU_COUNT(&was) < online;
	unsigned dflt = bound ? 50 : 0;

	assert_int_equal(polls_for(4, 10, NULL), dflt);
	assert_int_equal(polls_for(4, 10, "0"), 0);
	assert_int_equal(polls_for(4, 10, "50"), 50);        /* 1 packet */
	assert_int_equal(polls_for(4, 257, "20"), 20);       /* 5 packets, window 4 */
	assert_int_equal(polls_for(4, 10, "junk"), dflt);    /* warned: the default */
	assert_int_equal(polls_for(4, 10, "20us"), dflt);
	assert_int_equal(polls_for(4, 10, "-5"), dflt);
	if (!bound && online >= 2) {
		/* bound to one CPU of its set: the default polls */
		int cpu = 0;
		while (!CPU_ISSET(cpu, &was))
			cpu++;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
		assert_int_equal(polls_for(4, 10, NULL), 50);
		assert_int_equal(polls_for(4, 10, "0"), 0);
	}
}

/* Wake-up coalescing: in a call longer than the window every nap finds
 * three quarters of what was outstanding answered (the mock answers at
 * once, 12 of the window's 16 a receive), so each halves the next, down to
 * 1/16 (never below the shortest nap worth taking); a call whose packets
 * all fit in the window never naps, the pace known and the naps at full
 * length or not. */
static void test_coalescing_naps(void **state)
{
	static float in[256 * 300], out[256 * 300];
	inca_comm_t *c = mk_comm(16, 256, INCA_FALLBACK_OFF, -1);
	/* floats a packet: 248 at IB MTU 1024 */
	size_t e = (c->g.ib_mtu - AGG_INCA_HLEN) / sizeof(float);

	(void)state;
	assert_true(e > 0 && e <= 256);
	/* a batch of 12 results a round trip: a pace, and never all of the
	 * window answered at once (the call goes on) */
	M.recv_us = 1000;
	M.recv_max = 12;
	for (int i = 0; i < 256 * 300; i++)
		in[i] = (float)(i % 1000);
	/* 300 packets through a window of 16 */
	uint64_t g0 = c->gcount;
	assert_int_equal(inca_allreduce(c, in, out, e * 300, INCA_FLOAT32, INCA_SUM), 0);
	assert_memory_equal(in, out, e * 300 * sizeof(float));
	assert_int_equal(c->gcount - g0, 300);
	unsigned long naps = c->stream.naps;
	assert_true(naps >= 4);
	assert_true(c->stream.gap_us > 0);
	assert_true(c->stream.nap_scale == 1.0 / 16);
	/* 16 packets, the window's worth, twice: no nap */
	c->stream.nap_scale = 1;
	for (int k = 0; k < 2; k++) {
		assert_int_equal(inca_allreduce(c, in, out, e * 16, INCA_FLOAT32, INCA_SUM), 0);
		assert_memory_equal(in, out, e * 16 * sizeof(float));
	}
	assert_int_equal(c->gcount - g0, 332);
	assert_int_equal(c->stream.naps, naps);
	done_comm(c);
}

/* The switch dies with six collectives in flight, some of their packets
 * done: all six complete on the ring, in order, in place too. */
static void test_switch_dies_in_flight(void **state)
{
	static int32_t in[6][300], out[6][300], orig[6][300];
	inca_request_t *req[6];
	struct inca_stats st;
	int done = 0;

	(void)state;
	inca_comm_t *c = mk_comm(4, 8, INCA_FALLBACK_AUTO, -1);
	for (int j = 0; j < 6; j++)
		for (int i = 0; i < 300; i++)
			in[j][i] = orig[j][i] = j * 1000 + i - 77;
	memcpy(out, in, sizeof(out));
	assert_int_equal(inca_iallreduce(c, in[0], out[0], 300, INCA_INT32, INCA_SUM, &req[0]), 0);
	assert_int_equal(inca_ireduce_scatter(c, INCA_IN_PLACE, out[1], 300, INCA_INT32,
					      INCA_MAX, &req[1]), 0);
	assert_int_equal(inca_iallgather(c, INCA_IN_PLACE, out[2], 300, INCA_INT32, &req[2]), 0);
	assert_int_equal(inca_ibcast(c, out[3], 300, INCA_INT32, 0, &req[3]), 0);
	assert_int_equal(inca_ireduce(c, INCA_IN_PLACE, out[4], 300, INCA_INT32, INCA_BXOR, 0,
				      &req[4]), 0);
	assert_int_equal(inca_iallreduce(c, INCA_IN_PLACE, out[5], 300, INCA_INT32, INCA_MIN,
					 &req[5]), 0);
	/* a few rounds through the switch, then it goes */
	for (int i = 0; i < 3; i++)
		assert_int_equal(inca_test(req[1], &done), 0);
	assert_int_equal(done, 0);
	inca_comm_stats(c, &st);
	assert_true(st.results > 0);
	M.dead = true;
	for (int j = 5; j >= 0; j--)
		assert_int_equal(inca_wait(req[j]), 0);
	assert_memory_equal(out, orig, sizeof(out));
	inca_comm_stats(c, &st);
	assert_int_equal(st.fallbacks, 6);
	assert_int_equal(st.collectives, 6);
	assert_true(c->switch_failed);
	done_comm(c);

	/* fallback off: all in flight fail; once the switch is back, the next
	 * collectives start afresh in the stream */
	c = mk_comm(4, 8, INCA_FALLBACK_OFF, -1);
	for (int j = 0; j < 3; j++)
		assert_int_equal(inca_iallreduce(c, in[j], out[j], 300, INCA_INT32, INCA_SUM,
						 &req[j]), 0);
	assert_int_equal(inca_test(req[0], &done), 0);
	M.dead = true;
	assert_int_equal(inca_wait(req[2]), INCA_ERR_SWITCH);
	assert_int_equal(inca_wait(req[0]), INCA_ERR_SWITCH);
	assert_int_equal(inca_wait(req[1]), INCA_ERR_SWITCH);
	assert_non_null(strstr(inca_comm_errmsg(c), "(fallback is off)"));
	M.dead = false;
	for (int i = 0; i < AGG_MAX_WINDOW; i++)
		M.slot_open[i] = -1;
	memset(out, 0, sizeof(out));
	assert_int_equal(inca_allgather(c, in[0], out[0], 300, INCA_INT32), 0);
	assert_int_equal(inca_allreduce(c, in[1], out[1], 300, INCA_INT32, INCA_SUM), 0);
	assert_memory_equal(out[0], orig[0], sizeof(out[0]));
	assert_memory_equal(out[1], orig[1], sizeof(out[1]));
	inca_comm_stats(c, &st);
	assert_int_equal(st.collectives, 2);
	assert_int_equal(st.fallbacks, 0);
	done_comm(c);
}

static void test_bad_calls(void **state)
{
	inca_comm_t *c = mk_comm(4, 64, INCA_FALLBACK_OFF, -1);
	float x[4] = { 0 };
	inca_request_t *req;
	int done = 0;

	(void)state;
	assert_int_equal(inca_allreduce(c, x, x, 0, INCA_FLOAT32, INCA_SUM), INCA_ERR_INVAL);
	assert_int_equal(inca_allreduce(c, x, x, 4, INCA_FLOAT32, INCA_BXOR), INCA_ERR_INVAL);
	assert_non_null(strstr(inca_comm_errmsg(c), "fp32 bxor"));
	assert_int_equal(inca_allreduce(c, NULL, x, 4, INCA_FLOAT32, INCA_SUM), INCA_ERR_INVAL);
	assert_int_equal(inca_allreduce(NULL, x, x, 4, INCA_FLOAT32, INCA_SUM), INCA_ERR_INVAL);
	assert_int_equal(inca_bcast(c, x, 4, INCA_FLOAT32, 3), INCA_ERR_INVAL);
	assert_string_equal(inca_comm_errmsg(c), "bcast: root 3 is not a rank (0..0)");
	assert_int_equal(inca_reduce(c, x, x, 4, INCA_FLOAT32, INCA_SUM, -1), INCA_ERR_INVAL);
	assert_string_equal(inca_comm_errmsg(c), "reduce: root -1 is not a rank (0..0)");
	assert_int_equal(inca_reduce(c, x, NULL, 4, INCA_FLOAT32, INCA_SUM, 0), INCA_ERR_INVAL);
	assert_string_equal(inca_comm_errmsg(c), "reduce: the root needs sendbuf (or "
			    "INCA_IN_PLACE) and recvbuf");
	assert_int_equal(inca_reduce_scatter(c, x, x, 0, INCA_INT32, INCA_BXOR), INCA_ERR_INVAL);
	assert_string_equal(inca_comm_errmsg(c), "reduce_scatter: count must be > 0");
	assert_int_equal(inca_allgather(c, NULL, x, 4, INCA_FLOAT32), INCA_ERR_INVAL);
	assert_string_equal(inca_comm_errmsg(c), "allgather: need sendbuf (or INCA_IN_PLACE) "
			    "and recvbuf");
	assert_int_equal(inca_allgather(c, x, x, 4, (inca_dtype_t)9), INCA_ERR_INVAL);
	assert_string_equal(inca_comm_errmsg(c), "allgather: unknown dtype 9");
	assert_int_equal(inca_bcast(c, (void *)INCA_IN_PLACE, 4, INCA_FLOAT32, 0), INCA_ERR_INVAL);
	assert_int_equal(inca_ibcast(c, x, 4, INCA_FLOAT32, 0, NULL), INCA_ERR_INVAL);
	assert_string_equal(inca_comm_errmsg(c), "ibcast: req is NULL");
	/* up to INCA_MAX_INFLIGHT in flight; one more is refused */
	static float outs[INCA_MAX_INFLIGHT][4];
	inca_request_t *reqs[INCA_MAX_INFLIGHT];
	for (int i = 0; i < 4; i++)
		x[i] = (float)i - 1.5f;
	for (int i = 0; i < INCA_MAX_INFLIGHT; i++)
		assert_int_equal(inca_iallreduce(c, x, outs[i], 4, INCA_FLOAT32, INCA_SUM,
						 &reqs[i]), 0);
	assert_int_equal(inca_allreduce(c, x, x, 4, INCA_FLOAT32, INCA_SUM), INCA_ERR_BUSY);
	assert_string_equal(inca_comm_errmsg(c), "allreduce: 64 collectives are in flight on "
			    "this communicator: complete one first (inca_wait, inca_test)");
	assert_int_equal(inca_test(reqs[INCA_MAX_INFLIGHT - 1], &done), 0);
	for (int i = INCA_MAX_INFLIGHT - 1; i >= 0; i--)
		assert_int_equal(inca_wait(reqs[i]), 0);
	for (int i = 0; i < INCA_MAX_INFLIGHT; i++)
		assert_memory_equal(outs[i], x, sizeof(x));
	assert_int_equal(M.violations, 0);
	assert_int_equal(inca_iallreduce(c, x, x, 4, INCA_FLOAT32, INCA_SUM, &req), 0);
	while (!done)
		assert_int_equal(inca_test(req, &done), 0);
	assert_int_equal(inca_barrier(c), 0);
	float b[3] = { -0.0f, 1.5f, -7.0f }, b0[3];
	memcpy(b0, b, sizeof(b));
	assert_int_equal(inca_bcast(c, b, 3, INCA_FLOAT32, 0), 0);
	assert_memory_equal(b, b0, sizeof(b));        /* bit-exact, -0 kept */
	assert_string_equal(inca_strerror(INCA_ERR_SWITCH),
			    "switch unavailable and no fallback (off, or it failed)");
	assert_string_equal(inca_strerror(-99), "unknown libinca error");
	done_comm(c);
}

static void test_group_descriptions(void **state)
{
	struct hl_group_desc g;
	char err[256];

	(void)state;
	assert_int_equal(hl_group_from_json(
		"{\"switch\":\"10.0.0.254\",\"group\":3,\"qpn\":\"0x100\",\"qkey\":\"0xdeadbeef\","
		"\"window\":16,\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17},"
		"{\"ip\":\"10.0.0.2\",\"qpn\":18,\"ring_port\":2000}]}", "g.json", &g, err,
		sizeof(err)), 0);
	assert_int_equal(g.switch_ip, 0x0a0000fe);
	assert_int_equal(g.group_qpn, 256);
	assert_int_equal(g.qkey, 0xdeadbeef);
	assert_int_equal(g.window, 16);
	assert_int_equal(g.elems_per_pkt, 256);       /* default */
	assert_int_equal(g.nmembers, 2);
	assert_int_equal(g.members[0].ring_port, 18515);
	assert_int_equal(g.members[1].ring_port, 2000);
	hl_group_free(&g);

	/* the manager's join answer: the rank's ring members (itself and the
	 * next) of a job larger than one group; the others unknown */
	assert_int_equal(hl_group_from_json(
		"{\"switch\":\"10.0.0.254\",\"group\":3,\"qpn\":256,\"qkey\":1,\"members\":"
		"{\"size\":3000,\"2999\":{\"ip\":\"10.0.11.183\",\"qpn\":17},"
		"\"0\":{\"ip\":\"10.0.0.1\",\"qpn\":18,\"ring_port\":2000}}}", "manager's", &g,
		err, sizeof(err)), 0);
	assert_int_equal(g.nmembers, 3000);
	assert_int_equal(g.members[2999].ip, 0x0a000bb7);
	assert_int_equal(g.members[2999].qpn, 17);
	assert_int_equal(g.members[0].ring_port, 2000);
	assert_int_equal(g.members[1].qpn, 0);
	hl_group_free(&g);
	/* a plan poll's: no members (the rank has them) */
	assert_int_equal(hl_group_from_json(
		"{\"switch\":\"10.0.0.254\",\"group\":3,\"qpn\":256,\"qkey\":1,"
		"\"members\":false}", "manager's", &g, err, sizeof(err)), 0);
	assert_int_equal(g.nmembers, 0);
	hl_group_free(&g);

	/* rails: a group for local rank 1 of each host, the rest the file's */
	assert_int_equal(hl_group_from_json(
		"{\"switch\":\"10.0.0.254\",\"group\":3,\"qpn\":256,\"qkey\":7,\"window\":16,"
		"\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17,\"ranks\":2},"
		"{\"ip\":\"10.0.0.2\",\"qpn\":18,\"ranks\":2}],"
		"\"rails\":[{\"group\":4,\"qpn\":257,\"members\":[{\"ip\":\"10.0.1.1\",\"qpn\":21,"
		"\"ring_port\":18601},{\"ip\":\"10.0.1.2\",\"qpn\":22}]}]}", "g.json", &g, err,
		sizeof(err)), 0);
	assert_int_equal(g.nrails, 1);
	assert_int_equal(g.group_id, 3);
	assert_int_equal(g.rails[0].group_id, 4);
	assert_int_equal(g.rails[0].group_qpn, 257);
	assert_int_equal(g.rails[0].qkey, 7);
	assert_int_equal(g.rails[0].window, 16);
	assert_int_equal(g.rails[0].switch_ip, 0x0a0000fe);
	assert_int_equal(g.rails[0].nmembers, 2);
	assert_int_equal(g.rails[0].members[0].ip, 0x0a000101);
	assert_int_equal(g.rails[0].members[0].ring_port, 18601);
	assert_int_equal(g.rails[0].members[1].qpn, 22);
	assert_int_equal(g.rails[0].members[1].ring_port, 18516);   /* the file's + 1 */
	assert_int_equal(g.rails[0].nrails, 0);
	hl_group_free(&g);
	assert_int_equal(g.nrails, 0);

	/* mtu "auto" (and 0, the manager's auto) leave it to the host */
	for (int i = 0; i < 2; i++) {
		char json[256];
		snprintf(json, sizeof(json), "{\"switch\":\"10.0.0.254\",\"group\":3,\"qpn\":256,"
			 "\"qkey\":1,\"mtu\":%s,\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17}]}",
			 i ? "0" : "\"auto\"");
		assert_int_equal(hl_group_from_json(json, "g.json", &g, err, sizeof(err)), 0);
		assert_int_equal(g.ib_mtu, 0);
		hl_group_free(&g);
	}

	static const struct { const char *json, *msg; } bad[] = {
		{ "{", "g.json: line 1 column 1:" },
		{ "{\"group\":1}", "g.json: switch: expected the switch's IPv4 address" },
		{ "{\"switch\":\"10.0.0.254\",\"group\":1,\"qpn\":256}", "g.json: qkey: missing" },
		{ "{\"switch\":\"10.0.0.254\",\"group\":1,\"qpn\":256,\"qkey\":1,\"window\":0,"
		  "\"members\":[]}", "g.json: window: expected 1..4096" },
		{ "{\"switch\":\"10.0.0.254\",\"group\":1,\"qpn\":256,\"qkey\":1,\"members\":[]}",
		  "g.json: members: expected a list of 1..1024 members" },
		{ "{\"switch\":\"10.0.0.254\",\"group\":1,\"qpn\":256,\"qkey\":1,"
		  "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":1}]}",
		  "g.json: members[0].qpn: expected 2..16777215, got 1" },
		{ "{\"switch\":\"10.0.0.254\",\"group\":1,\"qpn\":256,\"qkey\":1,"
		  "\"members\":{\"size\":2,\"2\":{\"ip\":\"10.0.0.1\",\"qpn\":17}}}",
		  "g.json: members.2: expected a rank below 2" },
		{ "{\"switch\":\"10.0.0.254\",\"group\":1,\"qpn\":256,\"qkey\":1,"
		  "\"members\":{\"0\":{\"ip\":\"10.0.0.1\",\"qpn\":17}}}",
		  "g.json: members.size: missing" },
		{ "{\"switch\":\"10.0.0.254\",\"group\":1,\"qpn\":256,\"qkey\":1,"
		  "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17}],\"rails\":{}}",
		  "g.json: rails: expected a list of 1..255 groups" },
		{ "{\"switch\":\"10.0.0.254\",\"group\":1,\"qpn\":256,\"qkey\":1,"
		  "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17}],\"rails\":[{\"group\":2}]}",
		  "g.json: rails[0]: expected an object with this rail's \"group\", \"qpn\" and "
		  "\"members\"" },
		{ "{\"switch\":\"10.0.0.254\",\"group\":1,\"qpn\":256,\"qkey\":1,"
		  "\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":17}],\"rails\":[{\"group\":2,"
		  "\"qpn\":257,\"members\":[{\"ip\":\"10.0.0.1\",\"qpn\":1}]}]}",
		  "g.json: rails[0]: members[0].qpn: expected 2..16777215, got 1" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(hl_group_from_json(bad[i].json, "g.json", &g, err, sizeof(err)), -1);
		if (!strstr(err, bad[i].msg))
			fail_msg("case %zu: '%s', want '%s'", i, err, bad[i].msg);
	}

	setenv("INCA_SWITCH", "10.0.0.254", 1);
	setenv("INCA_GROUP", "1", 1);
	setenv("INCA_GROUP_QPN", "256", 1);
	setenv("INCA_QKEY", "0x1234abcd", 1);
	setenv("INCA_MEMBERS", "10.0.0.1:17,10.0.0.2:18:4000", 1);
	unsetenv("INCA_WINDOW");
	assert_int_equal(hl_group_from_env(&g, err, sizeof(err)), 0);
	assert_int_equal(g.nmembers, 2);
	assert_int_equal(g.members[1].qpn, 18);
	assert_int_equal(g.members[1].ring_port, 4000);
	assert_int_equal(g.qkey, 0x1234abcd);
	assert_int_equal(g.window, 64);
	hl_group_free(&g);
	setenv("INCA_MTU", "auto", 1);           /* the host decides */
	assert_int_equal(hl_group_from_env(&g, err, sizeof(err)), 0);
	assert_int_equal(g.ib_mtu, 0);
	hl_group_free(&g);
	setenv("INCA_MTU", "2048", 1);
	assert_int_equal(hl_group_from_env(&g, err, sizeof(err)), 0);
	assert_int_equal(g.ib_mtu, 2048);
	hl_group_free(&g);
	setenv("INCA_MTU", "1000", 1);
	assert_int_equal(hl_group_from_env(&g, err, sizeof(err)), -1);
	assert_string_equal(err, "mtu must be an IB MTU: 256, 512, 1024, 2048 or 4096 "
			    "(or \"auto\")");
	unsetenv("INCA_MTU");
	setenv("INCA_MEMBERS", "10.0.0.1", 1);
	assert_int_equal(hl_group_from_env(&g, err, sizeof(err)), -1);
	assert_string_equal(err, "INCA_MEMBERS: member 0: expected ip:qpn[:ring_port]");
	setenv("INCA_QKEY", "zz", 1);
	assert_int_equal(hl_group_from_env(&g, err, sizeof(err)), -1);
	assert_string_equal(err, "INCA_QKEY: expected a number up to 4294967295, got 'zz'");

	/* inca_comm_create reports what is missing */
	unsetenv("INCA_RANK");
	inca_comm_t *c;
	assert_int_equal(inca_comm_create(NULL, &c), INCA_ERR_CONFIG);
	assert_null(c);
	assert_string_equal(inca_last_errmsg(), "INCA_RANK: expected the rank, got '(unset)'");
	struct inca_comm_attr a = { .rank = 0, .size = 2, .transport = "carrier-pigeon" };
	assert_int_equal(inca_comm_create(&a, &c), INCA_ERR_INVAL);
	assert_string_equal(inca_last_errmsg(),
			    "transport 'carrier-pigeon': expected udp, xdp or verbs");
	a.transport = "udp";
	a.size = 3;
	setenv("INCA_QKEY", "1", 1);
	assert_int_equal(inca_comm_create(&a, &c), INCA_ERR_CONFIG);
	assert_string_equal(inca_last_errmsg(), "INCA_MEMBERS: member 0: expected ip:qpn[:ring_port]");
	setenv("INCA_MEMBERS", "10.0.0.1:17,10.0.0.2:18", 1);
	assert_int_equal(inca_comm_create(&a, &c), INCA_ERR_CONFIG);
	assert_string_equal(inca_last_errmsg(), "the group has 2 members but size is 3 (a group "
			    "of hosts: give each member its \"ranks\", or INCA_LAYOUT)");
	setenv("INCA_EPOCH", "-1", 1);
	assert_int_equal(inca_comm_create(&a, &c), INCA_ERR_CONFIG);
	assert_string_equal(inca_last_errmsg(), "INCA_EPOCH: expected 0..4294967295, got '-1'");
	setenv("INCA_EPOCH", "4294967296", 1);
	assert_int_equal(inca_comm_create(&a, &c), INCA_ERR_CONFIG);
	assert_string_equal(inca_last_errmsg(),
			    "INCA_EPOCH: expected 0..4294967295, got '4294967296'");
	unsetenv("INCA_EPOCH");
}

/* ---- several ranks: every collective against the engine ---- */

#define MR_MAX 8
#define MR_QCAP 4096
#define MR_FRAME (AGG_FRAME_HDR_LEN + 1024 + 8)

/* N communicators in one process around one engine: results queue per
 * rank; loss, duplication and reordering from a seeded generator; one
 * virtual clock. The ranks progress in turn (inca_test), never blocking. */
struct mr {
	struct agg_group *sw;
	int n;
	inca_comm_t *comm[MR_MAX];
	uint8_t (*q[MR_MAX])[MR_FRAME];
	uint16_t *qlen[MR_MAX];
	int nq[MR_MAX];
	double now;
	uint64_t rng;
	int loss_pct, dup_pct;
	bool reorder;
	unsigned dropped, duplicated;
	unsigned stale;                /* first copies of a restarted job, dropped */
	uint64_t data_bytes[MR_MAX];   /* element bytes of the results queued */
	double delay_us[MR_MAX];       /* a rank's start after rank 0's (mr_run) */
};

static struct mr R;

static uint32_t mr_rand(void)
{
	R.rng = R.rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(R.rng >> 33);
}

static bool mr_chance(int pct)
{
	return pct && (int)(mr_rand() % 100) < pct;
}

static double mr_now(struct inca_comm *c)
{
	(void)c;
	return R.now;
}

static void mr_queue(int m, const struct agg_result *res)
{
	struct agg_result_l2 l2 = { .switch_ip = 0x0a0000fe };
	int copies = mr_chance(R.loss_pct) ? 0 : mr_chance(R.dup_pct) ? 2 : 1;

	R.dropped += copies == 0;
	R.duplicated += copies == 2;
	for (int k = 0; k < copies; k++) {
		assert_true(R.nq[m] < MR_QCAP);
		/* reordering: anywhere among the last 8 queued */
		int at = R.nq[m];
		if (R.reorder && at > 0)
			at -= (int)(mr_rand() % (unsigned)(at < 8 ? at + 1 : 9));
		memmove(&R.q[m][at + 1], &R.q[m][at], sizeof(R.q[m][0]) * (size_t)(R.nq[m] - at));
		memmove(&R.qlen[m][at + 1], &R.qlen[m][at], sizeof(uint16_t) * (size_t)(R.nq[m] - at));
		int len = agg_result_encode(R.sw, (uint16_t)m, res, &l2, NULL, R.q[m][at], MR_FRAME);
		assert_true(len > 0);
		R.qlen[m][at] = (uint16_t)len;
		R.nq[m]++;
		if (agg_result_has_data_for(res, (uint16_t)m))
			R.data_bytes[m] += res->payload_len;
	}
}

static int mr_send(struct inca_comm *c, const struct hl_frame *f, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct agg_pkt p;
		struct agg_result res;
		uint16_t member;

		assert_int_equal(agg_decode(f[i].data, f[i].len, true, &p), 0);
		assert_int_equal(f[i].msg_len, AGG_INCA_HLEN + p.payload_len);
		assert_int_equal(p.hdr.rank, c->rank);
		if (mr_chance(R.loss_pct)) {
			R.dropped++;
			continue;
		}
		int v = agg_group_ingest(R.sw, &p, &res, &member);
		if (v == -AGG_E_STALE) {      /* a job that restarted the group */
			R.stale++;
			continue;
		}
		assert_true(v >= 0);          /* the host never breaks the protocol */
		if (v == AGG_V_COMPLETE)
			for (int m = 0; m < R.n; m++)
				mr_queue(m, &res);
		else if (v == AGG_V_RETRANSMIT || v == AGG_V_WAIT)
			mr_queue(member, &res);
	}
	return (int)n;
}

static int mr_recv(struct inca_comm *c, struct hl_rx *rx, unsigned max, int timeout_us)
{
	static uint8_t held[64][MR_FRAME];
	int m = c->rank;
	unsigned n = 0;

	if (R.nq[m] == 0) {
		R.now += timeout_us > 0 ? timeout_us : 1;
		return 0;
	}
	R.now += 1;
	while (n < max && n < 64 && R.nq[m] > 0) {
		struct agg_pkt p;

		memcpy(held[n], R.q[m][0], R.qlen[m][0]);
		assert_int_equal(agg_decode(held[n], R.qlen[m][0], true, &p), 0);
		rx[n] = (struct hl_rx){ .kind = HL_RX_MSG, .msg = (const uint8_t *)held[n] +
					(p.payload ? (size_t)(p.payload - held[n]) :
					 (size_t)R.qlen[m][0] - AGG_ICRC_LEN) - AGG_INCA_HLEN,
					.len = AGG_INCA_HLEN + p.payload_len, .src_qp = p.src_qp,
					.len_wire = R.qlen[m][0] };
		R.nq[m]--;
		memmove(&R.q[m][0], &R.q[m][1], sizeof(R.q[m][0]) * (size_t)R.nq[m]);
		memmove(&R.qlen[m][0], &R.qlen[m][1], sizeof(uint16_t) * (size_t)R.nq[m]);
		n++;
	}
	return (int)n;
}

static const struct hl_transport_ops mr_ops = {
	.name = "mock", .open = mock_open, .close = mock_close,
	.send = mr_send, .recv = mr_recv,
};

static void mr_open(const struct hl_group_desc *g);
/* the group the ranks join (mr_setup), for a later job on it (mr_open) */
static struct hl_member mr_hm[MR_MAX];
static struct hl_group_desc mr_g;
static uint32_t mr_epoch;          /* the next job's (mr_open) */

static void mr_setup(int n, uint16_t window, uint16_t elems, uint64_t seed)
{
	struct hl_member hm[MR_MAX];
	struct agg_member am[MR_MAX];

	assert_true(n <= MR_MAX);
	memset(&R, 0, sizeof(R));
	R.n = n;
	R.rng = seed;
	for (int r = 0; r < n; r++) {
		hm[r] = (struct hl_member){ .ip = 0x0a000001 + (uint32_t)r, .qpn = 17 + (uint32_t)r };
		am[r] = (struct agg_member){ .ip = hm[r].ip, .qpn = hm[r].qpn, .fanin = 1 };
	}
	struct agg_group_config gc = { .group_id = 9, .qpn = 256, .qkey = 0xabc,
				       .nmembers = (uint16_t)n, .window = window,
				       .elems_per_pkt = elems, .members = am };
	memcpy(mr_hm, hm, sizeof(hm[0]) * (size_t)n);
	mr_g = (struct hl_group_desc){ .switch_ip = 0x0a0000fe, .group_id = 9, .group_qpn = 256,
				       .qkey = 0xabc, .window = window, .elems_per_pkt = elems,
				       .ring_port = 18515, .nmembers = n, .members = mr_hm,
				       .member_index = -1 };
	R.sw = agg_group_create(&gc, NULL);
	assert_non_null(R.sw);
	mr_open(&mr_g);
}

/* Every rank's communicator on g: a job on the group. */
static void mr_open(const struct hl_group_desc *g)
{
	int n = R.n;

	for (int r = 0; r < n; r++) {
		struct inca_comm_attr attr = { .rank = r, .size = n, .fallback = INCA_FALLBACK_OFF,
					       .timeout_ms = 20000, .switch_timeout_ms = 2000,
					       .dcqcn = -1, .pfc = -1, .epoch = mr_epoch };
		/* a later job keeps the queues: what was left in flight
		 * reaches it, as on a network */
		if (!R.q[r])
			R.q[r] = malloc(sizeof(R.q[r][0]) * MR_QCAP);
		if (!R.qlen[r])
			R.qlen[r] = malloc(sizeof(uint16_t) * MR_QCAP);
		assert_non_null(R.q[r]);
		assert_non_null(R.qlen[r]);
		assert_int_equal(hl_comm_create(&attr, g, &mr_ops, NULL, &R.comm[r]), 0);
		R.comm[r]->now_us = mr_now;
	}
}

static void mr_teardown(void)
{
	for (int r = 0; r < R.n; r++) {
		inca_comm_destroy(R.comm[r]);
		free(R.q[r]);
		free(R.qlen[r]);
		R.q[r] = NULL;
		R.qlen[r] = NULL;
	}
	agg_group_destroy(R.sw);
	R.sw = NULL;
	mr_epoch = 0;
}

/* The job ends; another starts on the same group, with epoch. */
static void mr_next_job(uint32_t epoch)
{
	for (int r = 0; r < R.n; r++)
		inca_comm_destroy(R.comm[r]);
	mr_epoch = epoch;
	mr_open(&mr_g);
}

/* Complete req[r][0..k) on every rank, latest first (k requests per rank
 * started before): each rank progresses in turn, none blocks. */
static void mr_complete(inca_request_t *req[MR_MAX][16], int k)
{
	for (int i = k - 1; i >= 0; i--) {
		bool left = true;
		long turns = 0;
		while (left) {
			left = false;
			for (int r = 0; r < R.n; r++) {
				int done = 0;
				if (!req[r][i])
					continue;
				int rc = inca_test(req[r][i], &done);
				if (rc)
					fail_msg("rank %d request %d: %s: %s", r, i, inca_strerror(rc),
						 inca_comm_errmsg(R.comm[r]));
				if (done)
					req[r][i] = NULL;
				else
					left = true;
			}
			assert_true(++turns < 50000000);
		}
	}
}

struct mr_case {
	enum agg_coll coll;
	int dtype, op, root;
	size_t count;          /* of the buffer, or per shard */
};

static size_t mr_in_count(const struct mr_case *k)
{
	return k->coll == AGG_COLL_REDUCE_SCATTER ? k->count * (size_t)R.n :
	       k->coll == AGG_COLL_ALLGATHER ? k->count : k->count;
}

static size_t mr_out_count(const struct mr_case *k)
{
	return k->coll == AGG_COLL_ALLGATHER ? k->count * (size_t)R.n : k->count;
}

/* Random bytes with signed zeros and NaNs among them: what only a copy keeps. */
static void mr_bytes(uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)mr_rand();
	if (len >= 8) {
		memcpy(b, &(double){ -0.0 }, 8);
		memcpy(b + len - 4, &(uint32_t){ 0x7fc12345 }, 4);     /* a NaN payload */
	}
}

/* Start k on every rank; in[r], out[r] must hold the buffers. */
static int mr_start(const struct mr_case *k, int r, uint8_t *in, uint8_t *out,
		    inca_request_t **req)
{
	inca_comm_t *c = R.comm[r];

	switch (k->coll) {
	case AGG_COLL_ALLREDUCE:
		return inca_iallreduce(c, in, out, k->count, k->dtype, k->op, req);
	case AGG_COLL_REDUCE:
		return inca_ireduce(c, in, out, k->count, k->dtype, k->op, k->root, req);
	case AGG_COLL_REDUCE_SCATTER:
		return inca_ireduce_scatter(c, in, out, k->count, k->dtype, k->op, req);
	case AGG_COLL_ALLGATHER:
		return inca_iallgather(c, in, out, k->count, k->dtype, req);
	case AGG_COLL_BCAST:
		if (r == k->root)
			memcpy(out, in, k->count * agg_dtype_size(k->dtype));
		return inca_ibcast(c, out, k->count, k->dtype, k->root, req);
	default:
		return INCA_ERR_INVAL;
	}
}

/* What rank r must hold after k, from every rank's input. */
static void mr_expect(const struct mr_case *k, int r, uint8_t *const in[MR_MAX], uint8_t *want)
{
	size_t es = agg_dtype_size(k->dtype), n = k->count;

	switch (k->coll) {
	case AGG_COLL_ALLREDUCE:
	case AGG_COLL_REDUCE:
		expected(k->dtype, k->op, R.n, want, n);
		break;
	case AGG_COLL_REDUCE_SCATTER: {
		uint8_t *all = malloc(n * (size_t)R.n * es);
		assert_non_null(all);
		expected(k->dtype, k->op, R.n, all, n * (size_t)R.n);
		memcpy(want, all + (size_t)r * n * es, n * es);
		free(all);
		break;
	}
	case AGG_COLL_ALLGATHER:
		for (int s = 0; s < R.n; s++)
			memcpy(want + (size_t)s * n * es, in[s], n * es);
		break;
	case AGG_COLL_BCAST:
		memcpy(want, in[k->root], n * es);
		break;
	default:
		break;
	}
}

/* Run cases[0..nk) all in flight at once on every rank, complete them
 * latest first, and check every rank's result byte for byte. */
static void mr_run(const struct mr_case *cases, int nk)
{
	static inca_request_t *req[MR_MAX][16];
	uint8_t *in[16][MR_MAX], *out[16][MR_MAX];

	assert_true(nk <= 16);
	for (int j = 0; j < nk; j++) {
		const struct mr_case *k = &cases[j];
		size_t es = agg_dtype_size(k->dtype);
		for (int r = 0; r < R.n; r++) {
			in[j][r] = malloc(mr_in_count(k) * es + 8);
			out[j][r] = malloc(mr_out_count(k) * es + 8);
			assert_non_null(in[j][r]);
			assert_non_null(out[j][r]);
			if (k->coll == AGG_COLL_ALLGATHER || k->coll == AGG_COLL_BCAST)
				mr_bytes(in[j][r], mr_in_count(k) * es);
			else
				fill(k->dtype, k->op, r, in[j][r], mr_in_count(k));
			memset(out[j][r], 0xa5, mr_out_count(k) * es);
		}
		/* ranks that start late (delay_us): the others progress
		 * meanwhile, as on a machine where some ranks took longer to
		 * prepare their input */
		double t0 = R.now;
		for (int r = 0; r < R.n; r++) {
			while (R.now < t0 + R.delay_us[r])
				for (int q = 0; q < r; q++) {
					int done = 0;
					if (req[q][j] && inca_test(req[q][j], &done))
						fail_msg("rank %d: %s", q, inca_comm_errmsg(R.comm[q]));
				}
			int rc = mr_start(k, r, in[j][r], out[j][r], &req[r][j]);
			if (rc)
				fail_msg("start %s: %s", inca_strerror(rc), inca_comm_errmsg(R.comm[r]));
		}
	}
	mr_complete(req, nk);
	for (int j = 0; j < nk; j++) {
		const struct mr_case *k = &cases[j];
		size_t es = agg_dtype_size(k->dtype), len = mr_out_count(k) * es;
		uint8_t *want = malloc(len + 8);
		assert_non_null(want);
		for (int r = 0; r < R.n; r++) {
			if (k->coll == AGG_COLL_REDUCE && r != k->root)
				continue;
			mr_expect(k, r, in[j], want);
			if (memcmp(want, out[j][r], len))
				fail_msg("%s %s %s x %zu root %d: rank %d wrong", hl_coll_name(k->coll),
					 agg_dtype_name(k->dtype), agg_op_name(k->op), k->count,
					 k->root, r);
		}
		free(want);
		for (int r = 0; r < R.n; r++) {
			free(in[j][r]);
			free(out[j][r]);
		}
	}
}

/* Every collective x dtype x op that applies, from 1 element to several
 * windows, 3 ranks, with 3% loss, 3% duplicates and reordering. */
/* mtu auto: the largest IB MTU the route to the switch carries, within
 * the transport's; the loopback route (MTU 65536) carries IB MTU 4096 */
static void test_mtu_auto(void **state)
{
	static struct hl_member lo_member[1] = { { .ip = 0x7f000001, .qpn = 17 } };
	struct hl_group_desc g = { .switch_ip = 0x7f000001, .group_id = 9, .group_qpn = 256,
				   .qkey = 0xabc, .window = 4, .elems_per_pkt = 2048,
				   .ring_port = 18515, .nmembers = 1, .members = lo_member };
	struct inca_comm_attr attr = { .rank = 0, .size = 1, .fallback = INCA_FALLBACK_OFF };
	struct hl_transport_ops small = mock_ops;
	inca_comm_t *c;

	(void)state;
	assert_int_equal(hl_comm_create(&attr, &g, &mock_ops, NULL, &c), 0);
	assert_int_equal(c->g.ib_mtu, 4096);
	inca_comm_destroy(c);
	small.max_ib_mtu = 2048;                   /* e.g. xdp: one UMEM frame */
	assert_int_equal(hl_comm_create(&attr, &g, &small, NULL, &c), 0);
	assert_int_equal(c->g.ib_mtu, 2048);
	inca_comm_destroy(c);
	g.ib_mtu = 1024;                           /* the group's word wins */
	assert_int_equal(hl_comm_create(&attr, &g, &mock_ops, NULL, &c), 0);
	assert_int_equal(c->g.ib_mtu, 1024);
	inca_comm_destroy(c);
	assert_int_equal(hl_slot_sport(1, 0), 0xC001);
	assert_int_equal(hl_slot_sport(0x3fff, 1), 0xC000);
	assert_int_equal(hl_slot_sport(1000, 63), 0xC000 | 1063);
}

static void test_every_collective(void **state)
{
	static const size_t counts[] = { 1, 7, 8, 9, 50, 161 };
	uint64_t seed = 0x1234567ull + (uint64_t)time(NULL);
	unsigned cases = 0;

	(void)state;
	print_message("seed %llu\n", (unsigned long long)seed);
	mr_setup(3, 4, 8, seed);
	R.loss_pct = 3;
	R.dup_pct = 3;
	R.reorder = true;
	for (int coll = 0; coll < AGG_COLL_COUNT; coll++)
		for (int dt = 0; dt < AGG_DTYPE_COUNT; dt++)
			for (int op = 0; op < AGG_OP_COUNT; op++) {
				bool copies = coll == AGG_COLL_ALLGATHER || coll == AGG_COLL_BCAST;
				if (copies ? op != 0 : agg_op_check(dt, op) != 0)
					continue;
				for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
					struct mr_case k = { .coll = coll, .dtype = dt, .op = op,
							     .root = (int)(cases % 3),
							     .count = counts[ci] };
					mr_run(&k, 1);
					cases++;
				}
			}
	/* 30 reductions x 3 collectives + 6 dtypes x 2 copies, 6 counts each */
	assert_int_equal(cases, (30 * 3 + 6 * 2) * 6);
	assert_true(R.dropped > 0 && R.duplicated > 0);
	struct inca_stats st;
	inca_comm_stats(R.comm[0], &st);
	assert_int_equal(st.fallbacks, 0);
	assert_true(st.retransmissions > 0);
	print_message("%u cases, %u packets dropped, %u duplicated; rank 0: %llu sent, "
		      "%llu retransmitted\n", cases, R.dropped, R.duplicated,
		      (unsigned long long)st.packets_sent, (unsigned long long)st.retransmissions);
	mr_teardown();
}

/* 8 all-reduces and 8 reduce-scatters in flight on each of 4 ranks,
 * completed latest first, with loss, duplicates and reordering. */
static void test_many_in_flight(void **state)
{
	uint64_t seed = 0x9e3779b9ull + (uint64_t)time(NULL);
	struct mr_case k[16];

	(void)state;
	print_message("seed %llu\n", (unsigned long long)seed);
	mr_setup(4, 8, 16, seed);
	for (int pass = 0; pass < 2; pass++) {
		R.loss_pct = pass ? 5 : 0;
		R.dup_pct = pass ? 5 : 0;
		R.reorder = pass;
		for (int j = 0; j < 8; j++) {
			k[j] = (struct mr_case){ .coll = AGG_COLL_ALLREDUCE, .dtype = INCA_FLOAT32,
						 .op = j % 2 ? INCA_MAX : INCA_SUM,
						 .count = 1 + (size_t)j * 37 };
			k[8 + j] = (struct mr_case){ .coll = AGG_COLL_REDUCE_SCATTER,
						     .dtype = j % 2 ? INCA_INT64 : INCA_BFLOAT16,
						     .op = INCA_SUM, .count = 3 + (size_t)j * 29 };
		}
		mr_run(k, 16);
	}
	for (int r = 0; r < 4; r++) {
		struct inca_stats st;
		inca_comm_stats(R.comm[r], &st);
		assert_int_equal(st.collectives, 32);
		assert_int_equal(st.fallbacks, 0);
	}
	assert_int_equal(R.comm[0]->stream.nops, 0);
	mr_teardown();
}

/* A second job on a group the switch served before: the switch drops every
 * member's first copy of each set's first use (its keys are newer) and
 * opens the set for the copies sent after all of them (docs/protocol.md
 * 3.2). The restart costs a probe or two, not a probe per slot one after
 * the other (seconds with 16 slots); times are the mock clock's. */
static void test_restart_is_quick(void **state)
{
	/* 4 windows of 8 packets, then 3: the second job's keys are older
	 * than the first's on both sets of every slot (equal keys are another
	 * matter: docs/protocol.md 3.2, "A limit") */
	struct mr_case k = { .coll = AGG_COLL_ALLREDUCE, .dtype = INCA_FLOAT32, .op = INCA_SUM,
			     .count = 16 * 8 * 4 };
	struct agg_group_stats st;
	double t0, fresh, again;

	(void)state;
	mr_setup(4, 8, 16, 7);
	t0 = R.now;
	mr_run(&k, 1);
	fresh = R.now - t0;
	agg_group_stats_sum(R.sw, &st);
	assert_int_equal(st.restarts, 0);
	assert_int_equal(R.stale, 0);
	mr_next_job(0);
	t0 = R.now;
	k.count = 16 * 8 * 3;
	mr_run(&k, 1);
	again = R.now - t0;
	agg_group_stats_sum(R.sw, &st);
	assert_int_equal(st.restarts, 16);                    /* both sets of 8 slots */
	assert_true(R.stale >= 16 * 4);                       /* every member's first copy */
	print_message("fresh %.0f us, restarted %.0f us\n", fresh, again);
	/* the initial RTO is 5 ms: at most a few of them */
	assert_true(again < 25000);
	for (int r = 0; r < R.n; r++) {
		struct inca_stats s;
		inca_comm_stats(R.comm[r], &s);
		assert_int_equal(s.fallbacks, 0);
		assert_true(s.retransmissions >= 16);     /* each first copy, again */
	}
	mr_teardown();
}

/* The same with members that start a job apart (a 64 MiB input takes a
 * second to prepare on a loaded machine), on the hostlib func test's
 * group: 4 ranks, window 16, 256 elements. The early ranks' copies go again
 * on their back-off (the RTO ceiling is a quarter of the 2 s switch
 * timeout); the switch answers each with a WAIT, so a rank 3 s late (past
 * the switch timeout) is no switch failure: with fallback off, one would
 * fail the test. Then the same on a fresh switch, where the early copies
 * wait in open sets instead of a restart's. */
static void test_restart_skewed(void **state)
{
	static const double delay[][4] = { { 0, 450000, 450000, 450000 },
					   { 0, 300, 450000, 460000 },
					   { 0, 120000, 250000, 700000 },
					   { 0, 100, 200, 3000000 } };
	struct mr_case k = { .coll = AGG_COLL_ALLREDUCE, .dtype = INCA_FLOAT32, .op = INCA_SUM,
			     .count = 256 * 16 * 5 + 7 };
	struct agg_group_stats st;
	struct inca_stats s;

	(void)state;
	for (unsigned d = 0; d < sizeof(delay) / sizeof(delay[0]); d++) {
		mr_setup(4, 16, 256, 11 + d);
		mr_run(&k, 1);
		mr_next_job(1);
		memcpy(R.delay_us, delay[d], sizeof(delay[d]));
		double t0 = R.now;
		mr_run(&k, 1);
		agg_group_stats_sum(R.sw, &st);
		assert_int_equal(st.restarts, 32);            /* both sets of 16 slots */
		print_message("start delays %.0f/%.0f/%.0f us: restarted in %.0f us, "
			      "%llu WAITs\n", delay[d][1], delay[d][2], delay[d][3], R.now - t0,
			      (unsigned long long)st.waits);
		/* the last rank's start, then at most the RTO ceiling (a
		 * quarter of the switch timeout: 500 ms) and a little */
		assert_true(R.now - t0 < delay[d][3] + 600000);
		uint64_t waits = 0;
		for (int r = 0; r < R.n; r++) {
			inca_comm_stats(R.comm[r], &s);
			assert_int_equal(s.fallbacks, 0);
			assert_int_equal(s.collectives, 1);
			waits += s.switch_waits;
		}
		/* every WAIT the switch sent arrived (no loss here) */
		assert_int_equal(waits, st.waits);
		if (delay[d][3] > 2000000)
			assert_true(waits > 0);
		mr_teardown();
	}
	/* a fresh switch, rank 2 late by 3 s */
	mr_setup(4, 16, 256, 5);
	R.delay_us[2] = 3000000;
	mr_run(&k, 1);
	agg_group_stats_sum(R.sw, &st);
	assert_int_equal(st.restarts, 0);
	assert_true(st.waits > 0);
	inca_comm_stats(R.comm[0], &s);
	assert_int_equal(s.fallbacks, 0);
	assert_true(s.switch_waits > 0);
	inca_comm_stats(R.comm[2], &s);
	assert_int_equal(s.switch_waits, 0);      /* the late rank waited for no one */
	mr_teardown();
}

/* Two jobs on one static group run the same first collectives with other
 * data. Numbered from 1 both, the second job's keys would equal the ones
 * the sets retain and the switch would answer with the first job's results
 * (docs/protocol.md 3.2); each job's own epoch keeps them apart. */
static void test_epochs_keep_jobs_apart(void **state)
{
	/* allgather of random bytes (mr_bytes: new ones each job), 4 ranks x
	 * 16 elements in one packet each: slots 0..3 of the window of 8 */
	struct mr_case k = { .coll = AGG_COLL_ALLGATHER, .dtype = INCA_INT32, .count = 16 };
	struct agg_group_stats st;

	(void)state;
	mr_epoch = 1;
	mr_setup(4, 8, 16, 11);
	assert_int_equal(R.comm[0]->next_seq, 0x9e3779b1u);
	mr_run(&k, 1);
	mr_next_job(2);
	assert_int_equal(R.comm[3]->next_seq, 0x3c6ef362u);   /* 2 x 0x9e3779b1 */
	mr_run(&k, 1);          /* byte for byte this job's */
	agg_group_stats_sum(R.sw, &st);
	assert_int_equal(st.retransmits, 0);    /* no retained result was sent */
	for (int r = 0; r < R.n; r++) {
		struct inca_stats s;
		inca_comm_stats(R.comm[r], &s);
		assert_int_equal(s.fallbacks, 0);
	}
	mr_teardown();
}

/* inca_epoch_new numbers a job's collectives from the clock (4 µs ticks),
 * so a later job's keys are newer than an earlier one's: the switch serves
 * its first uses at once (step 1 of docs/protocol.md 3.2) instead of
 * freeing each set only once every member sent it (step 2, `restarts`). */
static uint64_t tick_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000) / 4;
}

static void test_epoch_new_follows_the_clock(void **state)
{
	struct mr_case k[16];
	struct agg_group_stats st;

	(void)state;
	for (int i = 0; i < 16; i++)
		k[i] = (struct mr_case){ .coll = AGG_COLL_ALLREDUCE, .dtype = INCA_INT32,
					 .count = 100 };
	uint64_t t0 = tick_now();
	uint32_t e1 = inca_epoch_new();
	uint64_t t1 = tick_now();
	uint32_t key = e1 * 0x9e3779b1u;
	assert_true((uint32_t)(key - (uint32_t)t0) <= (uint32_t)(t1 - t0));
	assert_int_not_equal(e1, 0);

	/* a job, then the next on the same group 10 ms later: 64 packets
	 * of 100 elements over a window of 8, so every set of every slot
	 * is used by both jobs */
	mr_epoch = e1;
	mr_setup(3, 8, 100, 5);
	assert_int_equal(R.comm[0]->next_seq, key);
	for (int i = 0; i < 4; i++)
		mr_run(k, 16);
	struct timespec ten_ms = { 0, 10000000 };
	nanosleep(&ten_ms, NULL);
	uint32_t e2 = inca_epoch_new();
	assert_true((int32_t)(e2 * 0x9e3779b1u - (key + 64)) > 0);    /* newer */
	mr_next_job(e2);
	for (int i = 0; i < 4; i++)
		mr_run(k, 16);
	agg_group_stats_sum(R.sw, &st);
	assert_int_equal(st.restarts, 0);
	assert_int_equal(st.drops[AGG_E_STALE], 0);
	assert_int_equal(st.completions, 128);
	for (int r = 0; r < R.n; r++) {
		struct inca_stats s;
		inca_comm_stats(R.comm[r], &s);
		assert_int_equal(s.retransmissions, 0);
		assert_int_equal(s.fallbacks, 0);
	}
	mr_teardown();
}

/* Reduce-scatter: each rank receives its shard's elements and, for the
 * other shards, headers only (no loss: exact). */
static void test_reduce_scatter_bytes(void **state)
{
	struct mr_case k = { .coll = AGG_COLL_REDUCE_SCATTER, .dtype = INCA_FLOAT32,
			     .op = INCA_SUM, .count = 1000 };

	(void)state;
	mr_setup(4, 16, 64, 1);
	mr_run(&k, 1);
	/* 1000 elements per shard: 16 packets per shard, 64 in all */
	for (int r = 0; r < 4; r++) {
		struct inca_stats st;
		inca_comm_stats(R.comm[r], &st);
		assert_int_equal(st.packets_sent, 64);
		assert_int_equal(st.results, 64);
		assert_int_equal(R.data_bytes[r], 1000 * 4);
		/* 64 frames of headers + ICRC, and one shard of elements */
		assert_int_equal(st.bytes_received, 64 * (AGG_FRAME_HDR_LEN + AGG_ICRC_LEN) + 4000);
		/* we send our elements of every shard */
		assert_int_equal(st.bytes_sent, 64 * (AGG_FRAME_HDR_LEN + AGG_ICRC_LEN) + 16000);
	}
	/* allgather and bcast: each rank sends only its own elements, and
	 * receives only the others' (its own shard's results are
	 * acknowledgements without data) */
	struct mr_case ag = { .coll = AGG_COLL_ALLGATHER, .dtype = INCA_INT32, .count = 640 };
	struct inca_stats before[4], after;
	for (int r = 0; r < 4; r++)
		inca_comm_stats(R.comm[r], &before[r]);
	mr_run(&ag, 1);
	for (int r = 0; r < 4; r++) {
		inca_comm_stats(R.comm[r], &after);
		assert_int_equal(after.bytes_sent - before[r].bytes_sent,
				 40 * (AGG_FRAME_HDR_LEN + AGG_ICRC_LEN) + 640 * 4);
		assert_int_equal(after.bytes_received - before[r].bytes_received,
				 40 * (AGG_FRAME_HDR_LEN + AGG_ICRC_LEN) + 3 * 640 * 4);
	}
	mr_teardown();
}

/* ---- the fallback ring: every collective, exact ---- */

static void fb_bytes(uint8_t *b, size_t len, int r, int j)
{
	uint64_t x = (uint64_t)(r + 1) * 1000003u + (uint64_t)j * 7919u;

	for (size_t i = 0; i < len; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		b[i] = (uint8_t)(x >> 56);
	}
	if (len >= 8) {
		memcpy(b, &(double){ -0.0 }, 8);      /* a sum with zeros loses it */
		memcpy(b + len - 4, &(uint32_t){ 0x7fc12345 }, 4);
	}
}

/* Rank r's element i of a float case: not exact in any order. */
static double fb_float(int dt, int r, size_t i)
{
	uint64_t h = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 7) * 0xbf58476d1ce4e5b9ull;
	float f = (float)((double)(int64_t)((h >> 11) % 2000001 - 1000000) / 997.0);

	if (dt == INCA_FLOAT16)
		return agg_fp16_to_fp32(agg_fp32_to_fp16(f));
	if (dt == INCA_BFLOAT16)
		return agg_bf16_to_fp32(agg_fp32_to_bf16(f));
	return f;
}

static double fb_get(int dt, const uint8_t *b, size_t i)
{
	uint16_t h;
	float f;

	if (dt == INCA_FLOAT32) {
		memcpy(&f, b + 4 * i, 4);
		return f;
	}
	memcpy(&h, b + 2 * i, 2);
	return dt == INCA_FLOAT16 ? agg_fp16_to_fp32(h) : agg_bf16_to_fp32(h);
}

/* Sums of floats on the ring (reduce-scatter and reduce) within the bound
 * of docs/protocol.md section 2: |r - sum| <= ((n-1)u + u_out) sum|x| + eta.
 * Returns the elements outside it. */
static int fb_float_sums(inca_comm_t *c, int n, int r, uint8_t *in, uint8_t *out)
{
	static const int dts[] = { INCA_FLOAT32, INCA_FLOAT16, INCA_BFLOAT16 };
	const size_t cnt = 5001;
	int outside = 0;

	for (int d = 0; d < 3; d++) {
		int dt = dts[d];
		double u_out = dt == INCA_FLOAT16 ? 0x1p-11 : dt == INCA_BFLOAT16 ? 0x1p-8 : 0;
		double eta = dt == INCA_FLOAT16 ? 0x1p-25 : dt == INCA_BFLOAT16 ? 0x1p-134 : 0x1p-150;
		for (int k = 0; k < 2; k++) {
			size_t total = k == 0 ? cnt * (size_t)n : cnt, first = k == 0 ? (size_t)r * cnt : 0;
			for (size_t i = 0; i < total; i++)
				put(dt, in, i, fb_float(dt, r, i), 0);
			int rc = k == 0 ? inca_reduce_scatter(c, in, out, cnt, dt, INCA_SUM)
					: inca_reduce(c, in, out, cnt, dt, INCA_SUM, n - 1);
			if (rc)
				return 1000;
			if (k == 1 && r != n - 1)
				continue;
			for (size_t i = 0; i < cnt; i++) {
				double sum = 0, abs = 0;
				for (int q = 0; q < n; q++) {
					double x = fb_float(dt, q, first + i);
					sum += x;
					abs += x < 0 ? -x : x;
				}
				double err = fb_get(dt, out, i) - sum;
				outside += (err < 0 ? -err : err) > ((n - 1) * 0x1p-24 + u_out) * abs + eta;
			}
		}
	}
	return outside;
}

/* One rank of an n-rank job on the ring over 127.0.0.1 (ring ports
 * port + rank): every collective x dtype, in place and not, and four in
 * flight completed latest first. Returns the number of wrong results,
 * or 100 + what failed. */
static int fb_rank(int n, int r, uint16_t port)
{
	struct hl_member hm[MR_MAX];
	struct hl_group_desc g = { .switch_ip = 0x7f000001, .group_id = 5, .group_qpn = 256,
				   .qkey = 1, .window = 8, .elems_per_pkt = 64, .ring_port = port,
				   .nmembers = n, .members = hm, .member_index = -1 };
	struct inca_comm_attr attr = { .rank = r, .size = n, .fallback = INCA_FALLBACK_FORCE,
				       .timeout_ms = 20000 };
	static const size_t counts[] = { 1, 5, 300001 };
	inca_comm_t *c;
	int wrong = 0, j = 0;

	for (int i = 0; i < n; i++)
		hm[i] = (struct hl_member){ .ip = 0x7f000001, .qpn = 17 + (uint32_t)i,
					    .ring_port = (uint16_t)(port + i) };
	if (hl_comm_create(&attr, &g, &mock_ops, NULL, &c))
		return 100;
	size_t max = 300001 * (size_t)n * 8;
	uint8_t *in = malloc(max), *out = malloc(max), *want = malloc(max), *tmp = malloc(max);
	if (!in || !out || !want || !tmp)
		return 101;
	for (int coll = 0; coll < AGG_COLL_COUNT; coll++)
		for (int dt = 0; dt < AGG_DTYPE_COUNT; dt++)
			for (size_t ci = 0; ci < 3; ci++)
				for (int in_place = 0; in_place < 2; in_place++, j++) {
					size_t cnt = counts[ci], es = agg_dtype_size(dt);
					size_t nn = (size_t)n;
					int op = dt >= INCA_INT32 && dt <= INCA_INT64 ? INCA_BXOR :
						 j % 2 ? INCA_MAX : INCA_SUM, root = j % n, rc = 0;
					const void *sb = in_place ? INCA_IN_PLACE : in;
					switch (coll) {
					case AGG_COLL_ALLREDUCE:
					case AGG_COLL_REDUCE:
						fill(dt, op, r, in, cnt);
						expected(dt, op, n, want, cnt);
						memcpy(out, in, cnt * es);
						if (coll == AGG_COLL_ALLREDUCE)
							rc = inca_allreduce(c, sb, out, cnt, dt, op);
						else
							rc = inca_reduce(c, r == root ? sb : in, out, cnt,
									 dt, op, root);
						if (coll == AGG_COLL_REDUCE && r != root)
							memcpy(want, out, cnt * es);
						break;
					case AGG_COLL_REDUCE_SCATTER:
						fill(dt, op, r, in, cnt * nn);
						expected(dt, op, n, tmp, cnt * nn);
						memcpy(want, tmp + (size_t)r * cnt * es, cnt * es);
						memcpy(out, in, cnt * nn * es);
						rc = inca_reduce_scatter(c, sb, out, cnt, dt, op);
						break;
					case AGG_COLL_ALLGATHER:
						for (int s2 = 0; s2 < n; s2++)
							fb_bytes(want + (size_t)s2 * cnt * es, cnt * es, s2, j);
						memcpy(in, want + (size_t)r * cnt * es, cnt * es);
						memset(out, 0x5a, cnt * nn * es);
						if (in_place)
							memcpy(out + (size_t)r * cnt * es, in, cnt * es);
						rc = inca_allgather(c, sb, out, cnt, dt);
						cnt *= nn;
						break;
					case AGG_COLL_BCAST:
						fb_bytes(want, cnt * es, root, j);
						if (r == root)
							memcpy(out, want, cnt * es);
						else
							memset(out, 0x5a, cnt * es);
						rc = inca_bcast(c, out, cnt, dt, root);
						break;
					}
					if (rc)
						return 102;
					wrong += memcmp(out, want, cnt * es) != 0;
				}
	/* four in flight on the ring, completed latest first */
	inca_request_t *req[4];
	size_t cnt = 1000;
	fill(INCA_INT32, INCA_SUM, r, in, cnt * (size_t)n);
	fb_bytes(tmp, cnt * 4, 0, 99);
	memset(out, 0, max);
	if (inca_iallreduce(c, in, out, cnt, INCA_INT32, INCA_SUM, &req[0]) ||
	    inca_ireduce_scatter(c, in, out + 4 * cnt, cnt, INCA_INT32, INCA_SUM, &req[1]) ||
	    inca_iallgather(c, in, out + 8 * cnt, cnt, INCA_INT32, &req[2]) ||
	    inca_ibcast(c, r == 0 ? tmp : out + 8 * cnt + 4 * cnt * (size_t)n, cnt, INCA_INT32,
			0, &req[3]))
		return 103;
	for (int i = 3; i >= 0; i--)
		if (inca_wait(req[i]))
			return 104;
	expected(INCA_INT32, INCA_SUM, n, want, cnt * (size_t)n);
	wrong += memcmp(out, want, cnt * 4) != 0;
	wrong += memcmp(out + 4 * cnt, want + (size_t)r * cnt * 4, cnt * 4) != 0;
	for (int s2 = 0; s2 < n; s2++) {
		fill(INCA_INT32, INCA_SUM, s2, want, cnt);
		wrong += memcmp(out + 8 * cnt + (size_t)s2 * cnt * 4, want, cnt * 4) != 0;
	}
	if (r != 0)
		wrong += memcmp(out + 8 * cnt + 4 * cnt * (size_t)n, tmp, cnt * 4) != 0;
	wrong += fb_float_sums(c, n, r, in, out);
	struct inca_stats st;
	inca_comm_stats(c, &st);
	if (st.fallbacks != (uint64_t)j + 4 + 6)
		return 105;
	inca_comm_destroy(c);
	free(in);
	free(out);
	free(want);
	free(tmp);
	return wrong;
}

static void test_fallback_every_collective(void **state)
{
	(void)state;
	for (int n = 2; n <= 3; n++) {
		/* below the kernel's ephemeral ports (32768-60999): a connection's
		 * source port there once took a rank's ring port in CI */
		uint16_t port = (uint16_t)(21000 + (getpid() % 1000) * 8 + n * 3);
		pid_t kids[MR_MAX];
		for (int r = 1; r < n; r++) {
			kids[r] = fork();
			assert_true(kids[r] >= 0);
			if (kids[r] == 0) {
				int got = fb_rank(n, r, port);
				_exit(got > 255 ? 255 : got);
			}
		}
		int mine = fb_rank(n, 0, port);
		for (int r = 1; r < n; r++) {
			int status;
			assert_int_equal(waitpid(kids[r], &status, 0), kids[r]);
			assert_true(WIFEXITED(status));
			if (WEXITSTATUS(status))
				fail_msg("%d ranks: rank %d: %d", n, r, WEXITSTATUS(status));
		}
		if (mine)
			fail_msg("%d ranks: rank 0: %d", n, mine);
	}
}

/* One rank of a static group whose switch dies when the ranks are at
 * different collectives: rank r completes its first `ahead` collectives
 * in-network (its own mock switch, one member: the "result" is its own
 * input), then its switch is dead. Four all-reduces (the second in place)
 * and an allgather in flight with the fourth. Every rank falls back at
 * its own collective (each its switch's member 0), and the ranks must
 * agree where the ring starts:
 * those ahead replay what they completed from their kept inputs. Returns
 * the number of wrong results, or 100 + what failed. */
static int skew_rank(int n, int r, int ahead, uint16_t port, bool keep)
{
	struct hl_member hm[MR_MAX];
	struct hl_group_desc g = { .switch_ip = 0x7f000001, .group_id = 9, .group_qpn = 256,
				   .qkey = 0xabc, .window = 4, .elems_per_pkt = 64,
				   .ring_port = port, .nmembers = n, .members = hm,
				   .member_index = 0, .ib_mtu = 1024 };
	struct inca_comm_attr attr = { .rank = r, .size = n, .fallback = INCA_FALLBACK_AUTO,
				       .timeout_ms = 20000, .switch_timeout_ms = 200,
				       .dcqcn = -1 };
	struct agg_member am = { .ip = 0x7f000001, .qpn = 17 + (uint32_t)r, .fanin = 1 };
	struct agg_group_config gc = { .group_id = 9, .qpn = 256, .qkey = 0xabc, .nmembers = 1,
				       .window = 4, .elems_per_pkt = 64, .members = &am };
	enum { CNT = 1000 };
	static int32_t in[5][CNT], out[5][CNT * MR_MAX];
	inca_request_t *req[2];
	struct inca_stats st;
	inca_comm_t *c;
	int wrong = 0, rc = 0;

	for (int i = 0; i < n; i++)
		hm[i] = (struct hl_member){ .ip = 0x7f000001, .qpn = 17 + (uint32_t)i,
					    .ring_port = (uint16_t)(port + i) };
	mock_reset(&gc);
	if (!keep)
		setenv("INCA_KEEP", "0", 1);
	int crc = M.sw ? hl_comm_create(&attr, &g, &mock_ops, NULL, &c) : -1;
	unsetenv("INCA_KEEP");
	if (crc)
		return 100;
	for (int k = 0; k < 5; k++)
		for (int i = 0; i < CNT; i++)
			in[k][i] = out[k][i] = (r + 1) * 100000 + k * 1000 + i;
	for (int k = 0; k < 4 && !rc; k++) {
		M.dead = k >= ahead;
		if (k == 1)
			rc = inca_allreduce(c, INCA_IN_PLACE, out[k], CNT, INCA_INT32, INCA_SUM);
		else if (k < 3)
			rc = inca_allreduce(c, in[k], out[k], CNT, INCA_INT32, INCA_SUM);
		else if (!(rc = inca_iallreduce(c, in[3], out[3], CNT, INCA_INT32, INCA_SUM,
						&req[0])) &&
			 !(rc = inca_iallgather(c, in[4], out[4], CNT, INCA_INT32, &req[1])))
			rc = inca_wait(req[1]) ? 1 : inca_wait(req[0]);
	}
	if (!keep) {
		/* INCA_KEEP=0: the rank ahead cannot replay what the others
		 * need; every rank ends the fallback so, none runs on */
		if (rc != INCA_ERR_SWITCH || !strstr(inca_comm_errmsg(c), "no longer keeps"))
			return 103;
		inca_comm_destroy(c);
		agg_group_destroy(M.sw);
		return 0;
	}
	if (rc)
		return 101;
	/* the ring's results (a collective completed in-network here has
	 * the one-member mock's: its own input) */
	for (int k = 0; k < 4; k++)
		for (int i = 0; i < CNT; i++) {
			int32_t want = k < ahead ? in[k][i] : 0;
			for (int q = 0; q < n && k >= ahead; q++)
				want += (q + 1) * 100000 + k * 1000 + i;
			wrong += out[k][i] != want;
		}
	for (int q = 0; q < n; q++)
		for (int i = 0; i < CNT; i++)
			wrong += out[4][q * CNT + i] != (q + 1) * 100000 + 4 * 1000 + i;
	inca_comm_stats(c, &st);
	if (st.replays != (uint64_t)ahead || st.fallbacks != (uint64_t)(5 - ahead) ||
	    st.kept_inputs != 0)
		return 102;
	inca_comm_destroy(c);
	agg_group_destroy(M.sw);
	return wrong;
}

/* Two ranks, two all-reduces A and B in flight, each rank with its own
 * one-member mock switch. Rank 0's switch never answers A and answers B;
 * rank 0 collects B first (its input kept), then waits for A and falls
 * back. Rank 1 completes A and B in-network and falls back at the next, C
 * (its switch dead). The ring starts at A: rank 0 runs A for real, then
 * must replay B from its kept input while rank 1 replays A and B. The
 * recovery used to stop at A (its search for later collectives skipped
 * the kept inputs once it found A in the stream), rank 0's C met rank 1's
 * replay of B: "the ranks disagree" (the 60-minute soak of 2026-11-27,
 * collected latest first with 4 in flight). Returns the number of wrong
 * results, or 100 + what failed. */
static int kept_above_rank(int r, uint16_t port)
{
	struct hl_member hm[2];
	struct hl_group_desc g = { .switch_ip = 0x7f000001, .group_id = 9, .group_qpn = 256,
				   .qkey = 0xabc, .window = 4, .elems_per_pkt = 64,
				   .ring_port = port, .nmembers = 2, .members = hm,
				   .member_index = 0, .ib_mtu = 1024 };
	struct inca_comm_attr attr = { .rank = r, .size = 2, .fallback = INCA_FALLBACK_AUTO,
				       .timeout_ms = 20000, .switch_timeout_ms = 200,
				       .dcqcn = -1 };
	struct agg_member am = { .ip = 0x7f000001, .qpn = 17 + (uint32_t)r, .fanin = 1 };
	struct agg_group_config gc = { .group_id = 9, .qpn = 256, .qkey = 0xabc, .nmembers = 1,
				       .window = 4, .elems_per_pkt = 64, .members = &am };
	enum { CNT = 64 };    /* one packet each */
	static int32_t in[3][CNT], out[3][CNT];
	inca_request_t *ra, *rb;
	struct inca_stats st;
	inca_comm_t *c;
	int wrong = 0;

	for (int i = 0; i < 2; i++)
		hm[i] = (struct hl_member){ .ip = 0x7f000001, .qpn = 17 + (uint32_t)i,
					    .ring_port = (uint16_t)(port + i) };
	mock_reset(&gc);
	if (!M.sw || hl_comm_create(&attr, &g, &mock_ops, NULL, &c))
		return 100;
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < CNT; i++)
			in[k][i] = out[k][i] = (r + 1) * 100000 + k * 1000 + i;
	M.mute = r == 0;
	M.mute_seq = 1;                   /* A */
	if (inca_iallreduce(c, in[0], out[0], CNT, INCA_INT32, INCA_SUM, &ra) ||
	    inca_iallreduce(c, in[1], out[1], CNT, INCA_INT32, INCA_SUM, &rb))
		return 101;
	if (inca_wait(rb) || inca_wait(ra))
		return 102;
	M.dead = true;
	if (inca_allreduce(c, in[2], out[2], CNT, INCA_INT32, INCA_SUM))
		return 103;
	/* A on the ring at rank 0, in-network (its own input) at rank 1; B
	 * in-network at both; C on the ring */
	for (int i = 0; i < CNT; i++) {
		int32_t ring_a = 100000 + i + 200000 + i, ring_c = 100000 + 2000 + i + 200000 + 2000 + i;
		wrong += out[0][i] != (r == 0 ? ring_a : in[0][i]);
		wrong += out[1][i] != in[1][i];
		wrong += out[2][i] != ring_c;
	}
	inca_comm_stats(c, &st);
	if (st.replays != (r == 0 ? 1u : 2u) || st.fallbacks != (r == 0 ? 2u : 1u)) {
		fprintf(stderr, "rank %d: %llu replays, %llu fallbacks\n", r,
			(unsigned long long)st.replays, (unsigned long long)st.fallbacks);
		return 104;
	}
	inca_comm_destroy(c);
	agg_group_destroy(M.sw);
	return wrong;
}

static void test_fallback_kept_above_unfinished(void **state)
{
	uint16_t port = (uint16_t)(21000 + (getpid() % 1000) * 8 + 7);
	int status;
	pid_t kid;

	(void)state;
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0)
		_exit(kept_above_rank(1, port));
	int mine = kept_above_rank(0, port);
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status))
		fail_msg("rank 1: %d", WEXITSTATUS(status));
	if (mine)
		fail_msg("rank 0: %d", mine);
}

/* The switch of a static group dies with the ranks at different
 * collectives (rank r has completed n - 1 - r of them in-network): no
 * "the ranks disagree on which collective fell back", every result
 * exact (func pytorch's switch-kill case failed so with several buckets
 * in flight). */
static void ranks_apart(bool keep)
{
	for (int n = 2; n <= 3; n++) {
		uint16_t port = (uint16_t)(21000 + (getpid() % 1000) * 8 + 6 + n - (keep ? 0 : 2));
		pid_t kids[MR_MAX];
		for (int r = 1; r < n; r++) {
			kids[r] = fork();
			assert_true(kids[r] >= 0);
			if (kids[r] == 0)
				_exit(skew_rank(n, r, n - 1 - r, port, keep));
		}
		int mine = skew_rank(n, 0, n - 1, port, keep);
		for (int r = 1; r < n; r++) {
			int status;
			assert_int_equal(waitpid(kids[r], &status, 0), kids[r]);
			assert_true(WIFEXITED(status));
			if (WEXITSTATUS(status))
				fail_msg("%d ranks: rank %d: %d", n, r, WEXITSTATUS(status));
		}
		if (mine)
			fail_msg("%d ranks: rank 0: %d", n, mine);
	}
}

static void test_fallback_ranks_apart(void **state)
{
	(void)state;
	ranks_apart(true);
}

/* The same with INCA_KEEP=0: the ranks behind need a collective the rank
 * ahead no longer has the input of. Every rank's call fails with
 * INCA_ERR_SWITCH saying so, none hangs or runs a different collective. */
static void test_fallback_ranks_apart_not_kept(void **state)
{
	(void)state;
	ranks_apart(false);
}

/* A manager's plan set up by hand on c (pl from calloc): a tree,
 * installed, from the next collective; no thread and no manager. */
static void hand_tree_plan(inca_comm_t *c, struct hl_plan *pl)
{
	assert_non_null(pl);
	assert_int_equal(pthread_mutex_init(&pl->lock, NULL), 0);
	pl->tree = true;
	pl->installed = true;
	pl->switch_seq = c->next_seq;
	c->plan = pl;
}

/* The same, and two collectives' inputs (k * 1000 + i); the mock mutes
 * the collective M.mute_seq names. Returns the first one's number. */
static uint32_t hand_plan_two(inca_comm_t *c, struct hl_plan *pl, int32_t in[2][64])
{
	hand_tree_plan(c, pl);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 64; i++)
			in[k][i] = k * 1000 + i;
	M.mute = true;
	return c->next_seq;
}

/* ... and gone with c (the plan was never the manager's: no thread to
 * stop) */
static void drop_hand_plan(inca_comm_t *c)
{
	struct hl_plan *pl = c->plan;

	c->plan = NULL;
	pthread_mutex_destroy(&pl->lock);
	free(pl);
	done_comm(c);
}

/* With a manager's plan, where a rank is (what its plan thread
 * acknowledges) moves when a collective completes, not at the caller's
 * next call. Here A completes while the caller waits for B, started
 * after it: acknowledged then, "first" is B. Before, it stayed at A until
 * the caller collected A, and the manager asked ranks that had pruned A
 * as complete everywhere to replay it (the soak of 2026-11-28: "rank 2
 * no longer holds its input", a job failed for nothing). The plan here
 * is set up by hand: a tree, installed, no thread and no manager. */
static void test_plan_position_at_completion(void **state)
{
	inca_comm_t *c = mk_comm(4, 64, INCA_FALLBACK_OFF, -1);
	static int32_t in[2][64], out[2][64];
	struct hl_plan *pl = calloc(1, sizeof(*pl));
	inca_request_t *ra, *rb;
	int done = 0;

	(void)state;
	uint32_t a = hand_plan_two(c, pl, in);
	M.mute_seq = a + 1;                     /* B: unanswered for now */
	assert_int_equal(inca_iallreduce(c, in[0], out[0], 64, INCA_INT32, INCA_SUM, &ra), 0);
	assert_int_equal(inca_iallreduce(c, in[1], out[1], 64, INCA_INT32, INCA_SUM, &rb), 0);
	assert_int_equal(pl->next, a + 2);
	assert_int_equal(inca_test(rb, &done), 0);
	assert_int_equal(done, 0);
	/* A's result is in (one packet, the one-member switch's), B's is not */
	assert_int_equal(c->stats.collectives, 1);
	assert_int_equal(pl->first, a + 1);
	assert_int_equal(pl->next, a + 2);
	/* B answered (its retransmission), then both collected */
	M.mute = false;
	assert_int_equal(inca_wait(rb), 0);
	assert_int_equal(pl->first, a + 2);
	assert_int_equal(inca_wait(ra), 0);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 64; i++)
			assert_int_equal(out[k][i], k * 1000 + i);
	assert_int_equal(pl->first, a + 2);
	assert_int_equal(pl->next, a + 2);
	drop_hand_plan(c);
}

/* A rank that acknowledged a plan whose old tree failed sends no packet
 * on that tree for the first time until the cut (retransmissions go on):
 * one sent after its acknowledgement could let another rank drop as
 * complete everywhere a kept input this rank acknowledged as not
 * completed (hl_plan.c, hl_plan_hold_dead). The plan by hand, as above. */
static void test_plan_dead_hold(void **state)
{
	inca_comm_t *c = mk_comm(4, 64, INCA_FALLBACK_OFF, -1);
	static int32_t in[2][64], out[2][64];
	struct hl_plan *pl = calloc(1, sizeof(*pl));
	inca_request_t *ra, *rb;
	int done = 0;

	(void)state;
	uint32_t a = hand_plan_two(c, pl, in);
	M.mute_seq = a;                         /* A: sent, unanswered */
	assert_int_equal(inca_iallreduce(c, in[0], out[0], 64, INCA_INT32, INCA_SUM, &ra), 0);
	assert_int_equal(inca_test(ra, &done), 0);
	assert_int_equal(done, 0);
	assert_int_equal(M.max_seq, a);
	unsigned before = M.contributions;
	/* the dead plan acknowledged: B starts (the collectives in flight
	 * then, as the holding caller's), is not sent; A is sent again */
	pl->hold_dead = true;
	assert_int_equal(inca_iallreduce(c, in[1], out[1], 64, INCA_INT32, INCA_SUM, &rb), 0);
	for (int k = 0; k < 10; k++) {     /* 100 ms: within the switch timeout */
		assert_int_equal(inca_test(rb, &done), 0);
		assert_int_equal(done, 0);
		M.now += 10000;                 /* 10 ms: past the RTO */
	}
	assert_int_equal(M.max_seq, a);
	assert_true(M.contributions > before);
	assert_int_equal(c->stats.collectives, 0);
	/* the cut (here: the hold let go) */
	pl->hold_dead = false;
	M.mute = false;
	assert_int_equal(inca_wait(rb), 0);
	assert_int_equal(inca_wait(ra), 0);
	assert_int_equal(M.max_seq, a + 1);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 64; i++)
			assert_int_equal(out[k][i], k * 1000 + i);
	drop_hand_plan(c);
}

/* a clock that moves at every reading: the hold's wait reads nothing else */
static double mock_now_ticking(struct inca_comm *c)
{
	(void)c;
	return M.now += 100;
}

/* An older plan's cut, applied while the acknowledgement of a newer one
 * is still on its way (pl->acked not yet the newer epoch), lets go of no
 * hold: the caller starts nothing until the newer plan's cut (here none
 * comes: the call's deadline). Before, the older cut ended the hold, and
 * the caller started the collective the pending acknowledgement named as
 * next (and, the newer plan dead, sent it on the dead tree). */
static void test_plan_older_cut_keeps_hold(void **state)
{
	inca_comm_t *c = mk_comm(4, 64, INCA_FALLBACK_OFF, -1);
	static int32_t in[64], out[64];
	struct hl_plan *pl = calloc(1, sizeof(*pl));

	(void)state;
	hand_tree_plan(c, pl);
	pl->tree = pl->installed = false;
	pl->switch_seq = 0;
	c->now_us = mock_now_ticking;
	pl->adopted_epoch = 4;
	pl->acked = 5;                      /* plan 5 acknowledged, its cut made */
	pl->missed[0] = (struct hl_plan_msg){ .epoch = 5, .cut = true, .ready = true,
					      .cut_seq = c->next_seq };
	pl->nmissed = 1;
	pl->msg = (struct hl_plan_msg){ .epoch = 6, .dead = true };  /* its tree died */
	pl->holding = true;                 /* plan 6's acknowledgement on its way */
	pl->hold_epoch = 6;
	pl->hold_dead = true;
	pl->news = true;
	assert_int_equal(inca_allreduce(c, in, out, 64, INCA_INT32, INCA_SUM), INCA_ERR_TIMEOUT);
	assert_non_null(strstr(inca_comm_errmsg(c), "no cut for the manager's new plan"));
	assert_int_equal(pl->adopted_epoch, 5);
	assert_true(pl->holding);
	assert_true(pl->hold_dead);
	assert_int_equal(M.contributions, 0);
	drop_hand_plan(c);
}

/* ---- DCQCN and RTO arithmetic ---- */

static void test_dcqcn_rates(void **state)
{
	struct hl_dcqcn_params p;
	struct hl_dcqcn d;

	(void)state;
	hl_dcqcn_params_default(&p, 10);               /* 1250 bytes/µs */
	assert_true(p.line_rate == 1250.0);
	assert_true(p.rate_ai == 5.0);                 /* 40 Mbit/s */
	hl_dcqcn_init(&d, &p, 0);
	/* no congestion: time passes, nothing changes */
	hl_dcqcn_advance(&d, 1000, 1 << 20);
	assert_true(d.rc == 1250.0 && d.rt == 1250.0);
	assert_int_equal(d.t_stage, 0);

	/* first CNP at t=1000: alpha = 1 (decayed 18 times since t=0 first) */
	double a = 1.0;
	for (int i = 0; i < 18; i++)
		a *= 255.0 / 256;
	assert_true(d.alpha == a);
	hl_dcqcn_on_cnp(&d, 1000);
	assert_true(d.rt == 1250.0);
	assert_true(d.rc == 1250.0 * (1 - a / 2));
	double rc1 = 1250.0 * (1 - a / 2);
	double a1 = (255.0 / 256) * a + 1.0 / 256;
	assert_true(d.alpha == a1);
	/* second CNP at once: cut again from the new rate */
	hl_dcqcn_on_cnp(&d, 1000);
	double rc2 = rc1 * (1 - a1 / 2), a2 = (255.0 / 256) * a1 + 1.0 / 256;
	assert_true(d.rt == rc1 && d.rc == rc2 && d.alpha == a2);
	assert_int_equal(d.cnps, 2);

	/* four timer periods: fast recovery halves the gap each time */
	hl_dcqcn_advance(&d, 1000 + 4 * 55, 0);
	double rc = rc2;
	for (int i = 0; i < 4; i++)
		rc = (rc1 + rc) / 2;
	assert_int_equal(d.t_stage, 4);
	assert_true(d.rc == rc && d.rt == rc1);
	/* fifth: still fast recovery (stage 5 is not > F... max(5,0) = 5 is not
	 * < F: additive increase of the target by R_AI) */
	hl_dcqcn_advance(&d, 1000 + 5 * 55, 0);
	assert_true(d.rt == rc1 + 5.0);
	assert_true(d.rc == (rc1 + 5.0 + rc) / 2);
	/* the byte counter counts too: 10 MB sent */
	double before_rc = d.rc, before_rt = d.rt;
	hl_dcqcn_advance(&d, 1000 + 5 * 55, 10u << 20);
	assert_int_equal(d.b_stage, 1);
	assert_true(d.rt == before_rt + 5.0);           /* max(5,1)=5: additive */
	assert_true(d.rc == (before_rt + 5.0 + before_rc) / 2);
	/* both counters past F: hyper increase by (min - F) * R_HAI */
	d.t_stage = 6;
	d.b_stage = 6;
	before_rc = d.rc;
	before_rt = d.rt;
	hl_dcqcn_advance(&d, 1000 + 6 * 55, 0);         /* t_stage 7, b_stage 6 */
	assert_true(d.rt == before_rt + 1 * p.rate_hai);
	assert_true(d.rc == (d.rt + before_rc) / 2);
	/* never above line rate, never below the floor */
	hl_dcqcn_advance(&d, 1e9, 0);
	assert_true(d.rc == 1250.0 && d.rt == 1250.0);
	for (int i = 0; i < 100; i++)
		hl_dcqcn_on_cnp(&d, 1e9);
	assert_true(d.rc == p.min_rate);
	assert_true(hl_dcqcn_gbps(&d) == 0.01);
}

static void test_dcqcn_pacing(void **state)
{
	struct hl_dcqcn_params p;
	struct hl_dcqcn d;
	int sent = 0;

	(void)state;
	hl_dcqcn_params_default(&p, 8);                 /* 1000 bytes/µs */
	hl_dcqcn_init(&d, &p, 0);
	while (hl_dcqcn_may_send(&d, 0, 1000))
		sent++;
	assert_int_equal(sent, 65);                     /* the 64 KiB bucket */
	assert_true(d.tokens == 65536 - 65000);
	assert_false(hl_dcqcn_may_send(&d, 0.4, 1000));  /* 536 + 400 < 1000 */
	assert_true(hl_dcqcn_may_send(&d, 0.5, 1000));   /* 536 + 500 >= 1000 */
}

static void test_rto(void **state)
{
	struct hl_rto r;

	(void)state;
	hl_rto_init(&r, 200, 250000);
	assert_true(r.rto == 5000);
	/* before any sample too: 5 ms is the bound (a rank still starting) */
	assert_false(hl_rto_sample(&r, 600000));
	assert_false(r.have_sample);
	assert_true(r.rto == 5000);
	assert_true(hl_rto_sample(&r, 100));          /* srtt 100, rttvar 50 */
	assert_true(r.srtt == 100 && r.rttvar == 50);
	assert_true(r.rto == 300);                    /* 100 + 4 * 50 */
	hl_rto_sample(&r, 300);                       /* rttvar .75*50+.25*200 */
	assert_true(r.rttvar == 87.5);
	assert_true(r.srtt == 125);
	assert_true(r.rto == 475);
	/* a round trip longer than the RTO waited for another member's
	 * recovery: not taken */
	assert_false(hl_rto_sample(&r, 476));
	assert_true(r.srtt == 125 && r.rttvar == 87.5 && r.rto == 475);
	assert_true(hl_rto_sample(&r, 10));
	assert_true(r.rto >= 200);
	hl_rto_backoff(&r);
	double x = r.rto;
	hl_rto_backoff(&r);
	assert_true(r.rto == 2 * x);
	for (int i = 0; i < 30; i++)
		hl_rto_backoff(&r);
	assert_true(r.rto == 250000);
}

/* PFC on the host: a pause of our priority holds the sends for its
 * quanta at the line rate, XON ends it, other priorities do not matter. */
static void test_pfc_pause(void **state)
{
	inca_comm_t *c = mk_comm(8, 64, INCA_FALLBACK_OFF, -1);
	static float in[1000], out[1000];
	struct agg_pfc pfc = { .enable = 1u << 3, .quanta = { [3] = 65535 } };
	static const uint8_t mac[6] = { 2, 0, 0, 0, 0, 0xfe };
	uint8_t f[AGG_PFC_FRAME_LEN];
	struct inca_stats st;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	/* a made-up interface, not one a real communicator could share */
	assert_int_equal(hl_pfc_attach(c, -1, sv[0]), INCA_OK);
	assert_int_equal(c->pfc_prio, 3);
	assert_true(c->line_bps == 10e9);
	agg_pfc_encode(f, sizeof(f), mac, &pfc);
	assert_int_equal(send(sv[1], f, sizeof(f), 0), (ssize_t)sizeof(f));
	M.now = 1000;
	/* 65535 x 512 bit times at 10 Gbit/s = 3355.392 us */
	assert_true(fabs(hl_pfc_wait_us(c, 1000) - 3355.392) < 1e-6);
	assert_true(fabs(hl_pfc_wait_us(c, 3000) - 1355.392) < 1e-6);
	/* the all-reduce waits the pause out, then completes */
	for (int i = 0; i < 1000; i++)
		in[i] = (float)i;
	assert_int_equal(inca_allreduce(c, in, out, 1000, INCA_FLOAT32, INCA_SUM), 0);
	assert_memory_equal(in, out, sizeof(in));
	inca_comm_stats(c, &st);
	assert_int_equal(st.pfc_frames, 1);
	assert_true(st.pfc_waits >= 3355 / 100);
	assert_true(M.now >= 1000 + 3355.392);
	/* XON: quanta 0 resumes at once */
	assert_int_equal(send(sv[1], f, sizeof(f), 0), (ssize_t)sizeof(f));
	assert_true(hl_pfc_wait_us(c, M.now) > 3000);
	pfc.quanta[3] = 0;
	agg_pfc_encode(f, sizeof(f), mac, &pfc);
	assert_int_equal(send(sv[1], f, sizeof(f), 0), (ssize_t)sizeof(f));
	assert_true(hl_pfc_wait_us(c, M.now) == 0);
	/* another priority's pause does not stop us; malformed frames are counted */
	pfc.enable = 1u << 5;
	pfc.quanta[5] = 65535;
	agg_pfc_encode(f, sizeof(f), mac, &pfc);
	assert_int_equal(send(sv[1], f, sizeof(f), 0), (ssize_t)sizeof(f));
	f[17] = 0;   /* zero class-enable vector */
	assert_int_equal(send(sv[1], f, sizeof(f), 0), (ssize_t)sizeof(f));
	assert_true(hl_pfc_wait_us(c, M.now) == 0);
	inca_comm_stats(c, &st);
	assert_int_equal(st.pfc_frames, 4);
	assert_int_equal(st.pfc_malformed, 1);
	close(sv[1]);
	done_comm(c);   /* sv[0] stays the process's, as a packet socket would */
}

/* Communicators on one interface share its pauses: one packet socket,
 * read by whichever sends next, kept for the next communicator when the
 * last closes (what it buffered meanwhile is dropped, not obeyed). */
static void test_pfc_shared(void **state)
{
	inca_comm_t *a = mk_comm(4, 64, INCA_FALLBACK_OFF, -1);
	/* the mock holds one switch group: b is a bare communicator */
	struct inca_comm bare = { .pfc_prio = 3, .line_bps = 10e9 }, *b = &bare;
	struct agg_pfc pfc = { .enable = 1u << 3, .quanta = { [3] = 65535 } };
	static const uint8_t mac[6] = { 2, 0, 0, 0, 0, 0xfe };
	uint8_t f[AGG_PFC_FRAME_LEN];
	struct inca_stats st;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	assert_int_equal(hl_pfc_attach(b, -2, -1), INCA_ERR_INVAL);   /* nothing to share yet */
	assert_int_equal(hl_pfc_attach(a, -2, sv[0]), INCA_OK);
	assert_int_equal(hl_pfc_attach(b, -2, -1), INCA_OK);
	assert_ptr_equal(a->pfc, b->pfc);
	agg_pfc_encode(f, sizeof(f), mac, &pfc);
	assert_int_equal(send(sv[1], f, sizeof(f), 0), (ssize_t)sizeof(f));
	/* a reads the frame; b, which did not, is held as long */
	assert_true(fabs(hl_pfc_wait_us(a, 1000) - 3355.392) < 1e-6);
	assert_true(fabs(hl_pfc_wait_us(b, 2000) - 2355.392) < 1e-6);
	inca_comm_stats(a, &st);
	assert_int_equal(st.pfc_frames, 1);
	assert_int_equal(b->stats.pfc_frames, 0);
	done_comm(a);
	assert_true(fabs(hl_pfc_wait_us(b, 3000) - 1355.392) < 1e-6);
	hl_pfc_close(b);
	/* no communicator: a pause now is stale by the next one */
	assert_int_equal(send(sv[1], f, sizeof(f), 0), (ssize_t)sizeof(f));
	inca_comm_t *c = mk_comm(4, 64, INCA_FALLBACK_OFF, -1);
	assert_int_equal(hl_pfc_attach(c, -2, -1), INCA_OK);
	assert_true(hl_pfc_wait_us(c, 5000) == 0);
	assert_int_equal(send(sv[1], f, sizeof(f), 0), (ssize_t)sizeof(f));
	assert_true(fabs(hl_pfc_wait_us(c, 5000) - 3355.392) < 1e-6);
	close(sv[1]);
	done_comm(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_and_window),
		cmocka_unit_test(test_every_dtype_in_place),
		cmocka_unit_test(test_loss_is_retransmitted),
		cmocka_unit_test(test_duplicates_and_reordering),
		cmocka_unit_test(test_switch_dead),
		cmocka_unit_test_teardown(test_spin_before_sleeping, restore_affinity),
		cmocka_unit_test(test_coalescing_naps),
		cmocka_unit_test(test_switch_dies_in_flight),
		cmocka_unit_test(test_bad_calls),
		cmocka_unit_test(test_every_collective),
		cmocka_unit_test(test_many_in_flight),
		cmocka_unit_test(test_restart_is_quick),
		cmocka_unit_test(test_restart_skewed),
		cmocka_unit_test(test_epochs_keep_jobs_apart),
		cmocka_unit_test(test_epoch_new_follows_the_clock),
		cmocka_unit_test(test_reduce_scatter_bytes),
		cmocka_unit_test(test_fallback_every_collective),
		cmocka_unit_test(test_fallback_ranks_apart),
		cmocka_unit_test(test_fallback_ranks_apart_not_kept),
		cmocka_unit_test(test_plan_position_at_completion),
		cmocka_unit_test(test_plan_dead_hold),
		cmocka_unit_test(test_plan_older_cut_keeps_hold),
		cmocka_unit_test(test_fallback_kept_above_unfinished),
		cmocka_unit_test(test_group_descriptions),
		cmocka_unit_test(test_mtu_auto),
		cmocka_unit_test(test_dcqcn_rates),
		cmocka_unit_test(test_dcqcn_pacing),
		cmocka_unit_test(test_rto),
		cmocka_unit_test(test_pfc_pause),
		cmocka_unit_test(test_pfc_shared),
	};
	return cmocka_run_group_tests_name("hostlib", tests, NULL, NULL);
}
