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
			if (in->src_reg && in->src_reg != BPF_PSEUDO_MAP_IDX)
				return refuse(
					err, errlen, i, in,
					"pseudo references other than maps are not supported");
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

int bpf_gpu_helper(int id)
{
	return (id >= GS_BPF_GLOBALTIMER && id <= GS_BPF_LANE_ID) ||
	       (id >= GS_BPF_PREFETCH_L2 && id <= GS_BPF_WARP_MAX) || (id >= 1 && id <= 3) ||
	       id == GS_BPF_RING_OUTPUT || id == GS_BPF_PERF_OUTPUT;
}

size_t bpf_hash_slot(unsigned int key_size, unsigned int value_size)
{
	return 8 + (((size_t)key_size + 7) & ~(size_t)7) + (((size_t)value_size + 7) & ~(size_t)7);
}

void bpf_ptx_maps_decl(struct strbuf *out, unsigned int nmaps)
{
	sb_printf(out, ".visible .global .align 8 .b8 gs_maps[%u];\n\n",
		  (nmaps ? nmaps : 1) * GS_MAP_DESC);
}

/*
 * A map element's address into %t0 (r1 the descriptor, r2 the key's address), %p0 set if
 * there is none (the key past the end, or a thread past a per-thread map's threads); %w0
 * keeps the value size. Uses %t1-%t3, %w1-%w4, %p1.
 */
static void map_slot(struct strbuf *o, size_t at)
{
	sb_printf(o,
		  "\tld.u64 %%t0, [%%r1];\n\tld.u32 %%w0, [%%r1+8];\n"
		  "\tld.u32 %%w1, [%%r1+12];\n\tld.u32 %%w2, [%%r2];\n"
		  "\tsetp.ge.u32 %%p0, %%w2, %%w1;\n\tcvt.u64.u32 %%t1, %%w2;\n"
		  "\tld.u32 %%w3, [%%r1+16];\n\tsetp.ne.u32 %%p1, %%w3, %d;\n"
		  "\t@%%p1 bra H%zu_slot;\n"
		  /* the thread's index in the launch: its block's, times a block's threads,
		   * plus its own in the block */
		  "\tmov.u32 %%w3, %%ctaid.z;\n\tmov.u32 %%w4, %%nctaid.y;\n"
		  "\tmul.lo.u32 %%w3, %%w3, %%w4;\n\tmov.u32 %%w4, %%ctaid.y;\n"
		  "\tadd.u32 %%w3, %%w3, %%w4;\n\tmov.u32 %%w4, %%nctaid.x;\n"
		  "\tmul.lo.u32 %%w3, %%w3, %%w4;\n\tmov.u32 %%w4, %%ctaid.x;\n"
		  "\tadd.u32 %%w3, %%w3, %%w4;\n\tcvt.u64.u32 %%t2, %%w3;\n"
		  "\tmov.u32 %%w3, %%ntid.x;\n\tmov.u32 %%w4, %%ntid.y;\n"
		  "\tmul.lo.u32 %%w3, %%w3, %%w4;\n\tmov.u32 %%w4, %%ntid.z;\n"
		  "\tmul.lo.u32 %%w3, %%w3, %%w4;\n\tcvt.u64.u32 %%t3, %%w3;\n"
		  "\tmul.lo.u64 %%t2, %%t2, %%t3;\n"
		  "\tmov.u32 %%w3, %%tid.z;\n\tmov.u32 %%w4, %%ntid.y;\n"
		  "\tmul.lo.u32 %%w3, %%w3, %%w4;\n\tmov.u32 %%w4, %%tid.y;\n"
		  "\tadd.u32 %%w3, %%w3, %%w4;\n\tmov.u32 %%w4, %%ntid.x;\n"
		  "\tmul.lo.u32 %%w3, %%w3, %%w4;\n\tmov.u32 %%w4, %%tid.x;\n"
		  "\tadd.u32 %%w3, %%w3, %%w4;\n\tcvt.u64.u32 %%t3, %%w3;\n"
		  "\tadd.s64 %%t2, %%t2, %%t3;\n"
		  "\tld.u32 %%w3, [%%r1+20];\n\tcvt.u64.u32 %%t3, %%w3;\n"
		  "\tsetp.ge.or.u64 %%p0, %%t2, %%t3, %%p0;\n"
		  "\tcvt.u64.u32 %%t3, %%w1;\n\tmul.lo.u64 %%t2, %%t2, %%t3;\n"
		  "\tadd.s64 %%t1, %%t1, %%t2;\n"
		  "H%zu_slot:\n"
		  "\tcvt.u64.u32 %%t3, %%w0;\n\tmul.lo.u64 %%t1, %%t1, %%t3;\n"
		  "\tadd.s64 %%t0, %%t0, %%t1;\n",
		  GS_MAP_PER_THREAD, at, at);
}

/*
 * A hash map's helper (the array code before it jumps past this): open addressing with
 * linear probing over max_entries slots of {u32 state; u32 pad; key, value (each rounded
 * up to 8 bytes)}; state 0 empty, 1 being written, 2 full, 3 deleted. The key's FNV-1a
 * hash picks the first slot. An insert claims an empty slot with a compare-and-swap
 * (0 -> 1), writes key and value, and publishes it (membar, 2); a slot being written is
 * waited for (boundedly), so that two threads inserting one key do not both insert it.
 * Deleted slots are not reused. Registers: %t0-%t5, %w0-%w7, %p0-%p2.
 */
static void hash_helper(struct strbuf *o, int id, size_t at)
{
	sb_printf(o, "\tbra.uni H%zu_out;\nH%zu_hash:\n", at, at);
	/* %t0 data, %w0 value size, %w1 slots, %w2 key size, %t5 slot size */
	sb_printf(o, "\tld.u64 %%t0, [%%r1];\n\tld.u32 %%w0, [%%r1+8];\n\tld.u32 %%w1, [%%r1+12];\n"
		     "\tld.u32 %%w2, [%%r1+20];\n"
		     "\tadd.u32 %%w7, %%w2, 7;\n\tand.b32 %%w7, %%w7, 0xfffffff8;\n\tcvt.u64.u32 "
		     "%%t5, %%w7;\n"
		     "\tadd.u32 %%w7, %%w0, 7;\n\tand.b32 %%w7, %%w7, 0xfffffff8;\n\tcvt.u64.u32 "
		     "%%t2, %%w7;\n"
		     "\tadd.s64 %%t5, %%t5, %%t2;\n\tadd.s64 %%t5, %%t5, 8;\n");
	/* FNV-1a of the key: the first slot, %w3 */
	sb_printf(o,
		  "\tmov.u32 %%w3, 0x811c9dc5;\n\tmov.u32 %%w5, 0;\n"
		  "H%zu_h:\n\tsetp.ge.u32 %%p0, %%w5, %%w2;\n\t@%%p0 bra H%zu_hd;\n"
		  "\tcvt.u64.u32 %%t2, %%w5;\n\tadd.s64 %%t2, %%r2, %%t2;\n\tld.u8 %%w7, [%%t2];\n"
		  "\txor.b32 %%w3, %%w3, %%w7;\n\tmul.lo.u32 %%w3, %%w3, 16777619;\n"
		  "\tadd.u32 %%w5, %%w5, 1;\n\tbra.uni H%zu_h;\n"
		  "H%zu_hd:\n\tsetp.eq.u32 %%p0, %%w1, 0;\n\t@%%p0 bra H%zu_none;\n"
		  "\trem.u32 %%w3, %%w3, %%w1;\n\tmov.u32 %%w4, 0;\n",
		  at, at, at, at, at);
	/* the probe: slot %t1, its state %w6 (a slot being written: wait, boundedly) */
	sb_printf(o,
		  "H%zu_probe:\n\tsetp.ge.u32 %%p0, %%w4, %%w1;\n\t@%%p0 bra H%zu_none;\n"
		  "\tcvt.u64.u32 %%t1, %%w3;\n\tmul.lo.u64 %%t1, %%t1, %%t5;\n"
		  "\tadd.s64 %%t1, %%t0, %%t1;\n\tmov.u32 %%w5, 0;\n"
		  "H%zu_load:\n\tld.volatile.u32 %%w6, [%%t1];\n"
		  "\tsetp.eq.u32 %%p0, %%w6, 1;\n\tsetp.lt.u32 %%p2, %%w5, 1048576;\n"
		  "\tand.pred %%p0, %%p0, %%p2;\n\tadd.u32 %%w5, %%w5, 1;\n"
		  "\t@%%p0 bra H%zu_load;\n"
		  "\tsetp.eq.u32 %%p0, %%w6, 0;\n\t@%%p0 bra H%zu_%s;\n"
		  "\tsetp.ne.u32 %%p0, %%w6, 2;\n\t@%%p0 bra H%zu_next;\n"
		  /* a full slot: the same key? */
		  "\tmov.u32 %%w5, 0;\n"
		  "H%zu_cmp:\n\tsetp.ge.u32 %%p0, %%w5, %%w2;\n\t@%%p0 bra H%zu_found;\n"
		  "\tcvt.u64.u32 %%t2, %%w5;\n\tadd.s64 %%t3, %%r2, %%t2;\n\tld.u8 %%w7, [%%t3];\n"
		  "\tadd.s64 %%t3, %%t1, %%t2;\n\tld.u8 %%w6, [%%t3+8];\n"
		  "\tsetp.ne.u32 %%p0, %%w7, %%w6;\n\t@%%p0 bra H%zu_next;\n"
		  "\tadd.u32 %%w5, %%w5, 1;\n\tbra.uni H%zu_cmp;\n"
		  "H%zu_next:\n\tadd.u32 %%w3, %%w3, 1;\n\tsetp.ge.u32 %%p0, %%w3, %%w1;\n"
		  "\t@%%p0 mov.u32 %%w3, 0;\n\tadd.u32 %%w4, %%w4, 1;\n\tbra.uni H%zu_probe;\n",
		  at, at, at, at, at, id == 2 ? "claim" : "none", at, at, at, at, at, at, at);
	/* %t4: the slot's value */
	sb_printf(o,
		  "H%zu_found:\n\tadd.u32 %%w7, %%w2, 7;\n\tand.b32 %%w7, %%w7, 0xfffffff8;\n"
		  "\tcvt.u64.u32 %%t4, %%w7;\n\tadd.s64 %%t4, %%t4, %%t1;\n\tadd.s64 %%t4, %%t4, "
		  "8;\n",
		  at);
	switch (id) {
	case 1:
		sb_printf(o,
			  "\tmov.b64 %%r0, %%t4;\n\tbra.uni H%zu_out;\n"
			  "H%zu_none:\n\tmov.b64 %%r0, 0;\n",
			  at, at);
		break;
	case 3: /* the slot marked deleted, if no other thread did first */
		sb_printf(o,
			  "\tatom.cas.b32 %%w6, [%%t1], 2, 3;\n\tmov.b64 %%r0, 0;\n"
			  "\tsetp.ne.u32 %%p0, %%w6, 2;\n\t@%%p0 mov.b64 %%r0, -2;\n"
			  "\tbra.uni H%zu_out;\n"
			  "H%zu_none:\n\tmov.b64 %%r0, -2;\n",
			  at, at);
		break;
	default: /* update */
		sb_printf(
			o,
			/* found: BPF_NOEXIST says no; else the value copied in */
			"\tsetp.eq.u64 %%p0, %%r4, 1;\n\t@%%p0 mov.b64 %%r0, -17;\n"
			"\t@%%p0 bra H%zu_out;\n\tbra.uni H%zu_value;\n"
			/* an empty slot: the key is not there */
			"H%zu_claim:\n\tsetp.eq.u64 %%p0, %%r4, 2;\n\t@%%p0 mov.b64 %%r0, -2;\n"
			"\t@%%p0 bra H%zu_out;\n"
			"\tatom.cas.b32 %%w6, [%%t1], 0, 1;\n\tsetp.ne.u32 %%p0, %%w6, 0;\n"
			"\t@%%p0 bra H%zu_probe;\n" /* taken first: look at it again */
			"\tmov.u32 %%w5, 0;\n"
			"H%zu_key:\n\tsetp.ge.u32 %%p0, %%w5, %%w2;\n\t@%%p0 bra H%zu_keyed;\n"
			"\tcvt.u64.u32 %%t2, %%w5;\n\tadd.s64 %%t3, %%r2, %%t2;\n"
			"\tld.u8 %%w7, [%%t3];\n\tadd.s64 %%t3, %%t1, %%t2;\n"
			"\tst.u8 [%%t3+8], %%w7;\n\tadd.u32 %%w5, %%w5, 1;\n\tbra.uni H%zu_key;\n"
			"H%zu_keyed:\n\tadd.u32 %%w7, %%w2, 7;\n\tand.b32 %%w7, %%w7, 0xfffffff8;\n"
			"\tcvt.u64.u32 %%t4, %%w7;\n\tadd.s64 %%t4, %%t4, %%t1;\n"
			"\tadd.s64 %%t4, %%t4, 8;\n",
			at, at, at, at, at, at, at, at, at);
		sb_printf(o,
			  "H%zu_value:\n\tmov.u32 %%w5, 0;\n"
			  "H%zu_vcopy:\n\tsetp.ge.u32 %%p0, %%w5, %%w0;\n\t@%%p0 bra H%zu_vdone;\n"
			  "\tcvt.u64.u32 %%t2, %%w5;\n\tadd.s64 %%t3, %%r3, %%t2;\n"
			  "\tld.u8 %%w7, [%%t3];\n\tadd.s64 %%t3, %%t4, %%t2;\n\tst.u8 [%%t3], "
			  "%%w7;\n"
			  "\tadd.u32 %%w5, %%w5, 1;\n\tbra.uni H%zu_vcopy;\n"
			  "H%zu_vdone:\n\tmembar.gl;\n\tst.volatile.u32 [%%t1], 2;\n"
			  "\tmov.b64 %%r0, 0;\n\tbra.uni H%zu_out;\n"
			  "H%zu_none:\n\tmov.b64 %%r0, -7;\n",
			  at, at, at, at, at, at, at);
		break;
	}
	sb_printf(o, "H%zu_out:\n", at);
}

/*
 * bpf_ringbuf_output(r1 map, r2 data, r3 size): a record into the ring (translate.h). The
 * reservation checks room against the last tail seen (device memory) first, and reads the
 * host's tail across the bus only when that says full. The data is read a byte at a time
 * (it may sit anywhere and end anywhere) and written a word at a time.
 */
static void ring_output(struct strbuf *o, size_t at)
{
	sb_printf(o,
		  "\tld.u32 %%w3, [%%r1+16];\n\tsetp.ne.u32 %%p0, %%w3, %d;\n"
		  "\t@%%p0 mov.b64 %%r0, -22;\n\t@%%p0 bra R%zu_out;\n"
		  "\tsetp.gt.u64 %%p0, %%r3, %d;\n\t@%%p0 mov.b64 %%r0, -7;\n"
		  "\t@%%p0 bra R%zu_out;\n"
		  /* %t0 control block, %t5 ring bytes, %t1 the record's */
		  "\tld.u64 %%t0, [%%r1];\n\tld.u32 %%w0, [%%r1+20];\n\tcvt.u64.u32 %%t5, %%w0;\n"
		  "\tadd.s64 %%t1, %%r3, %d;\n\tand.b64 %%t1, %%t1, 0xfffffffffffffff8;\n"
		  "\tmov.u32 %%w5, 0;\n"
		  "R%zu_try:\n\tld.volatile.u64 %%t2, [%%t0];\n\tld.volatile.u64 %%t3, [%%t0+32];\n"
		  "\tsub.s64 %%t4, %%t2, %%t3;\n\tadd.s64 %%t4, %%t4, %%t1;\n"
		  "\tsetp.le.u64 %%p0, %%t4, %%t5;\n\t@%%p0 bra R%zu_cas;\n"
		  /* full by the last tail seen: the host's, now, read by one thread in
		   * GS_RING_REREAD_NS (the others drop): a read crosses the bus */
		  "\tmov.u64 %%t4, %%globaltimer;\n\tld.volatile.u64 %%t3, [%%t0+40];\n"
		  "\tsub.s64 %%t3, %%t4, %%t3;\n\tsetp.lt.u64 %%p0, %%t3, %d;\n"
		  "\t@%%p0 bra R%zu_full;\n"
		  "\tld.volatile.u64 %%t3, [%%t0+40];\n"
		  "\tatom.global.cas.b64 %%r4, [%%t0+40], %%t3, %%t4;\n"
		  "\tsetp.ne.u64 %%p0, %%r4, %%t3;\n\t@%%p0 bra R%zu_full;\n"
		  "\tld.u64 %%t4, [%%t0+24];\n\tld.volatile.u64 %%t3, [%%t4];\n"
		  "\tst.volatile.u64 [%%t0+32], %%t3;\n"
		  "\tsub.s64 %%t4, %%t2, %%t3;\n\tadd.s64 %%t4, %%t4, %%t1;\n"
		  "\tsetp.gt.u64 %%p0, %%t4, %%t5;\n\t@%%p0 bra R%zu_full;\n"
		  "R%zu_cas:\n\tadd.s64 %%t3, %%t2, %%t1;\n"
		  "\tatom.global.cas.b64 %%t3, [%%t0], %%t2, %%t3;\n"
		  "\tsetp.eq.u64 %%p0, %%t3, %%t2;\n\t@%%p0 bra R%zu_ok;\n"
		  "\tadd.u32 %%w5, %%w5, 1;\n\tsetp.lt.u32 %%p0, %%w5, 1024;\n"
		  "\t@%%p0 bra R%zu_try;\n"
		  "R%zu_full:\n\tred.global.add.u64 [%%t0+8], 1;\n\tmov.b64 %%r0, -11;\n"
		  "\tbra.uni R%zu_out;\n",
		  GS_MAP_RING, at, GS_RING_REC_MAX, at, GS_RING_HDR + 7, at, at, GS_RING_REREAD_NS,
		  at, at, at, at, at, at, at, at);
	/* %t2 the position, %t3 the ring, %t5 its mask */
	sb_printf(o,
		  "R%zu_ok:\n\tld.u64 %%t3, [%%t0+16];\n\tsub.s64 %%t5, %%t5, 1;\n"
		  "\tadd.s64 %%t4, %%t2, 8;\n\tand.b64 %%t4, %%t4, %%t5;\n"
		  "\tadd.s64 %%t4, %%t3, %%t4;\n"
		  "\tmov.u64 %%r0, %%globaltimer;\n\tst.u64 [%%t4], %%r0;\n"
		  "\tcvt.u32.u64 %%w2, %%r3;\n\tmov.u32 %%w1, 0;\n"
		  "R%zu_word:\n\tsetp.ge.u32 %%p0, %%w1, %%w2;\n\t@%%p0 bra R%zu_pub;\n"
		  "\tmov.b64 %%r4, 0;\n\tmov.u32 %%w6, 0;\n"
		  "R%zu_byte:\n\tcvt.u64.u32 %%t4, %%w1;\n\tadd.s64 %%t4, %%r2, %%t4;\n"
		  "\tld.u8 %%r5, [%%t4];\n\tshl.b64 %%r5, %%r5, %%w6;\n\tor.b64 %%r4, %%r4, %%r5;\n"
		  "\tadd.u32 %%w1, %%w1, 1;\n\tadd.u32 %%w6, %%w6, 8;\n"
		  "\tsetp.lt.u32 %%p0, %%w1, %%w2;\n\tsetp.lt.and.u32 %%p0, %%w6, 64, %%p0;\n"
		  "\t@%%p0 bra R%zu_byte;\n"
		  "\tsub.u32 %%w7, %%w1, 1;\n\tand.b32 %%w7, %%w7, 0xfffffff8;\n"
		  "\tcvt.u64.u32 %%t4, %%w7;\n"
		  "\tadd.s64 %%t4, %%t4, %d;\n\tadd.s64 %%t4, %%t4, %%t2;\n"
		  "\tand.b64 %%t4, %%t4, %%t5;\n\tadd.s64 %%t4, %%t3, %%t4;\n"
		  "\tst.u64 [%%t4], %%r4;\n\tbra.uni R%zu_word;\n"
		  "R%zu_pub:\n\tmembar.sys;\n\tmov.b64 %%r5, 4294967296;\n"
		  "\tor.b64 %%r5, %%r5, %%r3;\n"
		  "\tand.b64 %%t4, %%t2, %%t5;\n\tadd.s64 %%t4, %%t3, %%t4;\n"
		  "\tst.volatile.u64 [%%t4], %%r5;\n\tmov.b64 %%r0, 0;\n"
		  "R%zu_out:\n",
		  at, at, at, at, at, GS_RING_HDR, at, at, at);
}

/* A helper call: r1..r5 are its arguments, r0 its result (r1..r5 are not kept: eBPF says
 * they are clobbered). */
static void helper(struct strbuf *o, int id, size_t at)
{
	static const char *const xyz = "xyz";
	const char *sreg = id == GS_BPF_BLOCK_IDX    ? "ctaid"
			   : id == GS_BPF_BLOCK_DIM  ? "ntid"
			   : id == GS_BPF_THREAD_IDX ? "tid"
						     : "nctaid";

	/* Hash maps take their own way (a branch on the descriptor's kind). */
	if (id >= 1 && id <= 3)
		sb_printf(o,
			  "\tld.u32 %%w3, [%%r1+16];\n\tsetp.eq.u32 %%p1, %%w3, %d;\n"
			  "\t@%%p1 bra H%zu_hash;\n",
			  GS_MAP_HASH, at);
	switch (id) {
	case GS_BPF_PERF_OUTPUT: /* (ctx, map, flags, data, size): as the ring's */
		sb_printf(o,
			  "\tmov.b64 %%r1, %%r2;\n\tmov.b64 %%r2, %%r4;\n\tmov.b64 %%r3, %%r5;\n");
		ring_output(o, at);
		return;
	case GS_BPF_RING_OUTPUT:
		ring_output(o, at);
		return;
	case 1: /* lookup: the element's address, NULL past the end */
		map_slot(o, at);
		sb_printf(o, "\tmov.b64 %%r0, %%t0;\n\t@%%p0 mov.b64 %%r0, 0;\n");
		hash_helper(o, id, at);
		return;
	case 2: /* update: the value copied in, byte by byte (r1..r5 are the helper's) */
		map_slot(o, at);
		sb_printf(o,
			  "\t@%%p0 mov.b64 %%r0, -7;\n"
			  "\t@%%p0 bra H%zu_done;\n\tsetp.eq.u64 %%p0, %%r4, 1;\n"
			  "\t@%%p0 mov.b64 %%r0, -17;\n\t@%%p0 bra H%zu_done;\n"
			  "\tmov.u32 %%w1, 0;\n"
			  "H%zu_loop:\n\tsetp.ge.u32 %%p0, %%w1, %%w0;\n\t@%%p0 bra H%zu_end;\n"
			  "\tcvt.u64.u32 %%r5, %%w1;\n\tadd.s64 %%t1, %%r3, %%r5;\n"
			  "\tld.u8 %%r4, [%%t1];\n\tadd.s64 %%t1, %%t0, %%r5;\n"
			  "\tst.u8 [%%t1], %%r4;\n\tadd.u32 %%w1, %%w1, 1;\n\tbra.uni H%zu_loop;\n"
			  "H%zu_end:\n\tmov.b64 %%r0, 0;\nH%zu_done:\n",
			  at, at, at, at, at, at, at);
		hash_helper(o, id, at);
		return;
	case 3: /* delete: arrays cannot */
		sb_printf(o, "\tmov.b64 %%r0, -22;\n");
		hash_helper(o, id, at);
		return;
	case GS_BPF_GLOBALTIMER:
		sb_printf(o, "\tmov.u64 %%r0, %%globaltimer;\n");
		return;
	case GS_BPF_BLOCK_IDX:
	case GS_BPF_BLOCK_DIM:
	case GS_BPF_THREAD_IDX:
	case GS_BPF_GRID_DIM:
		for (int k = 0; k < 3; k++)
			sb_printf(o,
				  "\tmov.u32 %%w0, %%%s.%c;\n\tcvt.u64.u32 %%t0, %%w0;\n"
				  "\tst.u64 [%%r%d], %%t0;\n",
				  sreg, xyz[k], k + 1);
		sb_printf(o, "\tmov.b64 %%r0, 0;\n");
		return;
	case GS_BPF_MEMBAR:
		sb_printf(o, "\tmembar.sys;\n\tmov.b64 %%r0, 0;\n");
		return;
	case GS_BPF_EXIT:
		sb_printf(o, "\texit;\n");
		return;
	case GS_BPF_SM_ID:
	case GS_BPF_WARP_ID:
	case GS_BPF_LANE_ID:
		sb_printf(o, "\tmov.u32 %%w0, %%%s;\n\tcvt.u64.u32 %%r0, %%w0;\n",
			  id == GS_BPF_SM_ID	 ? "smid"
			  : id == GS_BPF_WARP_ID ? "warpid"
						 : "laneid");
		return;
	case GS_BPF_PREFETCH_L2:
		sb_printf(o, "\tcvta.to.global.u64 %%t0, %%r1;\n\tprefetch.global.L2 [%%t0];\n"
			     "\tmov.b64 %%r0, 0;\n");
		return;
	case GS_BPF_ACTIVE_MASK:
		sb_printf(o, "\tactivemask.b32 %%w0;\n\tcvt.u64.u32 %%r0, %%w0;\n");
		return;
	case GS_BPF_WARP_SUM:
	case GS_BPF_WARP_MAX:
		/* each active lane's value in turn (shfl.sync.idx, the same for every lane) */
		sb_printf(o,
			  "\tactivemask.b32 %%w0;\n\tmov.u32 %%w1, %%w0;\n\tmov.b64 %%t0, 0;\n"
			  "\tmov.b64 {%%w3, %%w4}, %%r1;\n"
			  "H%zu_lane:\n\tsetp.eq.u32 %%p1, %%w1, 0;\n\t@%%p1 bra.uni H%zu_done;\n"
			  "\tbfind.u32 %%w2, %%w1;\n"
			  "\tshfl.sync.idx.b32 %%w5, %%w3, %%w2, 31, %%w0;\n"
			  "\tshfl.sync.idx.b32 %%w6, %%w4, %%w2, 31, %%w0;\n"
			  "\tmov.b64 %%t1, {%%w5, %%w6};\n\t%s.u64 %%t0, %%t0, %%t1;\n"
			  "\tmov.u32 %%w7, 1;\n\tshl.b32 %%w7, %%w7, %%w2;\n"
			  "\txor.b32 %%w1, %%w1, %%w7;\n\tbra.uni H%zu_lane;\n"
			  "H%zu_done:\n\tmov.b64 %%r0, %%t0;\n",
			  at, at, id == GS_BPF_WARP_SUM ? "add" : "max", at, at);
		return;
	case GS_BPF_WARP_UNIQUE:
	case GS_BPF_WARP_MATCH_COUNT:
	case GS_BPF_WARP_MATCH_LEADER:
		/* %w1: the lanes holding this lane's value; %p1: this lane is their lowest */
		sb_printf(o, "\tactivemask.b32 %%w0;\n\tmatch.any.sync.b64 %%w1, %%r1, %%w0;\n");
		if (id == GS_BPF_WARP_MATCH_COUNT) {
			sb_printf(o, "\tpopc.b32 %%w2, %%w1;\n\tcvt.u64.u32 %%r0, %%w2;\n");
			return;
		}
		sb_printf(o, "\tneg.s32 %%w4, %%w1;\n\tand.b32 %%w4, %%w4, %%w1;\n"
			     "\tmov.u32 %%w3, %%laneid;\n\tmov.u32 %%w5, 1;\n"
			     "\tshl.b32 %%w5, %%w5, %%w3;\n\tsetp.eq.u32 %%p1, %%w4, %%w5;\n");
		if (id == GS_BPF_WARP_MATCH_LEADER)
			sb_printf(o, "\tselp.u64 %%r0, 1, 0, %%p1;\n");
		else
			sb_printf(o, "\tvote.sync.ballot.b32 %%w6, %%p1, %%w0;\n"
				     "\tpopc.b32 %%w6, %%w6;\n\tcvt.u64.u32 %%r0, %%w6;\n");
		return;
	}
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
				helper(&o, in->imm, i);
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
			if (in->src_reg == BPF_PSEUDO_MAP_IDX)
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
	bpf_ptx_maps_decl(out, 0);
	sb_putn(out, f.buf, f.len);
	sb_free(&f);
	if (out->oom) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}
