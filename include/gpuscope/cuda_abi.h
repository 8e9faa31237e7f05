/* SPDX-License-Identifier: MIT */
/*
 * The few CUDA driver ABI facts gpuscope relies on, declared here so that the CUDA
 * toolkit is not a build dependency. Offsets are for LP64 (x86-64, aarch64) and are checked
 * against the toolkit's cuda.h, where one is installed, by tests/test_build.py
 * (test_cuda_abi_matches_the_real_header).
 */
#ifndef GPUSCOPE_CUDA_ABI_H
#define GPUSCOPE_CUDA_ABI_H

/* Special stream handles: the legacy default stream and this thread's default stream. */
#define GS_CU_STREAM_LEGACY	0x1
#define GS_CU_STREAM_PER_THREAD 0x2

/* CUmemorytype */
#define GS_CU_MEMORYTYPE_HOST	 1
#define GS_CU_MEMORYTYPE_DEVICE	 2
#define GS_CU_MEMORYTYPE_ARRAY	 3
#define GS_CU_MEMORYTYPE_UNIFIED 4

/* struct CUDA_MEMCPY2D_st: 16 eight-byte slots; memory types are 4-byte enums. */
#define GS_MEMCPY2D_SRC_MEMTYPE 16
#define GS_MEMCPY2D_SRC_HOST	24
#define GS_MEMCPY2D_SRC_DEVICE	32
#define GS_MEMCPY2D_DST_MEMTYPE 72
#define GS_MEMCPY2D_DST_HOST	80
#define GS_MEMCPY2D_DST_DEVICE	88
#define GS_MEMCPY2D_WIDTH	112
#define GS_MEMCPY2D_HEIGHT	120

/* struct CUDA_MEMCPY3D_st */
#define GS_MEMCPY3D_SRC_MEMTYPE 32
#define GS_MEMCPY3D_SRC_HOST	40
#define GS_MEMCPY3D_SRC_DEVICE	48
#define GS_MEMCPY3D_DST_MEMTYPE 120
#define GS_MEMCPY3D_DST_HOST	128
#define GS_MEMCPY3D_DST_DEVICE	136
#define GS_MEMCPY3D_WIDTH	176
#define GS_MEMCPY3D_HEIGHT	184
#define GS_MEMCPY3D_DEPTH	192

/* struct CUlaunchConfig_st: gridDim[3], blockDim[3], sharedMemBytes (u32), pad,
 * hStream, attrs, numAttrs. */
#define GS_LAUNCHCFG_SIZE   56
#define GS_LAUNCHCFG_STREAM 32
#define GS_LAUNCHCFG_ATTRS  40
#define GS_LAUNCHCFG_NATTRS 48
/* struct CUlaunchAttribute_st: id (u32), pad[4], value (64-byte union) */
#define GS_LAUNCHATTR_SIZE		 72
#define GS_LAUNCH_ATTR_COOPERATIVE	 2
#define GS_LAUNCH_ATTR_CLUSTER_DIMENSION 4

/* struct CUmemAllocationProp_st: type, requestedHandleTypes, location {type, id}, ... */
#define GS_MEMPROP_LOCATION_TYPE    8
#define GS_MEMPROP_LOCATION_ID	    12
#define GS_MEM_LOCATION_TYPE_DEVICE 1

#endif /* GPUSCOPE_CUDA_ABI_H */
