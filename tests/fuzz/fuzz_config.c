/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for inca-switch's configuration parser (dp_config.c):
 * any bytes as the config file. No crash or leak; a refused file returns
 * an error (and says why on stderr, which the fuzz run closes); an
 * accepted one has a unicast switch address and groups with members.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dp_priv.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	struct dp_config cfg;
	FILE *f;
	int rc;

	if (!path[0])
		snprintf(path, sizeof(path), "/dev/shm/inca-fuzz-config-%d.json", getpid());
	f = fopen(path, "w");
	check(f != NULL);
	check(fwrite(data, 1, size, f) == size);
	fclose(f);
	memset(&cfg, 0, sizeof(cfg));
	rc = dp_config_load(&cfg, path);
	if (rc == 0) {
		check(cfg.switch_ip != 0 && (cfg.switch_ip >> 28) != 0xe);
		for (uint16_t g = 0; g < cfg.ngroups; g++)
			check(cfg.groups[g].agg.nmembers >= 1 && cfg.groups[g].members != NULL);
		dp_config_free(&cfg);
	} else {
		check(rc < 0);
	}
	unlink(path);
	return 0;
}
