/* SPDX-License-Identifier: MIT */
/*
 * What the probes of gpuscope's tools share: types, map declarations (as libbpf reads them),
 * the GPU helpers (src/ptx/translate.h) and the context (gpuscope/probe.h).
 */
#ifndef GS_PROBE_BPF_H
#define GS_PROBE_BPF_H

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long s64;

#include "gpuscope/probe.h"

#define SEC(s)		  __attribute__((section(s), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name

/* A map of u64 counters by a u32 index (type: BPF_MAP_TYPE_ARRAY or _PERCPU_ARRAY). */
#define U64_MAP(name, map_type, entries)      \
	struct {                              \
		__uint(type, map_type);       \
		__uint(max_entries, entries); \
		__type(key, u32);             \
		__type(value, u64);           \
	} name SEC(".maps")

#define BPF_MAP_TYPE_HASH	  1
#define BPF_MAP_TYPE_ARRAY	  2
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_NOEXIST		  1

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   u64 flags) = (void *)2;
static u64 (*bpf_get_globaltimer)(void) = (void *)502;
static long (*bpf_get_block_idx)(u64 *x, u64 *y, u64 *z) = (void *)503;
static long (*bpf_get_block_dim)(u64 *x, u64 *y, u64 *z) = (void *)504;
static long (*bpf_get_thread_idx)(u64 *x, u64 *y, u64 *z) = (void *)505;
static long (*bpf_get_grid_dim)(u64 *x, u64 *y, u64 *z) = (void *)508;
static u64 (*bpf_get_sm_id)(void) = (void *)509;
static u64 (*bpf_warp_unique)(u64 v) = (void *)522;
static u64 (*bpf_warp_match_count)(u64 v) = (void *)523;
static u64 (*bpf_warp_match_leader)(u64 v) = (void *)524;
static u64 (*bpf_warp_sum)(u64 v) = (void *)525;
static u64 (*bpf_warp_max)(u64 v) = (void *)526;

/* Counters every thread of a kernel adds to are kept STRIPES times over, by the SM's id:
 * same-address atomics are serialised in L2 (about a nanosecond each), so one counter for a
 * grid of a million threads would cost a millisecond. The host adds the stripes up. */
#define STRIPES 16

static inline u32 stripe(void)
{
	return (u32)bpf_get_sm_id() & (STRIPES - 1);
}

/* Per-kernel tables have this many rows; kernels past it share the last. */
#define MAX_KERNELS 1024

static inline u32 kernel_row(const struct gs_probe_ctx *c)
{
	return c->kernel < MAX_KERNELS - 1 ? c->kernel : MAX_KERNELS - 1;
}

/* floor(log2(v)), 0 for 0 and 1, at most 63 */
static inline u32 log2_of(u64 v)
{
	u32 r = 0;

	for (int i = 32; i > 0; i >>= 1)
		if (v >> i) {
			v >>= i;
			r += i;
		}
	return r;
}

/* *p = max(*p, v), racing others (a few tries) */
static inline void atomic_max(u64 *p, u64 v)
{
	for (int i = 0; i < 8; i++) {
		u64 old = *p;

		if (old >= v || __sync_val_compare_and_swap(p, old, v) == old)
			return;
	}
}

static inline void atomic_min(u64 *p, u64 v)
{
	for (int i = 0; i < 8; i++) {
		u64 old = *p;

		if (old <= v || __sync_val_compare_and_swap(p, old, v) == old)
			return;
	}
}

#endif
