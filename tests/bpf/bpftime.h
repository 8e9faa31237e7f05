/* SPDX-License-Identifier: MIT */
/* What bpftime's GPU examples take from vmlinux.h and bpf_helpers.h, for the test objects
 * written as they are (bpftime_abi.bpf.c, bpftime_exit.bpf.c). KERNEL: the kernel probed (a
 * mangled name, as bpftime's sections have it). */
#ifndef GS_TEST_BPFTIME_H
#define GS_TEST_BPFTIME_H

typedef unsigned long long u64;
typedef unsigned int u32;

#define SEC(s)		  __attribute__((section(s), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
#ifndef KERNEL
#define KERNEL "_Z9vectorAddPKfS0_Pf"
#endif

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static const u64 (*bpf_get_block_idx)(u64 *x, u64 *y, u64 *z) = (void *)503;

#endif
