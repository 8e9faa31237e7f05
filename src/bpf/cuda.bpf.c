// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Uprobes on the CUDA driver (libcuda.so.1) and the runtime's registration entry points
 * (libcudart, or an executable that links it statically). Arguments are saved at entry by
 * the shared entry program (calls.bpf.h); each return program below decodes one family of
 * the table in gpuscope/api.h into one record of gpuscope/event.h.
 */
#include "calls.bpf.h"

SEC("uretprobe")
int BPF_KRETPROBE(ret_launch, long rc)
{
	const struct gs_api_desc *d;
	struct call_state st;
	struct gs_ev_launch *e;
	__u64 now;

	d = gs_returning(ctx, &st, &now);
	if (!d)
		return 0;
	gs_emit_stack(ctx, &st, st.args[d->shape == GS_SH_L_EX ? 1 : 0], !gs_failed(rc));
	e = gs_reserve_call(sizeof(*e), GS_EV_LAUNCH, &st, now, (__s32)rc);
	if (!e)
		return 0;
	gs_decode_launch(d, st.args, e);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

static __always_inline void emit_kname(const struct call_state *st, __u64 handle, __u64 scope,
				       __u64 name_addr, __u8 ns)
{
	struct gs_ev_kname *e;
	long n;

	e = gs_reserve(sizeof(*e), GS_EV_KNAME, GS_SRC_UPROBE, st->ts, bpf_get_current_pid_tgid());
	if (!e)
		return;
	e->handle = handle;
	e->scope = scope;
	e->name_addr = name_addr;
	e->api = (__u16)st->api;
	e->ns = ns;
	e->truncated = 0;
	e->pad = 0;
	n = bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)name_addr);
	if (n <= 0) {
		e->name[0] = 0;
		n = 1;
	}
	if (n >= (long)sizeof(e->name))
		e->truncated = 1;
	e->len = (__u16)(n - 1);
	/* The record ends after the name, rounded up to 8 bytes; consumers use h.size. */
	e->h.size = (offsetof(struct gs_ev_kname, name) + n + 7) & ~7u;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void emit_kalias(const struct call_state *st, __u64 handle, __u64 target,
					__u8 target_ns)
{
	struct gs_ev_kalias *e;

	e = gs_reserve(sizeof(*e), GS_EV_KALIAS, GS_SRC_UPROBE, st->ts, bpf_get_current_pid_tgid());
	if (!e)
		return;
	e->handle = handle;
	e->target = target;
	e->api = (__u16)st->api;
	e->target_ns = target_ns;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_ringbuf_submit(e, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(ret_kname, long rc)
{
	const struct gs_api_desc *d;
	struct call_state st;
	__u64 now;

	d = gs_returning(ctx, &st, &now);
	if (!d)
		return 0;
	if (d->shape == GS_SH_N_REGISTER) {
		/* void __cudaRegisterFunction(void **fatbin, const char *hostFun,
		 *                              char *deviceFun, ...): read at return, when the
		 * runtime has touched the name and its page is resident. */
		emit_kname(&st, st.args[1], st.args[0], st.args[2], GS_NS_HOSTFN);
		return 0;
	}
	if ((__s32)rc != 0) {
		gs_emit_stack(ctx, &st, 0, false);
		gs_emit_failure(&st, now, (__s32)rc);
		return 0;
	}
	switch (d->shape) {
	case GS_SH_N_GET:
		emit_kname(&st, gs_load_u64(st.args[0]), st.args[1], st.args[2], GS_NS_DRIVER);
		break;
	case GS_SH_N_KFUNC:
		emit_kalias(&st, gs_load_u64(st.args[0]), st.args[1], GS_NS_DRIVER);
		break;
	case GS_SH_N_GETKERNEL:
		emit_kalias(&st, gs_load_u64(st.args[0]), st.args[1], GS_NS_HOSTFN);
		break;
	}
	return 0;
}

/* A call of one family returned: a stack if it failed (and for every allocation, where
 * leaks come from), then its record. Inlined with constant arguments per family. */
static __always_inline int returned(struct pt_regs *ctx, long rc, __u16 type, __u32 size)
{
	const struct gs_api_desc *d;
	struct call_state st;
	void *e;
	__u64 now;

	d = gs_returning(ctx, &st, &now);
	/* (Other calls: only failures, and those always recorded.) */
	if (!d || (type == GS_EV_API && (__s32)rc == 0 && !(d->flags & GS_AF_ALWAYS)))
		return 0;
	if (gs_failed(rc) ||
	    (type == GS_EV_MEM &&
	     (d->shape == GS_SH_M_ALLOC || d->shape == GS_SH_M_PITCH || d->shape == GS_SH_M_ASYNC ||
	      d->shape == GS_SH_M_POOL || d->shape == GS_SH_M_CREATE)))
		gs_emit_stack(ctx, &st, 0, false);
	e = gs_reserve_call(size, type, &st, now, (__s32)rc);
	if (!e)
		return 0;
	if (type == GS_EV_MEM)
		gs_decode_mem(d, st.args, (__s32)rc == 0, e);
	else if (type == GS_EV_COPY)
		gs_decode_copy(d, st.args, e);
	else if (type == GS_EV_SYNC)
		gs_decode_sync(d, st.args, e);
	else
		gs_decode_api(d, st.args, (__s32)rc == 0, e);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* clang-format off */
#define RETURNED(prog, type, ev)						\
	SEC("uretprobe") int BPF_KRETPROBE(prog, long rc)			\
	{									\
		return returned(ctx, rc, type, sizeof(struct ev));		\
	}
RETURNED(ret_mem, GS_EV_MEM, gs_ev_mem)
RETURNED(ret_copy, GS_EV_COPY, gs_ev_copy)
RETURNED(ret_sync, GS_EV_SYNC, gs_ev_sync)
RETURNED(ret_api, GS_EV_API, gs_ev_api)
/* clang-format on */
