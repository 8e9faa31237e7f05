// SPDX-License-Identifier: MIT
/* What the translator refuses, each with its reason (tests/integration/test_bpf2ptx.py). */
typedef unsigned long long u64;

#define SEC(s) __attribute__((section(s), used))

static u64 (*bpf_ktime_get_ns)(void) = (void *)5;

SEC("probe/helper") u64 helper(void *ctx)
{
	return bpf_ktime_get_ns();
}

struct {
	int (*type)[9]; /* BPF_MAP_TYPE_LRU_HASH, as libbpf's __uint() spells it */
	int (*max_entries)[16];
	unsigned int *key;
	u64 *value;
} counts SEC(".maps");

SEC("probe/map") u64 map(void *ctx)
{
	return (u64)&counts;
}

static u64 total;

SEC("probe/global") u64 global(void *ctx)
{
	return total++;
}
