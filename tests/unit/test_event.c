// SPDX-License-Identifier: MIT
/* Record validation: what a recording or the kernel may hand the model. */
#include "unit.h"
#include "core/event.h"

static void valid_launch_passes(void **state)
{
	struct gs_ev_launch e;
	const char *why = NULL;

	(void)state;
	hdr(&e, GS_EV_LAUNCH, sizeof(e), 1, 1);
	e.c.api = GS_API_CU_LAUNCH_KERNEL;
	assert_int_equal(gs_event_check(&e, sizeof(e), &why), 0);
}

static void wrong_sizes_fail(void **state)
{
	struct gs_ev_launch e;
	const char *why = NULL;

	(void)state;
	hdr(&e, GS_EV_LAUNCH, sizeof(e), 1, 1);
	e.c.api = GS_API_CU_LAUNCH_KERNEL;
	assert_int_equal(gs_event_check(&e, sizeof(e) - 8, &why), -1);
	assert_string_equal(why, "record size field disagrees with its length");
	e.h.size = sizeof(e) - 8;
	assert_int_equal(gs_event_check(&e, sizeof(e) - 8, &why), -1);
	assert_string_equal(why, "record size wrong for its type");
	assert_int_equal(gs_event_check(&e, 4, &why), -1);
	assert_string_equal(why, "record shorter than its header");
}

static void bad_type_source_api_fail(void **state)
{
	struct gs_ev_launch e;
	const char *why = NULL;

	(void)state;
	hdr(&e, GS_EV_MAX, sizeof(e), 1, 1);
	assert_int_equal(gs_event_check(&e, sizeof(e), &why), -1);
	assert_string_equal(why, "unknown record type");
	hdr(&e, GS_EV_LAUNCH, sizeof(e), 1, 1);
	e.h.source = 99;
	assert_int_equal(gs_event_check(&e, sizeof(e), &why), -1);
	assert_string_equal(why, "unknown record source");
	e.h.source = GS_SRC_UPROBE;
	e.c.api = GS_API_MAX;
	assert_int_equal(gs_event_check(&e, sizeof(e), &why), -1);
	assert_string_equal(why, "API id out of range");
	/* A memory API in a launch record would index the wrong tables. */
	e.c.api = GS_API_CU_MEM_ALLOC;
	assert_int_equal(gs_event_check(&e, sizeof(e), &why), -1);
	assert_string_equal(why, "API id does not belong to the record type");
}

static void kname_bounds(void **state)
{
	struct gs_ev_kname k;
	size_t n = offsetof(struct gs_ev_kname, name) + 8;
	const char *why = NULL;

	(void)state;
	hdr(&k, GS_EV_KNAME, (__u32)n, 1, 1);
	memcpy(k.name, "_Z3fooi", 8);
	k.len = 7;
	assert_int_equal(gs_event_check(&k, n, &why), 0);
	k.len = 8; /* claims a byte beyond the record */
	assert_int_equal(gs_event_check(&k, n, &why), -1);
	k.len = 7;
	k.name[7] = 'x'; /* not terminated */
	assert_int_equal(gs_event_check(&k, n, &why), -1);
	assert_string_equal(why, "kernel name not terminated within its record");
	k.name[7] = 0;
	k.ns = 7;
	assert_int_equal(gs_event_check(&k, n, &why), -1);
}

static void enum_fields_checked(void **state)
{
	struct gs_ev_copy c;
	struct gs_ev_proc p;
	struct gs_ev_session s;
	const char *why = NULL;

	(void)state;
	hdr(&c, GS_EV_COPY, sizeof(c), 1, 1);
	c.c.api = GS_API_CU_MEMCPY;
	c.kind = GS_COPY_KIND_MAX;
	assert_int_equal(gs_event_check(&c, sizeof(c), &why), -1);
	c.kind = GS_COPY_HTOD;
	assert_int_equal(gs_event_check(&c, sizeof(c), &why), 0);
	hdr(&p, GS_EV_PROC, sizeof(p), 1, 1);
	p.kind = 0;
	assert_int_equal(gs_event_check(&p, sizeof(p), &why), -1);
	p.kind = GS_PROC_EXIT;
	assert_int_equal(gs_event_check(&p, sizeof(p), &why), 0);
	hdr(&s, GS_EV_SESSION, sizeof(s), 1, 1);
	s.kind = GS_SESSION_START;
	s.mode = 3;
	assert_int_equal(gs_event_check(&s, sizeof(s), &why), -1);
	s.mode = GS_MODE_RUN;
	assert_int_equal(gs_event_check(&s, sizeof(s), &why), 0);
}

/* Host facts: strings must end within their fields; a process record is cut after its
 * command line. */
static void host_facts_checked(void **state)
{
	static struct gs_ev_host h;
	static struct gs_ev_gpu_info g;
	static struct gs_ev_proc_info i;
	static struct gs_ev_blockdev b;
	const char *why;
	__u32 cut = (__u32)offsetof(struct gs_ev_proc_info, cmdline) + 8;

	(void)state;
	hdr(&h, GS_EV_HOST, sizeof(h), 0, 1);
	h.h.source = GS_SRC_GPUSCOPE;
	assert_int_equal(gs_event_check(&h, sizeof(h), &why), 0);
	memset(h.cpu, 'x', sizeof(h.cpu));
	assert_int_equal(gs_event_check(&h, sizeof(h), &why), -1);
	hdr(&g, GS_EV_GPU_INFO, sizeof(g), 0, 1);
	g.gpu = GS_GPUS_MAX;
	assert_int_equal(gs_event_check(&g, sizeof(g), &why), -1);
	g.gpu = 3;
	assert_int_equal(gs_event_check(&g, sizeof(g), &why), 0);
	memset(g.uuid, 'x', sizeof(g.uuid));
	assert_int_equal(gs_event_check(&g, sizeof(g), &why), -1);
	hdr(&i, GS_EV_PROC_INFO, cut, 7, 1);
	memcpy(i.cmdline, "a b", 4);
	i.cmdline_len = 3;
	assert_int_equal(gs_event_check(&i, cut, &why), 0);
	i.cmdline_len = 8; /* (its NUL past the record's end) */
	assert_int_equal(gs_event_check(&i, cut, &why), -1);
	i.cmdline_len = 3;
	memset(i.cgroup, 'c', sizeof(i.cgroup));
	assert_int_equal(gs_event_check(&i, cut, &why), -1);
	i.cgroup[0] = 0;
	i.h.size = sizeof(i) + 8;
	assert_int_equal(gs_event_check(&i, sizeof(i) + 8, &why), -1);
	hdr(&b, GS_EV_BLOCKDEV, sizeof(b), 0, 1);
	assert_int_equal(gs_event_check(&b, sizeof(b), &why), 0);
	memset(b.name, 'd', sizeof(b.name));
	assert_int_equal(gs_event_check(&b, sizeof(b), &why), -1);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(valid_launch_passes),	    cmocka_unit_test(wrong_sizes_fail),
	cmocka_unit_test(bad_type_source_api_fail), cmocka_unit_test(kname_bounds),
	cmocka_unit_test(enum_fields_checked),	    cmocka_unit_test(host_facts_checked),
};
UNIT_MAIN(tests)
