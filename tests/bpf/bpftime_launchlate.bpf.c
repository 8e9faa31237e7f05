// SPDX-License-Identifier: MIT
/* A host uprobe on the launch and a device kprobe sharing maps, written as bpftime's
 * launchlate example is (its section names, map types and helpers; its loader's clock offset
 * map, which no one writes under gpuscope): the CPU-to-GPU latency of each launch into a
 * GPU_ARRAY_MAP histogram (log10 bins from 100 ns), plus what the tests check: the launch
 * calls counted by the uprobe and the uretprobe in a GPU_KERNEL_SHARED_ARRAY_MAP (1504), which
 * the device program also reads (how many launch calls it saw made), and one line printed
 * from the host. KERNEL: the kernel probed (bpftime.h). */
#include "bpftime.h"

#define BPF_MAP_TYPE_ARRAY			 2
#define BPF_MAP_TYPE_GPU_ARRAY_MAP		 1503
#define BPF_MAP_TYPE_GPU_KERNEL_SHARED_ARRAY_MAP 1504

typedef long long s64;

static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   u64 flags) = (void *)2;
static u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static long (*bpf_trace_printk)(const char *fmt, u32 fmt_size, ...) = (void *)6;
static u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static const u64 (*bpf_get_globaltimer)(void) = (void *)502;
static const u64 (*bpf_get_thread_idx)(u64 *x, u64 *y, u64 *z) = (void *)505;

#define bpf_printk(fmt, ...)                                               \
	({                                                                 \
		static const char ____fmt[] = fmt;                         \
		bpf_trace_printk(____fmt, sizeof(____fmt), ##__VA_ARGS__); \
	})

struct {
	__uint(type, BPF_MAP_TYPE_GPU_ARRAY_MAP);
	__uint(max_entries, 10);
	__type(key, u32);
	__type(value, u64);
} time_histogram SEC(".maps");

struct { /* the host's, read by the GPU */
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 32);
	__type(key, u32);
	__type(value, u64);
} last_uprobe_time SEC(".maps");

struct { /* bpftime's loader writes REALTIME - MONOTONIC here; under gpuscope it stays 0 */
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 32);
	__type(key, u32);
	__type(value, s64);
} clock_offset SEC(".maps");

struct { /* [0] launch calls seen by the uprobe, [1] by the uretprobe, [2] the last pid */
	__uint(type, BPF_MAP_TYPE_GPU_KERNEL_SHARED_ARRAY_MAP);
	__uint(max_entries, 4);
	__type(key, u32);
	__type(value, u64);
} host_calls SEC(".maps");

struct { /* [0] the kernel's threads that ran, [1] the largest uprobe count a thread saw */
	__uint(type, BPF_MAP_TYPE_GPU_ARRAY_MAP);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} seen SEC(".maps");

SEC("uprobe") int uprobe_cuda_launch(void *ctx)
{
	u64 ts = bpf_ktime_get_ns();
	u32 key = 0, k2 = 2;
	s64 *off = bpf_map_lookup_elem(&clock_offset, &key);
	u64 *n = bpf_map_lookup_elem(&host_calls, &key), pid;

	if (off)
		ts += *off;
	bpf_map_update_elem(&last_uprobe_time, &key, &ts, 0);
	if (n) {
		*n += 1;
		if (*n == 1)
			bpf_printk("CPU: first launch call, pid %u\n",
				   (u32)(bpf_get_current_pid_tgid() >> 32));
	}
	pid = bpf_get_current_pid_tgid() >> 32;
	bpf_map_update_elem(&host_calls, &k2, &pid, 0);
	return 0;
}

SEC("uretprobe") int uretprobe_cuda_launch(void *ctx)
{
	u32 key = 1;
	u64 *n = bpf_map_lookup_elem(&host_calls, &key);

	if (n)
		*n += 1;
	return 0;
}

static u32 bin_of(u64 ns)
{
	u32 b = 0;

	for (u64 lim = 100; b < 9 && ns >= lim; lim *= 10)
		b++;
	return b;
}

SEC("kprobe/" KERNEL) int cuda__probe()
{
	u64 now = bpf_get_globaltimer(), *t, *c, *s, x, y, z;
	u32 key = 0, one = 1, bin;

	t = bpf_map_lookup_elem(&last_uprobe_time, &key);
	if (!t || !*t)
		return 0;
	bin = bin_of(now > *t ? now - *t : 0);
	c = bpf_map_lookup_elem(&time_histogram, &bin);
	if (c)
		__sync_fetch_and_add(c, 1);
	s = bpf_map_lookup_elem(&seen, &key);
	if (s)
		__sync_fetch_and_add(s, 1);
	bpf_get_thread_idx(&x, &y, &z);
	c = bpf_map_lookup_elem(&host_calls, &key);
	s = bpf_map_lookup_elem(&seen, &one);
	if (c && s && x == 0 && *c > *s)
		*s = *c;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
