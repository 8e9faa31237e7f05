// SPDX-License-Identifier: MIT
/* Fatbins as the in-process plane will find them (another process's memory, files): the
 * parser and both decompressors must survive any bytes, and never write past their bounds. */
#include <stdlib.h>
#include <string.h>

#include "ptx/fatbin.h"

static void count(void *ctx, const char *name)
{
	*(size_t *)ctx += name[0] != 0;
}

/* The kernel-name readers, on a payload or the raw bytes. */
static void names(const unsigned char *b, size_t n)
{
	char *copy = malloc(n + 1);
	size_t k = 0;

	cubin_arch(b, n);
	cubin_kernel_names(b, n, count, &k);
	if (copy) {
		memcpy(copy, b, n);
		copy[n] = 0;
		ptx_target_arch(copy);
		ptx_kernel_names(copy, count, &k);
		free(copy);
	}
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct fatbin fb;
	char err[256];

	if (!fatbin_parse(data, size, &fb, err, sizeof(err))) {
		for (size_t i = 0; i < fb.n; i++) {
			unsigned char *p;
			size_t n;

			if (!fatbin_payload(&fb.e[i], &p, &n, err, sizeof(err))) {
				names(p, n);
				free(p);
			}
		}
		fatbin_pick_ptx(&fb, 90);
		fatbin_free(&fb);
	}
	names(data, size);
	/* The LZ decoder alone, on the raw bytes. */
	{
		unsigned char out[4096];

		fatbin_lz_decode(data, size, out, sizeof(out));
	}
	return 0;
}
