// SPDX-License-Identifier: MIT
/*
 * Inboxes: a launching thread's entries for another thread to place (the CUPTI queues of
 * gputime_cupti.c), put and ended without a lock.
 *
 * Under --gpu-time=all each launch queued itself on its stream's queue before its call and
 * wrote its call's times there after it, under the queues' one lock: on an H200, 387-429 ns
 * a launch waiting for it (its line moving between the main and autograd threads' CPUs and
 * the thread matching records; budget-2026-11-29.md section 7). Here each launching thread
 * has a ring of its own (one producer: the thread; one consumer: whoever holds the queues'
 * lock and drains). A slot is put before the call (its order: when the launch began) and
 * published; the call's end is written into it after the call. A drain places the slots put
 * (each in its queue), then gives back those whose ends it has. One still in its call is
 * placed only when a record needs it (a record may come before its launch's call returns):
 * its end then comes after its placement, and the next drain writes it where it was placed
 * before giving the slot back. The producer never waits: with a lock to write such an end,
 * a thread waited for a whole buffer's matching (48 times in a tiny-op run, ~1 ms each:
 * inbox-2026-11-29.md).
 *
 * A slot's state settles the race between an end and a placement: QUEUED (put), then ENDED
 * (the end written first) or TAKEN (the placement first, by compare-and-swap each way), and
 * from TAKEN, LATE (the end written since). A drain merges the boxes by the order their
 * launches began, so that two threads launching on one stream keep their order in its
 * queue. A box is given back when its thread ends and taken by the next thread that
 * launches; the drain still reads it meanwhile.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inject/gputime_int.h"

#define BOX_SLOTS 4096		      /* a thread's launches put and not yet drained, at most */
#define BOX_FULL  (BOX_SLOTS * 3 / 4) /* ... beyond which the thread drains (gt_inbox_filling) */
#define BOXES	  128		      /* threads launching at once, at most (more: not queued) */
#define BOX_RETRY 1024		      /* a thread refused one asks again after this many launches */

enum {
	SL_QUEUED = 1,
	SL_ENDED,
	SL_TAKEN,
	SL_LATE
};

struct slot {
	__u64 ts;		     /* the order drains merge boxes by */
	struct gt_inbox_end end;     /* written by the producer before ENDED */
	struct gt_inbox_where where; /* written by the drain before TAKEN */
	int state;
	bool busy; /* (the producer's own: its call not ended) */
	_Alignas(8) unsigned char body[GT_INBOX_BODY];
};

struct box {
	struct slot *s;
	__u64 head;  /* slots put: the producer's (read by drains) */
	int in_call; /* the producer's, in a call a switch waits for (read by switches) */
	char pad[52];
	__u64 tail;	 /* slots given back: the drains' (read by the producer) */
	__u64 placed;	 /* slots placed: the drains' */
	__u64 tail_seen; /* (the producer's copy of tail) */
	int claimed;
};

static struct box *boxes[BOXES];
static int nboxes;
static pthread_key_t box_key;
static bool box_key_ok;
static pthread_once_t box_once = PTHREAD_ONCE_INIT;
static __thread struct box *tl_box __attribute__((tls_model("initial-exec")));
static __thread __u32 tl_retry __attribute__((tls_model("initial-exec"))); /* (refused) */

static void thread_ends(void *b)
{
	/* (Its slots are all ended: the thread is not in a call. Drained later as any.) */
	__atomic_store_n(&((struct box *)b)->claimed, 0, __ATOMIC_RELEASE);
}

static void key_init(void)
{
	box_key_ok = pthread_key_create(&box_key, thread_ends) == 0;
}

/* This thread's box: one given back taken over, or a new one (NULL: none to be had). */
static struct box *claim(void)
{
	int n = __atomic_load_n(&nboxes, __ATOMIC_ACQUIRE), i;
	struct box *b = NULL;

	pthread_once(&box_once, key_init);
	if (!box_key_ok)
		return NULL;
	for (i = 0; i < n && i < BOXES && !b; i++) {
		struct box *c = __atomic_load_n(&boxes[i], __ATOMIC_ACQUIRE);
		int free_ = 0;

		if (c && __atomic_compare_exchange_n(&c->claimed, &free_, 1, false,
						     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			b = c;
	}
	if (!b) {
		if ((i = __atomic_fetch_add(&nboxes, 1, __ATOMIC_ACQ_REL)) >= BOXES) {
			__atomic_fetch_sub(&nboxes, 1, __ATOMIC_RELAXED);
			return NULL;
		}
		b = calloc(1, sizeof(*b));
		if (b && !(b->s = calloc(BOX_SLOTS, sizeof(*b->s)))) {
			free(b);
			b = NULL;
		}
		if (b)
			b->claimed = 1;
		/* (A slot taken and left empty: the drain skips it.) */
		__atomic_store_n(&boxes[i], b, __ATOMIC_RELEASE);
		if (!b)
			return NULL;
	}
	if (pthread_setspecific(box_key, b)) {
		__atomic_store_n(&b->claimed, 0, __ATOMIC_RELEASE);
		return NULL;
	}
	b->tail_seen = __atomic_load_n(&b->tail, __ATOMIC_ACQUIRE);
	return b;
}

/* This thread's box, claimed at its first use (NULL: none to be had; asked for again
 * BOX_RETRY launches later, when other threads may have ended). */
static struct box *mine(void)
{
	if (tl_box)
		return tl_box;
	if (tl_retry) {
		tl_retry--;
		return NULL;
	}
	if (!(tl_box = claim()))
		tl_retry = BOX_RETRY;
	return tl_box;
}

void *gt_inbox_put(const void *body, size_t n, __u64 ts)
{
	struct box *b = mine();
	struct slot *s;

	if (!b)
		return NULL;
	if (b->head - b->tail_seen >= BOX_SLOTS) {
		b->tail_seen = __atomic_load_n(&b->tail, __ATOMIC_ACQUIRE);
		if (b->head - b->tail_seen >= BOX_SLOTS)
			return NULL;
	}
	s = &b->s[b->head % BOX_SLOTS];
	if (s->busy || n > sizeof(s->body))
		return NULL; /* (a call nested in its own, this deep: not queued) */
	s->ts = ts;
	memcpy(s->body, body, n);
	s->state = SL_QUEUED;
	s->busy = true;
	__atomic_store_n(&b->head, b->head + 1, __ATOMIC_RELEASE);
	return s;
}

bool gt_inbox_filling(void)
{
	struct box *b = tl_box;

	return b && b->head - __atomic_load_n(&b->tail, __ATOMIC_RELAXED) >= BOX_FULL;
}

void gt_inbox_end(void *slot, const struct gt_inbox_end *end)
{
	struct slot *s = slot;
	int queued = SL_QUEUED;

	s->end = *end;
	if (!__atomic_compare_exchange_n(&s->state, &queued, SL_ENDED, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		__atomic_store_n(&s->state, SL_LATE, __ATOMIC_RELEASE); /* (TAKEN: placed) */
	s->busy = false;
}

/* Under the caller's lock: b's placed slots given back up to the first still in its call,
 * the ends that came after their placement written there first. */
static void give_back(struct box *b, gt_inbox_ended_fn ended)
{
	while (b->tail != b->placed) {
		struct slot *s = &b->s[b->tail % BOX_SLOTS];
		int state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);

		if (state == SL_TAKEN)
			break;
		if (state == SL_LATE)
			ended(&s->where, &s->end);
		__atomic_store_n(&b->tail, b->tail + 1, __ATOMIC_RELEASE);
	}
}

bool gt_inbox_drain(gt_inbox_place_fn place, gt_inbox_ended_fn ended, __u64 begun_before)
{
	int n = __atomic_load_n(&nboxes, __ATOMIC_ACQUIRE), k = 0;
	struct box *live[BOXES];
	__u64 head[BOXES];
	bool any = false;

	for (int i = 0; i < n && i < BOXES; i++) {
		struct box *b = __atomic_load_n(&boxes[i], __ATOMIC_ACQUIRE);

		if (!b)
			continue;
		give_back(b, ended);
		if ((head[k] = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE)) != b->placed)
			live[k++] = b;
	}
	while (k) {
		int m = 0, state;
		struct box *b;
		struct slot *s;

		for (int i = 1; i < k; i++)
			if (live[i]->s[live[i]->placed % BOX_SLOTS].ts <
			    live[m]->s[live[m]->placed % BOX_SLOTS].ts)
				m = i;
		b = live[m];
		s = &b->s[b->placed % BOX_SLOTS];
		state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
		/* (The oldest, still in a call begun since begun_before: left for the next drain,
		 * the slots after it too, in order.) */
		if (state == SL_QUEUED && s->ts >= begun_before)
			break;
		place(s->body, state == SL_ENDED ? &s->end : NULL, &s->where);
		any = true;
		/* (Its end, if it came meanwhile, written now: LATE is only after TAKEN.) */
		if (state == SL_QUEUED &&
		    !__atomic_compare_exchange_n(&s->state, &state, SL_TAKEN, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			ended(&s->where, &s->end);
		b->placed++;
		give_back(b, ended);
		if (b->placed == head[m]) {
			live[m] = live[k - 1];
			head[m] = head[k - 1];
			k--;
		}
	}
	return any;
}

/* (A store and a full fence on the thread's own line, where a reader-writer lock's two
 * atomic updates a call moved one line between the launching threads: 123-147 ns a
 * launch on an H200, inbox-2026-11-29.md.) */
bool gt_inbox_enter(void)
{
	struct box *b = mine();

	if (!b)
		return false;
	__atomic_store_n(&b->in_call, 1, __ATOMIC_SEQ_CST);
	return true;
}

void gt_inbox_leave(void)
{
	__atomic_store_n(&tl_box->in_call, 0, __ATOMIC_RELEASE);
}

static __u64 mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (__u64)t.tv_sec * 1000000000ULL + (__u64)t.tv_nsec;
}

bool gt_inbox_quiet(__u64 wait_ns)
{
	int n = __atomic_load_n(&nboxes, __ATOMIC_SEQ_CST);
	__u64 until = 0;

	for (int i = 0; i < n && i < BOXES; i++) {
		struct box *b = __atomic_load_n(&boxes[i], __ATOMIC_ACQUIRE);

		while (b && b != tl_box && __atomic_load_n(&b->in_call, __ATOMIC_SEQ_CST)) {
			if (!until)
				until = mono_ns() + wait_ns;
			else if (mono_ns() > until)
				return false;
			sched_yield();
		}
	}
	return true;
}

void gt_inbox_after_fork(void)
{
	/* (The parent's threads' boxes are the parent's: the child starts with none.) */
	memset(boxes, 0, sizeof(boxes));
	nboxes = 0;
	tl_box = NULL;
	tl_retry = 0;
}
