/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strict decoding of Ethernet/IPv4/UDP/BTH/DETH/INCA frames, the INCA
 * header's reader and writer, error names, and the dtype and op metadata.
 * Building frames is agg_frame.c's.
 */
#include <strings.h>

#include "agg_priv.h"

static const char *const err_msgs[AGG_E__COUNT] = {
	[AGG_OK] = "success",
#define AGG_X_MSG(name, counter, msg) [AGG_E_##name] = msg,
	AGG_ERRORS(AGG_X_MSG)
#undef AGG_X_MSG
};

static const char *const err_names[AGG_E__COUNT] = {
	[AGG_OK] = "ok",
#define AGG_X_NAME(name, counter, msg) [AGG_E_##name] = counter,
	AGG_ERRORS(AGG_X_NAME)
#undef AGG_X_NAME
};

const char *agg_strerror(int err)
{
	if (err > 0 || -err >= AGG_E__COUNT)
		return "unknown INCA aggregation error";
	return err_msgs[-err];
}

const char *agg_errname(int err)
{
	if (err > 0 || -err >= AGG_E__COUNT)
		return "unknown";
	return err_names[-err];
}

void agg_hdr_write(uint8_t *p, const struct agg_hdr *h)
{
	p[0] = h->version;
	p[1] = h->type;
	p[2] = h->dtype;
	p[3] = h->op;
	p[4] = h->flags;
	p[5] = (h->flags & AGG_FLAG_COLL) ? h->coll : 0;
	agg_wr16(p + 6, h->count);
	agg_wr32(p + 8, h->group_id);
	agg_wr16(p + 12, h->rank);
	agg_wr16(p + 14, h->fanin);
	agg_wr16(p + 16, h->slot);
	agg_wr16(p + 18, (h->flags & AGG_FLAG_COLL) ? h->root : 0);
	agg_wr32(p + 20, h->coll_seq);
	agg_wr32(p + 24, h->pkt_idx);
	agg_wr32(p + 28, 0);
}

void agg_hdr_read(const uint8_t *p, struct agg_hdr *h)
{
	h->version = p[0];
	h->type = p[1];
	h->dtype = p[2];
	h->op = p[3];
	h->flags = p[4];
	h->count = agg_rd16(p + 6);
	h->group_id = agg_rd32(p + 8);
	h->rank = agg_rd16(p + 12);
	h->fanin = agg_rd16(p + 14);
	h->slot = agg_rd16(p + 16);
	h->coll_seq = agg_rd32(p + 20);
	h->pkt_idx = agg_rd32(p + 24);
	/* without the COLL flag both bytes are reserved: ignored */
	h->coll = (h->flags & AGG_FLAG_COLL) ? p[5] : 0;
	h->root = (h->flags & AGG_FLAG_COLL) ? agg_rd16(p + 18) : 0;
}

uint16_t agg_ipv4_csum(const uint8_t *ip, size_t len)
{
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += agg_rd16(ip + i);
	if (len & 1)
		sum += (uint32_t)ip[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The INCA header's own fields, before any length is looked at. */
static int hdr_check(const struct agg_hdr *hdr)
{
	if (hdr->version != AGG_VERSION)
		return -AGG_E_VERSION;
	if (hdr->type < AGG_TYPE_CONTRIB || hdr->type > AGG_TYPE_WAIT)
		return -AGG_E_TYPE;
	if (hdr->dtype >= AGG_DTYPE_COUNT)
		return -AGG_E_DTYPE;
	if (hdr->op >= AGG_OP_COUNT)
		return -AGG_E_OP;
	if (agg_op_check(hdr->dtype, hdr->op))
		return -AGG_E_OP_DTYPE;
	if (hdr->flags & ~AGG_FLAGS_KNOWN)
		return -AGG_E_FLAGS;
	/* a collective other than all-reduce says so with the flag (old
	 * receivers drop it as an unknown flag); an all-reduce always
	 * carries its elements */
	if ((hdr->flags & AGG_FLAG_COLL) &&
	    (hdr->coll == AGG_COLL_ALLREDUCE || hdr->coll >= AGG_COLL_COUNT))
		return -AGG_E_COLL;
	/* (a WAIT is a header alone whatever the collective) */
	if ((hdr->flags & AGG_FLAG_NO_DATA) && !(hdr->flags & AGG_FLAG_COLL) &&
	    hdr->type != AGG_TYPE_WAIT)
		return -AGG_E_COLL;
	return 0;
}

/* Bytes of elements that follow the header. */
static size_t hdr_elems(const struct agg_hdr *hdr)
{
	return agg_hdr_has_data(hdr) ? (size_t)hdr->count * agg_dtype_size(hdr->dtype) : 0;
}

int agg_decode_msg(const void *msg, size_t len, struct agg_hdr *hdr,
		   const uint8_t **payload)
{
	size_t elems;
	int rc;

	if (len < AGG_INCA_HLEN)
		return -AGG_E_TRUNC_INCA;
	agg_hdr_read(msg, hdr);
	rc = hdr_check(hdr);
	if (rc)
		return rc;
	elems = hdr_elems(hdr);
	if ((hdr->count == 0 && hdr->type != AGG_TYPE_CONTROL) ||
	    hdr->count > AGG_MAX_ELEMS || len - AGG_INCA_HLEN != elems)
		return -AGG_E_COUNT;
	if (hdr->fanin == 0 && hdr->type != AGG_TYPE_CONTROL)
		return -AGG_E_FANIN;
	*payload = (const uint8_t *)msg + AGG_INCA_HLEN;
	return 0;
}

/*
 * Validate a RoCEv2 packet from the BTH on (rest bytes, ICRC included).
 * With ip non-NULL the ICRC is verified once the lengths are known to be
 * consistent and before any INCA field is interpreted.
 */
/* rc from a check after the ICRC's point: the ICRC's error instead when
 * it was left for later and is wrong */
static int late_fail(struct agg_pkt *pkt, int rc)
{
	return agg_pkt_icrc_check(pkt) ? -AGG_E_ICRC : rc;
}

static int decode_roce(const uint8_t *b, size_t rest, const uint8_t *ip,
		       bool lazy, struct agg_pkt *pkt)
{
	size_t need, avail, elems;
	const uint8_t *h;
	struct agg_hdr *hdr = &pkt->hdr;
	int rc;

	if (rest < AGG_BTH_LEN + AGG_ICRC_LEN)
		return -AGG_E_TRUNC_BTH;
	pkt->opcode = b[0];
	pkt->solicited = b[1] >> 7;
	pkt->pad = (b[1] >> 4) & 3;
	if (b[1] & 0x0f)
		return -AGG_E_BTH_TVER;
	pkt->pkey = agg_rd16(b + 2);
	pkt->fecn = b[4] >> 7;
	pkt->becn = (b[4] >> 6) & 1;
	pkt->dest_qp = agg_rd24(b + 5);
	pkt->ackreq = b[8] >> 7;
	pkt->psn = agg_rd24(b + 9);
	pkt->icrc = agg_icrc_load(b + rest - AGG_ICRC_LEN);

	if (pkt->opcode == AGG_OP_CNP) {
		if (rest != AGG_BTH_LEN + AGG_CNP_PAD_LEN + AGG_ICRC_LEN)
			return -AGG_E_CNP_LEN;
		if (ip && agg_icrc_ipv4(ip, pkt->ip_len) != pkt->icrc)
			return -AGG_E_ICRC;
		pkt->kind = AGG_PKT_CNP;
		return 0;
	}
	if (pkt->opcode != AGG_OP_UD_SEND_ONLY &&
	    pkt->opcode != AGG_OP_UD_SEND_ONLY_IMM)
		return -AGG_E_BTH_OPCODE;

	pkt->has_imm = pkt->opcode == AGG_OP_UD_SEND_ONLY_IMM;
	need = AGG_BTH_LEN + AGG_DETH_LEN + (pkt->has_imm ? AGG_IMM_LEN : 0);
	if (rest < need + AGG_ICRC_LEN)
		return -AGG_E_TRUNC_DETH;
	pkt->qkey = agg_rd32(b + AGG_BTH_LEN);
	pkt->src_qp = agg_rd24(b + AGG_BTH_LEN + 5);
	if (pkt->has_imm)
		pkt->imm = agg_rd32(b + AGG_BTH_LEN + AGG_DETH_LEN);

	if (rest < need + AGG_INCA_HLEN + AGG_ICRC_LEN)
		return -AGG_E_TRUNC_INCA;
	if (ip && lazy)
		pkt->icrc_pending = true;
	else if (ip && agg_icrc_ipv4(ip, pkt->ip_len) != pkt->icrc)
		return -AGG_E_ICRC;

	h = b + need;
	agg_hdr_read(h, hdr);
	pkt->kind = AGG_PKT_INCA;
	rc = hdr_check(hdr);
	if (rc)
		return late_fail(pkt, rc);

	avail = rest - need - AGG_INCA_HLEN - AGG_ICRC_LEN;
	elems = hdr_elems(hdr);
	if ((hdr->count == 0 && hdr->type != AGG_TYPE_CONTROL) ||
	    hdr->count > AGG_MAX_ELEMS || pkt->pad > avail ||
	    elems != avail - pkt->pad)
		return late_fail(pkt, -AGG_E_COUNT);
	if (pkt->pad != agg_pad_len(elems))
		return late_fail(pkt, -AGG_E_PAD);
	if (hdr->fanin == 0 && hdr->type != AGG_TYPE_CONTROL)
		return late_fail(pkt, -AGG_E_FANIN);
	pkt->payload = h + AGG_INCA_HLEN;
	pkt->payload_len = (uint32_t)elems;
	return 0;
}

static int decode(const void *frame, size_t len, bool verify_icrc, bool lazy,
		  struct agg_pkt *pkt)
{
	const uint8_t *f = frame, *ip, *udp;
	uint16_t etype, off = AGG_ETH_HLEN, udp_len;

	memset(pkt, 0, sizeof(*pkt));
	pkt->frame = f;
	pkt->frame_len = (uint32_t)len;
	if (len < AGG_ETH_HLEN)
		return -AGG_E_TRUNC_ETH;
	memcpy(pkt->dst_mac, f, 6);
	memcpy(pkt->src_mac, f + 6, 6);
	etype = agg_rd16(f + 12);
	if (etype == AGG_ETHERTYPE_VLAN) {
		if (len < AGG_ETH_HLEN + AGG_VLAN_HLEN)
			return -AGG_E_TRUNC_ETH;
		pkt->has_vlan = true;
		pkt->vlan_tci = agg_rd16(f + 14);
		etype = agg_rd16(f + 16);
		off += AGG_VLAN_HLEN;
	}
	pkt->l3_off = off;
	if (etype != AGG_ETHERTYPE_IPV4)
		return -AGG_E_NOT_IPV4;

	if (len - off < AGG_IPV4_HLEN)
		return -AGG_E_TRUNC_IP;
	ip = f + off;
	if (ip[0] >> 4 != 4)
		return -AGG_E_IP_VERSION;
	if ((ip[0] & 0x0f) != 5)
		return -AGG_E_IP_OPTIONS;
	pkt->dscp = ip[1] >> 2;
	pkt->ecn = ip[1] & 3;
	pkt->ttl = ip[8];
	pkt->src_ip = agg_rd32(ip + 12);
	pkt->dst_ip = agg_rd32(ip + 16);
	pkt->ip_len = agg_rd16(ip + 2);
	/* Anything after the datagram is Ethernet padding. */
	if (pkt->ip_len < AGG_IPV4_HLEN || pkt->ip_len > len - off)
		return -AGG_E_IP_LEN;
	if (agg_rd16(ip + 6) & 0x3fff)
		return -AGG_E_IP_FRAG;
	if (agg_ipv4_csum(ip, AGG_IPV4_HLEN) != 0)
		return -AGG_E_IP_CSUM;
	if (ip[9] != 17)
		return -AGG_E_NOT_UDP;

	if (pkt->ip_len < AGG_IPV4_HLEN + AGG_UDP_HLEN)
		return -AGG_E_UDP_LEN;
	udp = ip + AGG_IPV4_HLEN;
	udp_len = agg_rd16(udp + 4);
	if (udp_len != pkt->ip_len - AGG_IPV4_HLEN)
		return -AGG_E_UDP_LEN;
	pkt->udp_sport = agg_rd16(udp);
	pkt->udp_dport = agg_rd16(udp + 2);
	if (pkt->udp_dport != AGG_ROCEV2_UDP_PORT)
		return -AGG_E_NOT_ROCE;

	pkt->bth_off = off + AGG_IPV4_HLEN + AGG_UDP_HLEN;
	return decode_roce(udp + AGG_UDP_HLEN, udp_len - AGG_UDP_HLEN,
			   verify_icrc ? ip : NULL, lazy, pkt);
}

int agg_decode(const void *frame, size_t len, bool verify_icrc,
	       struct agg_pkt *pkt)
{
	return decode(frame, len, verify_icrc, false, pkt);
}

int agg_decode_lazy(const void *frame, size_t len, struct agg_pkt *pkt)
{
	return decode(frame, len, true, true, pkt);
}

int agg_pkt_icrc_check(struct agg_pkt *pkt)
{
	if (!pkt->icrc_pending)
		return 0;
	pkt->icrc_pending = false;
	return agg_pkt_icrc_wrong(pkt) ? -AGG_E_ICRC : 0;
}

int agg_decode_bth(const void *bth, size_t len, struct agg_pkt *pkt)
{
	memset(pkt, 0, sizeof(*pkt));
	pkt->frame = bth;
	pkt->frame_len = (uint32_t)len;
	return decode_roce(bth, len, NULL, false, pkt);
}

/* ---- dtype and op metadata ---- */

static const struct {
	const char *name;
	const char *alias;
	uint8_t size;
	uint8_t acc_size;
	bool is_float;
} dtype_info[AGG_DTYPE_COUNT] = {
	[AGG_DTYPE_FP32]  = { "fp32",  "float",   4, 4, true },
	[AGG_DTYPE_FP16]  = { "fp16",  "half",    2, 4, true },
	[AGG_DTYPE_BF16]  = { "bf16",  "bfloat16", 2, 4, true },
	[AGG_DTYPE_INT32] = { "int32", "int",     4, 4, false },
	[AGG_DTYPE_INT64] = { "int64", "long",    8, 8, false },
	[AGG_DTYPE_FP64]  = { "fp64",  "double",  8, 8, true },
};

static const char *const op_names[AGG_OP_COUNT] = {
	[AGG_OP_SUM] = "sum", [AGG_OP_MIN] = "min", [AGG_OP_MAX] = "max",
	[AGG_OP_PROD] = "prod", [AGG_OP_BAND] = "band", [AGG_OP_BOR] = "bor",
	[AGG_OP_BXOR] = "bxor",
};

size_t agg_dtype_size(enum agg_dtype dtype)
{
	return (unsigned)dtype < AGG_DTYPE_COUNT ? dtype_info[dtype].size : 0;
}

size_t agg_dtype_acc_size(enum agg_dtype dtype)
{
	return (unsigned)dtype < AGG_DTYPE_COUNT ? dtype_info[dtype].acc_size : 0;
}

bool agg_dtype_is_float(enum agg_dtype dtype)
{
	return (unsigned)dtype < AGG_DTYPE_COUNT && dtype_info[dtype].is_float;
}

const char *agg_dtype_name(enum agg_dtype dtype)
{
	return (unsigned)dtype < AGG_DTYPE_COUNT ? dtype_info[dtype].name : "?";
}

const char *agg_op_name(enum agg_op op)
{
	return (unsigned)op < AGG_OP_COUNT ? op_names[op] : "?";
}

int agg_dtype_parse(const char *s)
{
	for (int i = 0; i < AGG_DTYPE_COUNT; i++)
		if (!strcasecmp(s, dtype_info[i].name) ||
		    !strcasecmp(s, dtype_info[i].alias))
			return i;
	return -1;
}

int agg_op_parse(const char *s)
{
	for (int i = 0; i < AGG_OP_COUNT; i++)
		if (!strcasecmp(s, op_names[i]))
			return i;
	return -1;
}

int agg_op_check(enum agg_dtype dtype, enum agg_op op)
{
	if ((unsigned)dtype >= AGG_DTYPE_COUNT)
		return -AGG_E_DTYPE;
	if ((unsigned)op >= AGG_OP_COUNT)
		return -AGG_E_OP;
	if (op >= AGG_OP_BAND && dtype_info[dtype].is_float)
		return -AGG_E_OP_DTYPE;
	return 0;
}
