// SPDX-License-Identifier: MIT
/*
 * The launching threads' inboxes (src/inject/gputime_inbox.c), as gputime_cupti.c drives
 * them: slots put before a call and ended after it, drained under the caller's lock by
 * another thread. Every slot must be placed exactly once, in the order its launch began
 * across threads, and its call's end must reach it exactly once: in the slot (told to
 * place), by ended once placed, or through the producer (told where it was placed).
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "unit.h"
#include "inject/gputime_int.h"

#define MANY 200000

struct item {
	__u64 n, ts; /* which launch; when it began */
};

/* What the drain saw, by launch (1 + the thread's number in the high bits). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *placed, *end_known;
static __u64 last_ts, order_errors, nplaced, ways[2]; /* (ends: to place, to ended) */

static __u64 in_call_ns = ~0ULL; /* (drains place the slots in calls begun before this) */

static size_t slot_of(__u64 n)
{
	return (size_t)((n >> 32) * MANY + (n & 0xffffffffu));
}

static void place(void *body, const struct gt_inbox_end *end, struct gt_inbox_where *where)
{
	const struct item *it = body;
	size_t i = slot_of(it->n);

	placed[i]++;
	nplaced++;
	if (it->ts < last_ts)
		order_errors++;
	last_ts = it->ts;
	if (end) {
		assert_int_equal(end->call_ts, it->ts + 1);
		end_known[i]++;
		ways[0]++;
	}
	*where = (struct gt_inbox_where){ .qi = 1, .gen = 7, .seq = it->n };
}

static void ended(const struct gt_inbox_where *where, const struct gt_inbox_end *end)
{
	assert_int_equal(where->gen, 7);
	assert_int_equal(end->call_end, end->call_ts + 1);
	end_known[slot_of(where->seq)]++;
	ways[1]++;
}

static void drain_locked(void)
{
	pthread_mutex_lock(&lock);
	gt_inbox_drain(place, ended, in_call_ns);
	pthread_mutex_unlock(&lock);
}

static void reset(size_t n)
{
	free(placed);
	free(end_known);
	placed = calloc(n, 1);
	end_known = calloc(n, 1);
	assert_non_null(placed);
	assert_non_null(end_known);
	last_ts = order_errors = nplaced = 0;
	memset(ways, 0, sizeof(ways));
}

static __u64 clock_ts(void)
{
	static __u64 t;

	return __atomic_add_fetch(&t, 2, __ATOMIC_RELAXED);
}

/* One launch: put, then its call's end given (to the drain, or written where placed). */
static bool launch(__u64 n)
{
	struct item it = { .n = n, .ts = clock_ts() };
	struct gt_inbox_end end = { .call_ts = it.ts + 1, .call_end = it.ts + 2 };
	void *s = gt_inbox_put(&it, sizeof(it), it.ts);

	if (!s)
		return false;
	gt_inbox_end(s, &end);
	return true;
}

static volatile bool producing;

static void *producer(void *arg)
{
	__u64 t = (__u64)(unsigned long)arg;

	for (__u64 i = 0; i < MANY; i++)
		while (!launch(t << 32 | i))
			sched_yield(); /* (full: the drainer empties it) */
	return NULL;
}

static void *drainer(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&producing, __ATOMIC_ACQUIRE))
		drain_locked();
	drain_locked();
	return NULL;
}

/* Three threads launching while a fourth drains: each launch placed once, and its end
 * known once (given to place, or after its placement, to ended at a drain). Drains placing
 * slots in their calls (bound ~0), or never (0: the last drain, after the threads, places
 * what is left). */
static void race(__u64 bound)
{
	pthread_t p[3], d;

	reset(3 * MANY);
	producing = true;
	in_call_ns = bound;
	assert_int_equal(pthread_create(&d, NULL, drainer, NULL), 0);
	for (int t = 0; t < 3; t++)
		assert_int_equal(pthread_create(&p[t], NULL, producer, (void *)(unsigned long)t),
				 0);
	for (int t = 0; t < 3; t++)
		pthread_join(p[t], NULL);
	__atomic_store_n(&producing, false, __ATOMIC_RELEASE);
	pthread_join(d, NULL);
	in_call_ns = ~0ULL;
	drain_locked();
	assert_int_equal(nplaced, 3 * MANY);
	for (size_t i = 0; i < 3 * MANY; i++) {
		if (placed[i] != 1 || end_known[i] != 1)
			fail_msg("launch %zu placed %d times, its end known %d times", i, placed[i],
				 end_known[i]);
	}
	/* (Merged by when they began, up to what had been put when each drain looked.) */
	print_message("order errors: %llu of %d; ends given to place %llu, to ended %llu\n",
		      (unsigned long long)order_errors, 3 * MANY, (unsigned long long)ways[0],
		      (unsigned long long)ways[1]);
	in_call_ns = ~0ULL;
}

static void racing_threads(void **state)
{
	(void)state;
	race(~0ULL);
}

static void racing_threads_calls_left(void **state)
{
	(void)state;
	race(0);
	assert_int_equal(ways[1], 0); /* (no slot placed in its call) */
}

/* One thread alone: an end given before a drain reaches place; one given after its slot's
 * placement reaches ended at the next drain (no race: every branch taken on purpose). */
static void end_before_and_after_drain(void **state)
{
	struct item a = { .n = 0, .ts = 10 }, b = { .n = 1, .ts = 20 };
	struct gt_inbox_end ea = { .call_ts = 11, .call_end = 12 },
			    eb = { .call_ts = 21, .call_end = 22 };
	void *sa, *sb;

	(void)state;
	reset(MANY);
	drain_locked(); /* (what the thread left before) */
	reset(MANY);
	sa = gt_inbox_put(&a, sizeof(a), a.ts);
	sb = gt_inbox_put(&b, sizeof(b), b.ts);
	assert_non_null(sa);
	assert_non_null(sb);
	gt_inbox_end(sa, &ea); /* (kept for the drain) */
	drain_locked();
	assert_int_equal(placed[0], 1);
	assert_int_equal(end_known[0], 1); /* (given to place) */
	assert_int_equal(placed[1], 1);
	assert_int_equal(end_known[1], 0); /* (not ended yet) */
	gt_inbox_end(sb, &eb); /* (after its placement: written there at the next drain) */
	assert_int_equal(end_known[1], 0);
	drain_locked();
	assert_int_equal(end_known[1], 1);
	assert_int_equal(nplaced, 2);
	assert_int_equal(order_errors, 0);
}

/* A thread's box holds BOX_SLOTS; three quarters full, it asks to be drained; full, a put
 * fails (the launch timed otherwise) until a drain. */
static void full_box(void **state)
{
	struct gt_inbox_end e = { .call_ts = 1, .call_end = 2 };
	int n = 0, asked = -1;

	(void)state;
	reset(MANY);
	drain_locked();
	reset(MANY);
	for (;; n++) {
		struct item it = { .n = (__u64)n, .ts = (__u64)n * 2 };
		void *s = gt_inbox_put(&it, sizeof(it), it.ts);

		if (!s)
			break;
		e.call_ts = it.ts + 1;
		e.call_end = it.ts + 2;
		gt_inbox_end(s, &e);
		if (asked < 0 && gt_inbox_filling())
			asked = n + 1;
	}
	assert_int_equal(n, 4096);
	assert_int_equal(asked, 3072);
	drain_locked();
	assert_int_equal(nplaced, 4096);
	assert_false(gt_inbox_filling());
	assert_true(launch(5000));
}

static void *put_one(void *arg)
{
	assert_true(launch((__u64)(unsigned long)arg));
	return NULL;
}

/* A thread that ends gives its box back, with what it put still to be drained; the next
 * thread takes that box: 200 threads one after another launch (boxes are 128 at most), and
 * the drain places all their launches, in order. */
static void box_given_back(void **state)
{
	pthread_t t;

	(void)state;
	reset(MANY);
	drain_locked();
	reset(MANY);
	for (unsigned long i = 0; i < 200; i++) {
		assert_int_equal(pthread_create(&t, NULL, put_one, (void *)(100 + i)), 0);
		pthread_join(t, NULL);
	}
	drain_locked();
	assert_int_equal(nplaced, 200);
	for (int i = 100; i < 300; i++)
		assert_int_equal(placed[i], 1);
	assert_int_equal(order_errors, 0);
}

/* Threads holding their boxes until told to end (refused: one that got none). */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int holding_done, holding_go;

struct holder {
	pthread_t t;
	bool boxed;	   /* its first launch queued */
	int retried_after; /* refused: launches until one was queued, after the go (-1: never) */
};

static void *hold(void *arg)
{
	struct holder *h = arg;
	struct item it = { .n = 0, .ts = clock_ts() };
	struct gt_inbox_end e = { .call_ts = it.ts + 1, .call_end = it.ts + 2 };
	void *s = gt_inbox_put(&it, sizeof(it), it.ts);

	h->boxed = s != NULL;
	if (s)
		gt_inbox_end(s, &e);
	pthread_mutex_lock(&hold_lock);
	holding_done++;
	pthread_cond_broadcast(&hold_cond);
	while (holding_go < (h->boxed ? 1 : 2))
		pthread_cond_wait(&hold_cond, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
	if (h->boxed)
		return NULL; /* (its box given back as it ends) */
	h->retried_after = -1;
	for (int i = 1; i <= 3000 && h->retried_after < 0; i++) {
		it.ts = clock_ts();
		e = (struct gt_inbox_end){ .call_ts = it.ts + 1, .call_end = it.ts + 2 };
		if ((s = gt_inbox_put(&it, sizeof(it), it.ts))) {
			gt_inbox_end(s, &e);
			h->retried_after = i;
		}
	}
	return NULL;
}

/* More threads than boxes launch at once: those refused one are not refused for good.
 * 140 threads each launch once and wait (with this one's box, more than 128 wanted): some
 * are refused; once the others have ended, each refused thread's launches are queued
 * again within its retry (1,024 launches), never at once. */
static void refused_box_asked_again(void **state)
{
	static struct holder h[140];
	int boxed = 0, refused = 0;

	(void)state;
	reset(MANY);
	assert_true(launch(0)); /* (this thread's box) */
	drain_locked();
	for (int i = 0; i < 140; i++) {
		h[i] = (struct holder){ .retried_after = 0 };
		assert_int_equal(pthread_create(&h[i].t, NULL, hold, &h[i]), 0);
	}
	pthread_mutex_lock(&hold_lock);
	while (holding_done < 140)
		pthread_cond_wait(&hold_cond, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
	for (int i = 0; i < 140; i++)
		h[i].boxed ? boxed++ : refused++;
	assert_int_equal(boxed, 127);
	assert_int_equal(refused, 13);
	/* (The boxed ones end first: their boxes free when the refused ones ask again.) */
	pthread_mutex_lock(&hold_lock);
	holding_go = 1;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_lock);
	for (int i = 0; i < 140; i++)
		if (h[i].boxed)
			pthread_join(h[i].t, NULL);
	pthread_mutex_lock(&hold_lock);
	holding_go = 2;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_lock);
	for (int i = 0; i < 140; i++)
		if (!h[i].boxed) {
			pthread_join(h[i].t, NULL);
			assert_true(h[i].retried_after > 1 && h[i].retried_after <= 1025);
		}
	drain_locked();
}

/* A drain stops at the oldest launch still in a call begun since its bound (the launches
 * after it, of any thread, wait too: placed in order), and takes it once it has ended or
 * began before the bound. */
static void drain_stops_at_a_call(void **state)
{
	struct item a = { .n = 0, .ts = 100 };
	struct gt_inbox_end ea = { .call_ts = 101, .call_end = 102 };
	void *sa;
	pthread_t t;

	(void)state;
	reset(MANY);
	drain_locked();
	reset(MANY);
	sa = gt_inbox_put(&a, sizeof(a), a.ts); /* (in its call) */
	assert_non_null(sa);
	assert_int_equal(pthread_create(&t, NULL, put_one, (void *)1), 0); /* (ended) */
	pthread_join(t, NULL);
	pthread_mutex_lock(&lock);
	assert_false(gt_inbox_drain(place, ended, 100));
	pthread_mutex_unlock(&lock);
	assert_int_equal(nplaced, 0);
	gt_inbox_end(sa, &ea); /* (its end kept for the drain) */
	pthread_mutex_lock(&lock);
	assert_true(gt_inbox_drain(place, ended, 100));
	pthread_mutex_unlock(&lock);
	assert_int_equal(nplaced, 2);
	assert_int_equal(end_known[0] + end_known[1], 2);
	assert_int_equal(order_errors, 0);
	/* (Begun before the bound: placed in its call, its end then written there, and its
	 * slot given back, at the drain after.) */
	reset(MANY);
	sa = gt_inbox_put(&a, sizeof(a), a.ts);
	pthread_mutex_lock(&lock);
	assert_true(gt_inbox_drain(place, ended, 101));
	pthread_mutex_unlock(&lock);
	assert_int_equal(placed[0], 1);
	assert_int_equal(end_known[0], 0);
	gt_inbox_end(sa, &ea);
	pthread_mutex_lock(&lock);
	assert_false(gt_inbox_drain(place, ended, 101));
	pthread_mutex_unlock(&lock);
	assert_int_equal(placed[0], 1);
	assert_int_equal(end_known[0], 1);
}

static int in_call_now;

static void *in_a_call(void *arg)
{
	(void)arg;
	assert_true(gt_inbox_enter());
	__atomic_store_n(&in_call_now, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&in_call_now, __ATOMIC_SEQ_CST) == 1)
		sched_yield();
	gt_inbox_leave();
	return NULL;
}

/* A switch waits for the calls other threads have entered, not for its own thread's, and
 * gives up after its wait. */
static void quiet_waits_for_calls(void **state)
{
	pthread_t t;

	(void)state;
	assert_true(gt_inbox_enter()); /* (this thread's own: not waited for) */
	assert_true(gt_inbox_quiet(1000000));
	gt_inbox_leave();
	assert_int_equal(pthread_create(&t, NULL, in_a_call, NULL), 0);
	while (!__atomic_load_n(&in_call_now, __ATOMIC_SEQ_CST))
		sched_yield();
	assert_false(gt_inbox_quiet(2000000)); /* (2 ms: still in its call) */
	__atomic_store_n(&in_call_now, 2, __ATOMIC_SEQ_CST);
	assert_true(gt_inbox_quiet(5000000000ULL)); /* (left) */
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(end_before_and_after_drain),
		cmocka_unit_test(full_box),
		cmocka_unit_test(box_given_back),
		cmocka_unit_test(refused_box_asked_again),
		cmocka_unit_test(racing_threads),
		cmocka_unit_test(racing_threads_calls_left),
		cmocka_unit_test(drain_stops_at_a_call),
		cmocka_unit_test(quiet_waits_for_calls),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
