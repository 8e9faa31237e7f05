/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Decoding a call's arguments into its record, shared by the two planes that see calls:
 * the kernel's return probes (src/bpf) and the in-process wrappers (src/inject). Both save
 * the first eleven integer arguments of the call; the same code turns them into the same
 * record, so the planes cannot drift apart.
 *
 * The includer says how the process's memory is read (out-parameters, descriptors):
 *   GS_READ(dst, size, addr)   copy size bytes from addr; non-zero if unreadable
 *   GS_INLINE                  its always-inline qualifier
 * Every field of the record past the call part is written, so a reserved record never
 * carries stale bytes.
 */
#ifndef GPUSCOPE_DECODE_H
#define GPUSCOPE_DECODE_H

#include "gpuscope/api.h"
#include "gpuscope/cuda_abi.h"

#define GS_ARGS 11

/* 32-bit arguments arrive in 64-bit slots whose upper half is undefined. */
#define GS_U32(x) ((__u32)(x))

static GS_INLINE __u64 gs_load_u64(__u64 addr)
{
	__u64 v = 0;

	if (GS_READ(&v, sizeof(v), addr))
		v = 0;
	return v;
}

static GS_INLINE __u32 gs_load_u32(__u64 addr)
{
	__u32 v = 0;

	if (GS_READ(&v, sizeof(v), addr))
		v = 0;
	return v;
}

static GS_INLINE void gs_launch_config(struct gs_ev_launch *e, __u64 cfg_addr)
{
	__u32 cfg[GS_LAUNCHCFG_SIZE / 4];
	__u64 attrs, nattrs;

	if (GS_READ(cfg, sizeof(cfg), cfg_addr))
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

		if ((__u64)i >= nattrs || !attrs)
			break;
		attr_id = gs_load_u32(attrs + (__u64)i * GS_LAUNCHATTR_SIZE);
		if (attr_id == GS_LAUNCH_ATTR_COOPERATIVE &&
		    gs_load_u32(attrs + (__u64)i * GS_LAUNCHATTR_SIZE + 8))
			e->flags |= GS_LAUNCH_COOPERATIVE;
		else if (attr_id == GS_LAUNCH_ATTR_CLUSTER_DIMENSION)
			e->flags |= GS_LAUNCH_CLUSTER;
	}
}

static GS_INLINE void gs_decode_launch(const struct gs_api_desc *d, const __u64 *a,
				       struct gs_ev_launch *e)
{
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
		e->func = a[0];
		e->grid[0] = GS_U32(a[1]);
		e->grid[1] = GS_U32(a[2]);
		e->grid[2] = GS_U32(a[3]);
		e->block[0] = GS_U32(a[4]);
		e->block[1] = GS_U32(a[5]);
		e->block[2] = GS_U32(a[6]);
		e->shmem = GS_U32(a[7]);
		e->stream = a[8];
		break;
	case GS_SH_L_EX:
		e->func = a[1];
		gs_launch_config(e, a[0]);
		break;
	default: /* GS_SH_L_GRAPH */
		e->func = a[0];
		e->stream = a[1];
		e->flags |= GS_LAUNCH_GRAPH;
		break;
	}
}

static GS_INLINE void gs_decode_mem(const struct gs_api_desc *d, const __u64 *a, int ok,
				    struct gs_ev_mem *e)
{
	__u64 pitch;

	e->op = d->arg;
	e->device = -1;
	e->addr = 0;
	e->size = 0;
	e->aux = 0;
	e->aux2 = 0;
	switch (d->shape) {
	case GS_SH_M_ALLOC:
		e->addr = ok ? gs_load_u64(a[0]) : 0;
		e->size = a[1];
		e->aux = GS_U32(a[2]);
		break;
	case GS_SH_M_PITCH:
		pitch = ok ? gs_load_u64(a[1]) : 0;
		e->addr = ok ? gs_load_u64(a[0]) : 0;
		e->size = ok ? pitch * a[3] : a[2] * a[3];
		e->aux = pitch;
		break;
	case GS_SH_M_ASYNC:
		e->addr = ok ? gs_load_u64(a[0]) : 0;
		e->size = a[1];
		e->aux = a[2];
		break;
	case GS_SH_M_POOL:
		e->addr = ok ? gs_load_u64(a[0]) : 0;
		e->size = a[1];
		e->aux = a[3];
		e->aux2 = a[2];
		break;
	case GS_SH_M_FREE:
		e->addr = a[0];
		e->aux = a[1];
		break;
	case GS_SH_M_CREATE:
		e->addr = ok ? gs_load_u64(a[0]) : 0;
		e->size = a[1];
		if (a[2] &&
		    gs_load_u32(a[2] + GS_MEMPROP_LOCATION_TYPE) == GS_MEM_LOCATION_TYPE_DEVICE)
			e->device = (__s32)gs_load_u32(a[2] + GS_MEMPROP_LOCATION_ID);
		break;
	case GS_SH_M_RELEASE:
		e->addr = a[0];
		break;
	case GS_SH_M_MAP:
		e->addr = a[0];
		e->size = a[1];
		e->aux2 = a[2];
		e->aux = a[3];
		break;
	case GS_SH_M_UNMAP:
		e->addr = a[0];
		e->size = a[1];
		break;
	case GS_SH_M_RESERVE:
		e->addr = ok ? gs_load_u64(a[0]) : 0;
		e->size = a[1];
		e->aux = a[2];
		e->aux2 = a[3];
		break;
	}
}

static GS_INLINE __u32 gs_copy_kind(__u32 src_type, __u32 dst_type)
{
	if (src_type == GS_CU_MEMORYTYPE_ARRAY || dst_type == GS_CU_MEMORYTYPE_ARRAY)
		return GS_COPY_ARRAY;
	if (src_type == GS_CU_MEMORYTYPE_UNIFIED || dst_type == GS_CU_MEMORYTYPE_UNIFIED)
		return GS_COPY_DEFAULT;
	if (src_type == GS_CU_MEMORYTYPE_HOST)
		return dst_type == GS_CU_MEMORYTYPE_HOST ? GS_COPY_HTOH : GS_COPY_HTOD;
	return dst_type == GS_CU_MEMORYTYPE_HOST ? GS_COPY_DTOH : GS_COPY_DTOD;
}

/* One side of a 2D/3D copy descriptor: the pointer its memory type says to use. */
static GS_INLINE __u64 gs_copy_side(__u64 desc, __u32 memtype_off, __u32 host_off, __u32 device_off,
				    __u32 *type)
{
	*type = gs_load_u32(desc + memtype_off);
	return gs_load_u64(desc + (*type == GS_CU_MEMORYTYPE_HOST ? host_off : device_off));
}

static GS_INLINE void gs_decode_copy(const struct gs_api_desc *d, const __u64 *a,
				     struct gs_ev_copy *e)
{
	int async = d->flags & GS_AF_ASYNC;
	__u32 st_src = 0, st_dst = 0;
	__u64 p;

	e->flags = async ? GS_COPY_ASYNC : 0;
	e->stream = 0;
	switch (d->shape) {
	case GS_SH_C_1D:
		e->dst = a[0];
		e->src = a[1];
		e->bytes = a[2];
		e->kind = d->arg;
		if (async)
			e->stream = a[3];
		break;
	case GS_SH_C_PEER:
		e->dst = a[0];
		e->src = a[2];
		e->bytes = a[4];
		e->kind = GS_COPY_PEER;
		if (async)
			e->stream = a[5];
		break;
	case GS_SH_C_2D:
		p = a[0];
		e->src = gs_copy_side(p, GS_MEMCPY2D_SRC_MEMTYPE, GS_MEMCPY2D_SRC_HOST,
				      GS_MEMCPY2D_SRC_DEVICE, &st_src);
		e->dst = gs_copy_side(p, GS_MEMCPY2D_DST_MEMTYPE, GS_MEMCPY2D_DST_HOST,
				      GS_MEMCPY2D_DST_DEVICE, &st_dst);
		e->kind = gs_copy_kind(st_src, st_dst);
		e->bytes = gs_load_u64(p + GS_MEMCPY2D_WIDTH) * gs_load_u64(p + GS_MEMCPY2D_HEIGHT);
		e->flags |= GS_COPY_2D;
		if (async)
			e->stream = a[1];
		break;
	case GS_SH_C_3D:
		p = a[0];
		e->src = gs_copy_side(p, GS_MEMCPY3D_SRC_MEMTYPE, GS_MEMCPY3D_SRC_HOST,
				      GS_MEMCPY3D_SRC_DEVICE, &st_src);
		e->dst = gs_copy_side(p, GS_MEMCPY3D_DST_MEMTYPE, GS_MEMCPY3D_DST_HOST,
				      GS_MEMCPY3D_DST_DEVICE, &st_dst);
		e->kind = gs_copy_kind(st_src, st_dst);
		e->bytes = gs_load_u64(p + GS_MEMCPY3D_WIDTH) *
			   gs_load_u64(p + GS_MEMCPY3D_HEIGHT) * gs_load_u64(p + GS_MEMCPY3D_DEPTH);
		e->flags |= GS_COPY_3D;
		if (async)
			e->stream = a[1];
		break;
	case GS_SH_C_SET1D:
		e->dst = a[0];
		e->src = GS_U32(a[1]);
		e->bytes = a[2] * d->arg;
		e->kind = GS_COPY_MEMSET;
		if (async)
			e->stream = a[3];
		break;
	default: /* GS_SH_C_SET2D */
		e->dst = a[0];
		e->src = GS_U32(a[2]);
		e->bytes = a[3] * d->arg * a[4];
		e->kind = GS_COPY_MEMSET;
		e->flags |= GS_COPY_2D;
		if (async)
			e->stream = a[5];
		break;
	}
}

static GS_INLINE void gs_decode_sync(const struct gs_api_desc *d, const __u64 *a,
				     struct gs_ev_sync *e)
{
	e->handle = d->shape == GS_SH_S_VOID ? 0 : a[0];
	e->aux = d->shape == GS_SH_S_WAIT ? a[1] : 0;
}

/* A graph's node by the graph API (GS_SH_A_KNODE): arg0 the graph (adding), the node
 * (setting a graph's) or the instantiated graph (setting its); arg1 the kernel (the
 * CUfunction, else the CUkernel), or for a child graph node the child; out the node
 * (adding: on success; setting an instantiated graph's). Not a kernel: h.flags says what. */
static GS_INLINE void gs_decode_knode(const struct gs_api_desc *d, const __u64 *a, int ok,
				      struct gs_ev_api *e)
{
	unsigned int at = d->arg & 7;
	__u64 p = at == 1 ? a[1] : at == 2 ? a[2] : at == 4 ? a[4] : a[5];
	__u32 type = 0; /* CU_GRAPH_NODE_TYPE_KERNEL */

	e->arg0 = at >= 4 ? a[1] : a[0];
	e->out = at >= 4 ? (ok ? gs_load_u64(a[0]) : 0) : at == 2 ? a[1] : 0;
	e->arg1 = 0;
	if (d->arg & GS_KNODE_GENERIC) {
		/* (CUgraphNodeParams: the type, then the parameters at 16) */
		type = gs_load_u32(p);
		p += 16;
	}
	if (type == 0) {
		e->arg1 = gs_load_u64(p);
		if (!e->arg1 && !(d->arg & GS_KNODE_V1))
			e->arg1 = gs_load_u64(p + 56); /* (kern, after func ... extra) */
	} else if (type == 4) {			       /* CU_GRAPH_NODE_TYPE_GRAPH */
		e->arg1 = gs_load_u64(p);
		e->h.flags = GS_HDR_GNODE_CHILD;
	} else {
		e->h.flags = type == 13 /* CU_GRAPH_NODE_TYPE_CONDITIONAL */ ? GS_HDR_GNODE_COND
									     : GS_HDR_GNODE_OTHER;
	}
}

/* Other driver calls: arguments and, on success, what went through the out-parameter (the
 * first or second argument, by the table). */
static GS_INLINE void gs_decode_api(const struct gs_api_desc *d, const __u64 *a, int ok,
				    struct gs_ev_api *e)
{
	if (d->shape == GS_SH_A_KNODE) {
		gs_decode_knode(d, a, ok, e);
		return;
	}
	e->arg0 = a[0];
	e->arg1 = a[1];
	e->out = 0;
	if (d->shape == GS_SH_A_CHILD) { /* (as gs_decode_knode has a child node) */
		e->arg0 = d->arg == 2 ? a[0] : a[1];
		e->arg1 = d->arg == 2 ? a[2] : a[4];
		e->out = d->arg == 2 ? a[1] : ok ? gs_load_u64(a[0]) : 0;
		e->h.flags = GS_HDR_GNODE_CHILD;
		return;
	}
	if (d->shape == GS_SH_A_CTX) {
		/* The context made, and the device it is on. */
		e->arg1 = d->arg == 1 ? a[1] : d->arg == 2 ? a[2] : d->arg == 3 ? a[3] : a[4];
		if (ok)
			e->out = gs_load_u64(a[0]);
		return;
	}
	if (d->arg == GS_ARG2_VALUE)
		e->out = a[2];
	else if (ok && d->arg != GS_NO_OUT)
		e->out = gs_load_u64(d->arg == 0 ? a[0] : a[1]);
}

static GS_INLINE void gs_decode_nccl(const struct gs_api_desc *d, const __u64 *a, int ok,
				     struct gs_ev_nccl *e)
{
	e->op = d->arg;
	e->comm = 0;
	e->count = 0;
	e->stream = 0;
	e->sendbuf = 0;
	e->recvbuf = 0;
	e->datatype = -1;
	e->redop = -1;
	e->peer = -1;
	e->nranks = -1;
	e->rank = -1;
	switch (d->shape) {
	case GS_SH_NC_OP7:
	case GS_SH_NC_ROOT7:
		e->sendbuf = a[0];
		e->recvbuf = a[1];
		e->count = a[2];
		e->datatype = (__s32)a[3];
		if (d->shape == GS_SH_NC_OP7)
			e->redop = (__s32)a[4];
		else
			e->peer = (__s32)a[4];
		e->comm = a[5];
		e->stream = a[6];
		break;
	case GS_SH_NC_REDUCE:
		e->sendbuf = a[0];
		e->recvbuf = a[1];
		e->count = a[2];
		e->datatype = (__s32)a[3];
		e->redop = (__s32)a[4];
		e->peer = (__s32)a[5];
		e->comm = a[6];
		e->stream = a[7];
		break;
	case GS_SH_NC_GATHER:
		e->sendbuf = a[0];
		e->recvbuf = a[1];
		e->count = a[2];
		e->datatype = (__s32)a[3];
		e->comm = a[4];
		e->stream = a[5];
		break;
	case GS_SH_NC_P2P:
		if (d->arg == GS_NCCL_RECV)
			e->recvbuf = a[0];
		else
			e->sendbuf = a[0];
		e->count = a[1];
		e->datatype = (__s32)a[2];
		e->peer = (__s32)a[3];
		e->comm = a[4];
		e->stream = a[5];
		break;
	case GS_SH_NC_INIT:
		e->comm = ok ? gs_load_u64(a[0]) : 0;
		e->nranks = (__s32)a[1];
		e->rank = (__s32)a[2];
		break;
	case GS_SH_NC_DESTROY:
		e->comm = a[0];
		break;
	default: /* GS_SH_NC_GROUP */
		break;
	}
}

#endif /* GPUSCOPE_DECODE_H */
