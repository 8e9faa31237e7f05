// SPDX-License-Identifier: MIT
/* The reference interpreter's helpers (interp_int.h): maps, ring buffers and the GPU's own
 * helpers, as the translated PTX does them for one thread. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ptx/interp_int.h"

/* A hash map's helper, as the GPU's (translate.h): one thread, so no slot is ever seen
 * being written. 0, or 2 for memory outside what the program may touch. */
static int hash_helper(struct vm *vm, const struct desc *m, int id, __u64 *r)
{
	size_t slot_size = bpf_hash_slot(m->extra, m->value_size),
	       vo = 8 + (((size_t)m->extra + 7) & ~(size_t)7);
	unsigned char *key = m->extra ? at(vm, r[2], m->extra) : NULL;
	__u32 h = 0x811c9dc5u, i;

	if (!key || slot_size > 4096)
		return 2;
	for (__u32 b = 0; b < m->extra; b++)
		h = (h ^ key[b]) * 16777619u;
	if (!m->max_entries) {
		r[0] = id == 1 ? 0 : id == 2 ? (__u64)-7 : (__u64)-2;
		return 0;
	}
	i = h % m->max_entries;
	for (__u32 n = 0; n < m->max_entries; n++, i = (i + 1) % m->max_entries) {
		unsigned char *s = at(vm, m->data + (__u64)i * slot_size, (unsigned int)slot_size);
		__u32 state;

		if (!s)
			return 2;
		memcpy(&state, s, 4);
		if (state == 2 && !memcmp(s + 8, key, m->extra)) {
			if (id == 1) {
				r[0] = (__u64)(uintptr_t)(s + vo);
			} else if (id == 3) {
				state = 3;
				memcpy(s, &state, 4);
				r[0] = 0;
			} else if (r[4] == 1) { /* BPF_NOEXIST */
				r[0] = (__u64)-17;
			} else {
				unsigned char *v = at(vm, r[3], m->value_size ? m->value_size : 1);

				if (!v)
					return 2;
				memcpy(s + vo, v, m->value_size);
				r[0] = 0;
			}
			return 0;
		}
		if (state == 0) { /* the key is not there */
			if (id == 1) {
				r[0] = 0;
			} else if (id == 3 || r[4] == 2) { /* (BPF_EXIST) */
				r[0] = (__u64)-2;
			} else {
				unsigned char *v = at(vm, r[3], m->value_size ? m->value_size : 1);

				if (!v)
					return 2;
				memcpy(s + 8, key, m->extra);
				memcpy(s + vo, v, m->value_size);
				state = 2;
				memcpy(s, &state, 4);
				r[0] = 0;
			}
			return 0;
		}
	}
	r[0] = id == 1 ? 0 : id == 2 ? (__u64)-7 : (__u64)-2;
	return 0;
}

/*
 * bpf_ringbuf_output, as the GPU's (translate.h) for one thread. The ring and its tail are
 * the interpreter's own (the map's), never what the control block says: the program can
 * write that. 0, or 2 for memory outside what the program may touch.
 */
static int ring_write(struct vm *vm, const struct bpf_gpu_env *env, __u64 map,
		      const unsigned char *data, __u64 size, __u64 *r0);

static int ring_output(struct vm *vm, const struct bpf_gpu_env *env, __u64 map, __u64 data,
		       __u64 size, __u64 *r0)
{
	unsigned char buf[GS_RING_REC_MAX] = { 0 }, *d = at(vm, map, sizeof(struct desc));
	struct desc dc;

	/* (the map and the size first, as the GPU's checks them before reading) */
	if (!d)
		return 2;
	memcpy(&dc, d, sizeof(dc));
	if (dc.kind != GS_MAP_RING || size > GS_RING_REC_MAX)
		return ring_write(vm, env, map, buf, size, r0);
	for (__u64 i = 0; i < size; i++) {
		const unsigned char *p = at(vm, data + i, 1);

		if (!p)
			return 2;
		buf[i] = *p;
	}
	return ring_write(vm, env, map, buf, size, r0);
}

/* A printing call's record (translate.h) into ring map `ring`. */
static int print_output(struct vm *vm, const struct bpf_gpu_env *env, int id, int ring, __u64 *r)
{
	unsigned char rec[GS_RING_REC_MAX] = { 0 };
	__u32 len = 0,
	      max = id == GS_BPF_TRACE_PRINTK && r[2] < GS_PRINT_TEXT ? (__u32)r[2] : GS_PRINT_TEXT;
	__u64 args[3] = { r[3], r[4], r[5] };

	if (ring < 1 || (size_t)ring > vm->nmaps)
		return 1;
	if (id == GS_BPF_PUTS)
		memset(args, 0, sizeof(args));
	for (; len < max; len++) {
		const unsigned char *p = at(vm, r[1] + len, 1);

		if (!p)
			return 2;
		if (!*p)
			break;
		rec[GS_PRINT_HDR + len] = *p;
	}
	memcpy(rec, &(__u32){ (__u32)id }, 4);
	memcpy(rec + 4, &len, 4);
	memcpy(rec + 8, args, sizeof(args));
	return ring_write(vm, env, (__u64)(uintptr_t)&vm->descs[ring - 1], rec, GS_PRINT_HDR + len,
			  &r[0]);
}

/* The ring's part of bpf_ringbuf_output: data (size bytes, the interpreter's copy). */
static int ring_write(struct vm *vm, const struct bpf_gpu_env *env, __u64 map,
		      const unsigned char *data, __u64 size, __u64 *r0)
{
	unsigned char *d = at(vm, map, sizeof(struct desc));
	const struct bpf_map_mem *m = NULL;
	__u64 ctl[5], need, mask, pos, w;
	struct desc dc;

	if (!d)
		return 2;
	memcpy(&dc, d, sizeof(dc));
	if (dc.kind != GS_MAP_RING) {
		*r0 = (__u64)-22;
		return 0;
	}
	if (size > GS_RING_REC_MAX) {
		*r0 = (__u64)-7;
		return 0;
	}
	for (size_t i = 0; i < vm->nmaps; i++)
		if (map == (__u64)(uintptr_t)&vm->descs[i])
			m = &vm->maps[i];
	if (!m || m->kind != GS_MAP_RING || !m->data || !m->ring || !m->tail ||
	    m->extra < GS_RING_MIN || (m->extra & (m->extra - 1)))
		return 2;
	memcpy(ctl, m->data, sizeof(ctl));
	need = (GS_RING_HDR + size + 7) & ~7ULL;
	mask = m->extra - 1;
	ctl[4] = *m->tail;
	if (ctl[0] - ctl[4] + need > m->extra) {
		ctl[1]++;
		memcpy(m->data, ctl, sizeof(ctl));
		*r0 = (__u64)-11;
		return 0;
	}
	pos = ctl[0];
	ctl[0] += need;
	memcpy(m->data, ctl, sizeof(ctl));
	memcpy(m->ring + ((pos + 8) & mask), &env->globaltimer, 8);
	for (__u64 off = 0; off < size; off += 8) {
		w = 0;
		for (__u64 b = 0; b < 8 && off + b < size; b++)
			w |= (__u64)data[off + b] << (8 * b);
		memcpy(m->ring + ((pos + GS_RING_HDR + off) & mask), &w, 8);
	}
	w = size | 1ULL << 32;
	memcpy(m->ring + (pos & mask), &w, 8);
	*r0 = 0;
	return 0;
}

int bpf_vm_helper(struct vm *vm, const struct bpf_gpu_env *env, int id, int off, __u64 *r)
{
	const unsigned int *v = id == GS_BPF_BLOCK_IDX	  ? env->ctaid
				: id == GS_BPF_BLOCK_DIM  ? env->ntid
				: id == GS_BPF_THREAD_IDX ? env->tid
							  : env->nctaid;

	if (env->host && id >= GS_BPF_GLOBALTIMER && id <= GS_BPF_WARP_MAX)
		return 1; /* (the GPU's) */
	switch (id) {
	case 5: /* bpf_ktime_get_ns, a host program's */
		if (!env->host)
			return 1;
		r[0] = env->globaltimer;
		return 0;
	case GS_BPF_TRACE_PRINTK:
	case GS_BPF_PUTS:
		return print_output(vm, env, id, off, r);
	case GS_BPF_RING_OUTPUT:
		return ring_output(vm, env, r[1], r[2], r[3], &r[0]);
	case GS_BPF_PERF_OUTPUT:
		return ring_output(vm, env, r[2], r[4], r[5], &r[0]);
	case 1:
	case 2:
	case 3: {
		/* Array maps: r1 a descriptor, r2 the key's address. */
		unsigned char *d = at(vm, r[1], sizeof(struct desc)), *k = at(vm, r[2], 4), *slot;
		struct desc m;
		__u64 elem, t;
		__u32 key;

		if (!d)
			return 2;
		memcpy(&m, d, sizeof(m));
		if (m.kind == GS_MAP_HASH)
			return hash_helper(vm, &m, id, r);
		if (!k)
			return 2;
		key = (__u32)load(k, 4);
		if (id == 3) {
			r[0] = (__u64)-22;
			return 0;
		}
		elem = key;
		t = 0;
		if (m.kind == GS_MAP_PER_THREAD) { /* the thread's index in the launch */
			t = ((__u64)(env->ctaid[2] * env->nctaid[1] + env->ctaid[1]) *
				     env->nctaid[0] +
			     env->ctaid[0]) *
				    ((__u64)env->ntid[0] * env->ntid[1] * env->ntid[2]) +
			    (__u64)(env->tid[2] * env->ntid[1] + env->tid[1]) * env->ntid[0] +
			    env->tid[0];
			elem = key * (__u64)m.extra + t; /* (key-major: translate.h) */
		}
		if (key >= m.max_entries || (m.kind == GS_MAP_PER_THREAD && t >= m.extra)) {
			r[0] = id == 1 ? 0 : (__u64)-7;
			return 0;
		}
		slot = at(vm, m.data + elem * m.value_size, m.value_size ? m.value_size : 1);
		if (!slot)
			return 2;
		if (id == 1) {
			r[0] = (__u64)(uintptr_t)slot;
			return 0;
		}
		if (r[4] == 1) { /* BPF_NOEXIST: an array's elements always exist */
			r[0] = (__u64)-17;
			return 0;
		}
		for (__u32 i = 0; i < m.value_size; i++) {
			unsigned char *src = at(vm, r[3] + i, 1);

			if (!src)
				return 2;
			slot[i] = *src;
		}
		r[0] = 0;
		return 0;
	}
	case GS_BPF_GLOBALTIMER:
		r[0] = env->globaltimer;
		return 0;
	case GS_BPF_BLOCK_IDX:
	case GS_BPF_BLOCK_DIM:
	case GS_BPF_THREAD_IDX:
	case GS_BPF_GRID_DIM:
		for (int k = 0; k < 3; k++) {
			unsigned char *p = at(vm, r[k + 1], 8);

			if (!p)
				return 2;
			store(p, 8, v[k]);
		}
		r[0] = 0;
		return 0;
	case GS_BPF_MEMBAR:
	case GS_BPF_PREFETCH_L2:
		r[0] = 0;
		return 0;
	case GS_BPF_EXIT:
		return 3;
	case GS_BPF_SM_ID:
		r[0] = env->smid;
		return 0;
	case GS_BPF_WARP_ID:
		r[0] = env->warpid;
		return 0;
	case GS_BPF_LANE_ID:
		r[0] = env->laneid;
		return 0;
	case GS_BPF_PID_TGID:
		r[0] = env->pid_tgid;
		return 0;
	case GS_BPF_DEVICE:
		r[0] = env->device;
		return 0;
	case GS_BPF_ACTIVE_MASK:
		r[0] = env->activemask;
		return 0;
	case GS_BPF_WARP_UNIQUE: /* (a warp whose active lanes all hold this lane's value) */
		r[0] = 1;
		return 0;
	case GS_BPF_WARP_MATCH_COUNT:
		r[0] = (unsigned int)__builtin_popcount(env->activemask);
		return 0;
	case GS_BPF_WARP_SUM:
		r[0] = r[1] * (unsigned int)__builtin_popcount(env->activemask);
		return 0;
	case GS_BPF_WARP_MAX:
		r[0] = r[1];
		return 0;
	case GS_BPF_WARP_MATCH_LEADER:
		r[0] = env->activemask &&
		       (unsigned int)__builtin_ctz(env->activemask) == env->laneid;
		return 0;
	}
	return 1;
}
