// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Uprobes on the CUDA driver (libcuda.so.1) and the runtime's registration entry points
 * (libcudart, or an executable that links it statically). Arguments are saved at entry by
 * the shared entry program (calls.bpf.h); each return program below decodes one family of
 * the table in gpuscope/api.h into one record of gpuscope/event.h.
 */
#include "calls.bpf.h"
#include "gpuscope/cuda_abi.h"

/* 32-bit arguments arrive in 64-bit slots whose upper half is undefined. */
#define U32(x) ((__u32)(x))

static __always_inline void launch_from_config(struct gs_ev_launch *e, __u64 cfg_addr)
{
	__u32 cfg[GS_LAUNCHCFG_SIZE / 4] = {};
	__u64 attrs, nattrs;

	if (bpf_probe_read_user(cfg, sizeof(cfg), (void *)cfg_addr))
		return;
	e->grid[0] = cfg[0];
	e->grid[1] = cfg[1];
	e->grid[2] = cfg[2];
	e->block[0] = cfg[3];
	e->block[1] = cfg[4];
	e->block[2] = cfg[5];
	e->shmem = cfg[6];
	e->stream = cfg[GS_LAUNCHCFG_STREAM / 4] | (__u64)cfg[GS_LAUNCHCFG_STREAM / 4 + 1] << 32;
	attrs = cfg[GS_LAUNCHCFG_ATTRS / 4] | (__u64)cfg[GS_LAUNCHCFG_ATTRS / 4 + 1] << 32;
	nattrs = cfg[GS_LAUNCHCFG_NATTRS / 4];
	for (int i = 0; i < 8; i++) {
		__u32 attr_id;

		if (i >= nattrs || !attrs)
			break;
		attr_id = gs_read_u32(attrs + (__u64)i * GS_LAUNCHATTR_SIZE);
		if (attr_id == GS_LAUNCH_ATTR_COOPERATIVE &&
		    gs_read_u32(attrs + (__u64)i * GS_LAUNCHATTR_SIZE + 8))
			e->flags |= GS_LAUNCH_COOPERATIVE;
		else if (attr_id == GS_LAUNCH_ATTR_CLUSTER_DIMENSION)
			e->flags |= GS_LAUNCH_CLUSTER;
	}
}

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
	e = gs_reserve_call(sizeof(*e), GS_EV_LAUNCH, &st, now, (__s32)rc);
	if (!e)
		return 0;
	e->flags = 0;
	e->shmem = 0;
	e->stream = 0;
	e->grid[0] = e->grid[1] = e->grid[2] = 0;
	e->block[0] = e->block[1] = e->block[2] = 0;
	if (d->flags & GS_AF_COOP)
		e->flags |= GS_LAUNCH_COOPERATIVE;
	if (d->flags & GS_AF_PTSZ)
		e->flags |= GS_LAUNCH_PTSZ;
	switch (d->shape) {
	case GS_SH_L_STD:
		e->func = st.args[0];
		e->grid[0] = U32(st.args[1]);
		e->grid[1] = U32(st.args[2]);
		e->grid[2] = U32(st.args[3]);
		e->block[0] = U32(st.args[4]);
		e->block[1] = U32(st.args[5]);
		e->block[2] = U32(st.args[6]);
		e->shmem = U32(st.args[7]);
		e->stream = st.args[8];
		break;
	case GS_SH_L_EX:
		e->func = st.args[1];
		launch_from_config(e, st.args[0]);
		break;
	default: /* GS_SH_L_GRAPH */
		e->func = st.args[0];
		e->stream = st.args[1];
		e->flags |= GS_LAUNCH_GRAPH;
		break;
	}
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
		gs_emit_failure(&st, now, (__s32)rc);
		return 0;
	}
	switch (d->shape) {
	case GS_SH_N_GET:
		emit_kname(&st, gs_read_u64(st.args[0]), st.args[1], st.args[2], GS_NS_DRIVER);
		break;
	case GS_SH_N_KFUNC:
		emit_kalias(&st, gs_read_u64(st.args[0]), st.args[1], GS_NS_DRIVER);
		break;
	case GS_SH_N_GETKERNEL:
		emit_kalias(&st, gs_read_u64(st.args[0]), st.args[1], GS_NS_HOSTFN);
		break;
	}
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ret_mem, long rc)
{
	const struct gs_api_desc *d;
	struct call_state st;
	struct gs_ev_mem *e;
	bool ok = (__s32)rc == 0;
	__u64 now, pitch;

	d = gs_returning(ctx, &st, &now);
	if (!d)
		return 0;
	e = gs_reserve_call(sizeof(*e), GS_EV_MEM, &st, now, (__s32)rc);
	if (!e)
		return 0;
	e->op = d->arg;
	e->device = -1;
	e->addr = 0;
	e->size = 0;
	e->aux = 0;
	e->aux2 = 0;
	switch (d->shape) {
	case GS_SH_M_ALLOC:
		e->addr = ok ? gs_read_u64(st.args[0]) : 0;
		e->size = st.args[1];
		e->aux = U32(st.args[2]);
		break;
	case GS_SH_M_PITCH:
		pitch = ok ? gs_read_u64(st.args[1]) : 0;
		e->addr = ok ? gs_read_u64(st.args[0]) : 0;
		e->size = ok ? pitch * st.args[3] : st.args[2] * st.args[3];
		e->aux = pitch;
		break;
	case GS_SH_M_ASYNC:
		e->addr = ok ? gs_read_u64(st.args[0]) : 0;
		e->size = st.args[1];
		e->aux = st.args[2];
		break;
	case GS_SH_M_POOL:
		e->addr = ok ? gs_read_u64(st.args[0]) : 0;
		e->size = st.args[1];
		e->aux = st.args[3];
		e->aux2 = st.args[2];
		break;
	case GS_SH_M_FREE:
		e->addr = st.args[0];
		e->aux = st.args[1];
		break;
	case GS_SH_M_CREATE:
		e->addr = ok ? gs_read_u64(st.args[0]) : 0;
		e->size = st.args[1];
		if (st.args[2] && gs_read_u32(st.args[2] + GS_MEMPROP_LOCATION_TYPE) ==
					  GS_MEM_LOCATION_TYPE_DEVICE)
			e->device = (__s32)gs_read_u32(st.args[2] + GS_MEMPROP_LOCATION_ID);
		break;
	case GS_SH_M_RELEASE:
		e->addr = st.args[0];
		break;
	case GS_SH_M_MAP:
		e->addr = st.args[0];
		e->size = st.args[1];
		e->aux2 = st.args[2];
		e->aux = st.args[3];
		break;
	case GS_SH_M_UNMAP:
		e->addr = st.args[0];
		e->size = st.args[1];
		break;
	case GS_SH_M_RESERVE:
		e->addr = ok ? gs_read_u64(st.args[0]) : 0;
		e->size = st.args[1];
		e->aux = st.args[2];
		e->aux2 = st.args[3];
		break;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

static __always_inline __u32 copy_kind(__u32 src_type, __u32 dst_type)
{
	if (src_type == GS_CU_MEMORYTYPE_ARRAY || dst_type == GS_CU_MEMORYTYPE_ARRAY)
		return GS_COPY_ARRAY;
	if (src_type == GS_CU_MEMORYTYPE_UNIFIED || dst_type == GS_CU_MEMORYTYPE_UNIFIED)
		return GS_COPY_DEFAULT;
	if (src_type == GS_CU_MEMORYTYPE_HOST)
		return dst_type == GS_CU_MEMORYTYPE_HOST ? GS_COPY_HTOH : GS_COPY_HTOD;
	return dst_type == GS_CU_MEMORYTYPE_HOST ? GS_COPY_DTOH : GS_COPY_DTOD;
}

/* Offsets of one side of a 2D/3D copy descriptor. */
struct copy_side {
	__u32 memtype, host, device;
};

static __always_inline __u64 side_ptr(__u64 desc, const struct copy_side *s, __u32 *type)
{
	*type = gs_read_u32(desc + s->memtype);
	return gs_read_u64(desc + (*type == GS_CU_MEMORYTYPE_HOST ? s->host : s->device));
}

SEC("uretprobe")
int BPF_KRETPROBE(ret_copy, long rc)
{
	static const struct copy_side src2d = { GS_MEMCPY2D_SRC_MEMTYPE, GS_MEMCPY2D_SRC_HOST,
						GS_MEMCPY2D_SRC_DEVICE };
	static const struct copy_side dst2d = { GS_MEMCPY2D_DST_MEMTYPE, GS_MEMCPY2D_DST_HOST,
						GS_MEMCPY2D_DST_DEVICE };
	static const struct copy_side src3d = { GS_MEMCPY3D_SRC_MEMTYPE, GS_MEMCPY3D_SRC_HOST,
						GS_MEMCPY3D_SRC_DEVICE };
	static const struct copy_side dst3d = { GS_MEMCPY3D_DST_MEMTYPE, GS_MEMCPY3D_DST_HOST,
						GS_MEMCPY3D_DST_DEVICE };
	const struct gs_api_desc *d;
	struct call_state st;
	struct gs_ev_copy *e;
	__u32 st_src = 0, st_dst = 0;
	bool async;
	__u64 now, p;

	d = gs_returning(ctx, &st, &now);
	if (!d)
		return 0;
	async = d->flags & GS_AF_ASYNC;
	e = gs_reserve_call(sizeof(*e), GS_EV_COPY, &st, now, (__s32)rc);
	if (!e)
		return 0;
	e->flags = async ? GS_COPY_ASYNC : 0;
	e->stream = 0;
	switch (d->shape) {
	case GS_SH_C_1D:
		e->dst = st.args[0];
		e->src = st.args[1];
		e->bytes = st.args[2];
		e->kind = d->arg;
		if (async)
			e->stream = st.args[3];
		break;
	case GS_SH_C_PEER:
		e->dst = st.args[0];
		e->src = st.args[2];
		e->bytes = st.args[4];
		e->kind = GS_COPY_PEER;
		if (async)
			e->stream = st.args[5];
		break;
	case GS_SH_C_2D:
		p = st.args[0];
		e->src = side_ptr(p, &src2d, &st_src);
		e->dst = side_ptr(p, &dst2d, &st_dst);
		e->kind = copy_kind(st_src, st_dst);
		e->bytes = gs_read_u64(p + GS_MEMCPY2D_WIDTH) * gs_read_u64(p + GS_MEMCPY2D_HEIGHT);
		e->flags |= GS_COPY_2D;
		if (async)
			e->stream = st.args[1];
		break;
	case GS_SH_C_3D:
		p = st.args[0];
		e->src = side_ptr(p, &src3d, &st_src);
		e->dst = side_ptr(p, &dst3d, &st_dst);
		e->kind = copy_kind(st_src, st_dst);
		e->bytes = gs_read_u64(p + GS_MEMCPY3D_WIDTH) *
			   gs_read_u64(p + GS_MEMCPY3D_HEIGHT) * gs_read_u64(p + GS_MEMCPY3D_DEPTH);
		e->flags |= GS_COPY_3D;
		if (async)
			e->stream = st.args[1];
		break;
	case GS_SH_C_SET1D:
		e->dst = st.args[0];
		e->src = U32(st.args[1]);
		e->bytes = st.args[2] * d->arg;
		e->kind = GS_COPY_MEMSET;
		if (async)
			e->stream = st.args[3];
		break;
	default: /* GS_SH_C_SET2D */
		e->dst = st.args[0];
		e->src = U32(st.args[2]);
		e->bytes = st.args[3] * d->arg * st.args[4];
		e->kind = GS_COPY_MEMSET;
		e->flags |= GS_COPY_2D;
		if (async)
			e->stream = st.args[5];
		break;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ret_sync, long rc)
{
	const struct gs_api_desc *d;
	struct call_state st;
	struct gs_ev_sync *e;
	__u64 now;

	d = gs_returning(ctx, &st, &now);
	if (!d)
		return 0;
	e = gs_reserve_call(sizeof(*e), GS_EV_SYNC, &st, now, (__s32)rc);
	if (!e)
		return 0;
	e->handle = d->shape == GS_SH_S_VOID ? 0 : st.args[0];
	e->aux = d->shape == GS_SH_S_WAIT ? st.args[1] : 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ret_api, long rc)
{
	const struct gs_api_desc *d;
	struct call_state st;
	struct gs_ev_api *e;
	__u64 now;

	d = gs_returning(ctx, &st, &now);
	if (!d || ((__s32)rc == 0 && !(d->flags & GS_AF_ALWAYS)))
		return 0;
	e = gs_reserve_call(sizeof(*e), GS_EV_API, &st, now, (__s32)rc);
	if (!e)
		return 0;
	e->arg0 = st.args[0];
	e->arg1 = st.args[1];
	e->out = 0;
	/* Out-parameters of the functions in this family are the first or second argument. */
	if ((__s32)rc == 0 && d->arg != GS_NO_OUT)
		e->out = gs_read_u64(d->arg == 0 ? st.args[0] : st.args[1]);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
