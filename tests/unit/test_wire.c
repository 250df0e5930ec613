/* SPDX-License-Identifier: BSD-3-Clause */
/* Encoder/decoder: round trips and one crafted frame per error code. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

#define L3 14                      /* untagged frames */
#define BTH (L3 + 20 + 8)
#define DETH (BTH + 12)
#define INCA (DETH + 8)

static uint8_t payload[4096];

static int build(uint8_t *f, size_t cap, uint8_t dtype, uint16_t count)
{
	struct agg_frame_spec s = test_spec(dtype, AGG_OP_SUM, count);

	return agg_encode(f, cap, &s, payload);
}

static void test_roundtrip_all_dtypes(void **state)
{
	uint8_t f[AGG_MAX_FRAME_LEN];
	struct agg_pkt pkt;

	(void)state;
	test_seed_init("roundtrip_all_dtypes");
	test_rand_bytes(payload, sizeof(payload));
	for (int dt = 0; dt < AGG_DTYPE_COUNT; dt++) {
		size_t es = agg_dtype_size(dt);
		uint16_t counts[] = { 1, 2, 3, 5, 255, 256, 257,
				      (uint16_t)(AGG_MAX_PAYLOAD / es) };

		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			struct agg_frame_spec s = test_spec(dt, AGG_OP_MAX, counts[c]);
			size_t elems = counts[c] * es, pad = (4 - elems % 4) % 4;

			s.hdr.flags = AGG_FLAG_SHADOW_SET | AGG_FLAG_RETRANSMIT;
			s.hdr.rank = 3;
			s.hdr.fanin = 9;
			s.hdr.slot = 17;
			s.hdr.coll_seq = 0xfffffffe;
			s.hdr.pkt_idx = 123456;
			int len = agg_encode(f, sizeof(f), &s, payload);
			assert_int_equal(len, AGG_FRAME_HDR_LEN + elems + pad + 4);
			assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), 0);
			assert_int_equal(pkt.kind, AGG_PKT_INCA);
			assert_int_equal(pkt.pad, pad);
			assert_int_equal(pkt.payload_len, elems);
			assert_ptr_equal(pkt.payload, f + AGG_FRAME_HDR_LEN);
			assert_memory_equal(pkt.payload, payload, elems);
			assert_int_equal(pkt.hdr.dtype, dt);
			assert_int_equal(pkt.hdr.op, AGG_OP_MAX);
			assert_int_equal(pkt.hdr.count, counts[c]);
			assert_int_equal(pkt.hdr.flags, 3);
			assert_int_equal(pkt.hdr.rank, 3);
			assert_int_equal(pkt.hdr.fanin, 9);
			assert_int_equal(pkt.hdr.slot, 17);
			assert_int_equal(pkt.hdr.coll_seq, 0xfffffffe);
			assert_int_equal(pkt.hdr.pkt_idx, 123456);
			assert_int_equal(pkt.hdr.group_id, 42);
			assert_int_equal(pkt.dest_qp, 0x123456);
			assert_int_equal(pkt.src_qp, 0x100);
			assert_int_equal(pkt.qkey, 0xdeadbeef);
			assert_int_equal(pkt.psn, 7);
			assert_int_equal(pkt.pkey, 0xffff);
			assert_int_equal(pkt.src_ip, 0x0a000001);
			assert_int_equal(pkt.dst_ip, 0x0a0000fe);
			assert_int_equal(pkt.dscp, 26);
			assert_int_equal(pkt.ecn, 2);
			assert_int_equal(pkt.udp_dport, 4791);
			/* fixed bytes the protocol promises */
			assert_int_equal(f[L3 + 4], 0);        /* IP ID 0 */
			assert_int_equal(f[L3 + 5], 0);
			assert_int_equal(f[L3 + 6], 0x40);     /* DF */
			assert_int_equal(f[BTH], 0x64);
			assert_int_equal(f[BTH + 1], pad << 4);
		}
	}
}

static void test_vlan_and_immediate(void **state)
{
	uint8_t f[AGG_MAX_FRAME_LEN];
	struct agg_frame_spec s = test_spec(AGG_DTYPE_INT32, AGG_OP_BXOR, 10);
	struct agg_pkt pkt, pkt2;
	int len;

	(void)state;
	s.has_vlan = true;
	s.vlan_tci = (3 << 13) | 100;
	s.opcode = AGG_OP_UD_SEND_ONLY_IMM;
	s.imm = 0xcafef00d;
	len = agg_encode(f, sizeof(f), &s, payload);
	assert_int_equal(len, AGG_FRAME_HDR_LEN + 4 + 4 + 40 + 4);
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), 0);
	assert_true(pkt.has_vlan);
	assert_int_equal(pkt.vlan_tci, (3 << 13) | 100);
	assert_int_equal(pkt.l3_off, 18);
	assert_true(pkt.has_imm);
	assert_int_equal(pkt.imm, 0xcafef00d);
	assert_int_equal(pkt.hdr.count, 10);
	assert_int_equal(pkt.hdr.op, AGG_OP_BXOR);

	/* what a UDP socket sees: from the BTH on */
	assert_int_equal(agg_decode_bth(f + pkt.bth_off, (size_t)len - pkt.bth_off,
					&pkt2), 0);
	assert_int_equal(pkt2.hdr.count, 10);
	assert_int_equal(pkt2.imm, 0xcafef00d);
	assert_int_equal(pkt2.payload_len, 40);
	assert_int_equal(pkt2.icrc, pkt.icrc);
}

static void test_ethernet_padding_accepted(void **state)
{
	uint8_t f[AGG_MAX_FRAME_LEN] = { 0 };
	struct agg_pkt pkt;
	int len = build(f, sizeof(f), AGG_DTYPE_FP16, 1);

	(void)state;
	/* bytes after the IPv4 datagram are Ethernet padding */
	assert_int_equal(agg_decode(f, (size_t)len + 6, true, &pkt), 0);
	assert_int_equal(pkt.payload_len, 2);
	assert_int_equal(pkt.pad, 2);
}

/* Every prefix of a valid frame is refused, and never read beyond: each
 * length gets a buffer of exactly that size (ASan catches over-reads). */
static void test_every_truncation_refused(void **state)
{
	uint8_t f[AGG_MAX_FRAME_LEN];
	struct agg_pkt pkt;
	int len = build(f, sizeof(f), AGG_DTYPE_FP32, 7);

	(void)state;
	for (int n = 0; n < len; n++) {
		uint8_t *copy = malloc(n ? (size_t)n : 1);

		memcpy(copy, f, (size_t)n);
		assert_true(agg_decode(copy, (size_t)n, true, &pkt) < 0);
		free(copy);
	}
}

struct corruption {
	const char *what;
	size_t off;       /* byte to set */
	uint8_t value;
	bool refresh;     /* recompute IP checksum and ICRC afterwards */
	int expect;
	bool flip;        /* XOR value in instead: the byte is random (payload) and
			     may already hold value */
};

static void test_each_error_code(void **state)
{
	static const struct corruption cases[] = {
		{ "arp ethertype", 12, 0x08, false, 0 }, /* placeholder, see below */
		{ "ip version 6", L3, 0x65, true, -AGG_E_IP_VERSION },
		{ "ip options", L3, 0x46, true, -AGG_E_IP_OPTIONS },
		{ "ip total length", L3 + 2, 0x7f, true, -AGG_E_IP_LEN },
		{ "fragment (MF)", L3 + 6, 0x20, true, -AGG_E_IP_FRAG },
		{ "ip checksum", L3 + 10, 0x00, false, -AGG_E_IP_CSUM },
		{ "tcp", L3 + 9, 6, true, -AGG_E_NOT_UDP },
		{ "udp length", L3 + 20 + 5, 0x10, true, -AGG_E_UDP_LEN },
		{ "udp port", L3 + 20 + 3, 0xb8, true, -AGG_E_NOT_ROCE },
		{ "bth tver", BTH + 1, 0x01, true, -AGG_E_BTH_TVER },
		{ "rc send", BTH, 0x04, true, -AGG_E_BTH_OPCODE },
		{ "cnp with body", BTH, 0x81, true, -AGG_E_CNP_LEN },
		{ "payload bit flip", INCA + 32 + 3, 0x99, false, -AGG_E_ICRC, true },
		{ "qkey bit flip", DETH, 0x00, false, -AGG_E_ICRC },
		{ "version 2", INCA, 2, true, -AGG_E_VERSION },
		{ "type 9", INCA + 1, 9, true, -AGG_E_TYPE },
		{ "type 5 (after WAIT)", INCA + 1, 5, true, -AGG_E_TYPE },
		{ "type 0", INCA + 1, 0, true, -AGG_E_TYPE },
		{ "dtype 6", INCA + 2, 6, true, -AGG_E_DTYPE },
		{ "op 7", INCA + 3, 7, true, -AGG_E_OP },
		{ "band on fp32", INCA + 3, AGG_OP_BAND, true, -AGG_E_OP_DTYPE },
		{ "flags 0x80", INCA + 4, 0x80, true, -AGG_E_FLAGS },
		{ "COLL flag on an all-reduce", INCA + 4, AGG_FLAG_COLL, true, -AGG_E_COLL },
		{ "NO_DATA without COLL", INCA + 4, AGG_FLAG_NO_DATA, true, -AGG_E_COLL },
		{ "count 8 for 7", INCA + 7, 8, true, -AGG_E_COUNT },
		{ "count 0", INCA + 7, 0, true, -AGG_E_COUNT },
		{ "pad 1", BTH + 1, 0x10, true, -AGG_E_COUNT },
		{ "fanin 0", INCA + 15, 0, true, -AGG_E_FANIN },
	};
	uint8_t f[AGG_MAX_FRAME_LEN];
	struct agg_pkt pkt;

	(void)state;
	for (size_t i = 1; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct corruption *c = &cases[i];
		int len = build(f, sizeof(f), AGG_DTYPE_FP32, 7);

		if (c->flip)
			f[c->off] ^= c->value;
		else
			f[c->off] = c->value;
		if (c->refresh)
			test_refresh(f, L3, sizeof(f));
		int rc = agg_decode(f, (size_t)len, true, &pkt);
		if (rc != c->expect)
			fail_msg("%s: got %d (%s), want %d (%s)", c->what, rc,
				 agg_errname(rc), c->expect, agg_errname(c->expect));
		/* the switch's decoder: the same, but a wrong ICRC alone is
		 * found by whoever checks it later */
		rc = agg_decode_lazy(f, (size_t)len, &pkt);
		if (c->expect == -AGG_E_ICRC) {
			assert_int_equal(rc, 0);
			assert_true(pkt.icrc_pending);
			assert_int_equal(agg_pkt_icrc_check(&pkt), -AGG_E_ICRC);
			assert_false(pkt.icrc_pending);
		} else if (rc != c->expect) {
			fail_msg("%s, lazy: got %d (%s), want %d (%s)", c->what, rc,
				 agg_errname(rc), c->expect, agg_errname(c->expect));
		}
	}
	/* unharmed: pending, then checked good */
	int len = build(f, sizeof(f), AGG_DTYPE_FP32, 7);
	assert_int_equal(agg_decode_lazy(f, (size_t)len, &pkt), 0);
	assert_true(pkt.icrc_pending);
	assert_int_equal(agg_pkt_icrc_check(&pkt), 0);
	assert_false(pkt.icrc_pending);
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), 0);
	assert_false(pkt.icrc_pending);
}

/* The collective fields: coll (byte 5) and root (bytes 18-19) mean
 * something only with the COLL flag; NO_DATA packets end after the header. */
static void test_collective_header(void **state)
{
	uint8_t f[AGG_MAX_FRAME_LEN], msg[64];
	struct agg_pkt pkt;
	struct agg_hdr h;
	const uint8_t *pl;
	int len;

	(void)state;
	/* a bcast contribution without data: header and ICRC only */
	struct agg_frame_spec s = test_spec(AGG_DTYPE_FP16, AGG_OP_SUM, 701);
	s.hdr.flags = AGG_FLAG_COLL | AGG_FLAG_NO_DATA | AGG_FLAG_SHADOW_SET;
	s.hdr.coll = AGG_COLL_BCAST;
	s.hdr.root = 0x1234;
	len = agg_encode(f, sizeof(f), &s, NULL);
	assert_int_equal(len, AGG_FRAME_HDR_LEN + 4);
	assert_int_equal(f[BTH + 1] >> 4 & 3, 0);          /* PadCnt 0 */
	assert_int_equal(f[INCA + 5], AGG_COLL_BCAST);
	assert_int_equal(f[INCA + 18], 0x12);
	assert_int_equal(f[INCA + 19], 0x34);
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), 0);
	assert_int_equal(pkt.hdr.coll, AGG_COLL_BCAST);
	assert_int_equal(pkt.hdr.root, 0x1234);
	assert_int_equal(pkt.hdr.count, 701);
	assert_int_equal(pkt.hdr.flags, AGG_FLAG_COLL | AGG_FLAG_NO_DATA | AGG_FLAG_SHADOW_SET);
	assert_false(agg_hdr_has_data(&pkt.hdr));
	assert_int_equal(pkt.payload_len, 0);
	assert_int_equal(pkt.pad, 0);
	/* as an RDMA receive sees it */
	memcpy(msg, f + INCA, AGG_INCA_HLEN);
	assert_int_equal(agg_decode_msg(msg, AGG_INCA_HLEN, &h, &pl), 0);
	assert_int_equal(h.coll, AGG_COLL_BCAST);
	assert_int_equal(h.root, 0x1234);
	/* elements after a NO_DATA header: a length error */
	assert_int_equal(agg_decode_msg(msg, AGG_INCA_HLEN + 2, &h, &pl), -AGG_E_COUNT);
	/* a reduce-scatter contribution with data: fields round-trip */
	s = test_spec(AGG_DTYPE_FP32, AGG_OP_SUM, 7);
	s.hdr.flags = AGG_FLAG_COLL;
	s.hdr.coll = AGG_COLL_REDUCE_SCATTER;
	s.hdr.root = 5;
	len = agg_encode(f, sizeof(f), &s, payload);
	assert_int_equal(len, AGG_FRAME_HDR_LEN + 28 + 4);
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), 0);
	assert_int_equal(pkt.hdr.coll, AGG_COLL_REDUCE_SCATTER);
	assert_int_equal(pkt.hdr.root, 5);
	assert_int_equal(pkt.payload_len, 28);
	/* every collective number past bcast is refused */
	for (unsigned c = AGG_COLL_COUNT; c < 256; c++) {
		f[INCA + 5] = (uint8_t)c;
		test_refresh(f, L3, sizeof(f));
		assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), -AGG_E_COLL);
	}
	/* without the flag, coll and root are reserved: written 0, ignored */
	s = test_spec(AGG_DTYPE_FP32, AGG_OP_SUM, 7);
	s.hdr.coll = AGG_COLL_ALLGATHER;
	s.hdr.root = 9;
	len = agg_encode(f, sizeof(f), &s, payload);
	assert_int_equal(f[INCA + 5], 0);
	assert_int_equal(f[INCA + 18] | f[INCA + 19], 0);
	f[INCA + 5] = AGG_COLL_ALLGATHER;
	f[INCA + 19] = 9;
	test_refresh(f, L3, sizeof(f));
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), 0);
	assert_int_equal(pkt.hdr.coll, AGG_COLL_ALLREDUCE);
	assert_int_equal(pkt.hdr.root, 0);
}

static void test_layer_errors(void **state)
{
	uint8_t f[AGG_MAX_FRAME_LEN] = { 0 };
	struct agg_pkt pkt;
	int len;

	(void)state;
	assert_int_equal(agg_decode(f, 13, true, &pkt), -AGG_E_TRUNC_ETH);
	len = build(f, sizeof(f), AGG_DTYPE_FP32, 7);
	f[12] = 0x08;
	f[13] = 0x06;      /* ARP */
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), -AGG_E_NOT_IPV4);
	assert_memory_equal(pkt.src_mac, f + 6, 6);  /* L2 fields are filled */
	f[12] = 0x81;
	f[13] = 0x00;      /* VLAN tag cut short */
	assert_int_equal(agg_decode(f, 17, true, &pkt), -AGG_E_TRUNC_ETH);
	len = build(f, sizeof(f), AGG_DTYPE_FP32, 7);
	assert_int_equal(agg_decode(f, 14 + 19, true, &pkt), -AGG_E_TRUNC_IP);

	/* shorten the datagram (IP and UDP lengths agree) at each layer */
	static const struct { size_t roce; int expect; } cuts[] = {
		{ 15, -AGG_E_TRUNC_BTH },
		{ 23, -AGG_E_TRUNC_DETH },
		{ 24 + 31, -AGG_E_TRUNC_INCA },
	};
	for (size_t i = 0; i < 3; i++) {
		len = build(f, sizeof(f), AGG_DTYPE_FP32, 7);
		size_t ip_len = 20 + 8 + cuts[i].roce;

		f[L3 + 2] = (uint8_t)(ip_len >> 8);
		f[L3 + 3] = (uint8_t)ip_len;
		f[L3 + 24] = (uint8_t)((ip_len - 20) >> 8);
		f[L3 + 25] = (uint8_t)(ip_len - 20);
		test_refresh(f, L3, sizeof(f));
		assert_int_equal(agg_decode(f, L3 + ip_len, true, &pkt),
				 cuts[i].expect);
	}

	/* fp16, 3 elements: 6 bytes + PadCnt 2. PadCnt 0 with 2 bytes left
	 * over is a count error; PadCnt 2 with 4 more bytes is a pad error. */
	len = build(f, sizeof(f), AGG_DTYPE_FP16, 3);
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), 0);
	f[BTH + 1] = 0;
	test_refresh(f, L3, sizeof(f));
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), -AGG_E_COUNT);
	len = build(f, sizeof(f), AGG_DTYPE_FP16, 4);   /* 8 bytes, pad 0 */
	f[BTH + 1] = 0x20;
	f[INCA + 7] = 3;                                  /* 6 + 2 = 8 */
	test_refresh(f, L3, sizeof(f));
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), 0);
	len = build(f, sizeof(f), AGG_DTYPE_FP32, 2);   /* 8 bytes, pad 0 */
	f[BTH + 1] = 0x00;
	f[INCA + 2] = AGG_DTYPE_FP16;                     /* 2 elements: 4 B */
	f[INCA + 7] = 2;
	f[BTH + 1] = 0x30;                                /* 4 + 3 != 8 */
	test_refresh(f, L3, sizeof(f));
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), -AGG_E_COUNT);
	len = build(f, sizeof(f), AGG_DTYPE_FP32, 2);   /* 8 bytes, pad 0 */
	f[INCA + 2] = AGG_DTYPE_FP16;
	f[INCA + 7] = 3;                                  /* 6 bytes */
	f[BTH + 1] = 0x20;                                /* 6 + 2 = 8 */
	test_refresh(f, L3, sizeof(f));
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), 0);
	f[INCA + 2] = AGG_DTYPE_INT32;                    /* 12 B: too many */
	test_refresh(f, L3, sizeof(f));
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), -AGG_E_COUNT);

}

static void test_pad_error(void **state)
{
	uint8_t f[AGG_MAX_FRAME_LEN];
	struct agg_pkt pkt;
	struct agg_frame_spec s = test_spec(AGG_DTYPE_FP16, AGG_OP_SUM, 2);
	int len;

	(void)state;
	/* 2 fp16 = 4 bytes; claim PadCnt 3 and add 3 bytes: lengths agree,
	 * but 4-byte alignment needs no padding */
	len = agg_encode(f, sizeof(f), &s, payload);
	memmove(f + len - 4 + 3, f + len - 4, 4);
	memset(f + len - 4, 0, 3);
	len += 3;
	f[BTH + 1] = 0x30;
	size_t ip_len = (size_t)len - L3;
	f[L3 + 2] = (uint8_t)(ip_len >> 8);
	f[L3 + 3] = (uint8_t)ip_len;
	f[L3 + 24] = (uint8_t)((ip_len - 20) >> 8);
	f[L3 + 25] = (uint8_t)(ip_len - 20);
	test_refresh(f, L3, sizeof(f));
	assert_int_equal(agg_decode(f, (size_t)len, true, &pkt), -AGG_E_PAD);
}

static void test_encode_refuses(void **state)
{
	uint8_t f[AGG_MAX_FRAME_LEN];
	struct agg_frame_spec s = test_spec(AGG_DTYPE_FP32, AGG_OP_SUM, 16);

	(void)state;
	assert_int_equal(agg_encode(f, 100, &s, payload), -AGG_E_NOSPACE);
	s.hdr.dtype = 77;
	assert_int_equal(agg_encode(f, sizeof(f), &s, payload), -AGG_E_DTYPE);
	s = test_spec(AGG_DTYPE_FP64, AGG_OP_SUM, 513);   /* 4104 bytes */
	assert_int_equal(agg_encode(f, sizeof(f), &s, payload), -AGG_E_INVAL);
	s = test_spec(AGG_DTYPE_FP64, AGG_OP_SUM, 1);
	s.opcode = AGG_OP_CNP;
	assert_int_equal(agg_encode(f, sizeof(f), &s, payload), -AGG_E_INVAL);
}

static void test_decode_msg(void **state)
{
	uint8_t f[AGG_MAX_FRAME_LEN];
	struct agg_hdr h;
	const uint8_t *pl;
	int len = build(f, sizeof(f), AGG_DTYPE_FP16, 3);   /* 6 B + 2 pad */
	const uint8_t *msg = f + INCA;
	size_t mlen = 32 + 6;

	(void)state;
	assert_int_equal(agg_decode_msg(msg, mlen, &h, &pl), 0);
	assert_int_equal(h.count, 3);
	assert_ptr_equal(pl, msg + 32);
	assert_int_equal(agg_decode_msg(msg, mlen + 2, &h, &pl), -AGG_E_COUNT);
	assert_int_equal(agg_decode_msg(msg, mlen - 1, &h, &pl), -AGG_E_COUNT);
	assert_int_equal(agg_decode_msg(msg, 31, &h, &pl), -AGG_E_TRUNC_INCA);
	f[INCA + 2] = 9;
	assert_int_equal(agg_decode_msg(msg, mlen, &h, &pl), -AGG_E_DTYPE);
	f[INCA + 2] = AGG_DTYPE_FP16;
	f[INCA + 15] = 0;
	assert_int_equal(agg_decode_msg(msg, mlen, &h, &pl), -AGG_E_FANIN);
	(void)len;
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(agg_strerror(0), "success");
	assert_string_equal(agg_errname(-AGG_E_ICRC), "icrc");
	assert_string_equal(agg_strerror(-AGG_E_QKEY),
			    "Q_Key does not match the group's");
	assert_string_equal(agg_strerror(-9999), "unknown INCA aggregation error");
	assert_string_equal(agg_strerror(5), "unknown INCA aggregation error");
	for (int e = 1; e < AGG_E__COUNT; e++) {
		assert_true(strlen(agg_strerror(-e)) > 10);
		for (int k = 1; k < e; k++)
			assert_string_not_equal(agg_errname(-e), agg_errname(-k));
	}
	assert_int_equal(agg_dtype_parse("bf16"), AGG_DTYPE_BF16);
	assert_int_equal(agg_dtype_parse("FLOAT"), AGG_DTYPE_FP32);
	assert_int_equal(agg_dtype_parse("double"), AGG_DTYPE_FP64);
	assert_int_equal(agg_dtype_parse("int8"), -1);
	assert_int_equal(agg_op_parse("prod"), AGG_OP_PROD);
	assert_int_equal(agg_op_parse("avg"), -1);
	assert_string_equal(agg_dtype_name(AGG_DTYPE_INT64), "int64");
	assert_string_equal(agg_op_name(AGG_OP_BXOR), "bxor");
	assert_int_equal(agg_dtype_size(AGG_DTYPE_BF16), 2);
	assert_int_equal(agg_dtype_acc_size(AGG_DTYPE_BF16), 4);
	assert_int_equal(agg_dtype_size(99), 0);
	assert_int_equal(agg_op_check(AGG_DTYPE_FP64, AGG_OP_BOR), -AGG_E_OP_DTYPE);
	assert_int_equal(agg_op_check(AGG_DTYPE_INT64, AGG_OP_BOR), 0);
}

/* 802.1Qbb frames: exact bytes, round trip, every refusal. */
static void test_pfc(void **state)
{
	static const uint8_t src[6] = { 0x02, 0, 0, 0, 0, 0x09 };
	static const uint8_t want[AGG_PFC_MIN_LEN] = {
		0x01, 0x80, 0xc2, 0x00, 0x00, 0x01,  0x02, 0, 0, 0, 0, 0x09,
		0x88, 0x08,  0x01, 0x01,  0x00, 0x48,
		0, 0,  0, 0,  0, 0,  0xff, 0xff,  0, 0,  0, 0,  0x12, 0x34,  0, 0,
	};
	struct agg_pfc in = { .enable = 0x48, .quanta = { 7, 7, 7, 0xffff, 7, 7, 0x1234, 7 } };
	struct agg_pfc out;
	uint8_t f[AGG_PFC_FRAME_LEN + 8];

	(void)state;
	assert_int_equal(agg_pfc_encode(f, sizeof(f), src, &in), AGG_PFC_FRAME_LEN);
	assert_memory_equal(f, want, sizeof(want));
	for (size_t i = AGG_PFC_MIN_LEN; i < AGG_PFC_FRAME_LEN; i++)
		assert_int_equal(f[i], 0);
	assert_int_equal(agg_pfc_decode(f, AGG_PFC_FRAME_LEN, &out), 0);
	assert_int_equal(out.enable, 0x48);
	assert_int_equal(out.quanta[3], 0xffff);
	assert_int_equal(out.quanta[6], 0x1234);
	assert_int_equal(out.quanta[0], 0);     /* not enabled: 0 */
	assert_int_equal(agg_pfc_decode(f, AGG_PFC_MIN_LEN, &out), 0);
	assert_int_equal(agg_pfc_encode(f, AGG_PFC_FRAME_LEN - 1, src, &in), -AGG_E_NOSPACE);

	/* every truncation is refused without reading past the end */
	agg_pfc_encode(f, sizeof(f), src, &in);
	for (size_t len = 0; len < AGG_PFC_MIN_LEN; len++) {
		uint8_t *t = malloc(len ? len : 1);
		memcpy(t, f, len);
		assert_int_equal(agg_pfc_decode(t, len, &out), -AGG_PFC_E_SHORT);
		free(t);
	}
	f[15] = 0x01; f[14] = 0x00;           /* 802.3x PAUSE */
	assert_int_equal(agg_pfc_decode(f, 60, &out), -AGG_PFC_E_LINK_PAUSE);
	f[15] = 0x02;
	assert_int_equal(agg_pfc_decode(f, 60, &out), -AGG_PFC_E_BAD_OPCODE);
	f[14] = 0x01; f[15] = 0x01;
	f[17] = 0;
	assert_int_equal(agg_pfc_decode(f, 60, &out), -AGG_PFC_E_ZERO_VECTOR);
	f[17] = 0x08; f[16] = 0x01;
	assert_int_equal(agg_pfc_decode(f, 60, &out), -AGG_PFC_E_RESERVED);
	f[16] = 0;
	f[5] = 0x02;
	assert_int_equal(agg_pfc_decode(f, 60, &out), -AGG_PFC_E_BAD_DST);
	f[5] = 0x01; f[13] = 0x00;
	assert_int_equal(agg_pfc_decode(f, 60, &out), -AGG_PFC_E_NOT_CONTROL);
	assert_string_equal(agg_pfc_error_name(-AGG_PFC_E_ZERO_VECTOR), "zero_vector");
	assert_string_equal(agg_pfc_error_name(AGG_PFC_E__COUNT), "unknown");
	assert_string_equal(agg_pfc_strerror(-AGG_PFC_E_BAD_OPCODE),
			    "MAC control opcode is not PFC (0x0101)");
	/* 65535 quanta at 100 Mbit/s: 65535 * 512 bits = 335.5392 ms */
	assert_int_equal(agg_pfc_quanta_ns(0xffff, 100000000), 335539200);
	assert_int_equal(agg_pfc_quanta_ns(1, 10000000000ull), 51);
	assert_int_equal(agg_pfc_quanta_ns(5, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_all_dtypes),
		cmocka_unit_test(test_vlan_and_immediate),
		cmocka_unit_test(test_ethernet_padding_accepted),
		cmocka_unit_test(test_every_truncation_refused),
		cmocka_unit_test(test_each_error_code),
		cmocka_unit_test(test_collective_header),
		cmocka_unit_test(test_layer_errors),
		cmocka_unit_test(test_pad_error),
		cmocka_unit_test(test_encode_refuses),
		cmocka_unit_test(test_decode_msg),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_pfc),
	};
	return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
