/* SPDX-License-Identifier: MIT */
/*
 * eBPF to PTX's two parts (see translate.h):
 *   translate.c          the checks, the instructions, the function and module around them;
 *   translate_helpers.c  helper calls: maps, ring buffers, the GPU's helpers.
 */
#ifndef GS_PTX_TRANSLATE_INT_H
#define GS_PTX_TRANSLATE_INT_H

#include <stddef.h>

struct strbuf;

/* The PTX of helper `id` called at instruction `at` (its labels are named after it): r1..r5
 * its arguments, r0 its result. The checks have refused helpers with no GPU version. */
void bpf_ptx_call(struct strbuf *o, int id, size_t at, int off);

#endif
