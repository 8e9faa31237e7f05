// SPDX-License-Identifier: MIT
/* Percentiles of the log-linear histogram against exact ones from sorted samples. */
#include <stdlib.h>

#include "unit.h"
#include "core/hist.h"

static int cmp_u64(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

/* Within the bucket's half-width: 1/32 of the value, or exact below 16. */
static void assert_close(__u64 got, __u64 want)
{
	__u64 tol = want < 16 ? 0 : want / 32 + 1;

	if (got + tol < want || got > want + tol)
		fail_msg("quantile %llu, exact %llu", (unsigned long long)got,
			 (unsigned long long)want);
}

static void quantiles_match_sorted_samples(void **state)
{
	static __u64 v[20000];
	static struct hist h;
	unsigned int seed = 7;
	const double qs[] = { 0, 0.01, 0.25, 0.5, 0.9, 0.99, 1 };

	(void)state;
	for (size_t i = 0; i < 20000; i++) {
		/* Log-uniform from 1 ns to ~17 s: every octave gets samples. */
		v[i] = 1ULL << (rand_r(&seed) % 34);
		v[i] += (__u64)rand_r(&seed) % v[i];
		hist__add(&h, v[i]);
	}
	qsort(v, 20000, sizeof(v[0]), cmp_u64);
	assert_int_equal(h.count, 20000);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
		assert_close(hist__quantile(&h, qs[i]), v[(size_t)(qs[i] * 19999)]);
}

static void small_values_are_exact_and_merge_adds(void **state)
{
	static struct hist a, b;

	(void)state;
	assert_int_equal(hist__quantile(&a, 0.5), 0); /* empty */
	for (__u64 x = 0; x < 10; x++)
		hist__add(&a, x);
	for (__u64 x = 10; x < 16; x++)
		hist__add(&b, x);
	hist__merge(&a, &b);
	assert_int_equal(a.count, 16);
	assert_int_equal(hist__quantile(&a, 0), 0);
	assert_int_equal(hist__quantile(&a, 0.5), 7);
	assert_int_equal(hist__quantile(&a, 1), 15);
	/* Beyond the last octave: counted in the last bucket, not lost. */
	hist__add(&b, ~0ULL);
	assert_int_equal(b.count, 7);
	assert_true(hist__quantile(&b, 1) > (1ULL << 43));
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(quantiles_match_sorted_samples),
	cmocka_unit_test(small_values_are_exact_and_merge_adds),
};
UNIT_MAIN(tests)
