// SPDX-License-Identifier: MIT
/* Recordings: round trip, and every way a file can be wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "unit.h"
#include "core/recording.h"

static char path[64];

static int make_path(void **state)
{
	int fd;

	strcpy(path, "/tmp/gs-unit-recXXXXXX");
	fd = mkstemp(path);

	(void)state;
	if (fd >= 0)
		close(fd);
	return fd < 0;
}

static int drop_path(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static void write_three(void)
{
	struct recording *r = recording__create(path);
	struct gs_ev_launch l;
	struct gs_ev_kname k;
	size_t kn = offsetof(struct gs_ev_kname, name) + 16;

	assert_non_null(r);
	hdr(&l, GS_EV_LAUNCH, sizeof(l), 7, 100);
	l.c.api = GS_API_CU_LAUNCH_KERNEL;
	l.func = 0xabc;
	assert_int_equal(recording__write(r, &l.h), 0);
	hdr(&k, GS_EV_KNAME, (__u32)kn, 7, 50);
	strcpy(k.name, "_Z6vecAddPKfS0_Pfi");
	k.name[15] = 0;
	k.len = 15;
	assert_int_equal(recording__write(r, &k.h), 0);
	l.func = 0xdef;
	assert_int_equal(recording__write(r, &l.h), 0);
	assert_int_equal(recording__close(r), 0);
}

static void round_trip(void **state)
{
	const struct gs_hdr *ev;
	struct recording *r;
	char err[256];

	(void)state;
	write_three();
	r = recording__open(path, err, sizeof(err));
	assert_non_null(r);
	assert_int_equal(recording__next(r, &ev, err, sizeof(err)), 1);
	assert_int_equal(ev->type, GS_EV_LAUNCH);
	assert_int_equal(((const struct gs_ev_launch *)ev)->func, 0xabc);
	assert_int_equal(recording__next(r, &ev, err, sizeof(err)), 1);
	assert_int_equal(ev->type, GS_EV_KNAME);
	assert_string_equal(((const struct gs_ev_kname *)ev)->name, "_Z6vecAddPKfS0_");
	assert_int_equal(recording__next(r, &ev, err, sizeof(err)), 1);
	assert_int_equal(((const struct gs_ev_launch *)ev)->func, 0xdef);
	assert_int_equal(recording__next(r, &ev, err, sizeof(err)), 0);
	recording__close(r);
}

static void truncated_says_where(void **state)
{
	const struct gs_hdr *ev;
	struct recording *r;
	char err[256];
	long size;
	FILE *f;

	(void)state;
	write_three();
	f = fopen(path, "r+");
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fclose(f);
	assert_int_equal(truncate(path, size - 10), 0);
	r = recording__open(path, err, sizeof(err));
	assert_non_null(r);
	assert_int_equal(recording__next(r, &ev, err, sizeof(err)), 1);
	assert_int_equal(recording__next(r, &ev, err, sizeof(err)), 1);
	assert_int_equal(recording__next(r, &ev, err, sizeof(err)), -1);
	/* 16-byte header + 96-byte launch + 72-byte name record */
	assert_string_equal(err, "truncated record at byte 184 (86 of 96 bytes)");
	recording__close(r);
}

static void corrupt_record_rejected(void **state)
{
	const struct gs_hdr *ev;
	struct recording *r;
	char err[256];
	__u32 bad = 7;
	FILE *f;

	(void)state;
	write_three();
	f = fopen(path, "r+");
	fseek(f, 16 + 4, SEEK_SET); /* the first record's size field */
	fwrite(&bad, sizeof(bad), 1, f);
	fclose(f);
	r = recording__open(path, err, sizeof(err));
	assert_non_null(r);
	assert_int_equal(recording__next(r, &ev, err, sizeof(err)), -1);
	assert_string_equal(err, "corrupt record at byte 16 (size 7)");
	recording__close(r);
}

static void not_a_recording(void **state)
{
	char err[256], want[128], hdr[16];
	FILE *f = fopen(path, "w");

	(void)state;
	fputs("hello, this is text\n", f);
	fclose(f);
	assert_null(recording__open(path, err, sizeof(err)));
	assert_non_null(strstr(err, "is not a gpuscope recording"));
	/* A format from a later gpuscope. */
	memcpy(hdr, "GPUSCOPE\x00\x00\x00\x00\x10\x00\x00\x00", 16);
	hdr[8] = GS_REC_VERSION + 1;
	f = fopen(path, "w");
	fwrite(hdr, 16, 1, f);
	fclose(f);
	assert_null(recording__open(path, err, sizeof(err)));
	snprintf(want, sizeof(want), "format %d, this gpuscope reads format %d", GS_REC_VERSION + 1,
		 GS_REC_VERSION);
	assert_non_null(strstr(err, want));
	assert_null(recording__open("/nonexistent/x", err, sizeof(err)));
	assert_non_null(strstr(err, "No such file"));
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup_teardown(round_trip, make_path, drop_path),
	cmocka_unit_test_setup_teardown(truncated_says_where, make_path, drop_path),
	cmocka_unit_test_setup_teardown(corrupt_record_rejected, make_path, drop_path),
	cmocka_unit_test_setup_teardown(not_a_recording, make_path, drop_path),
};
UNIT_MAIN(tests)
