// SPDX-License-Identifier: MIT
/*
 * The reference eBPF interpreter (see translate.h): the semantics the translated PTX must
 * have, on the CPU. Memory is the context and the stack only, every access checked.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ptx/translate.h"

#define CLASS(c) ((c)&0x07)
#define OP(c)	 ((c)&0xf0)
#define SRC(c)	 ((c)&0x08)
#define SIZE(c)	 ((c)&0x18)
#define MODE(c)	 ((c)&0xe0)

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
	struct desc *descs; /* as the GPU's gs_maps table has them */
};

static bool within(__u64 addr, unsigned int w, __u64 base, size_t size)
{
	return size >= w && addr >= base && addr - base <= size - w;
}

static unsigned int width(unsigned int code)
{
	switch (SIZE(code)) {
	case BPF_B:
		return 1;
	case BPF_H:
		return 2;
	case BPF_W:
		return 4;
	default:
		return 8;
	}
}

/* Where [addr, addr + w) is in the stack or the context, else NULL. */
static unsigned char *at(struct vm *vm, __u64 addr, unsigned int w)
{
	__u64 s = (__u64)(uintptr_t)vm->stack, c = (__u64)(uintptr_t)vm->ctx;

	/* (w is the program's to choose through a map's descriptor, which it can write:
	 * never larger than the region it is checked against) */
	if (w <= BPF_STACK_BYTES && addr >= s && addr - s <= BPF_STACK_BYTES - w)
		return (unsigned char *)(uintptr_t)addr;
	if (vm->ctx && vm->ctx_size >= w && addr >= c && addr - c <= vm->ctx_size - w)
		return (unsigned char *)(uintptr_t)addr;
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

static __u64 load(const unsigned char *p, unsigned int w)
{
	__u64 v = 0;

	memcpy(&v, p, w); /* (little-endian) */
	return v;
}

static void store(unsigned char *p, unsigned int w, __u64 v)
{
	memcpy(p, &v, w);
}

static __u64 swap(__u64 v, int bits)
{
	__u64 r = 0;

	for (int i = 0; i < bits / 8; i++)
		r |= ((v >> (8 * i)) & 0xff) << (bits - 8 - 8 * i);
	return r;
}

static __u64 alu(unsigned int op, __u64 a, __u64 b, bool wide, bool *bad)
{
	if (!wide) {
		__u32 x = (__u32)a, y = (__u32)b;

		switch (op) {
		case BPF_ADD:
			return (__u32)(x + y);
		case BPF_SUB:
			return (__u32)(x - y);
		case BPF_MUL:
			return (__u32)(x * y);
		case BPF_DIV:
			return y ? x / y : 0;
		case BPF_MOD:
			return y ? x % y : x;
		case BPF_OR:
			return x | y;
		case BPF_AND:
			return x & y;
		case BPF_XOR:
			return x ^ y;
		case BPF_LSH:
			return (__u32)(x << (y & 31));
		case BPF_RSH:
			return x >> (y & 31);
		case BPF_ARSH:
			return (__u32)((__s32)x >> (y & 31));
		case BPF_NEG: /* (two's complement: the most negative value negates to itself) */
			return (__u32)(0u - x);
		case BPF_MOV:
			return y;
		}
		*bad = true;
		return 0;
	}
	switch (op) {
	case BPF_ADD:
		return a + b;
	case BPF_SUB:
		return a - b;
	case BPF_MUL:
		return a * b;
	case BPF_DIV:
		return b ? a / b : 0;
	case BPF_MOD:
		return b ? a % b : a;
	case BPF_OR:
		return a | b;
	case BPF_AND:
		return a & b;
	case BPF_XOR:
		return a ^ b;
	case BPF_LSH:
		return a << (b & 63);
	case BPF_RSH:
		return a >> (b & 63);
	case BPF_ARSH:
		return (__u64)((__s64)a >> (b & 63));
	case BPF_NEG:
		return 0ull - a;
	case BPF_MOV:
		return b;
	}
	*bad = true;
	return 0;
}

static bool taken(unsigned int op, __u64 a, __u64 b, bool wide)
{
	if (!wide) {
		a = (__u32)a;
		b = (__u32)b;
	}
	switch (op) {
	case BPF_JEQ:
		return a == b;
	case BPF_JNE:
		return a != b;
	case BPF_JGT:
		return a > b;
	case BPF_JGE:
		return a >= b;
	case BPF_JLT:
		return a < b;
	case BPF_JLE:
		return a <= b;
	case BPF_JSET:
		return (a & b) != 0;
	}
	if (wide) {
		__s64 x = (__s64)a, y = (__s64)b;

		return op == BPF_JSGT	? x > y
		       : op == BPF_JSGE ? x >= y
		       : op == BPF_JSLT ? x < y
					: x <= y;
	}
	{
		__s32 x = (__s32)a, y = (__s32)b;

		return op == BPF_JSGT	? x > y
		       : op == BPF_JSGE ? x >= y
		       : op == BPF_JSLT ? x < y
					: x <= y;
	}
}

static int run(struct vm *vmp, const struct bpf_insn *insns, size_t n,
	       const struct bpf_gpu_env *env, unsigned long long max_steps, unsigned long long *ret,
	       char *err, size_t errlen);

/* A GPU helper, as the PTX does it for the thread env describes. 0, 1 refused, 2 memory,
 * 3 the thread ended. */
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
static int ring_output(struct vm *vm, const struct bpf_gpu_env *env, __u64 map, __u64 data,
		       __u64 size, __u64 *r0)
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
	for (__u64 i = 0; i < size; i++)
		if (!at(vm, data + i, 1))
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
			w |= (__u64)*at(vm, data + off + b, 1) << (8 * b);
		memcpy(m->ring + ((pos + GS_RING_HDR + off) & mask), &w, 8);
	}
	w = size | 1ULL << 32;
	memcpy(m->ring + (pos & mask), &w, 8);
	*r0 = 0;
	return 0;
}

static int helper(struct vm *vm, const struct bpf_gpu_env *env, int id, __u64 *r)
{
	const unsigned int *v = id == GS_BPF_BLOCK_IDX	  ? env->ctaid
				: id == GS_BPF_BLOCK_DIM  ? env->ntid
				: id == GS_BPF_THREAD_IDX ? env->tid
							  : env->nctaid;

	switch (id) {
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
			elem += t * m.max_entries;
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

int bpf_interp(const struct bpf_insn *insns, size_t n, void *ctx, size_t ctx_size,
	       const struct bpf_gpu_env *env, const struct bpf_map_mem *maps, size_t nmaps,
	       unsigned long long max_steps, unsigned long long *ret, char *err, size_t errlen)
{
	static const struct bpf_gpu_env none;
	struct vm vm = { .ctx = ctx, .ctx_size = ctx_size, .maps = maps, .nmaps = nmaps };
	struct desc descs[64];

	if (nmaps > 64) {
		snprintf(err, errlen, "more than 64 maps");
		return -1;
	}
	for (size_t i = 0; i < nmaps; i++)
		descs[i] = (struct desc){ (__u64)(uintptr_t)maps[i].data, maps[i].value_size,
					  maps[i].max_entries, maps[i].kind, maps[i].extra };
	vm.descs = descs;
	return run(&vm, insns, n, env ? env : &none, max_steps, ret, err, errlen);
}

static int run(struct vm *vmp, const struct bpf_insn *insns, size_t n,
	       const struct bpf_gpu_env *env, unsigned long long max_steps, unsigned long long *ret,
	       char *err, size_t errlen)
{
	struct vm vm = *vmp;
	__u64 r[11] = { 0 };
	size_t pc = 0;

	r[1] = (__u64)(uintptr_t)vm.ctx;
	r[10] = (__u64)(uintptr_t)vm.stack + BPF_STACK_BYTES;
	for (unsigned long long steps = 0;; steps++) {
		const struct bpf_insn *in;
		unsigned int c, op;
		bool bad = false;
		__u64 b;
		unsigned char *p;

		if (pc >= n) {
			snprintf(err, errlen, "fell off the end at %zu", pc);
			return -1;
		}
		if (steps == max_steps) {
			snprintf(err, errlen, "more than %llu instructions run", max_steps);
			return -1;
		}
		in = &insns[pc];
		c = CLASS(in->code);
		op = OP(in->code);
		if (in->dst_reg > 10 || in->src_reg > 10) {
			snprintf(err, errlen, "instruction %zu: register beyond r10", pc);
			return -1;
		}
		b = SRC(in->code) == BPF_X ? r[in->src_reg] : (__u64)(__s64)in->imm;
		switch (c) {
		case BPF_ALU64:
		case BPF_ALU:
			if (in->dst_reg == 10 || in->off)
				goto refuse;
			if (op == BPF_END) {
				if (c == BPF_ALU64 ||
				    (in->imm != 16 && in->imm != 32 && in->imm != 64))
					goto refuse;
				r[in->dst_reg] =
					SRC(in->code) == BPF_TO_LE
						? (in->imm == 64 ? r[in->dst_reg]
								 : r[in->dst_reg] &
									   ((1ULL << in->imm) - 1))
						: swap(r[in->dst_reg], in->imm);
				break;
			}
			r[in->dst_reg] = alu(op, r[in->dst_reg], b, c == BPF_ALU64, &bad);
			if (bad)
				goto refuse;
			break;
		case BPF_JMP:
		case BPF_JMP32:
			if (op == BPF_EXIT && c == BPF_JMP) {
				*ret = r[0];
				return 0;
			}
			if (op == BPF_CALL && c == BPF_JMP && !in->src_reg) {
				int h = helper(&vm, env, in->imm, r);

				if (h == 1)
					goto refuse;
				if (h == 2)
					goto memory;
				if (h == 3) { /* (the thread ended: no result) */
					*ret = 0;
					return 0;
				}
				break;
			}
			if (op == BPF_CALL || op == BPF_EXIT || op >= 0xe0 ||
			    (c == BPF_JMP32 && op == BPF_JA))
				goto refuse;
			if (op == BPF_JA || taken(op, r[in->dst_reg], b, c == BPF_JMP)) {
				long long to = (long long)pc + 1 + in->off;

				if (to < 0 || to >= (long long)n)
					goto refuse;
				pc = (size_t)to;
				continue;
			}
			break;
		case BPF_LDX:
			if (MODE(in->code) != BPF_MEM || in->dst_reg == 10)
				goto refuse;
			p = at(&vm, r[in->src_reg] + (__u64)(__s64)in->off, width(in->code));
			if (!p)
				goto memory;
			r[in->dst_reg] = load(p, width(in->code));
			break;
		case BPF_ST:
		case BPF_STX:
			p = at(&vm, r[in->dst_reg] + (__u64)(__s64)in->off, width(in->code));
			if (MODE(in->code) == BPF_ATOMIC && c == BPF_STX) {
				unsigned int w = width(in->code);
				__u64 old, v = r[in->src_reg], m = w == 8 ? ~0ULL : 0xffffffffULL;

				if ((w != 4 && w != 8) || !p)
					goto memory;
				old = load(p, w);
				switch (in->imm) {
				case BPF_CMPXCHG:
					if (old == (r[0] & m))
						store(p, w, v);
					r[0] = old;
					pc++;
					continue;
				case BPF_XCHG:
					store(p, w, v);
					r[in->src_reg] = old;
					pc++;
					continue;
				}
				switch (in->imm & ~BPF_FETCH) {
				case BPF_ADD:
					store(p, w, (old + v) & m);
					break;
				case BPF_OR:
					store(p, w, old | (v & m));
					break;
				case BPF_AND:
					store(p, w, old & v);
					break;
				case BPF_XOR:
					store(p, w, old ^ (v & m));
					break;
				default:
					goto refuse;
				}
				if (in->imm & BPF_FETCH) {
					if (in->src_reg == 10)
						goto refuse;
					r[in->src_reg] = old;
				}
				break;
			}
			if (MODE(in->code) != BPF_MEM)
				goto refuse;
			if (!p)
				goto memory;
			store(p, width(in->code),
			      c == BPF_ST ? (__u64)(__s64)in->imm : r[in->src_reg]);
			break;
		case BPF_LD:
			if (in->code != (BPF_LD | BPF_IMM | BPF_DW) || pc + 1 >= n ||
			    in->dst_reg == 10 || (in->src_reg && in->src_reg != BPF_PSEUDO_MAP_IDX))
				goto refuse;
			if (in->src_reg == BPF_PSEUDO_MAP_IDX) {
				if (in->imm < 0 || (size_t)in->imm >= vm.nmaps)
					goto refuse;
				r[in->dst_reg] = (__u64)(uintptr_t)&vm.descs[in->imm];
			} else {
				r[in->dst_reg] = (__u64)(__u32)in->imm |
						 (__u64)(__u32)insns[pc + 1].imm << 32;
			}
			pc += 2;
			continue;
		default:
			goto refuse;
		}
		pc++;
	}
refuse:
	snprintf(err, errlen, "instruction %zu (opcode 0x%02x): not supported", pc, insns[pc].code);
	return -1;
memory:
	snprintf(err, errlen,
		 "instruction %zu (opcode 0x%02x): memory access outside the stack and "
		 "the context",
		 pc, insns[pc].code);
	return -1;
}
