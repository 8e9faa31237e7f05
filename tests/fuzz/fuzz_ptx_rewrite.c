// SPDX-License-Identifier: MIT
/* PTX as programs carry it (their modules, in another process's memory): the rewriter must
 * refuse what it does not understand, never crash, never read past the text; with every
 * kind of probe point (entry, exit, loads, stores) and the launch parameter appended. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "ptx/rewrite.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static const struct ptx_probe probes[] = { { "*", PTX_ENTRY, "p" },
						   { "*", PTX_EXIT, "p" },
						   { "k", PTX_EXIT, "q" },
						   { "*", PTX_MEM, "p" },
						   { "k", PTX_STORE, "q" } };
	/* (the whole module, and one kernel alone as gpuscope probe compiles them) */
	const struct ptx_rewrite_opts opts[2] = {
		{ .kernel_base = 7, .launch_param = true },
		{ .kernel_base = 7, .launch_param = true, .only = "k" }
	};
	struct ptx_rewrite_stats st;
	struct strbuf out = { 0 };
	char err[256], *text = malloc(size + 1);

	memcpy(text, data, size);
	text[size] = 0;
	for (int i = 0; i < 2; i++) {
		if (!ptx_rewrite(text, size, ".func p() { ret; }\n", probes, 5, &opts[i], &out, &st,
				 err, sizeof(err)))
			ptx_rewrite_stats_free(&st);
		sb_free(&out);
	}
	free(text);
	return 0;
}
