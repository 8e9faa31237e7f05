/* SPDX-License-Identifier: MIT */
/*
 * Where CPython keeps what a walk of a thread's frames reads, per minor version, written
 * from CPython's headers (x86-64, release builds): 3.10 PyFrameObject chains from the
 * thread state; 3.11 and 3.12 _PyInterpreterFrame chains behind the thread's _PyCFrame.
 * 3.11's is checked against Debian's headers by tests/unit/pylayout.c (make test); 3.10's
 * and 3.12's are not checked here (3.12 is tried on the GPU machine's Python). 3.13 and
 * 3.14 describe themselves: the layout is read from the process (_Py_DebugOffsets, at the
 * start of _PyRuntime; core/pylayout.c), never guessed.
 */
#ifndef GS_CORE_PYLAYOUT_H
#define GS_CORE_PYLAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

/* Offsets in bytes; -1: not in this version. */
struct py_layout {
	unsigned int minor;
	int ts_frame;	/* PyThreadState: frame (3.10), else cframe */
	int cframe_cur; /* _PyCFrame: current_frame; -1: ts_frame is the frame */
	/* the frame: its code, the previous frame, the instruction (a pointer; 3.10: f_lasti,
	 * an int in code units), 3.11's is_entry, the owner (3.11, 3.12) */
	int f_code, f_prev, f_instr, f_entry, f_owner;
	bool lasti_int;
	/* the code object: co_filename, co_qualname (3.10: co_name), co_firstlineno,
	 * co_linetable, co_code_adaptive (where its instructions start; 3.10: none) */
	int co_filename, co_name, co_firstlineno, co_linetable, co_code;
	int str_ascii, str_compact; /* where a compact string's characters start */
	bool table311;		    /* the location table of 3.11 and later */
	/* the thread list (the kernel probes' walker finds a thread's state there):
	 * _PyRuntime's interpreters.head, an interpreter's threads.head, a thread state's next
	 * and native_thread_id; -1: not known (3.10: not walked by the kernel probes) */
	int rt_interp_head, interp_threads, ts_next, ts_tid;
};

/* A frame's owner at and above this: not a Python frame of its own, but the entry frame an
 * evaluation pushes first (3.12, 3.13: FRAME_OWNED_BY_CSTACK; 3.14:
 * FRAME_OWNED_BY_INTERPRETER; each 3). */
#define PY_OWNED_BY_EVAL 3

/* A frame's code object from the word that holds it: 3.14 keeps it as a tagged
 * reference (_PyStackRef, its low bits flags); objects are 8-byte aligned in every
 * version. */
#define PY_CODE_OF(word) ((word) & ~7ULL)

/* clang-format off */
static const struct py_layout py_layouts[] = {
	/* minor ts cf   code prev instr entry owner int   file name line table code  str     311    threads           */
	{ 10,    24, -1, 32,  24,  96,   -1,   -1,   true,  104, 112, 40,  120,  -1,   48, 72, false, -1, -1,  -1, -1 },
	{ 11,    56, 8,  32,  48,  56,   68,   69,   false, 112, 128, 72,  136,  184,  48, 72, true,  40, 16,  8,  160 },
	{ 12,    56, 0,  0,   8,   56,   -1,   70,   false, 112, 128, 68,  136,  192,  40, 56, true,  40, 72,  8,  144 },
};
/* clang-format on */

/* The bytes of a frame a walk reads (up to its last field used). */
static inline size_t py_frame_bytes(const struct py_layout *l)
{
	int end = l->f_code + 8;

	end = l->f_prev + 8 > end ? l->f_prev + 8 : end;
	end = l->f_instr + (l->lasti_int ? 4 : 8) > end ? l->f_instr + (l->lasti_int ? 4 : 8) : end;
	end = l->f_entry + 1 > end ? l->f_entry + 1 : end;
	end = l->f_owner + 1 > end ? l->f_owner + 1 : end;
	return (size_t)end;
}

/* The most py_frame_bytes may be (what the walkers' buffers hold). */
#define PY_FRAME_MAX 104

/* The layout of a minor version from py_layouts (3.10 to 3.12), or NULL. */
const struct py_layout *py_layout_static(unsigned int minor);

/*
 * 3.13 and later: the layout read from the _Py_DebugOffsets at runtime (_PyRuntime's
 * address), through read (all n bytes or false). The table must carry its cookie, say
 * this minor version and a build with the GIL, and hold what the readers assume (object
 * headers, strings, bytes, tuples, types where they always were) and offsets they can use;
 * else false, and the version is one with no known layout. minor: 13 or 14 (the table's
 * own fields move between minor versions).
 */
bool py_layout_debug(bool (*read)(void *ctx, void *dst, __u64 addr, size_t n), void *ctx,
		     __u64 runtime, unsigned int minor, struct py_layout *out);

#endif
