// SPDX-License-Identifier: MIT
/*
 * CPython layouts (see pylayout.h): the written tables' lookup, and 3.13 and later's read
 * from the process.
 *
 * _Py_DebugOffsets (Include/internal/pycore_runtime.h in 3.13, pycore_debug_offsets.h in
 * 3.14) is an 8-byte cookie "xdebugpy" followed by 64-bit words: the version
 * (PY_VERSION_HEX), free_threaded, then one group per structure, each its size first, then
 * the offsets of its fields. Which word holds which offset follows from the field order,
 * which changes between minor versions (never within one):
 *   3.13: runtime_state 3 words, interpreter_state 13, thread_state 9, interpreter_frame 6,
 *         code_object 10, pyobject 2, type_object 4, tuple 3, list 3, dict 3, float 2,
 *         long 3, bytes 3, unicode 4, gc 2;
 *   3.14: interpreter_state 16 (threads_main after threads_head; code_object_generation
 *         and tlbc_generation last), interpreter_frame 8 (stackpointer, tlbc_index),
 *         code_object 11 (co_tlbc), and a set_object group of 4 between list and dict.
 * Positions below are in bytes from the table's start. tests/unit/test_pydebug.c checks
 * them against the two structures declared field by field as the headers declare them.
 */
#include <string.h>

#include "core/pylayout.h"

/* Where the table keeps each offset read: its byte position. */
struct debug_slots {
	unsigned short minor, size; /* size: the bytes read (through unicode_object) */
	unsigned short interp_head, threads_head, ts_next, ts_frame, ts_tid;
	unsigned short f_prev, f_exec, f_instr, f_owner;
	unsigned short co_filename, co_qualname, co_linetable, co_firstlineno, co_code;
	unsigned short ob_type, tp_name, tuple_item, bytes_size, bytes_sval;
	unsigned short str_state, str_length, str_ascii;
};

/* clang-format off */
static const struct debug_slots debug_slots[] = {
	/* minor size  interp thr  next frame tid  prev exec instr owner file qual table line code
	 * ob_type tp_name item bsize bsval state len ascii */
	{ 13, 568,  40, 72,  168, 184, 200, 232, 240, 248, 264, 280, 296, 304, 312, 344,
	  360, 376, 408, 520, 528, 544, 552, 560 },
	{ 14, 648,  40, 72,  192, 208, 224, 256, 264, 272, 288, 320, 336, 344, 352, 384,
	  408, 424, 456, 600, 608, 624, 632, 640 },
};
/* clang-format on */

#define DEBUG_MAX 648
#define COOKIE	  "xdebugpy"

const struct py_layout *py_layout_static(unsigned int minor)
{
	for (size_t i = 0; i < sizeof(py_layouts) / sizeof(py_layouts[0]); i++)
		if (py_layouts[i].minor == minor)
			return &py_layouts[i];
	return NULL;
}

static __u64 word(const unsigned char *t, unsigned short at)
{
	__u64 v;

	memcpy(&v, t + at, sizeof(v));
	return v;
}

/* Whether an offset read is one a field of a structure may have: below `max`. */
static bool fits(__u64 v, __u64 max, int *out)
{
	*out = (int)v;
	return v < max;
}

bool py_layout_debug(bool (*read)(void *ctx, void *dst, __u64 addr, size_t n), void *ctx,
		     __u64 runtime, unsigned int minor, struct py_layout *out)
{
	const struct debug_slots *s = NULL;
	unsigned char t[DEBUG_MAX];
	__u64 version;
	int str_state, str_length;
	struct py_layout l = { .minor = minor, .cframe_cur = -1, .f_entry = -1, .table311 = true };

	for (size_t i = 0; i < sizeof(debug_slots) / sizeof(debug_slots[0]); i++)
		if (debug_slots[i].minor == minor)
			s = &debug_slots[i];
	if (!s || !runtime || !read(ctx, t, runtime, s->size) || memcmp(t, COOKIE, 8))
		return false;
	version = word(t, 8);
	/* This minor version; a build with the GIL (free-threaded objects have other
	 * headers); the headers, types, tuples, bytes and strings the readers assume. */
	if (version >> 24 != 3 || ((version >> 16) & 0xff) != minor || word(t, 16) ||
	    word(t, s->ob_type) != 8 || word(t, s->tp_name) != 24 || word(t, s->tuple_item) != 24 ||
	    word(t, s->bytes_size) != 16 || word(t, s->bytes_sval) != 32)
		return false;
	/* (The kernel's walker keeps offsets in 16 bits; a frame is read whole into
	 * PY_FRAME_MAX bytes; a string's header into 72.) */
	if (!fits(word(t, s->interp_head), 1 << 15, &l.rt_interp_head) ||
	    !fits(word(t, s->threads_head), 1 << 15, &l.interp_threads) ||
	    !fits(word(t, s->ts_next), 1 << 12, &l.ts_next) ||
	    !fits(word(t, s->ts_frame), 1 << 12, &l.ts_frame) ||
	    !fits(word(t, s->ts_tid), 1 << 12, &l.ts_tid) ||
	    !fits(word(t, s->f_prev), PY_FRAME_MAX - 8, &l.f_prev) ||
	    !fits(word(t, s->f_exec), PY_FRAME_MAX - 8, &l.f_code) ||
	    !fits(word(t, s->f_instr), PY_FRAME_MAX - 8, &l.f_instr) ||
	    !fits(word(t, s->f_owner), PY_FRAME_MAX - 1, &l.f_owner) ||
	    !fits(word(t, s->co_filename), 1 << 12, &l.co_filename) ||
	    !fits(word(t, s->co_qualname), 1 << 12, &l.co_name) ||
	    !fits(word(t, s->co_linetable), 1 << 12, &l.co_linetable) ||
	    !fits(word(t, s->co_firstlineno), 1 << 12, &l.co_firstlineno) ||
	    !fits(word(t, s->co_code), 1 << 12, &l.co_code) ||
	    !fits(word(t, s->str_state), 1 << 12, &str_state) ||
	    !fits(word(t, s->str_length), 1 << 12, &str_length) ||
	    !fits(word(t, s->str_ascii), 73, &l.str_ascii) || str_state != 32 || str_length != 16 ||
	    l.str_ascii < 36)
		return false;
	/* A compact string's characters follow its utf8_length and utf8 (as since 3.12). */
	l.str_compact = l.str_ascii + 16;
	*out = l;
	return true;
}
