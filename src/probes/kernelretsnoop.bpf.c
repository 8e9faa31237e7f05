// SPDX-License-Identifier: MIT
/*
 * kernelretsnoop: how long each GPU thread ran, from its kernel's entry to its exit, as a
 * log2 histogram per kernel, with the slowest thread. A thread's entry time waits in its
 * own slot of a per-thread array (its position in the grid). At exit the warp adds up its
 * lanes (count, sum, max) and its lowest lane writes them; the histogram is counted once
 * per bucket per warp; both are striped by SM (probe.bpf.h).
 */
#include "probe.bpf.h"

#define BUCKETS 40

U64_MAP(start, BPF_MAP_TYPE_PERCPU_ARRAY, 1);

/* [kernel][stripe][bucket] */
U64_MAP(hist, BPF_MAP_TYPE_ARRAY, MAX_KERNELS *STRIPES *BUCKETS);

/* [kernel][stripe]: threads, sum of ns, max ns, the slowest thread (block << 32 | y << 16 | x) */
U64_MAP(stats, BPF_MAP_TYPE_ARRAY, MAX_KERNELS *STRIPES * 4);

SEC("gpu/entry/*") int on_entry(struct gs_probe_ctx *c)
{
	u32 z = 0;
	u64 *s = bpf_map_lookup_elem(&start, &z);

	if (s)
		*s = bpf_get_globaltimer();
	return 0;
}

SEC("gpu/exit/*") int on_exit(struct gs_probe_ctx *c)
{
	u32 z = 0, k = kernel_row(c), row = (k * STRIPES + stripe()), key, b;
	u64 *s = bpf_map_lookup_elem(&start, &z), *v, d = 0, n, sum, max, lanes,
	    now = bpf_get_globaltimer();

	if (s && *s && now >= *s)
		d = now - *s;
	if (s)
		*s = 0;
	/* (every lane takes part in the warp's sums: a lane without a start adds 0) */
	b = log2_of(d) < BUCKETS ? log2_of(d) : BUCKETS - 1;
	key = row * BUCKETS + b;
	n = bpf_warp_match_count(key);
	lanes = bpf_warp_match_count(k);
	sum = bpf_warp_sum(d);
	max = bpf_warp_max(d);
	if (d && bpf_warp_match_leader(key) && (v = bpf_map_lookup_elem(&hist, &key)))
		__sync_fetch_and_add(v, n);
	if (bpf_warp_match_leader(k)) {
		key = row * 4;
		if ((v = bpf_map_lookup_elem(&stats, &key)))
			__sync_fetch_and_add(v, lanes);
		key = row * 4 + 1;
		if ((v = bpf_map_lookup_elem(&stats, &key)))
			__sync_fetch_and_add(v, sum);
	}
	key = row * 4 + 2;
	if (d && d == max && (v = bpf_map_lookup_elem(&stats, &key)) && d > *v) {
		u64 bx, by, bz, tx, ty, tz, *w;

		atomic_max(v, d);
		key = row * 4 + 3;
		bpf_get_block_idx(&bx, &by, &bz);
		bpf_get_thread_idx(&tx, &ty, &tz);
		if (*v == d && (w = bpf_map_lookup_elem(&stats, &key)))
			*w = bx << 32 | ty << 16 | tx;
	}
	return 0;
}
