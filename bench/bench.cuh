// SPDX-License-Identifier: MIT
/*
 * Shared by the CUDA benchmark programs under bench/: a driver/runtime error check, the
 * host clock, reading a file, and a kernel's own view of its span (%globaltimer at its first block's
 * start and at its last block's end).
 */
#ifndef GS_BENCH_CUH
#define GS_BENCH_CUH

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "../tests/workloads/wl_file.h" /* slurp(): a whole file, NUL-terminated */

#define CK(x)                                                                             \
	do {                                                                              \
		int r_ = (int)(x);                                                        \
		if (r_) {                                                                 \
			fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, r_);  \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

static inline double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__device__ unsigned int span_done;

/* At the kernel's start: block 0's thread 0 notes the time in span[0]. */
__device__ inline void span_begin(unsigned long long *span)
{
	unsigned long long t;

	if (threadIdx.x == 0 && blockIdx.x == 0) {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
		span[0] = t;
	}
}

/* At the kernel's end, in every thread: the last of `blocks` blocks notes it in span[1]. */
__device__ inline void span_end(unsigned long long *span, unsigned int blocks)
{
	unsigned long long t;

	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence();
		if (atomicAdd(&span_done, 1) == blocks - 1) {
			asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
			span[1] = t;
			span_done = 0;
		}
	}
}

#ifdef _CUPTI_ACTIVITY_H_
/* CUPTI's request for a buffer of activity records (programs that include cupti_activity.h
 * first): 16 MiB, freed by their completion callback. */
static void CUPTIAPI bench_cupti_request(uint8_t **buf, size_t *size, size_t *max_records)
{
	*size = 16 << 20;
	*buf = (uint8_t *)aligned_alloc(8, *size);
	*max_records = 0;
}
#endif

#endif
