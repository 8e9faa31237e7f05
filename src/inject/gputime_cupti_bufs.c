// SPDX-License-Identifier: MIT
/*
 * The buffers CUPTI writes its records into, kept cleared in a pool off the program's
 * threads.
 *
 * CUPTI keeps a buffer per launching thread and asks for a new one (our request callback,
 * in that thread, inside its launch call) when the last was filled or handed back by a
 * flush, and by default clears the whole new buffer there. Ours flushes every ASK_MS, so
 * every launching thread met a 4 MiB buffer to clear, its pages touched for the first time,
 * inside a launch call, twenty times a second: measured on an H200 (bench/cupti_attrs.cu,
 * 2026-11-29), a flush every 50 ms added 0.15-1.2 us a launch on average (4 and 16 MiB
 * buffers), 10 ms 3.7 us. Now CUPTI is told that its buffers come cleared
 * (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER), and the request takes one from a pool
 * that our thread keeps stocked: a buffer whose records have been read is cleared where
 * they were (the rest was never written) and put back, and after each flush the pool is
 * filled up to as many as were taken since the last one, and one more (POOL_MAX at most).
 * Where the pool is empty the program's thread clears one itself, as CUPTI did (counted:
 * the debug line). When the program's own profiler takes CUPTI over, CUPTI clears its
 * buffers again. ab.c's "+nopool": buffers allocated and cleared in the program's thread,
 * by CUPTI, as before. Measured against it inside one process (H200, 2026-11-29,
 * bench/results/pool-2026-11-29.md): CUPTI's part of the launch call 0.24-1.25 us less on
 * ResNet-50, GPT-2, the tiny op, CuPy and a C loop, about half of it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject/gputime_cupti_int.h"

#define POOL_MAX			16
#define ATTR_ZEROED_OUT_ACTIVITY_BUFFER 5 /* CUpti_ActivityAttribute, a uint8_t */

typedef int (*set_attr_fn)(int attr, size_t *size, void *value);

/* The pool: pool_lock is held for a push or a pop only, never across a call into CUPTI.
 * attr_lock is held across CUPTI's attribute being set; inside CUPTI's request it is only
 * tried (CUPTI may hold its own lock there, which setting the attribute may want). */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t attr_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *pool[POOL_MAX];
static int npool;
static __u32 taken;	     /* since the last restock */
static bool no_pool;	     /* (ab.c's +nopool) */
static bool told;	     /* CUPTI told that our buffers come cleared */
static bool handed;	     /* the program's profiler has CUPTI: never told again */
static set_attr_fn set_attr; /* NULL: CUPTI cannot be told (then it clears them) */
static __u64 from_pool, cleared_here;

/* Whether CUPTI is to be told its buffers come cleared. */
static bool wanted(void)
{
	return !__atomic_load_n(&no_pool, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&handed, __ATOMIC_ACQUIRE);
}

static bool is_told(void)
{
	return __atomic_load_n(&told, __ATOMIC_ACQUIRE);
}

/* CUPTI told whether its next buffers come cleared (wait: for another thread telling it;
 * else, that thread busy, left to the next time). */
static void tell(bool cleared, bool wait)
{
	uint8_t v = cleared;
	size_t n = sizeof(v);

	if (is_told() == cleared || !set_attr)
		return;
	if (wait)
		pthread_mutex_lock(&attr_lock);
	else if (pthread_mutex_trylock(&attr_lock))
		return;
	if (is_told() != cleared &&
	    (set_attr(ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &n, &v) == GS_CUPTI_SUCCESS || !cleared))
		__atomic_store_n(&told, cleared, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&attr_lock);
}

void gc_bufs_start(void *cupti)
{
	set_attr = (set_attr_fn)gs_real_sym(cupti, "cuptiActivitySetAttribute");
	tell(wanted(), true); /* (before CUPTI has our callbacks: it asks for no buffer yet) */
}

/* A buffer for CUPTI (its request, in the thread whose record needs it); NULL: none. A
 * buffer cleared whenever CUPTI is, or is about to be, told they come cleared. */
uint8_t *gc_buf_get(void)
{
	bool want = wanted(), cleared;
	uint8_t *b = NULL;

	tell(want, false);
	cleared = want || is_told();
	pthread_mutex_lock(&pool_lock);
	if (want && npool)
		b = pool[--npool];
	taken++;
	pthread_mutex_unlock(&pool_lock);
	if (b) {
		__atomic_fetch_add(&from_pool, 1, __ATOMIC_RELAXED);
		return b;
	}
	b = aligned_alloc(8, CUPTI_BUF);
	if (b && cleared) {
		memset(b, 0, CUPTI_BUF);
		__atomic_fetch_add(&cleared_here, 1, __ATOMIC_RELAXED);
	}
	return b;
}

/* A buffer whose records have been read (valid bytes of them): cleared and pooled, or
 * freed. */
void gc_buf_put(uint8_t *buf, size_t valid)
{
	bool kept = false;

	if (!buf)
		return;
	if (wanted()) {
		/* (Clear past valid: cleared by us or by CUPTI before it wrote.) */
		memset(buf, 0, valid < CUPTI_BUF ? valid : CUPTI_BUF);
		pthread_mutex_lock(&pool_lock);
		if (npool < POOL_MAX) {
			pool[npool++] = buf;
			kept = true;
		}
		pthread_mutex_unlock(&pool_lock);
	}
	if (!kept)
		free(buf);
}

/* Our thread, after a flush: the pool filled up to the buffers taken since the last time,
 * and one more (two at least). */
void gc_bufs_stock(void)
{
	int want;

	pthread_mutex_lock(&pool_lock);
	want = (int)taken + 1;
	taken = 0;
	want = want < 2 ? 2 : want > POOL_MAX ? POOL_MAX : want;
	pthread_mutex_unlock(&pool_lock);
	while (wanted()) {
		uint8_t *b;

		pthread_mutex_lock(&pool_lock);
		if (npool >= want) {
			pthread_mutex_unlock(&pool_lock);
			return;
		}
		pthread_mutex_unlock(&pool_lock);
		b = aligned_alloc(8, CUPTI_BUF);
		if (!b)
			return;
		memset(b, 0, CUPTI_BUF); /* (its pages touched here, not in a launch) */
		pthread_mutex_lock(&pool_lock);
		if (npool < POOL_MAX) {
			pool[npool++] = b;
			b = NULL;
		}
		pthread_mutex_unlock(&pool_lock);
		free(b);
	}
}

/* The program's profiler takes CUPTI: it clears its own buffers again. */
void gc_bufs_handed(void)
{
	__atomic_store_n(&handed, true, __ATOMIC_RELEASE);
	tell(false, true);
	pthread_mutex_lock(&pool_lock);
	while (npool)
		free(pool[--npool]);
	pthread_mutex_unlock(&pool_lock);
}

void gc_bufs_after_fork(void)
{
	/* (CUPTI does not follow into a child: the parent's pool is left where it is.) */
	pthread_mutex_init(&pool_lock, NULL);
	pthread_mutex_init(&attr_lock, NULL);
	npool = 0;
}

void gs_cupti_pool(bool on)
{
	__atomic_store_n(&no_pool, !on, __ATOMIC_RELEASE);
}

bool gs_cupti_pool_now(void)
{
	return !__atomic_load_n(&no_pool, __ATOMIC_RELAXED);
}

void gc_bufs_debug(void)
{
	if (gc_debug_on())
		fprintf(stderr,
			"gpuscope cupti: buffers: %llu from the pool, %llu cleared in the "
			"program's thread; at the end %s\n",
			(unsigned long long)from_pool, (unsigned long long)cleared_here,
			is_told() ? "CUPTI told they come cleared" : "CUPTI clearing them");
}
