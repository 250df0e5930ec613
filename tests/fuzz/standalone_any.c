/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs a fuzz target without libFuzzer (gcc builds): each seed file as
 * given, then ITERATIONS mutations of them (bytes flipped, set, inserted,
 * deleted, truncated, or spliced from another seed; seed printed, or
 * INCA_TEST_SEED). What the target prints on stderr (a parser's complaint
 * about each bad input) is dropped unless INCA_FUZZ_VERBOSE=1.
 * Usage: fuzz_X_standalone ITERATIONS SEED_FILE...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define MAX_INPUT 65536

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct seed {
	uint8_t *data;
	size_t len;
};

static int load(const char *path, struct seed *s)
{
	FILE *f = fopen(path, "rb");

	if (!f) {
		perror(path);
		return -1;
	}
	s->data = malloc(MAX_INPUT);
	s->len = s->data ? fread(s->data, 1, MAX_INPUT, f) : 0;
	fclose(f);
	return s->data ? 0 : -1;
}

int main(int argc, char **argv)
{
	static uint8_t buf[MAX_INPUT];
	const char *env = getenv("INCA_TEST_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	long iters;
	int nseeds = argc - 2;
	struct seed *seeds;

	if (argc < 3) {
		fprintf(stderr, "usage: %s ITERATIONS SEED_FILE...\n", argv[0]);
		return 2;
	}
	iters = strtol(argv[1], NULL, 0);
	seeds = calloc((size_t)nseeds, sizeof(*seeds));
	if (!seeds)
		return 1;
	for (int i = 0; i < nseeds; i++)
		if (load(argv[i + 2], &seeds[i]))
			return 1;
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	rng = seed ? seed : 1;
	printf("# %s: %d seeds, %ld mutations, seed %llu\n", argv[0], nseeds, iters,
	       (unsigned long long)seed);
	fflush(stdout);
	if (!getenv("INCA_FUZZ_VERBOSE")) {
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0) {
			dup2(null, 2);
			close(null);
		}
	}
	for (int i = 0; i < nseeds; i++)
		LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].len);
	for (long i = 0; i < iters; i++) {
		const struct seed *s = &seeds[rnd() % (uint64_t)nseeds];
		size_t len = s->len;
		unsigned edits = 1 + (unsigned)(rnd() % 4);

		memcpy(buf, s->data, len);
		while (edits--) {
			size_t at = len ? rnd() % len : 0;

			switch (rnd() % 6) {
			case 0:      /* flip a bit */
				if (len)
					buf[at] ^= (uint8_t)(1u << (rnd() % 8));
				break;
			case 1:      /* set a byte to something interesting */
				if (len)
					buf[at] = (uint8_t)"\0\xff\"{}[],:0-9\n\\\x80"[rnd() % 16];
				break;
			case 2:      /* insert a byte */
				if (len < MAX_INPUT) {
					memmove(buf + at + 1, buf + at, len - at);
					buf[at] = (uint8_t)rnd();
					len++;
				}
				break;
			case 3:      /* delete a run */
				if (len) {
					size_t n = 1 + rnd() % 8;
					if (n > len - at)
						n = len - at;
					memmove(buf + at, buf + at + n, len - at - n);
					len -= n;
				}
				break;
			case 4:      /* truncate */
				len = at;
				break;
			default: {   /* splice in a run of another seed */
				const struct seed *o = &seeds[rnd() % (uint64_t)nseeds];
				if (o->len && len) {
					size_t from = rnd() % o->len, n = 1 + rnd() % 32;
					if (n > o->len - from)
						n = o->len - from;
					if (n > len - at)
						n = len - at;
					memcpy(buf + at, o->data + from, n);
				}
			}
			}
		}
		LLVMFuzzerTestOneInput(buf, len);
	}
	printf("# %s: done, no failure\n", argv[0]);
	for (int i = 0; i < nseeds; i++)
		free(seeds[i].data);
	free(seeds);
	return 0;
}
