/* SPDX-License-Identifier: MIT */
/*
 * The table of traced functions, shared by the BPF programs (which decode arguments by
 * family and shape) and user space (which attaches probes and names APIs in reports).
 *
 * X(ID, "symbol", LIB, FAMILY, SHAPE, ARG, FLAGS)
 *   LIB     library that exports it (enum gs_lib_kind without the GS_LIB_ prefix)
 *   FAMILY  which return program decodes it, and which record it produces
 *   SHAPE   argument layout within the family
 *   ARG     family-specific: copy kind, memset element size, memory op, out-arg index
 *   FLAGS   GS_AF_*
 * Functions that share a layout share a shape; adding a function of a known layout is one
 * line here. Per-thread default stream variants (_ptds/_ptsz) are separate entry points in
 * libcuda and are listed explicitly.
 */
#ifndef GPUSCOPE_API_H
#define GPUSCOPE_API_H

#include "gpuscope/event.h"

enum gs_api_family {
	GS_FAM_LAUNCH = 1,
	GS_FAM_KNAME = 2,
	GS_FAM_MEM = 3,
	GS_FAM_COPY = 4,
	GS_FAM_SYNC = 5,
	GS_FAM_API = 6,
	GS_FAM_NCCL = 7,
};

enum gs_api_shape {
	GS_SH_NONE = 0,
	/* launches */
	GS_SH_L_STD,   /* (f, gx, gy, gz, bx, by, bz, smem, stream, params, extra) */
	GS_SH_L_EX,    /* (const CUlaunchConfig *, f, params, extra) */
	GS_SH_L_GRAPH, /* (CUgraphExec, stream) */
	/* names */
	GS_SH_N_GET,	   /* (handle *out, scope, const char *name) */
	GS_SH_N_KFUNC,	   /* (CUfunction *out, CUkernel) */
	GS_SH_N_REGISTER,  /* (void **fatbin, hostFun, char *deviceFun, deviceName, ...) */
	GS_SH_N_GETKERNEL, /* (cudaKernel_t *out, const void *hostFun) */
	/* memory */
	GS_SH_M_ALLOC,	 /* (ptr *out, size [, flags]) */
	GS_SH_M_PITCH,	 /* (ptr *out, size_t *pitch, width, height, elemsize) */
	GS_SH_M_ASYNC,	 /* (ptr *out, size, stream) */
	GS_SH_M_POOL,	 /* (ptr *out, size, pool, stream) */
	GS_SH_M_FREE,	 /* (ptr [, stream]) */
	GS_SH_M_CREATE,	 /* (handle *out, size, const CUmemAllocationProp *, flags) */
	GS_SH_M_RELEASE, /* (handle) */
	GS_SH_M_MAP,	 /* (va, size, offset, handle, flags) */
	GS_SH_M_UNMAP,	 /* (va, size) */
	GS_SH_M_RESERVE, /* (va *out, size, alignment, addr, flags) */
	/* copies and sets */
	GS_SH_C_1D,    /* (dst, src, bytes [, stream]) */
	GS_SH_C_PEER,  /* (dst, dstctx, src, srcctx, bytes [, stream]) */
	GS_SH_C_2D,    /* (const CUDA_MEMCPY2D * [, stream]) */
	GS_SH_C_3D,    /* (const CUDA_MEMCPY3D * [, stream]) */
	GS_SH_C_SET1D, /* (dst, value, count [, stream]) */
	GS_SH_C_SET2D, /* (dst, pitch, value, width, height [, stream]) */
	/* synchronisation */
	GS_SH_S_VOID, /* () */
	GS_SH_S_ONE,  /* (stream or event) */
	GS_SH_S_WAIT, /* (stream, event, flags) */
	/* other driver calls: ARG is the index of an out-parameter, GS_NO_OUT if none */
	GS_SH_A_ARGS,
	GS_SH_A_CTX, /* (CUcontext *out, ..., CUdevice at index ARG, ...) */
	/* A graph's node, by the graph API: its parameters at index ARG & 7 (kernel node
	 * parameters; GS_KNODE_GENERIC: a CUgraphNodeParams; GS_KNODE_V1: CUDA 11's, no
	 * CUkernel): (CUgraphNode *out, CUgraph, ...) adds one, (node, params) sets a graph's,
	 * (exec, node, params) an instantiated graph's */
	GS_SH_A_KNODE,
	GS_SH_A_CHILD, /* (CUgraphNode *out, CUgraph, deps, n, CUgraph child); ARG 2: an
			* instantiated graph's child node set, (exec, node, CUgraph child) */
	/* NCCL */
	GS_SH_NC_OP7,	  /* (send, recv, count, dtype, redop, comm, stream) */
	GS_SH_NC_ROOT7,	  /* (send, recv, count, dtype, root, comm, stream) */
	GS_SH_NC_REDUCE,  /* (send, recv, count, dtype, redop, root, comm, stream) */
	GS_SH_NC_GATHER,  /* (send, recv, sendcount, dtype, comm, stream) */
	GS_SH_NC_P2P,	  /* (buf, count, dtype, peer-or-root, comm, stream) */
	GS_SH_NC_GROUP,	  /* () */
	GS_SH_NC_INIT,	  /* (ncclComm_t *out, nranks, [id on stack,] rank, ...) */
	GS_SH_NC_INITALL, /* (ncclComm_t *comms, ndev, const int *devlist) */
	GS_SH_NC_DESTROY, /* (comm) */
};

/* GS_SH_A_KNODE's ARG bits */
#define GS_KNODE_GENERIC 0x8
#define GS_KNODE_V1	 0x10

enum gs_api_flags {
	GS_AF_ASYNC = 1 << 0,
	GS_AF_PTSZ = 1 << 1,   /* per-thread default stream variant */
	GS_AF_COOP = 1 << 2,   /* cooperative launch */
	GS_AF_ALWAYS = 1 << 4, /* GS_FAM_API: emit on success too, not only on failure */
};

#define GS_NO_OUT 0xff
/* (A_ARGS: the third argument itself as the record's out, a value rather than a pointer:
 * cuGraphNodeSetEnabled's isEnabled.) */
#define GS_ARG2_VALUE 0xfe

/* clang-format off */
#define GS_API_LIST(X)									\
	X(CU_LAUNCH_KERNEL,		"cuLaunchKernel",		CUDA, LAUNCH, L_STD, 0, 0)	\
	X(CU_LAUNCH_KERNEL_PTSZ,	"cuLaunchKernel_ptsz",		CUDA, LAUNCH, L_STD, 0, GS_AF_PTSZ) \
	X(CU_LAUNCH_COOP,		"cuLaunchCooperativeKernel",	CUDA, LAUNCH, L_STD, 0, GS_AF_COOP) \
	X(CU_LAUNCH_COOP_PTSZ,		"cuLaunchCooperativeKernel_ptsz", CUDA, LAUNCH, L_STD, 0, GS_AF_COOP | GS_AF_PTSZ) \
	X(CU_LAUNCH_KERNEL_EX,		"cuLaunchKernelEx",		CUDA, LAUNCH, L_EX, 0, 0)	\
	X(CU_LAUNCH_KERNEL_EX_PTSZ,	"cuLaunchKernelEx_ptsz",	CUDA, LAUNCH, L_EX, 0, GS_AF_PTSZ) \
	X(CU_GRAPH_LAUNCH,		"cuGraphLaunch",		CUDA, LAUNCH, L_GRAPH, 0, 0)	\
	X(CU_GRAPH_LAUNCH_PTSZ,		"cuGraphLaunch_ptsz",		CUDA, LAUNCH, L_GRAPH, 0, GS_AF_PTSZ) \
	X(CU_LIBRARY_GET_KERNEL,	"cuLibraryGetKernel",		CUDA, KNAME, N_GET, 0, 0)	\
	X(CU_MODULE_GET_FUNCTION,	"cuModuleGetFunction",		CUDA, KNAME, N_GET, 0, 0)	\
	X(CU_KERNEL_GET_FUNCTION,	"cuKernelGetFunction",		CUDA, KNAME, N_KFUNC, 0, 0)	\
	X(CUDA_REGISTER_FUNCTION,	"__cudaRegisterFunction",	CUDART, KNAME, N_REGISTER, 0, 0) \
	X(CUDA_GET_KERNEL,		"__cudaGetKernel",		CUDART, KNAME, N_GETKERNEL, 0, 0) \
	X(CU_MEM_ALLOC,			"cuMemAlloc_v2",		CUDA, MEM, M_ALLOC, GS_MEM_ALLOC, 0) \
	X(CU_MEM_ALLOC_PITCH,		"cuMemAllocPitch_v2",		CUDA, MEM, M_PITCH, GS_MEM_ALLOC, 0) \
	X(CU_MEM_ALLOC_MANAGED,		"cuMemAllocManaged",		CUDA, MEM, M_ALLOC, GS_MEM_ALLOC_MANAGED, 0) \
	X(CU_MEM_HOST_ALLOC,		"cuMemHostAlloc",		CUDA, MEM, M_ALLOC, GS_MEM_ALLOC_HOST, 0) \
	X(CU_MEM_ALLOC_HOST,		"cuMemAllocHost_v2",		CUDA, MEM, M_ALLOC, GS_MEM_ALLOC_HOST, 0) \
	X(CU_MEM_ALLOC_ASYNC,		"cuMemAllocAsync",		CUDA, MEM, M_ASYNC, GS_MEM_ALLOC_ASYNC, GS_AF_ASYNC) \
	X(CU_MEM_ALLOC_ASYNC_PTSZ,	"cuMemAllocAsync_ptsz",		CUDA, MEM, M_ASYNC, GS_MEM_ALLOC_ASYNC, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEM_ALLOC_POOL_ASYNC,	"cuMemAllocFromPoolAsync",	CUDA, MEM, M_POOL, GS_MEM_ALLOC_ASYNC, GS_AF_ASYNC) \
	X(CU_MEM_ALLOC_POOL_ASYNC_PTSZ,	"cuMemAllocFromPoolAsync_ptsz",	CUDA, MEM, M_POOL, GS_MEM_ALLOC_ASYNC, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEM_FREE,			"cuMemFree_v2",			CUDA, MEM, M_FREE, GS_MEM_FREE, 0) \
	X(CU_MEM_FREE_HOST,		"cuMemFreeHost",		CUDA, MEM, M_FREE, GS_MEM_FREE_HOST, 0) \
	X(CU_MEM_FREE_ASYNC,		"cuMemFreeAsync",		CUDA, MEM, M_FREE, GS_MEM_FREE_ASYNC, GS_AF_ASYNC) \
	X(CU_MEM_FREE_ASYNC_PTSZ,	"cuMemFreeAsync_ptsz",		CUDA, MEM, M_FREE, GS_MEM_FREE_ASYNC, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEM_CREATE,		"cuMemCreate",			CUDA, MEM, M_CREATE, GS_MEM_VMM_CREATE, 0) \
	X(CU_MEM_RELEASE,		"cuMemRelease",			CUDA, MEM, M_RELEASE, GS_MEM_VMM_RELEASE, 0) \
	X(CU_MEM_MAP,			"cuMemMap",			CUDA, MEM, M_MAP, GS_MEM_VMM_MAP, 0) \
	X(CU_MEM_UNMAP,			"cuMemUnmap",			CUDA, MEM, M_UNMAP, GS_MEM_VMM_UNMAP, 0) \
	X(CU_MEM_ADDRESS_RESERVE,	"cuMemAddressReserve",		CUDA, MEM, M_RESERVE, GS_MEM_VA_RESERVE, 0) \
	X(CU_MEM_ADDRESS_FREE,		"cuMemAddressFree",		CUDA, MEM, M_UNMAP, GS_MEM_VA_FREE, 0) \
	X(CU_MEMCPY,			"cuMemcpy",			CUDA, COPY, C_1D, GS_COPY_DEFAULT, 0) \
	X(CU_MEMCPY_PTDS,		"cuMemcpy_ptds",		CUDA, COPY, C_1D, GS_COPY_DEFAULT, GS_AF_PTSZ) \
	X(CU_MEMCPY_ASYNC,		"cuMemcpyAsync",		CUDA, COPY, C_1D, GS_COPY_DEFAULT, GS_AF_ASYNC) \
	X(CU_MEMCPY_ASYNC_PTSZ,		"cuMemcpyAsync_ptsz",		CUDA, COPY, C_1D, GS_COPY_DEFAULT, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMCPY_HTOD,		"cuMemcpyHtoD_v2",		CUDA, COPY, C_1D, GS_COPY_HTOD, 0) \
	X(CU_MEMCPY_HTOD_PTDS,		"cuMemcpyHtoD_v2_ptds",		CUDA, COPY, C_1D, GS_COPY_HTOD, GS_AF_PTSZ) \
	X(CU_MEMCPY_DTOH,		"cuMemcpyDtoH_v2",		CUDA, COPY, C_1D, GS_COPY_DTOH, 0) \
	X(CU_MEMCPY_DTOH_PTDS,		"cuMemcpyDtoH_v2_ptds",		CUDA, COPY, C_1D, GS_COPY_DTOH, GS_AF_PTSZ) \
	X(CU_MEMCPY_DTOD,		"cuMemcpyDtoD_v2",		CUDA, COPY, C_1D, GS_COPY_DTOD, 0) \
	X(CU_MEMCPY_DTOD_PTDS,		"cuMemcpyDtoD_v2_ptds",		CUDA, COPY, C_1D, GS_COPY_DTOD, GS_AF_PTSZ) \
	X(CU_MEMCPY_HTOD_ASYNC,		"cuMemcpyHtoDAsync_v2",		CUDA, COPY, C_1D, GS_COPY_HTOD, GS_AF_ASYNC) \
	X(CU_MEMCPY_HTOD_ASYNC_PTSZ,	"cuMemcpyHtoDAsync_v2_ptsz",	CUDA, COPY, C_1D, GS_COPY_HTOD, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMCPY_DTOH_ASYNC,		"cuMemcpyDtoHAsync_v2",		CUDA, COPY, C_1D, GS_COPY_DTOH, GS_AF_ASYNC) \
	X(CU_MEMCPY_DTOH_ASYNC_PTSZ,	"cuMemcpyDtoHAsync_v2_ptsz",	CUDA, COPY, C_1D, GS_COPY_DTOH, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMCPY_DTOD_ASYNC,		"cuMemcpyDtoDAsync_v2",		CUDA, COPY, C_1D, GS_COPY_DTOD, GS_AF_ASYNC) \
	X(CU_MEMCPY_DTOD_ASYNC_PTSZ,	"cuMemcpyDtoDAsync_v2_ptsz",	CUDA, COPY, C_1D, GS_COPY_DTOD, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMCPY_PEER,		"cuMemcpyPeer",			CUDA, COPY, C_PEER, GS_COPY_PEER, 0) \
	X(CU_MEMCPY_PEER_PTDS,		"cuMemcpyPeer_ptds",		CUDA, COPY, C_PEER, GS_COPY_PEER, GS_AF_PTSZ) \
	X(CU_MEMCPY_PEER_ASYNC,		"cuMemcpyPeerAsync",		CUDA, COPY, C_PEER, GS_COPY_PEER, GS_AF_ASYNC) \
	X(CU_MEMCPY_PEER_ASYNC_PTSZ,	"cuMemcpyPeerAsync_ptsz",	CUDA, COPY, C_PEER, GS_COPY_PEER, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMCPY_2D,			"cuMemcpy2D_v2",		CUDA, COPY, C_2D, 0, 0)	\
	X(CU_MEMCPY_2D_PTDS,		"cuMemcpy2D_v2_ptds",		CUDA, COPY, C_2D, 0, GS_AF_PTSZ) \
	X(CU_MEMCPY_2D_UNALIGNED,	"cuMemcpy2DUnaligned_v2",	CUDA, COPY, C_2D, 0, 0)	\
	X(CU_MEMCPY_2D_UNALIGNED_PTDS,	"cuMemcpy2DUnaligned_v2_ptds",	CUDA, COPY, C_2D, 0, GS_AF_PTSZ) \
	X(CU_MEMCPY_2D_ASYNC,		"cuMemcpy2DAsync_v2",		CUDA, COPY, C_2D, 0, GS_AF_ASYNC) \
	X(CU_MEMCPY_2D_ASYNC_PTSZ,	"cuMemcpy2DAsync_v2_ptsz",	CUDA, COPY, C_2D, 0, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMCPY_3D,			"cuMemcpy3D_v2",		CUDA, COPY, C_3D, 0, 0)	\
	X(CU_MEMCPY_3D_PTDS,		"cuMemcpy3D_v2_ptds",		CUDA, COPY, C_3D, 0, GS_AF_PTSZ) \
	X(CU_MEMCPY_3D_ASYNC,		"cuMemcpy3DAsync_v2",		CUDA, COPY, C_3D, 0, GS_AF_ASYNC) \
	X(CU_MEMCPY_3D_ASYNC_PTSZ,	"cuMemcpy3DAsync_v2_ptsz",	CUDA, COPY, C_3D, 0, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMSET_D8,			"cuMemsetD8_v2",		CUDA, COPY, C_SET1D, 1, 0)	\
	X(CU_MEMSET_D8_PTDS,		"cuMemsetD8_v2_ptds",		CUDA, COPY, C_SET1D, 1, GS_AF_PTSZ) \
	X(CU_MEMSET_D16,		"cuMemsetD16_v2",		CUDA, COPY, C_SET1D, 2, 0)	\
	X(CU_MEMSET_D16_PTDS,		"cuMemsetD16_v2_ptds",		CUDA, COPY, C_SET1D, 2, GS_AF_PTSZ) \
	X(CU_MEMSET_D32,		"cuMemsetD32_v2",		CUDA, COPY, C_SET1D, 4, 0)	\
	X(CU_MEMSET_D32_PTDS,		"cuMemsetD32_v2_ptds",		CUDA, COPY, C_SET1D, 4, GS_AF_PTSZ) \
	X(CU_MEMSET_D8_ASYNC,		"cuMemsetD8Async",		CUDA, COPY, C_SET1D, 1, GS_AF_ASYNC) \
	X(CU_MEMSET_D8_ASYNC_PTSZ,	"cuMemsetD8Async_ptsz",		CUDA, COPY, C_SET1D, 1, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMSET_D16_ASYNC,		"cuMemsetD16Async",		CUDA, COPY, C_SET1D, 2, GS_AF_ASYNC) \
	X(CU_MEMSET_D16_ASYNC_PTSZ,	"cuMemsetD16Async_ptsz",	CUDA, COPY, C_SET1D, 2, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMSET_D32_ASYNC,		"cuMemsetD32Async",		CUDA, COPY, C_SET1D, 4, GS_AF_ASYNC) \
	X(CU_MEMSET_D32_ASYNC_PTSZ,	"cuMemsetD32Async_ptsz",	CUDA, COPY, C_SET1D, 4, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMSET_D2D8,		"cuMemsetD2D8_v2",		CUDA, COPY, C_SET2D, 1, 0)	\
	X(CU_MEMSET_D2D8_PTDS,		"cuMemsetD2D8_v2_ptds",		CUDA, COPY, C_SET2D, 1, GS_AF_PTSZ) \
	X(CU_MEMSET_D2D16,		"cuMemsetD2D16_v2",		CUDA, COPY, C_SET2D, 2, 0)	\
	X(CU_MEMSET_D2D16_PTDS,		"cuMemsetD2D16_v2_ptds",	CUDA, COPY, C_SET2D, 2, GS_AF_PTSZ) \
	X(CU_MEMSET_D2D32,		"cuMemsetD2D32_v2",		CUDA, COPY, C_SET2D, 4, 0)	\
	X(CU_MEMSET_D2D32_PTDS,		"cuMemsetD2D32_v2_ptds",	CUDA, COPY, C_SET2D, 4, GS_AF_PTSZ) \
	X(CU_MEMSET_D2D8_ASYNC,		"cuMemsetD2D8Async",		CUDA, COPY, C_SET2D, 1, GS_AF_ASYNC) \
	X(CU_MEMSET_D2D8_ASYNC_PTSZ,	"cuMemsetD2D8Async_ptsz",	CUDA, COPY, C_SET2D, 1, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMSET_D2D16_ASYNC,	"cuMemsetD2D16Async",		CUDA, COPY, C_SET2D, 2, GS_AF_ASYNC) \
	X(CU_MEMSET_D2D16_ASYNC_PTSZ,	"cuMemsetD2D16Async_ptsz",	CUDA, COPY, C_SET2D, 2, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_MEMSET_D2D32_ASYNC,	"cuMemsetD2D32Async",		CUDA, COPY, C_SET2D, 4, GS_AF_ASYNC) \
	X(CU_MEMSET_D2D32_ASYNC_PTSZ,	"cuMemsetD2D32Async_ptsz",	CUDA, COPY, C_SET2D, 4, GS_AF_ASYNC | GS_AF_PTSZ) \
	X(CU_CTX_SYNCHRONIZE,		"cuCtxSynchronize",		CUDA, SYNC, S_VOID, 0, 0)	\
	X(CU_CTX_SYNCHRONIZE_V2,	"cuCtxSynchronize_v2",		CUDA, SYNC, S_ONE, 0, 0)	\
	X(CU_STREAM_SYNCHRONIZE,	"cuStreamSynchronize",		CUDA, SYNC, S_ONE, 0, 0)	\
	X(CU_STREAM_SYNCHRONIZE_PTSZ,	"cuStreamSynchronize_ptsz",	CUDA, SYNC, S_ONE, 0, GS_AF_PTSZ) \
	X(CU_EVENT_SYNCHRONIZE,		"cuEventSynchronize",		CUDA, SYNC, S_ONE, 0, 0)	\
	X(CU_STREAM_WAIT_EVENT,		"cuStreamWaitEvent",		CUDA, SYNC, S_WAIT, 0, 0)	\
	X(CU_STREAM_WAIT_EVENT_PTSZ,	"cuStreamWaitEvent_ptsz",	CUDA, SYNC, S_WAIT, 0, GS_AF_PTSZ) \
	X(CU_STREAM_QUERY,		"cuStreamQuery",		CUDA, SYNC, S_ONE, 0, 0)	\
	X(CU_STREAM_QUERY_PTSZ,		"cuStreamQuery_ptsz",		CUDA, SYNC, S_ONE, 0, GS_AF_PTSZ) \
	X(CU_EVENT_QUERY,		"cuEventQuery",			CUDA, SYNC, S_ONE, 0, 0)	\
	X(CU_INIT,			"cuInit",			CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_DEVICE_PRIMARY_CTX_RETAIN,	"cuDevicePrimaryCtxRetain",	CUDA, API, A_CTX, 1, GS_AF_ALWAYS) \
	X(CU_CTX_CREATE,		"cuCtxCreate_v2",		CUDA, API, A_CTX, 2, GS_AF_ALWAYS) \
	X(CU_CTX_CREATE_V3,		"cuCtxCreate_v3",		CUDA, API, A_CTX, 4, GS_AF_ALWAYS) \
	X(CU_CTX_CREATE_V4,		"cuCtxCreate_v4",		CUDA, API, A_CTX, 3, GS_AF_ALWAYS) \
	X(CU_CTX_SET_CURRENT,		"cuCtxSetCurrent",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_CTX_PUSH_CURRENT,		"cuCtxPushCurrent_v2",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_CTX_POP_CURRENT,		"cuCtxPopCurrent_v2",		CUDA, API, A_ARGS, 0, GS_AF_ALWAYS) \
	X(CU_CTX_DESTROY,		"cuCtxDestroy_v2",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_MODULE_LOAD,		"cuModuleLoad",			CUDA, API, A_ARGS, 0, GS_AF_ALWAYS) \
	X(CU_MODULE_LOAD_DATA,		"cuModuleLoadData",		CUDA, API, A_ARGS, 0, GS_AF_ALWAYS) \
	X(CU_MODULE_LOAD_DATA_EX,	"cuModuleLoadDataEx",		CUDA, API, A_ARGS, 0, GS_AF_ALWAYS) \
	X(CU_MODULE_LOAD_FAT_BINARY,	"cuModuleLoadFatBinary",	CUDA, API, A_ARGS, 0, GS_AF_ALWAYS) \
	X(CU_LIBRARY_LOAD_DATA,		"cuLibraryLoadData",		CUDA, API, A_ARGS, 0, GS_AF_ALWAYS) \
	X(CU_LIBRARY_LOAD_FROM_FILE,	"cuLibraryLoadFromFile",	CUDA, API, A_ARGS, 0, GS_AF_ALWAYS) \
	X(CU_STREAM_CREATE,		"cuStreamCreate",		CUDA, API, A_ARGS, 0, 0)	\
	X(CU_STREAM_CREATE_PRIO,	"cuStreamCreateWithPriority",	CUDA, API, A_ARGS, 0, 0)	\
	X(CU_EVENT_CREATE,		"cuEventCreate",		CUDA, API, A_ARGS, 0, 0)	\
	X(CU_EVENT_RECORD,		"cuEventRecord",		CUDA, API, A_ARGS, GS_NO_OUT, 0) \
	X(CU_EVENT_RECORD_PTSZ,		"cuEventRecord_ptsz",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_PTSZ) \
	X(CU_MEM_GET_INFO,		"cuMemGetInfo_v2",		CUDA, API, A_ARGS, GS_NO_OUT, 0) \
	X(CU_STREAM_BEGIN_CAPTURE_V1,	"cuStreamBeginCapture",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_STREAM_BEGIN_CAPTURE_V1_PTSZ, "cuStreamBeginCapture_ptsz",	CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS | GS_AF_PTSZ) \
	X(CU_STREAM_BEGIN_CAPTURE,	"cuStreamBeginCapture_v2",	CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_STREAM_BEGIN_CAPTURE_PTSZ,	"cuStreamBeginCapture_v2_ptsz",	CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS | GS_AF_PTSZ) \
	X(CU_STREAM_END_CAPTURE,	"cuStreamEndCapture",		CUDA, API, A_ARGS, 1, GS_AF_ALWAYS) \
	X(CU_STREAM_END_CAPTURE_PTSZ,	"cuStreamEndCapture_ptsz",	CUDA, API, A_ARGS, 1, GS_AF_ALWAYS | GS_AF_PTSZ) \
	X(CU_GRAPH_INSTANTIATE,		"cuGraphInstantiateWithFlags",	CUDA, API, A_ARGS, 0, GS_AF_ALWAYS) \
	X(CU_GRAPH_INSTANTIATE_PARAMS,	"cuGraphInstantiateWithParams",	CUDA, API, A_ARGS, 0, GS_AF_ALWAYS) \
	X(CU_GRAPH_INSTANTIATE_PARAMS_PTSZ, "cuGraphInstantiateWithParams_ptsz", CUDA, API, A_ARGS, 0, GS_AF_ALWAYS | GS_AF_PTSZ) \
	X(NCCL_ALL_REDUCE,		"ncclAllReduce",		NCCL, NCCL, NC_OP7, GS_NCCL_ALL_REDUCE, 0) \
	X(NCCL_REDUCE_SCATTER,		"ncclReduceScatter",		NCCL, NCCL, NC_OP7, GS_NCCL_REDUCE_SCATTER, 0) \
	X(NCCL_BROADCAST,		"ncclBroadcast",		NCCL, NCCL, NC_ROOT7, GS_NCCL_BROADCAST, 0) \
	X(NCCL_BCAST,			"ncclBcast",			NCCL, NCCL, NC_P2P, GS_NCCL_BROADCAST, 0) \
	X(NCCL_REDUCE,			"ncclReduce",			NCCL, NCCL, NC_REDUCE, GS_NCCL_REDUCE, 0) \
	X(NCCL_ALL_GATHER,		"ncclAllGather",		NCCL, NCCL, NC_GATHER, GS_NCCL_ALL_GATHER, 0) \
	X(NCCL_SEND,			"ncclSend",			NCCL, NCCL, NC_P2P, GS_NCCL_SEND, 0) \
	X(NCCL_RECV,			"ncclRecv",			NCCL, NCCL, NC_P2P, GS_NCCL_RECV, 0) \
	X(NCCL_GROUP_START,		"ncclGroupStart",		NCCL, NCCL, NC_GROUP, GS_NCCL_GROUP_START, 0) \
	X(NCCL_GROUP_END,		"ncclGroupEnd",			NCCL, NCCL, NC_GROUP, GS_NCCL_GROUP_END, 0) \
	X(NCCL_COMM_INIT_RANK,		"ncclCommInitRank",		NCCL, NCCL, NC_INIT, GS_NCCL_COMM_INIT, 0) \
	X(NCCL_COMM_INIT_RANK_CONFIG,	"ncclCommInitRankConfig",	NCCL, NCCL, NC_INIT, GS_NCCL_COMM_INIT, 0) \
	X(NCCL_COMM_INIT_RANK_SCALABLE,	"ncclCommInitRankScalable",	NCCL, NCCL, NC_INIT, GS_NCCL_COMM_INIT, 0) \
	X(NCCL_COMM_INIT_ALL,		"ncclCommInitAll",		NCCL, NCCL, NC_INITALL, GS_NCCL_COMM_INIT, 0) \
	X(NCCL_COMM_DESTROY,		"ncclCommDestroy",		NCCL, NCCL, NC_DESTROY, GS_NCCL_COMM_DESTROY, 0) \
	X(NCCL_COMM_ABORT,		"ncclCommAbort",		NCCL, NCCL, NC_DESTROY, GS_NCCL_COMM_DESTROY, 0) \
	X(CU_MODULE_UNLOAD,		"cuModuleUnload",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_LIBRARY_UNLOAD,		"cuLibraryUnload",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_GRAPH_ADD_KERNEL_NODE_V1,	"cuGraphAddKernelNode",		CUDA, API, A_KNODE, 4 | GS_KNODE_V1, GS_AF_ALWAYS) \
	X(CU_GRAPH_ADD_KERNEL_NODE,	"cuGraphAddKernelNode_v2",	CUDA, API, A_KNODE, 4, GS_AF_ALWAYS) \
	X(CU_GRAPH_KERNEL_NODE_SET_PARAMS_V1, "cuGraphKernelNodeSetParams", CUDA, API, A_KNODE, 1 | GS_KNODE_V1, GS_AF_ALWAYS) \
	X(CU_GRAPH_KERNEL_NODE_SET_PARAMS, "cuGraphKernelNodeSetParams_v2", CUDA, API, A_KNODE, 1, GS_AF_ALWAYS) \
	X(CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V1, "cuGraphExecKernelNodeSetParams", CUDA, API, A_KNODE, 2 | GS_KNODE_V1, GS_AF_ALWAYS) \
	X(CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS, "cuGraphExecKernelNodeSetParams_v2", CUDA, API, A_KNODE, 2, GS_AF_ALWAYS) \
	X(CU_GRAPH_ADD_NODE_V1,		"cuGraphAddNode",		CUDA, API, A_KNODE, 4 | GS_KNODE_GENERIC, GS_AF_ALWAYS) \
	X(CU_GRAPH_ADD_NODE,		"cuGraphAddNode_v2",		CUDA, API, A_KNODE, 5 | GS_KNODE_GENERIC, GS_AF_ALWAYS) \
	X(CU_GRAPH_NODE_SET_PARAMS,	"cuGraphNodeSetParams",		CUDA, API, A_KNODE, 1 | GS_KNODE_GENERIC, GS_AF_ALWAYS) \
	X(CU_GRAPH_EXEC_NODE_SET_PARAMS, "cuGraphExecNodeSetParams",	CUDA, API, A_KNODE, 2 | GS_KNODE_GENERIC, GS_AF_ALWAYS) \
	X(CU_GRAPH_ADD_CHILD_GRAPH_NODE, "cuGraphAddChildGraphNode",	CUDA, API, A_CHILD, 0, GS_AF_ALWAYS) \
	X(CU_GRAPH_CLONE,		"cuGraphClone",			CUDA, API, A_ARGS, 0, GS_AF_ALWAYS) \
	X(CU_GRAPH_EXEC_UPDATE,		"cuGraphExecUpdate_v2",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_GRAPH_DESTROY,		"cuGraphDestroy",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_GRAPH_EXEC_DESTROY,	"cuGraphExecDestroy",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_STREAM_BEGIN_CAPTURE_TO_GRAPH, "cuStreamBeginCaptureToGraph", CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_STREAM_BEGIN_CAPTURE_TO_GRAPH_PTSZ, "cuStreamBeginCaptureToGraph_ptsz", CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS | GS_AF_PTSZ) \
	X(CU_GRAPH_EXEC_CHILD_GRAPH_NODE_SET_PARAMS, "cuGraphExecChildGraphNodeSetParams", CUDA, API, A_CHILD, 2, GS_AF_ALWAYS) \
	X(CU_GRAPH_EXEC_UPDATE_V1,	"cuGraphExecUpdate",		CUDA, API, A_ARGS, GS_NO_OUT, GS_AF_ALWAYS) \
	X(CU_GRAPH_EXEC_MEMCPY_NODE_SET_PARAMS, "cuGraphExecMemcpyNodeSetParams", CUDA, API, A_ARGS, GS_NO_OUT, 0) \
	X(CU_GRAPH_EXEC_MEMSET_NODE_SET_PARAMS, "cuGraphExecMemsetNodeSetParams", CUDA, API, A_ARGS, GS_NO_OUT, 0) \
	X(CU_GRAPH_EXEC_HOST_NODE_SET_PARAMS, "cuGraphExecHostNodeSetParams", CUDA, API, A_ARGS, GS_NO_OUT, 0) \
	X(CU_GRAPH_EXEC_EVENT_RECORD_NODE_SET_EVENT, "cuGraphExecEventRecordNodeSetEvent", CUDA, API, A_ARGS, GS_NO_OUT, 0) \
	X(CU_GRAPH_EXEC_EVENT_WAIT_NODE_SET_EVENT, "cuGraphExecEventWaitNodeSetEvent", CUDA, API, A_ARGS, GS_NO_OUT, 0) \
	X(CU_GRAPH_EXEC_EXT_SEM_SIGNAL_NODE_SET_PARAMS, "cuGraphExecExternalSemaphoresSignalNodeSetParams", CUDA, API, A_ARGS, GS_NO_OUT, 0) \
	X(CU_GRAPH_EXEC_EXT_SEM_WAIT_NODE_SET_PARAMS, "cuGraphExecExternalSemaphoresWaitNodeSetParams", CUDA, API, A_ARGS, GS_NO_OUT, 0) \
	X(CU_GRAPH_EXEC_BATCH_MEM_OP_NODE_SET_PARAMS, "cuGraphExecBatchMemOpNodeSetParams", CUDA, API, A_ARGS, GS_NO_OUT, 0) \
	X(CU_GRAPH_NODE_SET_ENABLED,	"cuGraphNodeSetEnabled",	CUDA, API, A_ARGS, GS_ARG2_VALUE, GS_AF_ALWAYS)
/* clang-format on */

#define GS_API_ENUM(id, sym, lib, fam, shape, arg, flags) GS_API_##id,
enum gs_api {
	GS_API_NONE = 0,
	GS_API_LIST(GS_API_ENUM) GS_API_MAX,
};
#undef GS_API_ENUM

struct gs_api_desc {
	__u8 lib;    /* enum gs_lib_kind */
	__u8 family; /* enum gs_api_family */
	__u8 shape;  /* enum gs_api_shape */
	__u8 arg;
	__u8 flags; /* enum gs_api_flags */
	__u8 pad[3];
};

/* Expands to a designated initialiser list: `static const struct gs_api_desc t[] = { ... }`. */
#define GS_API_DESC(id_, sym_, lib_, fam_, shape_, arg_, fl_) \
	[GS_API_##id_] = { .lib = GS_LIB_##lib_,              \
			   .family = GS_FAM_##fam_,           \
			   .shape = GS_SH_##shape_,           \
			   .arg = (arg_),                     \
			   .flags = (fl_) },

#endif /* GPUSCOPE_API_H */
