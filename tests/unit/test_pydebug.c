// SPDX-License-Identifier: MIT
/*
 * 3.13 and 3.14 layouts read from _Py_DebugOffsets (core/pylayout.c) against the tables
 * declared field by field as CPython's headers declare them (tests/workloads/pydebug.h):
 * each offset comes from its own field, and a table that is not one (wrong cookie, another
 * version, a free-threaded build, objects laid out otherwise, offsets out of reach, or
 * memory that cannot be read) is refused.
 */
#include "unit.h"
#include "core/pylayout.h"
#include "../workloads/pydebug.h"

#define AT 0x7f0000001000ULL

struct mem {
	const void *p;
	size_t n;
};

static bool mem_read(void *ctx, void *dst, __u64 addr, size_t n)
{
	const struct mem *m = ctx;

	if (addr < AT || addr - AT > m->n || n > m->n - (addr - AT))
		return false;
	memcpy(dst, (const char *)m->p + (addr - AT), n);
	return true;
}

/* Distinct values in each field read, so that a slot read from its neighbour shows. */
#define FIELDS(t, base)                                                        \
	do {                                                                   \
		(t)->runtime_state.interpreters_head = (base) + 1;             \
		(t)->interpreter_state.threads_head = (base) + 2;              \
		(t)->thread_state.next = (base) + 3;                           \
		(t)->thread_state.current_frame = (base) + 4;                  \
		(t)->thread_state.native_thread_id = (base) + 5;               \
		(t)->interpreter_frame.previous = 8;                           \
		(t)->interpreter_frame.executable = 16;                        \
		(t)->interpreter_frame.instr_ptr = 56;                         \
		(t)->interpreter_frame.owner = (base) % 2 ? 74 : 70;           \
		(t)->code_object.filename = (base) + 6;                        \
		(t)->code_object.name = (base) + 7;                            \
		(t)->code_object.qualname = (base) + 8;                        \
		(t)->code_object.linetable = (base) + 9;                       \
		(t)->code_object.firstlineno = (base) + 10;                    \
		(t)->code_object.co_code_adaptive = (base) + 11;               \
		/* (fields not read, to show they are not) */                  \
		(t)->interpreter_state.next = (t)->thread_state.prev = 999;    \
		(t)->interpreter_state.id = (t)->thread_state.thread_id = 998; \
	} while (0)

static void check(const struct py_layout *l, int base, unsigned int minor)
{
	assert_int_equal(l->minor, minor);
	assert_int_equal(l->rt_interp_head, base + 1);
	assert_int_equal(l->interp_threads, base + 2);
	assert_int_equal(l->ts_next, base + 3);
	assert_int_equal(l->ts_frame, base + 4);
	assert_int_equal(l->ts_tid, base + 5);
	assert_int_equal(l->cframe_cur, -1);
	assert_int_equal(l->f_prev, 8);
	assert_int_equal(l->f_code, 16);
	assert_int_equal(l->f_instr, 56);
	assert_int_equal(l->f_owner, base % 2 ? 74 : 70);
	assert_int_equal(l->f_entry, -1);
	assert_false(l->lasti_int);
	assert_int_equal(l->co_filename, base + 6);
	assert_int_equal(l->co_name, base + 8); /* (the qualified name) */
	assert_int_equal(l->co_linetable, base + 9);
	assert_int_equal(l->co_firstlineno, base + 10);
	assert_int_equal(l->co_code, base + 11);
	assert_int_equal(l->str_ascii, 40);
	assert_int_equal(l->str_compact, 56);
	assert_true(l->table311);
	assert_int_equal(py_frame_bytes(l), (size_t)l->f_owner + 1);
}

static void tables_of_313_and_314_are_read_field_by_field(void **state)
{
	struct pydebug313 a = { 0 };
	struct pydebug314 b = { 0 };
	struct mem ma = { &a, sizeof(a) }, mb = { &b, sizeof(b) };
	struct py_layout l;

	(void)state;
	PYDEBUG_FILL(&a, 13);
	FIELDS(&a, 100);
	assert_true(py_layout_debug(mem_read, &ma, AT, 13, &l));
	check(&l, 100, 13);
	PYDEBUG_FILL(&b, 14);
	FIELDS(&b, 201);
	assert_true(py_layout_debug(mem_read, &mb, AT, 14, &l));
	check(&l, 201, 14);
	/* One version's table is not read as the other's. */
	assert_false(py_layout_debug(mem_read, &ma, AT, 14, &l));
	assert_false(py_layout_debug(mem_read, &mb, AT, 13, &l));
	/* Written layouts stay where they are; no table is known past 3.14. */
	assert_non_null(py_layout_static(12));
	assert_null(py_layout_static(13));
	assert_false(py_layout_debug(mem_read, &mb, AT, 15, &l));
}

static void tables_that_are_not_are_refused(void **state)
{
	struct pydebug313 good = { 0 }, t;
	struct mem m = { &t, sizeof(t) };
	struct py_layout l;

	(void)state;
	PYDEBUG_FILL(&good, 13);
	FIELDS(&good, 100);
#define REFUSED(change)                                                  \
	do {                                                             \
		t = good;                                                \
		change;                                                  \
		assert_false(py_layout_debug(mem_read, &m, AT, 13, &l)); \
	} while (0)
	REFUSED(t.cookie[0] = 'X');
	REFUSED(t.version = 0x030c05f0); /* 3.12 */
	REFUSED(t.version = 0x040d0000); /* 4.13 */
	REFUSED(t.free_threaded = 1);	 /* other object headers */
	REFUSED(t.pyobject.ob_type = 16);
	REFUSED(t.type_object.tp_name = 32);
	REFUSED(t.tuple_object.ob_item = 32);
	REFUSED(t.bytes_object.ob_sval = 40);
	REFUSED(t.unicode_object.state = 40);
	REFUSED(t.unicode_object.length = 24);
	REFUSED(t.unicode_object.asciiobject_size = 80); /* (past a header's read) */
	REFUSED(t.interpreter_state.threads_head = 1 << 15);
	REFUSED(t.runtime_state.interpreters_head = ~0ULL);
	REFUSED(t.thread_state.current_frame = 1 << 20);
	REFUSED(t.interpreter_frame.owner = 200); /* (past a frame's read) */
	REFUSED(t.code_object.filename = 1ULL << 40);
	REFUSED(m.n = sizeof(t) - 1); /* (its end unreadable) */
	m.n = sizeof(t);
	t = good;
	assert_false(py_layout_debug(mem_read, &m, 0, 13, &l));
	assert_true(py_layout_debug(mem_read, &m, AT, 13, &l));
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(tables_of_313_and_314_are_read_field_by_field),
	cmocka_unit_test(tables_that_are_not_are_refused),
};
UNIT_MAIN(tests)
