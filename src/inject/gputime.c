// SPDX-License-Identifier: MIT
/* GPU start and end times (see gputime.h; the parts: gputime_int.h): the calls timed. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inject/gputime_int.h"

/* Every Nth launch of each kernel, per thread: launch counts by kernel handle. Allocated
 * at first use: static TLS is scarce for a library that may also be dlopen'ed. */
struct sample_slot {
	__u64 func;
	__u32 n;
};
static __thread struct sample_slot *tl_sample __attribute__((tls_model("initial-exec")));
static __thread __u32 tl_tid __attribute__((tls_model("initial-exec")));
static __thread void *tl_ctx __attribute__((tls_model("initial-exec")));
static __thread int tl_slot __attribute__((tls_model("initial-exec")));
/* The thread's timed launches under --gpu-time=N, kept to a rate (gs_rate_allows); what
 * timing costs is kept to a share of the process's time (T.cost_tat). */
static __thread __u64 tl_rate_tat __attribute__((tls_model("initial-exec")));
/* The launch gs_timing_wanted just let through is a kernel's first on the thread: timed
 * whatever the budget, and not paid for (it may set up what all later ones use). */
static __thread bool tl_first __attribute__((tls_model("initial-exec")));
/* The launch gs_timing_graph_wanted just let through: its cost kept to the budget whatever
 * the mode. */
static __thread bool tl_charged __attribute__((tls_model("initial-exec")));
static bool graphs_every; /* (ab.c: every graph launch timed as a whole under all) */

static bool no_carry_start; /* no GPUSCOPE_CARRY (ab.c's modes but "carry" and "pairs" go
			     * back to it) */

/* --gpu-time's value as how many launches of a kernel make one timed: 1 every one, 0 none;
 * -1 for anything else. (Chains are chosen at the start only: a chain holds a gate.) */
static int every_of(const char *mode)
{
	char *end;
	long n;

	if (!strcmp(mode, "all") || !strcmp(mode, "cupti") || !strcmp(mode, "pairs"))
		return 1;
	if (!strcmp(mode, "off"))
		return 0;
	n = strtol(mode, &end, 10);
	return end != mode && !*end && n > 0 && n <= 1000000 ? (int)n : -1;
}

void gs_timing_init(const char *mode)
{
	const char *h = getenv("GPUSCOPE_HARVEST_US"); /* (for measurements) */

	const char *f = getenv("GPUSCOPE_FIRST_GATE_US"); /* (same) */
	const char *c;
	unsigned long rate;

	T.harvest_ns =
		h && atoi(h) >= 100 && atoi(h) <= 100000 ? (__u64)atoi(h) * 1000 : HARVEST_NS;
	T.first_hold_ns =
		f && atoi(f) >= 0 && atoi(f) <= 100000 ? (__u64)atoi(f) * 1000 : FIRST_HOLD_NS;
	T.no_prime = getenv("GPUSCOPE_NO_PRIME") != NULL;
	T.no_follow = getenv("GPUSCOPE_NO_FOLLOW") != NULL; /* (same) */
	/* Carriers only where asked for (GPUSCOPE_CARRY=1): cheaper, but measured on an H200
	 * a short carried kernel of PyTorch's read 1-2 us longer than a paired one (3-4 us
	 * under the PyTorch profiler), which the calibration does not see; corrected by its
	 * pairs, it reads as they do at the median but spread wider; and the program's own
	 * profiler sees it run in a graph (gputime_carry.c). */
	c = getenv("GPUSCOPE_CARRY");
	T.no_carry = no_carry_start = !c || strcmp(c, "1") != 0;
	/* (Carriers taken oldest first, whatever their kernel: measurements.) */
	T.carry_any = getenv("GPUSCOPE_CARRY_ANY") != NULL;
	c = getenv("GPUSCOPE_CARRY_REF"); /* (tests, measurements) */
	T.carry_ref = c && atoi(c) >= 1 && atoi(c) <= 1000000 ? (__u32)atoi(c) : CARRY_REF;
	c = getenv("GPUSCOPE_CHAIN_US"); /* (same) */
	T.chain_ns = c && atoi(c) >= 1 && atoi(c) <= 100000 ? (__u64)atoi(c) * 1000 : CHAIN_NS;
	/* Chains only where asked for (--gpu-time=chained): they cost about half as much, but
	 * time short kernels less exactly than a pair each (README). */
	T.no_chains = !mode || strcmp(mode, "chained") != 0;
	T.end_delay_ns =
		getenv("GPUSCOPE_END_DELAY_US")
			? strtoull(getenv("GPUSCOPE_END_DELAY_US"), NULL, 10) % 1000000 * 1000
			: 0;
	gt_every = !mode || !strcmp(mode, "chained") ? 1 : every_of(mode);
	if (gt_every < 0)
		gt_every = 0;
	/* (all, the default: kernels and asynchronous 1-D copies and sets timed by the driver's
	 * timestamps, gputime_cupti.c; pairs for other copies, and where CUPTI is not found.
	 * pairs: every launch by a pair of events.) */
	if (!mode || !strcmp(mode, "all") || !strcmp(mode, "cupti"))
		gs_cupti_want(true);
	gs_cupti_graphs(mode && !strcmp(mode, "cupti"));
	c = getenv("GPUSCOPE_TIME_RATE");
	rate = c && *c ? strtoul(c, NULL, 10) : TIME_RATE;
	gs_timing_rate(rate > 10000000 ? 10000000 : (__u32)rate);
	c = getenv("GPUSCOPE_TIME_BUDGET"); /* (ppm; measurements) */
	rate = c && *c ? strtoul(c, NULL, 10) : TIME_BUDGET;
	gs_timing_budget(rate > 1000000 ? 1000000 : (__u32)rate);
}

void gs_timing_budget(__u32 ppm)
{
	__atomic_store_n(&T.budget, ppm, __ATOMIC_RELAXED);
}

__u32 gs_timing_budget_now(void)
{
	return __atomic_load_n(&T.budget, __ATOMIC_RELAXED);
}

void gs_timing_rate(__u32 per_s)
{
	__atomic_store_n(&T.rate, per_s, __ATOMIC_RELAXED);
}

void gs_timing_carriers(bool on)
{
	__atomic_store_n(&T.no_carry, !on, __ATOMIC_RELAXED);
}

__u32 gs_timing_rate_now(void)
{
	return __atomic_load_n(&T.rate, __ATOMIC_RELAXED);
}

bool gs_timing_switch(const char *mode)
{
	int every = every_of(mode);
	bool pairs = !strcmp(mode, "pairs"), carry = !strcmp(mode, "carry");
	bool cupti = !strcmp(mode, "all") || !strcmp(mode, "cupti");

	if (every < 0 && !pairs && !carry && !cupti && strcmp(mode, "nofollow") != 0)
		return false;
	gs_cupti_want(cupti);
	gs_cupti_graphs(!strcmp(mode, "cupti"));
	__atomic_store_n(&T.no_follow, every < 0 && !pairs && !carry, __ATOMIC_RELAXED);
	__atomic_store_n(&T.no_carry, pairs || (!carry && no_carry_start), __ATOMIC_RELAXED);
	__atomic_store_n(&gt_every, every < 0 ? 1 : every, __ATOMIC_RELAXED);
	return true;
}

void gs_timing_after_fork(void)
{
	/* The parent's contexts, events and harvester do not exist here. */
	pthread_mutex_init(&T.lock, NULL);
	pthread_mutex_init(&T.harvesting, NULL);
	memset(T.ctx, 0, sizeof(T.ctx));
	memset(T.backlog, 0, sizeof(T.backlog));
	gs_timing_chains_open = 0;
	gs_gate_after_fork();
	T.nctx = 0;
	T.qn = 0;
	T.harvester = false;
	T.cost_tat = 0;
	T.stopped = false;
	tl_tid = 0;
	tl_ctx = NULL;
	gs_graphtime_after_fork();
	gs_cupti_after_fork();
}

/* Whether the thread may time one more launch now (counted when not). */
static bool rate_allows(void)
{
	__u32 per_s = __atomic_load_n(&T.rate, __ATOMIC_RELAXED);
	__u64 now = gs_clock();

	if ((!__atomic_load_n(&T.budget, __ATOMIC_RELAXED) ||
	     __atomic_load_n(&T.cost_tat, __ATOMIC_RELAXED) <= now + BUDGET_BURST) &&
	    (!per_s || gs_rate_allows(&tl_rate_tat, now, per_s, TIME_BURST)))
		return true;
	gs_count_time_capped();
	return false;
}

/* Whether what timing costs the thread is kept to the budget (--gpu-time=N with one). */
static bool budgeted(void)
{
	return __atomic_load_n(&gt_every, __ATOMIC_RELAXED) > 1 &&
	       __atomic_load_n(&T.budget, __ATOMIC_RELAXED);
}

/*
 * With --gpu-time=N: a thread spent ns timing a launch (or reading times), to be paid for at
 * the budget's share of the process's time before any thread times another (a kernel's
 * first launch, timed whatever the budget, may leave it owing up to BUDGET_DEBT). One
 * account for the process, not one a thread: a training step's main and autograd threads
 * launch in turn, and with a budget each the step paid twice the share (ResNet-50 under
 * `10`, in one-step windows: 1.4% of launches timed, 0.5 us a launch beyond `off`).
 */
static void spent(__u64 ns)
{
	__u32 ppm = __atomic_load_n(&T.budget, __ATOMIC_RELAXED);
	__u64 now, tat, was;

	if (!ppm || !ns)
		return;
	now = gs_clock();
	was = __atomic_load_n(&T.cost_tat, __ATOMIC_RELAXED);
	do {
		tat = (was > now ? was : now) + ns * 1000000ULL / ppm;
		tat = tat < now + BUDGET_DEBT ? tat : now + BUDGET_DEBT;
	} while (!__atomic_compare_exchange_n(&T.cost_tat, &was, tat, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
}

void gs_timing_synced(void)
{
	__u64 t0 = budgeted() ? gs_clock() : 0;

	gt_harvest_synced();
	if (t0)
		spent(gs_clock() - t0);
}

/* This thread's launch count of func (NULL: no memory). */
static struct sample_slot *sample_of(__u64 func)
{
	unsigned int h = (unsigned int)((func >> 4) ^ (func >> 12) ^ (func >> 20));
	unsigned int i = h & (SAMPLE_SLOTS - 1);

	if (!tl_sample && !(tl_sample = calloc(SAMPLE_SLOTS, sizeof(*tl_sample))))
		return NULL;
	/* Open addressing; with more kernels than slots, they share the last probe's slot. */
	for (int probe = 0; probe < 16; probe++, i = (i + 1) & (SAMPLE_SLOTS - 1)) {
		if (tl_sample[i].func == func || tl_sample[i].n == 0) {
			tl_sample[i].func = func;
			break;
		}
	}
	return &tl_sample[i];
}

/* gs_timing_wanted's --gpu-time=N: whether this launch of func is one timed. */
bool gs_timing_sampled(__u64 func, int every)
{
	struct sample_slot *s;

	if (!(s = sample_of(func)) || s->n++ % (__u32)every)
		return false;
	/* A kernel's first launch on the thread is timed; later ones due are timed only while
	 * the thread keeps to the rate and the budget. A timed launch on an idle stream costs
	 * its thread a gate and two events, 7-9 us on the H200 guests among many, 16-17 us
	 * alone (bench/results/cost-2026-11-27b-h200.md), 14-24 us on a ResNet-50 step with
	 * the reading after its syncs: at 1,000 a second, a few % of the thread's time
	 * whatever its launch rate; the budget keeps it to 0.25% (budget-2026-11-29.md). One
	 * left untimed is counted; the kernel's next one due is the next chance. */
	tl_first = s->n == 1;
	return tl_first || rate_allows();
}

/* Under --gpu-time=all a graph's kernels are timed by twins at sampled launches; the launch
 * as a whole with a pair, at its exec's first launch on the thread and then within the
 * rate and the budget, as --gpu-time=N's launches: a pair at every launch cost a CUDA-graph
 * step ~4.5 us a replay, ours (inbox-2026-11-29.md). */
bool gs_timing_graph_wanted(__u64 exec)
{
	struct sample_slot *s;

	if (__atomic_load_n(&graphs_every, __ATOMIC_RELAXED))
		return true;
	if (!(s = sample_of(exec)))
		return false;
	tl_first = s->n++ == 0;
	if (!tl_first && !rate_allows())
		return false;
	tl_charged = true;
	return true;
}

void gs_timing_graphs_every(bool on)
{
	__atomic_store_n(&graphs_every, on, __ATOMIC_RELAXED);
}

bool gs_timing_graphs_every_now(void)
{
	return __atomic_load_n(&graphs_every, __ATOMIC_RELAXED);
}

/* The slot of the current context: this thread's last one, else looked up. */
static int slot_of(void *ctx)
{
	if (ctx != tl_ctx) {
		tl_slot = gt_ctx_slot(ctx);
		tl_ctx = ctx;
	}
	return tl_slot;
}

/*
 * Launched before (under T.lock)? A first launch may wait for the GPU inside the call:
 * measured on an H200, one that grows the context's local memory does (4 ms behind a gate
 * held 3 ms), one that loads its function does not (29 us, as without a gate), but may
 * take long (load_ahead). A graph's first launch uploads it. So the gate of a first
 * launch is watched: opened by the watcher if the call has not returned within
 * FIRST_HOLD_NS.
 */
static bool launched_before(__u64 func)
{
	static __u64 *set;
	static size_t cap, n;
	size_t i;

	if (!func)
		return false;
	if (2 * (n + 1) > cap) {
		size_t ncap = cap ? 2 * cap : 1024;
		__u64 *nset = calloc(ncap, sizeof(*nset));

		if (!nset)
			return false;
		for (size_t k = 0; k < cap; k++)
			if (set[k]) {
				for (i = (set[k] >> 4) & (ncap - 1); nset[i];
				     i = (i + 1) & (ncap - 1))
					;
				nset[i] = set[k];
			}
		free(set);
		set = nset;
		cap = ncap;
	}
	for (i = (func >> 4) & (cap - 1); set[i]; i = (i + 1) & (cap - 1))
		if (set[i] == func)
			return true;
	set[i] = func;
	n++;
	return false;
}

/* One name for each stream: the legacy stream's two, and a NULL stream of a per-thread
 * variant (this thread's default stream). */
static __u64 stream_key(__u64 stream, bool ptsz)
{
	if (stream == GS_CU_STREAM_LEGACY)
		return 0;
	return ptsz && !stream ? GS_CU_STREAM_PER_THREAD : stream;
}

/* Under T.lock: a stream's slot (taken over from another stream if that one had it). */
static struct backlog *backlog_of(void *ctx, __u64 key)
{
	struct backlog *b =
		&T.backlog[gt_slot_hash(key ^ (__u64)(unsigned long)ctx, BACKLOG_SLOTS)];

	if (b->stream != key || b->ctx != ctx) {
		/* (A chain or a follow held on the stream that had it ends: it is another's
		 * now.) */
		for (int i = 0; b->chain_seq && i < T.nctx; i++)
			if (T.ctx[i].chain == b)
				gt_chain_close(&T.ctx[i]);
		gt_follow_flush(b);
		b->stream = key;
		b->ctx = ctx;
		b->busy_until = 0;
		b->after_copy = true; /* (what it ran last is not known) */
	}
	return b;
}

/*
 * Under T.lock: the work queued ahead of this launch on its stream, in ns, and the stream's
 * new predicted end with this launch. 0 when not known.
 */
static __u64 backlog_add(struct backlog *b, __u64 func, __u64 now)
{
	const struct last_dur *d = &T.dur[gt_slot_hash(func, DUR_SLOTS)];
	__u64 ahead;

	ahead = b->busy_until > now ? b->busy_until - now : 0;
	b->busy_until = (b->busy_until > now ? b->busy_until : now) + (d->func == func ? d->ns : 0);
	return ahead;
}

/* A launch that was to follow the one before it finds its stream idle after all: that one
 * queued, and a start event of its own (false: none, the launch goes untimed). */
static bool start_after_all(struct ctx_slot *c, struct gs_timing *t)
{
	pthread_mutex_lock(&T.lock);
	t->prev.end_shared = false;
	gt_queue(&t->prev);
	t->start = gt_event_get(c);
	if (!t->start) {
		gt_event_put(c, t->end);
		t->end = NULL;
	}
	pthread_mutex_unlock(&T.lock);
	return t->start != NULL;
}

static bool begin_timing(struct gs_timing *t, __u64 stream, bool ptsz, __u8 kind, __u64 func,
			 __u64 key)
{
	__u64 ahead = 0, now, ph;
	struct backlog *b = NULL;
	struct ctx_slot *c;
	int capturing = 0;
	bool gate, first = false, prime = false, follow;

	t->start = t->end = NULL;
	t->gate = 0;
	t->chained = t->kernel = t->follows = false;
	t->carrier = 0;
	t->key = 0;
	ph = gs_phase_t0();
	if (!gt_load_driver() || T.cu.ctx_get(&t->ctx) || !t->ctx)
		return false;
	/* Nothing of ours goes into a stream that is being captured into a graph. */
	if (gs_may_capture() &&
	    ((ptsz ? T.cu.capturing_ptsz : T.cu.capturing)(stream, &capturing) || capturing))
		return false;
	gs_phase_add(GS_PH_ASK, ph);
	ph = gs_phase_t0();
	t->ci = slot_of(t->ctx);
	gs_phase_add(GS_PH_CTX, ph);
	if (t->ci < 0)
		return false;
	c = &T.ctx[t->ci];
	t->stream = stream;
	t->ptsz = ptsz;
	now = gs_clock();
	ph = gs_phase_t0();
	pthread_mutex_lock(&T.lock);
	gs_phase_add(GS_PH_LOCK, ph);
	ph = gs_phase_t0();
	t->end = gt_event_get(c);
	/* Copies are never gated: one from pageable memory waits inside the call for the
	 * copy engine, which a gate would hold up. Nor are graph launches: measured on an
	 * H200, a gate before each launch of a CUDA-graph training step (85 us, replayed and
	 * waited for) cost 13 us a launch (1.20x against 1.045x without gates; the kernels
	 * inside are timed by twins, which need none), for a start the report otherwise
	 * takes from the end of the launch call (bench/results/twin-chain-2026-11-27-h200.md). */
	gate = kind == GS_GPU_KERNEL;
	if (kind == GS_GPU_KERNEL || kind == GS_GPU_GRAPH) {
		b = backlog_of(t->ctx, stream_key(stream, ptsz));
		first = !launched_before(func);
		ahead = backlog_add(b, func, now);
		prime = b->after_copy;
		b->after_copy = kind == GS_GPU_GRAPH; /* (it may end in a copy) */
	}
	/* A kernel launched again, on a stream whose chain is open: timed from the end event
	 * before it (gputime_chain.c). Else that chain ends here. */
	t->kernel = kind == GS_GPU_KERNEL && !first;
	if (t->kernel && !T.no_chains && t->end && gt_chain_next(c, b, t, now)) {
		gs_phase_add(GS_PH_LOCKED, ph);
		pthread_mutex_unlock(&T.lock);
		return true;
	}
	/* The launch before on the stream, held to be followed (gputime_chain.c): taken, and
	 * followed where the stream is busy (below), else queued. */
	if (!tl_tid)
		tl_tid = (__u32)syscall(SYS_gettid);
	follow = kind == GS_GPU_KERNEL && gt_follow_take(c, b, t);
	if (follow && (!t->end || !t->kernel || t->prev.tid != tl_tid || ahead <= BACKLOG_MIN)) {
		t->prev.end_shared = false;
		gt_queue(&t->prev);
		follow = false;
	}
	/* A plain launch again on a stream judged idle, its last work not a copy: run by a
	 * carrier (gputime_carry.c), which needs no gate and no events of the pool, but for
	 * every CARRY_REF-th of its kernel and shape, and where none is free: those take a
	 * gated pair, which the carried runs are corrected by. (Not in chains: they are chosen
	 * to hold a gate.) */
	if (key && !T.no_carry && t->kernel && !follow && !prime && T.no_chains &&
	    ahead <= BACKLOG_MIN) {
		void *ev = t->end;

		t->key = key;
		if (!gt_carry_ref(key) && gt_carry_take(c, t, func)) {
			gt_event_put(c, ev);
			gs_phase_add(GS_PH_LOCKED, ph);
			pthread_mutex_unlock(&T.lock);
			return true;
		}
	}
	t->start = t->end && !follow ? gt_event_get(c) : NULL;
	if (!t->start && !follow) {
		gt_event_put(c, t->end);
		t->end = NULL;
	}
	gs_phase_add(GS_PH_LOCKED, ph);
	pthread_mutex_unlock(&T.lock);
	if (!t->end) {
		gs_count_time_lost(); /* (the pool of events is empty) */
		return false;
	}
	/*
	 * Only a stream that could go idle before this launch and its end event are queued
	 * needs the gate. With more work ahead than that (estimated, and the stream not done)
	 * the start event completes when the work ahead does, the kernel starts right after,
	 * and the end event is queued long before the kernel ends: both exact without it. A
	 * gate is not free on the GPU (a wait on host memory; measured: ResNet-50 training
	 * 1.31x with a gate at every launch), nor for the program's later stream queries.
	 * Nor then a start event, where this thread's launch before it there is held: the GPU
	 * goes from that one's end event straight to this kernel (a follow).
	 */
	ph = gate && ahead > BACKLOG_MIN ? gs_phase_t0() : 0;
	if (gate && ahead > BACKLOG_MIN && T.cu.stream_query &&
	    (ptsz ? T.cu.stream_query_ptsz : T.cu.stream_query)((void *)(unsigned long)stream) ==
		    NOT_READY)
		gate = false;
	gs_phase_add(GS_PH_QUERY, ph);
	if (follow && !gate) {
		t->start = t->prev.end;
		t->follows = true;
		return true;
	}
	ph = follow ? gs_phase_t0() : 0;
	if (follow && !start_after_all(c, t))
		return false;
	gs_phase_add(GS_PH_AFTER, ph);
	ph = first ? gs_phase_t0() : 0;
	if (first && kind == GS_GPU_KERNEL)
		gt_load_ahead(func);
	gs_phase_add(GS_PH_FIRST, ph);
	if (gate) {
		ph = gs_phase_t0();
		gs_gate_close(&c->gate, stream, ptsz, &t->gate);
		gs_phase_add(GS_PH_GATE, ph);
	}
	/*
	 * A kernel gated on a stream whose last work was a copy or a set starts 5-7 us after
	 * its start event about half the time, whatever the kernel (measured on an H200,
	 * bench/gate_release.cu: the GPU moving the stream from the copy engine back to
	 * compute, we think), and is timed that much too long. An empty kernel of ours
	 * behind the gate, before the start event, takes that delay instead: the pair then
	 * brackets the program's kernel alone. It costs a launch (host and GPU) after copies
	 * only. (A launch with --gpu-time=N that is not timed does not clear the mark: the
	 * next timed one may get an empty kernel it did not need.)
	 */
	ph = t->gate && prime && c->prime ? gs_phase_t0() : 0;
	if (t->gate && prime && c->prime)
		T.cu.launch(c->prime, 1, 1, 1, 1, 1, 1, 0, stream_key(stream, ptsz), NULL, NULL);
	gs_phase_add(GS_PH_PRIME, ph);
	ph = first ? gs_phase_t0() : 0;
	if (first)
		gs_gate_watch(&c->gate, t->gate, T.first_hold_ns);
	gs_phase_add(GS_PH_FIRST, ph);
	ph = gs_phase_t0();
	if ((ptsz ? T.cu.ev_record_ptsz : T.cu.ev_record)(t->start, stream)) {
		gs_gate_open(&c->gate, t->gate);
		gt_give_back(c, t);
		return false;
	}
	gs_phase_add(GS_PH_START_EV, ph);
	return true;
}

bool gs_timing_begin(struct gs_timing *t, __u64 stream, bool ptsz, __u8 kind, __u64 func, __u64 key)
{
	__u64 t0 = (budgeted() || tl_charged) && !tl_first ? gs_clock() : 0;
	bool timed;

	tl_charged = false;
	timed = begin_timing(t, stream, ptsz, kind, func, key);

	/* (What it cost is paid for once the call is over: in gs_timing_end if it goes on.
	 * Not clocked where nothing is kept to a budget.) */
	t->cost = t0 ? gs_clock() - t0 : 0;
	tl_first = false;
	if (!t->start)
		spent(t->cost);
	return timed;
}

void gs_timing_copied(__u64 stream, bool ptsz)
{
	void *ctx = NULL;

	if (!gt_every || T.no_prime || !gt_load_driver() || T.cu.ctx_get(&ctx) || !ctx)
		return;
	pthread_mutex_lock(&T.lock);
	backlog_of(ctx, stream_key(stream, ptsz))->after_copy = true;
	pthread_mutex_unlock(&T.lock);
}

/* A launch run by a carrier: its pair queued (the carrier is free again once it is read). */
static void end_carried(const struct gs_timing *t, const struct gs_timed_call *call)
{
	struct pending p = { .start = t->start,
			     .end = t->end,
			     .c = *call,
			     .stream = t->ptsz && !t->stream ? GS_CU_STREAM_PER_THREAD : t->stream,
			     .tid = tl_tid,
			     .ci = (__u8)t->ci,
			     .carrier = (__u16)t->carrier,
			     .key = t->key };

	pthread_mutex_lock(&T.lock);
	gt_queue(&p);
	pthread_mutex_unlock(&T.lock);
}

static void end_timing(struct gs_timing *t, int result, const struct gs_timed_call *call)
{
	struct ctx_slot *c = &T.ctx[t->ci];
	__u64 opened, late = gs_clock(), ph;
	struct pending p;
	bool held;
	int r;

	if (!t->start)
		return;
	if (t->carrier) {
		end_carried(t, call); /* (made: result 0) */
		return;
	}
	if (T.end_delay_ns) {
		struct timespec d = { 0, (long)T.end_delay_ns };

		nanosleep(&d, NULL);
		late = gs_clock();
	}
	ph = gs_phase_t0();
	r = result || (t->ptsz ? T.cu.ev_record_ptsz : T.cu.ev_record)(t->end, t->stream);
	gs_phase_add(GS_PH_END_EV, ph);
	/* The launch before, timed from its start to its end event, this one's start. */
	if (t->chained || t->follows)
		gt_prev_queue(t, !r);
	p = (struct pending){ .start = t->start,
			      .end = t->end,
			      .c = *call,
			      /* A NULL stream of a per-thread variant is this thread's
			       * default stream. */
			      .stream = t->ptsz && !t->stream ? GS_CU_STREAM_PER_THREAD : t->stream,
			      .tid = tl_tid,
			      .ci = (__u8)t->ci,
			      .gated = true,
			      .from_prev = t->chained || t->follows,
			      .key = t->key };
	/* A gated kernel launch: held in a chain, its gate left closed for the next. */
	if (!r && !T.no_chains && (t->kernel || t->chained)) {
		pthread_mutex_lock(&T.lock);
		held = gt_chain_hold(c, backlog_of(t->ctx, stream_key(t->stream, t->ptsz)), t, &p);
		pthread_mutex_unlock(&T.lock);
		if (held)
			return;
	}
	/* All three are queued (or the call failed): let the GPU at them. Opened already (by
	 * the watcher, or by a later gate of another thread), it held nothing back. */
	held = gs_gate_open(&c->gate, t->gate);
	/* Held: the work could not start before now (for a kernel's wait in queue, the time
	 * it could have started; the call's record keeps its own end). */
	opened = held ? gs_clock() : 0;
	/* Not held, and the end event recorded well after the call returned: the work may
	 * have finished before it (judged when its time is known). */
	late = !held && late > call->call_end + END_LATE_NS ? gs_clock() : 0;
	if (r) {
		if (p.from_prev)
			t->start = NULL; /* (the launch before's end event: it gives it back) */
		gt_give_back(c, t);
		return;
	}
	p.gated = held;
	p.forced = t->gate && !held;
	p.end_late = late;
	if (opened > p.c.call_end)
		p.c.call_end = opened;
	/* A kernel's launch, held to be followed by the next one on its stream, or queued. */
	ph = gs_phase_t0();
	pthread_mutex_lock(&T.lock);
	gs_phase_add(GS_PH_LOCK, ph);
	if (!t->kernel ||
	    !gt_follow_hold(c, backlog_of(t->ctx, stream_key(t->stream, t->ptsz)), &p))
		gt_queue(&p);
	pthread_mutex_unlock(&T.lock);
}

void gs_timing_end(struct gs_timing *t, int result, const struct gs_timed_call *call)
{
	__u64 t0;

	if (!t->start)
		return;
	t0 = t->cost ? gs_clock() : 0;
	end_timing(t, result, call);
	if (t0)
		spent(t->cost + gs_clock() - t0);
}
