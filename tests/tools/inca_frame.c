/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-frame: check or build INCA frames as hex lines, so independent
 * tools (scapy, tshark) can cross-check the aggregation library.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "inca/agg.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: inca-frame check          read hex frames (one per line) on stdin,\n"
		"                                 print 'ok KIND ICRC' or 'err NAME ICRC'\n"
		"       inca-frame build N SEED   print N random valid INCA frames as hex\n"
		"       inca-frame corpus DIR N SEED  write N random valid frames (and a\n"
		"                                 CNP) as files into DIR, for fuzzing\n"
		"       inca-frame --help\n");
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int check(void)
{
	static char line[2 * AGG_MAX_FRAME_LEN + 64];
	static uint8_t frame[AGG_MAX_FRAME_LEN + 32];
	unsigned long lineno = 0;
	int bad_input = 0;

	while (fgets(line, sizeof(line), stdin)) {
		size_t n = 0, len = strcspn(line, "\r\n");
		struct agg_pkt pkt;

		lineno++;
		if (len % 2 || len / 2 > sizeof(frame)) {
			fprintf(stderr, "inca-frame: line %lu: need an even number of "
				"hex digits, at most %zu bytes\n", lineno, sizeof(frame));
			bad_input = 1;
			printf("err input 0\n");
			continue;
		}
		for (size_t i = 0; i < len; i += 2) {
			int hi = hexval(line[i]), lo = hexval(line[i + 1]);
			if (hi < 0 || lo < 0) {
				fprintf(stderr, "inca-frame: line %lu: not hex at column %zu\n",
					lineno, i + 1);
				bad_input = 1;
				break;
			}
			frame[n++] = (uint8_t)(hi << 4 | lo);
		}
		if (n != len / 2) {
			printf("err input 0\n");
			continue;
		}
		int rc = agg_decode(frame, n, true, &pkt);
		uint32_t computed = 0;
		if (pkt.ip_len >= 20 + 8 + 16 && pkt.l3_off + pkt.ip_len <= n)
			computed = agg_icrc_ipv4(frame + pkt.l3_off, pkt.ip_len);
		if (rc == 0)
			printf("ok %s %08x\n", pkt.kind == AGG_PKT_CNP ? "cnp" : "inca",
			       computed);
		else
			printf("err %s %08x\n", agg_errname(rc), computed);
	}
	return bad_input;
}

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Print each frame as hex, or write it as DIR/frame-K when dir is set. */
static int emit(const char *dir, unsigned long k, const uint8_t *frame, int len)
{
	char path[4096];
	FILE *f;

	if (!dir) {
		for (int i = 0; i < len; i++)
			printf("%02x", frame[i]);
		printf("\n");
		return 0;
	}
	snprintf(path, sizeof(path), "%s/frame-%lu", dir, k);
	f = fopen(path, "wb");
	if (!f || fwrite(frame, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "inca-frame: %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return 1;
	}
	return fclose(f) ? 1 : 0;
}

static int build(unsigned long count, unsigned long long seed, const char *dir)
{
	static uint8_t frame[AGG_MAX_FRAME_LEN], payload[AGG_MAX_PAYLOAD];

	rng = seed ? seed : 1;
	for (unsigned long k = 0; k < count; k++) {
		uint8_t dtype = (uint8_t)(rnd() % AGG_DTYPE_COUNT);
		size_t es = agg_dtype_size(dtype);
		struct agg_frame_spec s = {
			.has_vlan = rnd() % 4 == 0,
			.vlan_tci = (uint16_t)rnd(),
			.src_ip = (uint32_t)rnd(),
			.dst_ip = (uint32_t)rnd(),
			.dscp = (uint8_t)(rnd() % 64),
			.ecn = (uint8_t)(rnd() % 4),
			.ttl = (uint8_t)(1 + rnd() % 255),
			.udp_sport = (uint16_t)(1 + rnd() % 65535),
			.opcode = rnd() % 3 == 0 ? AGG_OP_UD_SEND_ONLY_IMM
						 : AGG_OP_UD_SEND_ONLY,
			.pkey = (uint16_t)(1 + rnd() % 65535),
			.dest_qp = (uint32_t)rnd() & AGG_QPN_MASK,
			.psn = (uint32_t)rnd() & AGG_PSN_MASK,
			.solicited = rnd() & 1,
			.qkey = (uint32_t)rnd(),
			.src_qp = (uint32_t)rnd() & AGG_QPN_MASK,
			.imm = (uint32_t)rnd(),
			.hdr = {
				.version = AGG_VERSION,
				.type = AGG_TYPE_CONTRIB + rnd() % 2,
				.dtype = dtype,
				.op = agg_dtype_is_float(dtype) ? rnd() % 4 : rnd() % 7,
				.flags = (uint8_t)(rnd() % 8),
				.count = (uint16_t)(1 + rnd() % (AGG_MAX_PAYLOAD / es)),
				.group_id = (uint32_t)rnd(),
				.rank = (uint16_t)rnd(),
				.fanin = (uint16_t)(1 + rnd() % 1000),
				.slot = (uint16_t)rnd(),
				.coll_seq = (uint32_t)rnd(),
				.pkt_idx = (uint32_t)rnd(),
			},
		};
		if (rnd() % 2) {
			/* a contribution to a collective other than all-reduce,
			 * in a slot of the fuzz target's two-member group, from
			 * its member 0 (whose QPN it makes from the sender's with
			 * bit 1 set), at most its 64 elements a packet: its
			 * reduce, reduce-scatter, allgather and bcast sets can
			 * complete there (the COLL flag with an all-reduce is
			 * invalid) */
			s.hdr.type = AGG_TYPE_CONTRIB;
			s.hdr.count = (uint16_t)(1 + rnd() % 64);
			s.src_qp |= 2;
			s.hdr.flags |= AGG_FLAG_COLL;
			s.hdr.coll = (uint8_t)(1 + rnd() % (AGG_COLL_COUNT - 1));
			s.hdr.root = (uint16_t)(rnd() % 3);
			s.hdr.slot = (uint16_t)(rnd() % 2);
			s.hdr.rank = 0;
		}
		for (int i = 0; i < 6; i++) {
			s.dst_mac[i] = (uint8_t)rnd();
			s.src_mac[i] = (uint8_t)rnd();
		}
		s.src_mac[0] &= 0xfe;
		for (size_t i = 0; i < sizeof(payload); i++)
			payload[i] = (uint8_t)rnd();
		int len = agg_encode(frame, sizeof(frame), &s, payload);
		if (len < 0) {
			fprintf(stderr, "inca-frame: encode: %s\n", agg_strerror(len));
			return 1;
		}
		if (emit(dir, k, frame, len))
			return 1;
		if (dir && k == 0) {
			len = agg_encode_cnp(frame, sizeof(frame), &s);
			if (len < 0 || emit(dir, count, frame, len))
				return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "check"))
		return check();
	bool corpus = argc == 5 && !strcmp(argv[1], "corpus");
	if ((argc == 4 && !strcmp(argv[1], "build")) || corpus) {
		const char *dir = corpus ? argv[2] : NULL;
		char **nums = argv + (corpus ? 3 : 2);
		char *end;
		errno = 0;
		unsigned long n = strtoul(nums[0], &end, 0);
		if (errno || *end || n == 0 || n > 1000000) {
			fprintf(stderr, "inca-frame: N must be 1..1000000, got '%s'\n", nums[0]);
			return 2;
		}
		unsigned long long seed = strtoull(nums[1], &end, 0);
		if (*end) {
			fprintf(stderr, "inca-frame: SEED must be a number, got '%s'\n", nums[1]);
			return 2;
		}
		if (dir && mkdir(dir, 0755) && errno != EEXIST) {
			fprintf(stderr, "inca-frame: %s: %s\n", dir, strerror(errno));
			return 1;
		}
		return build(n, seed, dir);
	}
	usage(stderr);
	return 2;
}
