// SPDX-License-Identifier: MIT
/* The hash map against a plain array, through growth and backward-shift deletion. */
#include <stdlib.h>

#include "unit.h"
#include "core/hmap.h"

#define N 5000

static void matches_reference(void **state)
{
	static int present[N];
	struct hmap m = {};
	struct hmap_slot *s;
	unsigned int seed = 42;
	size_t live = 0, seen = 0;

	(void)state;
	for (int round = 0; round < 20 * N; round++) {
		int k = rand_r(&seed) % N;
		bool del = rand_r(&seed) % 3 == 0;

		if (del) {
			void *v = hmap_del(&m, (__u64)k, 7);

			assert_true((v != NULL) == (present[k] != 0));
			if (present[k])
				live--;
			present[k] = 0;
		} else {
			void *prev = hmap_put(&m, (__u64)k, 7, (void *)(uintptr_t)(k + 1));

			assert_true((prev != NULL) == (present[k] != 0));
			if (!present[k])
				live++;
			present[k] = 1;
		}
	}
	assert_int_equal(m.len, live);
	for (int k = 0; k < N; k++) {
		void *v = hmap_get(&m, (__u64)k, 7);

		assert_true(present[k] ? v == (void *)(uintptr_t)(k + 1) : v == NULL);
		assert_null(hmap_get(&m, (__u64)k, 8)); /* the second key matters */
	}
	hmap_for_each (&m, s)
		seen++;
	assert_int_equal(seen, live);
	hmap_free(&m);
}

static unsigned int freed;

static void count_free(void *v)
{
	freed++;
	free(v);
}

/* A process's entries by its pid in either key (shifted), all of them and no other. */
static void dropped_by_key(void **state)
{
	struct hmap m = { 0 };
	__u64 *a = hmap_get_or_new(&m, 5, 1, sizeof(*a));

	(void)state;
	*a = 42;
	assert_ptr_equal(hmap_get_or_new(&m, 5, 1, sizeof(*a)), a); /* (the same one) */
	assert_int_equal(*a, 42);
	for (__u64 i = 0; i < 1000; i++) {
		hmap_get_or_new(&m, i % 7, 1000 + i, 8);		   /* pid in k1 */
		hmap_get_or_new(&m, 200000 + i, 10 + i % 5, 8);		   /* pid in k2 */
		hmap_get_or_new(&m, (20 + i % 3) << 1 | 1, 300000 + i, 8); /* pid << 1 in k1 */
	}
	assert_int_equal(m.len, 3001);
	freed = 0;
	assert_int_equal(hmap_drop_key(&m, false, 0, 5, count_free), 144);
	assert_int_equal(freed, 144);
	assert_null(hmap_get(&m, 5, 1));
	assert_null(hmap_get(&m, 5, 1005));
	assert_non_null(hmap_get(&m, 4, 1004));
	assert_int_equal(hmap_drop_key(&m, true, 0, 12, count_free), 200);
	assert_null(hmap_get(&m, 200002, 12));
	assert_int_equal(hmap_drop_key(&m, false, 1, 21, count_free), 333);
	assert_null(hmap_get(&m, 43, 300001));
	assert_non_null(hmap_get(&m, 41, 300000));
	assert_int_equal(m.len, 3001 - 144 - 200 - 333);
	freed = 0;
	hmap_free_with(&m, count_free);
	assert_int_equal(freed, 3001 - 144 - 200 - 333);
	assert_int_equal(m.len, 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(matches_reference),
	cmocka_unit_test(dropped_by_key),
};
UNIT_MAIN(tests)
