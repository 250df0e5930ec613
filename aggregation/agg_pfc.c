/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * IEEE 802.1Qbb priority-based flow control frames: MAC control (0x8808),
 * opcode 0x0101, a class-enable vector and eight pause times in quanta of
 * 512 bit times. Shared by the switch (sends and honours them) and the
 * hosts (honour them).
 */
#include <string.h>

#include "inca/agg.h"

const uint8_t agg_pfc_dst_mac[6] = { 0x01, 0x80, 0xc2, 0x00, 0x00, 0x01 };

static const char *const pfc_names[AGG_PFC_E__COUNT] = {
	[AGG_PFC_OK] = "ok",
#define AGG_X_PFC_NAME(n, c, m) [AGG_PFC_E_##n] = c,
	AGG_PFC_ERRORS(AGG_X_PFC_NAME)
#undef AGG_X_PFC_NAME
};

static const char *const pfc_msgs[AGG_PFC_E__COUNT] = {
	[AGG_PFC_OK] = "valid PFC frame",
#define AGG_X_PFC_MSG(n, c, m) [AGG_PFC_E_##n] = m,
	AGG_PFC_ERRORS(AGG_X_PFC_MSG)
#undef AGG_X_PFC_MSG
};

const char *agg_pfc_error_name(int err)
{
	if (err < 0)
		err = -err;
	return err < AGG_PFC_E__COUNT ? pfc_names[err] : "unknown";
}

const char *agg_pfc_strerror(int err)
{
	if (err < 0)
		err = -err;
	return err < AGG_PFC_E__COUNT ? pfc_msgs[err] : "unknown PFC error";
}

int agg_pfc_encode(void *buf, size_t cap, const uint8_t src_mac[6],
		   const struct agg_pfc *pfc)
{
	uint8_t *p = buf;

	if (cap < AGG_PFC_FRAME_LEN)
		return -AGG_E_NOSPACE;
	memset(p, 0, AGG_PFC_FRAME_LEN);
	memcpy(p, agg_pfc_dst_mac, 6);
	memcpy(p + 6, src_mac, 6);
	p[12] = AGG_ETHERTYPE_MAC_CONTROL >> 8;
	p[13] = AGG_ETHERTYPE_MAC_CONTROL & 0xff;
	p[14] = AGG_PFC_OPCODE >> 8;
	p[15] = AGG_PFC_OPCODE & 0xff;
	p[17] = pfc->enable;
	for (unsigned i = 0; i < AGG_PFC_CLASSES; i++) {
		uint16_t q = (pfc->enable >> i & 1) ? pfc->quanta[i] : 0;
		p[18 + 2 * i] = (uint8_t)(q >> 8);
		p[19 + 2 * i] = (uint8_t)q;
	}
	return AGG_PFC_FRAME_LEN;
}

int agg_pfc_decode(const void *frame, size_t len, struct agg_pfc *out)
{
	const uint8_t *p = frame;
	uint16_t opcode;

	if (len < AGG_ETH_HLEN + 2)
		return -AGG_PFC_E_SHORT;
	if ((p[12] << 8 | p[13]) != AGG_ETHERTYPE_MAC_CONTROL)
		return -AGG_PFC_E_NOT_CONTROL;
	if (memcmp(p, agg_pfc_dst_mac, 6))
		return -AGG_PFC_E_BAD_DST;
	opcode = (uint16_t)(p[14] << 8 | p[15]);
	if (opcode == AGG_PAUSE_OPCODE)
		return -AGG_PFC_E_LINK_PAUSE;
	if (opcode != AGG_PFC_OPCODE)
		return -AGG_PFC_E_BAD_OPCODE;
	if (len < AGG_PFC_MIN_LEN)
		return -AGG_PFC_E_SHORT;
	if (p[16])
		return -AGG_PFC_E_RESERVED;
	if (!p[17])
		return -AGG_PFC_E_ZERO_VECTOR;
	out->enable = p[17];
	for (unsigned i = 0; i < AGG_PFC_CLASSES; i++)
		out->quanta[i] = (out->enable >> i & 1) ?
				 (uint16_t)(p[18 + 2 * i] << 8 | p[19 + 2 * i]) : 0;
	return 0;
}
