/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The topology view's files (index.html, topology.js), built into
 * inca-manager by embed.py and served without a token: they hold no data,
 * the page reads /v1/topology with the operator's token.
 */
#ifndef INCA_MGR_UI_H
#define INCA_MGR_UI_H

#include <stddef.h>

struct mgr_ui_asset {
	const char *path;            /* as requested, e.g. "/ui/topology.js" */
	const char *type;            /* Content-Type */
	const unsigned char *data;
	size_t len;
};

/* ends with an entry whose path is NULL */
extern const struct mgr_ui_asset mgr_ui_assets[];

/* The asset served at path ("/" and "/ui" are the page), or NULL. */
const struct mgr_ui_asset *mgr_ui_find(const char *path);

#endif /* INCA_MGR_UI_H */
