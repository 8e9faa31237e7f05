// SPDX-License-Identifier: MIT
/*
 * memtrace: the global memory accesses of each kernel, loads and stores apart: how many,
 * their bytes, and how many 32-byte sectors each warp-wide request touched (the coalescing
 * estimate: a request of 32 4-byte accesses needs 4 sectors when coalesced, 32 at worst).
 * Counted once per warp and instruction, by its lowest active lane, striped by SM.
 */
#include "probe.bpf.h"

/* [kernel][kind: load, store][stripe]: accesses, requests, sectors, bytes */
U64_MAP(access, BPF_MAP_TYPE_ARRAY, MAX_KERNELS * 2 * STRIPES * 4);

SEC("gpu/mem/*") int on_access(struct gs_probe_ctx *c)
{
	u32 row = ((kernel_row(c) * 2 + (c->point == GS_POINT_STORE)) * STRIPES + stripe()) * 4,
	    key;
	u64 sectors = bpf_warp_unique(c->addr >> 5), n = bpf_warp_match_count(row), *v;

	if (!bpf_warp_match_leader(row))
		return 0;
	key = row;
	if ((v = bpf_map_lookup_elem(&access, &key)))
		__sync_fetch_and_add(v, n);
	key = row + 1;
	if ((v = bpf_map_lookup_elem(&access, &key)))
		__sync_fetch_and_add(v, 1);
	key = row + 2;
	if ((v = bpf_map_lookup_elem(&access, &key)))
		__sync_fetch_and_add(v, sectors);
	key = row + 3;
	if ((v = bpf_map_lookup_elem(&access, &key)))
		__sync_fetch_and_add(v, n * c->size);
	return 0;
}
