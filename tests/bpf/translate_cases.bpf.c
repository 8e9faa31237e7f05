// SPDX-License-Identifier: MIT
/*
 * Programs for the eBPF -> PTX translator's tests (tests/integration/test_bpf2ptx.py): each
 * covers a class of instructions and leaves its results in its context, which the test
 * checks against values computed independently. Built with clang -target bpf -O2 -mcpu=v3.
 */
typedef unsigned long long u64;
typedef long long s64;
typedef unsigned int u32;
typedef int s32;
typedef unsigned short u16;

struct ctx {
	u64 a, b;
	u64 out[8];
};

#define SEC(s) __attribute__((section(s), used))

SEC("probe/alu64") u64 alu64(struct ctx *c)
{
	u64 a = c->a, b = c->b;

	c->out[0] = a + b;
	c->out[1] = a - b;
	c->out[2] = a * b;
	c->out[3] = a / b; /* (b may be 0: 0) */
	c->out[4] = a % b; /* (b may be 0: a) */
	c->out[5] = (a | b) ^ (a & ~b);
	c->out[6] = (a << (b & 63)) + (a >> (b & 63));
	c->out[7] = (u64)((s64)a >> (b & 63));
	return -(s64)a;
}

SEC("probe/alu32") u64 alu32(struct ctx *c)
{
	u32 a = (u32)c->a, b = (u32)c->b;

	c->out[0] = a + b;
	c->out[1] = a - b;
	c->out[2] = a * b;
	c->out[3] = a / b;
	c->out[4] = a % b;
	c->out[5] = (a | b) ^ (a & ~b);
	c->out[6] = (a << (b & 31)) + (a >> (b & 31));
	c->out[7] = (u32)((s32)a >> (b & 31));
	return (u32) - (s32)a;
}

SEC("probe/bswap") u64 bswap(struct ctx *c)
{
	c->out[0] = __builtin_bswap16((u16)c->a);
	c->out[1] = __builtin_bswap32((u32)c->a);
	c->out[2] = __builtin_bswap64(c->a);
	return 0;
}

SEC("probe/branches") u64 branches(struct ctx *c)
{
	s64 x = (s64)c->a, y = (s64)c->b;
	u64 r = 0;

	if (x < y)
		r |= 1;
	if ((u64)x < (u64)y)
		r |= 2;
	if ((s32)x >= (s32)y)
		r |= 4;
	if ((u32)x > (u32)y)
		r |= 8;
	if (x == y)
		r |= 16;
	if (c->a & c->b)
		r |= 32;
	if (x <= -5)
		r |= 64;
	return r;
}

SEC("probe/loop_stack") u64 loop_stack(struct ctx *c)
{
	volatile u64 buf[16];
	u64 sum = 0;
	u32 n = (u32)c->a & 15;

	for (u32 i = 0; i < 16; i++)
		buf[i] = (u64)i * c->b + 0x1234567890abcdefULL;
	for (u32 i = 0; i < 16; i++)
		if (i < n)
			sum += buf[i];
	c->out[0] = sum;
	return n;
}

SEC("probe/atomics") u64 atomics(struct ctx *c)
{
	u64 old = __sync_fetch_and_add(&c->out[0], c->a);

	__sync_fetch_and_or(&c->out[1], c->b);
	__sync_fetch_and_xor(&c->out[2], c->a);
	c->out[3] = __sync_val_compare_and_swap(&c->out[4], c->a, c->b);
	c->out[5] = __sync_lock_test_and_set(&c->out[6], c->b);
	__sync_fetch_and_add((u32 *)&c->out[7], (u32)c->a);
	return old;
}

/* GPU helpers, numbered as bpftime numbers them (src/ptx/translate.h). */
static u64 (*bpf_get_globaltimer)(void) = (void *)502;
static long (*bpf_get_block_idx)(u64 *x, u64 *y, u64 *z) = (void *)503;
static long (*bpf_get_block_dim)(u64 *x, u64 *y, u64 *z) = (void *)504;
static long (*bpf_get_thread_idx)(u64 *x, u64 *y, u64 *z) = (void *)505;
static long (*bpf_gpu_membar)(void) = (void *)506;
static long (*bpf_cuda_exit)(void) = (void *)507;
static long (*bpf_get_grid_dim)(u64 *x, u64 *y, u64 *z) = (void *)508;
static u64 (*bpf_get_sm_id)(void) = (void *)509;
static u64 (*bpf_get_warp_id)(void) = (void *)510;
static u64 (*bpf_get_lane_id)(void) = (void *)511;
static long (*bpf_prefetch_l2)(const void *p) = (void *)520;
static u64 (*bpf_get_active_mask)(void) = (void *)521;

static u64 pack(u64 x, u64 y, u64 z)
{
	return x | y << 16 | z << 32;
}

SEC("probe/gpu_helpers") u64 gpu_helpers(struct ctx *c)
{
	u64 x, y, z;

	bpf_get_thread_idx(&x, &y, &z);
	c->out[0] = pack(x, y, z);
	bpf_get_block_idx(&x, &y, &z);
	c->out[1] = pack(x, y, z);
	bpf_get_block_dim(&x, &y, &z);
	c->out[2] = pack(x, y, z);
	bpf_get_grid_dim(&x, &y, &z);
	c->out[3] = pack(x, y, z);
	c->out[4] = pack(bpf_get_lane_id(), bpf_get_warp_id(), bpf_get_sm_id());
	c->out[5] = bpf_get_active_mask();
	bpf_prefetch_l2(c);
	bpf_gpu_membar();
	return bpf_get_globaltimer();
}

SEC("probe/early_exit") u64 early_exit(struct ctx *c)
{
	if (c->a)
		bpf_cuda_exit();
	c->out[0] = 1;
	return 2;
}
