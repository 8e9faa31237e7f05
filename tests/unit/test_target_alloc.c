// SPDX-License-Identifier: MIT
/*
 * The parsers the in-process library runs inside traced programs, built as the library
 * builds them (GS_IN_TARGET: no xmalloc, nothing that exits), with each of their
 * allocations made to fail in turn: every one must come back as an error, never an exit or
 * a crash, and free what it had (the ASan build checks). Inputs: the fuzz seeds.
 */
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"
#include "core/alloc.h"
#include "core/util.h"
#include "ptx/bundle.h"
#include "ptx/fatbin.h"
#include "ptx/rewrite.h"
#include "ptx/translate.h"

static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *b;
	long len;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	b = malloc((size_t)len + 1);
	assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
	b[len] = 0;
	fclose(f);
	*n = (size_t)len;
	return b;
}

/*
 * fn(arg) with its 1st, 2nd, ... allocation failing, until a run makes fewer: each run with
 * a failure returns non-zero, the last returns 0. Returns the number of allocations seen.
 */
static unsigned long walk(int (*fn)(const void *arg), const void *arg)
{
	for (unsigned long n = 1;; n++) {
		int r;

		gs_alloc_fail_at(n);
		r = fn(arg);
		if (gs_alloc_fail_at(0)) {
			assert_int_equal(r, 0);
			return n - 1;
		}
		if (r == 0)
			fail_msg("allocation %lu failed, yet the call said it succeeded", n);
	}
}

struct input {
	unsigned char *b;
	size_t n;
};

static int fatbin_all(const void *arg)
{
	const struct input *in = arg;
	struct fatbin fb;
	char err[256];
	int r = 0;

	if (fatbin_parse(in->b, in->n, &fb, err, sizeof(err)))
		return -1;
	for (size_t i = 0; i < fb.n && !r; i++) {
		unsigned char *out;
		size_t n;

		r = fatbin_payload(&fb.e[i], &out, &n, err, sizeof(err));
		free(out);
	}
	fatbin_free(&fb);
	return r;
}

static void fatbins(void **state)
{
	static const char *const files[] = { "tests/fuzz/seeds/fatbin/k-speed.fatbin",
					     "tests/fuzz/seeds/fatbin/k-size.fatbin",
					     "tests/fuzz/seeds/fatbin/k-none.fatbin" };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		struct input in;

		in.b = slurp(files[i], &in.n);
		/* (the container, and each entry's payload) */
		assert_true(walk(fatbin_all, &in) >= 2);
		free(in.b);
	}
}

static int bundle_one(const void *arg)
{
	const struct input *in = arg;
	struct bundle b;
	char err[256];

	if (bundle_parse((const char *)in->b, in->n, &b, err, sizeof(err)))
		return -1;
	bundle_free(&b);
	return 0;
}

static int snapshot_one(const void *arg)
{
	const struct input *in = arg;
	struct snapshot s;
	char err[256];

	if (snapshot_parse(in->b + 1, in->n - 1, in->b[0] % 8, &s, err, sizeof(err)))
		return -1;
	snapshot_free(&s);
	return 0;
}

static void bundles(void **state)
{
	struct input in;

	(void)state;
	in.b = slurp("tests/fuzz/seeds/probe/bundle", &in.n);
	in.b++; /* (the fuzz target's first byte says which) */
	in.n--;
	assert_true(walk(bundle_one, &in) >= 5);
	free(in.b - 1);
	/* (a snapshot is gpuscope's to read, but shares the file) */
	in.b = (unsigned char *)"\x03gpuscope-probe-snapshot 1\npid 7\nkernel 0 1 5 2 k\n"
				"note a\nstat b\nctx 0 90\ndata 0 4\nABCDdata 2 2\nEFend\n";
	in.n = strlen((const char *)in.b);
	assert_true(walk(snapshot_one, &in) >= 7);
}

static int rewrite_one(const void *arg)
{
	const struct input *in = arg;
	static const struct ptx_probe probes[] = {
		{ "*", PTX_ENTRY, "gs_probe_entry" },
		{ "*", PTX_EXIT, "gs_probe_exit" },
		{ "*", PTX_LOAD, "gs_probe_load" },
		{ "*", PTX_STORE, "gs_probe_store" },
	};
	struct ptx_rewrite_opts o = { .launch_param = true };
	struct ptx_rewrite_stats st;
	struct strbuf out = { 0 };
	char err[256];
	int r;

	r = ptx_rewrite((const char *)in->b, in->n, "// probes\n", probes, ARRAY_SIZE(probes), &o,
			&out, &st, err, sizeof(err));
	if (!r)
		ptx_rewrite_stats_free(&st);
	sb_free(&out);
	return r;
}

static void ptx(void **state)
{
	struct input in;

	(void)state;
	in.b = slurp("tests/fuzz/seeds/ptx_rewrite/generic-and-predicated.ptx", &in.n);
	assert_true(walk(rewrite_one, &in) >= 4);
	free(in.b);
}

static int translate_one(const void *arg)
{
	const struct input *in = arg;
	struct strbuf out = { 0 };
	char err[256];
	int r;

	r = bpf_to_ptx_module((const struct bpf_insn *)in->b, in->n / sizeof(struct bpf_insn), "f",
			      90, &out, err, sizeof(err));
	sb_free(&out);
	return r;
}

static void bpf(void **state)
{
	struct input in;

	(void)state;
	in.b = slurp("tests/fuzz/seeds/bpf2ptx/maps-hash.bin", &in.n);
	assert_true(walk(translate_one, &in) >= 3);
	free(in.b);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(fatbins),
	cmocka_unit_test(bundles),
	cmocka_unit_test(ptx),
	cmocka_unit_test(bpf),
};
UNIT_MAIN(tests)
