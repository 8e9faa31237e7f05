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

static void request(uint8_t **buf, size_t *size, size_t *max_records);
static void complete(void *ctx, uint32_t stream_id, uint8_t *buf, size_t size, size_t valid);
static void flush_and_take(uint32_t flag);
static void flush_at_exit(void);

static __u32 ask_ms = ASK_MS;

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
				flush_and_take(0);
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
	if (CU.f.reg(request, complete) != GS_CUPTI_SUCCESS)
		return false;
	/* (CUPTI's own periodic flush, cuptiActivityFlushPeriod, delivered only full buffers,
	 * measured on an H100: ResNet-50's records all came at exit; and its thread is one more
	 * of the program's to wake. Ours asks for what has completed, every ASK_MS.) */
	gs_thread(flusher);
	/* (Registered after CUPTI's own: run before them.) */
	atexit(flush_at_exit);
	return true;
}

/* A status record (GS_CAL_CUPTI, GS_CAL_CUPTI_UNMATCHED) in the current context's name. */
static void emit_status(__u64 what, __u64 value)
{
	struct gs_ev_gpu *e;
	void *ctx = NULL;
	int dev = -1;
	__u64 now = gs_clock();

	if (T.cu.ctx_get && T.cu.ctx_get(&ctx) == 0 && ctx && T.cu.ctx_dev)
		T.cu.ctx_dev(&dev);
	if (!(e = gs_emit_reserve(sizeof(*e), GS_EV_GPU)))
		return;
	gs_fill_hdr(&e->h, GS_EV_GPU, sizeof(*e), now);
	memset((char *)e + sizeof(e->h), 0, sizeof(*e) - sizeof(e->h));
	e->start_ns = e->call_end_ns = now;
	e->end_ns = now + value;
	e->ctx = (__u64)(unsigned long)ctx;
	e->api = GS_API_CU_LAUNCH_KERNEL;
	e->kind = GS_GPU_CALIBRATION;
	e->device = dev;
	e->func = what;
	gs_emit_commit(e);
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
	bool on = __atomic_load_n(&CU.want, __ATOMIC_ACQUIRE);

	if (__atomic_load_n(&CU.state, __ATOMIC_ACQUIRE) != ST_RUNNING || on == CU.kind_on)
		return;
	kinds(on);
	CU.kind_on = on;
	__atomic_store_n(&CU.left_off, 0, __ATOMIC_RELEASE); /* (all on, or all off) */
	if (!on)
		flush_and_take(0);
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
	emit_status(GS_CAL_CUPTI, ok ? GS_CUPTI_ON : GS_CUPTI_MISSING);
	if (!ok) {
		/* (pairs from now on, as --gpu-time=all) */
		__atomic_store_n(&CU.want, false, __ATOMIC_RELEASE);
		__atomic_store_n(&T.every, 1, __ATOMIC_RELAXED);
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
		flush_and_take(0);
}

bool gs_cupti_wanted(void)
{
	return __atomic_load_n(&CU.want, __ATOMIC_RELAXED);
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

/* A copy's or set's key: its size, which of the two, and a block no launch has (no kernel's
 * record takes it, by_dims included). */
static void copy_key(__u32 *key, __u64 bytes, bool set)
{
	key[0] = (__u32)bytes;
	key[1] = (__u32)(bytes >> 32);
	key[2] = set ? 2 : 1;
	key[3] = key[4] = key[5] = ~0u;
	key[6] = key[7] = 0;
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
	copy_key(key, c->bytes, c->kind == GS_GPU_MEMSET);
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

/* ---- records -------------------------------------------------------------------------- */

/* A buffer CUPTI completed, waiting for our thread: CUPTI completes a full one inside the
 * program's call that filled it, where matching its ~19,000 records would be the program's
 * time (measured on an H200: a CUDA-graph training step, 19 kernels a replay, 1.32x so,
 * against 1.05x when CUPTI's own thread took them). Kept at the end of the buffer. */
struct done {
	uint8_t *buf;
	size_t valid;
	__s64 offset; /* CLOCK_REALTIME less CLOCK_MONOTONIC when it was completed */
	struct done *next;
};
#define DONE_AT ((CUPTI_BUF - sizeof(struct done)) & ~(size_t)7)
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t taking = PTHREAD_MUTEX_INITIALIZER; /* (taken in the order completed) */
static struct done *done_first, *done_last;

static void request(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = gc_buf_get();
	*size = *buf ? DONE_AT : 0;
	*max_records = 0;
}

static __u64 rd64(const uint8_t *r, int off)
{
	__u64 v;

	memcpy(&v, r + off, sizeof(v));
	return v;
}

static __u32 rd32(const uint8_t *r, int off)
{
	__u32 v;

	memcpy(&v, r + off, sizeof(v));
	return v;
}

/* CLOCK_REALTIME less CLOCK_MONOTONIC, now (the narrowest of three readings). */
static __s64 realtime_offset(void)
{
	__s64 best = 0;
	__u64 width = ~0ULL;

	for (int i = 0; i < 3; i++) {
		struct timespec a, r, b;
		__u64 ta, tb, tr;

		clock_gettime(CLOCK_MONOTONIC, &a);
		clock_gettime(CLOCK_REALTIME, &r);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ta = (__u64)a.tv_sec * 1000000000ULL + (__u64)a.tv_nsec;
		tb = (__u64)b.tv_sec * 1000000000ULL + (__u64)b.tv_nsec;
		tr = (__u64)r.tv_sec * 1000000000ULL + (__u64)r.tv_nsec;
		if (tb - ta < width) {
			width = tb - ta;
			best = (__s64)(tr - (ta + tb) / 2);
		}
	}
	return best;
}

/* A kernel's, copy's or set's record of the driver's, as its call e's (tid 0: no thread of
 * the program's launched it as such), in context ctx on device. */
static void emit(const struct cq_entry *e, __u64 ctx, int device, __u8 flags, __u64 start,
		 __u64 end)
{
	struct gs_ev_gpu *g = gs_emit_reserve(sizeof(*g), GS_EV_GPU);

	if (!g)
		return;
	gs_fill_hdr(&g->h, GS_EV_GPU, sizeof(*g), e->call_ts);
	memset((char *)g + sizeof(g->h), 0, sizeof(*g) - sizeof(g->h));
	g->h.tid = e->tid ? e->tid : g->h.pid;
	g->start_ns = start;
	g->end_ns = end > start ? end : start;
	g->call_end_ns = e->call_end > e->call_ts ? e->call_end : e->call_ts;
	g->func = e->func;
	g->stream = e->stream;
	g->bytes = e->bytes;
	g->dst = e->dst;
	g->src = e->src;
	g->copy_kind = e->copy_kind;
	g->ctx = ctx;
	g->api = e->api;
	g->kind = e->kind ? e->kind : GS_GPU_KERNEL;
	g->flags = flags;
	g->flags2 = GS_GPU_BY_DRIVER;
	g->device = device;
	gs_emit_commit(g);
}

/* Under CU.lock: a kernel run by a graph. Its record carries the graph launch's correlation,
 * and no launch of ours is its own; it is known by its name, under a handle of its own
 * (NAMED | the name's hash, named once: the report merges a kernel's handles by name), on
 * the stream and context of our queue there if there is one. */
static void in_graph(const uint8_t *r, const char *name, __u64 nh, __u64 start, __u64 end)
{
	__u32 cctx = rd32(r, GS_CUPTI_K_CONTEXT), cstream = rd32(r, GS_CUPTI_K_STREAM);
	const struct cq *q = NULL;
	struct cq_entry launch;
	__u64 handle = NAMED | nh;
	unsigned int i = (unsigned int)(nh % NAMED_N);

	if (!nh) {
		CU.in_graphs++; /* (no name: not told apart) */
		return;
	}
	if (CU.graph_q.made == CU.made && CU.graph_q.cctx == cctx &&
	    CU.graph_q.cstream == cstream) {
		q = CU.graph_q.qi >= 0 ? &CU.q[CU.graph_q.qi] : NULL;
	} else {
		for (int k = 0; k < CQ_MAX; k++)
			if (CU.q[k].used && CU.q[k].cctx == cctx &&
			    (!q || (CU.q[k].cstream == cstream && q->cstream != cstream)))
				q = &CU.q[k]; /* (another stream's of its context: for the context) */
		CU.graph_q.cctx = cctx;
		CU.graph_q.cstream = cstream;
		CU.graph_q.qi = q ? (int)(q - CU.q) : -1;
		CU.graph_q.made = CU.made;
	}
	for (int p = 0; p < 8 && CU.named[i] != handle; p++, i = (i + 1) % NAMED_N)
		if (!CU.named[i]) {
			CU.named[i] = handle;
			gs_emit_kname(handle, 0, name, GS_API_CU_GRAPH_LAUNCH, start);
			break;
		}
	if (CU.named[i] != handle) /* (the table full there: named again, harmless) */
		gs_emit_kname(handle, 0, name, GS_API_CU_GRAPH_LAUNCH, start);
	launch = (struct cq_entry){ .call_ts = start,
				    .call_end = start,
				    .func = handle,
				    .stream = q && q->cstream == cstream ? q->stream : 0,
				    .api = GS_API_CU_GRAPH_LAUNCH };
	emit(&launch, q ? q->ctx : 0, q ? q->device : (int)rd32(r, GS_CUPTI_K_DEVICE),
	     GS_GPU_IN_GRAPH, start, end);
	CU.graph_runs++;
}

/* Under CU.lock: the queue of CUPTI's context and stream ids, or NULL. */
static struct cq *queue_of(__u32 cctx, __u32 cstream)
{
	if (CU.q[CU.last].used && CU.q[CU.last].cctx == cctx && CU.q[CU.last].cstream == cstream)
		return &CU.q[CU.last];
	for (int i = 0; i < CQ_MAX; i++)
		if (CU.q[i].used && CU.q[i].n && CU.q[i].cctx == cctx &&
		    CU.q[i].cstream == cstream) {
			CU.last = i;
			return &CU.q[i];
		}
	return NULL;
}

/* Under CU.lock: e's record came (emitted); what is done, failed, or has waited too long for
 * its record (lost) taken out of q's head. */
static void matched(struct cq *q, struct cq_entry *e, __u64 seq, __u64 start, __u64 end)
{
	if (seq == q->seq0)
		CU.in_order++;
	else
		CU.out_of_order++;
	if (!e->silent)
		emit(e, q->ctx, q->device, GS_GPU_GATED, start, end);
	e->done = true;
	while (q->n && (gc_at(q, 0)->done || gc_at(q, 0)->failed ||
			gc_at(q, 0)->call_ts + STALE_NS < start))
		gc_cq_pop(q);
}

/* Under CU.lock: a copy's or set's record, matched to the oldest call of its kind and size
 * waiting on its stream (synchronous ones are queued too, so that an asynchronous one's
 * record is not taken by one of theirs on the same stream), or counted. One run by a graph is the graph's (timed as a whole,
 * or by its twin: left out, as a graph's kernels are under --gpu-time=all). */
static void match_copy(const uint8_t *r, __s64 offset)
{
	__u64 start = rd64(r, GS_CUPTI_C_START) - (__u64)offset,
	      end = rd64(r, GS_CUPTI_C_END) - (__u64)offset, seq;
	struct cq_entry *e = NULL;
	__u32 key[KEY_N];
	struct shape *sh;
	struct cq *q;

	if (rd32(r, GS_CUPTI_C_GRAPH)) {
		CU.graph_dropped++;
		return;
	}
	copy_key(key, rd64(r, GS_CUPTI_C_BYTES), rd32(r, 0) == GS_CUPTI_ACTIVITY_KIND_MEMSET);
	gc_dump_add(true, start, rd32(r, GS_CUPTI_C_STREAM), key, 0);
	/* (Its call not ended yet, maybe: then still in its thread's inbox, see drain.) */
	for (bool again = false; !e; again = true) {
		q = queue_of(rd32(r, GS_CUPTI_C_CONTEXT), rd32(r, GS_CUPTI_C_STREAM));
		if (q && (sh = gc_shape_of(q, key, false)))
			e = gc_shape_take(q, sh, &seq);
		if (again || !gc_drain(true))
			break;
	}
	/* (2-D and 3-D copies and sets, and those not queued, have their records too, and no
	 * entry: counted apart, for the debug line. An entry whose record never comes is
	 * counted lost, as a launch's.) */
	if (!e) {
		CU.copies_unmatched++;
		return;
	}
	matched(q, e, seq, start, end > start ? end : start);
}

/* Under CU.lock: one kernel record, matched to its launch and emitted, or counted. */
static void match(const uint8_t *r, __s64 offset)
{
	__u32 cctx = rd32(r, GS_CUPTI_K_CONTEXT), cstream = rd32(r, GS_CUPTI_K_STREAM), dims[KEY_N];
	const char *name = (const char *)(unsigned long)rd64(r, GS_CUPTI_K_NAME);
	__u64 nh = gc_name_hash(name);
	__u64 start = rd64(r, GS_CUPTI_K_START) - (__u64)offset,
	      end = rd64(r, GS_CUPTI_K_END) - (__u64)offset;
	struct cq *q = NULL;
	struct cq_entry *e;
	struct shape *sh;
	__u64 seq;

	/* (Ours: a calibration's, a gated launch's prime, run outside the program's calls.) */
	if (name && !strncmp(name, "gpuscope_", 9))
		return;
	/* (Under --gpu-time=all, a graph's kernels are its twin's to time: one whose launch
	 * found our kind on, a switch late, is left out.) */
	if (rd32(r, GS_CUPTI_K_GRAPH)) {
		if (CU.graphs)
			in_graph(r, name, nh, start, end);
		else
			CU.graph_dropped++;
		return;
	}
	memcpy(dims, r + GS_CUPTI_K_GRID, 6 * sizeof(*dims));
	dims[6] = (__u32)nh;
	dims[7] = (__u32)(nh >> 32);
	gc_dump_add(true, start, cstream, dims, 0);
	/* (The oldest launch of its kernel, grid and block on its stream: where one kernel and
	 * shape run many times, it may be another of the same. Where none of its kernel and
	 * shape was ever waiting, the oldest of its grid and block: see by_dims. Its call not
	 * ended yet, maybe: then still in its thread's inbox, see drain.) */
	e = NULL;
	for (bool again = false; !e; again = true) {
		if ((q = queue_of(cctx, cstream)))
			e = (sh = gc_shape_of(q, dims, false)) ? gc_shape_take(q, sh, &seq)
							       : gc_by_dims(q, dims, &seq);
		if (again || !gc_drain(true))
			break;
	}
	if (!q || !e) {
		CU.unmatched++;
		if (q)
			CU.no_shape++;
		else
			CU.no_stream++;
		if (gc_debug_on() && CU.unmatched <= 8)
			fprintf(stderr,
				"gpuscope cupti: no launch of grid %u,%u,%u block %u,%u,%u name "
				"%016llx on context %u stream %u (%u waiting there) at %llu: "
				"%.100s\n",
				dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
				(unsigned long long)nh, cctx, cstream, q ? q->n : 0,
				(unsigned long long)start, name ? name : "(none)");
		return;
	}
	matched(q, e, seq, start, end);
}

_Static_assert(GS_CUPTI_K_START == GS_CUPTI_C_START, "one start offset for the three kinds");

static int by_start(const void *a, const void *b)
{
	__u64 x = rd64(*(const uint8_t *const *)a, GS_CUPTI_K_START),
	      y = rd64(*(const uint8_t *const *)b, GS_CUPTI_K_START);

	return x < y ? -1 : x > y;
}

static void complete(void *ctx, uint32_t stream_id, uint8_t *buf, size_t size, size_t valid)
{
	struct done *d = (struct done *)(void *)(buf + DONE_AT);

	(void)ctx;
	(void)stream_id;
	(void)size;
	*d = (struct done){ .buf = buf, .valid = valid, .offset = realtime_offset() };
	pthread_mutex_lock(&done_lock);
	if (done_last)
		done_last->next = d;
	else
		done_first = d;
	done_last = d;
	pthread_mutex_unlock(&done_lock);
}

/* A completed buffer's records matched and emitted, and the buffer freed. */
static __u32 take_chunk = TAKE_CHUNK;

void gs_cupti_take_chunk(__u32 n)
{
	__atomic_store_n(&take_chunk, n, __ATOMIC_RELAXED);
}

__u32 gs_cupti_take_chunk_now(void)
{
	return __atomic_load_n(&take_chunk, __ATOMIC_RELAXED);
}

static void take(uint8_t *buf, size_t valid, __s64 offset)
{
	size_t dropped = 0, n = 0, unread = 0, cap = valid / GS_CUPTI_MEMSET_SIZE + 1, chunk;
	const uint8_t **k = malloc(cap * sizeof(*k));
	void *rec = NULL;

	/* (A buffer's kernel, copy and set records matched in the order they started: the
	 * three have their start at the same offset.) */
	while (valid && CU.f.next(buf, valid, &rec) == GS_CUPTI_SUCCESS)
		if (rd32(rec, 0) == GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
		    rd32(rec, 0) == GS_CUPTI_ACTIVITY_KIND_MEMCPY ||
		    rd32(rec, 0) == GS_CUPTI_ACTIVITY_KIND_MEMSET) {
			if (k && n < cap)
				k[n++] = rec;
			else
				unread++; /* (no memory to sort them in) */
		}
	if (k)
		qsort(k, n, sizeof(*k), by_start);
	/* (TAKE_CHUNK at a time, the queues' lock let go between: a launch waits for one
	 * chunk's matching at most, not for a buffer's thousands of records.) */
	chunk = __atomic_load_n(&take_chunk, __ATOMIC_RELAXED);
	pthread_mutex_lock(&CU.lock);
	CU.unmatched += unread;
	/* (Every launch whose record is here was put before its call: placed by now.) */
	gc_drain(false);
	for (size_t i = 0; i < n; i++) {
		if (i && chunk && i % chunk == 0) {
			pthread_mutex_unlock(&CU.lock);
			pthread_mutex_lock(&CU.lock);
			gc_drain(false);
		}
		if (rd32(k[i], 0) == GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			match(k[i], offset);
		else
			match_copy(k[i], offset);
	}
	pthread_mutex_unlock(&CU.lock);
	free(k);
	if (CU.f.dropped && CU.f.dropped(NULL, 0, &dropped) == GS_CUPTI_SUCCESS)
		for (size_t i = 0; i < dropped && i < 1000000; i++)
			gs_count_time_lost();
	gc_buf_put(buf, valid);
}

/* CUPTI's completed records asked for (flag 1: all, completed or not), then taken: by the
 * thread that asks (ours, or at exit, an unload, the program's profiler starting). */
static void flush_and_take(uint32_t flag)
{
	struct done *d, *next;

	CU.f.flush(flag);
	pthread_mutex_lock(&taking);
	pthread_mutex_lock(&done_lock);
	d = done_first;
	done_first = done_last = NULL;
	pthread_mutex_unlock(&done_lock);
	for (; d; d = next) {
		next = d->next;
		take(d->buf, d->valid, d->offset);
	}
	pthread_mutex_unlock(&taking);
}

/* After the last flush: the launches whose records never came, counted as lost. */
static void count_left(void)
{
	__u64 left = 0;

	pthread_mutex_lock(&CU.lock);
	gc_drain(true);
	for (int i = 0; i < CQ_MAX; i++) {
		struct cq *q = &CU.q[i];

		for (__u32 k = 0; k < q->n; k++) {
			const struct cq_entry *e = gc_at(q, k);

			if (e->failed || e->done || e->silent)
				continue;
			if (gc_debug_on() && left < 8)
				fprintf(stderr,
					"gpuscope cupti: left: grid %u,%u,%u block %u,%u,%u name "
					"%08x%08x on context %u stream %u (%llx, thread %u, queue "
					"%s) launched at %llu by thread %u, api %u\n",
					e->dims[0], e->dims[1], e->dims[2], e->dims[3], e->dims[4],
					e->dims[5], e->dims[7], e->dims[6], q->cctx, q->cstream,
					(unsigned long long)q->stream, q->owner,
					q->closed ? "closed" : "open",
					(unsigned long long)e->call_ts, e->tid, e->api);
			left++;
		}
		while (q->n)
			gc_cq_pop(q);
	}
	gc_dump_write();
	pthread_mutex_unlock(&CU.lock);
	emit_status(GS_CAL_CUPTI_UNMATCHED, CU.unmatched + CU.in_graphs);
	if (gc_debug_on())
		fprintf(stderr,
			"gpuscope cupti: records matched %llu in order, %llu out of order; "
			"unmatched %llu (no stream %llu, no launch of the shape %llu); in graphs "
			"%llu (nameless %llu, left to twins %llu); copies' and sets' records "
			"matching no call %llu; launches left %llu; pause late "
			"%llu; not queued: not started %llu, paused %llu, no context or capturing "
			"%llu, no ids %llu, no queue %llu, queue full %llu, no shape %llu; put, "
			"not "
			"placed: no queue %llu, queue full %llu, no shape %llu; the queues' lock "
			"taken by the program's threads to find a queue %llu (%llu us waited)\n",
			(unsigned long long)CU.in_order, (unsigned long long)CU.out_of_order,
			(unsigned long long)CU.unmatched, (unsigned long long)CU.no_stream,
			(unsigned long long)CU.no_shape, (unsigned long long)CU.graph_runs,
			(unsigned long long)CU.in_graphs, (unsigned long long)CU.graph_dropped,
			(unsigned long long)CU.copies_unmatched, (unsigned long long)left,
			(unsigned long long)CU.pause_late, (unsigned long long)gc_nq[NQ_START],
			(unsigned long long)gc_nq[NQ_PAUSED], (unsigned long long)gc_nq[NQ_CTX],
			(unsigned long long)gc_nq[NQ_IDS], (unsigned long long)gc_nq[NQ_QUEUE],
			(unsigned long long)gc_nq[NQ_ROOM], (unsigned long long)gc_nq[NQ_SHAPE],
			(unsigned long long)gc_unplaced[NQ_QUEUE],
			(unsigned long long)gc_unplaced[NQ_ROOM],
			(unsigned long long)gc_unplaced[NQ_SHAPE], (unsigned long long)gc_finds,
			(unsigned long long)gc_finds_ns / 1000);
	gc_bufs_debug();
}

static void flush_at_exit(void)
{
	if (__atomic_load_n(&CU.state, __ATOMIC_ACQUIRE) != ST_RUNNING)
		return;
	flush_and_take(1);
	count_left();
}

/* ---- modes and the program's own profiler --------------------------------------------- */

void gs_cupti_want(bool on)
{
	int s = __atomic_load_n(&CU.state, __ATOMIC_ACQUIRE);
	if (s == ST_FAILED || s == ST_HANDED)
		on = false;
	__atomic_store_n(&CU.want, on, __ATOMIC_RELEASE);
	apply();
}

/* The program is about to use CUPTI itself: ours flushed and given up. */
static void hand_over(void)
{
	int s = __atomic_load_n(&CU.state, __ATOMIC_ACQUIRE);

	__atomic_store_n(&CU.want, false, __ATOMIC_RELEASE);
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
	flush_and_take(1);
	emit_status(GS_CAL_CUPTI, GS_CUPTI_HANDED);
	count_left();
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
	pthread_mutex_init(&done_lock, NULL);
	pthread_mutex_init(&taking, NULL);
	done_first = done_last = NULL;
	if (__atomic_load_n(&CU.state, __ATOMIC_ACQUIRE) != ST_IDLE)
		__atomic_store_n(&CU.state, ST_HANDED, __ATOMIC_RELEASE);
	__atomic_store_n(&CU.want, false, __ATOMIC_RELEASE);
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
