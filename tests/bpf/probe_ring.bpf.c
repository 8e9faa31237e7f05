// SPDX-License-Identifier: MIT
/* A probe that writes into a GPU ring buffer: at each kernel's exit, lane 0 of every warp
 * writes {launch sequence number, SM} (tests/integration/test_probe.py; the test double
 * writes what it would, bench/probe/ringbuf.bpf.c is the GPU's). */
typedef unsigned long long u64;
typedef unsigned int u32;

#define SEC(s) __attribute__((section(s), used))

struct gs_probe_ctx {
	u32 kernel, point;
	u64 addr;
	u32 size, pad;
	u64 launch, launch_ns;
};

static long (*bpf_ringbuf_output)(void *ringbuf, void *data, u64 size, u64 flags) = (void *)130;
static u64 (*bpf_get_sm_id)(void) = (void *)509;
static u64 (*bpf_get_lane_id)(void) = (void *)511;

struct {
	int (*type)[27]; /* BPF_MAP_TYPE_RINGBUF */
	int (*max_entries)[4096];
} out SEC(".maps");

SEC("gpu/exit/*") u64 on_exit(struct gs_probe_ctx *c)
{
	u64 rec[2] = { c->launch, bpf_get_sm_id() };

	if (bpf_get_lane_id() == 0)
		bpf_ringbuf_output(&out, rec, sizeof(rec), 0);
	return 0;
}
