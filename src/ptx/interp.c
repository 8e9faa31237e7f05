// SPDX-License-Identifier: MIT
/*
 * The reference eBPF interpreter (see translate.h): the semantics the translated PTX must
 * have, on the CPU. Memory is the context and the stack only, every access checked.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ptx/interp_int.h"

#define CLASS(c) ((c)&0x07)
#define OP(c)	 ((c)&0xf0)
#define SRC(c)	 ((c)&0x08)
#define SIZE(c)	 ((c)&0x18)
#define MODE(c)	 ((c)&0xe0)
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
				int h = bpf_vm_helper(&vm, env, in->imm, in->off, r);

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
			    in->dst_reg == 10 ||
			    (in->src_reg && in->src_reg != BPF_PSEUDO_MAP_IDX &&
			     in->src_reg != BPF_PSEUDO_MAP_VALUE))
				goto refuse;
			if (in->src_reg == BPF_PSEUDO_MAP_VALUE) {
				if (in->imm < 0 || (size_t)in->imm >= vm.rodata_len)
					goto refuse;
				r[in->dst_reg] = (__u64)(uintptr_t)(vm.rodata + in->imm);
			} else if (in->src_reg == BPF_PSEUDO_MAP_IDX) {
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
	if (env && env->rodata) {
		vm.rodata = env->rodata;
		vm.rodata_len = env->rodata_len;
	}
	return run(&vm, insns, n, env ? env : &none, max_steps, ret, err, errlen);
}
