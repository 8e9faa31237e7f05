// SPDX-License-Identifier: MIT
/* The three map kinds under real concurrency, for bench/maps_gpu.sh: every thread of the
 * kernel `bump` counts itself into a hash map by its block's index modulo 50 (threads
 * of many blocks insert the same keys at once), into its own slot of a per-thread array,
 * and into one array element. */
typedef unsigned long long u64;
typedef unsigned int u32;

#define SEC(s) __attribute__((section(s), used))

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   u64 flags) = (void *)2;
static long (*bpf_get_block_idx)(u64 *x, u64 *y, u64 *z) = (void *)503;

struct {
	int (*type)[1]; /* BPF_MAP_TYPE_HASH */
	int (*max_entries)[64];
	u32 *key;
	u64 *value;
} by_block SEC(".maps");

struct {
	int (*type)[6]; /* BPF_MAP_TYPE_PERCPU_ARRAY: one per GPU thread */
	int (*max_entries)[1];
	u32 *key;
	u64 *value;
} mine SEC(".maps");

struct {
	int (*type)[2]; /* BPF_MAP_TYPE_ARRAY */
	int (*max_entries)[1];
	u32 *key;
	u64 *value;
} total SEC(".maps");

SEC("gpu/entry/bump") u64 count(void *ctx)
{
	u64 bx, by, bz, zero64 = 0, *v;
	u32 key, zero = 0;

	bpf_get_block_idx(&bx, &by, &bz);
	key = (u32)(bx % 50);
	v = bpf_map_lookup_elem(&by_block, &key);
	if (!v) {
		/* the first of its key, or another thread was first: either way it is there */
		bpf_map_update_elem(&by_block, &key, &zero64, 1 /* BPF_NOEXIST */);
		v = bpf_map_lookup_elem(&by_block, &key);
	}
	if (v)
		__sync_fetch_and_add(v, 1);
	v = bpf_map_lookup_elem(&mine, &zero);
	if (v)
		*v += 1;
	v = bpf_map_lookup_elem(&total, &zero);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}
