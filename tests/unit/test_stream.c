// SPDX-License-Identifier: MIT
/* The event stream: filters before consumers, records a filter adds delivered before the
 * one that caused them, and a process retired once, after its retire record, when its exit
 * is in and no source holds it; a replay retires at the recorded retire records only. */
#include <errno.h>
#include <unistd.h>

#include "unit.h"
#include "core/event.h"
#include "core/stream.h"
#include "source/host.h"

struct seen {
	__u16 types[32];
	__u32 pids[32];
	unsigned int n;
	__u32 retired[8];
	unsigned int nretired;
	unsigned int retire_after; /* records delivered when the last callback came */
};

static void consume(void *ctx, const struct gs_hdr *ev)
{
	struct seen *s = ctx;

	if (s->n < 32) {
		s->types[s->n] = ev->type;
		s->pids[s->n++] = ev->pid;
	}
}

static void retired(void *ctx, __u32 pid)
{
	struct seen *s = ctx;

	if (s->nretired < 8)
		s->retired[s->nretired++] = pid;
	s->retire_after = s->n;
}

static void push_exit(struct stream *st, __u32 pid)
{
	struct gs_ev_proc p;

	hdr(&p, GS_EV_PROC, sizeof(p), pid, 10);
	p.kind = GS_PROC_EXIT;
	stream__push(st, &p.h);
}

static void retired_after_its_holds(void **state)
{
	struct stream *st = stream__new();
	struct seen s = { .n = 0 };

	(void)state;
	stream__subscribe(st, STREAM_ALL, consume, &s);
	stream__on_retire(st, retired, &s);
	stream__hold(st, 42);
	push_exit(st, 42);
	assert_int_equal(s.nretired, 0); /* (held: more of its records may come) */
	stream__release(st, 42);
	assert_int_equal(s.nretired, 1);
	assert_int_equal(s.retired[0], 42);
	/* The retire record went to the consumers first. */
	assert_int_equal(s.n, 2);
	assert_int_equal(s.types[1], GS_EV_RETIRE);
	assert_int_equal(s.pids[1], 42);
	assert_int_equal(s.retire_after, 2);
	stream__release(st, 42); /* (once only) */
	push_exit(st, 43);
	assert_int_equal(s.nretired, 2);
	assert_int_equal(s.retired[1], 43);
	stream__free(st);
}

static void replay_retires_at_the_records(void **state)
{
	struct stream *st = stream__new();
	struct seen s = { .n = 0 };
	struct gs_ev_retire r;

	(void)state;
	stream__replay(st);
	stream__subscribe(st, STREAM_ALL, consume, &s);
	stream__on_retire(st, retired, &s);
	push_exit(st, 42);
	assert_int_equal(s.nretired, 0);
	hdr(&r, GS_EV_RETIRE, sizeof(r), 42, 11);
	stream__push(st, &r.h); /* (not gpuscope's: ignored) */
	assert_int_equal(s.nretired, 0);
	r.h.source = GS_SRC_GPUSCOPE;
	stream__push(st, &r.h);
	assert_int_equal(s.nretired, 1);
	assert_int_equal(s.retired[0], 42);
	stream__free(st);
}

static const struct gs_hdr *add_before(void *ctx, const struct gs_hdr *ev)
{
	struct stream *st = ctx;
	struct gs_ev_blockdev b = { .dev = 1 };

	if (ev->type == GS_EV_BLOCK)
		stream__emit(st, &b.h, GS_EV_BLOCKDEV, sizeof(b), 0);
	return ev;
}

static void filter_records_come_first(void **state)
{
	struct stream *st = stream__new();
	struct seen s = { .n = 0 };
	struct gs_ev_block b;

	(void)state;
	stream__filter(st, STREAM_TYPE(GS_EV_BLOCK), add_before, st);
	stream__subscribe(st, STREAM_ALL, consume, &s);
	hdr(&b, GS_EV_BLOCK, sizeof(b), 5, 1);
	stream__push(st, &b.h);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.types[0], GS_EV_BLOCKDEV);
	assert_int_equal(s.types[1], GS_EV_BLOCK);
	assert_int_equal(stream__records(st), 2);
	stream__free(st);
}

static void driver_versions(void **state)
{
	char v[32];

	(void)state;
	host_parse_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  "
				  "Thu Oct 19 18:56:32 UTC 2023",
				  v, sizeof(v));
	assert_string_equal(v, "535.129.03");
	host_parse_driver_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
				  "580.65.06  Release Build  (dvs-builder@U16-I3-B03-4-3)  Sun Jul "
				  "27 06:54:38 UTC 2025",
				  v, sizeof(v));
	assert_string_equal(v, "580.65.06");
	host_parse_driver_version("NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.54.15", v,
				  sizeof(v));
	assert_string_equal(v, "550.54.15");
	host_parse_driver_version("nothing here 12", v, sizeof(v));
	assert_string_equal(v, "");
}

static void own_facts(void **state)
{
	struct gs_ev_proc_info i;
	struct gs_ev_host h;
	const char *why;
	__u32 size;

	(void)state;
	assert_int_equal(host_proc_facts((__u32)getpid(), &i, &size), 0);
	assert_non_null(strstr(i.cmdline, "test_stream"));
	assert_int_equal(i.cmdline_len, strlen(i.cmdline));
	assert_int_equal(i.uid, getuid());
	assert_true(size % 8 == 0 && size < sizeof(i));
	i.h = (struct gs_hdr){ .type = GS_EV_PROC_INFO, .source = GS_SRC_GPUSCOPE, .size = size };
	assert_int_equal(gs_event_check(&i, size, &why), 0);
	assert_int_equal(host_proc_facts(0x7ffffff0u, &i, &size), -ENOENT);
	host_facts(&h);
	h.h = (struct gs_hdr){ .type = GS_EV_HOST, .source = GS_SRC_GPUSCOPE, .size = sizeof(h) };
	assert_int_equal(gs_event_check(&h, sizeof(h), &why), 0);
	assert_true(h.cpus > 0 && h.memory > 0 && h.kernel[0] && h.gpuscope[0]);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(retired_after_its_holds),
	cmocka_unit_test(replay_retires_at_the_records),
	cmocka_unit_test(filter_records_come_first),
	cmocka_unit_test(driver_versions),
	cmocka_unit_test(own_facts),
};
UNIT_MAIN(tests)
