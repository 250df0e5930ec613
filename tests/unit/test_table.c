/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Group and slot tables: completion, duplicates, retained results, drop
 * reasons, shadow sets, fan-in, reproducible mode, result frames, a lossy,
 * duplicating, reordering network simulated end to end, and the rooted
 * collectives (who sends and gets data) on one switch and in a tree.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

#define NM 8
#define SWITCH_IP 0x0a0000feu
#define GROUP_QPN 0x000abc
#define QKEY 0x5eed1234u

static struct agg_member members[NM];

/* The suite runs twice: contributions decoded with their ICRC checked, as
 * a host's receiver does, and with it left to agg_group_ingest's reducing
 * pass (agg_decode_lazy), as the switch does. */
static bool lazy_icrc;

static int decode_in(const void *frame, size_t len, struct agg_pkt *pkt)
{
	return lazy_icrc ? agg_decode_lazy(frame, len, pkt) : agg_decode(frame, len, true, pkt);
}

static struct agg_group_config base_cfg(void)
{
	for (int m = 0; m < NM; m++)
		members[m] = (struct agg_member){
			.ip = 0x0a000001u + (uint32_t)m,
			.qpn = 0x100u + (uint32_t)m,
			.mac = { 0x02, 0, 0, 0, 1, (uint8_t)m },
			.fanin = 1,
		};
	return (struct agg_group_config){
		.group_id = 42,
		.qpn = GROUP_QPN,
		.qkey = QKEY,
		.nmembers = NM,
		.window = 4,
		.elems_per_pkt = 256,
		.members = members,
	};
}

static int setup(void **state)
{
	struct agg_group_config cfg = base_cfg();
	const char *why = NULL;

	*state = agg_group_create(&cfg, &why);
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	agg_group_destroy(*state);
	return 0;
}

struct contrib {
	uint8_t frame[AGG_MAX_FRAME_LEN];
	struct agg_pkt pkt;
};

/* Build, encode and decode (ICRC verified) one contribution. */
static void mk(struct contrib *c, uint16_t member, uint8_t dtype, uint8_t op,
	       uint16_t count, uint16_t slot, bool set, uint32_t seq,
	       uint32_t idx, const void *payload)
{
	struct agg_frame_spec s = {
		.dst_mac = { 0x02, 0, 0, 0, 0, 0xfe },
		.src_mac = { 0x02, 0, 0, 0, 1, (uint8_t)member },
		.src_ip = members[member % NM].ip,
		.dst_ip = SWITCH_IP,
		.dscp = 26,
		.dest_qp = GROUP_QPN,
		.qkey = QKEY,
		.src_qp = members[member % NM].qpn,
		.hdr = {
			.version = AGG_VERSION,
			.type = AGG_TYPE_CONTRIB,
			.dtype = dtype,
			.op = op,
			.flags = set ? AGG_FLAG_SHADOW_SET : 0,
			.count = count,
			.group_id = 42,
			.rank = member,
			.fanin = 1,
			.slot = slot,
			.coll_seq = seq,
			.pkt_idx = idx,
		},
	};
	int len = agg_encode(c->frame, sizeof(c->frame), &s, payload);
	assert_true(len > 0);
	assert_int_equal(decode_in(c->frame, (size_t)len, &c->pkt), 0);
}

static int32_t ival(int m, int i) { return m * 1000 + i - 77; }

static void contribute_all_int32(struct agg_group *g, uint16_t slot, bool set,
				 uint32_t seq, uint32_t idx, uint16_t count,
				 struct agg_result *res)
{
	int32_t v[256];
	struct contrib c;
	uint16_t who;

	for (int m = 0; m < NM; m++) {
		for (int i = 0; i < count; i++)
			v[i] = ival(m, i);
		mk(&c, (uint16_t)m, AGG_DTYPE_INT32, AGG_OP_SUM, count, slot, set,
		   seq, idx, v);
		int rc = agg_group_ingest(g, &c.pkt, res, &who);
		assert_int_equal(rc, m == NM - 1 ? AGG_V_COMPLETE : AGG_V_ACCEPTED);
		assert_int_equal(who, m);
	}
}

static void check_int32_sum(const struct agg_result *res, uint16_t count)
{
	for (int i = 0; i < count; i++) {
		int32_t want = 0, got;
		for (int m = 0; m < NM; m++)
			want += ival(m, i);
		memcpy(&got, res->payload + 4 * i, 4);
		assert_int_equal(got, want);
	}
}

static void test_complete(void **state)
{
	struct agg_group *g = *state;
	struct agg_result res;
	const struct agg_group_stats *st = agg_group_stats(g);

	contribute_all_int32(g, 2, false, 1, 2, 200, &res);
	check_int32_sum(&res, 200);
	assert_int_equal(res.payload_len, 800);
	assert_int_equal(res.pad, 0);
	assert_int_equal(res.hdr.type, AGG_TYPE_RESULT);
	assert_int_equal(res.hdr.fanin, NM);
	assert_int_equal(res.hdr.slot, 2);
	assert_int_equal(res.hdr.coll_seq, 1);
	assert_int_equal(res.hdr.pkt_idx, 2);
	assert_int_equal(res.hdr.flags, 0);
	assert_int_equal(res.payload_crc, agg_crc32(0, res.payload, 800));
	assert_int_equal(st->contributions, NM);
	assert_int_equal(st->completions, 1);
	assert_int_equal(st->duplicates, 0);
}

static void test_duplicate_and_retransmit(void **state)
{
	struct agg_group *g = *state;
	const struct agg_group_stats *st = agg_group_stats(g);
	struct agg_result res, res2;
	struct contrib c;
	int32_t v[4] = { 1, 2, 3, 4 };

	mk(&c, 3, AGG_DTYPE_INT32, AGG_OP_SUM, 4, 0, true, 5, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_ACCEPTED);
	/* the same contribution again, e.g. a retransmission that crossed
	 * the original: counted once */
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_DUPLICATE);
	assert_int_equal(st->duplicates, 1);
	assert_int_equal(st->waits, 0);
	/* a retransmission (the member timed out waiting for the others):
	 * a WAIT to it, its own key, no elements, fanin = members heard */
	c.pkt.hdr.flags |= AGG_FLAG_RETRANSMIT;
	uint16_t who = 0;
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, &who), AGG_V_WAIT);
	assert_int_equal(who, 3);
	assert_int_equal(st->duplicates, 2);
	assert_int_equal(st->waits, 1);
	assert_int_equal(res.hdr.type, AGG_TYPE_WAIT);
	assert_int_equal(res.hdr.flags, AGG_FLAG_SHADOW_SET | AGG_FLAG_NO_DATA);
	assert_int_equal(res.hdr.fanin, 1);
	assert_int_equal(res.hdr.count, 4);
	assert_int_equal(res.hdr.slot, 0);
	assert_int_equal(res.hdr.coll_seq, 5);
	assert_int_equal(res.hdr.pkt_idx, 0);
	assert_int_equal(res.payload_len, 0);
	assert_false(agg_result_has_data_for(&res, 3));
	/* on the wire: headers alone, ICRC verified, for member 3 */
	uint8_t wf[AGG_MAX_FRAME_LEN];
	struct agg_result_l2 l2 = { .switch_ip = SWITCH_IP };
	int wl = agg_result_encode(g, 3, &res, &l2, NULL, wf, sizeof(wf));
	assert_int_equal(wl, AGG_FRAME_HDR_LEN + AGG_ICRC_LEN);
	struct agg_pkt wp;
	assert_int_equal(decode_in(wf, (size_t)wl, &wp), 0);
	assert_int_equal(wp.hdr.type, AGG_TYPE_WAIT);
	assert_int_equal(wp.hdr.rank, 3);
	assert_int_equal(wp.hdr.fanin, 1);
	assert_int_equal(wp.payload_len, 0);
	assert_int_equal(wp.dest_qp, members[3].qpn);
	for (uint16_t m = 0; m < NM; m++) {
		if (m == 3)
			continue;
		mk(&c, m, AGG_DTYPE_INT32, AGG_OP_SUM, 4, 0, true, 5, 0, v);
		agg_group_ingest(g, &c.pkt, &res, NULL);
	}
	int32_t got;
	memcpy(&got, res.payload + 12, 4);
	assert_int_equal(got, 4 * NM);          /* not 4 * (NM + 1) */
	/* member 6 lost its result and resends: retained result, to it only */
	mk(&c, 6, AGG_DTYPE_INT32, AGG_OP_SUM, 4, 0, true, 5, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res2, NULL), AGG_V_RETRANSMIT);
	assert_int_equal(st->retransmits, 1);
	assert_ptr_equal(res2.payload, res.payload);
	assert_memory_equal(&res2.hdr, &res.hdr, sizeof(res.hdr));
	assert_int_equal(st->completions, 1);
}

/* The switch's side of the results the tests encode. */
static const struct agg_result_l2 switch_l2 = {
	.src_mac = { 0x02, 0, 0, 0, 0, 0xfe },
	.switch_ip = SWITCH_IP,
	.dscp = 26,
};

static void test_result_frames(void **state)
{
	struct agg_group *g = *state;
	struct agg_result res;
	struct agg_result_l2 l2 = switch_l2;
	uint8_t f[AGG_MAX_FRAME_LEN];
	struct agg_pkt pkt;

	/* 37 fp16 elements: 74 bytes, PadCnt 2 */
	uint16_t h[37];
	struct contrib c;
	for (int m = 0; m < NM; m++) {
		for (int i = 0; i < 37; i++)
			h[i] = agg_fp32_to_fp16((float)(m + i));
		mk(&c, (uint16_t)m, AGG_DTYPE_FP16, AGG_OP_SUM, 37, 1, false, 9,
		   33, h);
		agg_group_ingest(g, &c.pkt, &res, NULL);
	}
	assert_int_equal(res.pad, 2);
	for (int round = 0; round < 2; round++)
		for (uint16_t m = 0; m < NM; m++) {
			int len = agg_result_encode(g, m, &res, &l2, NULL, f, sizeof(f));
			assert_int_equal(len, AGG_FRAME_HDR_LEN + 74 + 2 + 4);
			/* the combined ICRC equals a full recomputation */
			assert_int_equal(decode_in(f, (size_t)len, &pkt), 0);
			assert_int_equal(agg_icrc_load(f + len - 4),
					 agg_icrc_ipv4(f + 14, (size_t)len - 14));
			assert_memory_equal(f, members[m].mac, 6);
			assert_memory_equal(f + 6, l2.src_mac, 6);
			assert_int_equal(pkt.src_ip, SWITCH_IP);
			assert_int_equal(pkt.dst_ip, members[m].ip);
			assert_int_equal(pkt.dscp, 26);
			assert_int_equal(pkt.opcode, AGG_OP_UD_SEND_ONLY);
			assert_int_equal(pkt.dest_qp, members[m].qpn);
			assert_int_equal(pkt.src_qp, GROUP_QPN);
			assert_int_equal(pkt.qkey, QKEY);
			assert_int_equal(pkt.psn, round);     /* per member */
			assert_int_equal(pkt.hdr.type, AGG_TYPE_RESULT);
			assert_int_equal(pkt.hdr.rank, m);
			assert_int_equal(pkt.hdr.fanin, NM);
			assert_int_equal(pkt.hdr.count, 37);
			assert_int_equal(pkt.hdr.coll_seq, 9);
			assert_int_equal(pkt.hdr.pkt_idx, 33);
			assert_int_equal(pkt.hdr.slot, 1);
			for (int i = 0; i < 37; i++) {
				uint16_t v;
				memcpy(&v, pkt.payload + 2 * i, 2);
				/* sum over m of (m + i) = 28 + 8i */
				assert_true(agg_fp16_to_fp32(v) == (float)(28 + 8 * i));
			}
		}
	uint8_t mac[6] = { 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff };
	assert_true(agg_result_encode(g, 0, &res, &l2, mac, f, sizeof(f)) > 0);
	assert_memory_equal(f, mac, 6);
	assert_int_equal(agg_result_encode(g, 0, &res, &l2, NULL, f, 60),
			 -AGG_E_NOSPACE);
	assert_int_equal(agg_result_encode(g, NM, &res, &l2, NULL, f, sizeof(f)),
			 -AGG_E_INVAL);
}

/* The two-piece result (agg_result_tmpl_init, agg_result_encode_hdr):
 * each member's headers from the set's template, then one body and ICRC
 * for all. Every member's frame, with and without a VLAN tag, carries the
 * template's ICRC, verifies, and differs from agg_result_encode's only in
 * its PSN (the next), the balance in the INCA header's last 4 bytes and the
 * ICRC that balance leads to. */
static void test_result_shared_body(void **state)
{
	struct agg_group *g = *state;
	struct agg_result res;
	struct agg_result_l2 l2 = switch_l2;
	uint8_t f[AGG_MAX_FRAME_LEN], h[AGG_MAX_FRAME_LEN];
	struct agg_pkt pkt, ref;
	struct contrib c;
	float v[251];

	test_seed_init("result_shared_body");
	/* 251 fp32 elements: 1004 bytes, no pad; then 37 fp16: 74 + 2 pad */
	for (int round = 0; round < 2; round++) {
		uint8_t dtype = round ? AGG_DTYPE_FP16 : AGG_DTYPE_FP32;
		uint16_t count = round ? 37 : 251;
		for (int m = 0; m < NM; m++) {
			for (int i = 0; i < count; i++) {
				float x = (float)(m * 3 + i);
				uint16_t x16 = agg_fp32_to_fp16(x);
				if (round)
					memcpy((uint8_t *)v + 2 * i, &x16, 2);
				else
					v[i] = x;
			}
			mk(&c, (uint16_t)m, dtype, AGG_OP_SUM, count, (uint16_t)round, false,
			   20, (uint32_t)round, v);
			assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL),
					 m == NM - 1 ? AGG_V_COMPLETE : AGG_V_ACCEPTED);
		}
		assert_int_equal(res.pad, round ? 2 : 0);
		size_t body = res.payload_len + res.pad;
		struct agg_result_tmpl t;
		assert_int_equal(agg_result_tmpl_init(g, &res, &l2, &t), 0);
		uint32_t icrc = t.icrc;
		/* PSNs past 16 bits: every PSN byte in the balance */
		for (int k = 0; k < 70000 * round; k++)
			assert_true(agg_result_encode(g, 5, &res, &l2, NULL, f, sizeof(f)) > 0);
		for (uint16_t m = 0; m < NM; m++) {
			l2.has_vlan = m & 1;
			l2.vlan_tci = (uint16_t)(0x6000 | m);
			int len = agg_result_encode(g, m, &res, &l2, NULL, f, sizeof(f));
			assert_true(len > 0);
			assert_int_equal(decode_in(f, (size_t)len, &ref), 0);
			int hl = agg_result_encode_hdr(g, m, &t, &l2, NULL, h, sizeof(h));
			assert_int_equal(hl, len - (int)body - 4);
			memcpy(h + hl, res.payload, body);
			agg_icrc_store(h + hl + body, icrc);
			size_t ip = 14 + (l2.has_vlan ? 4 : 0);
			assert_int_equal(agg_icrc_ipv4(h + ip, (size_t)len - ip), icrc);
			assert_int_equal(decode_in(h, (size_t)len, &pkt), 0);
			assert_int_equal(pkt.psn, ref.psn + 1);
			assert_memory_equal(&pkt.hdr, &ref.hdr, sizeof(pkt.hdr));
			/* the rest byte for byte: up to the PSN, from it to the
			 * balance, the body */
			size_t psn = ip + 20 + 8 + 9, bal = (size_t)hl - 4;
			assert_memory_equal(h, f, psn);
			assert_memory_equal(h + psn + 3, f + psn + 3, bal - psn - 3);
			assert_memory_equal(h + hl, f + hl, body);
			uint32_t zero = 0;
			assert_memory_equal(f + bal, &zero, 4);
		}
	}
	/* a member that gets no elements has no shared body; nor a result
	 * without elements */
	struct agg_result no = res;
	struct agg_result_tmpl t;
	no.data_to_all = false;
	no.owner = 1;
	assert_int_equal(agg_result_tmpl_init(g, &no, &l2, &t), 0);
	assert_int_equal(agg_result_encode_hdr(g, 0, &t, &l2, NULL, h, sizeof(h)),
			 -AGG_E_INVAL);
	assert_true(agg_result_encode_hdr(g, 1, &t, &l2, NULL, h, sizeof(h)) > 0);
	assert_int_equal(agg_result_encode_hdr(g, NM, &t, &l2, NULL, h, sizeof(h)),
			 -AGG_E_INVAL);
	assert_int_equal(agg_result_encode_hdr(g, 1, &t, &l2, NULL, h, 60), -AGG_E_NOSPACE);
	no.payload_len = 0;
	no.pad = 0;
	assert_int_equal(agg_result_tmpl_init(g, &no, &l2, &t), -AGG_E_INVAL);
}

static void test_drop_reasons(void **state)
{
	struct agg_group *g = *state;
	const struct agg_group_stats *st = agg_group_stats(g);
	struct agg_result res;
	struct contrib c;
	int32_t v[300] = { 0 };

	static const struct {
		const char *what;
		int expect;
	} cases[] = {
		{ "group id", -AGG_E_GROUP },
		{ "group qpn", -AGG_E_GROUP },
		{ "qkey", -AGG_E_QKEY },
		{ "result type", -AGG_E_TYPE },
		{ "rank out of range", -AGG_E_NOT_MEMBER },
		{ "wrong source ip", -AGG_E_NOT_MEMBER },
		{ "wrong source qpn", -AGG_E_NOT_MEMBER },
		{ "fanin", -AGG_E_FANIN },
		{ "slot", -AGG_E_SLOT },
		{ "too long", -AGG_E_TOO_LONG },
		{ "cnp", -AGG_E_GROUP },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		mk(&c, 1, AGG_DTYPE_INT32, AGG_OP_SUM, 4, 0, false, 1, 0, v);
		switch (i) {
		case 0: c.pkt.hdr.group_id = 43; break;
		case 1: c.pkt.dest_qp = GROUP_QPN + 1; break;
		case 2: c.pkt.qkey ^= 1; break;
		case 3: c.pkt.hdr.type = AGG_TYPE_RESULT; break;
		case 4: c.pkt.hdr.rank = NM; break;
		case 5: c.pkt.src_ip = members[2].ip; break;
		case 6: c.pkt.src_qp = members[2].qpn; break;
		case 7: c.pkt.hdr.fanin = 2; break;
		case 8: c.pkt.hdr.slot = 4; break;
		case 9: mk(&c, 1, AGG_DTYPE_INT32, AGG_OP_SUM, 257, 0, false, 1, 0, v); break;
		case 10: c.pkt.kind = AGG_PKT_CNP; break;
		}
		int rc = agg_group_ingest(g, &c.pkt, &res, NULL);
		if (rc != cases[i].expect)
			fail_msg("%s: got %s, want %s", cases[i].what,
				 agg_errname(rc), agg_errname(cases[i].expect));
	}
	assert_int_equal(st->drops[AGG_E_GROUP], 3);
	assert_int_equal(st->drops[AGG_E_QKEY], 1);
	assert_int_equal(st->drops[AGG_E_TYPE], 1);
	assert_int_equal(st->drops[AGG_E_NOT_MEMBER], 3);
	assert_int_equal(st->drops[AGG_E_FANIN], 1);
	assert_int_equal(st->drops[AGG_E_SLOT], 1);
	assert_int_equal(st->drops[AGG_E_TOO_LONG], 1);
	assert_int_equal(st->contributions, 0);

	/* dtype, op or count differing inside one use of a set */
	mk(&c, 1, AGG_DTYPE_INT32, AGG_OP_SUM, 4, 3, false, 1, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_ACCEPTED);
	mk(&c, 2, AGG_DTYPE_INT32, AGG_OP_MAX, 4, 3, false, 1, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_MISMATCH);
	mk(&c, 2, AGG_DTYPE_FP32, AGG_OP_SUM, 4, 3, false, 1, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_MISMATCH);
	mk(&c, 2, AGG_DTYPE_INT32, AGG_OP_SUM, 5, 3, false, 1, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_MISMATCH);
	assert_int_equal(st->drops[AGG_E_MISMATCH], 3);
	assert_int_equal(st->contributions, 1);
}

static void test_dtype_mask(void **state)
{
	struct agg_group_config cfg = base_cfg();
	struct agg_group *g;
	struct agg_result res;
	struct contrib c;
	float v[4] = { 0 };

	(void)state;
	cfg.dtype_mask = 1u << AGG_DTYPE_INT32;
	g = agg_group_create(&cfg, NULL);
	assert_non_null(g);
	mk(&c, 0, AGG_DTYPE_FP32, AGG_OP_SUM, 4, 0, false, 1, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_DTYPE);
	assert_int_equal(agg_group_stats(g)->drops[AGG_E_DTYPE], 1);
	agg_group_destroy(g);
}

static void test_shadow_sets_and_stale(void **state)
{
	struct agg_group *g = *state;
	const struct agg_group_stats *st = agg_group_stats(g);
	struct agg_result res;
	struct contrib c;
	int32_t v[8] = { 0 };

	/* packet 0 -> slot 0 set 0; packet 4 (window 4) -> slot 0 set 1 */
	contribute_all_int32(g, 0, false, 1, 0, 8, &res);
	contribute_all_int32(g, 0, true, 1, 4, 8, &res);
	/* set 0 still holds packet 0's result for a late retransmission */
	mk(&c, 5, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 0, false, 1, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_RETRANSMIT);
	assert_int_equal(res.hdr.pkt_idx, 0);
	check_int32_sum(&res, 8);
	/* packet 8 reuses set 0 */
	contribute_all_int32(g, 0, false, 1, 8, 8, &res);
	assert_int_equal(res.hdr.pkt_idx, 8);
	/* a delayed copy of packet 0 is now stale: dropped, counted */
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_STALE);
	assert_int_equal(st->drops[AGG_E_STALE], 1);
	/* the next collective (seq 2) starts again at index 0: newer */
	contribute_all_int32(g, 0, true, 2, 0, 8, &res);
	/* sequence numbers wrap (serial-number arithmetic): after a reset,
	 * seq 0 is newer than 0xffffffff on the same set */
	agg_group_reset(g);
	contribute_all_int32(g, 0, false, 0xffffffffu, 0, 8, &res);
	contribute_all_int32(g, 0, false, 0, 0, 8, &res);
	mk(&c, 5, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 0, false, 0xffffffffu, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_STALE);
	assert_int_equal(st->drops[AGG_E_STALE], 2);
	assert_int_equal(st->preempted, 0);
	assert_int_equal(st->completions, 6);

	/* an abandoned, open use is preempted by a newer one */
	mk(&c, 1, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 1, false, 7, 1, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_ACCEPTED);
	contribute_all_int32(g, 1, false, 8, 1, 8, &res);
	assert_int_equal(st->preempted, 1);
	check_int32_sum(&res, 8);

	/* reset forgets everything */
	agg_group_reset(g);
	contribute_all_int32(g, 0, false, 1, 0, 8, &res);

	/* a job that restarts sends seq 1 again while the set holds (5, 0):
	 * stale from each member, until all of them have said so; their
	 * retransmissions of it are then a new use */
	contribute_all_int32(g, 2, false, 5, 0, 8, &res);
	uint64_t stale = st->drops[AGG_E_STALE];
	for (uint16_t m = 0; m < NM; m++) {
		mk(&c, m, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 2, false, 1, 0, v);
		assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_STALE);
		/* member 1 sends it again while the others have not: dropped
		 * as well (counted stale), and a WAIT says the switch is there */
		if (m == 1) {
			c.pkt.hdr.flags |= AGG_FLAG_RETRANSMIT;
			assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_WAIT);
			assert_int_equal(res.hdr.type, AGG_TYPE_WAIT);
			assert_int_equal(res.hdr.fanin, 2);   /* members 0 and 1 */
			assert_int_equal(res.hdr.coll_seq, 1);
		}
		/* a late copy of another old key does not count towards it */
		if (m == 3) {
			mk(&c, 0, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 2, false, 4, 0, v);
			assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_STALE);
			for (uint16_t k = 0; k <= 3; k++) {
				mk(&c, k, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 2, false, 1, 0, v);
				assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL),
						 -AGG_E_STALE);
			}
		}
		assert_int_equal(st->restarts, m == NM - 1 ? 1 : 0);
	}
	assert_int_equal(st->drops[AGG_E_STALE], stale + NM + 6);
	contribute_all_int32(g, 2, false, 1, 0, 8, &res);
	check_int32_sum(&res, 8);
	assert_int_equal(res.hdr.coll_seq, 1);

	/* Late copies of an older key from every member are not a restart
	 * of the use the set holds: a tree's children (here the members)
	 * can all have stale partials come late under reordering, and a
	 * child that lost the result of (9, 0) then sends its partial again.
	 * It gets the kept result; before, the set was freed, its resend
	 * opened (9, 0) afresh, and the children that had the result never
	 * sent again: held by WAITs to the deadline. */
	contribute_all_int32(g, 3, false, 9, 0, 8, &res);
	uint64_t restarts = st->restarts, retx = st->retransmits;
	for (uint16_t m = 0; m < NM; m++) {
		mk(&c, m, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 3, false, 7, 0, v);
		assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_STALE);
	}
	assert_int_equal(st->restarts, restarts + 1);
	int32_t v0[8];
	for (int i = 0; i < 8; i++)
		v0[i] = ival(0, i);
	mk(&c, 0, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 3, false, 9, 0, v0);
	c.pkt.hdr.flags |= AGG_FLAG_RETRANSMIT;
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_RETRANSMIT);
	assert_int_equal(st->retransmits, retx + 1);
	assert_int_equal(res.hdr.coll_seq, 9);
	check_int32_sum(&res, 8);
	/* another older key meanwhile does not move the restart's key */
	mk(&c, 1, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 3, false, 6, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_STALE);
	/* and were it a restarted job, its copies of (7, 0) are a new use */
	contribute_all_int32(g, 3, false, 7, 0, 8, &res);
	check_int32_sum(&res, 8);
	assert_int_equal(res.hdr.coll_seq, 7);
	assert_int_equal(st->restarts, restarts + 1);

	/* A use opened by retransmissions alone (this switch restarted and
	 * forgot it; the members that have its result send no more): no
	 * WAIT, so the member falls back instead of waiting to its deadline.
	 * Once a member's first copy is in, a resend is answered with one. */
	uint64_t waits = st->waits, dups = st->duplicates;
	mk(&c, 0, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 2, true, 11, 0, v);
	c.pkt.hdr.flags |= AGG_FLAG_RETRANSMIT;
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_ACCEPTED);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_DUPLICATE);
	assert_int_equal(st->waits, waits);
	mk(&c, 1, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 2, true, 11, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_ACCEPTED);
	mk(&c, 0, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 2, true, 11, 0, v);
	c.pkt.hdr.flags |= AGG_FLAG_RETRANSMIT;
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_WAIT);
	assert_int_equal(res.hdr.fanin, 2);
	assert_int_equal(st->waits, waits + 1);
	assert_int_equal(st->duplicates, dups + 2);

	/* A restart's key decided and never sent again (every member's late
	 * copies at the end of a job) does not stop a later job whose key is
	 * another older one: every member's copy of that one decides anew */
	contribute_all_int32(g, 1, false, 20, 0, 8, &res);
	restarts = st->restarts;
	for (uint32_t key = 15; key >= 14; key--)
		for (uint16_t m = 0; m < NM; m++) {
			mk(&c, m, AGG_DTYPE_INT32, AGG_OP_SUM, 8, 1, false, key, 0, v);
			assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_STALE);
		}
	assert_int_equal(st->restarts, restarts + 2);
	contribute_all_int32(g, 1, false, 14, 0, 8, &res);
	check_int32_sum(&res, 8);
	assert_int_equal(res.hdr.coll_seq, 14);
}

static void test_fanin_hierarchy(void **state)
{
	struct agg_member m2[3] = {
		{ .ip = 0x0a000101, .qpn = 0x10, .fanin = 4 },   /* leaf switch */
		{ .ip = 0x0a000102, .qpn = 0x11, .fanin = 1 },
		{ .ip = 0x0a000103, .qpn = 0x11, .fanin = 3 },
	};
	struct agg_group_config cfg = base_cfg();
	struct agg_group *g;
	struct agg_result res;
	struct agg_frame_spec s;
	uint8_t f[256];
	struct agg_pkt pkt;
	int64_t v[2];

	(void)state;
	cfg.members = m2;
	cfg.nmembers = 3;
	g = agg_group_create(&cfg, NULL);
	assert_non_null(g);
	for (int m = 0; m < 3; m++) {
		s = test_spec(AGG_DTYPE_INT64, AGG_OP_SUM, 2);
		s.src_ip = m2[m].ip;
		s.src_qp = m2[m].qpn;
		s.dest_qp = GROUP_QPN;
		s.qkey = QKEY;
		s.hdr.rank = (uint16_t)m;
		s.hdr.fanin = m2[m].fanin;
		v[0] = (int64_t)m2[m].fanin * 10;
		v[1] = -(int64_t)m2[m].fanin;
		int len = agg_encode(f, sizeof(f), &s, v);
		assert_int_equal(decode_in(f, (size_t)len, &pkt), 0);
		if (m == 1) {   /* a child claiming the wrong fan-in */
			pkt.hdr.fanin = 4;
			assert_int_equal(agg_group_ingest(g, &pkt, &res, NULL),
					 -AGG_E_FANIN);
			pkt.hdr.fanin = 1;
		}
		assert_int_equal(agg_group_ingest(g, &pkt, &res, NULL),
				 m == 2 ? AGG_V_COMPLETE : AGG_V_ACCEPTED);
	}
	assert_int_equal(res.hdr.fanin, 8);
	memcpy(v, res.payload, 16);
	assert_true(v[0] == 80 && v[1] == -8);
	agg_group_destroy(g);
}

static void test_config_validation(void **state)
{
	static const struct {
		int field;
		const char *why;
	} cases[] = {
		{ 0, "members: need 1 to 1024 members" },
		{ 1, "window: need 1 to 4096 slots" },
		{ 2, "elems_per_pkt: need 1 to 2048 elements" },
		{ 3, "qpn: need 2 to 0xffffff (QP0 and QP1 are special)" },
		{ 4, "members[].qpn: need 2 to 0xffffff" },
		{ 5, "members[].ip: missing" },
		{ 6, "members[].fanin: must be at least 1" },
		{ 7, "members[]: two members share an address and QPN" },
		{ 8, "dtypes: unknown dtype bit" },
		{ 9, "members: missing" },
		{ 10, "window: need 1 to 4096 slots" },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct agg_group_config cfg = base_cfg();
		const char *why = NULL;

		switch (cases[i].field) {
		case 0: cfg.nmembers = 0; break;
		case 1: cfg.window = 0; break;
		case 2: cfg.elems_per_pkt = 2049; break;
		case 3: cfg.qpn = 1; break;
		case 4: members[3].qpn = 0x1000000; break;
		case 5: members[3].ip = 0; break;
		case 6: members[3].fanin = 0; break;
		case 7: members[3] = members[5]; break;
		case 8: cfg.dtype_mask = 1u << 9; break;
		case 9: cfg.members = NULL; break;
		case 10: cfg.window = 4097; break;
		}
		errno = 0;
		assert_null(agg_group_create(&cfg, &why));
		assert_int_equal(errno, EINVAL);
		assert_string_equal(why, cases[i].why);
	}
	const char *why = NULL;
	assert_null(agg_group_create(NULL, &why));
	assert_string_equal(why, "no configuration");
}

/* Reproducible mode: one bit pattern whatever the arrival order. */
static void run_orders(uint8_t dtype, bool reproducible, int orders,
		       uint64_t *distinct_out, double *max_rel_err)
{
	enum { N = 64 };
	struct agg_group_config cfg = base_cfg();
	struct agg_group *g;
	struct agg_result res;
	struct contrib c[NM];
	uint8_t first[N * 4];
	double vals[NM][N];
	uint8_t raw[NM][N * 4];
	uint64_t distinct = 1;
	size_t es = agg_dtype_size(dtype);

	cfg.reproducible = reproducible;
	g = agg_group_create(&cfg, NULL);
	assert_non_null(g);
	/* magnitudes from 1e-3 to 1e6, both signs: float sums depend on order */
	for (int m = 0; m < NM; m++)
		for (int i = 0; i < N; i++) {
			/* fp16: 6.25e-5 .. 62.5, normal and far from overflow */
			double span = dtype == AGG_DTYPE_FP16 ? 6.0 : 9.0;
			double mag = pow(10.0, -3.0 + span * (double)test_rand_below(1000) / 1000.0);
			double x = (test_rand64() & 1) ? -mag : mag;
			float f = (float)x;
			uint16_t h;
			if (dtype == AGG_DTYPE_FP32) {
				memcpy(raw[m] + 4 * i, &f, 4);
				vals[m][i] = f;
			} else if (dtype == AGG_DTYPE_BF16) {
				h = agg_fp32_to_bf16(f);
				memcpy(raw[m] + 2 * i, &h, 2);
				vals[m][i] = agg_bf16_to_fp32(h);
			} else {   /* fp16: keep inside its range */
				h = agg_fp32_to_fp16(f / 16.0f);
				memcpy(raw[m] + 2 * i, &h, 2);
				vals[m][i] = agg_fp16_to_fp32(h);
			}
		}
	*max_rel_err = 0;
	for (int o = 0; o < orders; o++) {
		int perm[NM];
		for (int m = 0; m < NM; m++)
			perm[m] = m;
		for (int m = NM - 1; m > 0; m--) {
			int k = (int)test_rand_below((uint32_t)m + 1), t = perm[m];
			perm[m] = perm[k];
			perm[k] = t;
		}
		for (int k = 0; k < NM; k++) {
			int m = perm[k];
			mk(&c[k], (uint16_t)m, dtype, AGG_OP_SUM, N, 0, o & 1,
			   (uint32_t)o, 0, raw[m]);
			agg_group_ingest(g, &c[k].pkt, &res, NULL);
		}
		if (o == 0)
			memcpy(first, res.payload, N * es);
		else if (memcmp(first, res.payload, N * es))
			distinct++;
		/* error against a float64 reference */
		for (int i = 0; i < N; i++) {
			double exact = 0, absum = 0, got;
			uint16_t h;
			for (int m = 0; m < NM; m++) {
				exact += vals[m][i];
				absum += fabs(vals[m][i]);
			}
			if (dtype == AGG_DTYPE_FP32) {
				float f;
				memcpy(&f, res.payload + 4 * i, 4);
				got = f;
			} else {
				memcpy(&h, res.payload + 2 * i, 2);
				got = dtype == AGG_DTYPE_BF16 ? agg_bf16_to_fp32(h)
							      : agg_fp16_to_fp32(h);
			}
			/* an absolute half-ulp at the bottom of the output's
			 * range (subnormal spacing) is allowed on top */
			double floor_abs = dtype == AGG_DTYPE_FP16 ? ldexp(1.0, -25)
								   : ldexp(1.0, -150);
			double err = fmax(fabs(got - exact) - floor_abs, 0) / absum;
			if (err > *max_rel_err)
				*max_rel_err = err;
		}
	}
	assert_int_equal(agg_group_stats(g)->completions, orders);
	*distinct_out = distinct;
	agg_group_destroy(g);
}

static void test_reproducible_orders(void **state)
{
	uint64_t distinct;
	double err;
	/* documented bound (docs/protocol.md): |r - x| <= ((n-1) u32 + u_out)
	 * * sum |x_i| + eta_out, u32 = 2^-24, u_out = 2^-11 (fp16), 2^-8
	 * (bf16), 0 (fp32); eta_out half the output's smallest subnormal */
	const double u32 = ldexp(1.0, -24);

	(void)state;
	test_seed_init("reproducible_orders");
	run_orders(AGG_DTYPE_FP32, true, 1000, &distinct, &err);
	assert_int_equal(distinct, 1);
	assert_true(err <= (NM - 1) * u32);
	run_orders(AGG_DTYPE_BF16, true, 1000, &distinct, &err);
	assert_int_equal(distinct, 1);
	assert_true(err <= (NM - 1) * u32 + ldexp(1.0, -8));
	run_orders(AGG_DTYPE_FP16, true, 1000, &distinct, &err);
	assert_int_equal(distinct, 1);
	assert_true(err <= (NM - 1) * u32 + ldexp(1.0, -11));

	/* default mode: order-dependent bits, but within the same bound */
	run_orders(AGG_DTYPE_FP32, false, 1000, &distinct, &err);
	printf("# default mode, fp32: %llu distinct results over 1000 orders, "
	       "max relative error %.3g (bound %.3g)\n",
	       (unsigned long long)distinct, err, (NM - 1) * u32);
	assert_true(distinct > 1);
	assert_true(err <= (NM - 1) * u32);
}

/* ---- a lossy network, simulated ---- */

#define SIM_W 4
#define SIM_E 16
#define SIM_PKTS 60
#define SIM_COLLS 3
#define SIM_MSGS 4096

struct sim_msg {
	bool to_switch;
	uint16_t host;
	uint16_t len;
	uint8_t frame[AGG_FRAME_HDR_LEN + SIM_E * 4 + 4];
};

struct sim {
	struct sim_msg q[SIM_MSGS];
	int nq;
	uint64_t lost, duplicated;
};

static void sim_send(struct sim *n, bool to_switch, uint16_t host,
		     const uint8_t *f, int len)
{
	int copies = 1;

	if (test_rand_below(100) < 10) {
		n->lost++;
		return;
	}
	if (test_rand_below(100) < 5) {
		n->duplicated++;
		copies = 2;
	}
	while (copies-- && n->nq < SIM_MSGS) {
		struct sim_msg *m = &n->q[n->nq++];
		m->to_switch = to_switch;
		m->host = host;
		m->len = (uint16_t)len;
		memcpy(m->frame, f, (size_t)len);
	}
}

static float sim_val(int h, int coll, int idx, int j)
{
	return (float)(h * 7 + coll * 3 + idx + j);
}

static void host_send(struct sim *n, int h, int coll, uint32_t gpkt, int idx,
		      bool retx)
{
	float v[SIM_E];
	uint8_t f[sizeof(n->q[0].frame)];

	for (int j = 0; j < SIM_E; j++)
		v[j] = sim_val(h, coll, idx, j);
	struct agg_frame_spec s = {
		.src_ip = members[h].ip, .dst_ip = SWITCH_IP,
		.dest_qp = GROUP_QPN, .qkey = QKEY, .src_qp = members[h].qpn,
		.hdr = {
			.version = AGG_VERSION, .type = AGG_TYPE_CONTRIB,
			.dtype = AGG_DTYPE_FP32, .op = AGG_OP_SUM,
			.flags = (uint8_t)(((gpkt / SIM_W) & 1) |
					   (retx ? AGG_FLAG_RETRANSMIT : 0)),
			.count = SIM_E, .group_id = 42, .rank = (uint16_t)h,
			.fanin = 1, .slot = (uint16_t)(gpkt % SIM_W),
			.coll_seq = (uint32_t)coll, .pkt_idx = (uint32_t)idx,
		},
	};
	int len = agg_encode(f, sizeof(f), &s, v);
	assert_true(len > 0);
	sim_send(n, true, (uint16_t)h, f, len);
}

static void test_lossy_network(void **state)
{
	static struct sim net;
	struct agg_group_config cfg = base_cfg();
	struct agg_group *g;
	struct agg_result_l2 l2 = { .switch_ip = SWITCH_IP };
	struct agg_result res;
	struct agg_pkt pkt;
	/* per host: results received for each packet of the current collective */
	bool got[NM][SIM_PKTS], sent[NM][SIM_PKTS];
	uint32_t base_g = 0;
	uint64_t steps = 0, timeouts = 0;

	(void)state;
	test_seed_init("lossy_network");
	memset(&net, 0, sizeof(net));
	cfg.nmembers = 4;
	cfg.window = SIM_W;
	cfg.elems_per_pkt = SIM_E;
	g = agg_group_create(&cfg, NULL);
	assert_non_null(g);

	for (int coll = 1; coll <= SIM_COLLS; coll++) {
		memset(got, 0, sizeof(got));
		memset(sent, 0, sizeof(sent));
		for (int h = 0; h < 4; h++)
			for (int k = 0; k < SIM_W; k++) {
				host_send(&net, h, coll, base_g + (uint32_t)k, k, false);
				sent[h][k] = true;
			}
		for (;;) {
			assert_true(++steps < 2000000);
			if (net.nq == 0) {
				/* nothing in flight: every host times out and
				 * resends what it has not got back */
				bool all = true;
				timeouts++;
				for (int h = 0; h < 4; h++)
					for (int k = 0; k < SIM_PKTS; k++)
						if (sent[h][k] && !got[h][k]) {
							all = false;
							host_send(&net, h, coll,
								  base_g + (uint32_t)k,
								  k, true);
						}
				if (all)
					break;
				continue;
			}
			/* deliver a random message: reordering */
			int i = (int)test_rand_below((uint32_t)net.nq);
			struct sim_msg m = net.q[i];
			net.q[i] = net.q[--net.nq];
			assert_int_equal(decode_in(m.frame, m.len, &pkt), 0);
			if (m.to_switch) {
				int v = agg_group_ingest(g, &pkt, &res, NULL);
				if (v == -AGG_E_STALE)
					continue;
				assert_true(v >= 0);
				uint8_t f[sizeof(m.frame)];
				for (uint16_t h = 0; h < 4; h++) {
					if (v == AGG_V_RETRANSMIT ? h != m.host
								  : v != AGG_V_COMPLETE)
						continue;
					int len = agg_result_encode(g, h, &res, &l2, NULL,
								    f, sizeof(f));
					assert_true(len > 0);
					sim_send(&net, false, h, f, len);
				}
				continue;
			}
			/* a host receives a result */
			int h = m.host, k = (int)pkt.hdr.pkt_idx;
			assert_int_equal(pkt.hdr.rank, h);
			if (pkt.hdr.coll_seq != (uint32_t)coll || got[h][k])
				continue;        /* late or duplicate */
			for (int j = 0; j < SIM_E; j++) {
				float want = 0, v;
				for (int hh = 0; hh < 4; hh++)
					want += sim_val(hh, coll, k, j);
				memcpy(&v, pkt.payload + 4 * j, 4);
				assert_true(v == want);
			}
			got[h][k] = true;
			/* self-clocking: the result of packet k frees its slot
			 * for packet k + W */
			if (k + SIM_W < SIM_PKTS) {
				host_send(&net, h, coll, base_g + (uint32_t)(k + SIM_W),
					  k + SIM_W, false);
				sent[h][k + SIM_W] = true;
			}
		}
		for (int h = 0; h < 4; h++)
			for (int k = 0; k < SIM_PKTS; k++)
				assert_true(got[h][k]);
		base_g += SIM_PKTS;
	}
	const struct agg_group_stats *st = agg_group_stats(g);
	printf("# lossy network: %llu lost, %llu duplicated, %llu timeouts; switch: "
	       "%llu completions, %llu duplicates, %llu retransmit answers, %llu stale\n",
	       (unsigned long long)net.lost, (unsigned long long)net.duplicated,
	       (unsigned long long)timeouts, (unsigned long long)st->completions,
	       (unsigned long long)st->duplicates, (unsigned long long)st->retransmits,
	       (unsigned long long)st->drops[AGG_E_STALE]);
	assert_int_equal(st->completions, SIM_PKTS * SIM_COLLS);
	assert_int_equal(st->preempted, 0);
	assert_true(net.lost > 0 && net.duplicated > 0);
	agg_group_destroy(g);
}

/* A two-level tree end to end, every hop through real frames: 2 leaves
 * with 3 hosts each, a spine whose members are the leaves (fan-in 3). The
 * leaves send partials up, the spine's result comes down and is replicated;
 * a lost partial and a lost final result are recovered by host
 * retransmissions; wrong senders are refused. */
#define LEAF_IP(l) (0x0a0000f0u + (uint32_t)(l))
#define SPINE_IP 0x0a0000fdu
#define LEAF_QPN 0x300
#define SPINE_QPN 0x400
#define SPINE_QKEY 0x77770000u

static struct agg_member tree_hosts[2][3], tree_leaves[2];

static void decode_ok(const uint8_t *f, int len, struct agg_pkt *p)
{
	assert_true(len > 0);
	assert_int_equal(decode_in(f, (size_t)len, p), 0);
}

/* a host's contribution to its leaf */
static int host_frame(uint8_t *f, int l, int h, uint32_t idx, const int32_t *v, uint16_t n)
{
	struct agg_frame_spec s = {
		.src_ip = tree_hosts[l][h].ip, .dst_ip = LEAF_IP(l), .dscp = 26,
		.dest_qp = LEAF_QPN, .qkey = QKEY, .src_qp = tree_hosts[l][h].qpn,
		.hdr = { .version = AGG_VERSION, .type = AGG_TYPE_CONTRIB,
			 .dtype = AGG_DTYPE_INT32, .op = AGG_OP_SUM, .count = n,
			 .group_id = 42, .rank = (uint16_t)h, .fanin = 1,
			 .slot = (uint16_t)(idx % 4), .flags = (uint8_t)((idx / 4) & 1),
			 .coll_seq = 1, .pkt_idx = idx },
	};
	return agg_encode(f, AGG_MAX_FRAME_LEN, &s, v);
}

/* what the leaf sends up for an AGG_V_UPSTREAM verdict */
static int partial_frame(uint8_t *f, int l, const struct agg_result *r)
{
	struct agg_frame_spec s = {
		.src_ip = LEAF_IP(l), .dst_ip = SPINE_IP, .dscp = 26,
		.dest_qp = SPINE_QPN, .qkey = SPINE_QKEY, .src_qp = LEAF_QPN,
		.hdr = r->hdr,
	};
	return agg_encode(f, AGG_MAX_FRAME_LEN, &s, r->payload);
}

static void test_two_level_tree(void **state)
{
	struct agg_group *leaf[2], *spine;
	uint8_t f[AGG_MAX_FRAME_LEN], up[2][AGG_MAX_FRAME_LEN];
	int uplen[2];
	struct agg_pkt p;
	struct agg_result r;
	uint16_t m;
	int32_t v[2][3][64];
	const uint16_t n = 64;

	(void)state;
	for (int l = 0; l < 2; l++) {
		for (int h = 0; h < 3; h++) {
			tree_hosts[l][h] = (struct agg_member){ .ip = 0x0a000001u + (uint32_t)(l * 3 + h),
								.qpn = 17, .fanin = 1 };
			for (int i = 0; i < n; i++)
				v[l][h][i] = (l * 3 + h + 1) * 1000 + i;
		}
		tree_leaves[l] = (struct agg_member){ .ip = LEAF_IP(l), .qpn = LEAF_QPN, .fanin = 3 };
		struct agg_group_config c = {
			.group_id = 42, .qpn = LEAF_QPN, .qkey = QKEY, .nmembers = 3,
			.window = 4, .elems_per_pkt = 256, .members = tree_hosts[l],
			.parent = { .ip = SPINE_IP, .qpn = SPINE_QPN, .qkey = SPINE_QKEY,
				    .rank = (uint16_t)l },
		};
		leaf[l] = agg_group_create(&c, NULL);
		assert_non_null(leaf[l]);
	}
	struct agg_group_config sc = {
		.group_id = 42, .qpn = SPINE_QPN, .qkey = SPINE_QKEY, .nmembers = 2,
		.window = 4, .elems_per_pkt = 256, .members = tree_leaves,
	};
	spine = agg_group_create(&sc, NULL);
	assert_non_null(spine);

	/* hosts -> leaves: the third contribution completes the leaf's set */
	for (int l = 0; l < 2; l++)
		for (int h = 0; h < 3; h++) {
			decode_ok(f, host_frame(f, l, h, 0, v[l][h], n), &p);
			int rc = agg_group_ingest(leaf[l], &p, &r, &m);
			assert_int_equal(rc, h < 2 ? AGG_V_ACCEPTED : AGG_V_UPSTREAM);
			if (rc == AGG_V_UPSTREAM) {
				assert_int_equal(r.hdr.type, AGG_TYPE_CONTRIB);
				assert_int_equal(r.hdr.rank, l);
				assert_int_equal(r.hdr.fanin, 3);
				uplen[l] = partial_frame(up[l], l, &r);
				assert_true(uplen[l] > 0);
			}
		}
	/* leaf 0's partial is lost; leaf 1's arrives */
	decode_ok(up[1], uplen[1], &p);
	assert_int_equal(agg_group_ingest(spine, &p, &r, &m), AGG_V_ACCEPTED);
	/* a leaf-1 host times out: leaf 1's partial goes up again, marked as
	 * a retransmission; the spine holds it and waits for leaf 0, so it
	 * answers with a WAIT, which leaf 1 passes to each of its members */
	decode_ok(f, host_frame(f, 1, 1, 0, v[1][1], n), &p);
	p.hdr.flags |= AGG_FLAG_RETRANSMIT;
	assert_int_equal(agg_group_ingest(leaf[1], &p, &r, &m), AGG_V_UPSTREAM);
	assert_int_equal(r.hdr.flags & AGG_FLAG_RETRANSMIT, AGG_FLAG_RETRANSMIT);
	uint8_t again[AGG_MAX_FRAME_LEN], wf[AGG_MAX_FRAME_LEN];
	decode_ok(again, partial_frame(again, 1, &r), &p);
	assert_int_equal(agg_group_ingest(spine, &p, &r, &m), AGG_V_WAIT);
	assert_int_equal(m, 1);
	assert_int_equal(r.hdr.type, AGG_TYPE_WAIT);
	assert_int_equal(r.hdr.fanin, 1);                      /* leaf 1 alone so far */
	assert_int_equal(agg_group_stats(spine)->waits, 1);
	struct agg_result_l2 sl2 = { .switch_ip = SPINE_IP, .dscp = 26 };
	decode_ok(wf, agg_result_encode(spine, 1, &r, &sl2, NULL, wf, sizeof(wf)), &p);
	assert_int_equal(p.hdr.type, AGG_TYPE_WAIT);
	assert_int_equal(agg_group_parent_result(leaf[1], &p, &r), AGG_V_WAIT);
	assert_int_equal(agg_group_stats(leaf[1])->waits, 1);
	struct agg_result_l2 wl2 = { .switch_ip = LEAF_IP(1), .dscp = 26 };
	for (uint16_t k = 0; k < 3; k++) {
		decode_ok(wf, agg_result_encode(leaf[1], k, &r, &wl2, NULL, wf, sizeof(wf)), &p);
		assert_int_equal(p.hdr.type, AGG_TYPE_WAIT);
		assert_int_equal(p.hdr.rank, k);
		assert_int_equal(p.hdr.pkt_idx, 0);
		assert_int_equal(p.hdr.count, n);
		assert_int_equal(p.payload_len, 0);
	}
	/* host 0 of leaf 0 times out and retransmits: leaf 0 sends its partial again */
	decode_ok(f, host_frame(f, 0, 0, 0, v[0][0], n), &p);
	assert_int_equal(agg_group_ingest(leaf[0], &p, &r, &m), AGG_V_UPSTREAM);
	assert_int_equal(agg_group_stats(leaf[0])->upstream_resends, 1);
	uplen[0] = partial_frame(up[0], 0, &r);
	decode_ok(up[0], uplen[0], &p);
	assert_int_equal(agg_group_ingest(spine, &p, &r, &m), AGG_V_COMPLETE);
	assert_int_equal(r.hdr.fanin, 6);
	/* the spine's results to the two leaves */
	struct agg_result_l2 l2 = { .switch_ip = SPINE_IP, .dscp = 26 };
	uint8_t down[2][AGG_MAX_FRAME_LEN];
	int downlen[2];
	for (int l = 0; l < 2; l++) {
		downlen[l] = agg_result_encode(spine, (uint16_t)l, &r, &l2, NULL, down[l],
					       AGG_MAX_FRAME_LEN);
		assert_true(downlen[l] > 0);
	}
	/* a result from someone who is not the parent is refused */
	struct agg_pkt bad;
	decode_ok(down[0], downlen[0], &bad);
	bad.src_ip = 0x0a000009u;
	assert_int_equal(agg_group_parent_result(leaf[0], &bad, &r), -AGG_E_NOT_MEMBER);
	bad.src_ip = SPINE_IP;
	bad.qkey = QKEY;
	assert_int_equal(agg_group_parent_result(leaf[0], &bad, &r), -AGG_E_QKEY);
	/* a contribution-typed packet is not a parent result */
	decode_ok(f, host_frame(f, 0, 1, 0, v[0][1], n), &bad);
	assert_int_equal(agg_group_parent_result(leaf[0], &bad, &r), -AGG_E_NOT_MEMBER);

	/* a parent result whose ICRC was left pending (agg_decode_lazy) and
	 * is wrong: refused as such, nothing taken from it */
	down[1][downlen[1] - 8] ^= 0x20;
	assert_int_equal(agg_decode_lazy(down[1], (size_t)downlen[1], &bad), 0);
	assert_int_equal(agg_group_parent_result(leaf[1], &bad, &r), -AGG_E_ICRC);
	assert_int_equal(agg_group_stats(leaf[1])->parent_results, 0);
	down[1][downlen[1] - 8] ^= 0x20;

	/* leaf 1 gets its result; leaf 0's is lost */
	decode_ok(down[1], downlen[1], &p);
	assert_int_equal(agg_group_parent_result(leaf[1], &p, &r), AGG_V_COMPLETE);
	assert_int_equal(r.hdr.type, AGG_TYPE_RESULT);
	assert_int_equal(r.payload_len, n * 4);
	for (int i = 0; i < n; i++) {
		int32_t want = 0, got;
		for (int l = 0; l < 2; l++)
			for (int h = 0; h < 3; h++)
				want += v[l][h][i];
		memcpy(&got, r.payload + 4 * i, 4);
		assert_int_equal(got, want);
	}
	/* the same result again: a duplicate */
	assert_int_equal(agg_group_parent_result(leaf[1], &p, &r), AGG_V_DUPLICATE);
	/* a leaf-1 host retransmits: answered from the retained final */
	decode_ok(f, host_frame(f, 1, 2, 0, v[1][2], n), &p);
	assert_int_equal(agg_group_ingest(leaf[1], &p, &r, &m), AGG_V_RETRANSMIT);
	/* leaf 0: a host retransmits, the partial goes up again, the spine
	 * answers from its retained result, leaf 0 completes */
	decode_ok(f, host_frame(f, 0, 2, 0, v[0][2], n), &p);
	assert_int_equal(agg_group_ingest(leaf[0], &p, &r, &m), AGG_V_UPSTREAM);
	uplen[0] = partial_frame(up[0], 0, &r);
	decode_ok(up[0], uplen[0], &p);
	assert_int_equal(agg_group_ingest(spine, &p, &r, &m), AGG_V_RETRANSMIT);
	assert_int_equal(m, 0);
	downlen[0] = agg_result_encode(spine, 0, &r, &l2, NULL, down[0], AGG_MAX_FRAME_LEN);
	decode_ok(down[0], downlen[0], &p);
	assert_int_equal(agg_group_parent_result(leaf[0], &p, &r), AGG_V_COMPLETE);
	/* the leaf's results to its hosts verify and carry the total */
	struct agg_result_l2 ll2 = { .switch_ip = LEAF_IP(0), .dscp = 26 };
	int len = agg_result_encode(leaf[0], 1, &r, &ll2, NULL, f, sizeof(f));
	decode_ok(f, len, &p);
	assert_int_equal(p.hdr.fanin, 6);
	assert_int_equal(p.hdr.rank, 1);
	assert_int_equal(p.dest_qp, 17);
	int32_t first;
	memcpy(&first, p.payload, 4);
	assert_int_equal(first, (1 + 2 + 3 + 4 + 5 + 6) * 1000);
	/* the parent's result again: a duplicate; for another key: stale */
	decode_ok(down[0], downlen[0], &p);
	assert_int_equal(agg_group_parent_result(leaf[0], &p, &r), AGG_V_DUPLICATE);
	p.hdr.pkt_idx = 4;
	assert_int_equal(agg_group_parent_result(leaf[0], &p, &r), -AGG_E_STALE);
	assert_int_equal(agg_group_stats(leaf[0])->upstream, 1);
	assert_int_equal(agg_group_stats(leaf[0])->parent_results, 1);
	assert_int_equal(agg_group_stats(spine)->completions, 1);
	for (int l = 0; l < 2; l++)
		agg_group_destroy(leaf[l]);
	agg_group_destroy(spine);
}

/* ---- collectives other than all-reduce (docs/protocol.md, 2.1) ---- */

/* A contribution of collective coll rooted at root; payload NULL: none
 * (AGG_FLAG_NO_DATA). */
static void mk_coll(struct contrib *c, uint16_t member, uint8_t dtype, uint16_t count,
		    uint16_t slot, uint32_t seq, uint32_t idx, uint8_t coll,
		    uint16_t root, const void *payload)
{
	struct agg_frame_spec s = {
		.src_ip = members[member % NM].ip, .dst_ip = SWITCH_IP, .dscp = 26,
		.dest_qp = GROUP_QPN, .qkey = QKEY, .src_qp = members[member % NM].qpn,
		.hdr = {
			.version = AGG_VERSION, .type = AGG_TYPE_CONTRIB, .dtype = dtype,
			.op = AGG_OP_SUM, .count = count, .group_id = 42, .rank = member,
			.fanin = 1, .slot = slot, .coll_seq = seq, .pkt_idx = idx,
			.flags = AGG_FLAG_COLL | (payload ? 0 : AGG_FLAG_NO_DATA),
			.coll = coll, .root = root,
		},
	};
	int len = agg_encode(c->frame, sizeof(c->frame), &s, payload);
	assert_true(len > 0);
	assert_int_equal(decode_in(c->frame, (size_t)len, &c->pkt), 0);
}

static size_t pad_of(size_t n)
{
	return (4 - n % 4) % 4;
}

static const struct agg_result_l2 coll_l2 = {
	.src_mac = { 0x02, 0, 0, 0, 0, 0xfe }, .switch_ip = SWITCH_IP, .dscp = 26,
};

/* Member m's result frame: decoded (ICRC verified) into *p; the header
 * names the use; with data or not. */
static void check_result_frame(struct agg_group *g, const struct agg_result *res,
			       uint16_t m, bool data, struct agg_pkt *p, uint8_t *f)
{
	int len = agg_result_encode(g, m, res, &coll_l2, NULL, f, AGG_MAX_FRAME_LEN);
	size_t body = (size_t)res->hdr.count * agg_dtype_size(res->hdr.dtype);

	assert_int_equal(agg_result_has_data_for(res, m), data);
	assert_int_equal(len, AGG_FRAME_HDR_LEN + (data ? body + pad_of(body) : 0) + 4);
	assert_int_equal(decode_in(f, (size_t)len, p), 0);
	assert_int_equal(agg_icrc_load(f + len - 4), agg_icrc_ipv4(f + 14, (size_t)len - 14));
	assert_int_equal(p->hdr.type, AGG_TYPE_RESULT);
	assert_int_equal(p->hdr.rank, m);
	assert_int_equal(p->hdr.count, res->hdr.count);
	assert_int_equal(p->hdr.dtype, res->hdr.dtype);
	assert_int_equal(p->hdr.coll, res->hdr.coll);
	assert_int_equal(p->hdr.root, res->hdr.root);
	assert_int_equal(p->hdr.coll_seq, res->hdr.coll_seq);
	assert_int_equal(p->hdr.pkt_idx, res->hdr.pkt_idx);
	assert_int_equal(p->hdr.flags, (res->hdr.flags & ~AGG_FLAG_NO_DATA) |
				       (data ? 0 : AGG_FLAG_NO_DATA));
	assert_int_equal(p->pad, data ? pad_of(body) : 0);
	assert_int_equal(p->payload_len, data ? body : 0);
}

static void test_coll_reduce(void **state)
{
	struct agg_group *g = *state;
	const struct agg_group_stats *st = agg_group_stats(g);
	uint8_t f[AGG_MAX_FRAME_LEN];
	struct agg_result res;
	struct agg_pkt p;
	struct contrib c;
	int32_t v[10];

	/* reduce to rank 5: every member sends, only member 5 gets the sum */
	for (uint16_t m = 0; m < NM; m++) {
		for (int i = 0; i < 10; i++)
			v[i] = ival(m, i);
		mk_coll(&c, m, AGG_DTYPE_INT32, 10, 1, 3, 0, AGG_COLL_REDUCE, 5, v);
		assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL),
				 m == NM - 1 ? AGG_V_COMPLETE : AGG_V_ACCEPTED);
	}
	assert_int_equal(res.hdr.flags, AGG_FLAG_COLL);
	assert_int_equal(res.hdr.coll, AGG_COLL_REDUCE);
	assert_int_equal(res.hdr.root, 5);
	assert_int_equal(res.data_to_all, false);
	assert_int_equal(res.owner, 5);
	check_int32_sum(&res, 10);
	for (uint16_t m = 0; m < NM; m++) {
		check_result_frame(g, &res, m, m == 5, &p, f);
		if (m == 5)
			assert_memory_equal(p.payload, res.payload, 40);
	}
	/* member 2 lost its (empty) result: the retransmission answer is empty
	 * too; member 5's carries the sum */
	for (int i = 0; i < 10; i++)
		v[i] = ival(2, i);
	mk_coll(&c, 2, AGG_DTYPE_INT32, 10, 1, 3, 0, AGG_COLL_REDUCE, 5, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_RETRANSMIT);
	check_result_frame(g, &res, 2, false, &p, f);
	mk_coll(&c, 5, AGG_DTYPE_INT32, 10, 1, 3, 0, AGG_COLL_REDUCE, 5, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_RETRANSMIT);
	check_result_frame(g, &res, 5, true, &p, f);

	/* reduce-scatter: packet k holds shard k's elements, rank k gets it */
	for (uint32_t k = 0; k < 4; k++)
		for (uint16_t m = 0; m < NM; m++) {
			for (int i = 0; i < 10; i++)
				v[i] = ival(m, i) * (int32_t)(k + 1);
			mk_coll(&c, m, AGG_DTYPE_INT32, 10, (uint16_t)k, 4, k,
				AGG_COLL_REDUCE_SCATTER, (uint16_t)(2 * k + 1), v);
			assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL),
					 m == NM - 1 ? AGG_V_COMPLETE : AGG_V_ACCEPTED);
			if (m < NM - 1)
				continue;
			assert_int_equal(res.owner, 2 * k + 1);
			for (int i = 0; i < 10; i++) {
				int32_t want = 0, got;
				for (int mm = 0; mm < NM; mm++)
					want += ival(mm, i) * (int32_t)(k + 1);
				memcpy(&got, res.payload + 4 * i, 4);
				assert_int_equal(got, want);
			}
			for (uint16_t mm = 0; mm < NM; mm++)
				check_result_frame(g, &res, mm, mm == 2 * k + 1, &p, f);
		}
	assert_int_equal(st->completions, 5);
	assert_int_equal(st->retransmits, 2);
	assert_int_equal(st->drops[AGG_E_COLL_DATA], 0);
}

/* Allgather and bcast copy the owner's bytes: NaN payloads, signalling
 * NaNs, -0 and subnormals arrive as sent, in a reproducible group too. */
static void test_coll_copy(void **state)
{
	static const uint16_t h16[7] = { 0x7c01, 0xfd23, 0x7e00, 0x8000, 0x0001, 0x7bff, 0xfc00 };
	static const uint32_t h32[4] = { 0x7f800001u, 0xffc12345u, 0x80000000u, 0x00000001u };
	struct agg_group_config cfg = base_cfg();
	uint8_t f[AGG_MAX_FRAME_LEN];
	struct agg_result res;
	struct agg_pkt p;
	struct contrib c;

	(void)state;
	for (int repro = 0; repro < 2; repro++) {
		cfg.reproducible = repro;
		struct agg_group *g = agg_group_create(&cfg, NULL);
		assert_non_null(g);
		/* allgather, shard of rank 2: 7 fp16 elements (PadCnt 2) */
		for (uint16_t k = 0; k < NM; k++) {
			uint16_t m = (uint16_t)((k + 1) % NM);   /* the owner second */
			mk_coll(&c, m, AGG_DTYPE_FP16, 7, 0, 1, 0, AGG_COLL_ALLGATHER, 2,
				m == 2 ? h16 : NULL);
			assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL),
					 k == NM - 1 ? AGG_V_COMPLETE : AGG_V_ACCEPTED);
		}
		assert_int_equal(res.hdr.flags, AGG_FLAG_COLL | (repro ? AGG_FLAG_REPRODUCIBLE : 0));
		assert_true(res.data_to_all && res.not_owner);
		assert_int_equal(res.owner, 2);
		assert_int_equal(res.payload_len, 14);
		assert_int_equal(res.pad, 2);
		assert_memory_equal(res.payload, h16, 14);
		assert_int_equal(res.payload_crc, agg_crc32(0, res.payload, 16));
		/* the owner's result is its acknowledgement, without data */
		for (uint16_t m = 0; m < NM; m++) {
			check_result_frame(g, &res, m, m != 2, &p, f);
			if (m != 2)
				assert_memory_equal(p.payload, h16, 14);
		}
		/* bcast from rank 7, fp32; the owner comes first this time */
		for (uint16_t k = 0; k < NM; k++) {
			uint16_t m = (uint16_t)(NM - 1 - k);
			mk_coll(&c, m, AGG_DTYPE_FP32, 4, 1, 1, 1, AGG_COLL_BCAST, 7,
				m == 7 ? h32 : NULL);
			assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL),
					 k == NM - 1 ? AGG_V_COMPLETE : AGG_V_ACCEPTED);
		}
		assert_memory_equal(res.payload, h32, 16);
		assert_int_equal(res.owner, 7);
		for (uint16_t m = 0; m < NM; m++) {
			check_result_frame(g, &res, m, m != 7, &p, f);
			if (m != 7)
				assert_memory_equal(p.payload, h32, 16);
		}
		assert_int_equal(agg_group_stats(g)->completions, 2);
		assert_int_equal(agg_group_stats(g)->contributions, 2 * NM);
		agg_group_destroy(g);
	}
}

static void test_coll_drops(void **state)
{
	struct agg_group *g = *state;
	const struct agg_group_stats *st = agg_group_stats(g);
	struct agg_result res;
	struct contrib c;
	int32_t v[4] = { 1, 2, 3, 4 };

	/* data presence that the collective and root do not allow */
	mk_coll(&c, 1, AGG_DTYPE_INT32, 4, 0, 1, 0, AGG_COLL_REDUCE, 0, NULL);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_COLL_DATA);
	mk_coll(&c, 1, AGG_DTYPE_INT32, 4, 0, 1, 0, AGG_COLL_REDUCE_SCATTER, 1, NULL);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_COLL_DATA);
	mk_coll(&c, 1, AGG_DTYPE_INT32, 4, 0, 1, 0, AGG_COLL_ALLGATHER, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_COLL_DATA);
	mk_coll(&c, 1, AGG_DTYPE_INT32, 4, 0, 1, 0, AGG_COLL_BCAST, 1, NULL);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_COLL_DATA);
	assert_int_equal(st->drops[AGG_E_COLL_DATA], 4);
	/* a root that is no rank of this (top-level) group */
	mk_coll(&c, 1, AGG_DTYPE_INT32, 4, 0, 1, 0, AGG_COLL_REDUCE, NM, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_COLL);
	mk_coll(&c, 1, AGG_DTYPE_INT32, 4, 0, 1, 0, AGG_COLL_BCAST, 0xffff, NULL);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_COLL);
	assert_int_equal(st->drops[AGG_E_COLL], 2);
	assert_int_equal(st->contributions, 0);

	/* one use: the collective and the root must match like dtype and op */
	mk_coll(&c, 1, AGG_DTYPE_INT32, 4, 0, 1, 0, AGG_COLL_BCAST, 3, NULL);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_ACCEPTED);
	mk_coll(&c, 2, AGG_DTYPE_INT32, 4, 0, 1, 0, AGG_COLL_BCAST, 4, NULL);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_MISMATCH);
	mk_coll(&c, 2, AGG_DTYPE_INT32, 4, 0, 1, 0, AGG_COLL_ALLGATHER, 3, NULL);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_MISMATCH);
	mk(&c, 2, AGG_DTYPE_INT32, AGG_OP_SUM, 4, 0, false, 1, 0, v);   /* all-reduce */
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_MISMATCH);
	mk_coll(&c, 2, AGG_DTYPE_INT32, 5, 0, 1, 0, AGG_COLL_BCAST, 3, NULL);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_MISMATCH);
	/* and an all-reduce set refuses a collective for its key */
	mk(&c, 2, AGG_DTYPE_INT32, AGG_OP_SUM, 4, 1, false, 1, 1, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_ACCEPTED);
	mk_coll(&c, 3, AGG_DTYPE_INT32, 4, 1, 1, 1, AGG_COLL_REDUCE, 0, v);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), -AGG_E_MISMATCH);
	assert_int_equal(st->drops[AGG_E_MISMATCH], 5);
	/* a NO_DATA duplicate is a duplicate */
	mk_coll(&c, 1, AGG_DTYPE_INT32, 4, 0, 1, 0, AGG_COLL_BCAST, 3, NULL);
	assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL), AGG_V_DUPLICATE);
	assert_int_equal(st->contributions, 2);
	assert_int_equal(st->duplicates, 1);
}

static void test_rank_map(void **state)
{
	struct agg_member m3[3] = {
		{ .ip = 0x0a000101, .qpn = 0x10, .fanin = 4 },
		{ .ip = 0x0a000102, .qpn = 0x11, .fanin = 1 },
		{ .ip = 0x0a000103, .qpn = 0x11, .fanin = 3 },
	};
	static const uint16_t r0[4] = { 9, 2, 40, 7 }, r1[1] = { 0 }, r2[3] = { 65535, 3, 8 };
	struct agg_group_config cfg = base_cfg();
	struct agg_group *g;
	const char *why = NULL;

	(void)state;
	cfg.members = m3;
	cfg.nmembers = 3;
	/* default: consecutive from first_rank */
	cfg.first_rank = 10;
	g = agg_group_create(&cfg, NULL);
	assert_non_null(g);
	static const struct { uint16_t rank, member; } dflt[] = {
		{ 9, AGG_NO_MEMBER }, { 10, 0 }, { 13, 0 }, { 14, 1 }, { 15, 2 },
		{ 17, 2 }, { 18, AGG_NO_MEMBER }, { 0, AGG_NO_MEMBER }, { 65535, AGG_NO_MEMBER },
	};
	for (size_t i = 0; i < sizeof(dflt) / sizeof(dflt[0]); i++)
		assert_int_equal(agg_group_rank_owner(g, dflt[i].rank), dflt[i].member);
	agg_group_destroy(g);

	/* listed: any ranks, copied (the caller's arrays may go) */
	uint16_t mine[4];
	memcpy(mine, r0, sizeof(mine));
	m3[0].ranks = mine;
	m3[0].nranks = 4;
	m3[1].ranks = r1;
	m3[1].nranks = 1;
	m3[2].ranks = r2;
	m3[2].nranks = 3;
	cfg.first_rank = 0;
	g = agg_group_create(&cfg, &why);
	assert_non_null(g);
	memset(mine, 0, sizeof(mine));
	static const struct { uint16_t rank, member; } listed[] = {
		{ 0, 1 }, { 1, AGG_NO_MEMBER }, { 2, 0 }, { 3, 2 }, { 7, 0 }, { 8, 2 },
		{ 9, 0 }, { 10, AGG_NO_MEMBER }, { 40, 0 }, { 65535, 2 }, { 65534, AGG_NO_MEMBER },
	};
	for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++)
		assert_int_equal(agg_group_rank_owner(g, listed[i].rank), listed[i].member);
	assert_int_equal(agg_group_config(g)->members[0].ranks[2], 40);
	agg_group_destroy(g);

	static const struct {
		int field;
		const char *why;
	} cases[] = {
		{ 0, "members[].ranks: every member needs its list once one has" },
		{ 1, "members[].ranks: every member needs its list once one has" },
		{ 2, "members[].ranks: need exactly fanin ranks" },
		{ 3, "members[].ranks: a rank is listed twice" },
		{ 4, "first_rank: not with members[].ranks (they name every rank)" },
		{ 5, "first_rank: its ranks (first_rank + total fan-in) exceed 65535" },
		{ 6, "members[].ranks: every member needs its list once one has" },
	};
	static const uint16_t dup[3] = { 5, 6, 2 };   /* 2 is member 0's too */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		m3[0].ranks = r0, m3[0].nranks = 4;
		m3[1].ranks = r1, m3[1].nranks = 1;
		m3[2].ranks = r2, m3[2].nranks = 3;
		cfg.first_rank = 0;
		switch (cases[i].field) {
		case 0: m3[1].ranks = NULL, m3[1].nranks = 0; break;
		case 1: m3[2].ranks = NULL; break;
		case 2: m3[2].nranks = 2; break;
		case 3: m3[2].ranks = dup; break;
		case 4: cfg.first_rank = 1; break;
		case 5:
			for (int k = 0; k < 3; k++)
				m3[k].ranks = NULL, m3[k].nranks = 0;
			cfg.first_rank = 65535 - 7;   /* 8 ranks: 65528 .. 65535 fit */
			g = agg_group_create(&cfg, NULL);
			assert_non_null(g);
			assert_int_equal(agg_group_rank_owner(g, 65535), 2);
			agg_group_destroy(g);
			cfg.first_rank = 65535 - 6;
			break;
		case 6:
			m3[0].ranks = NULL, m3[0].nranks = 0;
			break;
		}
		errno = 0;
		why = NULL;
		assert_null(agg_group_create(&cfg, &why));
		assert_int_equal(errno, EINVAL);
		assert_string_equal(why, cases[i].why);
	}
}

/* ---- every collective over a lossy network, one level and a tree ---- */

#define CS_N 6        /* ranks */
#define CS_W 4
#define CS_E 15       /* odd: fp16 copies carry PadCnt 2 */
#define CS_PKTS 24
#define CS_MSGS 8192

enum cs_hop { TO_HOST, TO_LEAF, TO_SPINE };

struct cs_msg {
	uint8_t to;           /* enum cs_hop */
	uint16_t idx;         /* the rank, the leaf */
	uint16_t len;
	uint8_t frame[AGG_FRAME_HDR_LEN + CS_E * 4 + 8];
};

struct cs_net {
	struct cs_msg q[CS_MSGS];
	int nq;
	uint64_t lost, duplicated, no_data_results, data_results;
	uint64_t waits_down, early_retx;     /* WAITs that reached hosts; resends
						  with messages still in flight */
};

/* Ranks on one switch (nleaves 1, the default rank map) or on two leaves
 * holding ranks {0, 3, 5} and {1, 2, 4} under a spine (listed ranks). */
struct cs_tree {
	int nleaves;
	int leaf_of[CS_N], index_of[CS_N];
	int nhosts[2];
	uint16_t rank_at[2][CS_N];        /* a leaf's member -> rank */
	struct agg_member hosts[2][CS_N], leaves[2];
	uint16_t one_rank[CS_N];
	struct agg_group *leaf[2], *spine;
};

static void cs_tree_build(struct cs_tree *t, int nleaves)
{
	memset(t, 0, sizeof(*t));
	t->nleaves = nleaves;
	for (uint16_t r = 0; r < CS_N; r++) {
		int l = nleaves == 1 ? 0 : (r == 0 || r == 3 || r == 5) ? 0 : 1;
		int i = t->nhosts[l]++;

		t->leaf_of[r] = l;
		t->index_of[r] = i;
		t->rank_at[l][i] = r;
		t->one_rank[r] = r;
		t->hosts[l][i] = (struct agg_member){ .ip = 0x0a000001u + r, .qpn = 17u + r,
						      .fanin = 1 };
		if (nleaves == 2) {
			t->hosts[l][i].ranks = &t->one_rank[r];
			t->hosts[l][i].nranks = 1;
		}
	}
	for (int l = 0; l < nleaves; l++) {
		struct agg_group_config c = {
			.group_id = 42, .qpn = LEAF_QPN, .qkey = QKEY,
			.nmembers = (uint16_t)t->nhosts[l], .window = CS_W,
			.elems_per_pkt = CS_E, .members = t->hosts[l],
		};
		if (nleaves == 2)
			c.parent = (struct agg_parent){ .ip = SPINE_IP, .qpn = SPINE_QPN,
							.qkey = SPINE_QKEY, .rank = (uint16_t)l };
		t->leaf[l] = agg_group_create(&c, NULL);
		assert_non_null(t->leaf[l]);
		t->leaves[l] = (struct agg_member){ .ip = LEAF_IP(l), .qpn = LEAF_QPN,
						    .fanin = (uint16_t)t->nhosts[l],
						    .ranks = t->rank_at[l],
						    .nranks = (uint16_t)t->nhosts[l] };
	}
	if (nleaves == 2) {
		struct agg_group_config sc = {
			.group_id = 42, .qpn = SPINE_QPN, .qkey = SPINE_QKEY, .nmembers = 2,
			.window = CS_W, .elems_per_pkt = CS_E, .members = t->leaves,
		};
		t->spine = agg_group_create(&sc, NULL);
		assert_non_null(t->spine);
		for (uint16_t r = 0; r < CS_N; r++)
			assert_int_equal(agg_group_rank_owner(t->spine, r), t->leaf_of[r]);
	}
}

static void cs_send(struct cs_net *n, enum cs_hop to, int idx, const uint8_t *f, int len)
{
	int copies = 1;

	assert_true(len > 0 && (size_t)len <= sizeof(n->q[0].frame));
	if (test_rand_below(100) < 10) {
		n->lost++;
		return;
	}
	if (test_rand_below(100) < 5) {
		n->duplicated++;
		copies = 2;
	}
	while (copies-- && n->nq < CS_MSGS) {
		struct cs_msg *m = &n->q[n->nq++];
		m->to = (uint8_t)to;
		m->idx = (uint16_t)idx;
		m->len = (uint16_t)len;
		memcpy(m->frame, f, (size_t)len);
	}
}

static uint16_t cs_root(uint8_t coll, int k)
{
	return coll == AGG_COLL_REDUCE ? 4 : coll == AGG_COLL_BCAST ? 3 : (uint16_t)(k % CS_N);
}

static bool cs_copies(uint8_t coll)
{
	return coll == AGG_COLL_ALLGATHER || coll == AGG_COLL_BCAST;
}

/* Rank r's elements for packet k: small integers as fp32 (exact sums), or
 * fp16 bit patterns for the copies: NaNs with payloads, -0, a subnormal. */
static void cs_elems(uint8_t coll, int seq, int r, int k, void *out)
{
	for (int j = 0; j < CS_E; j++)
		if (cs_copies(coll)) {
			uint16_t h = j == 0 ? 0x8000 : j == 1 ? 0x0001 :
				     (uint16_t)(0x7c01 + ((r * 16 + j + k * 3 + seq) & 0x1fe));
			memcpy((uint8_t *)out + 2 * j, &h, 2);
		} else {
			float f = (float)(r * 7 + seq * 3 + k + j);
			memcpy((uint8_t *)out + 4 * j, &f, 4);
		}
}

static int cs_host_frame(struct cs_tree *t, uint8_t coll, int seq, int r, uint32_t gpkt,
			 int k, bool retx, uint8_t *f, size_t cap)
{
	uint8_t v[CS_E * 4];
	uint16_t root = cs_root(coll, k);
	bool data = !cs_copies(coll) || root == r;
	int l = t->leaf_of[r];

	cs_elems(coll, seq, r, k, v);
	struct agg_frame_spec s = {
		.src_ip = t->hosts[l][t->index_of[r]].ip, .dst_ip = LEAF_IP(l),
		.dest_qp = LEAF_QPN, .qkey = QKEY, .src_qp = t->hosts[l][t->index_of[r]].qpn,
		.hdr = {
			.version = AGG_VERSION, .type = AGG_TYPE_CONTRIB,
			.dtype = cs_copies(coll) ? AGG_DTYPE_FP16 : AGG_DTYPE_FP32,
			.op = AGG_OP_SUM,
			.flags = (uint8_t)(((gpkt / CS_W) & 1) | (retx ? AGG_FLAG_RETRANSMIT : 0) |
					   (coll ? AGG_FLAG_COLL : 0) |
					   (data ? 0 : AGG_FLAG_NO_DATA)),
			.count = CS_E, .group_id = 42, .rank = (uint16_t)t->index_of[r],
			.fanin = 1, .slot = (uint16_t)(gpkt % CS_W),
			.coll_seq = (uint32_t)seq, .pkt_idx = (uint32_t)k,
			.coll = coll, .root = coll ? root : 0,
		},
	};
	return agg_encode(f, cap, &s, data ? v : NULL);
}

static void cs_host_send(struct cs_net *n, struct cs_tree *t, uint8_t coll, int seq,
			 int r, uint32_t gpkt, int k, bool retx)
{
	uint8_t f[sizeof(n->q[0].frame)];

	cs_send(n, TO_LEAF, t->leaf_of[r],
		f, cs_host_frame(t, coll, seq, r, gpkt, k, retx, f, sizeof(f)));
}

/* Results of a switch to its members: every one, or one on a retransmission. */
static void cs_results(struct cs_net *n, struct cs_tree *t, struct agg_group *g, int l,
		       const struct agg_result *res, int only)
{
	uint8_t f[sizeof(n->q[0].frame)];
	struct agg_result_l2 l2 = { .switch_ip = g == t->spine ? SPINE_IP : LEAF_IP(l) };
	uint16_t nm = agg_group_config(g)->nmembers;

	for (uint16_t m = 0; m < nm; m++) {
		if (only >= 0 && m != only)
			continue;
		int len = agg_result_encode(g, m, res, &l2, NULL, f, sizeof(f));
		if (g == t->spine)
			cs_send(n, TO_LEAF, m, f, len);
		else
			cs_send(n, TO_HOST, t->rank_at[l][m], f, len);
	}
}

static void cs_switch_input(struct cs_net *n, struct cs_tree *t, const struct cs_msg *m)
{
	struct agg_group *g = m->to == TO_SPINE ? t->spine : t->leaf[m->idx];
	uint8_t f[sizeof(n->q[0].frame)];
	struct agg_result res;
	struct agg_pkt pkt;
	uint16_t who;
	int v;

	assert_int_equal(decode_in(m->frame, m->len, &pkt), 0);
	if (pkt.hdr.type == AGG_TYPE_RESULT || pkt.hdr.type == AGG_TYPE_WAIT) {
		/* the parent's result, or its WAIT: both to every member */
		v = agg_group_parent_result(g, &pkt, &res);
		if (v == AGG_V_COMPLETE || v == AGG_V_WAIT)
			cs_results(n, t, g, m->idx, &res, -1);
		assert_true(v == AGG_V_COMPLETE || v == AGG_V_WAIT || v == AGG_V_DUPLICATE ||
			    v == -AGG_E_STALE);
		return;
	}
	v = agg_group_ingest(g, &pkt, &res, &who);
	if (v == -AGG_E_STALE)
		return;
	assert_true(v >= 0);
	if (v == AGG_V_COMPLETE || v == AGG_V_RETRANSMIT || v == AGG_V_WAIT) {
		cs_results(n, t, g, m->idx, &res, v == AGG_V_COMPLETE ? -1 : who);
	} else if (v == AGG_V_UPSTREAM) {
		struct agg_frame_spec s = {
			.src_ip = LEAF_IP(m->idx), .dst_ip = SPINE_IP, .dest_qp = SPINE_QPN,
			.qkey = SPINE_QKEY, .src_qp = LEAF_QPN, .hdr = res.hdr,
		};
		/* the partial carries data unless it is a copy whose root is
		 * under the other leaf */
		assert_int_equal(agg_hdr_has_data(&res.hdr),
				 !cs_copies(res.hdr.coll) ||
				 t->leaf_of[res.hdr.root] == m->idx);
		cs_send(n, TO_SPINE, 0, f, agg_encode(f, sizeof(f), &s, res.payload));
	}
}

/* Rank r receives a result; returns the packet index it completes, or -1. */
static int cs_host_input(struct cs_net *n, uint8_t coll, int seq, const struct cs_msg *m,
			 bool got[CS_N][CS_PKTS])
{
	struct agg_pkt pkt;
	uint8_t want[CS_E * 4];
	int r = m->idx;

	assert_int_equal(decode_in(m->frame, m->len, &pkt), 0);
	if (pkt.hdr.type == AGG_TYPE_WAIT) {
		n->waits_down++;      /* a sign of life: the packet goes again on its timer */
		return -1;
	}
	int k = (int)pkt.hdr.pkt_idx;
	if (pkt.hdr.coll_seq != (uint32_t)seq || got[r][k])
		return -1;        /* late or duplicate */
	uint16_t root = cs_root(coll, k);
	bool data = coll == AGG_COLL_ALLREDUCE || (cs_copies(coll) ? root != r : root == r);
	assert_int_equal(pkt.hdr.coll, coll);
	assert_int_equal(pkt.hdr.root, coll ? root : 0);
	assert_int_equal(pkt.hdr.count, CS_E);
	assert_int_equal(pkt.hdr.fanin, CS_N);
	assert_int_equal(agg_hdr_has_data(&pkt.hdr), data);
	got[r][k] = true;
	if (!data) {
		assert_int_equal(pkt.payload_len, 0);
		n->no_data_results++;
		return k;
	}
	n->data_results++;
	if (cs_copies(coll)) {
		cs_elems(coll, seq, root, k, want);
		assert_memory_equal(pkt.payload, want, CS_E * 2);
	} else {
		for (int j = 0; j < CS_E; j++) {
			float sum = 0, got_v;
			for (int rr = 0; rr < CS_N; rr++) {
				float x;
				cs_elems(coll, seq, rr, k, want);
				memcpy(&x, want + 4 * j, 4);
				sum += x;
			}
			memcpy(&got_v, pkt.payload + 4 * j, 4);
			assert_true(got_v == sum);
		}
	}
	return k;
}

static void cs_run(int nleaves)
{
	static struct cs_net net;
	static bool got[CS_N][CS_PKTS], sent[CS_N][CS_PKTS];
	struct cs_tree t;
	uint32_t base_g = 0;
	uint64_t steps = 0, timeouts = 0;
	int seq = 0;

	memset(&net, 0, sizeof(net));
	cs_tree_build(&t, nleaves);
	/* every collective twice, all-reduce between them */
	static const uint8_t order[] = { 1, 2, 3, 4, 0, 4, 3, 2, 1 };
	for (size_t o = 0; o < sizeof(order); o++) {
		uint8_t coll = order[o];

		seq++;
		memset(got, 0, sizeof(got));
		memset(sent, 0, sizeof(sent));
		for (int r = 0; r < CS_N; r++)
			for (int k = 0; k < CS_W; k++) {
				cs_host_send(&net, &t, coll, seq, r, base_g + (uint32_t)k, k, false);
				sent[r][k] = true;
			}
		for (;;) {
			assert_true(++steps < 4000000);
			if (net.nq == 0) {
				bool all = true;
				timeouts++;
				for (int r = 0; r < CS_N; r++)
					for (int k = 0; k < CS_PKTS; k++)
						if (sent[r][k] && !got[r][k]) {
							all = false;
							cs_host_send(&net, &t, coll, seq, r,
								     base_g + (uint32_t)k, k, true);
						}
				if (all)
					break;
				continue;
			}
			/* a host's timer fires while its packets are still in
			 * flight: its retransmission races them (and with
			 * messages taken in any order, old copies come late) */
			if (test_rand_below(32) == 0) {
				int r = (int)test_rand_below(CS_N);
				for (int k = 0; k < CS_PKTS; k++)
					if (sent[r][k] && !got[r][k]) {
						cs_host_send(&net, &t, coll, seq, r,
							     base_g + (uint32_t)k, k, true);
						net.early_retx++;
						break;
					}
			}
			int i = (int)test_rand_below((uint32_t)net.nq);
			struct cs_msg m = net.q[i];
			net.q[i] = net.q[--net.nq];
			if (m.to != TO_HOST) {
				cs_switch_input(&net, &t, &m);
				continue;
			}
			int k = cs_host_input(&net, coll, seq, &m, got);
			if (k >= 0 && k + CS_W < CS_PKTS) {
				cs_host_send(&net, &t, coll, seq, m.idx,
					     base_g + (uint32_t)(k + CS_W), k + CS_W, false);
				sent[m.idx][k + CS_W] = true;
			}
		}
		base_g += CS_PKTS;
	}
	/* per use: reduce 1 rank with data, reduce-scatter 1, allgather and
	 * bcast all but the owner, all-reduce all (4 uses of the first two, 4
	 * of the copies) */
	uint64_t uses = (uint64_t)CS_PKTS * sizeof(order);
	assert_int_equal(net.data_results + net.no_data_results, uses * CS_N);
	assert_int_equal(net.no_data_results, (uint64_t)CS_PKTS * 4 * (CS_N - 1) +
					      (uint64_t)CS_PKTS * 4);
	struct agg_group *all[3] = { t.leaf[0], t.leaf[1], t.spine };
	for (int i = 0; i < 3; i++) {
		if (!all[i])
			continue;
		const struct agg_group_stats *st = agg_group_stats(all[i]);
		for (int d = 1; d < AGG_E__COUNT; d++)
			if (d != AGG_E_STALE && st->drops[d])
				fail_msg("switch %d: %llu %s drops", i,
					 (unsigned long long)st->drops[d], agg_errname(-d));
		assert_int_equal(st->completions, uses);
		assert_int_equal(st->preempted, 0);
		agg_group_destroy(all[i]);
	}
	printf("# %d level(s): %llu lost, %llu duplicated, %llu timeouts, %llu early "
	       "retransmissions, %llu WAITs to hosts, %llu results with data, %llu without\n",
	       nleaves, (unsigned long long)net.lost, (unsigned long long)net.duplicated,
	       (unsigned long long)timeouts, (unsigned long long)net.early_retx,
	       (unsigned long long)net.waits_down, (unsigned long long)net.data_results,
	       (unsigned long long)net.no_data_results);
	assert_true(net.lost > 0 && net.duplicated > 0 && net.early_retx > 0);
}

/* In a tree, the parent's result comes down with data to the leaf that
 * owns a reduce's root and without to the other; the leaf passes data on
 * to the root only. The wrong presence, collective or root is refused. */
static void test_coll_tree_results(void **state)
{
	uint8_t f[AGG_MAX_FRAME_LEN], down[2][AGG_MAX_FRAME_LEN];
	struct agg_pkt p, pd[2];
	struct agg_result r;
	struct cs_tree t;
	int downlen[2];

	(void)state;
	cs_tree_build(&t, 2);
	/* reduce to rank 4: leaf 1's member 2 */
	for (int rank = 0; rank < CS_N; rank++) {
		int l = t.leaf_of[rank];
		decode_ok(f, cs_host_frame(&t, AGG_COLL_REDUCE, 1, rank, 0, 0, false, f,
					   sizeof(f)), &p);
		int v = agg_group_ingest(t.leaf[l], &p, &r, NULL);
		assert_int_equal(v, t.index_of[rank] == 2 ? AGG_V_UPSTREAM : AGG_V_ACCEPTED);
		if (v != AGG_V_UPSTREAM)
			continue;
		assert_int_equal(r.hdr.flags, AGG_FLAG_COLL);   /* with data */
		struct agg_frame_spec s = {
			.src_ip = LEAF_IP(l), .dst_ip = SPINE_IP, .dest_qp = SPINE_QPN,
			.qkey = SPINE_QKEY, .src_qp = LEAF_QPN, .hdr = r.hdr,
		};
		decode_ok(f, agg_encode(f, sizeof(f), &s, r.payload), &p);
		/* rank 4 completes leaf 1, then rank 5 leaf 0 */
		assert_int_equal(agg_group_ingest(t.spine, &p, &r, NULL),
				 l == 0 ? AGG_V_COMPLETE : AGG_V_ACCEPTED);
	}
	assert_int_equal(r.owner, 1);
	struct agg_result_l2 l2 = { .switch_ip = SPINE_IP };
	for (int l = 0; l < 2; l++) {
		downlen[l] = agg_result_encode(t.spine, (uint16_t)l, &r, &l2, NULL, down[l],
					       AGG_MAX_FRAME_LEN);
		decode_ok(down[l], downlen[l], &pd[l]);
		assert_int_equal(agg_hdr_has_data(&pd[l].hdr), l == 1);
	}
	/* each leaf refuses the other's */
	for (int l = 0; l < 2; l++)
		assert_int_equal(agg_group_parent_result(t.leaf[l], &pd[!l], &r),
				 -AGG_E_COLL_DATA);
	p = pd[1];
	p.hdr.root = 5;
	assert_int_equal(agg_group_parent_result(t.leaf[1], &p, &r), -AGG_E_MISMATCH);
	p.hdr.root = 4;
	p.hdr.coll = AGG_COLL_REDUCE_SCATTER;
	assert_int_equal(agg_group_parent_result(t.leaf[1], &p, &r), -AGG_E_MISMATCH);
	for (int l = 0; l < 2; l++) {
		assert_int_equal(agg_group_stats(t.leaf[l])->drops[AGG_E_COLL_DATA], 1);
		assert_int_equal(agg_group_parent_result(t.leaf[l], &pd[l], &r), AGG_V_COMPLETE);
		assert_int_equal(r.hdr.rank, 0);
		assert_int_equal(r.owner, l == 1 ? 2 : AGG_NO_MEMBER);
		struct agg_result_l2 ll2 = { .switch_ip = LEAF_IP(l) };
		for (uint16_t m = 0; m < 3; m++) {
			bool data = l == 1 && m == 2;
			int len = agg_result_encode(t.leaf[l], m, &r, &ll2, NULL, f, sizeof(f));
			decode_ok(f, len, &p);
			assert_int_equal(agg_hdr_has_data(&p.hdr), data);
			assert_int_equal(p.hdr.root, 4);
			assert_int_equal(p.hdr.fanin, CS_N);
			if (data) {
				float x;
				memcpy(&x, p.payload, 4);
				/* element 0: sum over ranks of 7 r + 3 */
				assert_true(x == (float)(7 * 15 + 3 * CS_N));
			}
		}
	}

	/* allgather of rank 3's shard (leaf 0, member 1), packet 1: leaf 1
	 * sends up nothing, the spine sends leaf 1 the shard and leaf 0, which
	 * has it, a result without data; leaf 0 sends the shard to its members
	 * but rank 3 */
	for (int rank = 0; rank < CS_N; rank++) {
		int l = t.leaf_of[rank];
		decode_ok(f, cs_host_frame(&t, AGG_COLL_ALLGATHER, 2, rank, 1, 3, false, f,
					   sizeof(f)), &p);
		int v = agg_group_ingest(t.leaf[l], &p, &r, NULL);
		if (v != AGG_V_UPSTREAM)
			continue;
		assert_int_equal(agg_hdr_has_data(&r.hdr), l == 0);
		assert_int_equal(r.payload_len, l == 0 ? CS_E * 2 : 0);
		struct agg_frame_spec s = {
			.src_ip = LEAF_IP(l), .dst_ip = SPINE_IP, .dest_qp = SPINE_QPN,
			.qkey = SPINE_QKEY, .src_qp = LEAF_QPN, .hdr = r.hdr,
		};
		decode_ok(f, agg_encode(f, sizeof(f), &s, r.payload), &p);
		/* rank 4 completes leaf 1, then rank 5 leaf 0 */
		assert_int_equal(agg_group_ingest(t.spine, &p, &r, NULL),
				 l == 0 ? AGG_V_COMPLETE : AGG_V_ACCEPTED);
	}
	assert_true(r.data_to_all && r.not_owner);
	assert_int_equal(r.owner, 0);
	uint8_t want[CS_E * 2];
	cs_elems(AGG_COLL_ALLGATHER, 2, 3, 3, want);
	assert_memory_equal(r.payload, want, sizeof(want));
	downlen[0] = agg_result_encode(t.spine, 0, &r, &l2, NULL, down[0], AGG_MAX_FRAME_LEN);
	decode_ok(down[0], downlen[0], &pd[0]);
	assert_false(agg_hdr_has_data(&pd[0].hdr));
	downlen[1] = agg_result_encode(t.spine, 1, &r, &l2, NULL, down[1], AGG_MAX_FRAME_LEN);
	decode_ok(down[1], downlen[1], &p);
	/* leaf 0 takes the result without the shard (it has it); the same
	 * with the shard, as a parent from before that rule sends it, is
	 * taken too (here a duplicate: not dropped as COLL_DATA) */
	assert_int_equal(agg_group_parent_result(t.leaf[0], &pd[0], &r), AGG_V_COMPLETE);
	struct agg_result_l2 l0 = { .switch_ip = LEAF_IP(0) };
	for (uint16_t m = 0; m < 3; m++) {
		struct agg_pkt q;
		decode_ok(f, agg_result_encode(t.leaf[0], m, &r, &l0, NULL, f, sizeof(f)), &q);
		assert_int_equal(agg_hdr_has_data(&q.hdr), m != 1);
		assert_int_equal(q.payload_len, m != 1 ? CS_E * 2 : 0);
		if (m != 1)
			assert_memory_equal(q.payload, want, sizeof(want));
	}
	assert_int_equal(agg_group_parent_result(t.leaf[0], &p, &r), AGG_V_DUPLICATE);
	assert_int_equal(agg_group_stats(t.leaf[0])->drops[AGG_E_COLL_DATA], 1);
	/* without its data the result is refused */
	struct agg_pkt empty = p;
	empty.hdr.flags |= AGG_FLAG_NO_DATA;
	empty.payload_len = 0;
	assert_int_equal(agg_group_parent_result(t.leaf[1], &empty, &r), -AGG_E_COLL_DATA);
	assert_int_equal(agg_group_parent_result(t.leaf[1], &p, &r), AGG_V_COMPLETE);
	struct agg_result_l2 ll2 = { .switch_ip = LEAF_IP(1) };
	for (uint16_t m = 0; m < 3; m++) {
		decode_ok(f, agg_result_encode(t.leaf[1], m, &r, &ll2, NULL, f, sizeof(f)), &p);
		assert_int_equal(p.payload_len, CS_E * 2);
		assert_memory_equal(p.payload, want, sizeof(want));
	}
	for (int l = 0; l < 2; l++)
		agg_group_destroy(t.leaf[l]);
	agg_group_destroy(t.spine);
}

static void test_coll_lossy_network(void **state)
{
	(void)state;
	test_seed_init("coll_lossy_network");
	cs_run(1);
	cs_run(2);
}

/*
 * The switch's path (agg_decode_lazy): a contribution whose ICRC is wrong
 * is refused as -AGG_E_ICRC wherever ingest would have looked at it, and
 * leaves the set as it was: not counted in the group's drops, no use
 * opened or preempted by its corrupted key, the accumulator untouched. The
 * same frame made right is then taken, and the sums are exact. 4 KiB of
 * fp32, int32, fp16 and bf16 (whose last member's pass rounds the result
 * into the wire's format), the sizes the one-pass kernels take.
 */
static void test_icrc_in_reducing_pass(void **state)
{
	struct agg_group_config cfg = base_cfg();
	const char *why = NULL;
	struct agg_group_stats st;
	struct agg_result res;
	static struct contrib c;
	static float fv[1024];
	static int32_t iv[1024];
	static uint16_t hv[2048];
	static const uint8_t dts[] = { AGG_DTYPE_FP32, AGG_DTYPE_INT32, AGG_DTYPE_FP16,
				       AGG_DTYPE_BF16 };
	uint64_t one_pass = 0;

	(void)state;
	cfg.elems_per_pkt = 2048;
	struct agg_group *g = agg_group_create(&cfg, &why);
	assert_non_null(g);
	for (int round = 0; round < 4; round++) {
		uint8_t dt = dts[round];
		bool half = round >= 2;
		uint16_t count = half ? 2048 : 1024;
		uint32_t seq = 5 + (uint32_t)round;

		for (int m = 0; m < NM; m++) {
			const void *pl = round == 0 ? (const void *)fv :
					 round == 1 ? (const void *)iv : (const void *)hv;
			for (int i = 0; i < 1024; i++) {
				fv[i] = (float)(m * 1000 - i);
				iv[i] = m * 1000 - i;
			}
			/* (m + 1) / 2 - (i % 16) / 4: exact in fp16 and bf16,
			 * and so are their sums */
			for (int i = 0; i < 2048; i++) {
				float h = (float)(m + 1) * 0.5f - (float)(i % 16) * 0.25f;
				hv[i] = dt == AGG_DTYPE_FP16 ? agg_fp32_to_fp16(h) : agg_fp32_to_bf16(h);
			}
			mk(&c, (uint16_t)m, dt, AGG_OP_SUM, count, 1, false, seq, 0, pl);
			size_t len = c.pkt.frame_len;
			size_t pay = (size_t)(c.pkt.payload - c.frame);
			/* a payload bit, the INCA header's coll_seq (a newer
			 * use), its rank (another member, or none), the BTH's
			 * QPN (refused before the set); its count (the decoder
			 * checks the ICRC before it says the count is wrong) */
			size_t at[5] = { pay + 4 * (size_t)(m * 97 % 1024) + 1,
					 pay - AGG_INCA_HLEN + 23, pay - AGG_INCA_HLEN + 13,
					 (size_t)c.pkt.bth_off + 7, pay - AGG_INCA_HLEN + 7 };
			for (int f = 0; f < 5; f++) {
				struct agg_pkt bad;

				c.frame[at[f]] ^= 0x04;
				if (f == 4) {
					assert_int_equal(agg_decode_lazy(c.frame, len, &bad),
							 -AGG_E_ICRC);
				} else {
					assert_int_equal(agg_decode_lazy(c.frame, len, &bad), 0);
					assert_true(bad.icrc_pending);
					assert_int_equal(agg_group_ingest(g, &bad, &res, NULL),
							 -AGG_E_ICRC);
				}
				c.frame[at[f]] ^= 0x04;
			}
			assert_int_equal(agg_decode_lazy(c.frame, len, &c.pkt), 0);
			assert_int_equal(agg_group_ingest(g, &c.pkt, &res, NULL),
					 m == NM - 1 ? AGG_V_COMPLETE : AGG_V_ACCEPTED);
		}
		for (int i = 0; half && i < 2048; i++) {
			/* sum over m: 18 - 2 (i % 16) */
			uint16_t v;
			memcpy(&v, res.payload + 2 * i, 2);
			float f = dt == AGG_DTYPE_FP16 ? agg_fp16_to_fp32(v) : agg_bf16_to_fp32(v);
			assert_true(f == (float)(18 - 2 * (i % 16)));
		}
		for (int i = 0; !half && i < 1024; i++) {
			/* sum over m of m * 1000 - i: 28000 - 8 i */
			if (round) {
				int32_t v;
				memcpy(&v, res.payload + 4 * i, 4);
				assert_int_equal(v, 28000 - 8 * i);
			} else {
				float v;
				memcpy(&v, res.payload + 4 * i, 4);
				assert_true(v == (float)(28000 - 8 * i));
			}
		}
		/* the one pass took every contribution where this CPU has
		 * the kernels (the first member's load, the others' sums) */
		one_pass += agg_icrc_reduce_available((enum agg_dtype)dt, AGG_OP_SUM, true) +
			    (NM - 1) * agg_icrc_reduce_available((enum agg_dtype)dt, AGG_OP_SUM,
								 false);
		agg_group_stats_sum(g, &st);
		assert_int_equal(st.one_pass, one_pass);
		assert_int_equal(st.contributions, (uint64_t)NM * (round + 1));
		assert_int_equal(st.completions, (uint64_t)round + 1);
		assert_int_equal(st.preempted, 0);
		for (int d = 0; d < AGG_E__COUNT; d++)
			assert_int_equal(st.drops[d], 0);
	}
	agg_group_destroy(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_complete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_and_retransmit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_result_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_result_shared_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drop_reasons, setup, teardown),
		cmocka_unit_test(test_dtype_mask),
		cmocka_unit_test_setup_teardown(test_shadow_sets_and_stale, setup, teardown),
		cmocka_unit_test(test_fanin_hierarchy),
		cmocka_unit_test(test_config_validation),
		cmocka_unit_test(test_reproducible_orders),
		cmocka_unit_test(test_lossy_network),
		cmocka_unit_test(test_two_level_tree),
		cmocka_unit_test_setup_teardown(test_coll_reduce, setup, teardown),
		cmocka_unit_test(test_coll_copy),
		cmocka_unit_test_setup_teardown(test_coll_drops, setup, teardown),
		cmocka_unit_test(test_rank_map),
		cmocka_unit_test(test_coll_tree_results),
		cmocka_unit_test(test_coll_lossy_network),
		cmocka_unit_test(test_icrc_in_reducing_pass),
	};
	int failed = cmocka_run_group_tests_name("table", tests, NULL, NULL);

	lazy_icrc = true;
	failed += cmocka_run_group_tests_name("table, the ICRC checked in the reducing pass",
					      tests, NULL, NULL);
	return failed;
}
