/* SPDX-License-Identifier: BSD-3-Clause */
/* The xdp transport: placeholder until the AF_XDP implementation lands. */
#include "hl_priv.h"

static int xdp_unavailable(struct inca_comm *c)
{
	return hl_fail(c, INCA_ERR_UNSUPPORTED, "the xdp transport is not built in");
}

static void xdp_none(struct inca_comm *c)
{
	(void)c;
}

const struct hl_transport_ops hl_xdp_ops = {
	.name = "xdp",
	.open = xdp_unavailable,
	.close = xdp_none,
};
