// SPDX-License-Identifier: MIT
/* Ring buffers on the GPU: bpf_ringbuf_output and bpf_perf_event_output
 * (tests/integration/test_bpf2ptx.py). */
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned char u8;

#define SEC(s) __attribute__((section(s), used))

struct ctx {
	u64 a, b;
	u64 out[8];
};

static long (*bpf_perf_event_output)(void *ctx, void *map, u64 flags, void *data,
				     u64 size) = (void *)25;
static long (*bpf_ringbuf_output)(void *ringbuf, void *data, u64 size, u64 flags) = (void *)130;
static void *(*bpf_map_lookup_elem_ring)(void *map, const void *key) = (void *)1;
static void *(*bpf_ringbuf_reserve)(void *ringbuf, u64 size, u64 flags) = (void *)131;

struct {
	int (*type)[27]; /* BPF_MAP_TYPE_RINGBUF */
	int (*max_entries)[4096];
} rb SEC(".maps");

struct {
	int (*type)[4]; /* BPF_MAP_TYPE_PERF_EVENT_ARRAY */
	u32 *key;
	u32 *value;
} events SEC(".maps");

struct {
	int (*type)[2]; /* BPF_MAP_TYPE_ARRAY */
	int (*max_entries)[1];
	u32 *key;
	u64 *value;
} arr SEC(".maps");

/* a records of b bytes (byte i of record r: r * 16 + i); out: the results. */
SEC("probe/emit") u64 emit(struct ctx *c)
{
	u8 buf[300];
	u64 ok = 0, again = 0, other = 0;

	for (u32 i = 0; i < sizeof(buf); i++)
		buf[i] = (u8)i;
	for (u32 r = 0; r < 64 && r < c->a; r++) {
		long e;

		buf[0] = (u8)r;
		e = bpf_ringbuf_output(&rb, buf, c->b, 0);
		ok += e == 0;
		again += e == -11;
		other += e != 0 && e != -11;
		c->out[3] = (u64)e;
	}
	c->out[0] = ok;
	c->out[1] = again;
	c->out[2] = other;
	return 0;
}

/* The perf way, from a struct on the stack; and a lookup in a ring finds nothing. */
SEC("probe/perf") u64 perf(struct ctx *c)
{
	struct {
		u64 a;
		u32 b;
	} rec = { c->a, (u32)c->b };
	u32 zero = 0;

	c->out[0] = (u64)bpf_perf_event_output(c, &events, 0xffffffffULL, &rec, 12);
	c->out[1] = (u64)bpf_map_lookup_elem_ring(&events, &zero);
	c->out[2] = (u64)bpf_ringbuf_output(&arr, &rec, 8, 0); /* not a ring: -EINVAL */
	return 0;
}

SEC("probe/reserve") u64 reserve(struct ctx *c)
{
	return bpf_ringbuf_reserve(&rb, 8, 0) != 0;
}
