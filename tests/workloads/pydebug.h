/* SPDX-License-Identifier: MIT */
/*
 * CPython's _Py_DebugOffsets for 3.13 (Include/internal/pycore_runtime.h) and 3.14
 * (Include/internal/pycore_debug_offsets.h), declared field by field in the headers' order
 * (up to unicode_object: what gpuscope reads), x86-64. tests/unit/test_pydebug.c checks
 * gpuscope's reader against them; wl_pynew.c builds an interpreter's worth of them.
 */
#ifndef GS_TEST_PYDEBUG_H
#define GS_TEST_PYDEBUG_H

#include <stdint.h>

#define PYDEBUG_COMMON                                        \
	char cookie[8];                                       \
	uint64_t version;                                     \
	uint64_t free_threaded;                               \
	struct {                                              \
		uint64_t size, finalizing, interpreters_head; \
	} runtime_state

#define PYDEBUG_TAIL                                            \
	struct {                                                \
		uint64_t size, ma_keys, ma_values;              \
	} dict_object;                                          \
	struct {                                                \
		uint64_t size, ob_fval;                         \
	} float_object;                                         \
	struct {                                                \
		uint64_t size, lv_tag, ob_digit;                \
	} long_object;                                          \
	struct {                                                \
		uint64_t size, ob_size, ob_sval;                \
	} bytes_object;                                         \
	struct {                                                \
		uint64_t size, state, length, asciiobject_size; \
	} unicode_object

#define PYDEBUG_OBJECTS                                    \
	struct {                                           \
		uint64_t size, ob_type;                    \
	} pyobject;                                        \
	struct {                                           \
		uint64_t size, tp_name, tp_repr, tp_flags; \
	} type_object;                                     \
	struct {                                           \
		uint64_t size, ob_item, ob_size;           \
	} tuple_object;                                    \
	struct {                                           \
		uint64_t size, ob_item, ob_size;           \
	} list_object

#define PYDEBUG_THREAD                                                                         \
	struct {                                                                               \
		uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, \
			datastack_chunk, status;                                               \
	} thread_state

struct pydebug313 {
	PYDEBUG_COMMON;
	struct {
		uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins,
			ceval_gil, gil_runtime_state, gil_runtime_state_enabled,
			gil_runtime_state_locked, gil_runtime_state_holder;
	} interpreter_state;
	PYDEBUG_THREAD;
	struct {
		uint64_t size, previous, executable, instr_ptr, localsplus, owner;
	} interpreter_frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			localsplusnames, localspluskinds, co_code_adaptive;
	} code_object;
	PYDEBUG_OBJECTS;
	PYDEBUG_TAIL;
};

struct pydebug314 {
	PYDEBUG_COMMON;
	struct {
		uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict,
			builtins, ceval_gil, gil_runtime_state, gil_runtime_state_enabled,
			gil_runtime_state_locked, gil_runtime_state_holder, code_object_generation,
			tlbc_generation;
	} interpreter_state;
	PYDEBUG_THREAD;
	struct {
		uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer,
			tlbc_index;
	} interpreter_frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			localsplusnames, localspluskinds, co_code_adaptive, co_tlbc;
	} code_object;
	PYDEBUG_OBJECTS;
	struct {
		uint64_t size, used, table, mask;
	} set_object;
	PYDEBUG_TAIL;
};

/* Fill a table (struct pydebug313 or 314, t) the way a GIL build of CPython on x86-64
 * does for the fields gpuscope reads; where its own objects are is the caller's. */
#define PYDEBUG_FILL(t, minor)                                          \
	do {                                                            \
		memcpy((t)->cookie, "xdebugpy", 8);                     \
		(t)->version = 0x030000f0ULL | (uint64_t)(minor) << 16; \
		(t)->pyobject.ob_type = 8;                              \
		(t)->type_object.tp_name = 24;                          \
		(t)->tuple_object.ob_item = 24;                         \
		(t)->bytes_object.ob_size = 16;                         \
		(t)->bytes_object.ob_sval = 32;                         \
		(t)->unicode_object.state = 32;                         \
		(t)->unicode_object.length = 16;                        \
		(t)->unicode_object.asciiobject_size = 40;              \
	} while (0)

#endif
