// SPDX-License-Identifier: MIT
/*
 * Call stacks in the in-process plane: the unwinder (glibc's backtrace, which follows the
 * DWARF call frame information every library carries, so code built without frame
 * pointers unwinds too) at the same calls as the kernel probes: every Nth launch of a
 * thread, every allocation, every failed call. The frames of this library are left out:
 * the stack starts where the program called the driver.
 */
#include <execinfo.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gpuscope/api.h"
#include "inject/inject.h"

extern const struct gs_api_desc gs_api_descs[GS_API_MAX];

static __u32 every;
static __thread __u32 tl_launches __attribute__((tls_model("initial-exec")));
__u32 gs_stacks_default GS_HIDDEN;

void gs_stacks_every(__u32 n)
{
	__atomic_store_n(&every, n, __ATOMIC_RELAXED);
}

void gs_stacks_init(const char *e)
{
	void *warm[4];

	every = gs_stacks_default = e ? (__u32)strtoul(e, NULL, 10) : 0;
	/* The unwinder loads itself at its first use: now, not inside a signal handler. */
	if (every)
		backtrace(warm, 4);
}

void gs_stack_maybe(unsigned int api, __u64 ts, int result, __u64 arg)
{
	const struct gs_api_desc *d = api < GS_API_MAX ? &gs_api_descs[api] : NULL;
	void *frames[GS_STACK_MAX + 8];
	__u64 ips[GS_STACK_MAX];
	struct gs_ev_stack *e;
	bool failed = result != 0 && result != 600 /* CUDA_ERROR_NOT_READY: a status */;
	bool alloc;
	int n, skip = 0;

	if (!every || !d)
		return;
	alloc = d->family == GS_FAM_MEM &&
		(d->shape == GS_SH_M_ALLOC || d->shape == GS_SH_M_PITCH ||
		 d->shape == GS_SH_M_ASYNC || d->shape == GS_SH_M_POOL ||
		 d->shape == GS_SH_M_CREATE);
	if (!failed && !alloc && (d->family != GS_FAM_LAUNCH || tl_launches++ % every))
		return;
	n = backtrace(frames, (int)(sizeof(frames) / sizeof(frames[0])));
	while (skip < n && gs_called_from_self(frames[skip]))
		skip++;
	n -= skip;
	if (n <= 0)
		return;
	n = gs_py_stack(frames + skip, n, d->family == GS_FAM_LAUNCH && !failed, ips, GS_STACK_MAX);
	e = gs_emit_reserve((__u32)(offsetof(struct gs_ev_stack, ip) + (size_t)n * 8), GS_EV_STACK);
	if (!e)
		return;
	gs_fill_hdr(&e->h, GS_EV_STACK, (__u32)(offsetof(struct gs_ev_stack, ip) + (size_t)n * 8),
		    ts);
	e->arg = arg;
	e->api = (__u16)api;
	e->nframes = (__u16)n;
	e->pad = 0;
	memcpy(e->ip, ips, (size_t)n * 8);
	gs_emit_commit(e);
}
