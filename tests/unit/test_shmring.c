// SPDX-License-Identifier: MIT
/* The in-process plane's ring: order, wrap-around, full-ring drops, concurrent producers,
 * records still being written, and a consumer that survives a corrupted mapping. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "core/shmring.h"

static char path[64];

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/gs-unit-ring-%d", getpid());
	unlink(path);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

/* A launch record whose func field carries a sequence number. */
static bool put(struct shmring *r, __u64 seq, __u32 tid)
{
	struct gs_ev_launch *e = shmring_reserve(r, sizeof(*e), GS_EV_LAUNCH);

	if (!e)
		return false;
	hdr(e, GS_EV_LAUNCH, sizeof(*e), 1, seq);
	e->h.source = GS_SRC_INJECT;
	e->h.tid = tid;
	e->c.api = GS_API_CU_LAUNCH_KERNEL;
	e->func = seq;
	shmring_commit(r, e);
	return true;
}

struct seen {
	__u64 n, next[8];
	bool in_order;
};

static void collect(void *ctx, const struct gs_hdr *ev)
{
	struct seen *s = ctx;
	const struct gs_ev_launch *e = (const void *)ev;

	if (e->func != s->next[ev->tid])
		s->in_order = false;
	s->next[ev->tid] = e->func + 1;
	s->n++;
}

static void order_and_wrap(void **state)
{
	struct shmring p, c;
	struct seen s = { .in_order = true };
	char err[128];
	bool busy;
	__u64 seq = 0;

	(void)state;
	assert_int_equal(shmring_create(&p, path, GS_SHMRING_MIN, 1, 0), 0);
	assert_int_equal(shmring_open(&c, path, err, sizeof(err)), 0);
	/* Many laps of a 64 KiB ring: 104-byte slots do not divide it, so records straddle
	 * the end (the mirror mapping keeps them contiguous). */
	for (int lap = 0; lap < 50; lap++) {
		for (int i = 0; i < 400; i++)
			assert_true(put(&p, seq++, 0));
		assert_int_equal(shmring_drain(&c, collect, &s, &busy, err, sizeof(err)), 400);
	}
	assert_int_equal(s.n, seq);
	assert_true(s.in_order);
	shmring_close(&p);
	shmring_close(&c);
}

static void full_ring_drops_and_recovers(void **state)
{
	struct shmring p, c;
	struct seen s = { .in_order = true };
	char err[128];
	bool busy;
	__u64 ok = 0, seq = 0;

	(void)state;
	assert_int_equal(shmring_create(&p, path, GS_SHMRING_MIN, 1, 0), 0);
	assert_int_equal(shmring_open(&c, path, err, sizeof(err)), 0);
	for (int i = 0; i < 1000; i++)
		if (put(&p, seq, 0))
			ok++, seq++;
	assert_int_equal(ok, GS_SHMRING_MIN / 104); /* 630 slots of 8 + 96 bytes */
	assert_int_equal(p.h->drops[GS_EV_LAUNCH], 1000 - ok);
	assert_int_equal(shmring_drain(&c, collect, &s, &busy, err, sizeof(err)), (int)ok);
	assert_true(put(&p, seq++, 0));
	assert_int_equal(shmring_drain(&c, collect, &s, &busy, err, sizeof(err)), 1);
	assert_true(s.in_order);
	shmring_close(&p);
	shmring_close(&c);
}

/* A header no consumer of ours wrote (its tail past its head, its size changed) costs the
 * producer its records, never a thread that does not return, nor a write outside the data
 * area. */
static void garbage_header_drops(void **state)
{
	struct shmring p;

	(void)state;
	assert_int_equal(shmring_create(&p, path, GS_SHMRING_MIN, 1, 0), 0);
	assert_true(put(&p, 0, 0));
	p.h->data_size = 1ULL << 40;
	assert_false(shmring_reserve(&p, GS_SHMRING_MIN, GS_EV_LAUNCH));
	p.h->data_size = GS_SHMRING_MIN;
	while (put(&p, 1, 0)) /* (till full: then the tail is read from the header) */
		;
	p.h->tail = p.h->head + (1ULL << 20);
	assert_false(put(&p, 2, 0));
	assert_false(put(&p, 3, 0));
	assert_int_equal(p.h->drops[GS_EV_LAUNCH], 4);
	shmring_close(&p);
}

static void unpublished_record_waits(void **state)
{
	struct shmring p, c;
	struct seen s = { .in_order = true };
	struct gs_ev_launch *e;
	char err[128];
	bool busy;

	(void)state;
	assert_int_equal(shmring_create(&p, path, GS_SHMRING_MIN, 1, 0), 0);
	assert_int_equal(shmring_open(&c, path, err, sizeof(err)), 0);
	e = shmring_reserve(&p, sizeof(*e), GS_EV_LAUNCH);
	assert_true(put(&p, 1, 1)); /* a later record, already published */
	assert_int_equal(shmring_drain(&c, collect, &s, &busy, err, sizeof(err)), 0);
	assert_true(busy);
	hdr(e, GS_EV_LAUNCH, sizeof(*e), 1, 0);
	e->h.source = GS_SRC_INJECT;
	e->c.api = GS_API_CU_LAUNCH_KERNEL;
	shmring_commit(&p, e);
	assert_int_equal(shmring_drain(&c, collect, &s, &busy, err, sizeof(err)), 2);
	assert_false(busy);
	shmring_close(&p);
	shmring_close(&c);
}

struct producer {
	struct shmring *r;
	__u32 tid;
	__u64 made;
};

static void *produce(void *arg)
{
	struct producer *p = arg;

	for (__u64 seq = 0; seq < 200000;)
		if (put(p->r, seq, p->tid))
			seq++, p->made++;
	return NULL;
}

static void concurrent_producers(void **state)
{
	struct producer prod[4];
	pthread_t th[4];
	struct shmring p, c;
	struct seen s = { .in_order = true };
	char err[128];
	bool busy, done = false;

	(void)state;
	assert_int_equal(shmring_create(&p, path, 1 << 20, 1, 0), 0);
	assert_int_equal(shmring_open(&c, path, err, sizeof(err)), 0);
	for (int i = 0; i < 4; i++) {
		prod[i] = (struct producer){ &p, (__u32)i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, produce, &prod[i]), 0);
	}
	while (!done) {
		done = s.n == 4 * 200000;
		assert_true(shmring_drain(&c, collect, &s, &busy, err, sizeof(err)) >= 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	/* Every record once, each thread's in its order (producers retry when full). */
	assert_int_equal(s.n, 800000);
	assert_true(s.in_order);
	shmring_close(&p);
	shmring_close(&c);
}

static void another_process_produces(void **state)
{
	struct shmring p, c;
	struct seen s = { .in_order = true };
	char err[128];
	bool busy;
	pid_t pid;
	int st;

	(void)state;
	assert_int_equal(shmring_create(&p, path, GS_SHMRING_MIN, 1, 0), 0);
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 100; i++)
			put(&p, (__u64)i, 0);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(shmring_open(&c, path, err, sizeof(err)), 0);
	assert_int_equal(shmring_drain(&c, collect, &s, &busy, err, sizeof(err)), 100);
	shmring_close(&p);
	shmring_close(&c);
}

static void corruption_is_reported(void **state)
{
	struct shmring p, c;
	struct seen s = { .in_order = true };
	char err[128];
	bool busy;
	__u32 *slot;

	(void)state;
	assert_int_equal(shmring_create(&p, path, GS_SHMRING_MIN, 1, 0), 0);
	assert_int_equal(shmring_open(&c, path, err, sizeof(err)), 0);
	put(&p, 0, 0);
	slot = (__u32 *)p.data;
	slot[0] = 1 << 30; /* a length beyond any record */
	assert_int_equal(shmring_drain(&c, collect, &s, &busy, err, sizeof(err)), -1);
	assert_string_equal(err, "corrupt slot at 0 (state 2, length 1073741824)");
	slot[0] = 104;
	((struct gs_hdr *)(slot + 2))->type = 77; /* an impossible record */
	assert_int_equal(shmring_drain(&c, collect, &s, &busy, err, sizeof(err)), -1);
	assert_string_equal(err, "corrupt record at 0: unknown record type");
	shmring_close(&p);
	shmring_close(&c);
	/* Not a ring at all. */
	assert_int_equal(shmring_open(&c, "/etc/passwd", err, sizeof(err)), -1);
	assert_string_equal(err, "not a gpuscope ring");
	assert_int_equal(shmring_create(&p, path, 1000, 1, 0), -EINVAL);
}

/* The file cut short under the consumer's mapping (whoever may write it may truncate it):
 * an error for that ring, never SIGBUS. Before a drain (the size check) and during one (the
 * guard: here the callback cuts the file between two records). */
static struct shmring *cut_producer;

static void cut_after_first(void *ctx, const struct gs_hdr *ev)
{
	struct seen *s = ctx;

	(void)ev;
	if (s->n++ == 0)
		assert_int_equal(truncate(path, 0), 0);
}

static void truncated_file(void **state)
{
	struct shmring p, c;
	struct shmring_hdr h;
	struct seen s = {};
	char err[128];
	bool busy;
	__u64 head;

	(void)state;
	assert_int_equal(shmring_create(&p, path, GS_SHMRING_MIN, 1, 0), 0);
	assert_int_equal(shmring_open(&c, path, err, sizeof(err)), 0);
	for (int i = 0; i < 10; i++)
		assert_true(put(&p, (__u64)i, 0));
	shmring_close(&p); /* (the producer's own pages would fault as well) */
	assert_int_equal(shmring_drain(&c, cut_after_first, &s, &busy, err, sizeof(err)), -1);
	assert_string_equal(err, "its file was cut short while it was read");
	assert_int_equal(s.n, 1);
	assert_int_equal(shmring_drain(&c, cut_after_first, &s, &busy, err, sizeof(err)), -1);
	assert_string_equal(err, "its file was cut short");
	assert_int_equal(shmring_read_hdr(&c, &h, err, sizeof(err)), -1);
	assert_int_equal(shmring_read_head(&c, &head, err, sizeof(err)), -1);
	shmring_close(&c);
}

/* A producer that writes as fast as the consumer reads cannot hold it: one lap a drain. */
static void refill(void *ctx, const struct gs_hdr *ev)
{
	struct seen *s = ctx;

	s->n++;
	assert_true(put(cut_producer, ((const struct gs_ev_launch *)ev)->func + 1000000, 0));
}

static void endless_producer(void **state)
{
	struct shmring p, c;
	struct seen s = {};
	char err[128];
	bool busy;
	int n, total = 0;

	(void)state;
	assert_int_equal(shmring_create(&p, path, GS_SHMRING_MIN, 1, 0), 0);
	assert_int_equal(shmring_open(&c, path, err, sizeof(err)), 0);
	cut_producer = &p;
	for (int i = 0; i < 100; i++)
		assert_true(put(&p, (__u64)i, 0));
	n = shmring_drain(&c, refill, &s, &busy, err, sizeof(err));
	/* 104 bytes a slot: 631 records start within a lap of 64 KiB. */
	assert_int_equal(n, (GS_SHMRING_MIN + 103) / 104);
	while (total < 5000 && (n = shmring_drain(&c, refill, &s, &busy, err, sizeof(err))) > 0)
		total += n;
	assert_true(n > 0);
	shmring_close(&p);
	shmring_close(&c);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup_teardown(order_and_wrap, setup, teardown),
	cmocka_unit_test_setup_teardown(full_ring_drops_and_recovers, setup, teardown),
	cmocka_unit_test_setup_teardown(garbage_header_drops, setup, teardown),
	cmocka_unit_test_setup_teardown(unpublished_record_waits, setup, teardown),
	cmocka_unit_test_setup_teardown(concurrent_producers, setup, teardown),
	cmocka_unit_test_setup_teardown(another_process_produces, setup, teardown),
	cmocka_unit_test_setup_teardown(corruption_is_reported, setup, teardown),
	cmocka_unit_test_setup_teardown(truncated_file, setup, teardown),
	cmocka_unit_test_setup_teardown(endless_producer, setup, teardown),
};
UNIT_MAIN(tests)
