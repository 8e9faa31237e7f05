// SPDX-License-Identifier: MIT
/* eBPF programs from users' objects: the translator and the reference interpreter must
 * refuse what they do not take, never crash, and never touch memory outside the stack and
 * the context. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "ptx/translate.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	size_t n = size / sizeof(struct bpf_insn);
	struct bpf_insn *insns;
	struct strbuf sb = { 0 };
	unsigned char ctx[64] = { 0 };
	unsigned long long r0;
	char err[256];

	if (!n || n > 4096)
		return 0;
	insns = malloc(n * sizeof(*insns));
	memcpy(insns, data, n * sizeof(*insns));
	bpf_to_ptx(insns, n, "f", &sb, err, sizeof(err));
	sb_free(&sb);
	{
		/* an array, a per-thread array of 2 threads, a hash map of 2 slots (24 bytes
		 * each: 4-byte keys, 8-byte values), a ring of 4 KiB */
		static unsigned char ring[GS_RING_MIN];
		unsigned long long tail = 0;
		unsigned char data[64 + 64 + 48 + GS_RING_CTL] = { 0 };
		struct bpf_map_mem maps[4] = {
			{ data, 8, 4, GS_MAP_ARRAY, 1, NULL, NULL },
			{ data + 64, 8, 4, GS_MAP_PER_THREAD, 2, NULL, NULL },
			{ data + 128, 8, 2, GS_MAP_HASH, 4, NULL, NULL },
			{ data + 176, 0, 0, GS_MAP_RING, GS_RING_MIN, ring, &tail },
		};

		memset(ring, 0, sizeof(ring));
		bpf_interp(insns, n, ctx, sizeof(ctx), NULL, maps, 4, 10000, &r0, err, sizeof(err));
	}
	free(insns);
	return 0;
}
