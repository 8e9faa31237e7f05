// SPDX-License-Identifier: MIT
/*
 * Ring buffers on a GPU (bench/probe_gpu.sh ring):
 * - `blocks`: thread (0,0,0) of every block writes {kernel id, block, SM, launch} at its
 *   exit: `kernels check` must give one record per block (6 kernels of 1024 blocks, tiny's
 *   one), none dropped, SM ids below the GPU's count, times within the run;
 * - `warps` (section gpu/exit/ of vector_add only): lane 0 of every warp writes, 8192
 *   records per launch into a 64 KiB ring: records + drops must equal the warps exactly.
 */
#include "gpuscope/probe.h"

typedef unsigned long long u64;
typedef unsigned int u32;
#define SEC(s)		  __attribute__((section(s), used))
#define __uint(name, val) int(*name)[val]

static long (*bpf_ringbuf_output)(void *ringbuf, void *data, u64 size, u64 flags) = (void *)130;
static long (*bpf_get_block_idx)(u64 *x, u64 *y, u64 *z) = (void *)503;
static long (*bpf_get_thread_idx)(u64 *x, u64 *y, u64 *z) = (void *)505;
static u64 (*bpf_get_sm_id)(void) = (void *)509;
static u64 (*bpf_get_lane_id)(void) = (void *)511;

struct {
	__uint(type, 27); /* BPF_MAP_TYPE_RINGBUF */
	__uint(max_entries, 1 << 20);
} blocks SEC(".maps");

struct {
	__uint(type, 27);
	__uint(max_entries, 1 << 16);
} warps SEC(".maps");

struct rec {
	u32 kernel, block, sm, lane;
	u64 launch;
};

/* {kernel, block, SM, launch} into ring (inlined: the translator takes no calls) */
static __attribute__((always_inline)) void write(void *ring, struct gs_probe_ctx *c)
{
	u64 bx, by, bz;
	struct rec r;

	bpf_get_block_idx(&bx, &by, &bz);
	r.kernel = c->kernel;
	r.block = (u32)bx;
	r.sm = (u32)bpf_get_sm_id();
	r.lane = 0;
	r.launch = c->launch;
	bpf_ringbuf_output(ring, &r, sizeof(r), 0);
}

SEC("gpu/exit/*") u64 per_block(struct gs_probe_ctx *c)
{
	u64 x, y, z;

	bpf_get_thread_idx(&x, &y, &z);
	if (!(x | y | z))
		write(&blocks, c);
	return 0;
}

SEC("gpu/exit/_Z10vector_addPKfS0_Pfi") u64 per_warp(struct gs_probe_ctx *c)
{
	if (!bpf_get_lane_id())
		write(&warps, c);
	return 0;
}
