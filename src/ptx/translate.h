/* SPDX-License-Identifier: MIT */
/*
 * eBPF to PTX, directly, without LLVM: each eBPF instruction becomes a few PTX instructions
 * on sixty-four-bit registers %r0..%r10, the 512-byte stack a .local array whose generic
 * address is r10, jumps branches to labels. The program becomes a PTX .func
 * `(.param .b64 ret) NAME(.param .b64 ctx)`: r1 = ctx on entry, r0 returned.
 *
 * Semantics follow the kernel's interpreter where the ISA leaves a choice: division by zero
 * gives 0 and modulo by zero leaves the dividend; shift amounts are masked to the width;
 * 32-bit operations zero the upper half. The CPU interpreter (interp.c) is the reference
 * the tests compare with.
 *
 * What is not translated is refused with the instruction's index, its opcode and why:
 * helper calls without a GPU helper, bpf-to-bpf calls, map references, the legacy packet
 * loads, signed division (ISA v4), jumps out of the program, writes to r10.
 */
#ifndef GS_PTX_TRANSLATE_H
#define GS_PTX_TRANSLATE_H

#include <linux/bpf.h>
#include <stddef.h>

#define BPF_STACK_BYTES 512

struct strbuf;

/*
 * Append the PTX function NAME for the n instructions to out. 0, or -1 with err set (and
 * out as it was).
 */
int bpf_to_ptx(const struct bpf_insn *insns, size_t n, const char *name, struct strbuf *out,
	       char *err, size_t errlen);
/* A whole module around it (.version/.target/.address_size), for ptxas and tests. */
int bpf_to_ptx_module(const struct bpf_insn *insns, size_t n, const char *name, unsigned int sm,
		      struct strbuf *out, char *err, size_t errlen);

/*
 * The reference interpreter: run on the CPU with r1 = ctx (ctx_size bytes, readable and
 * writable) and a 512-byte stack; memory outside those two is refused, as are more than
 * max_steps instructions. 0 with *ret = r0, or -1 with err set.
 */
int bpf_interp(const struct bpf_insn *insns, size_t n, void *ctx, size_t ctx_size,
	       unsigned long long max_steps, unsigned long long *ret, char *err, size_t errlen);

#endif
