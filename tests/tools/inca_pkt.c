/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-pkt: one rank of an all-reduce through an INCA switch, over a kernel
 * UDP socket, before (and independently of) the host library. Sends this
 * rank's contributions with the slot window, retransmits on timeout, and
 * checks every result element against a reference computed from all ranks'
 * known inputs. Can also inject faults (duplicates, lost results, one bad
 * packet of a chosen kind).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "inca/agg.h"
#include "expect.h"      /* exact inputs and reference, shared with inca-check */

struct opts {
	uint32_t switch_ip, group, qpn, qkey, src_qpn;
	uint16_t rank, nranks, elems, window;
	int member_index;    /* rank field on the wire; -1: rank */
	int dtype, op;
	uint32_t count, seq, gbase;
	unsigned timeout_ms, deadline_s, drop_results, ecn;
	bool dup, quiet;
	const char *bad;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: inca-pkt --switch IP --group ID --qpn QPN --qkey KEY --rank R\n"
		"                --nranks N --src-qpn Q [options]\n"
		"Runs rank R's part of one all-reduce through an INCA switch (UDP socket\n"
		"on port 4791) and checks the result against the expected values.\n"
		"  --dtype T         fp32 fp16 bf16 int32 int64 fp64 (default fp32)\n"
		"  --op O            sum min max prod band bor bxor (default sum)\n"
		"  --count N         elements (default 1000)\n"
		"  --elems E         elements per packet (default 256)\n"
		"  --window W        slots (default 8)\n"
		"  --seq S           collective sequence number (default 1)\n"
		"  --gbase G         packets this communicator sent before (slot/set base)\n"
		"  --timeout-ms MS   retransmission timeout (default 100)\n"
		"  --deadline-s S    give up after S seconds (default 20)\n"
		"  --dup             send every contribution twice\n"
		"  --drop-results K  ignore the first K results (as if lost)\n"
		"  --bad KIND        first send one bad packet: qkey, icrc, nonmember,\n"
		"                    trunc, slot, fanin, group\n"
		"  --member-index K  rank field on the wire: my index in my switch's\n"
		"                    group (a leaf's, in a tree; default: --rank)\n"
		"  --ecn E           ECN field of the contributions (0..3; 3 = CE)\n"
		"  --quiet           only errors (and the CNP count when CNPs came)\n"
		"Exit: 0 all elements right, 1 wrong results, 2 deadline or error.\n");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct run {
	const struct opts *o;
	int fd;
	uint32_t my_ip;
	struct sockaddr_in dst;
	uint8_t *input;
	uint32_t npkts;
	uint64_t sent, retransmitted;
};

static struct agg_frame_spec spec_for(struct run *r, uint32_t k, bool retx)
{
	const struct opts *o = r->o;
	uint32_t g = o->gbase + k;
	uint32_t first = k * o->elems;
	uint32_t n = o->count - first < o->elems ? o->count - first : o->elems;

	return (struct agg_frame_spec){
		.src_ip = r->my_ip, .dst_ip = o->switch_ip, .dscp = 26,
		.udp_sport = AGG_ROCEV2_UDP_PORT,
		.dest_qp = o->qpn, .qkey = o->qkey, .src_qp = o->src_qpn,
		.psn = (uint32_t)r->sent,
		.hdr = {
			.version = AGG_VERSION, .type = AGG_TYPE_CONTRIB,
			.dtype = (uint8_t)o->dtype, .op = (uint8_t)o->op,
			.flags = (uint8_t)(((g / o->window) & 1) | (retx ? AGG_FLAG_RETRANSMIT : 0)),
			.count = (uint16_t)n, .group_id = o->group,
			.rank = (uint16_t)(o->member_index >= 0 ? o->member_index : o->rank),
			.fanin = 1, .slot = (uint16_t)(g % o->window),
			.coll_seq = o->seq, .pkt_idx = k,
		},
	};
}

static int send_frame(struct run *r, const uint8_t *frame, size_t len)
{
	/* the kernel adds IPv4 (ID 0, DF: IP_PMTUDISC_DO) and UDP */
	size_t off = AGG_ETH_HLEN + AGG_IPV4_HLEN + AGG_UDP_HLEN;

	if (sendto(r->fd, frame + off, len - off, 0, (struct sockaddr *)&r->dst,
		   sizeof(r->dst)) < 0) {
		fprintf(stderr, "inca-pkt: sendto: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int send_pkt(struct run *r, uint32_t k, bool retx)
{
	static uint8_t frame[AGG_MAX_FRAME_LEN];
	struct agg_frame_spec s = spec_for(r, k, retx);
	size_t esz = agg_dtype_size(r->o->dtype);
	int len = agg_encode(frame, sizeof(frame), &s,
			     r->input + (size_t)k * r->o->elems * esz);

	if (len < 0) {
		fprintf(stderr, "inca-pkt: encode: %s\n", agg_strerror(len));
		return -1;
	}
	for (int copy = 0; copy < (r->o->dup ? 2 : 1); copy++)
		if (send_frame(r, frame, (size_t)len))
			return -1;
	r->sent++;
	r->retransmitted += retx;
	return 0;
}

/* One packet the switch must refuse, of the given kind. */
static int send_bad(struct run *r, const char *kind)
{
	static uint8_t frame[AGG_MAX_FRAME_LEN];
	struct agg_frame_spec s = spec_for(r, 0, false);
	int len;

	if (!strcmp(kind, "qkey"))
		s.qkey ^= 0x5a5a5a5a;
	else if (!strcmp(kind, "nonmember"))
		s.hdr.rank = (uint16_t)((r->o->rank + 1) % r->o->nranks);
	else if (!strcmp(kind, "slot"))
		s.hdr.slot = 0xffff;
	else if (!strcmp(kind, "fanin"))
		s.hdr.fanin = 7;
	else if (!strcmp(kind, "group"))
		s.dest_qp ^= 0x1;
	else if (strcmp(kind, "icrc") && strcmp(kind, "trunc")) {
		fprintf(stderr, "inca-pkt: --bad: unknown kind '%s'\n", kind);
		return -1;
	}
	len = agg_encode(frame, sizeof(frame), &s, r->input);
	if (len < 0)
		return -1;
	if (!strcmp(kind, "icrc"))
		frame[len - 1] ^= 0xff;
	if (!strcmp(kind, "trunc"))
		len = AGG_ETH_HLEN + AGG_IPV4_HLEN + AGG_UDP_HLEN + AGG_BTH_LEN +
		      AGG_DETH_LEN + AGG_INCA_HLEN / 2;
	return send_frame(r, frame, (size_t)len);
}

static uint32_t local_ip_towards(uint32_t dst)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(9),
				 .sin_addr.s_addr = htonl(dst) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	uint32_t ip = 0;

	/* connect() on UDP only picks the route and source; nothing is sent */
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
		ip = ntohl(a.sin_addr.s_addr);
	if (fd >= 0)
		close(fd);
	return ip;
}

static int parse_u32(const char *name, const char *s, uint64_t max, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end || end == s || v > max) {
		fprintf(stderr, "inca-pkt: %s: expected 0..%llu, got '%s'\n", name,
			(unsigned long long)max, s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "switch", 1, 0, 'S' }, { "group", 1, 0, 'g' }, { "qpn", 1, 0, 'q' },
		{ "qkey", 1, 0, 'k' }, { "rank", 1, 0, 'r' }, { "nranks", 1, 0, 'n' },
		{ "src-qpn", 1, 0, 'Q' }, { "dtype", 1, 0, 'd' }, { "op", 1, 0, 'o' },
		{ "count", 1, 0, 'c' }, { "elems", 1, 0, 'e' }, { "window", 1, 0, 'w' },
		{ "seq", 1, 0, 's' }, { "gbase", 1, 0, 'G' }, { "timeout-ms", 1, 0, 't' },
		{ "deadline-s", 1, 0, 'D' }, { "dup", 0, 0, 'u' }, { "ecn", 1, 0, 'E' }, { "member-index", 1, 0, 'I' },
		{ "drop-results", 1, 0, 'x' }, { "bad", 1, 0, 'b' },
		{ "quiet", 0, 0, 'z' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
	};
	struct opts o = { .member_index = -1, .dtype = AGG_DTYPE_FP32, .op = AGG_OP_SUM, .count = 1000,
			  .elems = 256, .window = 8, .seq = 1, .timeout_ms = 100,
			  .deadline_s = 20, .nranks = 0 };
	bool have[128] = { false };
	uint32_t v;
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		int rc = 0;
		have[c & 127] = true;
		switch (c) {
		case 'S': {
			struct in_addr a;
			if (inet_pton(AF_INET, optarg, &a) != 1) {
				fprintf(stderr, "inca-pkt: --switch: not an IPv4 address: '%s'\n", optarg);
				return 2;
			}
			o.switch_ip = ntohl(a.s_addr);
			break;
		}
		case 'g': rc = parse_u32("--group", optarg, UINT32_MAX, &o.group); break;
		case 'q': rc = parse_u32("--qpn", optarg, AGG_QPN_MASK, &o.qpn); break;
		case 'k': rc = parse_u32("--qkey", optarg, UINT32_MAX, &o.qkey); break;
		case 'Q': rc = parse_u32("--src-qpn", optarg, AGG_QPN_MASK, &o.src_qpn); break;
		case 'r': rc = parse_u32("--rank", optarg, 1023, &v); o.rank = (uint16_t)v; break;
		case 'n': rc = parse_u32("--nranks", optarg, 1024, &v); o.nranks = (uint16_t)v; break;
		case 'c': rc = parse_u32("--count", optarg, 1u << 26, &o.count); break;
		case 'e': rc = parse_u32("--elems", optarg, AGG_MAX_ELEMS, &v); o.elems = (uint16_t)v; break;
		case 'w': rc = parse_u32("--window", optarg, AGG_MAX_WINDOW, &v); o.window = (uint16_t)v; break;
		case 's': rc = parse_u32("--seq", optarg, UINT32_MAX, &o.seq); break;
		case 'G': rc = parse_u32("--gbase", optarg, UINT32_MAX, &o.gbase); break;
		case 't': rc = parse_u32("--timeout-ms", optarg, 60000, &o.timeout_ms); break;
		case 'D': rc = parse_u32("--deadline-s", optarg, 3600, &o.deadline_s); break;
		case 'x': rc = parse_u32("--drop-results", optarg, 1000000, &o.drop_results); break;
		case 'u': o.dup = true; break;
		case 'E': rc = parse_u32("--ecn", optarg, 3, &o.ecn); break;
		case 'I': rc = parse_u32("--member-index", optarg, 1023, &v); o.member_index = (int)v; break;
		case 'b': o.bad = optarg; break;
		case 'z': o.quiet = true; break;
		case 'd':
			o.dtype = agg_dtype_parse(optarg);
			if (o.dtype < 0) {
				fprintf(stderr, "inca-pkt: --dtype: unknown '%s'\n", optarg);
				return 2;
			}
			break;
		case 'o':
			o.op = agg_op_parse(optarg);
			if (o.op < 0) {
				fprintf(stderr, "inca-pkt: --op: unknown '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (rc)
			return 2;
	}
	const char need[] = "SgqkrnQ";
	for (const char *p = need; *p; p++)
		if (!have[(int)*p]) {
			for (const struct option *x = lo; x->name; x++)
				if (x->val == *p)
					fprintf(stderr, "inca-pkt: --%s is required\n", x->name);
			usage(stderr);
			return 2;
		}
	if (o.nranks == 0 || o.rank >= o.nranks || o.count == 0 || o.elems == 0 ||
	    o.window == 0 || agg_op_check(o.dtype, o.op) ||
	    (size_t)o.elems * agg_dtype_size(o.dtype) > AGG_MAX_PAYLOAD) {
		fprintf(stderr, "inca-pkt: need rank < nranks, count, elems and window > 0, "
			"elems * dtype size <= 4096, and an op valid for the dtype\n");
		return 2;
	}

	struct run r = { .o = &o };
	size_t esz = agg_dtype_size(o.dtype);
	uint8_t *want = malloc((size_t)o.count * esz);
	uint8_t *result = calloc((size_t)o.count, esz);
	r.npkts = (o.count + o.elems - 1) / o.elems;
	bool *got = calloc(r.npkts, 1), *sent = calloc(r.npkts, 1);
	r.input = malloc((size_t)o.count * esz);
	if (!want || !result || !got || !sent || !r.input) {
		fprintf(stderr, "inca-pkt: out of memory for %u elements\n", o.count);
		return 2;
	}
	fill(o.dtype, o.op, o.rank, r.input, o.count);
	expected(o.dtype, o.op, o.nranks, want, o.count);

	r.my_ip = local_ip_towards(o.switch_ip);
	r.fd = socket(AF_INET, SOCK_DGRAM, 0);
	int pmtu = IP_PMTUDISC_DO, tos = 26 << 2 | (int)o.ecn, one = 1, rcvbuf = 4 << 20;
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_port = htons(AGG_ROCEV2_UDP_PORT) };
	if (r.my_ip == 0 || r.fd < 0 ||
	    setsockopt(r.fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) ||
	    setsockopt(r.fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) ||
	    setsockopt(r.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(r.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) ||
	    bind(r.fd, (struct sockaddr *)&me, sizeof(me))) {
		fprintf(stderr, "inca-pkt: UDP socket on port 4791 (source %s): %s\n",
			r.my_ip ? "found" : "no route to the switch", strerror(errno));
		return 2;
	}
	r.dst = (struct sockaddr_in){ .sin_family = AF_INET,
				      .sin_port = htons(AGG_ROCEV2_UDP_PORT),
				      .sin_addr.s_addr = htonl(o.switch_ip) };

	if (o.bad && send_bad(&r, o.bad))
		return 2;
	for (uint32_t k = 0; k < r.npkts && k < o.window; k++) {
		if (send_pkt(&r, k, false))
			return 2;
		sent[k] = true;
	}

	double start = now_s(), last_rx = start;
	uint32_t ndone = 0;
	uint64_t ignored = 0, dropped = 0, cnps = 0;
	uint8_t buf[9000];
	while (ndone < r.npkts) {
		double t = now_s();
		if (t - start > o.deadline_s) {
			fprintf(stderr, "inca-pkt: rank %u: deadline: %u of %u results after "
				"%u s (%llu sent, %llu retransmitted)\n", o.rank, ndone,
				r.npkts, o.deadline_s, (unsigned long long)r.sent,
				(unsigned long long)r.retransmitted);
			return 2;
		}
		struct pollfd pfd = { .fd = r.fd, .events = POLLIN };
		int rc = poll(&pfd, 1, (int)o.timeout_ms);
		if (rc == 0 || (t - last_rx) * 1000 > o.timeout_ms) {
			/* timeout: resend what has no result yet */
			for (uint32_t k = 0; k < r.npkts; k++)
				if (sent[k] && !got[k] && send_pkt(&r, k, true))
					return 2;
			last_rx = now_s();
			continue;
		}
		ssize_t n = recv(r.fd, buf, sizeof(buf), 0);
		if (n < 0)
			continue;
		struct agg_pkt p;
		if (!agg_decode_bth(buf, (size_t)n, &p) && p.kind == AGG_PKT_CNP &&
		    p.dest_qp == o.src_qpn) {
			cnps++;
			continue;
		}
		if (agg_decode_bth(buf, (size_t)n, &p) || p.kind != AGG_PKT_INCA ||
		    p.hdr.type != AGG_TYPE_RESULT || p.dest_qp != o.src_qpn ||
		    p.qkey != o.qkey || p.hdr.group_id != o.group ||
		    p.hdr.coll_seq != o.seq || p.hdr.pkt_idx >= r.npkts ||
		    p.hdr.rank != (o.member_index >= 0 ? o.member_index : o.rank)) {
			ignored++;
			continue;
		}
		uint32_t k = p.hdr.pkt_idx;
		if (got[k]) {
			ignored++;
			continue;
		}
		if (dropped < o.drop_results) {
			dropped++;
			continue;
		}
		last_rx = now_s();
		uint32_t first = k * o.elems;
		uint32_t cnt = o.count - first < o.elems ? o.count - first : o.elems;
		if (p.hdr.count != cnt || p.hdr.dtype != o.dtype || p.hdr.op != o.op ||
		    p.payload_len != cnt * esz) {
			fprintf(stderr, "inca-pkt: rank %u: result %u: count %u dtype %u op %u, "
				"expected %u %u %u\n", o.rank, k, p.hdr.count, p.hdr.dtype,
				p.hdr.op, cnt, o.dtype, o.op);
			return 1;
		}
		memcpy(result + (size_t)first * esz, p.payload, p.payload_len);
		got[k] = true;
		ndone++;
		if (k + o.window < r.npkts && !sent[k + o.window]) {
			if (send_pkt(&r, k + o.window, false))
				return 2;
			sent[k + o.window] = true;
		}
	}

	uint32_t wrong = 0;
	for (uint32_t i = 0; i < o.count; i++)
		if (memcmp(result + (size_t)i * esz, want + (size_t)i * esz, esz)) {
			if (wrong < 5)
				fprintf(stderr, "inca-pkt: rank %u: element %u differs\n", o.rank, i);
			wrong++;
		}
	if (wrong) {
		fprintf(stderr, "inca-pkt: rank %u: %u of %u elements wrong (%s %s)\n",
			o.rank, wrong, o.count, agg_dtype_name(o.dtype), agg_op_name(o.op));
		return 1;
	}
	if (!o.quiet)
		printf("inca-pkt: rank %u: %u %s %s elements ok in %u packets, %.3f s, "
		       "%llu sent, %llu retransmitted, %llu ignored, %llu CNPs\n", o.rank,
		       o.count, agg_dtype_name(o.dtype), agg_op_name(o.op), r.npkts,
		       now_s() - start, (unsigned long long)r.sent,
		       (unsigned long long)r.retransmitted, (unsigned long long)ignored,
		       (unsigned long long)cnps);
	else if (cnps)
		printf("cnps=%llu\n", (unsigned long long)cnps);
	close(r.fd);
	free(want);
	free(result);
	free(got);
	free(sent);
	free(r.input);
	return 0;
}
