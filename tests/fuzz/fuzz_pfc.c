/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the PFC decoder (agg_pfc.c), which reads every
 * MAC control frame a switch port or a host receives: any bytes in, no
 * crash, no read outside the frame, an error code from the list, and a
 * frame that decodes re-encodes to one that decodes to the same content.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inca/agg.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agg_pfc pfc, again;
	uint8_t frame[AGG_PFC_FRAME_LEN];
	int rc;

	rc = agg_pfc_decode(data, size, &pfc);
	check(rc <= 0 && rc > -AGG_PFC_E__COUNT);
	check(agg_pfc_error_name(rc) != NULL && agg_pfc_strerror(rc) != NULL);
	if (rc != 0)
		return 0;
	check(size >= AGG_PFC_MIN_LEN && pfc.enable != 0);
	/* the source MAC is bytes 6..11 of what was decoded */
	check(agg_pfc_encode(frame, sizeof(frame), data + 6, &pfc) == AGG_PFC_FRAME_LEN);
	check(agg_pfc_decode(frame, sizeof(frame), &again) == 0);
	check(again.enable == pfc.enable);
	for (int i = 0; i < AGG_PFC_CLASSES; i++)
		check(again.quanta[i] == ((pfc.enable >> i) & 1 ? pfc.quanta[i] : 0));
	return 0;
}
