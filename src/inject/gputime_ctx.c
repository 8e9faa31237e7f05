// SPDX-License-Identifier: MIT
/* GPU times (gputime_int.h): the state, the driver's functions, and per context its events,
 * reference events and calibration. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "inject/gputime_int.h"

struct gt_state T = { .lock = PTHREAD_MUTEX_INITIALIZER, .harvesting = PTHREAD_MUTEX_INITIALIZER };
int gt_every GS_HOT;
bool gs_capture_begun;

/* The driver functions timing uses, called directly (never through our wrappers). */
bool gt_load_driver(void)
{
	if (__atomic_load_n(&T.have_cu, __ATOMIC_ACQUIRE))
		return true;
	T.cu.ev_create = (ev_create_fn)(void *)gs_real(GS_API_CU_EVENT_CREATE);
	T.cu.ev_record = (ev_record_fn)(void *)gs_real(GS_API_CU_EVENT_RECORD);
	T.cu.ev_record_ptsz = (ev_record_fn)(void *)gs_real(GS_API_CU_EVENT_RECORD_PTSZ);
	T.cu.stream_create = (stream_create_fn)(void *)gs_real(GS_API_CU_STREAM_CREATE);
	T.cu.launch = (launch_fn)(void *)gs_real(GS_API_CU_LAUNCH_KERNEL);
	T.cu.ctx_set = (ctx_set_fn)(void *)gs_real(GS_API_CU_CTX_SET_CURRENT);
	T.cu.ev_query = (ev_query_fn)gs_real_by_name("cuEventQuery");
	T.cu.ev_elapsed = (ev_elapsed_fn)gs_real_by_name("cuEventElapsedTime_v2");
	if (!T.cu.ev_elapsed)
		T.cu.ev_elapsed = (ev_elapsed_fn)gs_real_by_name("cuEventElapsedTime");
	T.cu.ctx_get = (ctx_get_fn)gs_real_by_name("cuCtxGetCurrent");
	T.cu.ctx_dev = (ctx_dev_fn)gs_real_by_name("cuCtxGetDevice");
	T.cu.capturing = (capturing_fn)gs_real_by_name("cuStreamIsCapturing");
	T.cu.capturing_ptsz = (capturing_fn)gs_real_by_name("cuStreamIsCapturing_ptsz");
	T.cu.stream_query = (ev_query_fn)(void *)gs_real(GS_API_CU_STREAM_QUERY);
	T.cu.stream_query_ptsz = (ev_query_fn)(void *)gs_real(GS_API_CU_STREAM_QUERY_PTSZ);
	T.cu.func_is_loaded = (func_is_loaded_fn)gs_real_by_name("cuFuncIsLoaded");
	T.cu.func_load = (func_load_fn)gs_real_by_name("cuFuncLoad");
	T.cu.kernel_get_function = (kernel_get_function_fn)gs_real_by_name("cuKernelGetFunction");
	if (!T.cu.ev_create || !T.cu.ev_record || !T.cu.ev_query || !T.cu.ev_elapsed ||
	    !T.cu.ctx_get || !T.cu.ctx_set || !T.cu.stream_create || !T.cu.capturing)
		return false;
	if (!T.cu.ev_record_ptsz)
		T.cu.ev_record_ptsz = T.cu.ev_record;
	if (!T.cu.capturing_ptsz)
		T.cu.capturing_ptsz = T.cu.capturing;
	if (!T.cu.stream_query_ptsz)
		T.cu.stream_query_ptsz = T.cu.stream_query;
	__atomic_store_n(&T.have_cu, true, __ATOMIC_RELEASE);
	return true;
}

/* Under T.lock. */
void *gt_event_get(struct ctx_slot *c)
{
	void *ev;

	if (c->nfree)
		return c->free_events[--c->nfree];
	if (c->nevents >= MAX_EVENTS || T.cu.ev_create(&ev, 0))
		return NULL;
	c->nevents++;
	return ev;
}

void gt_event_put(struct ctx_slot *c, void *ev)
{
	if (!ev)
		return;
	if (!c->free_events)
		c->free_events = calloc(MAX_EVENTS, sizeof(void *));
	if (c->free_events && c->nfree < MAX_EVENTS)
		c->free_events[c->nfree++] = ev;
}

/* Both events of a call that goes untimed back to the pool. */
void gt_give_back(struct ctx_slot *c, struct gs_timing *t)
{
	pthread_mutex_lock(&T.lock);
	gt_event_put(c, t->start);
	gt_event_put(c, t->end);
	pthread_mutex_unlock(&T.lock);
	t->start = t->end = NULL;
}

/* Record a reference event and place it on the host clock; the narrowest of tries wins.
 * Called with the slot's context current on this thread. */
void gt_calibrate(struct ctx_slot *c)
{
	struct ref best = { 0 };
	__u64 width = ~0ULL;
	void *evs[3] = { 0 };

	pthread_mutex_lock(&T.lock);
	for (int i = 0; i < 3; i++)
		evs[i] = gt_event_get(c);
	pthread_mutex_unlock(&T.lock);
	for (int i = 0; i < 3 && evs[i]; i++) {
		__u64 t0 = gs_clock(), t1, spins = 0;

		if (T.cu.ev_record(evs[i], c->stream))
			break;
		while (T.cu.ev_query(evs[i]) == NOT_READY && ++spins < 1000000)
			;
		t1 = gs_clock();
		if (t1 - t0 < width) {
			width = t1 - t0;
			best.event = evs[i];
			best.host_ns = t0 + (t1 - t0) / 2;
		}
	}
	pthread_mutex_lock(&T.lock);
	for (int i = 0; i < 3; i++)
		if (evs[i] != best.event)
			gt_event_put(c, evs[i]);
	if (best.event) {
		if (c->nref == NREF) {
			gt_event_put(c, c->refs[0].event);
			memmove(&c->refs[0], &c->refs[1], sizeof(c->refs[0]) * (NREF - 1));
			c->nref--;
		}
		c->refs[c->nref++] = best;
	}
	c->last_cal = gs_clock();
	pthread_mutex_unlock(&T.lock);
}

/*
 * An event pair around a kernel measures more than the kernel: the GPU's own launch and
 * drain around it (measured on an H200: 2.4 us more than CUPTI reports, whatever the
 * kernel). Per context, a kernel of ours that spins 2 us reads the GPU's clock at its
 * start and end, between gated events; the difference of the two measures is that
 * overhead, which the analysis takes off kernel times (GS_GPU_CALIBRATION records).
 * PTX, so the driver compiles it for whatever GPU this is.
 */
static const char cal_ptx[] =
	".version 6.0\n.target sm_50\n.address_size 64\n"
	".visible .entry gpuscope_calibrate(.param .u64 out, .param .u64 ns)\n{\n"
	"\t.reg .u64 %p, %n, %t0, %t1, %d;\n\t.reg .pred %q;\n"
	"\tld.param.u64 %p, [out];\n\tld.param.u64 %n, [ns];\n"
	"\tmov.u64 %t0, %globaltimer;\n"
	"SPIN:\n\tmov.u64 %t1, %globaltimer;\n\tsub.u64 %d, %t1, %t0;\n"
	"\tsetp.lt.u64 %q, %d, %n;\n\t@%q bra SPIN;\n"
	"\tst.volatile.global.u64 [%p], %t0;\n\tst.volatile.global.u64 [%p+8], %t1;\n"
	"\tret;\n}\n"
	".visible .entry gpuscope_prime()\n{\n\tret;\n}\n";

/*
 * Before a first launch is gated: load its function now, as the launch would (CUDA 12+
 * loads lazily by default). Measured on an H200, a PyTorch kernel's first launch spends
 * 1.1-1.8 ms in the call loading it, far beyond the hold of a first launch's gate; loaded
 * before, the same launch returns in microseconds. The handle may be a CUkernel (which
 * cuLaunchKernel takes too): then its function in the current context is loaded. Any
 * failure leaves it to the launch, as without us.
 */
void gt_load_ahead(__u64 handle)
{
	void *f = (void *)(unsigned long)handle;
	int state = 0;

	if (!T.cu.func_is_loaded || !T.cu.func_load)
		return;
	if (T.cu.func_is_loaded(&state, f) &&
	    (!T.cu.kernel_get_function || T.cu.kernel_get_function(&f, f) ||
	     T.cu.func_is_loaded(&state, f)))
		return;
	if (state != 1 /* CU_FUNCTION_LOADING_STATE_LOADED */)
		T.cu.func_load(f);
}

/*
 * What a kernel between two events adds to an empty pair beyond its duration as CUPTI has
 * it, by compute capability: the pair's excess over CUPTI for kernels under 2 us less the
 * empty pair, over 21 processes on one-GPU H100 and H200 and two-GPU H200 machines (driver
 * 580, bench/gputime_bias.py: 977-1,392 ns, median 1,313; bench/results/launch-2026-11-27.md).
 * GPUSCOPE_EVENT_LAUNCH_NS sets it for any GPU (0: none, the analysis's midpoint rule).
 * And the least that a kernel launched onto a busy stream (its start the end event of the
 * launch before it, or its own start event queued right after that) reads over its
 * duration, whatever the events cost: 2,976-3,264 ns for kernels under 50 us in 8 processes
 * on one-GPU H100 and H200 machines, where an empty pair and a launch come to 2.5 us; on a
 * two-GPU H200, where they come to 4.2 us, as much as that (bench/busy_bias.py,
 * bench/results/follow-2026-11-27.md). GPUSCOPE_EVENT_BUSY_MIN_NS sets it (0: none).
 */
static const struct {
	int major, minor;
	__u64 ns, busy_ns;
} launch_by_cc[] = {
	{ 9, 0, 1250, 3150 }, /* Hopper */
};

static __u64 launch_ns(const struct ctx_slot *c, bool busy)
{
	typedef int (*attr_fn)(int *, int, int);
	attr_fn attr = (attr_fn)gs_real_by_name("cuDeviceGetAttribute");
	const char *set = getenv(busy ? "GPUSCOPE_EVENT_BUSY_MIN_NS" : "GPUSCOPE_EVENT_LAUNCH_NS");
	int major = 0, minor = 0;

	if (set)
		return strtoull(set, NULL, 10) % 1000000;
	if (!attr || c->device < 0 || attr(&major, 75 /* COMPUTE_CAPABILITY_MAJOR */, c->device) ||
	    attr(&minor, 76 /* COMPUTE_CAPABILITY_MINOR */, c->device))
		return 0;
	for (size_t i = 0; i < sizeof(launch_by_cc) / sizeof(launch_by_cc[0]); i++)
		if (launch_by_cc[i].major == major && launch_by_cc[i].minor == minor)
			return busy ? launch_by_cc[i].busy_ns : launch_by_cc[i].ns;
	return 0;
}

typedef int (*mod_load_fn)(void **, const void *);
typedef int (*mod_func_fn)(void **, void *, const char *);
/* A calibration record: what: GS_CAL_OVERHEAD (the event pair's overhead, which the
 * analysis takes off), GS_CAL_SPAN (the calibration kernel's own span, as it read the
 * timer), GS_CAL_EMPTY (an event pair with nothing between, gated): the last two for
 * comparing estimators with CUPTI (bench/gputime_bias.py), not used by the analysis. */
void gt_emit_calibration(const struct ctx_slot *c, __u64 overhead_ns, __u64 what)
{
	struct gs_ev_gpu *e = gs_emit_reserve(sizeof(*e), GS_EV_GPU);
	__u64 now = gs_clock();

	if (!e)
		return;
	gs_fill_hdr(&e->h, GS_EV_GPU, sizeof(*e), now);
	memset((char *)e + sizeof(e->h), 0, sizeof(*e) - sizeof(e->h));
	e->start_ns = e->call_end_ns = now;
	e->end_ns = now + overhead_ns;
	e->stream = c->stream;
	e->ctx = (__u64)(unsigned long)c->ctx;
	e->api = GS_API_CU_LAUNCH_KERNEL;
	e->kind = GS_GPU_CALIBRATION;
	e->flags = GS_GPU_GATED;
	e->device = c->device;
	e->func = what;
	gs_emit_commit(e);
}

/*
 * One gated run on our stream: event 0, then nk (0-2) calibration kernels, kernel k with
 * kparams[k] and followed by event k + 1, and with `empty` one more event right after the
 * last; the gate opened and the last event waited for. The time from the event before the
 * last one to it, ns; -1 if it could not be had.
 */
static __s64 gated_run(struct ctx_slot *c, void **ev, int nk, bool empty, launch_fn launch,
		       void *fn, void ***kparams)
{
	__u64 gate, spins = 0;
	int last = nk + empty;
	float ms;

	gs_gate_close(&c->gate, c->stream, false, &gate);
	if (!gate)
		return -1;
	T.cu.ev_record(ev[0], c->stream);
	for (int k = 0; k < nk; k++) {
		launch(fn, 1, 1, 1, 1, 1, 1, 0, c->stream, kparams[k], NULL);
		T.cu.ev_record(ev[k + 1], c->stream);
	}
	if (empty)
		T.cu.ev_record(ev[last], c->stream);
	gs_gate_open(&c->gate, gate);
	while (T.cu.ev_query(ev[last]) == NOT_READY && ++spins < 10000000)
		;
	if (T.cu.ev_elapsed(&ms, ev[last - 1], ev[last]) || ms < 0)
		return -1;
	return (__s64)((double)ms * 1e6);
}

/* With the slot's context current and its gate ready. */
static void calibrate_overhead(struct ctx_slot *c)
{
	mod_load_fn load = (mod_load_fn)gs_real_by_name("cuModuleLoadData");
	mod_func_fn func = (mod_func_fn)gs_real_by_name("cuModuleGetFunction");
	launch_fn launch = (launch_fn)gs_real_by_name("cuLaunchKernel");
	volatile __u64 *span = c->gate.host + 8; /* bytes 64..95 of the gate's page */
	void *mod = NULL, *fn = NULL, *ev[3];
	__u64 out = c->gate.dev + 64, out2 = c->gate.dev + 80, ns = 2000;
	void *params[] = { &out, &ns }, *params2[] = { &out2, &ns };
	void **kparams[] = { params, params2 };
	int measured = 0;
	__u64 l;

	if (!load || !func || !launch || load(&mod, cal_ptx) ||
	    func(&fn, mod, "gpuscope_calibrate"))
		return;
	gt_load_ahead((__u64)(unsigned long)fn); /* not behind our gate */
	if (!T.no_prime && !func(&c->prime, mod, "gpuscope_prime"))
		gt_load_ahead((__u64)(unsigned long)c->prime);
	pthread_mutex_lock(&T.lock);
	ev[0] = gt_event_get(c);
	ev[1] = gt_event_get(c);
	ev[2] = gt_event_get(c);
	pthread_mutex_unlock(&T.lock);
	for (int i = 0; i < 8 && ev[0] && ev[1]; i++) {
		__s64 raw;

		span[0] = span[1] = 0;
		raw = gated_run(c, ev, 1, false, launch, fn, kparams);
		/* Nothing written (no real GPU ran it) or nonsense: no correction. */
		if (raw < 0 || !span[0] || span[1] < span[0] || span[1] - span[0] > (__u64)raw)
			break;
		gt_emit_calibration(c, (__u64)raw - (span[1] - span[0]), GS_CAL_OVERHEAD);
		gt_emit_calibration(c, span[1] - span[0], GS_CAL_SPAN);
		measured++;
	}
	if (measured && (l = launch_ns(c, false)))
		gt_emit_calibration(c, l, GS_CAL_LAUNCH);
	if (measured && (l = launch_ns(c, true)))
		gt_emit_calibration(c, l, GS_CAL_BUSY_MIN);
	for (int i = 0; i < 8 && ev[0] && ev[1]; i++) {
		__s64 raw = gated_run(c, ev, 0, true, launch, fn, kparams);

		if (raw < 0)
			break;
		gt_emit_calibration(c, (__u64)raw, GS_CAL_EMPTY);
	}
	/* A kernel timed from the end event of one before it (a chain's or a follow's,
	 * gputime_chain.c), and an empty pair right after a kernel: recorded for
	 * bench/gputime_bias.py and bench/busy_bias.py, not used by the analysis. */
	for (int i = 0; i < 8 && measured && ev[0] && ev[1] && ev[2]; i++) {
		__s64 raw, empty;

		span[2] = span[3] = 0;
		raw = gated_run(c, ev, 2, false, launch, fn, kparams);
		if (raw < 0 || !span[2] || span[3] < span[2] || span[3] - span[2] > (__u64)raw)
			break;
		gt_emit_calibration(c, (__u64)raw - (span[3] - span[2]), GS_CAL_CHAINED);
		empty = gated_run(c, ev, 1, true, launch, fn, kparams);
		if (empty >= 0)
			gt_emit_calibration(c, (__u64)empty, GS_CAL_BUSY_EMPTY);
	}
	c->cal = fn; /* (for a twin's event nodes: gputime_graph.c) */
	pthread_mutex_lock(&T.lock);
	for (int i = 0; i < 3; i++)
		gt_event_put(c, ev[i]);
	pthread_mutex_unlock(&T.lock);
}

/* The slot of the current context, set up on first use (stream, device, reference). */
int gt_ctx_slot(void *ctx)
{
	struct ctx_slot *c = NULL;
	int i;

	pthread_mutex_lock(&T.lock);
	for (i = 0; i < T.nctx; i++)
		if (T.ctx[i].ctx == ctx)
			break;
	if (i < T.nctx) {
		pthread_mutex_unlock(&T.lock);
		return T.ctx[i].broken ? -1 : i;
	}
	if (T.nctx == MAX_CTX) {
		pthread_mutex_unlock(&T.lock);
		return -1;
	}
	c = &T.ctx[T.nctx];
	memset(c, 0, sizeof(*c));
	c->ctx = ctx;
	c->device = -1;
	/* A stream of ours for reference events: non-blocking, so it never waits on or delays
	 * the program's legacy default stream. */
	c->broken = T.cu.stream_create(&c->stream, 1 /* CU_STREAM_NON_BLOCKING */) != 0;
	if (T.cu.ctx_dev)
		T.cu.ctx_dev(&c->device);
	c->last_cal = gs_clock();
	i = T.nctx++;
	pthread_mutex_unlock(&T.lock);
	if (c->broken)
		return -1;
	gt_calibrate(c);
	if (!c->nref)
		c->broken = true;
	else if (!getenv("GPUSCOPE_NO_GATES") && gs_gate_init(&c->gate))
		calibrate_overhead(c); /* (GPUSCOPE_NO_GATES: to compare, and for diagnosis) */
	return c->broken ? -1 : i;
}
