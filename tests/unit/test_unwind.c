// SPDX-License-Identifier: MIT
/*
 * The in-process plane's unwinder (src/inject/unwind.c) against glibc's backtrace(), which
 * it stands in for: the same return addresses from the same place, through plain and deep
 * call chains, a frame of 256 KiB, a frame kept by rbp (alloca), realigned stacks (GCC's
 * DRAP among them), a signal's frame (whose rule it does not keep: backtrace() takes it) on
 * the thread's stack and on
 * a stack of its own, many threads at once, and after a library is unloaded (its rules
 * dropped).
 */
#include <alloca.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "unit.h"
#include "inject/inject.h"

#define MAX 128

static volatile int sink;

/* (The library's is glibc's dlsym past its own: resolve.c.) */
void *gs_real_sym(void *handle, const char *name)
{
	return dlsym(handle, name);
}

/* Both unwinders from here; their frames past the first (each its own call's return here)
 * equal, and as many. (Under ASan backtrace() is ASan's, whose own frame comes first.) */
__attribute__((noinline)) static int both(void)
{
	void *ours[MAX], *ref[MAX + 2];
	int n = gs_unwind(ours, MAX), m = backtrace(ref, MAX + 2), skip;

	skip = m > 2 && n > 1 && ref[1] != ours[1] && ref[2] == ours[1];
	m -= skip;
	if (n != (m < MAX ? m : MAX) || n < 2) {
		fprintf(stderr, "unwound %d frames, backtrace() %d\n", n, m);
		return 1;
	}
	for (int i = 1; i < n; i++)
		if (ours[i] != ref[i + skip]) {
			fprintf(stderr, "frame %d: %p, backtrace() %p\n", i, ours[i],
				ref[i + skip]);
			return 1;
		}
	return 0;
}

__attribute__((noinline)) static int deep(int d)
{
	int r = d ? deep(d - 1) : both();

	sink += d; /* (no tail call) */
	return r;
}

__attribute__((noinline)) static int big_frame(int d)
{
	volatile char big[256 * 1024];

	big[d] = 1;
	big[sizeof(big) - 1] = big[d];
	return deep(d) + big[sizeof(big) - 1] - 1;
}

__attribute__((noinline)) static int by_rbp(int d)
{
	volatile char *p = alloca((size_t)d * 64 + 16);

	p[0] = 1;
	return deep(d) + p[0] - 1;
}

__attribute__((noinline)) static int realigned(int d)
{
	volatile char a[64] __attribute__((aligned(64)));

	a[0] = (char)d;
	return deep(d) + a[0] - (char)d;
}

/* (GCC realigns this one with a register of its own, DRAP: a CFA read from rbp - 8, and rbp
 * saved at rbp.) */
__attribute__((noinline)) static int drap(int d)
{
	volatile char a[64] __attribute__((aligned(64)));
	volatile char *p = alloca((size_t)d * 64 + 16);

	a[0] = (char)d;
	p[0] = a[0];
	return deep(d) + p[0] - (char)d;
}

static __u64 memo_frames(void)
{
	__u64 r, l, w, m;

	gs_unwind_counts(&r, &l, &w, &m);
	return m;
}

static void counts(__u64 *rules, __u64 *libgcc, __u64 *worked)
{
	__u64 m;

	gs_unwind_counts(rules, libgcc, worked, &m);
}

static void chains(void **state)
{
	__u64 r[2], l[2], w[2];

	(void)state;
	for (int k = 0; k < 2; k++) {
		assert_int_equal(deep(0), 0);
		assert_int_equal(deep(5), 0);
		assert_int_equal(deep(150), 0); /* (more frames than MAX) */
		assert_int_equal(big_frame(3), 0);
		assert_int_equal(by_rbp(7), 0);
		counts(&r[k], &l[k], &w[k]);
	}
	/* All by the rules; the second time every rule kept, none worked out anew. */
	assert_true(r[1] - r[0] == 5 && l[1] == l[0] && r[0] >= 5 && l[0] == 0);
	assert_true(w[0] > 0 && w[1] == w[0]);
}

static void realigned_stack(void **state)
{
	__u64 r0, l0, w0, r1, l1, w1;

	(void)state;
	counts(&r0, &l0, &w0);
	assert_int_equal(realigned(4), 0);
	assert_int_equal(drap(4), 0);
	counts(&r1, &l1, &w1);
	assert_true(l1 == l0 && r1 - r0 == 2); /* (all by the rules) */
}

static volatile int in_handler;

static void handler(int sig)
{
	(void)sig;
	in_handler = deep(3) ? 2 : 1;
}

static void signal_frames(void **state)
{
	struct sigaction sa = { .sa_handler = handler }, old;
	stack_t alt = { .ss_size = 1 << 16 }, old_alt;
	__u64 r0, l0, w0, r1, l1, w1;

	(void)state;
	alt.ss_sp = malloc(alt.ss_size);
	assert_non_null(alt.ss_sp);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	counts(&r0, &l0, &w0);
	raise(SIGUSR1); /* through the signal's frame: backtrace() */
	assert_int_equal(in_handler, 1);
	counts(&r1, &l1, &w1);
	assert_true(l1 == l0 + 1 && r1 == r0);
	/* On a stack of its own: not this thread's stack, backtrace() too. */
	assert_int_equal(sigaltstack(&alt, &old_alt), 0);
	sa.sa_flags = SA_ONSTACK;
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	in_handler = 0;
	raise(SIGUSR1);
	assert_int_equal(in_handler, 1);
	counts(&r0, &l0, &w0);
	assert_true(l0 == l1 + 1 && r0 == r1);
	sigaltstack(&old_alt, NULL);
	sigaction(SIGUSR1, &old, NULL);
	free(alt.ss_sp);
}

static void *thread_main(void *arg)
{
	long bad = 0;

	for (int i = 0; i < 2000; i++)
		bad += deep((int)((long)arg + i) % 40) + by_rbp(i % 5);
	return (void *)bad;
}

static void threads(void **state)
{
	pthread_t t[8];
	void *bad;

	(void)state;
	for (long i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&t[i], NULL, thread_main, (void *)i), 0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(pthread_join(t[i], &bad), 0);
		assert_null(bad);
	}
}

/* A thread's memo of its last stacks: a stack again takes every rule from it; stacks of other
 * depths and shapes in between, and the memo off (ab.c's "+nomemo"), unwind as backtrace()
 * does all the same. */
static void memo(void **state)
{
	__u64 m0, m1, m2;

	(void)state;
	assert_int_equal(deep(30), 0);
	m0 = memo_frames();
	assert_int_equal(deep(30), 0);
	m1 = memo_frames();
	assert_true(m1 - m0 >= 30); /* (the chain's frames, and the test's below it) */
	for (int i = 0; i < 50; i++) {
		gs_memo_off = i % 5 == 4;
		assert_int_equal(deep(i % 7), 0);
		assert_int_equal(by_rbp(i % 3), 0);
		assert_int_equal(realigned(i % 4), 0);
		assert_int_equal(drap(i % 2), 0);
		assert_int_equal(deep(40 - i % 11), 0);
	}
	gs_memo_off = true;
	m1 = memo_frames();
	assert_int_equal(deep(30), 0);
	m2 = memo_frames();
	assert_true(m2 == m1);
	gs_memo_off = false;
}

/* A library's function that calls back here (alias_lib.c's alias_call). */
static void unloaded(void **state)
{
	char path[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	__u64 r[3], l[3], w[3];

	(void)state;
	assert_true(n > 0);
	path[n] = 0;
	slash = strrchr(path, '/');
	assert_non_null(slash);
	strcpy(slash, "/../unit/alias_lib.so");
	for (int k = 0; k < 3; k++) {
		if (k == 2) {
			void *lib = dlopen(path, RTLD_NOW);

			assert_non_null(lib);
			dlclose(lib);
		}
		assert_int_equal(deep(2), 0);
		counts(&r[k], &l[k], &w[k]);
	}
	assert_true(w[1] == w[0]); /* (kept) */
	assert_true(w[2] > w[1]);  /* (dropped with the table at the unload, worked out again) */
	assert_true(r[2] == r[1] + 1 && l[2] == l[1]);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chains),	 cmocka_unit_test(realigned_stack),
		cmocka_unit_test(signal_frames), cmocka_unit_test(threads),
		cmocka_unit_test(memo),		 cmocka_unit_test(unloaded),
	};

	gs_unwind_init();
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
