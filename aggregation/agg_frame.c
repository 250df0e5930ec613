/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Building frames: the one set of Ethernet/VLAN, IPv4/UDP, BTH and DETH
 * writers, used for the frames hosts and tools send (agg_encode), CNPs
 * (agg_encode_cnp) and the switch's result frames (agg_result_encode,
 * which also numbers each member's PSNs per shard).
 */
#include <string.h>

#include "agg_group.h"

/* IPv4 (ID 0, DF, checksum) and UDP (checksum 0: the ICRC protects the
 * payload) for udp_payload bytes of BTH..ICRC; returns bytes written. */
static size_t write_ipv4_udp(uint8_t *ip, uint32_t src, uint32_t dst,
			     uint8_t dscp, uint8_t ecn, uint8_t ttl,
			     uint16_t sport, size_t udp_payload)
{
	uint8_t *udp = ip + AGG_IPV4_HLEN;
	uint16_t ip_len = (uint16_t)(AGG_IPV4_HLEN + AGG_UDP_HLEN + udp_payload);

	ip[0] = 0x45;
	ip[1] = (uint8_t)(dscp << 2 | (ecn & 3));
	agg_wr16(ip + 2, ip_len);
	agg_wr16(ip + 4, 0);          /* ID 0: what Linux sends with DF set */
	agg_wr16(ip + 6, 0x4000);     /* DF */
	ip[8] = ttl ? ttl : 64;
	ip[9] = 17;
	agg_wr16(ip + 10, 0);
	agg_wr32(ip + 12, src);
	agg_wr32(ip + 16, dst);
	agg_wr16(ip + 10, agg_ipv4_csum(ip, AGG_IPV4_HLEN));

	agg_wr16(udp, sport ? sport : AGG_ROCEV2_UDP_PORT);
	agg_wr16(udp + 2, AGG_ROCEV2_UDP_PORT);
	agg_wr16(udp + 4, (uint16_t)(AGG_UDP_HLEN + udp_payload));
	agg_wr16(udp + 6, 0);        /* RoCEv2: the ICRC protects the payload */
	return AGG_IPV4_HLEN + AGG_UDP_HLEN;
}

static size_t write_eth(uint8_t *f, const struct agg_frame_spec *s)
{
	memcpy(f, s->dst_mac, 6);
	memcpy(f + 6, s->src_mac, 6);
	if (s->has_vlan) {
		agg_wr16(f + 12, AGG_ETHERTYPE_VLAN);
		agg_wr16(f + 14, s->vlan_tci);
		agg_wr16(f + 16, AGG_ETHERTYPE_IPV4);
		return AGG_ETH_HLEN + AGG_VLAN_HLEN;
	}
	agg_wr16(f + 12, AGG_ETHERTYPE_IPV4);
	return AGG_ETH_HLEN;
}

/* Ethernet, IPv4 and UDP for a RoCEv2 payload of roce bytes; *ip points
 * at the IPv4 header; returns the offset of the BTH. */
static size_t write_l2_l4(uint8_t *f, const struct agg_frame_spec *s, size_t roce,
			  uint8_t **ip)
{
	size_t off = write_eth(f, s);

	*ip = f + off;
	return off + write_ipv4_udp(*ip, s->src_ip, s->dst_ip, s->dscp, s->ecn,
					s->ttl, s->udp_sport, roce);
}

static void write_bth(uint8_t *b, const struct agg_frame_spec *s,
		      uint8_t opcode, uint8_t pad, bool becn)
{
	b[0] = opcode;
	b[1] = (uint8_t)((s->solicited ? 0x80 : 0) | pad << 4);
	agg_wr16(b + 2, s->pkey ? s->pkey : AGG_PKEY_DEFAULT);
	b[4] = becn ? 0x40 : 0;
	agg_wr24(b + 5, s->dest_qp & AGG_QPN_MASK);
	b[8] = 0;
	agg_wr24(b + 9, s->psn & AGG_PSN_MASK);
}

/* Ethernet .. DETH of a UD send (BTH pad count pad); *ip points at the
 * IPv4 header; returns the offset after the DETH. */
static size_t write_ud_headers(uint8_t *f, const struct agg_frame_spec *s,
			       uint8_t opcode, uint8_t pad, size_t roce, uint8_t **ip)
{
	size_t off = write_l2_l4(f, s, roce, ip);

	write_bth(f + off, s, opcode, pad, false);
	off += AGG_BTH_LEN;
	agg_wr32(f + off, s->qkey);
	f[off + 4] = 0;
	agg_wr24(f + off + 5, s->src_qp & AGG_QPN_MASK);
	return off + AGG_DETH_LEN;
}

int agg_encode(void *buf, size_t cap, const struct agg_frame_spec *s,
	       const void *payload)
{
	uint8_t *f = buf, *ip;
	uint8_t opcode = s->opcode ? s->opcode : AGG_OP_UD_SEND_ONLY;
	size_t esize = agg_dtype_size(s->hdr.dtype);
	size_t elems, pad, roce, off, total;

	if (esize == 0)
		return -AGG_E_DTYPE;
	if (opcode != AGG_OP_UD_SEND_ONLY && opcode != AGG_OP_UD_SEND_ONLY_IMM)
		return -AGG_E_INVAL;
	elems = agg_hdr_has_data(&s->hdr) ? (size_t)s->hdr.count * esize : 0;
	if (elems > AGG_MAX_PAYLOAD)
		return -AGG_E_INVAL;
	pad = agg_pad_len(elems);
	roce = AGG_BTH_LEN + AGG_DETH_LEN +
	       (opcode == AGG_OP_UD_SEND_ONLY_IMM ? AGG_IMM_LEN : 0) +
	       AGG_INCA_HLEN + elems + pad + AGG_ICRC_LEN;
	total = AGG_ETH_HLEN + (s->has_vlan ? AGG_VLAN_HLEN : 0) +
		AGG_IPV4_HLEN + AGG_UDP_HLEN + roce;
	if (total > cap)
		return -AGG_E_NOSPACE;

	off = write_ud_headers(f, s, opcode, (uint8_t)pad, roce, &ip);
	if (opcode == AGG_OP_UD_SEND_ONLY_IMM) {
		agg_wr32(f + off, s->imm);
		off += AGG_IMM_LEN;
	}
	agg_hdr_write(f + off, &s->hdr);
	off += AGG_INCA_HLEN;
	if (elems)
		memcpy(f + off, payload, elems);
	memset(f + off + elems, 0, pad);
	off += elems + pad;
	agg_icrc_store(f + off, agg_icrc_ipv4(ip, (size_t)(f + off + 4 - ip)));
	return (int)total;
}

int agg_encode_cnp(void *buf, size_t cap, const struct agg_frame_spec *s)
{
	uint8_t *f = buf, *ip;
	size_t roce = AGG_BTH_LEN + AGG_CNP_PAD_LEN + AGG_ICRC_LEN;
	size_t off, total = AGG_ETH_HLEN + (s->has_vlan ? AGG_VLAN_HLEN : 0) +
			    AGG_IPV4_HLEN + AGG_UDP_HLEN + roce;

	if (total > cap)
		return -AGG_E_NOSPACE;
	off = write_l2_l4(f, s, roce, &ip);
	write_bth(f + off, s, AGG_OP_CNP, 0, true);
	off += AGG_BTH_LEN;
	memset(f + off, 0, AGG_CNP_PAD_LEN);
	off += AGG_CNP_PAD_LEN;
	agg_icrc_store(f + off, agg_icrc_ipv4(ip, roce + AGG_IPV4_HLEN +
						      AGG_UDP_HLEN));
	return (int)total;
}

/* UDP source port: varies per member for ECMP entropy. */
static inline uint16_t result_sport(const struct agg_group *g, uint16_t member)
{
	return (uint16_t)(0xc000 | ((g->cfg.group_id + member) & 0x3fff));
}

/* A member's next PSN: a counter per member and shard (no line shared
 * between the threads): with S shards, shard k's PSNs to a member are k,
 * k + S, k + 2S, ... (docs/protocol.md, 3.3) */
static inline uint32_t result_psn(struct agg_group *g, uint16_t slot, uint16_t member)
{
	uint16_t shard = (uint16_t)((g->cfg.group_id + slot) % g->shards);

	return g->member_psn[shard * g->psn_stride + member]++ * g->shards + shard;
}

int agg_result_encode(struct agg_group *g, uint16_t member,
		      const struct agg_result *res,
		      const struct agg_result_l2 *l2, const uint8_t *dst_mac,
		      void *buf, size_t cap)
{
	const struct agg_member *mb;
	uint8_t *f = buf, *ip, *b;
	size_t roce, off, total, body;
	struct agg_hdr hdr;
	uint32_t crc;
	bool has_data;

	if (member >= g->cfg.nmembers)
		return -AGG_E_INVAL;
	mb = &g->members[member];
	/* reduce, reduce-scatter: the others get the header alone; allgather,
	 * bcast: the owner */
	has_data = agg_result_has_data_for(res, member);
	body = AGG_LIKELY(has_data) ? res->payload_len + res->pad : 0;
	roce = AGG_BTH_LEN + AGG_DETH_LEN + AGG_INCA_HLEN + body + AGG_ICRC_LEN;
	total = AGG_ETH_HLEN + (l2->has_vlan ? AGG_VLAN_HLEN : 0) +
		AGG_IPV4_HLEN + AGG_UDP_HLEN + roce;
	if (total > cap)
		return -AGG_E_NOSPACE;

	struct agg_frame_spec s = {
		.has_vlan = l2->has_vlan,
		.vlan_tci = l2->vlan_tci,
		.src_ip = l2->switch_ip,
		.dst_ip = mb->ip,
		.dscp = l2->dscp,
		.udp_sport = result_sport(g, member),
		.dest_qp = mb->qpn,
		.psn = result_psn(g, res->hdr.slot, member),
		.qkey = g->cfg.qkey,
		.src_qp = g->cfg.qpn,
	};

	memcpy(s.dst_mac, dst_mac ? dst_mac : mb->mac, 6);
	memcpy(s.src_mac, l2->src_mac, 6);
	off = write_ud_headers(f, &s, AGG_OP_UD_SEND_ONLY,
			       (uint8_t)(has_data ? res->pad : 0), roce, &ip);
	b = f + off;
	hdr = res->hdr;
	hdr.rank = member;   /* a result names the member it is for */
	if (!has_data)
		hdr.flags |= AGG_FLAG_NO_DATA;
	agg_hdr_write(b, &hdr);
	off += AGG_INCA_HLEN;
	crc = agg_icrc_ipv4_prefix(ip, (size_t)(f + off - ip));
	if (AGG_LIKELY(has_data)) {
		memcpy(f + off, res->payload, body);
		/* CRC-32 is linear: header CRC combined with the payload's,
		 * which was computed once for all members. */
		crc = agg_crc32_combine_op(crc, res->payload_crc, res->payload_shift);
	}
	agg_icrc_store(f + off + body, crc);
	return (int)total;
}

/*
 * Results from a template (docs/protocol.md, 1.6, "ICRC balance"). The
 * IPv4 .. INCA headers of a set's results differ between members only in
 * these fields, zero in the template:
 */
enum {
	T_IP_DST = 16,                      /* IPv4 destination, 4 bytes */
	T_IP_CSUM = 10,                     /* IPv4 checksum (masked in the ICRC) */
	T_UDP_SPORT = AGG_IPV4_HLEN,        /* 2 */
	T_BTH = AGG_IPV4_HLEN + AGG_UDP_HLEN,
	T_DEST_QP = T_BTH + 5,              /* 3 */
	T_PSN_WORD = T_BTH + 8,             /* BTH byte 8 (0) and the PSN: 4 */
	T_INCA = T_BTH + AGG_BTH_LEN + AGG_DETH_LEN,
	T_RANK = T_INCA + 12,               /* 2 */
	T_BALANCE = T_INCA + 28,            /* 4 */
	T_LEN = T_INCA + AGG_INCA_HLEN,
};
_Static_assert(T_LEN == AGG_RESULT_TMPL_HLEN, "the template's length");

/* The CRC-32's linear part over T_LEN bytes (zero start, no final XOR):
 * what XORing buf into a frame's headers changes its ICRC by, before the
 * bytes after the headers shift it. */
static uint32_t crc_linear(const uint8_t *buf)
{
	static const uint8_t zero[T_LEN];

	return agg_crc32(0, buf, T_LEN) ^ agg_crc32(0, zero, T_LEN);
}

uint32_t agg_result_psn_op(void)
{
	/* x^(8 * the bytes after the PSN word): B = part * x^-32 (below)
	 * with the PSN word's part x^(8 * after + 32) * word */
	return agg_crc32_shift_op(T_LEN - T_PSN_WORD - 4);
}

uint32_t agg_result_member_balance(const struct agg_group *g, uint16_t member)
{
	const struct agg_member *mb = &g->members[member];
	uint8_t d[T_LEN] = { 0 };

	agg_wr32(d + T_IP_DST, mb->ip);
	agg_wr16(d + T_UDP_SPORT, result_sport(g, member));
	agg_wr24(d + T_DEST_QP, mb->qpn & AGG_QPN_MASK);
	agg_wr16(d + T_RANK, member);
	/* the balance B at the headers' end changes the linear part by
	 * B * x^32: B = part * x^-32 cancels the member's fields */
	return agg_crc32_balance(crc_linear(d), 0, agg_crc32_unshift_op(0));
}

int agg_result_tmpl_init(struct agg_group *g, const struct agg_result *res,
			 const struct agg_result_l2 *l2, struct agg_result_tmpl *t)
{
	uint8_t f[AGG_ETH_HLEN + T_LEN], *ip;
	size_t body = res->payload_len + res->pad;
	struct agg_frame_spec s = {
		.src_ip = l2->switch_ip,
		.dscp = l2->dscp,
		.udp_sport = 1,     /* not 0, which means 4791; zeroed below */
		.qkey = g->cfg.qkey,
		.src_qp = g->cfg.qpn,
	};
	struct agg_hdr hdr = res->hdr;

	if (res->payload_len == 0 || body > AGG_MAX_PAYLOAD + 3)
		return -AGG_E_INVAL;
	write_ud_headers(f, &s, AGG_OP_UD_SEND_ONLY, res->pad,
			 AGG_BTH_LEN + AGG_DETH_LEN + AGG_INCA_HLEN + body + AGG_ICRC_LEN, &ip);
	memcpy(t->hdr, ip, T_INCA);
	hdr.rank = 0;
	agg_hdr_write(t->hdr + T_INCA, &hdr);
	agg_wr16(t->hdr + T_UDP_SPORT, 0);
	agg_wr16(t->hdr + T_IP_CSUM, 0);
	/* the IPv4 header's 16-bit words, its destination and checksum 0 */
	uint32_t sum = 0;
	for (int k = 0; k < AGG_IPV4_HLEN; k += 2)
		sum += (uint32_t)t->hdr[k] << 8 | t->hdr[k + 1];
	t->ip_sum = sum;
	t->icrc = agg_crc32_combine_op(agg_icrc_ipv4_prefix(t->hdr, T_LEN), res->payload_crc,
				       res->payload_shift);
	t->res = res;
	return 0;
}

int agg_result_encode_hdr(struct agg_group *g, uint16_t member,
			  const struct agg_result_tmpl *t,
			  const struct agg_result_l2 *l2, const uint8_t *dst_mac,
			  void *buf, size_t cap)
{
	const struct agg_member *mb;
	uint8_t *f = buf, *h;
	size_t off;

	if (member >= g->cfg.nmembers || !agg_result_has_data_for(t->res, member))
		return -AGG_E_INVAL;
	mb = &g->members[member];
	if (AGG_ETH_HLEN + (l2->has_vlan ? AGG_VLAN_HLEN : 0) + T_LEN > cap)
		return -AGG_E_NOSPACE;
	struct agg_frame_spec s = {
		.has_vlan = l2->has_vlan,
		.vlan_tci = l2->vlan_tci,
	};
	memcpy(s.dst_mac, dst_mac ? dst_mac : mb->mac, 6);
	memcpy(s.src_mac, l2->src_mac, 6);
	off = write_eth(f, &s);
	h = f + off;
	memcpy(h, t->hdr, T_LEN);
	agg_wr32(h + T_IP_DST, mb->ip);
	uint32_t sum = t->ip_sum + (mb->ip >> 16) + (mb->ip & 0xffff);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	agg_wr16(h + T_IP_CSUM, (uint16_t)~sum);
	agg_wr16(h + T_UDP_SPORT, result_sport(g, member));
	agg_wr24(h + T_DEST_QP, mb->qpn & AGG_QPN_MASK);
	uint32_t psn = result_psn(g, t->res->hdr.slot, member) & AGG_PSN_MASK;
	agg_wr24(h + T_PSN_WORD + 1, psn);
	agg_wr16(h + T_RANK, member);
	/* the PSN word's bytes (0, PSN) as CRC-32 reads them: little-endian */
	uint32_t psn_le = (psn >> 16 & 0xff) << 8 | (psn >> 8 & 0xff) << 16 | (psn & 0xff) << 24;
	agg_icrc_store(h + T_BALANCE, g->member_bal[member] ^
		       agg_crc32_balance(psn_le, 0, g->bal_psn_op));
	return (int)(off + T_LEN);
}

