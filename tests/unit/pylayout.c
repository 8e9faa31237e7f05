// SPDX-License-Identifier: MIT
/*
 * A layout of src/core/pylayout.h against CPython's own headers (built with
 * Py_BUILD_CORE to reach the internal ones): every offset the walker reads must be the
 * compiler's. make test builds it with Debian's 3.11 headers; bench/python_gpu.sh with the
 * GPU machine's, where it has them. Exits 1 naming each that differs. Also prints where
 * the thread list is (for the kernel plane's walker).
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#include <stddef.h>
#include <stdio.h>

#include "core/pylayout.h"

#define CHECK(field, want)                                                                    \
	do {                                                                                  \
		checked++;                                                                    \
		if ((long)(l->field) != (long)(want)) {                                       \
			printf("3.%d %s: table %ld, headers %ld\n", PY_MINOR_VERSION, #field, \
			       (long)(l->field), (long)(want));                               \
			bad = 1;                                                              \
		}                                                                             \
	} while (0)

int main(void)
{
	const struct py_layout *l = NULL;
	int bad = 0, checked = 0;

	for (size_t i = 0; i < sizeof(py_layouts) / sizeof(py_layouts[0]); i++)
		if (py_layouts[i].minor == PY_MINOR_VERSION)
			l = &py_layouts[i];
	if (PY_MAJOR_VERSION != 3 || !l) {
		printf("no layout for the headers' version %d.%d\n", PY_MAJOR_VERSION,
		       PY_MINOR_VERSION);
		return 1;
	}
	CHECK(ts_frame, offsetof(PyThreadState, cframe));
	CHECK(cframe_cur, offsetof(_PyCFrame, current_frame));
	CHECK(f_code, offsetof(_PyInterpreterFrame, f_code));
	CHECK(f_prev, offsetof(_PyInterpreterFrame, previous));
	CHECK(f_instr, offsetof(_PyInterpreterFrame, prev_instr));
#if PY_MINOR_VERSION == 11
	CHECK(f_entry, offsetof(_PyInterpreterFrame, is_entry));
#else
	CHECK(f_entry, -1);
#endif
	CHECK(f_owner, offsetof(_PyInterpreterFrame, owner));
	CHECK(co_filename, offsetof(PyCodeObject, co_filename));
	CHECK(co_name, offsetof(PyCodeObject, co_qualname));
	CHECK(co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
	CHECK(co_linetable, offsetof(PyCodeObject, co_linetable));
	CHECK(co_code, offsetof(PyCodeObject, co_code_adaptive));
	CHECK(str_ascii, sizeof(PyASCIIObject));
	CHECK(str_compact, sizeof(PyCompactUnicodeObject));
	CHECK(lasti_int, 0);
	CHECK(table311, 1);
	CHECK(rt_interp_head, offsetof(_PyRuntimeState, interpreters.head));
	CHECK(interp_threads, offsetof(PyInterpreterState, threads.head));
	CHECK(ts_next, offsetof(PyThreadState, next));
	CHECK(ts_tid, offsetof(PyThreadState, native_thread_id));
	if (offsetof(PyASCIIObject, length) != 16 || offsetof(PyASCIIObject, state) != 32 ||
	    offsetof(PyBytesObject, ob_sval) != 32 || offsetof(PyVarObject, ob_size) != 16) {
		printf("3.%d: string or bytes header moved (the walker reads 16, 32, 16, 32)\n",
		       PY_MINOR_VERSION);
		bad = 1;
	}
	printf("3.%d thread list: interpreters.head %zu, threads.head %zu, next %zu, "
	       "native_thread_id %zu\n",
	       PY_MINOR_VERSION, offsetof(_PyRuntimeState, interpreters.head),
	       offsetof(PyInterpreterState, threads.head), offsetof(PyThreadState, next),
	       offsetof(PyThreadState, native_thread_id));
	if (!bad)
		printf("3.%d layout: %d fields as the headers have them\n", PY_MINOR_VERSION,
		       checked);
	return bad;
}
