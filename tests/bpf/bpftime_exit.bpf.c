// SPDX-License-Identifier: MIT
/* bpftime's atomizer idea, as its examples write it: helper 507 (bpf_cuda_exit) ends the GPU
 * threads of blocks outside [0, KEEP_BLOCKS) at the kernel's entry, before they do their
 * work; a GPU_ARRAY_MAP counts the threads that went on. bench/device_gpu.sh runs it on
 * bpftime's vec_add (tests: test_bpftime.py). */
#include "bpftime.h"
#define KEEP_BLOCKS 2

static const void (*bpf_cuda_exit)(void) = (void *)507;

struct {
	__uint(type, 1503); /* BPF_MAP_TYPE_GPU_ARRAY_MAP */
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} went_on SEC(".maps");

SEC("kprobe/" KERNEL) int cuda__atomizer()
{
	u32 k0 = 0;
	u64 x, y, z, *n;

	bpf_get_block_idx(&x, &y, &z);
	if (x >= KEEP_BLOCKS)
		bpf_cuda_exit();
	n = bpf_map_lookup_elem(&went_on, &k0);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
