// SPDX-License-Identifier: MIT
/* The in-process plane's clock (src/inject/clock.c): it must read as CLOCK_MONOTONIC, the
 * clock of every other event, whether it extrapolates the TSC or not, and never go back. */
#include <stdlib.h>
#include <time.h>

#include "unit.h"
#include "../../src/inject/clock.c"

static __u64 mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

/* Over 60 ms (windows renewed, the rate measured), readings bracketed by clock_gettime
 * fall between the two (give or take 2 us: a virtual CPU may be descheduled in between),
 * and one thread's readings never decrease. */
static void agrees_and_is_monotonic(void)
{
	__u64 end = mono() + 60000000ULL, prev = 0;
	int n = 0, outside = 0;

	while (mono() < end) {
		__u64 a = mono(), t = gs_clock(), b = mono();

		assert_true(t >= prev);
		prev = t;
		if (t + 2000 < a || t > b + 2000)
			outside++;
		n++;
	}
	assert_true(n > 1000);
	assert_true(outside * 100 <= n); /* at most 1% */
}

static void tsc_path(void **state)
{
	(void)state;
	unsetenv("GPUSCOPE_INJECT_CLOCK");
	memset(&C, 0, sizeof(C));
	gs_clock_init();
#if defined(__x86_64__)
	if (!tsc_is_clocksource())
		skip();
	assert_true(C.tsc);
	agrees_and_is_monotonic();
	assert_true(C.mult != 0); /* the rate was measured: the TSC path really ran */
#else
	skip();
#endif
}

static void mono_path(void **state)
{
	(void)state;
	setenv("GPUSCOPE_INJECT_CLOCK", "mono", 1);
	memset(&C, 0, sizeof(C));
	gs_clock_init();
	assert_false(C.tsc);
	agrees_and_is_monotonic();
	unsetenv("GPUSCOPE_INJECT_CLOCK");
}

/* A thread that sleeps past its window renews its anchor and still agrees. */
static void sleeps_past_window(void **state)
{
	struct timespec ts = { 0, 25000000 };

	(void)state;
	memset(&C, 0, sizeof(C));
	gs_clock_init();
	agrees_and_is_monotonic();
	for (int i = 0; i < 3; i++) {
		__u64 a, t, b;

		nanosleep(&ts, NULL);
		a = mono();
		t = gs_clock();
		b = mono();
		assert_true(t + 2000 >= a && t <= b + 2000);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(tsc_path),
		cmocka_unit_test(mono_path),
		cmocka_unit_test(sleeps_past_window),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
