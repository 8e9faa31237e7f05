// SPDX-License-Identifier: MIT
/*
 * threadhist: work per GPU thread, counted as its global memory accesses (loads and stores).
 * Each thread counts in its own slot of a per-thread array (no atomics); at its exit it
 * adds itself to its kernel's distribution (exact up to 63 accesses, then log2 ranges),
 * and keeps the busiest thread, and clears its slot for the next launch. The warp adds up
 * its lanes first; counters are striped by SM (probe.bpf.h).
 */
#include "probe.bpf.h"

#define EXACT	64
#define BUCKETS (EXACT + 58)

U64_MAP(work, BPF_MAP_TYPE_PERCPU_ARRAY, 1);

/* [kernel][stripe][bucket]: threads with n accesses, n < 64; then [2^i, 2^(i+1)), i >= 6 */
U64_MAP(hist, BPF_MAP_TYPE_ARRAY, MAX_KERNELS *STRIPES *BUCKETS);

/* [kernel][stripe]: threads, accesses, the most, the busiest thread (block << 32 | y << 16
 * | x), threads per block */
U64_MAP(stats, BPF_MAP_TYPE_ARRAY, MAX_KERNELS *STRIPES * 5);

SEC("gpu/mem/*") int on_access(struct gs_probe_ctx *c)
{
	u32 z = 0;
	u64 *w = bpf_map_lookup_elem(&work, &z);

	if (w)
		*w += 1;
	return 0;
}

SEC("gpu/exit/*") int on_exit(struct gs_probe_ctx *c)
{
	u32 z = 0, k = kernel_row(c), row = k * STRIPES + stripe(), key;
	u64 *w = bpf_map_lookup_elem(&work, &z), *v, n = 0, same, lanes, sum, max, bx, by, bz, tx,
	    ty, tz;

	if (w) {
		n = *w;
		*w = 0;
	}
	key = row * BUCKETS + (n < EXACT ? (u32)n : EXACT + log2_of(n) - 6);
	same = bpf_warp_match_count(key);
	lanes = bpf_warp_match_count(k);
	sum = bpf_warp_sum(n);
	max = bpf_warp_max(n);
	if (bpf_warp_match_leader(key) && (v = bpf_map_lookup_elem(&hist, &key)))
		__sync_fetch_and_add(v, same);
	if (bpf_warp_match_leader(k)) {
		key = row * 5;
		if ((v = bpf_map_lookup_elem(&stats, &key)))
			__sync_fetch_and_add(v, lanes);
		key = row * 5 + 1;
		if (sum && (v = bpf_map_lookup_elem(&stats, &key)))
			__sync_fetch_and_add(v, sum);
	}
	bpf_get_thread_idx(&tx, &ty, &tz);
	key = row * 5 + 4;
	if (!(tx | ty | tz) && (v = bpf_map_lookup_elem(&stats, &key))) {
		bpf_get_block_dim(&bx, &by, &bz);
		*v = bx * by * bz;
	}
	key = row * 5 + 2;
	if (n && n == max && (v = bpf_map_lookup_elem(&stats, &key)) && n > *v) {
		u64 *b;

		atomic_max(v, n);
		key = row * 5 + 3;
		bpf_get_block_idx(&bx, &by, &bz);
		if (*v == n && (b = bpf_map_lookup_elem(&stats, &key)))
			*b = bx << 32 | ty << 16 | tx;
	}
	return 0;
}
