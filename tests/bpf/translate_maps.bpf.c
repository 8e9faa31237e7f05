// SPDX-License-Identifier: MIT
/* Array maps, per-thread arrays and hash maps on the GPU, and a map type that does not run
 * there yet (tests/integration/test_bpf2ptx.py). */
typedef unsigned long long u64;
typedef unsigned int u32;

#define SEC(s) __attribute__((section(s), used))

struct ctx {
	u64 a, b;
	u64 out[8];
};

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;

struct {
	int (*type)[2]; /* BPF_MAP_TYPE_ARRAY */
	int (*max_entries)[4];
	u32 *key;
	u64 *value;
} counts SEC(".maps");

struct {
	int (*type)[1]; /* BPF_MAP_TYPE_HASH */
	int (*max_entries)[4];
	u32 *key;
	u64 *value;
} by_key SEC(".maps");

struct {
	int (*type)[6]; /* BPF_MAP_TYPE_PERCPU_ARRAY: an array per GPU thread */
	int (*max_entries)[4];
	u32 *key;
	u64 *value;
} per_thread SEC(".maps");

SEC("probe/per_thread") u64 per_thread_count(struct ctx *c)
{
	u32 k = (u32)c->a & 7, two = 2;
	u64 seven = 7, *v = bpf_map_lookup_elem(&per_thread, &k);

	if (!v)
		return 1;
	*v += c->b;
	c->out[0] = bpf_map_update_elem(&per_thread, &two, &seven, 0);
	c->out[1] = bpf_map_update_elem(&per_thread, &two, &seven, 1); /* BPF_NOEXIST */
	c->out[2] = bpf_map_delete_elem(&per_thread, &two);
	return 0;
}

SEC("probe/count") u64 count(struct ctx *c)
{
	u32 k = (u32)c->a & 7, three = 3, nine = 9;
	u64 hundred = 100, *v = bpf_map_lookup_elem(&counts, &k);

	if (!v)
		return 1; /* past the end: NULL */
	*v += c->b;
	c->out[0] = bpf_map_update_elem(&counts, &three, &hundred, 0);
	c->out[1] = bpf_map_update_elem(&counts, &three, &hundred, 1); /* BPF_NOEXIST */
	c->out[2] = bpf_map_delete_elem(&counts, &three);
	c->out[3] = bpf_map_update_elem(&counts, &nine, &hundred, 0);
	return 0;
}

struct {
	int (*type)[9]; /* BPF_MAP_TYPE_LRU_HASH: not on the GPU */
	int (*max_entries)[4];
	u32 *key;
	u64 *value;
} lru SEC(".maps");

SEC("probe/uses_lru") u64 uses_lru(void *ctx)
{
	u32 k = 0;

	return (u64)bpf_map_lookup_elem(&lru, &k);
}

/* Count c->a in by_key (4 slots), then exercise update's flags and delete; out[] gets the
 * return codes. */
SEC("probe/hash") u64 hash(struct ctx *c)
{
	u32 k = (u32)c->a, other = k + 100;
	u64 one = 1, *v = bpf_map_lookup_elem(&by_key, &k);

	if (v)
		*v += 1;
	else
		c->out[0] = bpf_map_update_elem(&by_key, &k, &one, 1); /* BPF_NOEXIST */
	c->out[1] = bpf_map_update_elem(&by_key, &k, &one, 1);	       /* present: -EEXIST */
	c->out[2] = bpf_map_update_elem(&by_key, &other, &one, 2);     /* absent: -ENOENT */
	c->out[3] = bpf_map_delete_elem(&by_key, &other);	       /* absent: -ENOENT */
	v = bpf_map_lookup_elem(&by_key, &k);
	c->out[4] = v ? *v : 0;
	if (c->b) { /* fill the map: the fifth key finds no slot */
		for (u32 i = 1; i <= 4; i++) {
			u32 kk = k + i;

			c->out[5 + (i > 3 ? 1 : 0)] = bpf_map_update_elem(&by_key, &kk, &one, 0);
		}
		c->out[7] = bpf_map_delete_elem(&by_key, &k); /* present: 0 */
	}
	return 0;
}
