/* SPDX-License-Identifier: MIT */
/*
 * The few CUPTI activity API facts --gpu-time=cupti relies on (src/inject/gputime_cupti.c),
 * declared here so that the CUDA toolkit is not a build dependency: the kernel, memcpy and
 * memset records' layouts as CUPTI 12.8-13 write them (CUpti_ActivityKernel10,
 * CUpti_ActivityMemcpy6, CUpti_ActivityMemset4; a kind's records are never changed once
 * published) and the functions' signatures. Offsets are for LP64; they are
 * checked against the real header by tests/test_build.py where the toolkit is present.
 */
#ifndef GPUSCOPE_CUPTI_ABI_H
#define GPUSCOPE_CUPTI_ABI_H

#include <stddef.h>
#include <stdint.h>

#define GS_CUPTI_SUCCESS			 0
#define GS_CUPTI_ERROR_NOT_INITIALIZED		 15
#define GS_CUPTI_ACTIVITY_KIND_MEMCPY		 1
#define GS_CUPTI_ACTIVITY_KIND_MEMSET		 2
#define GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL 10

/* CUpti_ActivityKernel10, the fields read (its size: 216 bytes). */
#define GS_CUPTI_K_START	16 /* u64, ns */
#define GS_CUPTI_K_END		24
#define GS_CUPTI_K_DEVICE	40  /* u32 */
#define GS_CUPTI_K_CONTEXT	44  /* u32, CUPTI's id (cuptiGetContextId) */
#define GS_CUPTI_K_STREAM	48  /* u32, CUPTI's id (cuptiGetStreamIdEx) */
#define GS_CUPTI_K_GRID		52  /* i32 x, y, z, then block x, y, z */
#define GS_CUPTI_K_DYNAMIC_SMEM 80  /* i32 */
#define GS_CUPTI_K_CORRELATION	92  /* u32 */
#define GS_CUPTI_K_NAME		104 /* const char *: the kernel's mangled name */
#define GS_CUPTI_K_GRAPH_NODE	144 /* u64 */
#define GS_CUPTI_K_GRAPH	156 /* u32, 0: not launched by a graph */
#define GS_CUPTI_K_SIZE		216

/* CUpti_ActivityMemcpy6 and CUpti_ActivityMemset4: the fields read, at the same offsets in
 * both (their sizes: 96 and 88 bytes). */
#define GS_CUPTI_C_BYTES     8 /* u64 */
#define GS_CUPTI_C_START     16
#define GS_CUPTI_C_END	     24
#define GS_CUPTI_C_DEVICE    32 /* u32 */
#define GS_CUPTI_C_CONTEXT   36
#define GS_CUPTI_C_STREAM    40
#define GS_CUPTI_C_GRAPH     72 /* u32, 0: not run by a graph */
#define GS_CUPTI_MEMCPY_SIZE 96
#define GS_CUPTI_MEMSET_SIZE 88

typedef void (*gs_cupti_request_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*gs_cupti_complete_fn)(void *ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
				     size_t valid);

/* The functions, as named in libcupti (every one returns a CUptiResult). */
typedef int (*gs_cupti_register_fn)(gs_cupti_request_fn, gs_cupti_complete_fn);
typedef int (*gs_cupti_kind_fn)(int kind);			/* Enable, Disable */
typedef int (*gs_cupti_flush_fn)(uint32_t flag);		/* FlushAll */
typedef int (*gs_cupti_next_fn)(uint8_t *, size_t, void **);	/* GetNextRecord */
typedef int (*gs_cupti_dropped_fn)(void *, uint32_t, size_t *); /* GetNumDroppedRecords */
typedef int (*gs_cupti_ctx_id_fn)(void *ctx, uint32_t *id);	/* cuptiGetContextId */
typedef int (*gs_cupti_stream_id_fn)(void *ctx, void *stream, uint8_t per_thread,
				     uint32_t *id); /* cuptiGetStreamIdEx */

#endif
