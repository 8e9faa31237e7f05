/* SPDX-License-Identifier: MIT */
/*
 * Python frames (see docs/python.md), what both planes share: a frame's name from its code
 * object, and Python frames put in place of the interpreter's native ones. Memory is read
 * through the caller's function (the in-process plane: process_vm_readv on itself;
 * gpuscope: on the traced process), so that a wrong address reads an error, never a fault.
 */
#ifndef GS_CORE_PYNAME_H
#define GS_CORE_PYNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#include "core/pylayout.h"

struct py_reader {
	const struct py_layout *l;
	bool (*read)(void *ctx, void *dst, __u64 addr, size_t n); /* all n bytes, or false */
	void *ctx;
};

/* struct py_reader's read for a process (ctx: its pid, as a pointer): process_vm_readv. */
bool py_read_pid(void *ctx, void *dst, __u64 addr, size_t n);
/* "QUALNAME (FILE:LINE)" of the instruction at byte offset off of a code object (the line
 * from its location table; none where it has none); false if the code cannot be read. */
bool py_frame_name(const struct py_reader *r, __u64 code, __u64 off, char *out, size_t n);
/*
 * A native stack (innermost first) with each frame of the interpreter (eval_lo..eval_hi:
 * _PyEval_EvalFrameDefault) replaced by the Python frames that evaluation ran: py[]
 * innermost first, entry[i] marking each evaluation's outermost frame. Python frames left
 * over (evaluations whose native frames were not found) go outermost. borrowed: the frames
 * are another thread's (this one has no Python state): all go outermost, after
 * GS_PYFRAME_BORROWED. Into out (at most max); the count.
 */
int py_mix(const __u64 *native, int n, const __u64 *py, const bool *entry, int np, bool borrowed,
	   __u64 eval_lo, __u64 eval_hi, __u64 *out, int max);
/* The name of GS_PYFRAME_BORROWED. */
#define PY_BORROWED_NAME "[on a thread without Python]"

#endif
