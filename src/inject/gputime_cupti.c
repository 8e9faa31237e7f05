// SPDX-License-Identifier: MIT
/*
 * --gpu-time=all (the default; cupti its old name): every kernel timed by the driver's own
 * timestamps, as the PyTorch
 * profiler has them (CUPTI's kernel activity), instead of a gate and a pair of events
 * around each launch. Measured on an H200 (bench/cupti_cost.cu, a paced C loop): a launch
 * costs its thread about 0.9-1.0 us more with CUPTI's kernel records on, against 4.3-4.6 us
 * for a gated pair; and the times are CUPTI's, exact by definition.
 *
 * CUPTI is not linked: it is looked for when the first kernel is launched (already loaded,
 * as libtorch_cuda loads it; next to the program's CUDA libraries, as the wheels ship it;
 * the loader's path; the toolkit's directories; GPUSCOPE_CUPTI names one). Where it is not
 * found or refuses, every kernel is timed with pairs instead, and the report says so.
 *
 * A record has no handle of the launch that made it, only CUPTI's ids of its context and
 * stream, its kernel's name, grid and block, and times. So each launch the program makes
 * (not into a stream being captured: that one runs later, in a graph) is queued on its
 * stream before the driver is called (one that cannot be, CUPTI not giving its stream's id
 * or its thread's inbox full, is timed with a pair instead), indexed by its kernel's name
 * (from the driver, kept per thread by handle), grid and block. Queued without a lock: put
 * in its thread's inbox (gputime_inbox.c), placed on its queue by whoever next holds the
 * queues' lock (our thread every DRAIN_MS, or before records are matched: a launch's slot
 * is put before its call, so before its record can exist). A record goes to the oldest
 * launch of its kind
 * waiting on its stream. Not simply the oldest launch there: CUPTI keeps a buffer per
 * launching thread and delivers one when it fills (or when our thread asks, every ASK_MS),
 * so where two threads launch on one stream (PyTorch's main and autograd threads), its
 * records come out of launch order (on an H100, 14,533 of ResNet-50's 37,520). The
 * kernel's figures are then right, but a launch may take the times of another launch of
 * its kind (about 5% of ResNet-50's started before the launch they were given). CUPTI's
 * name may be stale (see gc_by_dims): a record under a name no launch of its grid and block
 * had goes to the oldest launch of that grid and block. A launch
 * whose record has not come after STALE_NS, or at the end, is counted as lost; a record
 * no launch matches is counted (reported at exit).
 * Graphs: under --gpu-time=all our kinds are off around each graph launch's call (CUPTI
 * records a graph's kernels at a cost to the launch of 1.3-1.9 us each, and its copy and
 * set nodes too), and the graphs' kernels are timed by twins at sampled launches, as with
 * pairs (gputime_graph.c); a kernel, copy or set another thread launches meanwhile is
 * timed with a pair (a switch waits for the launches in their calls, each entered in its
 * thread's inbox, so that our kind is on or off throughout each). After the last graph
 * launch the kinds are left off, each switched on again by the next call that needs it
 * (pause_switch): a CUDA-graph step 1.071x against 1.102x with only the kernels' kind,
 * switched at every launch (inbox-2026-11-29.md). Under
 * --gpu-time=cupti, a kernel run by a graph has its record too: there is no launch of ours
 * for it, so it is emitted as it comes, under its name (in_graph); graph launches as a
 * whole are then not timed (no twin is made), nor tied to the records of their kernels.
 * Asynchronous 1-D copies and sets the same, by CUPTI's memcpy and memset kinds (a record
 * of either has its bytes, stream and times: it goes to the oldest call of its kind and size
 * waiting on its stream): on ResNet-50 and GPT-2 steps their pairs were most of what this
 * mode cost the launching thread beyond --gpu-time=off, ~10 us each
 * (bench/results/budget-2026-11-29.md). 2-D and 3-D ones (their sizes are in memory the
 * call may refuse to read) and peer copies are timed with pairs, as under --gpu-time=pairs.
 *
 * The program's own profiler: CUPTI has one client. Our exported cuptiActivityRegister-
 * Callbacks, cuptiSubscribe and the others a profiler starts with hand CUPTI over first:
 * our records are flushed, our kind disabled, and kernels are timed with pairs from then
 * on, as under --gpu-time=all (the report says so); the program's call then goes to CUPTI
 * as it would have.
 *
 * Times: CUPTI's clock is CLOCK_REALTIME; it is placed on CLOCK_MONOTONIC (gs_clock's) by
 * the offset between the two, read at each buffer. No timestamp callback is registered, so
 * that a profiler handed CUPTI later gets the clock it expects.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "inject/gputime_cupti_int.h"

/* ---- finding and starting CUPTI ------------------------------------------------------- */

static const char *const sonames[] = { "libcupti.so.13", "libcupti.so.12", "libcupti.so" };

/* A directory of the program's CUDA libraries (the wheels put libcupti beside them). */
static int cuda_dir(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *name = info->dlpi_name, *slash;
	char *out = arg;

	(void)size;
	if (!name || !(slash = strrchr(name, '/')) ||
	    (!strstr(slash, "libcudart.so") && !strstr(slash, "libcublas.so")))
		return 0;
	if ((size_t)(slash - name) + 32 >= 4096)
		return 0;
	memcpy(out, name, (size_t)(slash - name));
	out[slash - name] = '\0';
	return 1;
}

/* A libcupti already loaded, in whatever scope (libtorch_cuda's, loaded by Python with
 * RTLD_LOCAL: not found by RTLD_NEXT). */
static int loaded_cupti(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;

	(void)size;
	if (!slash || strncmp(slash + 1, "libcupti.so", 11) != 0)
		return 0;
	*(void **)arg = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
	return *(void **)arg != NULL;
}

static void *open_cupti(void)
{
	static const char *const dirs[] = { "/usr/local/cuda/extras/CUPTI/lib64",
					    "/usr/local/cuda/lib64" };
	const char *env = getenv("GPUSCOPE_CUPTI");
	char path[4096 + 64];
	void *h;

	if (env && *env)
		return dlopen(env, RTLD_NOW | RTLD_LOCAL);
	h = NULL;
	if (dl_iterate_phdr(loaded_cupti, &h) && h)
		return h;
	path[0] = '\0';
	if (dl_iterate_phdr(cuda_dir, path) && path[0]) {
		size_t n = strlen(path);

		for (size_t i = 0; i < sizeof(sonames) / sizeof(*sonames); i++) {
			snprintf(path + n, sizeof(path) - n, "/%s", sonames[i]);
			if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
				return h;
			path[n] = '\0';
		}
	}
	for (size_t i = 0; i < sizeof(sonames) / sizeof(*sonames); i++)
		if ((h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL)))
			return h;
	for (size_t d = 0; d < sizeof(dirs) / sizeof(*dirs); d++) {
		snprintf(path, sizeof(path), "%s/libcupti.so", dirs[d]);
		if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
			return h;
	}
	return NULL;
}

static __u32 ask_ms = ASK_MS;
/* --gpu-time=all or cupti, or ab.c's (read at every call: not in CU) */
bool gs_cupti_on GS_HOT; /* (gs_cupti_wanted) */

void gs_cupti_ask_ms(__u32 ms)
{
	__atomic_store_n(&ask_ms, ms ?: ASK_MS, __ATOMIC_RELAXED);
}

__u32 gs_cupti_ask_ms_now(void)
{
	return __atomic_load_n(&ask_ms, __ATOMIC_RELAXED);
}

static void *flusher(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, GS_THREAD_PREFIX "cupti"); /* (the OS plane leaves ours out) */
	for (unsigned int wake = 1, since = 0;; wake++) {
		struct timespec nap = { 0, DRAIN_MS * 1000000L };
		int s;

		nanosleep(&nap, NULL);
		s = __atomic_load_n(&CU.state, __ATOMIC_ACQUIRE);
		if (s == ST_HANDED || s == ST_FAILED)
			return NULL;
		since += DRAIN_MS;
		if (since >= __atomic_load_n(&ask_ms, __ATOMIC_RELAXED)) {
			since = 0;
			if (__atomic_load_n(&CU.kind_on, __ATOMIC_ACQUIRE))
				gc_flush_and_take(0);
			/* (After a flush: its threads' next records need new buffers.) */
			gc_bufs_stock();
		} else if (wake == 1)
			gc_bufs_stock();
		/* (The threads' inboxes emptied here, not on their threads: see gt_inbox_filling.) */
		pthread_mutex_lock(&CU.lock);
		gc_drain(false);
		pthread_mutex_unlock(&CU.lock);
	}
	return NULL;
}

#define SYM(field, name) (CU.f.field = (__typeof__(CU.f.field))gs_real_sym(CU.handle, name))

static bool setup(void)
{
	if (!gt_load_driver() || !T.cu.ctx_dev || !(CU.handle = open_cupti()))
		return false;
	if (!SYM(reg, "cuptiActivityRegisterCallbacks") || !SYM(enable, "cuptiActivityEnable") ||
	    !SYM(disable, "cuptiActivityDisable") || !SYM(flush, "cuptiActivityFlushAll") ||
	    !SYM(next, "cuptiActivityGetNextRecord") || !SYM(ctx_id, "cuptiGetContextId") ||
	    !SYM(stream_id, "cuptiGetStreamIdEx"))
		return false;
	SYM(dropped, "cuptiActivityGetNumDroppedRecords");
	gc_bufs_start(CU.handle);
	if (CU.f.reg(gc_request, gc_complete) != GS_CUPTI_SUCCESS)
		return false;
	/* (CUPTI's own periodic flush, cuptiActivityFlushPeriod, delivered only full buffers,
	 * measured on an H100: ResNet-50's records all came at exit; and its thread is one more
	 * of the program's to wake. Ours asks for what has completed, every ASK_MS.) */
	gs_thread(flusher);
	/* (Registered after CUPTI's own: run before them.) */
	atexit(gc_flush_at_exit);
	return true;
}

/* Our kinds on or off: kernels', and copies' and sets' (their records cost the driver's call
 * less than a pair of events: budget-2026-11-29.md). */
static void kinds(bool on)
{
	gs_cupti_kind_fn f = on ? CU.f.enable : CU.f.disable;

	f(GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	f(GS_CUPTI_ACTIVITY_KIND_MEMCPY);
	f(GS_CUPTI_ACTIVITY_KIND_MEMSET);
}

/* Our kinds on or off, as wanted (CU.lock not held: CUPTI may deliver buffers inside). */
static void apply(void)
{
	bool on = __atomic_load_n(&gs_cupti_on, __ATOMIC_ACQUIRE);

	if (__atomic_load_n(&CU.state, __ATOMIC_ACQUIRE) != ST_RUNNING || on == CU.kind_on)
		return;
	kinds(on);
	CU.kind_on = on;
	__atomic_store_n(&CU.left_off, 0, __ATOMIC_RELEASE); /* (all on, or all off) */
	if (!on)
		gc_flush_and_take(0);
}

/* Started on the first launch to time: false while it cannot be (another thread starting
 * it, or failed: pairs from then on). */
static bool started(void)
{
	int s = __atomic_load_n(&CU.state, __ATOMIC_ACQUIRE);
	bool ok;

	if (s == ST_RUNNING)
		return true;
	if (s != ST_IDLE || !__atomic_compare_exchange_n(&CU.state, &s, ST_STARTING, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return false;
	ok = setup();
	s = ST_STARTING;
	if (!__atomic_compare_exchange_n(&CU.state, &s, ok ? ST_RUNNING : ST_FAILED, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return false; /* (handed over meanwhile) */
	gc_emit_status(GS_CAL_CUPTI, ok ? GS_CUPTI_ON : GS_CUPTI_MISSING);
	if (!ok) {
		/* (pairs from now on, as --gpu-time=all) */
		__atomic_store_n(&gs_cupti_on, false, __ATOMIC_RELEASE);
		__atomic_store_n(&gt_every, 1, __ATOMIC_RELAXED);
		return false;
	}
	apply();
	return CU.kind_on;
}

/* ---- the launches' queues ------------------------------------------------------------- */

void gs_cupti_unloaded(void)
{
	__atomic_fetch_add(&gc_unloads, 1, __ATOMIC_RELEASE);
	/* The records of kernels done so far taken now, before a new kernel is given an old
	 * handle and its name (the report names a handle's times by its name then). */
	if (__atomic_load_n(&CU.state, __ATOMIC_ACQUIRE) == ST_RUNNING &&
	    __atomic_load_n(&CU.kind_on, __ATOMIC_ACQUIRE))
		gc_flush_and_take(0);
}

void gs_cupti_graphs(bool on)
{
	__atomic_store_n(&CU.graphs, on, __ATOMIC_RELEASE);
}

bool gs_cupti_times_graphs(void)
{
	return __atomic_load_n(&CU.graphs, __ATOMIC_ACQUIRE) && gs_cupti_active();
}

/* A kernel launch's call entered in its thread's inbox, not while a switch is under way
 * (true: a switch now waits for the call to leave), waiting PAUSE_WAIT_NS at most: a launch
 * may be held up in the driver (its queue full behind work that waits for a graph its
 * program launches next, on another thread), and must not hold the program up. Not had in
 * time: the switch or the launch goes on (its record may then be missing, or come unasked:
 * counted). */
static bool call_enter(void)
{
	__u64 t0 = 0;

	while (gt_inbox_enter()) {
		if (!__atomic_load_n(&CU.switching, __ATOMIC_SEQ_CST))
			return true;
		gt_inbox_leave();
		if (!t0) {
			t0 = gs_clock();
		} else if (gs_clock() - t0 > PAUSE_WAIT_NS) {
			__atomic_fetch_add(&CU.pause_late, 1, __ATOMIC_RELAXED);
			break;
		}
		sched_yield();
	}
	return false;
}

/* What a pause switches off (what) switched off or on again. */
static void switch_kinds(int what, bool on)
{
	gs_cupti_kind_fn f = on ? CU.f.enable : CU.f.disable;

	if (what & PAUSE_KERNELS)
		f(GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (what & PAUSE_COPIES) {
		f(GS_CUPTI_ACTIVITY_KIND_MEMCPY);
		f(GS_CUPTI_ACTIVITY_KIND_MEMSET);
	}
}

/*
 * Our kind off (pause) as graph launches begin their calls, once the launches in their
 * calls meanwhile are done; when the last ends, left off (left_off), to be switched on
 * again by the next launch that needs it (resume_now). Each switch costs the driver's
 * call 2-3 us (a CUDA-graph step's launch call 17.5 us under all against 10.9 under off,
 * inbox-2026-11-29.md): a program that launches graph after graph pays it once.
 */
static void pause_switch(bool pause)
{
	int saved = errno; /* (the program's, after its call) */
	bool now;

	pthread_mutex_lock(&CU.pause_lock);
	__atomic_store_n(&CU.switching, 1, __ATOMIC_SEQ_CST);
	if (!gt_inbox_quiet(PAUSE_WAIT_NS))
		__atomic_fetch_add(&CU.pause_late, 1, __ATOMIC_RELAXED);
	now = pause ? CU.paused == 0 : CU.paused == 1;
	if (now && pause) {
		int what = __atomic_load_n(&CU.pause_what, __ATOMIC_RELAXED), off = CU.left_off;

		if (CU.kind_on) {
			switch_kinds(off & ~what, true); /* (ab.c changed what) */
			switch_kinds(what & ~off, false);
		}
		CU.paused_what = what;
		__atomic_store_n(&CU.left_off, 0, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&CU.paused, CU.paused + (pause ? 1 : -1), __ATOMIC_RELEASE);
	if (now && !pause && CU.kind_on) {
		if (__atomic_load_n(&CU.lazy_no, __ATOMIC_RELAXED))
			switch_kinds(CU.paused_what, true);
		else
			__atomic_store_n(&CU.left_off, CU.paused_what, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&CU.switching, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&CU.pause_lock);
	errno = saved;
}

/* A call that wants a kind on (what: PAUSE_*) that graph launches left off: on again now
 * (the launches in their calls meanwhile done first, as at a switch), the others left. */
static void resume_now(int what)
{
	int saved = errno, on;

	if (!(__atomic_load_n(&CU.left_off, __ATOMIC_ACQUIRE) & what))
		return;
	pthread_mutex_lock(&CU.pause_lock);
	if ((on = CU.left_off & what) && !CU.paused) {
		__atomic_store_n(&CU.switching, 1, __ATOMIC_SEQ_CST);
		if (!gt_inbox_quiet(PAUSE_WAIT_NS))
			__atomic_fetch_add(&CU.pause_late, 1, __ATOMIC_RELAXED);
		if (CU.kind_on)
			switch_kinds(on, true);
		__atomic_store_n(&CU.left_off, CU.left_off & ~on, __ATOMIC_RELEASE);
		__atomic_store_n(&CU.switching, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&CU.pause_lock);
	errno = saved;
}

/* Whether a call entered (call_enter) may be queued for its record: no pause under way
 * that switches its kind off (what: PAUSE_*), and its kind not left off. */
static bool recorded(int what)
{
	return !(__atomic_load_n(&CU.paused, __ATOMIC_ACQUIRE) && (CU.paused_what & what)) &&
	       !(__atomic_load_n(&CU.left_off, __ATOMIC_ACQUIRE) & what);
}

void gs_cupti_resume_at_once(bool on)
{
	__atomic_store_n(&CU.lazy_no, on, __ATOMIC_RELAXED);
}

bool gs_cupti_resume_at_once_now(void)
{
	return __atomic_load_n(&CU.lazy_no, __ATOMIC_RELAXED);
}

void gs_cupti_pause_what(int what)
{
	__atomic_store_n(&CU.pause_what, what, __ATOMIC_RELAXED);
}

int gs_cupti_pause_what_now(void)
{
	return __atomic_load_n(&CU.pause_what, __ATOMIC_RELAXED);
}

bool gs_cupti_graph_pause(void)
{
	if (!__atomic_load_n(&CU.pause_what, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&CU.graphs, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&CU.state, __ATOMIC_ACQUIRE) != ST_RUNNING)
		return false;
	pause_switch(true);
	return true;
}

void gs_cupti_graph_resume(void)
{
	pause_switch(false);
}

bool gs_cupti_active(void)
{
	return gs_cupti_wanted() && started();
}

void gs_cupti_before(struct gs_cupti_launch *l, __u64 stream, bool ptsz, __u64 func,
		     const __u32 *dims, unsigned int api, __u64 now)
{
	__u32 key[KEY_N];
	__u64 nh, ph;

	l->qi = 0;
	l->held = false;
	if (!started()) {
		gc_not_queued(NQ_START);
		return;
	}
	/* (While a graph launch's call has our kind off, with a pair: its record would not
	 * come. Entered to the end of the call: no switch meanwhile.) */
	resume_now(PAUSE_KERNELS);
	ph = gs_phase_t0();
	l->held = call_enter();
	gs_phase_add(GS_PH_PAUSE, ph);
	if (!recorded(PAUSE_KERNELS)) {
		gc_not_queued(NQ_PAUSED);
		return;
	}
	memcpy(key, dims, 6 * sizeof(*key));
	nh = gc_func_name_hash(func);
	key[6] = (__u32)nh;
	key[7] = (__u32)(nh >> 32);
	gc_enqueue(
		l, stream, ptsz, key,
		&(struct cq_entry){
			.call_ts = now, .func = func, .api = (__u16)api, .kind = GS_GPU_KERNEL });
}

void gs_cupti_copy_before(struct gs_cupti_launch *l, __u64 stream, bool ptsz,
			  const struct gs_cupti_copy *c, unsigned int api, __u64 now)
{
	__u32 key[KEY_N];

	l->qi = 0;
	l->held = false;
	if (!started()) {
		gc_not_queued(NQ_START);
		return;
	}
	/* (One of no bytes may have no record. Where graph launches switch the kinds of copies
	 * and sets off too, as a kernel's.) */
	if (!c->bytes) {
		gc_not_queued(NQ_SHAPE);
		return;
	}
	if ((__atomic_load_n(&CU.pause_what, __ATOMIC_RELAXED) |
	     __atomic_load_n(&CU.left_off, __ATOMIC_ACQUIRE)) &
	    PAUSE_COPIES) {
		resume_now(PAUSE_COPIES);
		l->held = call_enter();
		if (!recorded(PAUSE_COPIES)) {
			gc_not_queued(NQ_PAUSED);
			return;
		}
	}
	gc_copy_key(key, c->bytes, c->kind == GS_GPU_MEMSET);
	gc_enqueue(l, stream, ptsz, key,
		   &(struct cq_entry){ .call_ts = now,
				       .bytes = c->bytes,
				       .dst = c->dst,
				       .src = c->src,
				       .copy_kind = c->copy_kind,
				       .kind = c->kind,
				       .silent = c->silent,
				       .api = (__u16)api });
}

/* (The call's times written into the inbox's slot, or where the drain placed it: a
 * thread's last launch must have its call's time, which pylines.c joins its record to its
 * stack by. Put off to the thread's next call, it kept the time it was queued at:
 * budget-2026-11-29.md.) */
void gs_cupti_after(struct gs_cupti_launch *l, int result, __u64 call_ts, __u64 call_end)
{
	struct gt_inbox_end end = { .call_ts = call_ts,
				    .call_end = call_end,
				    .failed = result != 0 };
	__u64 ph;

	if (l->held) {
		ph = gs_phase_t0();
		gt_inbox_leave();
		gs_phase_add(GS_PH_PAUSE, ph);
	}
	l->held = false;
	if (l->qi)
		gt_inbox_end(l->slot, &end);
}

/* ---- modes and the program's own profiler --------------------------------------------- */

void gs_cupti_want(bool on)
{
	int s = __atomic_load_n(&CU.state, __ATOMIC_ACQUIRE);
	if (s == ST_FAILED || s == ST_HANDED)
		on = false;
	__atomic_store_n(&gs_cupti_on, on, __ATOMIC_RELEASE);
	apply();
}

/* The program is about to use CUPTI itself: ours flushed and given up. */
static void hand_over(void)
{
	int s = __atomic_load_n(&CU.state, __ATOMIC_ACQUIRE);

	__atomic_store_n(&gs_cupti_on, false, __ATOMIC_RELEASE);
	gc_bufs_handed();
	while (s == ST_IDLE || s == ST_RUNNING)
		if (__atomic_compare_exchange_n(&CU.state, &s, ST_HANDED, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			break;
	if (s != ST_RUNNING)
		return; /* (never started, or already handed: nothing of ours there) */
	if (CU.kind_on)
		kinds(false);
	CU.kind_on = false;
	gc_flush_and_take(1);
	gc_emit_status(GS_CAL_CUPTI, GS_CUPTI_HANDED);
	gc_count_left();
}

void gs_cupti_after_fork(void)
{
	/* (CUPTI does not follow into a child; the child's launches are timed with pairs. The
	 * parent's buffers waiting are the parent's.) */
	pthread_mutex_init(&CU.lock, NULL);
	pthread_mutex_init(&CU.pause_lock, NULL);
	CU.switching = 0;
	CU.left_off = 0;
	CU.paused = 0;
	gc_records_after_fork();
	if (__atomic_load_n(&CU.state, __ATOMIC_ACQUIRE) != ST_IDLE)
		__atomic_store_n(&CU.state, ST_HANDED, __ATOMIC_RELEASE);
	__atomic_store_n(&gs_cupti_on, false, __ATOMIC_RELEASE);
	gc_queue_after_fork();
	gc_bufs_after_fork();
	gt_inbox_after_fork();
}

/* The functions a CUPTI client starts with, exported (and handed out by dlsym): CUPTI
 * handed over, then the function called, as dlsym found it for the program, else as the
 * loader would have bound it. */
typedef int (*fwd_fn)(__u64, __u64, __u64, __u64);

#define HAND_OVER_LIST(X)                         \
	X(cuptiActivityRegisterCallbacks)         \
	X(cuptiActivityRegisterTimestampCallback) \
	X(cuptiActivityEnable)                    \
	X(cuptiActivityEnableContext)             \
	X(cuptiSubscribe)                         \
	X(cuptiSubscribe_v2)                      \
	X(cuptiFinalize)
#define ENUM(name) HO_##name,
enum {
	HAND_OVER_LIST(ENUM) HO_N
};
static void *learnt[HO_N]; /* what dlsym found, for the program */

static int forward(int which, const char *name, void *caller, __u64 a, __u64 b, __u64 c, __u64 d)
{
	fwd_fn f = (fwd_fn)__atomic_load_n(&learnt[which], __ATOMIC_ACQUIRE);
	Dl_info info;

	/* (CUPTI calling its own entry points through ours is not the program.) */
	if (!dladdr(caller, &info) || !info.dli_fname || !strstr(info.dli_fname, "libcupti"))
		hand_over();
	if (!f && CU.handle)
		f = (fwd_fn)gs_real_sym(CU.handle, name);
	if (!f) {
		/* (The program's libcupti may be in a local scope, where RTLD_NEXT does not look:
		 * a library's reference to it still binds to ours, which comes first.) */
		void *h = NULL;

		if (dl_iterate_phdr(loaded_cupti, &h) && h)
			f = (fwd_fn)gs_real_sym(h, name);
	}
	if (!f)
		f = (fwd_fn)gs_real_sym(RTLD_NEXT, name);
	return f ? f(a, b, c, d) : GS_CUPTI_ERROR_NOT_INITIALIZED;
}

#define HAND_OVER(name)                                                                      \
	__attribute__((visibility("default"))) int name(__u64 a, __u64 b, __u64 c, __u64 d); \
	int name(__u64 a, __u64 b, __u64 c, __u64 d)                                         \
	{                                                                                    \
		return forward(HO_##name, #name, __builtin_return_address(0), a, b, c, d);   \
	}
HAND_OVER_LIST(HAND_OVER)

#define ENTRY(name) { #name, (void *)name },
static const struct {
	const char *name;
	void *ours;
} hand_overs[HO_N] = { HAND_OVER_LIST(ENTRY) };

void *gs_cupti_dlsym(const char *name, void *p)
{
	for (int i = 0; i < HO_N; i++)
		if (!strcmp(name, hand_overs[i].name)) {
			if (p != hand_overs[i].ours)
				__atomic_store_n(&learnt[i], p, __ATOMIC_RELEASE);
			return hand_overs[i].ours;
		}
	return p;
}
