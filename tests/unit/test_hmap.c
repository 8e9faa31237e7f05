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

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(matches_reference),
};
UNIT_MAIN(tests)
