// SPDX-License-Identifier: MIT
/* Probes for the PTX rewriter's tests (tests/integration/test_bpf2ptx.py): section names
 * name the kernel and the point; * is every kernel. */
typedef unsigned long long u64;

#define SEC(s) __attribute__((section(s), used))

static u64 (*bpf_get_globaltimer)(void) = (void *)502;
static long (*bpf_get_thread_idx)(u64 *x, u64 *y, u64 *z) = (void *)505;
static u64 (*bpf_get_sm_id)(void) = (void *)509;

SEC("gpu/entry/_Z6vecAddPKfS0_Pfi") u64 on_entry(void *ctx)
{
	return bpf_get_globaltimer();
}

SEC("gpu/exit/*") u64 on_exit(void *ctx)
{
	u64 x, y, z;

	bpf_get_thread_idx(&x, &y, &z);
	return x + y + z;
}

SEC("kretprobe/_Z5scalePfif") u64 scale_exit(void *ctx)
{
	return bpf_get_sm_id();
}

/* Not a probe point: translated but not called. */
SEC("probe/other") u64 other(void *ctx)
{
	return 1;
}
