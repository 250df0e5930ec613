/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * INCA aggregation engine: wire format, ICRC, reduction kernels and the
 * group/slot tables. Pure C, no I/O: the switch and the host library both
 * build on it. docs/protocol.md is the normative description of the bytes.
 *
 * Conventions: functions return 0 (or a length) on success and a negative
 * AGG_E* code on failure; agg_strerror() names every code. Multi-byte
 * header fields are in network byte order on the wire and in host order in
 * the structs below; element payloads are little-endian.
 *
 * One header on purpose (about 690 lines): it is the engine's whole
 * installed API, one section per source file (wire format and decoding:
 * agg_wire.c; building frames: agg_frame.c; PFC: agg_pfc.c; CRC/ICRC:
 * agg_icrc.c; reduction kernels: agg_reduce.c; groups and slots:
 * agg_group.c, agg_table.c), and its users (the switch, libinca, tests,
 * tools) each need several sections.
 */
#ifndef INCA_AGG_H
#define INCA_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Constants of the wire format                                        */
/* ------------------------------------------------------------------ */

#define AGG_ROCEV2_UDP_PORT   4791
#define AGG_ETHERTYPE_IPV4    0x0800
#define AGG_ETHERTYPE_VLAN    0x8100

#define AGG_ETH_HLEN          14
#define AGG_VLAN_HLEN         4
#define AGG_IPV4_HLEN         20
#define AGG_UDP_HLEN          8
#define AGG_BTH_LEN           12
#define AGG_DETH_LEN          8
#define AGG_IMM_LEN           4
#define AGG_INCA_HLEN         32
#define AGG_ICRC_LEN          4
#define AGG_CNP_PAD_LEN       16

/* BTH opcodes (InfiniBand Architecture Spec. vol. 1, 9.2; RoCEv2 annex). */
#define AGG_OP_UD_SEND_ONLY       0x64
#define AGG_OP_UD_SEND_ONLY_IMM   0x65
#define AGG_OP_CNP                0x81

#define AGG_PKEY_DEFAULT      0xffff
#define AGG_QPN_MASK          0xffffffu
#define AGG_PSN_MASK          0xffffffu

#define AGG_VERSION           1

/* Largest element count per packet: a 4096-byte IB MTU of 2-byte
 * elements (fp16/bf16). */
#define AGG_MAX_ELEMS         2048
/* Largest element payload in bytes (IB MTU 4096). */
#define AGG_MAX_PAYLOAD       4096
#define AGG_MAX_MEMBERS       1024
#define AGG_MAX_WINDOW        4096

/* Bytes in front of the elements for an untagged UD SEND_ONLY frame. */
#define AGG_FRAME_HDR_LEN (AGG_ETH_HLEN + AGG_IPV4_HLEN + AGG_UDP_HLEN + \
			   AGG_BTH_LEN + AGG_DETH_LEN + AGG_INCA_HLEN)
/* Largest frame the encoder produces (VLAN, immediate, 4096 B payload). */
#define AGG_MAX_FRAME_LEN (AGG_FRAME_HDR_LEN + AGG_VLAN_HLEN + AGG_IMM_LEN + \
			   AGG_MAX_PAYLOAD + AGG_ICRC_LEN)

enum agg_msg_type {
	AGG_TYPE_CONTRIB = 1,   /* host or child switch -> switch */
	AGG_TYPE_RESULT  = 2,   /* switch -> host or child switch */
	AGG_TYPE_CONTROL = 3,   /* reserved for in-band control; dropped today */
	AGG_TYPE_WAIT    = 4,   /* switch -> host: held, the set waits for others */
};

enum agg_dtype {
	AGG_DTYPE_FP32  = 0,
	AGG_DTYPE_FP16  = 1,
	AGG_DTYPE_BF16  = 2,
	AGG_DTYPE_INT32 = 3,
	AGG_DTYPE_INT64 = 4,
	AGG_DTYPE_FP64  = 5,
	AGG_DTYPE_COUNT
};

enum agg_op {
	AGG_OP_SUM  = 0,
	AGG_OP_MIN  = 1,
	AGG_OP_MAX  = 2,
	AGG_OP_PROD = 3,
	AGG_OP_BAND = 4,   /* integers only */
	AGG_OP_BOR  = 5,   /* integers only */
	AGG_OP_BXOR = 6,   /* integers only */
	AGG_OP_COUNT
};

/* The collective a packet belongs to (header byte 5, meaningful with
 * AGG_FLAG_COLL). docs/protocol.md, "Collectives". */
enum agg_coll {
	AGG_COLL_ALLREDUCE      = 0,   /* every member sends, every member gets */
	AGG_COLL_REDUCE         = 1,   /* every member sends, root gets */
	AGG_COLL_REDUCE_SCATTER = 2,   /* every member sends, the shard's owner gets */
	AGG_COLL_ALLGATHER      = 3,   /* the shard's owner sends, the others get */
	AGG_COLL_BCAST          = 4,   /* root sends, the others get */
	AGG_COLL_COUNT
};

/* INCA header flags. */
#define AGG_FLAG_SHADOW_SET   0x01  /* which of the slot's two sets */
#define AGG_FLAG_RETRANSMIT   0x02  /* sender timed out and resent */
#define AGG_FLAG_REPRODUCIBLE 0x04  /* result reduced in rank order */
#define AGG_FLAG_NO_DATA      0x08  /* no elements follow (count names the use's) */
#define AGG_FLAG_COLL         0x10  /* coll and root are set: not an all-reduce */
#define AGG_FLAGS_KNOWN       0x1f

/* ------------------------------------------------------------------ */
/* Errors and outcomes                                                 */
/* ------------------------------------------------------------------ */

/*
 * Every reason a packet is refused, as one X-macro list so that counters,
 * names and messages are generated from it and never drift apart.
 * X(name, "counter_name", "message")
 */
#define AGG_ERRORS(X) \
	X(TRUNC_ETH,     "trunc_eth",      "frame shorter than its Ethernet/VLAN header") \
	X(NOT_IPV4,      "not_ipv4",       "EtherType is not IPv4") \
	X(TRUNC_IP,      "trunc_ip",       "frame shorter than an IPv4 header") \
	X(IP_VERSION,    "ip_version",     "IP version field is not 4") \
	X(IP_OPTIONS,    "ip_options",     "IPv4 header length is not 20 bytes (options are not accepted)") \
	X(IP_LEN,        "ip_len",         "IPv4 total length disagrees with the frame length") \
	X(IP_FRAG,       "ip_frag",        "IPv4 packet is a fragment") \
	X(IP_CSUM,       "ip_csum",        "IPv4 header checksum is wrong") \
	X(NOT_UDP,       "not_udp",        "IPv4 protocol is not UDP") \
	X(UDP_LEN,       "udp_len",        "UDP length disagrees with the IPv4 total length") \
	X(NOT_ROCE,      "not_roce",       "UDP destination port is not 4791 (RoCEv2)") \
	X(TRUNC_BTH,     "trunc_bth",      "UDP payload shorter than BTH + ICRC") \
	X(BTH_TVER,      "bth_tver",       "BTH transport header version is not 0") \
	X(BTH_OPCODE,    "bth_opcode",     "BTH opcode is not UD SEND_ONLY[_WITH_IMM] or CNP") \
	X(CNP_LEN,       "cnp_len",        "CNP is not BTH + 16 reserved bytes + ICRC") \
	X(PAD,           "pad",            "BTH PadCnt disagrees with the element payload length") \
	X(TRUNC_DETH,    "trunc_deth",     "packet shorter than BTH + DETH + ICRC") \
	X(TRUNC_INCA,    "trunc_inca",     "packet shorter than the INCA header") \
	X(ICRC,          "icrc",           "invariant CRC (ICRC) is wrong") \
	X(VERSION,       "version",        "INCA header version is not supported") \
	X(TYPE,          "type",           "INCA message type is unknown or not accepted here") \
	X(DTYPE,         "dtype",          "INCA dtype is unknown") \
	X(OP,            "op",             "INCA op is unknown") \
	X(OP_DTYPE,      "op_dtype",       "bitwise op on a floating-point dtype") \
	X(FLAGS,         "flags",          "INCA flags has unknown bits set") \
	X(COLL,          "coll",           "collective unknown, or set without the COLL flag, or no data on an all-reduce, or root is no rank of the group") \
	X(COLL_DATA,     "coll_data",      "elements where the collective and root say none, or none where they say elements") \
	X(COUNT,         "count",          "element count disagrees with the payload length") \
	X(FANIN,         "fanin",          "fan-in is zero or not what the member is configured for") \
	X(GROUP,         "group",          "unknown group (id or QPN)") \
	X(QKEY,          "qkey",           "Q_Key does not match the group's") \
	X(NOT_MEMBER,    "not_member",     "sender rank, address or QPN is not a member of the group") \
	X(SLOT,          "slot",           "slot index is outside the group's window") \
	X(TOO_LONG,      "too_long",       "element count exceeds the group's elements per packet") \
	X(MISMATCH,      "mismatch",       "dtype, op, count, collective or root differ from the slot's other contributions") \
	X(STALE,         "stale",          "contribution for an older use of the slot") \
	X(NOSPACE,       "nospace",        "buffer too small") \
	X(INVAL,         "inval",          "invalid argument")

enum agg_err {
	AGG_OK = 0,
#define AGG_X_ENUM(name, counter, msg) AGG_E_##name,
	AGG_ERRORS(AGG_X_ENUM)
#undef AGG_X_ENUM
	AGG_E__COUNT
};
/* Functions return -AGG_E_xxx; the reasons are numbered from 1. */

/* Human message for 0 or a negative AGG_E_* code. Never NULL. */
const char *agg_strerror(int err);
/* Short snake_case name for counters (e.g. "icrc"). Never NULL. */
const char *agg_errname(int err);

/* ------------------------------------------------------------------ */
/* Element types                                                       */
/* ------------------------------------------------------------------ */

/* Bytes per element on the wire; 0 for an unknown dtype. */
size_t agg_dtype_size(enum agg_dtype dtype);
/* Bytes per element of the accumulator (fp32 for fp16/bf16). */
size_t agg_dtype_acc_size(enum agg_dtype dtype);
const char *agg_dtype_name(enum agg_dtype dtype);
const char *agg_op_name(enum agg_op op);
/* Parse "fp32", "float", "bf16", "int32", ... ; -1 if unknown. */
int agg_dtype_parse(const char *s);
int agg_op_parse(const char *s);
/* 0 if op applies to dtype, else -AGG_E_OP_DTYPE (or DTYPE/OP). */
int agg_op_check(enum agg_dtype dtype, enum agg_op op);
bool agg_dtype_is_float(enum agg_dtype dtype);

/* ------------------------------------------------------------------ */
/* Packets                                                             */
/* ------------------------------------------------------------------ */

/* INCA header, host byte order. Offsets are given in docs/protocol.md. */
struct agg_hdr {
	uint8_t version;
	uint8_t type;        /* enum agg_msg_type */
	uint8_t dtype;       /* enum agg_dtype */
	uint8_t op;          /* enum agg_op */
	uint8_t flags;       /* AGG_FLAG_* */
	uint16_t count;      /* elements in this packet */
	uint32_t group_id;
	uint16_t rank;       /* sender rank, or child index for a switch */
	uint16_t fanin;      /* original contributions this packet holds */
	uint16_t slot;
	uint32_t coll_seq;   /* collective sequence number */
	uint32_t pkt_idx;    /* packet index within the collective */
	uint8_t coll;        /* enum agg_coll; 0 unless flags has AGG_FLAG_COLL */
	uint16_t root;       /* the rank the data comes from or goes to (rooted) */
};

/* Bytes of elements a packet with this header carries: 0 with NO_DATA. */
static inline bool agg_hdr_has_data(const struct agg_hdr *h)
{
	return !(h->flags & AGG_FLAG_NO_DATA);
}

enum agg_pkt_kind {
	AGG_PKT_INCA = 1,    /* UD SEND carrying an INCA header */
	AGG_PKT_CNP  = 2,    /* RoCEv2 congestion notification */
};

/*
 * A decoded frame. agg_decode() fills fields in order as it validates them,
 * so after a failure the fields of the layers that passed are valid (the
 * switch looks at dst_ip to decide between forwarding and aggregating).
 */
struct agg_pkt {
	const uint8_t *frame;
	uint32_t frame_len;
	/* Ethernet */
	uint8_t dst_mac[6];
	uint8_t src_mac[6];
	bool has_vlan;
	uint16_t vlan_tci;
	uint16_t l3_off;
	/* IPv4 (addresses in host byte order) */
	uint32_t src_ip;
	uint32_t dst_ip;
	uint8_t dscp;
	uint8_t ecn;
	uint8_t ttl;
	uint16_t ip_len;     /* IPv4 total length */
	/* UDP */
	uint16_t udp_sport;
	uint16_t udp_dport;
	/* BTH */
	uint16_t bth_off;
	uint8_t opcode;
	uint8_t pad;         /* PadCnt */
	bool solicited;
	bool fecn;
	bool becn;
	uint16_t pkey;
	uint32_t dest_qp;
	bool ackreq;
	uint32_t psn;
	/* DETH (and immediate data) */
	uint32_t qkey;
	uint32_t src_qp;
	bool has_imm;
	uint32_t imm;
	/* INCA */
	enum agg_pkt_kind kind;
	struct agg_hdr hdr;
	const uint8_t *payload;   /* elements, little-endian */
	uint32_t payload_len;     /* count * dtype size; 0 with AGG_FLAG_NO_DATA */
	uint32_t icrc;            /* as carried (host value of the LE bytes) */
	bool icrc_pending;        /* agg_decode_lazy left the ICRC unchecked */
};

/*
 * Decode and validate one Ethernet frame (without FCS). Ethernet padding
 * after the IPv4 datagram is allowed. With verify_icrc the ICRC is checked.
 * Returns 0 or the negative code of the first check that failed; never
 * reads outside [frame, frame + len).
 */
int agg_decode(const void *frame, size_t len, bool verify_icrc,
	       struct agg_pkt *pkt);

/*
 * agg_decode with the ICRC of an INCA packet that passes every other check
 * left for later (pkt->icrc_pending), so that the switch can check it in
 * the pass that reduces the elements (agg_group_ingest does). A packet that
 * fails a check after the point where agg_decode checks the ICRC has its
 * ICRC checked first: a wrong one is reported as -AGG_E_ICRC, as
 * agg_decode would. Whoever takes the packet on must check it before using
 * any INCA field (agg_pkt_icrc_check) unless it hands it to
 * agg_group_ingest.
 */
int agg_decode_lazy(const void *frame, size_t len, struct agg_pkt *pkt);
/* A pending ICRC checked now: 0 (and no longer pending) or -AGG_E_ICRC. */
int agg_pkt_icrc_check(struct agg_pkt *pkt);

/*
 * Decode a RoCEv2 packet starting at the BTH, as a UDP socket sees it.
 * The IPv4 fields needed for the ICRC are not available, so the ICRC is
 * not checked (the kernel has delivered a datagram whose UDP length fits).
 */
int agg_decode_bth(const void *bth, size_t len, struct agg_pkt *pkt);

/*
 * Validate an INCA message as an RDMA receive delivers it: the 32-byte
 * header followed by exactly count elements (BTH padding already removed).
 * On success *payload points at the elements.
 */
int agg_decode_msg(const void *msg, size_t len, struct agg_hdr *hdr,
		   const uint8_t **payload);

/* Everything needed to build one frame. Host byte order. */
struct agg_frame_spec {
	uint8_t dst_mac[6];
	uint8_t src_mac[6];
	bool has_vlan;
	uint16_t vlan_tci;
	uint32_t src_ip;
	uint32_t dst_ip;
	uint8_t dscp;
	uint8_t ecn;
	uint8_t ttl;         /* 0 means 64 */
	uint16_t udp_sport;  /* 0 means 4791 */
	uint8_t opcode;      /* 0 means UD SEND_ONLY */
	uint16_t pkey;       /* 0 means 0xffff */
	uint32_t dest_qp;
	uint32_t psn;
	bool solicited;
	uint32_t qkey;
	uint32_t src_qp;
	uint32_t imm;        /* used with AGG_OP_UD_SEND_ONLY_IMM */
	struct agg_hdr hdr;  /* hdr.count elements of hdr.dtype follow (none
			      * with AGG_FLAG_NO_DATA) */
};

/*
 * Build a complete frame (Ethernet .. ICRC) from spec and payload
 * (hdr.count elements, little-endian). IPv4 ID 0, DF set, UDP checksum 0,
 * IPv4 checksum and ICRC computed. Returns the frame length, or
 * -AGG_E_NOSPACE / -AGG_E_DTYPE / -AGG_E_INVAL.
 */
int agg_encode(void *buf, size_t cap, const struct agg_frame_spec *spec,
	       const void *payload);

/*
 * Build a RoCEv2 CNP (opcode 0x81, BECN set, 16 reserved bytes) to
 * spec->dest_qp. Returns the frame length or a negative code.
 */
int agg_encode_cnp(void *buf, size_t cap, const struct agg_frame_spec *spec);

/* Offset of the UDP payload (the BTH) in a frame built by agg_encode. */
static inline size_t agg_spec_bth_offset(const struct agg_frame_spec *spec)
{
	return AGG_ETH_HLEN + (spec->has_vlan ? AGG_VLAN_HLEN : 0) +
	       AGG_IPV4_HLEN + AGG_UDP_HLEN;
}

/* Write / read the 32-byte INCA header. */
void agg_hdr_write(uint8_t *p, const struct agg_hdr *h);
void agg_hdr_read(const uint8_t *p, struct agg_hdr *h);

/* RFC 1071 checksum of an IPv4 header (len bytes, checksum field as is). */
uint16_t agg_ipv4_csum(const uint8_t *ip, size_t len);

/* ------------------------------------------------------------------ */
/* Priority-based flow control (IEEE 802.1Qbb)                         */
/* ------------------------------------------------------------------ */

#define AGG_ETHERTYPE_MAC_CONTROL 0x8808
#define AGG_PFC_OPCODE            0x0101
#define AGG_PAUSE_OPCODE          0x0001   /* 802.3x link-level PAUSE */
#define AGG_PFC_CLASSES           8
#define AGG_PFC_MIN_LEN           34       /* Ethernet + opcode + vector + 8 times */
#define AGG_PFC_FRAME_LEN         60       /* padded to the minimum frame, no FCS */
#define AGG_PFC_QUANTUM_BITS      512      /* a quantum is 512 bit times */

/* Destination of every MAC control frame: 01:80:C2:00:00:01. */
extern const uint8_t agg_pfc_dst_mac[6];

/* X(name, "counter_name", "message") */
#define AGG_PFC_ERRORS(X) \
	X(SHORT,       "short",        "shorter than a PFC frame (34 bytes)") \
	X(NOT_CONTROL, "not_control",  "EtherType is not MAC control (0x8808)") \
	X(BAD_DST,     "bad_dst",      "destination is not 01:80:C2:00:00:01") \
	X(LINK_PAUSE,  "link_pause",   "802.3x link-level PAUSE (opcode 0x0001), not PFC") \
	X(BAD_OPCODE,  "bad_opcode",   "MAC control opcode is not PFC (0x0101)") \
	X(ZERO_VECTOR, "zero_vector",  "class-enable vector names no class") \
	X(RESERVED,    "reserved_bits","reserved high byte of the class-enable vector is set")

enum agg_pfc_error {
	AGG_PFC_OK = 0,
#define AGG_X_PFC_ENUM(n, c, m) AGG_PFC_E_##n,
	AGG_PFC_ERRORS(AGG_X_PFC_ENUM)
#undef AGG_X_PFC_ENUM
	AGG_PFC_E__COUNT
};

/* A PFC frame's content: the classes it names and their pause times. */
struct agg_pfc {
	uint8_t enable;                       /* bit i: class i */
	uint16_t quanta[AGG_PFC_CLASSES];     /* 0 resumes the class (XON) */
};

/* Build a PFC frame from src_mac (AGG_PFC_FRAME_LEN bytes). Returns the
 * length or -AGG_E_NOSPACE. Times of classes not enabled are written 0. */
int agg_pfc_encode(void *buf, size_t cap, const uint8_t src_mac[6],
		   const struct agg_pfc *pfc);
/* Parse a frame as PFC. Returns 0 or -AGG_PFC_E_*; never reads outside
 * [frame, frame + len). */
int agg_pfc_decode(const void *frame, size_t len, struct agg_pfc *out);
/* Counter name ("short", ...) and message of a -AGG_PFC_E_* code. */
const char *agg_pfc_error_name(int err);
const char *agg_pfc_strerror(int err);
/* How long quanta pause a link of rate_bps, in nanoseconds. */
static inline uint64_t agg_pfc_quanta_ns(uint16_t quanta, uint64_t rate_bps)
{
	return rate_bps ? (uint64_t)quanta * AGG_PFC_QUANTUM_BITS * 1000000000ull / rate_bps : 0;
}

/* ------------------------------------------------------------------ */
/* CRC-32 and ICRC                                                     */
/* ------------------------------------------------------------------ */

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32): crc = agg_crc32(0,..).
 * Uses the widest carry-less multiplication this CPU has (checked at
 * start-up), else tables. */
uint32_t agg_crc32(uint32_t crc, const void *buf, size_t len);
/* Its implementations, so tests can check each one the CPU has. */
enum agg_crc_impl {
	AGG_CRC_TABLE = 0,         /* slice-by-8, portable */
	AGG_CRC_PCLMUL,            /* x86-64 PCLMULQDQ folding, 64 bytes a step */
	AGG_CRC_VPCLMUL_AVX512,    /* AVX-512 VPCLMULQDQ folding, 256 bytes a step */
	AGG_CRC_VPCLMUL_AVX2,      /* 256-bit VPCLMULQDQ folding (AVX2), 128 bytes a step */
	AGG_CRC__COUNT
};
bool agg_crc32_impl_available(enum agg_crc_impl impl);
const char *agg_crc32_impl_name(enum agg_crc_impl impl);
/* What agg_crc32 uses on this CPU: the widest it has, or the one chosen
 * with agg_crc32_impl_use. */
enum agg_crc_impl agg_crc32_impl_best(void);
/* Make agg_crc32 use impl (a switch's --crc, a bench's comparison): 0, or
 * -1 when this CPU does not have it (nothing changes). Call it before the
 * data path runs: it is not synchronised with agg_crc32's callers. */
int agg_crc32_impl_use(enum agg_crc_impl impl);
/* The implementation named name (agg_crc32_impl_name's), or -1. */
int agg_crc32_impl_parse(const char *name);
/* agg_crc32 with impl (the table version when impl is not available). */
uint32_t agg_crc32_with(enum agg_crc_impl impl, uint32_t crc, const void *buf, size_t len);
/* Operator that appends len zero bytes: x^(8*len) mod P. */
uint32_t agg_crc32_shift_op(size_t len);
/* The inverse of agg_crc32_shift_op(len + 4): x^-(8*len + 32) mod P. */
uint32_t agg_crc32_unshift_op(size_t len);
/*
 * What to XOR into 4 bytes of a message (as a little-endian 32-bit word)
 * that are followed by len more bytes, so that its CRC (or ICRC) becomes
 * want instead of have; unshift_op is agg_crc32_unshift_op(len). Every
 * CRC value is reachable (x is invertible modulo P).
 */
uint32_t agg_crc32_balance(uint32_t have, uint32_t want, uint32_t unshift_op);
/* crc(A || B) from crc(A), crc(B) and agg_crc32_shift_op(len(B)). */
uint32_t agg_crc32_combine_op(uint32_t crc_a, uint32_t crc_b, uint32_t op);
/* The same with impl's multiplication (bit-wise for AGG_CRC_TABLE, one
 * carry-less multiplication otherwise), for tests. */
uint32_t agg_crc32_combine_op_with(enum agg_crc_impl impl, uint32_t crc_a, uint32_t crc_b,
				   uint32_t op);
/* Same, computing the operator (O(log len)). */
uint32_t agg_crc32_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b);

/*
 * RoCEv2 ICRC of an IPv4 packet: ip points at the IPv4 header, ip_len is
 * the IPv4 total length (which includes the 4 ICRC bytes at the end, not
 * covered). Masks TOS, TTL, IPv4 checksum, UDP checksum and BTH byte 4.
 */
uint32_t agg_icrc_ipv4(const uint8_t *ip, size_t ip_len);
/*
 * The same in two parts: the CRC of everything up to (not including)
 * hdr_len bytes from ip (masked headers), to combine with the CRC of the
 * rest. agg_icrc_ipv4(ip, n) ==
 *   agg_crc32_combine(agg_icrc_ipv4_prefix(ip, h), agg_crc32(0, ip+h, n-4-h), n-4-h)
 */
uint32_t agg_icrc_ipv4_prefix(const uint8_t *ip, size_t hdr_len);
/*
 * A contribution's ICRC (agg_icrc_ipv4's value over the frame agg_decode
 * read) computed in the pass that reduces its elements: out = acc op the
 * elements (acc NULL: out = the elements, as agg_acc_load). out is another
 * accumulator's room, or acc itself; the result is bit for bit
 * agg_acc_load's or agg_acc_reduce's (but for which NaN a NaN element
 * is, which docs/protocol.md leaves open). One pass where
 * agg_icrc_reduce_available (every float and integer dtype: load, and sum;
 * with VPCLMULQDQ, or PCLMULQDQ and AVX2), two otherwise.
 */
uint32_t agg_icrc_reduce(const struct agg_pkt *pkt, void *out, const void *acc);
bool agg_icrc_reduce_available(enum agg_dtype dtype, enum agg_op op, bool load);
/*
 * The same for a set's last contribution: out = the result in the wire's
 * format, acc op the elements rounded as agg_acc_store rounds them (fp16,
 * bf16: no fp32 sum written; other dtypes: as agg_icrc_reduce). One pass
 * where agg_icrc_reduce_store_available (fp16 and bf16 sums, on the CPUs
 * of agg_icrc_reduce_available).
 */
uint32_t agg_icrc_reduce_store(const struct agg_pkt *pkt, void *out, const void *acc);
bool agg_icrc_reduce_store_available(enum agg_dtype dtype, enum agg_op op);
/*
 * A prefetch stream for the calling thread: len bytes from p (a frame the
 * caller will read soon) brought towards the core a few cache lines at
 * each step of the CRC foldings and one-pass kernels above, so that they
 * go out a few at a time while the core works, not all at once (which
 * fills the core's miss buffers and stalls it). What the last stream
 * still had is asked for at once first; where agg_crc32 uses the tables
 * (nothing folds), all of it at once. A hint: nothing is read.
 */
void agg_prefetch_stream(const void *p, size_t len);
/* Store the ICRC little-endian at p / read it. */
void agg_icrc_store(uint8_t *p, uint32_t icrc);
uint32_t agg_icrc_load(const uint8_t *p);

/* ------------------------------------------------------------------ */
/* Reduction kernels                                                   */
/* ------------------------------------------------------------------ */

/*
 * The accumulator holds agg_dtype_acc_size() bytes per element.
 * acc_load:   acc[i] = in[i]                (first contribution)
 * acc_reduce: acc[i] = acc[i] op in[i]      (in is wire format)
 * acc_store:  out[i] = round(acc[i])        (to wire format)
 * Semantics for NaN, Inf, signed zero and integer overflow are stated in
 * docs/protocol.md ("Reduction semantics"). Return 0 or -AGG_E_DTYPE/OP/
 * OP_DTYPE.
 */
int agg_acc_load(enum agg_dtype dtype, void *acc, const void *in, size_t n);
int agg_acc_reduce(enum agg_dtype dtype, enum agg_op op, void *acc,
		   const void *in, size_t n);
int agg_acc_store(enum agg_dtype dtype, void *out, const void *acc, size_t n);

/* Scalar conversions (IEEE 754 binary16 and bfloat16, round to nearest
 * even; NaN stays NaN and is quieted). */
float agg_fp16_to_fp32(uint16_t h);
uint16_t agg_fp32_to_fp16(float f);
float agg_bf16_to_fp32(uint16_t b);
uint16_t agg_fp32_to_bf16(float f);

/* ------------------------------------------------------------------ */
/* Groups and slots                                                    */
/* ------------------------------------------------------------------ */

struct agg_member {
	uint32_t ip;         /* host byte order */
	uint32_t qpn;
	uint8_t mac[6];      /* all zero: resolve at run time */
	uint16_t fanin;      /* 1 for a host, k for a child switch */
	/* The job's ranks under this member (docs/protocol.md, section 4,
	 * "Ranks in a tree"): NULL in every member for the default (member i
	 * covers first_rank + the fan-ins of the members before it, fanin
	 * ranks in a row), else given for every member, exactly fanin
	 * distinct ranks each. agg_group_create copies them. */
	const uint16_t *ranks;
	uint16_t nranks;
};

/* Where a group in a tree sends its partial: the parent switch's group.
 * ip 0: this group is the root (or the only level). */
struct agg_parent {
	uint32_t ip;         /* the parent switch's address, host byte order */
	uint32_t qpn;        /* the group's QPN on the parent */
	uint32_t qkey;       /* the parent group's Q_Key */
	uint16_t rank;       /* this switch's member index in the parent group */
};

struct agg_group_config {
	uint32_t group_id;
	uint32_t qpn;        /* the group's QPN on this switch */
	uint32_t qkey;
	uint16_t nmembers;
	uint16_t window;     /* slots */
	uint16_t elems_per_pkt;  /* E: largest count per packet */
	uint32_t dtype_mask; /* allowed dtypes: bit (1 << dtype); 0 = all */
	bool reproducible;
	const struct agg_member *members;
	struct agg_parent parent;
	uint16_t first_rank; /* the job rank of member 0's first contribution,
			      * when the members list no ranks */
	/* Threads that share the group without locks (0 or 1: one): slot s
	 * belongs to shard (group_id + s) % shards (the low bits of the UDP
	 * source port hosts send slot s from, docs/protocol.md 1.3, when
	 * shards is a power of two), and only one thread at a time may
	 * call agg_group_ingest / agg_group_parent_result for a shard's
	 * slots, or agg_result_encode for its results. Each shard has its
	 * own counters and its own PSN sequence per member (shard k of S
	 * sends k, k + S, k + 2S, ...). */
	uint16_t shards;
};

/* "No member": a rank that no member of this switch covers. */
#define AGG_NO_MEMBER 0xffff

/* Counters per group; every drop reason of agg_group_ingest is counted. */
struct agg_group_stats {
	uint64_t contributions;  /* accepted into a slot */
	uint64_t completions;    /* sets completed (results to multicast) */
	uint64_t duplicates;     /* contribution already counted: ignored */
	uint64_t retransmits;    /* retained result answered to one member */
	uint64_t preempted;      /* incomplete set overwritten by newer use */
	uint64_t restarts;       /* every member sent the same older key: it takes the set */
	uint64_t upstream;       /* partials sent to the parent (first sends) */
	uint64_t upstream_resends; /* partial sent again: a member retransmitted */
	uint64_t parent_results; /* final results received from the parent */
	uint64_t waits;          /* WAITs answered to a retransmission */
	uint64_t one_pass;       /* contributions whose ICRC was checked in the
				    pass that reduced them (agg_icrc_reduce) */
	uint64_t drops[AGG_E__COUNT];
};

/* Outcome of one accepted packet. */
enum agg_verdict {
	AGG_V_ACCEPTED = 0,   /* reduced; set not complete yet: send nothing */
	AGG_V_COMPLETE,       /* set completed: send the result to all members */
	AGG_V_DUPLICATE,      /* already counted, set open: send nothing */
	AGG_V_RETRANSMIT,     /* set complete: send the result to this member */
	AGG_V_UPSTREAM,       /* (group with a parent) send *res, the partial, up */
	AGG_V_WAIT,           /* a retransmission the switch holds (or dropped as a
				 restart's first copy): send *res, a WAIT, to it */
};

struct agg_group;

/*
 * A completed set's result as the data path needs it to build packets:
 * the wire-format payload (zero-padded to 4 bytes) and its CRC, and which
 * members get it (docs/protocol.md, section 2.1): with data_to_all every
 * member (all-reduce), or every member but the owner (allgather, bcast:
 * not_owner; the owner sent the elements, and the result without them is
 * its acknowledgement), else only the member owner (reduce,
 * reduce-scatter; AGG_NO_MEMBER: none here). The others get a result
 * without data (AGG_FLAG_NO_DATA, the same header otherwise);
 * agg_result_encode builds either. With AGG_FLAG_NO_DATA in hdr there is
 * no payload at all (payload_len 0; a partial of an allgather or bcast
 * whose root is not under this switch).
 */
struct agg_result {
	struct agg_hdr hdr;       /* type RESULT, total fan-in, rank 0 */
	const uint8_t *payload;
	uint32_t payload_len;     /* count * dtype size */
	uint8_t pad;              /* PadCnt: zero bytes after the payload */
	uint32_t payload_crc;     /* agg_crc32 over payload + pad bytes */
	uint32_t payload_shift;   /* agg_crc32_shift_op(payload_len + pad) */
	bool data_to_all;         /* every member gets the payload ... */
	bool not_owner;           /* ... but the owner */
	uint16_t owner;           /* else the member that does, or AGG_NO_MEMBER */
};

/* Whether member gets res's elements or a result without data. */
static inline bool agg_result_has_data_for(const struct agg_result *res,
					   uint16_t member)
{
	if (res->data_to_all)
		return !res->not_owner || res->owner != member;
	return res->owner == member;
}

/*
 * Check a group configuration without creating the group: NULL when
 * agg_group_create would take it, else what is wrong, naming the field
 * ("window: need 1 to 4096 slots"). agg_group_create refuses the same
 * configurations with the same words.
 */
const char *agg_group_config_check(const struct agg_group_config *cfg);

/*
 * Create a group: validates the config (errno EINVAL and what is wrong,
 * naming the field, in *why if non-NULL) and allocates all slot memory up
 * front. Returns NULL on failure (errno EINVAL or ENOMEM).
 */
struct agg_group *agg_group_create(const struct agg_group_config *cfg,
				   const char **why);
void agg_group_destroy(struct agg_group *g);
const struct agg_group_config *agg_group_config(const struct agg_group *g);
/* The counters of shard 0: all of them for a group with one shard. */
const struct agg_group_stats *agg_group_stats(const struct agg_group *g);
/* Every shard's counters added up (a snapshot; shards keep counting). */
void agg_group_stats_sum(const struct agg_group *g, struct agg_group_stats *out);
/* Forget all slot state (e.g. the job restarted); counters are kept. */
void agg_group_reset(struct agg_group *g);
/* The member that job rank is, or is under (its owner for a collective
 * rooted at rank), or AGG_NO_MEMBER when no member of this switch is. */
uint16_t agg_group_rank_owner(const struct agg_group *g, uint16_t rank);

/*
 * Ingest a decoded contribution. Checks group QPN, Q_Key, header type,
 * dtype allowed, member (rank, source IPv4 and QPN), fan-in, slot, count
 * and, for a collective other than all-reduce, its root and whether the
 * packet must carry elements (docs/protocol.md, section 2.1), then reduces
 * (allgather, bcast: keeps the owner's elements as they are). Returns an
 * agg_verdict (>= 0) or a negative AGG_E_* code; every negative return is
 * counted in the group's drops[]. On AGG_V_COMPLETE and AGG_V_RETRANSMIT,
 * *res describes the result (and who gets its data). On AGG_V_WAIT, *res
 * is a WAIT for the sender alone (header only, fanin = members the set
 * has heard from): a retransmitted contribution (AGG_FLAG_RETRANSMIT) the
 * set already holds while it waits for other members, or one a restart
 * dropped (docs/protocol.md 3.2, "Waiting"); counted in `waits` (and, for
 * the second kind, in drops[] as stale).
 * *member_out receives the sender's member index.
 */
int agg_group_ingest(struct agg_group *g, const struct agg_pkt *pkt,
		     struct agg_result *res, uint16_t *member_out);

/*
 * In a tree, a group with a parent does not send its completed set to its
 * members: agg_group_ingest returns AGG_V_UPSTREAM with *res the partial
 * (type CONTRIB, rank = parent.rank, fanin = the group's total fan-in),
 * to be sent to the parent (agg_encode, DETH SrcQP = the group's QPN), and
 * again whenever a member retransmits before the final result came. The
 * partial carries elements unless it is an allgather's or bcast's whose
 * root is not under this switch (then AGG_FLAG_NO_DATA). The parent's
 * result comes back through this call: checked against the parent's
 * address, QPN and Q_Key, the pending set and whether it must carry
 * elements (-AGG_E_COLL_DATA; an allgather's or bcast's comes without them
 * when its root is under this switch, which kept the owner's elements and
 * sends them on; with them, from an older parent, also taken), it becomes
 * the set's retained result;
 * returns AGG_V_COMPLETE (send *res to every member, with or without
 * data as agg_result_has_data_for says), AGG_V_DUPLICATE (already had it)
 * or a negative AGG_E_* code, counted. A member's retransmission of a set
 * sent up goes up again with AGG_FLAG_RETRANSMIT, and the parent's WAIT
 * for it (it holds the partial, other children are late) comes through
 * here too: AGG_V_WAIT, *res a WAIT to send to every member.
 */
int agg_group_parent_result(struct agg_group *g, const struct agg_pkt *pkt,
			    struct agg_result *res);

/*
 * Build the result frame for one member: Ethernet from src_mac to the
 * member's MAC (dst_mac overrides when non-NULL), IPv4 from switch_ip,
 * BTH to the member's QPN with its next PSN, DETH with the group's Q_Key
 * and QPN, INCA header from res; IPv4 checksum, and ICRC by combining the
 * header CRC with res->payload_crc (the payload is not re-CRCed). A member
 * that gets no data (agg_result_has_data_for) gets the header alone with
 * AGG_FLAG_NO_DATA, PadCnt 0 and the ICRC over the headers.
 * Returns the frame length or a negative code.
 */
struct agg_result_l2 {
	uint8_t src_mac[6];
	uint32_t switch_ip;
	uint8_t dscp;
	bool has_vlan;
	uint16_t vlan_tci;
};
int agg_result_encode(struct agg_group *g, uint16_t member,
		      const struct agg_result *res,
		      const struct agg_result_l2 *l2, const uint8_t *dst_mac,
		      void *buf, size_t cap);
/*
 * The same frames in two pieces, for senders that chain buffers: one body
 * and ICRC shared by every member's result. agg_result_tmpl_init builds,
 * once for a completed set, the IPv4 .. INCA headers its results share
 * (l2's switch_ip and dscp; each member's own fields zero) and the ICRC
 * every frame will end with; then agg_result_encode_hdr writes one
 * member's headers from it and returns their length. The frame is those
 * headers, then the body (res->payload_len + res->pad bytes), then the 4
 * bytes agg_icrc_store(t->icrc) writes. No CRC over the headers per
 * member: the INCA header's last 4 bytes (reserved, ignored by receivers)
 * carry the balance that makes the frame's ICRC t->icrc, one carry-less
 * multiplication where the CPU has PCLMULQDQ, a 32-step loop elsewhere
 * (docs/protocol.md, 1.6). The frame is agg_result_encode's
 * but for that balance, the ICRC it leads to, and the PSN (the member's
 * next). The template's switch_ip and dscp are used, not l2's: l2 gives
 * the member's Ethernet header (src_mac, VLAN). res must outlive
 * the template. -AGG_E_INVAL for a result without elements (init) or a
 * member that gets none (agg_result_has_data_for); -AGG_E_NOSPACE.
 */
#define AGG_RESULT_TMPL_HLEN (AGG_IPV4_HLEN + AGG_UDP_HLEN + AGG_BTH_LEN + \
			      AGG_DETH_LEN + AGG_INCA_HLEN)
struct agg_result_tmpl {
	uint8_t hdr[AGG_RESULT_TMPL_HLEN];  /* IPv4 .. INCA, the members' fields 0 */
	uint32_t ip_sum;                    /* its IPv4 words, summed, not folded */
	uint32_t icrc;                      /* every member's frame ends with it */
	const struct agg_result *res;
};
int agg_result_tmpl_init(struct agg_group *g, const struct agg_result *res,
			 const struct agg_result_l2 *l2, struct agg_result_tmpl *t);
int agg_result_encode_hdr(struct agg_group *g, uint16_t member,
			  const struct agg_result_tmpl *t,
			  const struct agg_result_l2 *l2, const uint8_t *dst_mac,
			  void *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* INCA_AGG_H */
