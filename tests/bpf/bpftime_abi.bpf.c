// SPDX-License-Identifier: MIT
/* A probe object written as bpftime's GPU examples are: its map types (1501-1527), its
 * helpers (502-512, 14, 25), kprobe/ and kretprobe/ device programs with no context, and a
 * host uprobe program beside them (tests/integration/test_bpftime.py). KERNEL: the kernel
 * probed (bpftime.h). */
#include "bpftime.h"

#define BPF_MAP_TYPE_ARRAY		     2
#define BPF_MAP_TYPE_GPU_HASH_MAP	     1501
#define BPF_MAP_TYPE_PERGPUTD_ARRAY_MAP	     1502
#define BPF_MAP_TYPE_GPU_ARRAY_MAP	     1503
#define BPF_MAP_TYPE_PERGPUTD_ARRAY_HOST_MAP 1512
#define BPF_MAP_TYPE_GPU_ARRAY_HOST_MAP	     1513
#define BPF_MAP_TYPE_GPU_RINGBUF_MAP	     1527

static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   u64 flags) = (void *)2;
static u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static long (*bpf_trace_printk)(const char *fmt, u32 fmt_size, ...) = (void *)6;
static long (*ebpf_puts)(const char *s) = (void *)501;
static u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*bpf_perf_event_output)(void *ctx, void *map, u64 flags, void *data,
				     u64 size) = (void *)25;
static const u64 (*bpf_get_globaltimer)(void) = (void *)502;
static const u64 (*bpf_get_block_dim)(u64 *x, u64 *y, u64 *z) = (void *)504;
static const u64 (*bpf_get_thread_idx)(u64 *x, u64 *y, u64 *z) = (void *)505;
static const u64 (*bpf_get_grid_dim)(u64 *x, u64 *y, u64 *z) = (void *)508;
static const u64 (*bpf_get_sm_id)(void) = (void *)509;
static const u64 (*bpf_get_warp_id)(void) = (void *)510;
static const u64 (*bpf_get_lane_id)(void) = (void *)511;
static const u64 (*bpf_get_device_ordinal)(void) = (void *)512;

struct { /* threadhist's: calls per thread */
	__uint(type, BPF_MAP_TYPE_PERGPUTD_ARRAY_MAP);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERGPUTD_ARRAY_HOST_MAP);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} lanes SEC(".maps");

struct { /* launchlate's: one array for all threads */
	__uint(type, BPF_MAP_TYPE_GPU_ARRAY_MAP);
	__uint(max_entries, 4);
	__type(key, u32);
	__type(value, u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_GPU_ARRAY_HOST_MAP);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} where SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_GPU_HASH_MAP);
	__uint(max_entries, 8);
	__type(key, u32);
	__type(value, u64);
} blocks SEC(".maps");

struct event {
	u64 pid_tgid, device, thread;
};

struct { /* kernelretsnoop's: records per thread */
	__uint(type, BPF_MAP_TYPE_GPU_RINGBUF_MAP);
	__uint(max_entries, 4);
	__type(key, u32);
	__type(value, struct event);
} events SEC(".maps");

struct { /* the host's */
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} last_uprobe_time SEC(".maps");

SEC("kretprobe/" KERNEL) int cuda__retprobe()
{
	u32 k0 = 0, k1 = 1;
	u64 *n = bpf_map_lookup_elem(&calls, &k0);

	if (n)
		*n += 1;
	n = bpf_map_lookup_elem(&calls, &k1);
	if (n)
		*n += 10;
	return 0;
}

SEC("kprobe/" KERNEL) int cuda__probe()
{
	u32 k0 = 0, k1 = 1;
	u64 x, y, z, gx, gy, gz, lane = bpf_get_lane_id(), sm = bpf_get_sm_id(), *c;
	struct event ev;

	c = bpf_map_lookup_elem(&counts, &k0);
	if (c)
		__sync_fetch_and_add(c, 1);
	bpf_map_update_elem(&lanes, &k0, &lane, 0);
	bpf_map_update_elem(&where, &k0, &sm, 0);
	sm = bpf_get_warp_id();
	bpf_map_update_elem(&where, &k1, &sm, 0);
	bpf_get_block_idx(&x, &y, &z);
	bpf_get_grid_dim(&gx, &gy, &gz);
	k0 = (u32)x;
	bpf_map_update_elem(&blocks, &k0, &gx, 0);
	bpf_get_thread_idx(&x, &y, &z);
	bpf_get_block_dim(&gx, &gy, &gz);
	ev.pid_tgid = bpf_get_current_pid_tgid();
	ev.device = bpf_get_device_ordinal();
	ev.thread = x + y * gx + (bpf_get_globaltimer() ? 0 : 1000);
	bpf_perf_event_output(0, &events, 0, &ev, sizeof(ev));
	return 0;
}

/* bpf_printk as libbpf's bpf_helpers.h has it: its format is read-only data */
#define bpf_printk(fmt, ...)                                               \
	({                                                                 \
		static const char ____fmt[] = fmt;                         \
		bpf_trace_printk(____fmt, sizeof(____fmt), ##__VA_ARGS__); \
	})

SEC("kretprobe/" KERNEL) int cuda__print()
{
	u64 x, y, z, bx, by, bz;

	bpf_get_thread_idx(&x, &y, &z);
	bpf_get_block_idx(&bx, &by, &bz);
	if (x == 5 && bx == 2) {
		bpf_printk("block %lu thread %lu on SM %lu\n", bx, x, bpf_get_sm_id());
		bpf_printk("%-4d|%04x|%c|%%\n", -7, 0xab, 'q');
		ebpf_puts("done %d");
	}
	return 0;
}

SEC("uprobe") int uprobe_cuda_launch(void *ctx)
{
	u32 k0 = 0;
	u64 t = bpf_ktime_get_ns();

	bpf_map_update_elem(&last_uprobe_time, &k0, &t, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
