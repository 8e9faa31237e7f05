// SPDX-License-Identifier: MIT
/*
 * A user's probe, as one would write it: threads that finished, per kernel (a hash map keyed
 * by the kernel's id), and per block for the first 64 blocks of vector_add (an array).
 */
#include "gpuscope/probe.h"

typedef unsigned long long u64;
typedef unsigned int u32;
#define SEC(s)		  __attribute__((section(s), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   u64 flags) = (void *)2;
static long (*bpf_get_block_idx)(u64 *x, u64 *y, u64 *z) = (void *)503;

struct {
	__uint(type, 1); /* hash */
	__uint(max_entries, 64);
	__type(key, u32);
	__type(value, u64);
} threads SEC(".maps");

struct {
	__uint(type, 2); /* array */
	__uint(max_entries, 64);
	__type(key, u32);
	__type(value, u64);
} per_block SEC(".maps");

SEC("gpu/exit/*") int count_threads(struct gs_probe_ctx *c)
{
	u32 k = c->kernel;
	u64 one = 1, *v = bpf_map_lookup_elem(&threads, &k);

	if (!v) {
		if (!bpf_map_update_elem(&threads, &k, &one, 1 /* BPF_NOEXIST */))
			return 0;
		v = bpf_map_lookup_elem(&threads, &k); /* (another thread put it in first) */
		if (!v)
			return 0;
	}
	__sync_fetch_and_add(v, 1);
	return 0;
}

SEC("gpu/exit/_Z10vector_addPKfS0_Pfi") int count_blocks(struct gs_probe_ctx *c)
{
	u64 x, y, z, *v;
	u32 b;

	bpf_get_block_idx(&x, &y, &z);
	b = (u32)x;
	if (b < 64 && (v = bpf_map_lookup_elem(&per_block, &b)))
		__sync_fetch_and_add(v, 1);
	return 0;
}
