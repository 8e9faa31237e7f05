// SPDX-License-Identifier: MIT
/* eBPF to PTX (see translate.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/util.h"
#include "ptx/translate.h"
#include "ptx/translate_int.h"

#define CLASS(c) ((c)&0x07)
#define OP(c)	 ((c)&0xf0)
#define SRC(c)	 ((c)&0x08)
#define SIZE(c)	 ((c)&0x18)
#define MODE(c)	 ((c)&0xe0)

static const char *const size_type[4] = {
	[BPF_W >> 3] = "u32", [BPF_H >> 3] = "u16", [BPF_B >> 3] = "u8", [BPF_DW >> 3] = "u64"
};

static int refuse(char *err, size_t errlen, size_t i, const struct bpf_insn *in, const char *why)
{
	snprintf(err, errlen, "instruction %zu (opcode 0x%02x): %s", i, in->code, why);
	return -1;
}

/* The second operand of an ALU or jump instruction: a register or the immediate. */
static void operand64(char *buf, size_t n, const struct bpf_insn *in)
{
	if (SRC(in->code) == BPF_X)
		snprintf(buf, n, "%%r%u", in->src_reg);
	else
		snprintf(buf, n, "%lld", (long long)in->imm);
}

/* Checks that need no output: registers, jump targets, what is not supported. */
static int check(const struct bpf_insn *insns, size_t n, bool *target, char *err, size_t errlen)
{
	if (!n)
		return snprintf(err, errlen, "an empty program"), -1;
	for (size_t i = 0; i < n; i++) {
		const struct bpf_insn *in = &insns[i];
		unsigned int c = CLASS(in->code);

		if (in->dst_reg > 10 || in->src_reg > 10)
			return refuse(err, errlen, i, in, "register beyond r10");
		switch (c) {
		case BPF_ALU:
		case BPF_ALU64:
			if (in->dst_reg == 10)
				return refuse(err, errlen, i, in, "writes r10 (the frame pointer)");
			if (OP(in->code) == 0xe0 || OP(in->code) == 0xf0)
				return refuse(err, errlen, i, in, "unknown ALU operation");
			if (in->off && (OP(in->code) == BPF_DIV || OP(in->code) == BPF_MOD))
				return refuse(err, errlen, i, in,
					      "signed division (ISA v4) is not supported");
			if (in->off && OP(in->code) == BPF_MOV)
				return refuse(err, errlen, i, in,
					      "sign-extending move (ISA v4) is not supported");
			if (OP(in->code) == BPF_END &&
			    (c == BPF_ALU64 || (in->imm != 16 && in->imm != 32 && in->imm != 64)))
				return refuse(err, errlen, i, in, "byte swap of an unknown width");
			break;
		case BPF_JMP:
		case BPF_JMP32:
			if (OP(in->code) == BPF_CALL) {
				if (c == BPF_JMP32)
					return refuse(err, errlen, i, in, "unknown jump");
				if (in->src_reg == BPF_PSEUDO_CALL)
					return refuse(
						err, errlen, i, in,
						"calls to other eBPF functions are not supported");
				if (!bpf_gpu_helper(in->imm)) {
					snprintf(
						err, errlen,
						"instruction %zu (opcode 0x%02x): helper %d has no "
						"GPU version%s",
						i, in->code, in->imm,
						in->imm >= 131 && in->imm <= 134
							? " (bpf_ringbuf_reserve/submit/discard/"
							  "query: use bpf_ringbuf_output)"
							: "");
					return -1;
				}
				if ((in->imm == GS_BPF_TRACE_PRINTK || in->imm == GS_BPF_PUTS) &&
				    (in->off < 1 || in->off > 1024))
					return refuse(err, errlen, i, in,
						      "a printing call without its ring (read the "
						      "object with bpfobj, which adds one)");
				break;
			}
			if (OP(in->code) == BPF_EXIT) {
				if (c == BPF_JMP32)
					return refuse(err, errlen, i, in, "unknown jump");
				break;
			}
			if (OP(in->code) == 0xe0 || OP(in->code) == 0xf0)
				return refuse(err, errlen, i, in, "unknown jump");
			if (c == BPF_JMP32 && OP(in->code) == BPF_JA)
				return refuse(err, errlen, i, in,
					      "long jump (ISA v4) is not supported");
			if ((long long)i + 1 + in->off < 0 ||
			    (long long)i + 1 + in->off >= (long long)n)
				return refuse(err, errlen, i, in, "jumps out of the program");
			target[i + 1 + in->off] = true;
			break;
		case BPF_LDX:
			if (MODE(in->code) != BPF_MEM)
				return refuse(err, errlen, i, in,
					      "only plain loads (no sign-extending ones)");
			if (in->dst_reg == 10)
				return refuse(err, errlen, i, in, "writes r10 (the frame pointer)");
			break;
		case BPF_ST:
			if (MODE(in->code) != BPF_MEM)
				return refuse(err, errlen, i, in, "unknown store");
			break;
		case BPF_STX:
			if (MODE(in->code) == BPF_ATOMIC) {
				int op = in->imm;

				if (SIZE(in->code) != BPF_W && SIZE(in->code) != BPF_DW)
					return refuse(err, errlen, i, in,
						      "atomic of a byte or half");
				if (op != BPF_ADD && op != BPF_OR && op != BPF_AND &&
				    op != BPF_XOR && op != (BPF_ADD | BPF_FETCH) &&
				    op != (BPF_OR | BPF_FETCH) && op != (BPF_AND | BPF_FETCH) &&
				    op != (BPF_XOR | BPF_FETCH) && op != BPF_XCHG &&
				    op != BPF_CMPXCHG)
					return refuse(err, errlen, i, in,
						      "unknown atomic operation");
				if ((op & BPF_FETCH) && op != BPF_CMPXCHG && in->src_reg == 10)
					return refuse(err, errlen, i, in,
						      "writes r10 (the frame pointer)");
				break;
			}
			if (MODE(in->code) != BPF_MEM)
				return refuse(err, errlen, i, in, "unknown store");
			break;
		case BPF_LD:
			if (in->code != (BPF_LD | BPF_IMM | BPF_DW))
				return refuse(
					err, errlen, i, in,
					"legacy packet loads (BPF_ABS/BPF_IND) are not supported");
			if (in->src_reg && in->src_reg != BPF_PSEUDO_MAP_IDX &&
			    in->src_reg != BPF_PSEUDO_MAP_VALUE)
				return refuse(
					err, errlen, i, in,
					"pseudo references other than maps and read-only data are "
					"not supported");
			if (in->src_reg == BPF_PSEUDO_MAP_VALUE &&
			    (in->imm < 0 || (__u32)in->imm >= GS_RODATA_MAX))
				return refuse(err, errlen, i, in,
					      "read-only data offset out of range");
			if (in->src_reg == BPF_PSEUDO_MAP_IDX && (in->imm < 0 || in->imm >= 1024))
				return refuse(err, errlen, i, in, "map index out of range");
			if (in->dst_reg == 10)
				return refuse(err, errlen, i, in, "writes r10 (the frame pointer)");
			if (i + 1 >= n || insns[i + 1].code)
				return refuse(err, errlen, i, in,
					      "64-bit immediate without its second half");
			i++; /* (the second half is not an instruction) */
			break;
		}
	}
	for (size_t i = 0; i + 1 < n; i++)
		if (insns[i].code == (BPF_LD | BPF_IMM | BPF_DW)) {
			if (target[i + 1])
				return refuse(err, errlen, i + 1, &insns[i + 1],
					      "a jump lands in the middle of a 64-bit immediate");
			i++;
		}
	{
		const struct bpf_insn *last = &insns[n - 1];
		unsigned int c = CLASS(last->code);

		if (!((c == BPF_JMP && (OP(last->code) == BPF_EXIT || OP(last->code) == BPF_JA))))
			return refuse(err, errlen, n - 1, last, "the program falls off its end");
	}
	return 0;
}

static const char *alu_name(unsigned int op, bool wide)
{
	switch (op) {
	case BPF_ADD:
		return wide ? "add.s64" : "add.s32";
	case BPF_SUB:
		return wide ? "sub.s64" : "sub.s32";
	case BPF_MUL:
		return wide ? "mul.lo.u64" : "mul.lo.u32";
	case BPF_OR:
		return wide ? "or.b64" : "or.b32";
	case BPF_AND:
		return wide ? "and.b64" : "and.b32";
	case BPF_XOR:
		return wide ? "xor.b64" : "xor.b32";
	default:
		return NULL;
	}
}

static void alu64(struct strbuf *o, const struct bpf_insn *in)
{
	unsigned int op = OP(in->code), d = in->dst_reg;
	char b[32];

	operand64(b, sizeof(b), in);
	switch (op) {
	case BPF_MOV:
		sb_printf(o, "\tmov.b64 %%r%u, %s;\n", d, b);
		return;
	case BPF_NEG:
		sb_printf(o, "\tneg.s64 %%r%u, %%r%u;\n", d, d);
		return;
	case BPF_DIV:
	case BPF_MOD:
		/* x / 0 = 0, x % 0 = x, as the kernel has it. */
		sb_printf(o, "\tmov.b64 %%t0, %s;\n\tsetp.eq.u64 %%p0, %%t0, 0;\n", b);
		if (op == BPF_DIV)
			sb_printf(
				o,
				"\t@%%p0 mov.b64 %%r%u, 0;\n\t@!%%p0 div.u64 %%r%u, %%r%u, %%t0;\n",
				d, d, d);
		else
			sb_printf(o, "\t@!%%p0 rem.u64 %%r%u, %%r%u, %%t0;\n", d, d);
		return;
	case BPF_LSH:
	case BPF_RSH:
	case BPF_ARSH:
		sb_printf(o,
			  "\tmov.b64 %%t0, %s;\n\tcvt.u32.u64 %%w0, %%t0;\n\tand.b32 %%w0, %%w0, "
			  "63;\n",
			  b);
		sb_printf(o, "\t%s %%r%u, %%r%u, %%w0;\n",
			  op == BPF_LSH	  ? "shl.b64"
			  : op == BPF_RSH ? "shr.u64"
					  : "shr.s64",
			  d, d);
		return;
	default:
		sb_printf(o, "\t%s %%r%u, %%r%u, %s;\n", alu_name(op, true), d, d, b);
	}
}

static void alu32(struct strbuf *o, const struct bpf_insn *in)
{
	unsigned int op = OP(in->code), d = in->dst_reg;

	/* %w1 = dst, %w2 = src (low halves); the result zero-extended into dst. */
	sb_printf(o, "\tcvt.u32.u64 %%w1, %%r%u;\n", d);
	if (SRC(in->code) == BPF_X)
		sb_printf(o, "\tcvt.u32.u64 %%w2, %%r%u;\n", in->src_reg);
	else
		sb_printf(o, "\tmov.b32 %%w2, %d;\n", in->imm);
	switch (op) {
	case BPF_MOV:
		sb_printf(o, "\tmov.b32 %%w1, %%w2;\n");
		break;
	case BPF_NEG:
		sb_printf(o, "\tneg.s32 %%w1, %%w1;\n");
		break;
	case BPF_DIV:
	case BPF_MOD:
		sb_printf(o, "\tsetp.eq.u32 %%p0, %%w2, 0;\n");
		if (op == BPF_DIV)
			sb_printf(o,
				  "\t@%%p0 mov.b32 %%w1, 0;\n\t@!%%p0 div.u32 %%w1, %%w1, %%w2;\n");
		else
			sb_printf(o, "\t@!%%p0 rem.u32 %%w1, %%w1, %%w2;\n");
		break;
	case BPF_LSH:
	case BPF_RSH:
	case BPF_ARSH:
		sb_printf(o, "\tand.b32 %%w2, %%w2, 31;\n\t%s %%w1, %%w1, %%w2;\n",
			  op == BPF_LSH	  ? "shl.b32"
			  : op == BPF_RSH ? "shr.u32"
					  : "shr.s32");
		break;
	case BPF_END:
		if (SRC(in->code) == BPF_TO_LE) { /* (little-endian: a truncation) */
			if (in->imm == 64) {
				return; /* unchanged */
			}
			if (in->imm == 16)
				sb_printf(o, "\tand.b32 %%w1, %%w1, 65535;\n");
			break;
		}
		if (in->imm == 16) {
			sb_printf(o, "\tprmt.b32 %%w1, %%w1, 0, 0x4401;\n");
		} else if (in->imm == 32) {
			sb_printf(o, "\tprmt.b32 %%w1, %%w1, 0, 0x0123;\n");
		} else {
			sb_printf(o,
				  "\tmov.b64 {%%w1, %%w2}, %%r%u;\n"
				  "\tprmt.b32 %%w1, %%w1, 0, 0x0123;\n"
				  "\tprmt.b32 %%w2, %%w2, 0, 0x0123;\n"
				  "\tmov.b64 %%r%u, {%%w2, %%w1};\n",
				  d, d);
			return;
		}
		break;
	default:
		sb_printf(o, "\t%s %%w1, %%w1, %%w2;\n", alu_name(op, false));
	}
	sb_printf(o, "\tcvt.u64.u32 %%r%u, %%w1;\n", d);
}

static void jump(struct strbuf *o, const struct bpf_insn *in, size_t i)
{
	static const struct {
		unsigned int op;
		const char *cmp, *type;
	} cmps[] = {
		{ BPF_JEQ, "eq", "u" },	 { BPF_JNE, "ne", "u" },  { BPF_JGT, "gt", "u" },
		{ BPF_JGE, "ge", "u" },	 { BPF_JLT, "lt", "u" },  { BPF_JLE, "le", "u" },
		{ BPF_JSGT, "gt", "s" }, { BPF_JSGE, "ge", "s" }, { BPF_JSLT, "lt", "s" },
		{ BPF_JSLE, "le", "s" },
	};
	bool wide = CLASS(in->code) == BPF_JMP;
	unsigned int op = OP(in->code);
	size_t to = i + 1 + (size_t)(long long)in->off;
	char b[32];

	if (op == BPF_JA) {
		sb_printf(o, "\tbra.uni L%zu;\n", to);
		return;
	}
	if (wide) {
		operand64(b, sizeof(b), in);
		sb_printf(o, "\tmov.b64 %%t0, %s;\n", b);
	} else {
		sb_printf(o, "\tcvt.u32.u64 %%w1, %%r%u;\n", in->dst_reg);
		if (SRC(in->code) == BPF_X)
			sb_printf(o, "\tcvt.u32.u64 %%w2, %%r%u;\n", in->src_reg);
		else
			sb_printf(o, "\tmov.b32 %%w2, %d;\n", in->imm);
	}
	if (op == BPF_JSET) {
		if (wide)
			sb_printf(o, "\tand.b64 %%t0, %%r%u, %%t0;\n\tsetp.ne.u64 %%p0, %%t0, 0;\n",
				  in->dst_reg);
		else
			sb_printf(o, "\tand.b32 %%w1, %%w1, %%w2;\n\tsetp.ne.u32 %%p0, %%w1, 0;\n");
	} else {
		for (size_t k = 0; k < sizeof(cmps) / sizeof(cmps[0]); k++)
			if (cmps[k].op == op) {
				if (wide)
					sb_printf(o, "\tsetp.%s.%s64 %%p0, %%r%u, %%t0;\n",
						  cmps[k].cmp, cmps[k].type, in->dst_reg);
				else
					sb_printf(o, "\tsetp.%s.%s32 %%p0, %%w1, %%w2;\n",
						  cmps[k].cmp, cmps[k].type);
			}
	}
	sb_printf(o, "\t@%%p0 bra L%zu;\n", to);
}
static void atomic(struct strbuf *o, const struct bpf_insn *in)
{
	bool wide = SIZE(in->code) == BPF_DW;
	int op = in->imm & ~BPF_FETCH;
	const char *name = op == BPF_ADD   ? "add"
			   : op == BPF_OR  ? "or"
			   : op == BPF_AND ? "and"
					   : "xor";
	const char *t = wide ? (op == BPF_ADD ? "u64" : "b64") : (op == BPF_ADD ? "u32" : "b32");

	sb_printf(o, "\tadd.s64 %%t1, %%r%u, %d;\n", in->dst_reg, in->off);
	if (wide)
		sb_printf(o, "\tmov.b64 %%t0, %%r%u;\n", in->src_reg);
	else
		sb_printf(o, "\tcvt.u32.u64 %%w2, %%r%u;\n", in->src_reg);
	if (in->imm == BPF_CMPXCHG) {
		/* r0 = old; stored if old == r0. */
		if (wide) {
			sb_printf(o, "\tatom.cas.b64 %%r0, [%%t1], %%r0, %%t0;\n");
		} else {
			sb_printf(o, "\tcvt.u32.u64 %%w1, %%r0;\n"
				     "\tatom.cas.b32 %%w1, [%%t1], %%w1, %%w2;\n"
				     "\tcvt.u64.u32 %%r0, %%w1;\n");
		}
		return;
	}
	if (in->imm == BPF_XCHG) {
		if (wide)
			sb_printf(o, "\tatom.exch.b64 %%r%u, [%%t1], %%t0;\n", in->src_reg);
		else
			sb_printf(o,
				  "\tatom.exch.b32 %%w1, [%%t1], %%w2;\n"
				  "\tcvt.u64.u32 %%r%u, %%w1;\n",
				  in->src_reg);
		return;
	}
	if (!(in->imm & BPF_FETCH)) {
		sb_printf(o, "\tred.%s.%s [%%t1], %s;\n", name, t, wide ? "%t0" : "%w2");
		return;
	}
	if (wide)
		sb_printf(o, "\tatom.%s.%s %%r%u, [%%t1], %%t0;\n", name, t, in->src_reg);
	else
		sb_printf(o, "\tatom.%s.%s %%w1, [%%t1], %%w2;\n\tcvt.u64.u32 %%r%u, %%w1;\n", name,
			  t, in->src_reg);
}

int bpf_to_ptx(const struct bpf_insn *insns, size_t n, const char *name, struct strbuf *out,
	       char *err, size_t errlen)
{
	bool *target = gs_calloc(n + 1, sizeof(*target));
	struct strbuf o = { 0 };

	if (!target) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (check(insns, n, target, err, errlen)) {
		free(target);
		return -1;
	}
	sb_printf(&o,
		  ".visible .func (.param .b64 ret) %s(.param .b64 ctx)\n"
		  "{\n"
		  "\t.reg .b64 %%r<11>;\n"
		  "\t.reg .b64 %%t<6>;\n"
		  "\t.reg .b32 %%w<8>;\n"
		  "\t.reg .pred %%p<3>;\n"
		  "\t.local .align 8 .b8 stack[%d];\n"
		  "\tld.param.u64 %%r1, [ctx];\n"
		  "\tmov.u64 %%r10, stack;\n"
		  "\tcvta.local.u64 %%r10, %%r10;\n"
		  "\tadd.s64 %%r10, %%r10, %d;\n",
		  name, BPF_STACK_BYTES, BPF_STACK_BYTES);
	for (size_t i = 0; i < n; i++)
		if (insns[i].code == (BPF_JMP | BPF_CALL) && !insns[i].src_reg &&
		    (insns[i].imm == GS_BPF_TRACE_PRINTK || insns[i].imm == GS_BPF_PUTS)) {
			/* (a printing call's record: translate.h) */
			sb_printf(&o, "\t.local .align 8 .b8 gs_pk[%d];\n", GS_RING_REC_MAX);
			break;
		}
	/* (Registers the program reads before writing are 0 here, on the CPU too.) */
	for (int r = 0; r <= 9; r++)
		if (r != 1)
			sb_printf(&o, "\tmov.b64 %%r%d, 0;\n", r);
	for (size_t i = 0; i < n; i++) {
		const struct bpf_insn *in = &insns[i];
		unsigned int c = CLASS(in->code);

		if (target[i])
			sb_printf(&o, "L%zu:\n", i);
		switch (c) {
		case BPF_ALU64:
			alu64(&o, in);
			break;
		case BPF_ALU:
			alu32(&o, in);
			break;
		case BPF_JMP:
		case BPF_JMP32:
			if (OP(in->code) == BPF_EXIT)
				sb_printf(&o, "\tst.param.b64 [ret], %%r0;\n\tret;\n");
			else if (OP(in->code) == BPF_CALL)
				bpf_ptx_call(&o, in->imm, i, in->off);
			else
				jump(&o, in, i);
			break;
		case BPF_LDX:
			sb_printf(&o, "\tld.%s %%r%u, [%%r%u+%d];\n",
				  size_type[SIZE(in->code) >> 3], in->dst_reg, in->src_reg,
				  in->off);
			break;
		case BPF_ST:
			sb_printf(&o, "\tmov.b64 %%t0, %lld;\n\tst.%s [%%r%u+%d], %%t0;\n",
				  (long long)in->imm, size_type[SIZE(in->code) >> 3], in->dst_reg,
				  in->off);
			break;
		case BPF_STX:
			if (MODE(in->code) == BPF_ATOMIC)
				atomic(&o, in);
			else
				sb_printf(&o, "\tst.%s [%%r%u+%d], %%r%u;\n",
					  size_type[SIZE(in->code) >> 3], in->dst_reg, in->off,
					  in->src_reg);
			break;
		case BPF_LD:
			if (in->src_reg == BPF_PSEUDO_MAP_VALUE)
				sb_printf(&o,
					  "\tmov.u64 %%r%u, gs_rodata;\n\tcvta.global.u64 %%r%u, "
					  "%%r%u;\n\tadd.s64 %%r%u, %%r%u, %d;\n",
					  in->dst_reg, in->dst_reg, in->dst_reg, in->dst_reg,
					  in->dst_reg, in->imm);
			else if (in->src_reg == BPF_PSEUDO_MAP_IDX)
				sb_printf(&o,
					  "\tmov.u64 %%r%u, gs_maps;\n\tcvta.global.u64 %%r%u, "
					  "%%r%u;\n"
					  "\tadd.s64 %%r%u, %%r%u, %d;\n",
					  in->dst_reg, in->dst_reg, in->dst_reg, in->dst_reg,
					  in->dst_reg, in->imm * GS_MAP_DESC);
			else
				sb_printf(&o, "\tmov.b64 %%r%u, %llu;\n", in->dst_reg,
					  (unsigned long long)(__u32)in->imm |
						  (unsigned long long)(__u32)insns[i + 1].imm
							  << 32);
			i++;
			if (target[i])
				sb_printf(&o, "L%zu:\n",
					  i); /* (a jump into its middle was refused) */
			break;
		}
	}
	sb_printf(&o, "}\n");
	if (o.oom)
		out->oom = true;
	else
		sb_putn(out, o.buf, o.len);
	sb_free(&o);
	free(target);
	if (out->oom) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int bpf_to_ptx_module(const struct bpf_insn *insns, size_t n, const char *name, unsigned int sm,
		      struct strbuf *out, char *err, size_t errlen)
{
	struct strbuf f = { 0 };

	if (bpf_to_ptx(insns, n, name, &f, err, errlen))
		return -1;
	sb_printf(out, ".version 8.0\n.target sm_%u\n.address_size 64\n\n", sm);
	bpf_ptx_maps_decl(out, 0, NULL, 0);
	sb_putn(out, f.buf, f.len);
	sb_free(&f);
	if (out->oom) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}
