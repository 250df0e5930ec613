/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bearer tokens: kept and compared as SHA-256 digests (nettle), in
 * constant time, so that neither a secret nor how much of one a guess got
 * right is ever at hand.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <nettle/memops.h>
#include <nettle/sha2.h>

#include "mgr.h"

void mgr_token_hash(const char *token, uint8_t out[MGR_HASH_LEN])
{
	struct sha256_ctx h;

	sha256_init(&h);
	sha256_update(&h, strlen(token), (const uint8_t *)token);
	sha256_digest(&h, MGR_HASH_LEN, out);
}

int mgr_token_digest(const char *spec, uint8_t out[MGR_HASH_LEN], char *why, size_t whylen)
{
	size_t len = spec ? strlen(spec) : 0;

	if (len > 7 && !strncmp(spec, "sha256:", 7)) {
		const char *hex = spec + 7;

		if (strlen(hex) != 2 * MGR_HASH_LEN)
			goto bad_digest;
		for (int i = 0; i < MGR_HASH_LEN; i++) {
			unsigned v;
			if (!isxdigit((unsigned char)hex[2 * i]) ||
			    !isxdigit((unsigned char)hex[2 * i + 1]) ||
			    sscanf(hex + 2 * i, "%2x", &v) != 1)
				goto bad_digest;
			out[i] = (uint8_t)v;
		}
		return 0;
	}
	if (len < 16 || len >= MGR_TOKEN_LEN) {
		snprintf(why, whylen, "expected a secret of 16..127 characters, or \"sha256:\" "
			 "and its SHA-256 in 64 hex digits");
		return -1;
	}
	mgr_token_hash(spec, out);
	return 0;
bad_digest:
	snprintf(why, whylen, "expected \"sha256:\" and 64 hex digits (the SHA-256 of the "
		 "secret, e.g. from: printf %%s SECRET | sha256sum)");
	return -1;
}

bool mgr_token_matches(const char *token, const uint8_t hash[MGR_HASH_LEN])
{
	uint8_t h[MGR_HASH_LEN];

	mgr_token_hash(token, h);
	return memeql_sec(h, hash, MGR_HASH_LEN);
}
