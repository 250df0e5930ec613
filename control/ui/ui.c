/* SPDX-License-Identifier: BSD-3-Clause */
#include <string.h>

#include "ui.h"

const struct mgr_ui_asset *mgr_ui_find(const char *path)
{
	if (!strcmp(path, "/") || !strcmp(path, "/ui") || !strcmp(path, "/ui/"))
		path = "/ui/index.html";
	for (const struct mgr_ui_asset *a = mgr_ui_assets; a->path; a++)
		if (!strcmp(a->path, path))
			return a;
	return NULL;
}
