// SPDX-License-Identifier: MIT
/*
 * GPU times (gputime_int.h): chains. Timing a launch on an idle stream takes a gate and two
 * events (gate.h), and on an H100 each of the three cost the launching thread about as much
 * as the launch itself (bench/timing_cost.cu). A chain holds consecutive kernel launches of
 * a stream behind one gate: the first has its start event; each later one is timed from the
 * end event of the one before, which on the held stream is what a start event would have
 * been (nothing of the program's runs between them: the GPU goes from that event straight
 * to this kernel). One event a launch, the gate and the start event shared.
 *
 * Holding the program's work back longer must change nothing it can see but latency, so a
 * chain ends (its gate opened) at CHAIN_MAX launches, after CHAIN_NS (GPUSCOPE_CHAIN_US to
 * measure others; the watcher opens it
 * then if the program has gone quiet), at any call of the program's other than a timed
 * kernel launch (gs_timing_unchain: a sync, a query, an event, a copy may wait for the
 * work or depend on it), at another stream's launch in the context, and at exit. A launch
 * is timed from the end before it only if the gate was still closed once its own end event
 * was recorded: then it was queued before the GPU could reach it.
 *
 * Follows: on a busy stream (more work queued ahead than the launch takes to queue, and
 * the stream not done: gs_timing_begin's test for going without a gate), a kernel launched
 * again by the thread that launched the one before it there, with nothing of the program's
 * between, is timed from that launch's end event in the same way, without a gate: the GPU
 * reaches the event when the work ahead ends, and goes straight on to this kernel, already
 * queued. One event a launch instead of two, on the host and on the GPU (where an event
 * between two kernels costs about 2 us, two 3.3: bench/gate_probe.cu), for what GPU-bound
 * programs launch. So every timed kernel launch but a kernel's first, once its end event
 * is recorded, is held on its stream (struct backlog's held, as a chain's last) until the
 * next launch there takes it (followed or not), and queued at any other call of the
 * program's (gs_timing_unchain), at a launch on a stream it may be ordered with (the legacy
 * stream's and any other), by the harvester after FOLLOW_NS, and at exit. Counted with the
 * chains in gs_timing_chains_open. Measured: a GPU-bound loop costs 1.03-1.05x with follows,
 * 1.06-1.09x with a pair each (bench/results/follow-2026-11-27.md).
 */
#include <stdlib.h>

#include "inject/gputime_int.h"

/* At exit, before the harvester's last pass (registered after it: run before it). */
static void unchain_at_exit(void)
{
	gs_timing_unchain();
}

/* Under T.lock: whether what is held will be queued when the process ends (the harvester
 * started, and unchain_at_exit registered after it: an atexit handler that only opens
 * gates and queues records). */
static bool exit_registered(void)
{
	static bool registered;

	if (!T.harvester)
		gt_start_harvester();
	if (!registered && T.harvester)
		registered = atexit(unchain_at_exit) == 0;
	return registered;
}

/* Whether gate seq (0: none) is still closed. */
static bool closed(const struct gs_gate *g, __u64 seq)
{
	return seq && g->host && __atomic_load_n(g->host, __ATOMIC_ACQUIRE) < seq;
}

bool gt_chain_next(struct ctx_slot *c, struct backlog *b, struct gs_timing *t, __u64 now)
{
	if (c->chain && c->chain != b)
		gt_chain_close(c); /* (one chain a context: gates are opened in order) */
	if (c->chain != b || !b->have_held || b->chain_n >= CHAIN_MAX ||
	    now - b->chain_since > T.chain_ns || !closed(&c->gate, b->chain_seq)) {
		gt_chain_close(c);
		return false;
	}
	/* The launch before, its end event this one's start, is queued with this one's end. */
	t->prev = b->held;
	t->start = b->held.end;
	t->gate = b->chain_seq;
	t->chained = true;
	b->have_held = false;
	b->chain_n++;
	return true;
}

bool gt_chain_hold(struct ctx_slot *c, struct backlog *b, const struct gs_timing *t,
		   const struct pending *p)
{
	__u64 now = gs_clock();

	if (!closed(&c->gate, t->gate)) {
		if (c->chain == b)
			gt_chain_close(c);
		return false;
	}
	if (!t->chained) {
		if (!exit_registered())
			return false; /* (then each launch opens its own gate) */
		gt_chain_close(c);
		b->chain_seq = t->gate;
		b->chain_since = now;
		b->chain_n = 1;
		b->chain_cell = 1 + T.next_cell++ % (CHAIN_CELLS - 1);
		T.chain_open_ns[b->chain_cell] = 0;
		c->chain = b;
		__atomic_add_fetch(&gs_timing_chains_open, 1, __ATOMIC_RELAXED);
		/* (Twice: the program's next launch should end it, not the watcher.) */
		gs_gate_hold(&c->gate, t->gate, now + 2 * T.chain_ns);
	}
	b->held = *p;
	b->held.cell = b->chain_cell;
	b->have_held = true;
	if (b->chain_n >= CHAIN_MAX)
		gt_chain_close(c);
	return true;
}

void gt_chain_close(struct ctx_slot *c)
{
	struct backlog *b = c->chain;

	if (!b)
		return;
	gs_gate_open(&c->gate, b->chain_seq);
	/* (Its launches could not start before now: their wait in the queue counts from
	 * here. An earlier opening, by the watcher, only makes them look queued longer.) */
	T.chain_open_ns[b->chain_cell] = gs_clock();
	if (b->have_held)
		gt_queue(&b->held);
	b->have_held = false;
	b->chain_seq = 0;
	c->chain = NULL;
	__atomic_sub_fetch(&gs_timing_chains_open, 1, __ATOMIC_RELAXED);
}

/* ---- follows (their queueing: gputime_harvest.c) ---------------------------------------- */

bool gt_follow_hold(struct ctx_slot *c, struct backlog *b, const struct pending *p)
{
	if (__atomic_load_n(&T.no_follow, __ATOMIC_RELAXED) || gt_every != 1 || b->have_held ||
	    !exit_registered())
		return false;
	b->held = *p;
	b->held.cell = 0;
	b->have_held = true;
	c->follows++;
	__atomic_add_fetch(&gs_timing_chains_open, 1, __ATOMIC_RELAXED);
	return true;
}

bool gt_follow_take(struct ctx_slot *c, struct backlog *b, struct gs_timing *t)
{
	/* Work on the legacy stream waits for the context's other (blocking) streams' work, and
	 * theirs for it: a launch there ends the follows of every other stream of the context,
	 * one elsewhere the legacy stream's. */
	if (c->follows > (int)gt_follow_held(b)) {
		if (!b->stream) {
			for (int i = 0; i < BACKLOG_SLOTS; i++)
				if (&T.backlog[i] != b && T.backlog[i].ctx == b->ctx)
					gt_follow_flush(&T.backlog[i]);
		} else {
			struct backlog *l = &T.backlog[gt_slot_hash((__u64)(unsigned long)b->ctx,
								    BACKLOG_SLOTS)];

			if (l != b && !l->stream && l->ctx == b->ctx)
				gt_follow_flush(l);
		}
	}
	if (!gt_follow_held(b))
		return false;
	t->prev = b->held;
	gt_follow_drop(b);
	return true;
}

void gt_prev_queue(struct gs_timing *t, bool shared)
{
	pthread_mutex_lock(&T.lock);
	t->prev.end_shared = shared;
	gt_queue(&t->prev); /* (if it cannot: its events back, but a shared end: t's start) */
	pthread_mutex_unlock(&T.lock);
}

void gs_timing_unchain(void)
{
	pthread_mutex_lock(&T.lock);
	for (int i = 0; i < __atomic_load_n(&T.nctx, __ATOMIC_ACQUIRE); i++)
		gt_chain_close(&T.ctx[i]);
	for (int i = 0; i < BACKLOG_SLOTS; i++)
		gt_follow_flush(&T.backlog[i]);
	pthread_mutex_unlock(&T.lock);
}
