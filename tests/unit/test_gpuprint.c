// SPDX-License-Identifier: MIT
/*
 * Printing from the GPU (src/ptx/gpuprint.c): a printing record's line as bpf_trace_printk
 * formats it (conversions, flags, widths, lengths; at most three arguments; %s not read),
 * ebpf_puts's text as it is, and records that are not printing records, or lie about
 * their length, refused without reading past them.
 */
#include <stdlib.h>

#include "unit.h"
#include "ptx/gpuprint.h"
#include "ptx/translate.h"

/* A record of helper id with text and three arguments; its bytes in rec, its length. */
static size_t rec_of(unsigned char *rec, unsigned int id, const char *text, unsigned long long a1,
		     unsigned long long a2, unsigned long long a3)
{
	unsigned int len = (unsigned int)strlen(text);
	unsigned long long a[3] = { a1, a2, a3 };

	memcpy(rec, &id, 4);
	memcpy(rec + 4, &len, 4);
	memcpy(rec + 8, a, sizeof(a));
	memcpy(rec + GS_PRINT_HDR, text, len);
	return GS_PRINT_HDR + len;
}

static const char *line(unsigned int id, const char *text, unsigned long long a1,
			unsigned long long a2, unsigned long long a3)
{
	static char out[512];
	unsigned char rec[GS_RING_REC_MAX];
	size_t n = rec_of(rec, id, text, a1, a2, a3);

	assert_int_equal(gpu_print_format(rec, n, out, sizeof(out)), 0);
	return out;
}

static void conversions(void **state)
{
	(void)state;
	assert_string_equal(line(6, "block %lu thread %lu on SM %lu\n", 2, 5, 7),
			    "block 2 thread 5 on SM 7");
	assert_string_equal(line(6, "%-4d|%04x|%c|%%", (unsigned long long)-7, 0xab, 'q'),
			    "-7  |00ab|q|%");
	/* int, not long: the low 32 bits; long: all 64 */
	assert_string_equal(
		line(6, "%d %u %ld", 0xffffffffULL, 0x1ffffffffULL, (unsigned long long)-5),
		"-1 4294967295 -5");
	assert_string_equal(line(6, "%llx %X %#x %o %hhd %hu", 0xdeadbeefcafeULL, 0xab, 0x10),
			    "deadbeefcafe AB 0x10 %o %hhd %hu");
	assert_string_equal(line(6, "%p %+d % d %5d|%-5u|", 0x1000, 3, 4),
			    "0x1000 +3  4 %5d|%-5u|");
	/* %s: a GPU address, not read; unknown conversions and a lone % copied */
	assert_string_equal(line(6, "%s %q %", 1, 2, 3), "(string) %q %");
	/* ebpf_puts: the text as it is, conversions and all */
	assert_string_equal(line(501, "done %d\n", 0, 0, 0), "done %d");
}

static void refused(void **state)
{
	unsigned char rec[GS_RING_REC_MAX];
	char out[64] = "x";
	size_t n = rec_of(rec, 6, "hello", 0, 0, 0);
	unsigned int big = 1000;

	(void)state;
	assert_int_equal(gpu_print_format(rec, GS_PRINT_HDR - 1, out, sizeof(out)), -1);
	assert_string_equal(out, "");
	memcpy(rec + 4, &big, 4); /* longer than the record */
	assert_int_equal(gpu_print_format(rec, n, out, sizeof(out)), -1);
	n = rec_of(rec, 25, "hello", 0, 0, 0); /* not a printing helper */
	assert_int_equal(gpu_print_format(rec, n, out, sizeof(out)), -1);
	/* a line longer than out: cut, terminated */
	n = rec_of(rec, 6, "%64d|", 1, 0, 0);
	assert_int_equal(gpu_print_format(rec, n, out, 8), 0);
	assert_int_equal(strlen(out), 7);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(conversions),
		cmocka_unit_test(refused),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
