// SPDX-License-Identifier: MIT
/*
 * An interpreter of CPython 3.PY_MINOR (13 or 14) as gpuscope sees one, built as
 * python3.PY_MINOR-fake: it exports _PyRuntime, which starts with its _Py_DebugOffsets
 * (tests/workloads/pydebug.h), Py_Version, PyGILState_GetThisThreadState and
 * _PyEval_EvalFrameDefault, and its main thread runs Python frames laid out where that table
 * says, no other layout known: gpuscope must read it to walk them.
 *
 * Two evaluations, each a native _PyEval_EvalFrameDefault frame: the outer one runs
 * <module> (fake_train.py:3), the inner one train (line 12), which called step (line 45),
 * which launches a kernel 20 times. Each evaluation's frames end in an entry frame owned by
 * the interpreter (owner 3), on the C stack as CPython keeps it (a local of the evaluation's
 * native frame); 3.14 tags the code's reference in its low bit. The frames, code
 * objects, strings and location tables are at the offsets real builds use (x86-64).
 *
 *     python3.13-fake | python3.14-fake
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pydebug.h"
#include "wl_cuda.h"

#if PY_MINOR == 13
#define TABLE  struct pydebug313
#define OWNER  70
#define TAGGED 0
#else
#define TABLE  struct pydebug314
#define OWNER  74
#define TAGGED 1 /* (a _PyStackRef's flag) */
#endif

/* Where this interpreter keeps what a walk reads (its table says so). */
#define RT_INTERP_HEAD 1024
#define INTERP_THREADS 7344
#define TS_NEXT	       8
#define TS_FRAME       72
#define TS_TID	       160
#define FR_EXEC	       0
#define FR_PREV	       8
#define FR_INSTR       56
#define CO_FIRSTLINE   68
#define CO_FILE	       112
#define CO_NAME	       120
#define CO_QUALNAME    128
#define CO_TABLE       136
#define CO_CODE	       200

struct runtime {
	TABLE debug;
	unsigned char rest[4096];
};

/* (Initialized statically: gpuscope reads the table when the driver library is mapped,
 * before main.) */
struct runtime _PyRuntime __attribute__((aligned(64))) = {
	.debug = {
		.cookie = "xdebugpy",
		.version = 0x030000f0ULL | (uint64_t)PY_MINOR << 16,
		.runtime_state = { .size = sizeof(struct runtime), .interpreters_head = RT_INTERP_HEAD },
		.interpreter_state = { .size = 8192, .threads_head = INTERP_THREADS, .next = 0 },
		.thread_state = { .size = 512, .next = TS_NEXT, .current_frame = TS_FRAME,
				  .native_thread_id = TS_TID, .thread_id = 152 },
		.interpreter_frame = { .size = 88, .previous = FR_PREV, .executable = FR_EXEC,
				       .instr_ptr = FR_INSTR, .owner = OWNER },
		.code_object = { .size = 256, .filename = CO_FILE, .name = CO_NAME,
				 .qualname = CO_QUALNAME, .linetable = CO_TABLE,
				 .firstlineno = CO_FIRSTLINE, .co_code_adaptive = CO_CODE },
		.pyobject = { .size = 16, .ob_type = 8 },
		.type_object = { .tp_name = 24 },
		.tuple_object = { .ob_item = 24, .ob_size = 16 },
		.bytes_object = { .ob_size = 16, .ob_sval = 32 },
		.unicode_object = { .state = 32, .length = 16, .asciiobject_size = 40 },
	},
};
unsigned long Py_Version = 0x030000f0UL | (unsigned long)PY_MINOR << 16;

struct str { /* a compact ASCII str: its characters at 40 */
	uint64_t refcnt, type, length, hash;
	uint32_t state, pad;
	char text[24];
};
struct bytes { /* its bytes at 32 */
	uint64_t refcnt, type, size, hash;
	unsigned char data[8];
};

#define STR(s)                                                            \
	{                                                                 \
		1, 0, sizeof(s) - 1, 0, 1u << 2 | 1u << 5 | 1u << 6, 0, s \
	}

static struct str file = STR("fake_train.py"), n_step = STR("step"), n_train = STR("train"),
		  n_module = STR("<module>"), q_step = STR("Trainer.step");
/* Location tables (3.11 and later): entries of 8 code units with no columns, each a line
 * delta: step's units 0-7 on line 41, 8-15 on 45; train's 0-7 on 12; <module>'s on 3. */
static struct bytes t_step = { 1, 0, 4, 0, { 0xef, 0x02, 0xef, 0x08 } },
		    t_train = { 1, 0, 2, 0, { 0xef, 0x04 } },
		    t_module = { 1, 0, 2, 0, { 0xef, 0x04 } };
static unsigned char c_step[256] __attribute__((aligned(16))),
	c_train[256] __attribute__((aligned(16))), c_module[256] __attribute__((aligned(16)));
static unsigned char interp[8192] __attribute__((aligned(16))), tstate[512],
	frames[4][88] __attribute__((aligned(16)));
static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry pyKernel(\n.param .u64 a)\n{ ret; }\n";
static CUkernel kernel;

static void put(unsigned char *at, const void *v)
{
	memcpy(at, &v, sizeof(v));
}

static void code(unsigned char *c, struct str *name, struct str *qual, struct bytes *table,
		 int first)
{
	put(c + CO_FILE, &file);
	put(c + CO_NAME, name);
	put(c + CO_QUALNAME, qual);
	put(c + CO_TABLE, table);
	memcpy(c + CO_FIRSTLINE, &first, sizeof(first));
}

/* A frame running code c at code unit `unit` (NULL: an evaluation's entry frame), then prev. */
static void frame(unsigned char *f, unsigned char *c, int unit, unsigned char *prev)
{
	put(f + FR_PREV, prev);
	if (!c) {
		f[OWNER] = 3;
		return;
	}
	put(f + FR_EXEC, (void *)((uintptr_t)c | TAGGED));
	put(f + FR_INSTR, c + CO_CODE + 2 * unit);
}

void *PyGILState_GetThisThreadState(void)
{
	return tstate;
}

/* The interpreter: the outer evaluation (depth 1) runs <module> (frames[3]), the inner one
 * train (frames[1]), which launches; each has its entry frame on its native frame's stack. */
__attribute__((noinline)) int _PyEval_EvalFrameDefault(void *ts, void *f, volatile int depth)
{
	unsigned char entry[sizeof(frames[0])] __attribute__((aligned(16))) = { 0 };
	int rc = 0;

	(void)f;
	frame(entry, NULL, 0, depth ? NULL : frames[3]);
	put(depth ? frames[3] + FR_PREV : frames[1] + FR_PREV, entry);
	if (depth)
		rc = _PyEval_EvalFrameDefault(ts, f, depth - 1);
	else
		for (int i = 0; i < 20; i++)
			rc |= cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 32, 1, 1, 0, NULL, NULL,
					     NULL);
	__asm__ volatile("" ::: "memory"); /* (no tail call: its frame stays) */
	return rc;
}

int main(void)
{
	uint64_t tid = (uint64_t)syscall(SYS_gettid);

	code(c_step, &n_step, &q_step, &t_step, 40);
	code(c_train, &n_train, &n_train, &t_train, 10);
	code(c_module, &n_module, &n_module, &t_module, 1);
	/* step <- train <- entry <- <module> <- entry (the entries: _PyEval_EvalFrameDefault's) */
	frame(frames[0], c_step, 10, frames[1]);
	frame(frames[1], c_train, 3, NULL);
	frame(frames[3], c_module, 5, NULL);
	put((unsigned char *)&_PyRuntime + RT_INTERP_HEAD, interp);
	put(interp + INTERP_THREADS, tstate);
	put(tstate + TS_FRAME, frames[0]);
	memcpy(tstate + TS_TID, &tid, sizeof(tid));
	CHECK(cuLibraryGetKernel(&kernel, wl_library(ptx), "pyKernel"), 0);
	usleep(300000); /* (gpuscope sets the kernel's walker up moments after the driver maps) */
	CHECK(_PyEval_EvalFrameDefault(tstate, frames[3], 1), 0);
	usleep(300000); /* (and names its frames from its memory moments after they are seen) */
	printf("python3.%d-fake: 20 launches\n", PY_MINOR);
	return 0;
}
