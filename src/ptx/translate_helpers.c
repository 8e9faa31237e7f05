// SPDX-License-Identifier: MIT
/* eBPF to PTX (see translate.h): the helper calls -- maps (arrays, per-thread arrays, hash
 * maps), ring buffers and the GPU's own helpers -- each written out as PTX at its call. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "ptx/translate.h"
#include "ptx/translate_int.h"

int bpf_gpu_helper(int id)
{
	return (id >= GS_BPF_GLOBALTIMER && id <= GS_BPF_LANE_ID) || id == GS_BPF_PID_TGID ||
	       id == GS_BPF_DEVICE || id == GS_BPF_TRACE_PRINTK || id == GS_BPF_PUTS ||
	       (id >= GS_BPF_PREFETCH_L2 && id <= GS_BPF_WARP_MAX) || (id >= 1 && id <= 3) ||
	       id == GS_BPF_RING_OUTPUT || id == GS_BPF_PERF_OUTPUT;
}

size_t bpf_hash_slot(unsigned int key_size, unsigned int value_size)
{
	return 8 + (((size_t)key_size + 7) & ~(size_t)7) + (((size_t)value_size + 7) & ~(size_t)7);
}

void bpf_ptx_maps_decl(struct strbuf *out, unsigned int nmaps, const unsigned char *rodata,
		       size_t n)
{
	sb_printf(out,
		  ".visible .global .align 8 .b8 gs_maps[%u];\n"
		  ".visible .global .align 8 .u64 gs_env[2];\n",
		  (nmaps ? nmaps : 1) * GS_MAP_DESC);
	if (n) {
		sb_printf(out, ".visible .global .align 8 .b8 gs_rodata[%zu] = {", n);
		for (size_t i = 0; i < n; i++)
			sb_printf(out, "%s%u", i ? (i % 32 ? ", " : ",\n\t") : "", rodata[i]);
		sb_puts(out, "};\n");
	}
	sb_puts(out, "\n");
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
		  "\tmul.lo.u64 %%t1, %%t1, %%t3;\n\tadd.s64 %%t1, %%t1, %%t2;\n"
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

/* A printing call (6, 501; translate.h): its record built in the function's gs_pk, then
 * written into ring map `ring` as bpf_ringbuf_output does. */
static void print_call(struct strbuf *o, int id, size_t at, unsigned int ring)
{
	sb_printf(o,
		  "\tmov.u64 %%t0, gs_pk;\n\tcvta.local.u64 %%t0, %%t0;\n"
		  "\tmov.u32 %%w0, %u;\n\tst.u32 [%%t0], %%w0;\n",
		  (unsigned int)id);
	if (id == GS_BPF_TRACE_PRINTK)
		sb_printf(o,
			  "\tcvt.u32.u64 %%w0, %%r2;\n\tsetp.gt.u64 %%p0, %%r2, %u;\n"
			  "\t@%%p0 mov.u32 %%w0, %u;\n",
			  GS_PRINT_TEXT, GS_PRINT_TEXT);
	else
		sb_printf(o,
			  "\tmov.u32 %%w0, %u;\n\tmov.b64 %%r3, 0;\n\tmov.b64 %%r4, 0;\n"
			  "\tmov.b64 %%r5, 0;\n",
			  GS_PRINT_TEXT);
	sb_printf(o,
		  "\tst.u64 [%%t0+8], %%r3;\n\tst.u64 [%%t0+16], %%r4;\n\tst.u64 [%%t0+24], %%r5;\n"
		  "\tmov.u32 %%w1, 0;\n"
		  "P%zu_loop:\n\tsetp.ge.u32 %%p0, %%w1, %%w0;\n\t@%%p0 bra P%zu_end;\n"
		  "\tcvt.u64.u32 %%t1, %%w1;\n\tadd.s64 %%t2, %%r1, %%t1;\n\tld.u8 %%w2, [%%t2];\n"
		  "\tsetp.eq.u32 %%p0, %%w2, 0;\n\t@%%p0 bra P%zu_end;\n"
		  "\tadd.s64 %%t2, %%t0, %%t1;\n\tst.u8 [%%t2+%d], %%w2;\n"
		  "\tadd.u32 %%w1, %%w1, 1;\n\tbra.uni P%zu_loop;\n"
		  "P%zu_end:\n\tst.u32 [%%t0+4], %%w1;\n"
		  "\tmov.u64 %%r1, gs_maps;\n\tcvta.global.u64 %%r1, %%r1;\n"
		  "\tadd.s64 %%r1, %%r1, %u;\n\tmov.b64 %%r2, %%t0;\n"
		  "\tcvt.u64.u32 %%r3, %%w1;\n\tadd.s64 %%r3, %%r3, %d;\n",
		  at, at, at, GS_PRINT_HDR, at, at, ring * GS_MAP_DESC, GS_PRINT_HDR);
	ring_output(o, at);
}

/* A helper call: r1..r5 are its arguments, r0 its result (r1..r5 are not kept: eBPF says
 * they are clobbered). off: a printing call's ring, + 1 (translate.h). */
void bpf_ptx_call(struct strbuf *o, int id, size_t at, int off)
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
	case GS_BPF_TRACE_PRINTK:
	case GS_BPF_PUTS:
		print_call(o, id, at, (unsigned int)(off - 1));
		return;
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
	case GS_BPF_PID_TGID:
	case GS_BPF_DEVICE:
		sb_printf(o, "\tld.global.u64 %%r0, [gs_env+%d];\n", id == GS_BPF_DEVICE ? 8 : 0);
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
