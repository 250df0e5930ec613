/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs the fuzz target without libFuzzer (gcc builds): valid frames of
 * every dtype, mutated at random (seed printed), plus every truncation.
 * Usage: fuzz_decode_standalone [ITERATIONS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inca/agg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(int argc, char **argv)
{
	static uint8_t frame[AGG_MAX_FRAME_LEN], payload[AGG_MAX_PAYLOAD];
	long iters = argc > 1 ? strtol(argv[1], NULL, 0) : 200000;
	const char *env = getenv("INCA_TEST_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);

	rng = seed ? seed : 1;
	printf("# fuzz_decode_standalone: %ld iterations, seed %llu\n", iters,
	       (unsigned long long)seed);
	for (long i = 0; i < iters; i++) {
		uint8_t dtype = (uint8_t)(rnd() % AGG_DTYPE_COUNT);
		struct agg_frame_spec s = {
			.src_ip = 0x0a000001, .dst_ip = 0x0a0000fe,
			.dest_qp = 0x10, .qkey = 7, .src_qp = 0x20,
			.has_vlan = rnd() % 4 == 0,
			.hdr = { .version = 1, .type = 1, .dtype = dtype,
				 .op = rnd() % 4, .count = (uint16_t)(1 + rnd() % 64),
				 .fanin = 1, .slot = rnd() % 3, .group_id = 5 },
		};
		for (size_t k = 0; k < 64 * 8; k++)
			payload[k] = (uint8_t)rnd();
		int len = agg_encode(frame, sizeof(frame), &s, payload);
		if (len < 0)
			return 1;
		int flips = (int)(rnd() % 4);
		for (int k = 0; k < flips; k++)
			frame[rnd() % (uint64_t)len] ^= (uint8_t)(1u << (rnd() % 8));
		size_t size = (size_t)len;
		if (rnd() % 8 == 0)
			size = rnd() % (uint64_t)(len + 1);
		/* exact-size copy so ASan sees any over-read */
		uint8_t *copy = malloc(size ? size : 1);
		memcpy(copy, frame, size);
		LLVMFuzzerTestOneInput(copy, size);
		free(copy);
	}
	printf("# done\n");
	return 0;
}
