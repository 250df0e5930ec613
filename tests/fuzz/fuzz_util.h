/* SPDX-License-Identifier: BSD-3-Clause */
/* What every fuzz target shares: libFuzzer's entry point and check(). */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* an invariant broken: say which (stderr may be closed; libFuzzer's own
 * report follows the abort) */
#define check(cond) do { \
	if (!(cond)) { \
		dprintf(1, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		abort(); \
	} \
} while (0)

#endif /* FUZZ_UTIL_H */
