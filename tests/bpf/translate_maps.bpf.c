// SPDX-License-Identifier: MIT
/* Array maps on the GPU, and a map type that does not run there yet
 * (tests/integration/test_bpf2ptx.py). */
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

SEC("probe/uses_hash") u64 uses_hash(void *ctx)
{
	u32 k = 0;

	return (u64)bpf_map_lookup_elem(&by_key, &k);
}
