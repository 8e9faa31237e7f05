// SPDX-License-Identifier: MIT
/* Fatbins as the in-process plane will find them (another process's memory, files): the
 * parser and both decompressors must survive any bytes, and never write past their bounds. */
#include <stdlib.h>

#include "ptx/fatbin.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct fatbin fb;
	char err[256];

	if (!fatbin_parse(data, size, &fb, err, sizeof(err))) {
		for (size_t i = 0; i < fb.n; i++) {
			unsigned char *p;
			size_t n;

			if (!fatbin_payload(&fb.e[i], &p, &n, err, sizeof(err)))
				free(p);
		}
		fatbin_pick_ptx(&fb, 90);
		fatbin_free(&fb);
	}
	/* The LZ decoder alone, on the raw bytes. */
	{
		unsigned char out[4096];

		fatbin_lz_decode(data, size, out, sizeof(out));
	}
	return 0;
}
