/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the decoder and the slot table: any bytes in, no
 * crash, no read outside the frame, and the invariants a valid decode
 * promises hold.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inca/agg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agg_pkt pkt;
	int rc;

	/* what a UDP socket would hand the host library */
	rc = agg_decode_bth(data, size, &pkt);
	check(rc <= 0 && rc > -AGG_E__COUNT);

	/* what an RDMA receive would hand it (verbs: header + elements) */
	struct agg_hdr hdr;
	const uint8_t *elems = NULL;
	rc = agg_decode_msg(data, size, &hdr, &elems);
	check(rc <= 0 && rc > -AGG_E__COUNT);
	if (rc == 0)
		check(elems == data + AGG_INCA_HLEN &&
		      AGG_INCA_HLEN + (agg_hdr_has_data(&hdr) ?
				       (size_t)hdr.count * agg_dtype_size(hdr.dtype) : 0) == size);

	rc = agg_decode(data, size, (size & 1) == 0, &pkt);
	check(rc <= 0 && rc > -AGG_E__COUNT);
	if (rc != 0 || pkt.kind != AGG_PKT_INCA)
		return 0;
	check(pkt.payload >= data && pkt.payload + pkt.payload_len <= data + size);
	check(pkt.payload_len == (agg_hdr_has_data(&pkt.hdr) ?
				  pkt.hdr.count * agg_dtype_size(pkt.hdr.dtype) : 0));

	/* a group that accepts this packet's sender, to reach the table */
	struct agg_member m[2] = {
		{ .ip = pkt.src_ip ? pkt.src_ip : 1, .qpn = pkt.src_qp | 2, .fanin = pkt.hdr.fanin },
		{ .ip = 0x0a0000ff, .qpn = 3, .fanin = 1 },
	};
	struct agg_group_config cfg = {
		.group_id = pkt.hdr.group_id,
		.qpn = pkt.dest_qp < 2 ? 2 : pkt.dest_qp,
		.qkey = pkt.qkey,
		.nmembers = 2,
		.window = 2,
		.elems_per_pkt = 64,
		.reproducible = pkt.hdr.flags & AGG_FLAG_REPRODUCIBLE,
		.members = m,
	};
	if (m[0].fanin == 0)
		return 0;
	struct agg_group *g = agg_group_create(&cfg, NULL);
	if (!g)
		return 0;
	struct agg_result res;
	uint8_t out[AGG_MAX_FRAME_LEN];
	struct agg_result_l2 l2 = { .switch_ip = 0x0a0000fe };
	pkt.hdr.rank = 0;
	rc = agg_group_ingest(g, &pkt, &res, NULL);
	check(rc >= -AGG_E__COUNT + 1 && rc <= AGG_V_RETRANSMIT);
	if (rc >= 0) {
		/* second member completes the set; the result must decode */
		static const uint8_t zeros[AGG_MAX_FRAME_LEN];
		pkt.hdr.rank = 1;
		pkt.src_ip = m[1].ip;
		pkt.src_qp = m[1].qpn;
		pkt.hdr.fanin = 1;
		if ((pkt.hdr.flags & AGG_FLAG_COLL) && pkt.hdr.coll >= AGG_COLL_ALLGATHER) {
			/* an allgather's or bcast's elements come from the root's
			 * member only: the other one sends its header alone (and
			 * gets the owner's elements back; the owner, the result
			 * without them) */
			size_t len = (size_t)pkt.hdr.count * agg_dtype_size(pkt.hdr.dtype);
			if (agg_hdr_has_data(&pkt.hdr)) {
				pkt.hdr.flags |= AGG_FLAG_NO_DATA;
				pkt.payload_len = 0;
			} else if (len <= sizeof(zeros)) {
				pkt.hdr.flags &= (uint8_t)~AGG_FLAG_NO_DATA;
				pkt.payload = zeros;
				pkt.payload_len = (uint32_t)len;
			}
		}
		if (agg_group_ingest(g, &pkt, &res, NULL) == AGG_V_COMPLETE) {
			/* with or without elements (a reduce's non-root), the
			 * results decode */
			for (uint16_t k = 0; k < 2; k++) {
				int len = agg_result_encode(g, k, &res, &l2, NULL, out, sizeof(out));
				check(len > 0);
				check(agg_decode(out, (size_t)len, true, &pkt) == 0);
				check(agg_hdr_has_data(&pkt.hdr) == agg_result_has_data_for(&res, k));
			}
		}
	}
	agg_group_destroy(g);
	return 0;
}
