/* SPDX-License-Identifier: MIT */
/*
 * The reference interpreter's two parts (see interp.c):
 *   interp.c          the instructions;
 *   interp_helpers.c  the helpers: maps, ring buffers, the GPU's helpers for one thread.
 * And its memory: the context and the stack only, every access checked.
 */
#ifndef GS_PTX_INTERP_INT_H
#define GS_PTX_INTERP_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ptx/translate.h"

struct desc {
	__u64 data;
	__u32 value_size, max_entries, kind, extra;
};

struct vm {
	unsigned char stack[BPF_STACK_BYTES] __attribute__((aligned(8)));
	unsigned char *ctx;
	size_t ctx_size;
	const struct bpf_map_mem *maps;
	size_t nmaps;
	struct desc *descs;	     /* as the GPU's gs_maps table has them */
	const unsigned char *rodata; /* the object's read-only data (read only here) */
	size_t rodata_len;
};

static inline bool within(__u64 addr, unsigned int w, __u64 base, size_t size)
{
	return size >= w && addr >= base && addr - base <= size - w;
}
/* Where [addr, addr + w) is in the stack or the context, else NULL. */
static inline unsigned char *at(struct vm *vm, __u64 addr, unsigned int w)
{
	__u64 s = (__u64)(uintptr_t)vm->stack, c = (__u64)(uintptr_t)vm->ctx;

	/* (w is the program's to choose through a map's descriptor, which it can write:
	 * never larger than the region it is checked against) */
	if (w <= BPF_STACK_BYTES && addr >= s && addr - s <= BPF_STACK_BYTES - w)
		return (unsigned char *)(uintptr_t)addr;
	if (vm->ctx && vm->ctx_size >= w && addr >= c && addr - c <= vm->ctx_size - w)
		return (unsigned char *)(uintptr_t)addr;
	if (vm->rodata && within(addr, w, (__u64)(uintptr_t)vm->rodata, vm->rodata_len))
		return (unsigned char *)(uintptr_t)addr; /* (bpf2ptx's own copy) */
	for (size_t i = 0; i < vm->nmaps; i++) {
		const struct bpf_map_mem *m = &vm->maps[i];

		size_t bytes = m->kind == GS_MAP_HASH
				       ? bpf_hash_slot(m->extra, m->value_size) * m->max_entries
			       : m->kind == GS_MAP_RING
				       ? GS_RING_CTL
				       : (size_t)m->value_size * m->max_entries *
						 (m->kind == GS_MAP_PER_THREAD ? m->extra : 1);

		if (within(addr, w, (__u64)(uintptr_t)&vm->descs[i], sizeof(vm->descs[i])) ||
		    (m->data && within(addr, w, (__u64)(uintptr_t)m->data, bytes)))
			return (unsigned char *)(uintptr_t)addr;
	}
	return NULL;
}

static inline __u64 load(const unsigned char *p, unsigned int w)
{
	__u64 v = 0;

	memcpy(&v, p, w); /* (little-endian) */
	return v;
}

static inline void store(unsigned char *p, unsigned int w, __u64 v)
{
	memcpy(p, &v, w);
}

/* A GPU helper, as the PTX does it for the thread env describes. 0, 1 refused, 2 memory,
 * 3 the thread ended. */
int bpf_vm_helper(struct vm *vm, const struct bpf_gpu_env *env, int id, int off, __u64 *r);

#endif
