// SPDX-License-Identifier: MIT
/* Text utilities: demangling and shortening, JSON escaping, number parsing and formats. */
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"
#include "core/demangle.h"
#include "core/json.h"
#include "core/util.h"

static void demangles_cuda_names(void **state)
{
	char *d;

	(void)state;
	d = demangle("_Z6vecAddPKfS0_Pfi");
	assert_string_equal(d, "vecAdd(float const*, float const*, float*, int)");
	free(d);
	d = demangle("triton_poi_fused_add_0"); /* C names stay as they are */
	assert_string_equal(d, "triton_poi_fused_add_0");
	free(d);
	d = demangle("_Zbroken");
	assert_string_equal(d, "_Zbroken");
	free(d);
	d = demangle("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"
		     "11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_");
	assert_string_equal(d, "void at::native::vectorized_elementwise_kernel<4, "
			       "at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, "
			       "at::native::FillFunctor<float>, std::array<char*, 1ul>)");
	free(d);
}

static void shortens_innermost_first(void **state)
{
	char buf[256];
	const char *n = "void at::native::vectorized_elementwise_kernel<4, "
			"at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, "
			"at::native::FillFunctor<float>, std::array<char*, 1ul>)";

	(void)state;
	assert_string_equal(shorten_name("f(int)", 40, buf, sizeof(buf)), "f(int)");
	shorten_name(n, 80, buf, sizeof(buf));
	assert_true(strlen(buf) <= 80);
	assert_string_equal(buf, "void at::native::vectorized_elementwise_kernel<...>(...)");
	shorten_name(n, 110, buf, sizeof(buf));
	assert_string_equal(buf, "void at::native::vectorized_elementwise_kernel<...>(int, "
				 "at::native::FillFunctor<...>, std::array<...>)");
	shorten_name("abcdefghijklmnopqrstuvwxyz", 10, buf, sizeof(buf));
	assert_string_equal(buf, "abcdefg...");
}

static char *json_of(const char *s)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);

	json_write_string(f, s);
	fclose(f);
	return out;
}

static void json_escapes(void **state)
{
	char *j;

	(void)state;
	j = json_of("a\"b\\c\n\t\x01");
	assert_string_equal(j, "\"a\\\"b\\\\c\\n\\t\\u0001\"");
	free(j);
	j = json_of("caf\xc3\xa9"); /* valid UTF-8 passes through */
	assert_string_equal(j, "\"caf\xc3\xa9\"");
	free(j);
	j = json_of("bad\xff\xc3(end"); /* invalid bytes become U+FFFD */
	assert_string_equal(j, "\"bad\\ufffd\\ufffd(end\"");
	free(j);
	j = json_of("\xed\xa0\x80"); /* an encoded surrogate is not UTF-8 */
	assert_string_equal(j, "\"\\ufffd\\ufffd\\ufffd\"");
	free(j);
}

static void json_structure(void **state)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	struct json j;

	(void)state;
	json_init(&j, f);
	json_obj_begin(&j, NULL);
	json_u64(&j, "a", 1);
	json_arr_begin(&j, "b");
	json_i64(&j, NULL, -2);
	json_f64(&j, NULL, 1.0 / 0.0);
	json_arr_end(&j);
	json_obj_begin(&j, "c");
	json_obj_end(&j);
	json_obj_end(&j);
	json_finish(&j);
	fclose(f);
	assert_string_equal(
		out, "{\n  \"a\": 1,\n  \"b\": [\n    -2,\n    null\n  ],\n  \"c\": {}\n}\n");
	free(out);
}

static void parses_numbers(void **state)
{
	__u64 v;
	__u32 u;
	double d;

	(void)state;
	assert_int_equal(parse_size("16M", &v), 0);
	assert_int_equal(v, 16ULL << 20);
	assert_int_equal(parse_size("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_not_equal(parse_size("-1", &v), 0);
	assert_int_not_equal(parse_size("12Q", &v), 0);
	assert_int_not_equal(parse_size("", &v), 0);
	assert_int_not_equal(parse_size("99999999999999999999", &v), 0);
	assert_int_not_equal(parse_size("17179869184G", &v), 0);
	assert_int_equal(parse_u32("4294967295", &u), 0);
	assert_int_not_equal(parse_u32("4294967296", &u), 0);
	assert_int_not_equal(parse_u32("12x", &u), 0);
	assert_int_not_equal(parse_u32("+3", &u), 0);
	assert_int_equal(parse_seconds("2.5", &d), 0);
	assert_true(d == 2.5);
	assert_int_not_equal(parse_seconds("0", &d), 0);
	assert_int_not_equal(parse_seconds("nan", &d), 0);
	assert_int_not_equal(parse_seconds("-3", &d), 0);
}

static void formats(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(fmt_bytes(b, sizeof(b), 512), "512 B");
	assert_string_equal(fmt_bytes(b, sizeof(b), 1536), "1.50 KiB");
	assert_string_equal(fmt_bytes(b, sizeof(b), 3.0 * (1 << 30)), "3.00 GiB");
	assert_string_equal(fmt_dur(b, sizeof(b), 1500), "1.5 us");
	assert_string_equal(fmt_dur(b, sizeof(b), 2.5e9), "2.50 s");
	assert_string_equal(fmt_count(b, sizeof(b), 123456), "123.5k");
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(demangles_cuda_names), cmocka_unit_test(shortens_innermost_first),
	cmocka_unit_test(json_escapes),		cmocka_unit_test(json_structure),
	cmocka_unit_test(parses_numbers),	cmocka_unit_test(formats),
};
UNIT_MAIN(tests)
