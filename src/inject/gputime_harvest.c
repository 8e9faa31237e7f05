// SPDX-License-Identifier: MIT
/* GPU times (gputime_int.h): the harvester, which places finished pairs of events on the
 * host clock and emits them; also on the program's thread after a sync, and at exit. And
 * what queues the launches held to be followed (gputime_chain.c), which the harvester
 * also does after FOLLOW_NS. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "inject/gputime_int.h"

int gs_timing_chains_open GS_HOT;

static void *harvest(void *arg);
static void flush_at_exit(void);

void gt_start_harvester(void)
{
	if (gs_thread(harvest)) {
		T.harvester = true;
		atexit(flush_at_exit);
	}
}

/* The reference to measure an event from: the latest taken before its call. */
static const struct ref *ref_for(const struct ctx_slot *c, __u64 call_ts)
{
	const struct ref *r = &c->refs[0];

	for (int i = 1; i < c->nref; i++)
		if (c->refs[i].host_ns <= call_ts)
			r = &c->refs[i];
	return r;
}

/* corrected: a carried run's times made to read as its gated pairs do (gputime_carry.c). */
static void emit_gpu(const struct ctx_slot *c, const struct pending *p, __u64 start, __u64 end,
		     bool corrected)
{
	struct gs_ev_gpu *e = gs_emit_reserve(sizeof(*e), GS_EV_GPU);

	if (!e)
		return;
	gs_fill_hdr(&e->h, GS_EV_GPU, sizeof(*e), p->c.call_ts);
	e->h.tid = p->tid;
	e->start_ns = start;
	e->end_ns = end;
	/* (Held in a chain: it could not start before the chain's gate opened.) */
	e->call_end_ns = p->cell && T.chain_open_ns[p->cell] > p->c.call_end
				 ? T.chain_open_ns[p->cell]
				 : p->c.call_end;
	e->func = p->c.func;
	e->stream = p->stream;
	e->bytes = p->c.bytes;
	e->dst = p->c.dst;
	e->src = p->c.src;
	e->ctx = (__u64)(unsigned long)c->ctx;
	e->api = p->c.api;
	e->kind = p->c.kind;
	e->flags = (p->gated ? GS_GPU_GATED : 0) | (p->forced ? GS_GPU_START_UNKNOWN : 0) |
		   (!p->gated && start < p->c.call_ts ? GS_GPU_IDLE_STREAM : 0) |
		   (p->end_late && end < p->end_late + END_SOON_NS ? GS_GPU_END_LATE : 0) |
		   (p->cell ? GS_GPU_CHAINED : 0) | (p->from_prev ? GS_GPU_FROM_PREV : 0) |
		   (p->twin ? GS_GPU_IN_GRAPH : 0) | (p->carrier ? GS_GPU_CARRIED : 0) |
		   (corrected ? GS_GPU_GATED : 0);
	e->device = c->device;
	e->copy_kind = p->c.copy_kind;
	e->flags2 = 0;
	gs_emit_commit(e);
}

/* Under T.lock: a pair read or dropped. Its events go back to the pool (a shared end event
 * is the next one's start: that one gives it back), a twin's stay in the twin, a carrier's
 * go back with it (its run is over: gputime_carry.c). */
static void release(struct ctx_slot *c, const struct pending *p)
{
	if (p->carrier) {
		gt_carry_put(c, p->carrier - 1);
		return;
	}
	if (p->twin) {
		__atomic_fetch_sub(p->twin, 1, __ATOMIC_ACQ_REL);
		return;
	}
	gt_event_put(c, p->start);
	if (!p->end_shared)
		gt_event_put(c, p->end);
}

/*
 * One pending pair: 1 done (emitted or given up), 0 not finished yet. Two driver calls per
 * pair, not three: the elapsed time between the pair is NOT_READY until the end event is
 * done, which is the query. (The harvester's calls compete with the program's for the
 * driver's locks.)
 */
static int harvest_one(const struct pending *p)
{
	struct ctx_slot *c = &T.ctx[p->ci];
	const struct ref *r;
	float to_start, dur;
	__u64 ph = gs_phase_t0();
	int q = T.cu.ev_elapsed(&dur, p->start, p->end);
	__u64 raw, shift = 0;
	bool read, corrected;
	__s64 start;

	gs_phase_add(GS_PH_HARVEST, ph);

	if (q == NOT_READY)
		return 0;
	r = ref_for(c, p->c.call_ts);
	/* (Both read before the events go back to the pool.) */
	read = q == 0 && dur >= 0 && !T.cu.ev_elapsed(&to_start, r->event, p->start);
	raw = read ? (__u64)((double)dur * 1e6) : 0;
	pthread_mutex_lock(&T.lock);
	/* (A carried run read as its pairs do: half the difference off each end. The key's
	 * readings under the lock: a launch of another key may take its slot over.) */
	corrected = read && p->key && gt_carry_shift(p, raw, &shift);
	if (q == 0 && dur >= 0 && p->c.func &&
	    (p->c.kind == GS_GPU_KERNEL || p->c.kind == GS_GPU_GRAPH)) {
		struct last_dur *d = &T.dur[gt_slot_hash(p->c.func, DUR_SLOTS)];

		d->func = p->c.func;
		d->ns = (__u64)((double)dur * 1e6);
	}
	release(c, p);
	pthread_mutex_unlock(&T.lock);
	start = read ? (__s64)r->host_ns + (__s64)((double)to_start * 1e6) : 0;
	if (start > 0)
		emit_gpu(c, p, (__u64)start + shift / 2, (__u64)start + raw - (shift - shift / 2),
			 corrected);
	return 1;
}

bool gt_queue(const struct pending *p)
{
	if (T.qn == T.qcap) {
		size_t cap = T.qcap ? 2 * T.qcap : 1024;
		struct pending *q = cap <= MAX_PENDING ? realloc(T.q, cap * sizeof(*q)) : NULL;

		if (q) {
			T.q = q;
			T.qcap = cap;
		}
	}
	if (T.qn == T.qcap) {
		/* Too much outstanding: this call goes untimed, the program is not held up. */
		release(&T.ctx[p->ci], p);
		gs_count_time_lost();
		return false;
	}
	T.q[T.qn++] = *p;
	if (!T.harvester)
		gt_start_harvester();
	return true;
}

/* ---- launches held to be followed (gputime_chain.c) ------------------------------------ */

bool gt_follow_held(const struct backlog *b)
{
	return b->have_held && !b->chain_seq;
}

void gt_follow_drop(struct backlog *b)
{
	b->have_held = false;
	T.ctx[b->held.ci].follows--;
	__atomic_sub_fetch(&gs_timing_chains_open, 1, __ATOMIC_RELAXED);
}

void gt_follow_flush(struct backlog *b)
{
	if (!gt_follow_held(b))
		return;
	gt_follow_drop(b);
	gt_queue(&b->held);
}

void gt_follow_expire(__u64 before)
{
	for (int i = 0; gs_timing_chains_open && i < BACKLOG_SLOTS; i++)
		if (T.backlog[i].held.c.call_end < before)
			gt_follow_flush(&T.backlog[i]);
}

/* One pass over what is pending: emit what finished, keep the rest in order (and the
 * pairs of graphs' twins unless twins: a twin's run leaves dozens at once, read by the
 * harvester rather than by the program's thread after its sync). Returns how many are
 * still pending. */
static size_t harvest_pass(void **current, bool recalibrate, bool twins)
{
	static struct pending *batch;
	static size_t cap;
	size_t n, keep = 0, left;

	pthread_mutex_lock(&T.harvesting);
	if (T.stopped) {
		pthread_mutex_unlock(&T.harvesting);
		return 0;
	}
	pthread_mutex_lock(&T.lock);
	/* (A launch held to be followed whose program has made no call since: read it now.) */
	if (recalibrate)
		gt_follow_expire(gs_clock() - FOLLOW_NS);
	n = T.qn;
	if (n > cap) {
		struct pending *b = realloc(batch, n * sizeof(*b));

		if (!b) {
			pthread_mutex_unlock(&T.lock);
			pthread_mutex_unlock(&T.harvesting);
			return n;
		}
		batch = b;
		cap = n;
	}
	memcpy(batch, T.q, n * sizeof(*batch));
	T.qn = 0;
	pthread_mutex_unlock(&T.lock);
	for (size_t i = 0; i < n; i++) {
		struct ctx_slot *c = &T.ctx[batch[i].ci];

		if (batch[i].twin && !twins) {
			batch[keep++] = batch[i];
			continue;
		}
		if (c->ctx != *current && !T.cu.ctx_set(c->ctx))
			*current = c->ctx;
		if (!harvest_one(&batch[i]))
			batch[keep++] = batch[i];
	}
	for (int ci = 0; recalibrate && ci < __atomic_load_n(&T.nctx, __ATOMIC_ACQUIRE); ci++) {
		struct ctx_slot *c = &T.ctx[ci];

		/* (Carriers wanted: made here, off the program's threads.) */
		if (__atomic_load_n(&c->carry_want, __ATOMIC_RELAXED) && !T.cu.ctx_set(c->ctx)) {
			*current = c->ctx;
			gt_carry_grow(c);
		}
		if (c->broken || !c->nref || gs_clock() - c->last_cal < CALIBRATE_NS)
			continue;
		if (!T.cu.ctx_set(c->ctx)) {
			*current = c->ctx;
			gt_calibrate(c);
		}
	}
	/* What is not finished goes back ahead of what came meanwhile, in order. */
	pthread_mutex_lock(&T.lock);
	if (keep && T.qn + keep > T.qcap) {
		struct pending *q = realloc(T.q, (T.qn + keep) * sizeof(*q));

		if (q) {
			T.q = q;
			T.qcap = T.qn + keep;
		}
	}
	if (keep && T.qn + keep <= T.qcap) {
		memmove(T.q + keep, T.q, T.qn * sizeof(*T.q));
		memcpy(T.q, batch, keep * sizeof(*T.q));
		T.qn += keep;
	}
	left = T.qn;
	pthread_mutex_unlock(&T.lock);
	pthread_mutex_unlock(&T.harvesting);
	return left;
}

static void *harvest(void *arg)
{
	void *current = NULL;

	(void)arg;
	prctl(PR_SET_NAME, GS_THREAD_PREFIX "harvest"); /* (the OS plane leaves ours out) */
	for (;;) {
		struct timespec nap = { 0, (long)T.harvest_ns };

		nanosleep(&nap, NULL);
		harvest_pass(&current, true, true);
	}
	return NULL;
}

/*
 * After the program waited for the GPU (a synchronisation call returned), what it waited
 * for is finished: collect it now, on the program's thread, rather than up to a
 * millisecond later, when a short-lived process may be gone (_exit runs no handlers). If the
 * harvester is in a pass, wait for it: it may have taken these very events before they
 * finished. Leaves the thread's context as it was.
 */
static void pass_here(bool twins)
{
	void *saved = NULL, *current;

	/* Nothing queued may still mean a pass of the harvester holds it: pass after it. */
	if (!gt_every || !__atomic_load_n(&T.harvester, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&T.have_cu, __ATOMIC_ACQUIRE) || T.cu.ctx_get(&saved))
		return;
	current = saved;
	harvest_pass(&current, false, twins);
	if (current != saved)
		T.cu.ctx_set(saved);
}

void gt_harvest_synced(void)
{
	pass_here(false);
}

void gt_harvest_now(void)
{
	pass_here(true);
}

/*
 * At exit, before the runtime tears its contexts down (this handler is registered after
 * the runtime's, so it runs before it): wait a bounded time for the GPU work already
 * timed, so the last kernels of a program get their times too. Then the harvester stops
 * calling the driver.
 */
static void flush_at_exit(void)
{
	__u64 deadline = gs_clock() + FLUSH_NS;
	void *current = NULL;

	while (harvest_pass(&current, false, true) && gs_clock() < deadline) {
		struct timespec nap = { 0, 100000 };

		nanosleep(&nap, NULL);
	}
	pthread_mutex_lock(&T.harvesting);
	T.stopped = true;
	pthread_mutex_unlock(&T.harvesting);
}
