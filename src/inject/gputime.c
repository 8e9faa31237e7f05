// SPDX-License-Identifier: MIT
/* GPU start and end times (see gputime.h). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gpuscope/cuda_abi.h"
#include "inject/gputime.h"

#define MAX_CTX	      16
#define MAX_EVENTS    8192 /* per context: what timing may hold at once */
#define NREF	      8
#define CALIBRATE_NS  1000000000ULL
#define HARVEST_NS    1000000ULL
#define NOT_READY     600
#define SAMPLE_SLOTS  256
#define MAX_PENDING   (MAX_CTX * MAX_EVENTS / 2)
#define FLUSH_NS      2000000000ULL /* at exit, how long to wait for the GPU to finish */
#define BACKLOG_SLOTS 64	    /* streams whose queued work is estimated */
#define DUR_SLOTS     1024	    /* kernels and graphs whose last GPU time is kept */
#define BACKLOG_MIN   20000ULL	    /* ns of work ahead that make a gate unnecessary */
#define FIRST_HOLD_NS 300000ULL	    /* how long a first launch may keep its gate closed */
#define END_LATE_NS   50000ULL	    /* an end event recorded this late after its call ... */
#define END_SOON_NS   50000ULL	    /* ... that completed this soon after: end not known */

typedef int (*ev_create_fn)(void **, unsigned int);
typedef int (*ev_record_fn)(void *, __u64);
typedef int (*ev_query_fn)(void *);
typedef int (*ev_elapsed_fn)(float *, void *, void *);
typedef int (*ctx_get_fn)(void **);
typedef int (*ctx_set_fn)(void *);
typedef int (*ctx_dev_fn)(int *);
typedef int (*stream_create_fn)(__u64 *, unsigned int);
typedef int (*capturing_fn)(__u64, int *);
typedef int (*func_is_loaded_fn)(int *, void *);
typedef int (*func_load_fn)(void *);
typedef int (*kernel_get_function_fn)(void **, void *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, __u64, void **, void **);

struct ref {
	void *event;
	__u64 host_ns;
};

struct ctx_slot {
	void *ctx;
	__u64 stream; /* ours, for reference events */
	int device;
	bool broken; /* timing failed to set up here: never try again */
	void **free_events;
	int nfree, nevents;
	struct ref refs[NREF];
	int nref;
	__u64 last_cal;
	struct gs_gate gate;
	void *prime; /* CUfunction: an empty kernel of ours (see gs_timing_begin) */
};

struct pending {
	void *start, *end;
	struct gs_timed_call c;
	__u64 stream;
	__u64 end_late; /* ungated, its end event recorded late: when that call returned */
	__u32 tid;
	__u8 ci;
	bool gated, forced;
};

/*
 * What is queued on a stream, estimated: each timed launch adds its kernel's last measured
 * GPU time to the stream's predicted end. (Untimed work is not counted: the estimate errs
 * towards an idle stream, which only costs a gate.)
 */
struct backlog {
	__u64 stream;
	void *ctx;
	__u64 busy_until;
	bool after_copy; /* its last operation we saw was a copy, a set or a graph, or we
			  * have seen none */
};

struct last_dur {
	__u64 func, ns;
};

static struct {
	int every;			       /* 0 off, 1 all, N every Nth */
	struct backlog backlog[BACKLOG_SLOTS]; /* under lock */
	struct last_dur dur[DUR_SLOTS];	       /* under lock */
	pthread_mutex_t lock;
	struct ctx_slot ctx[MAX_CTX];
	int nctx;
	struct pending *q;
	size_t qn, qcap;
	bool harvester;
	__u64 harvest_ns; /* between passes */
	bool stopped;	  /* the process is exiting: no more driver calls from the harvester */
	__u64 first_hold_ns;
	bool no_prime;		    /* GPUSCOPE_NO_PRIME (to compare) */
	__u64 end_delay_ns;	    /* GPUSCOPE_END_DELAY_US (tests: a thread held up before it) */
	pthread_mutex_t harvesting; /* one pass at a time: the harvester's or the exit flush */
	struct {
		ev_create_fn ev_create;
		ev_record_fn ev_record, ev_record_ptsz;
		ev_query_fn ev_query;
		ev_elapsed_fn ev_elapsed;
		ctx_get_fn ctx_get;
		ctx_set_fn ctx_set;
		ctx_dev_fn ctx_dev;
		stream_create_fn stream_create;
		capturing_fn capturing, capturing_ptsz;
		ev_query_fn stream_query, stream_query_ptsz;
		func_is_loaded_fn func_is_loaded; /* (CUDA 12.4 and later) */
		func_load_fn func_load;
		kernel_get_function_fn kernel_get_function;
		launch_fn launch;
	} cu;
	bool have_cu;
} T = { .lock = PTHREAD_MUTEX_INITIALIZER, .harvesting = PTHREAD_MUTEX_INITIALIZER };

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

void gs_timing_init(const char *mode)
{
	const char *h = getenv("GPUSCOPE_HARVEST_US"); /* (for measurements) */

	const char *f = getenv("GPUSCOPE_FIRST_GATE_US"); /* (same) */

	T.harvest_ns =
		h && atoi(h) >= 100 && atoi(h) <= 100000 ? (__u64)atoi(h) * 1000 : HARVEST_NS;
	T.first_hold_ns =
		f && atoi(f) >= 0 && atoi(f) <= 100000 ? (__u64)atoi(f) * 1000 : FIRST_HOLD_NS;
	T.no_prime = getenv("GPUSCOPE_NO_PRIME") != NULL;
	T.end_delay_ns =
		getenv("GPUSCOPE_END_DELAY_US")
			? strtoull(getenv("GPUSCOPE_END_DELAY_US"), NULL, 10) % 1000000 * 1000
			: 0;
	if (!mode || !strcmp(mode, "all"))
		T.every = 1;
	else if (!strcmp(mode, "off"))
		T.every = 0;
	else
		T.every = (int)strtol(mode, NULL, 10) > 0 ? (int)strtol(mode, NULL, 10) : 0;
}

void gs_timing_after_fork(void)
{
	/* The parent's contexts, events and harvester do not exist here. */
	pthread_mutex_init(&T.lock, NULL);
	pthread_mutex_init(&T.harvesting, NULL);
	memset(T.ctx, 0, sizeof(T.ctx));
	gs_gate_after_fork();
	T.nctx = 0;
	T.qn = 0;
	T.harvester = false;
	T.stopped = false;
	tl_tid = 0;
	tl_ctx = NULL;
}

/* The driver functions timing uses, called directly (never through our wrappers). */
static bool load_driver(void)
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

bool gs_timing_wanted(__u64 func)
{
	unsigned int h = (unsigned int)((func >> 4) ^ (func >> 12) ^ (func >> 20));
	unsigned int i = h & (SAMPLE_SLOTS - 1);

	if (T.every <= 1)
		return T.every == 1;
	if (!tl_sample && !(tl_sample = calloc(SAMPLE_SLOTS, sizeof(*tl_sample))))
		return false;
	/* Open addressing; with more kernels than slots, they share the last probe's slot. */
	for (int probe = 0; probe < 16; probe++, i = (i + 1) & (SAMPLE_SLOTS - 1)) {
		if (tl_sample[i].func == func || tl_sample[i].n == 0) {
			tl_sample[i].func = func;
			break;
		}
	}
	return tl_sample[i].n++ % (__u32)T.every == 0;
}

/* Under T.lock. */
static void *event_get(struct ctx_slot *c)
{
	void *ev;

	if (c->nfree)
		return c->free_events[--c->nfree];
	if (c->nevents >= MAX_EVENTS || T.cu.ev_create(&ev, 0))
		return NULL;
	c->nevents++;
	return ev;
}

static void event_put(struct ctx_slot *c, void *ev)
{
	if (!ev)
		return;
	if (!c->free_events)
		c->free_events = calloc(MAX_EVENTS, sizeof(void *));
	if (c->free_events && c->nfree < MAX_EVENTS)
		c->free_events[c->nfree++] = ev;
}

/* Both events of a call that goes untimed back to the pool. */
static void give_back(struct ctx_slot *c, struct gs_timing *t)
{
	pthread_mutex_lock(&T.lock);
	event_put(c, t->start);
	event_put(c, t->end);
	pthread_mutex_unlock(&T.lock);
	t->start = t->end = NULL;
}

/* Record a reference event and place it on the host clock; the narrowest of tries wins.
 * Called with the slot's context current on this thread. */
static void calibrate(struct ctx_slot *c)
{
	struct ref best = { 0 };
	__u64 width = ~0ULL;
	void *evs[3] = { 0 };

	pthread_mutex_lock(&T.lock);
	for (int i = 0; i < 3; i++)
		evs[i] = event_get(c);
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
			event_put(c, evs[i]);
	if (best.event) {
		if (c->nref == NREF) {
			event_put(c, c->refs[0].event);
			memmove(&c->refs[0], &c->refs[1], sizeof(c->refs[0]) * (NREF - 1));
			c->nref--;
		}
		c->refs[c->nref++] = best;
	}
	c->last_cal = gs_clock();
	pthread_mutex_unlock(&T.lock);
}

static void *harvest(void *arg);
static void flush_at_exit(void);

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
static void load_ahead(__u64 handle)
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

typedef int (*mod_load_fn)(void **, const void *);
typedef int (*mod_func_fn)(void **, void *, const char *);
static void emit_calibration(const struct ctx_slot *c, __u64 overhead_ns)
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
	gs_emit_commit(e);
}

/* With the slot's context current and its gate ready. */
static void calibrate_overhead(struct ctx_slot *c)
{
	mod_load_fn load = (mod_load_fn)gs_real_by_name("cuModuleLoadData");
	mod_func_fn func = (mod_func_fn)gs_real_by_name("cuModuleGetFunction");
	launch_fn launch = (launch_fn)gs_real_by_name("cuLaunchKernel");
	volatile __u64 *span = c->gate.host + 8; /* bytes 64..79 of the gate's page */
	void *mod = NULL, *fn = NULL, *ev[2];
	__u64 out = c->gate.dev + 64, ns = 2000;
	void *params[] = { &out, &ns };

	if (!load || !func || !launch || load(&mod, cal_ptx) ||
	    func(&fn, mod, "gpuscope_calibrate"))
		return;
	load_ahead((__u64)(unsigned long)fn); /* not behind our gate */
	if (!T.no_prime && !func(&c->prime, mod, "gpuscope_prime"))
		load_ahead((__u64)(unsigned long)c->prime);
	pthread_mutex_lock(&T.lock);
	ev[0] = event_get(c);
	ev[1] = event_get(c);
	pthread_mutex_unlock(&T.lock);
	for (int i = 0; i < 8 && ev[0] && ev[1]; i++) {
		__u64 gate, spins = 0, raw, kernel;
		float ms;

		span[0] = span[1] = 0;
		gs_gate_close(&c->gate, c->stream, false, &gate);
		if (!gate)
			break;
		T.cu.ev_record(ev[0], c->stream);
		launch(fn, 1, 1, 1, 1, 1, 1, 0, c->stream, params, NULL);
		T.cu.ev_record(ev[1], c->stream);
		gs_gate_open(&c->gate, gate);
		while (T.cu.ev_query(ev[1]) == NOT_READY && ++spins < 10000000)
			;
		if (T.cu.ev_elapsed(&ms, ev[0], ev[1]) || ms < 0)
			break;
		raw = (__u64)((double)ms * 1e6);
		kernel = span[1] - span[0];
		/* Nothing written (no real GPU ran it) or nonsense: no correction. */
		if (!span[0] || span[1] < span[0] || kernel > raw)
			break;
		emit_calibration(c, raw - kernel);
	}
	pthread_mutex_lock(&T.lock);
	event_put(c, ev[0]);
	event_put(c, ev[1]);
	pthread_mutex_unlock(&T.lock);
}

static void start_harvester(void)
{
	if (gs_thread(harvest)) {
		T.harvester = true;
		atexit(flush_at_exit);
	}
}

/* The slot of the current context, set up on first use (stream, device, reference). */
static int ctx_slot(void *ctx)
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
	calibrate(c);
	if (!c->nref)
		c->broken = true;
	else if (!getenv("GPUSCOPE_NO_GATES") && gs_gate_init(&c->gate))
		calibrate_overhead(c); /* (GPUSCOPE_NO_GATES: to compare, and for diagnosis) */
	return c->broken ? -1 : i;
}

/* The slot of the current context: this thread's last one, else looked up. */
static int slot_of(void *ctx)
{
	if (ctx != tl_ctx) {
		tl_slot = ctx_slot(ctx);
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

static unsigned int slot_hash(__u64 v, unsigned int n)
{
	return (unsigned int)((v >> 4) ^ (v >> 16) ^ (v >> 28)) & (n - 1);
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
	struct backlog *b = &T.backlog[slot_hash(key ^ (__u64)(unsigned long)ctx, BACKLOG_SLOTS)];

	if (b->stream != key || b->ctx != ctx) {
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
	const struct last_dur *d = &T.dur[slot_hash(func, DUR_SLOTS)];
	__u64 ahead;

	ahead = b->busy_until > now ? b->busy_until - now : 0;
	b->busy_until = (b->busy_until > now ? b->busy_until : now) + (d->func == func ? d->ns : 0);
	return ahead;
}

bool gs_timing_begin(struct gs_timing *t, __u64 stream, bool ptsz, __u8 kind, __u64 func)
{
	__u64 ahead = 0;
	struct ctx_slot *c;
	int capturing = 0;
	bool gate, first = false, prime = false;

	t->start = t->end = NULL;
	t->gate = 0;
	if (!load_driver() || T.cu.ctx_get(&t->ctx) || !t->ctx)
		return false;
	/* Nothing of ours goes into a stream that is being captured into a graph. */
	if ((ptsz ? T.cu.capturing_ptsz : T.cu.capturing)(stream, &capturing) || capturing)
		return false;
	t->ci = slot_of(t->ctx);
	if (t->ci < 0)
		return false;
	c = &T.ctx[t->ci];
	pthread_mutex_lock(&T.lock);
	t->start = event_get(c);
	t->end = t->start ? event_get(c) : NULL;
	if (!t->end) {
		event_put(c, t->start);
		t->start = NULL;
	}
	/* Copies are never gated: one from pageable memory waits inside the call for the
	 * copy engine, which a gate would hold up. */
	gate = kind == GS_GPU_KERNEL || kind == GS_GPU_GRAPH;
	if (gate) {
		struct backlog *b = backlog_of(t->ctx, stream_key(stream, ptsz));

		first = !launched_before(func);
		ahead = backlog_add(b, func, gs_clock());
		prime = b->after_copy;
		b->after_copy = kind == GS_GPU_GRAPH; /* (it may end in a copy) */
	}
	pthread_mutex_unlock(&T.lock);
	if (!t->start)
		return false;
	t->stream = stream;
	t->ptsz = ptsz;
	/*
	 * Only a stream that could go idle before this launch and its end event are queued
	 * needs the gate. With more work ahead than that (estimated, and the stream not done)
	 * the start event completes when the work ahead does, the kernel starts right after,
	 * and the end event is queued long before the kernel ends: both exact without it. A
	 * gate is not free on the GPU (a wait on host memory; measured: ResNet-50 training
	 * 1.31x with a gate at every launch), nor for the program's later stream queries.
	 */
	if (gate && ahead > BACKLOG_MIN && T.cu.stream_query &&
	    (ptsz ? T.cu.stream_query_ptsz : T.cu.stream_query)((void *)(unsigned long)stream) ==
		    NOT_READY)
		gate = false;
	if (first && kind == GS_GPU_KERNEL)
		load_ahead(func);
	if (gate)
		gs_gate_close(&c->gate, stream, ptsz, &t->gate);
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
	if (t->gate && prime && c->prime)
		T.cu.launch(c->prime, 1, 1, 1, 1, 1, 1, 0, stream_key(stream, ptsz), NULL, NULL);
	if (first)
		gs_gate_watch(&c->gate, t->gate, T.first_hold_ns);
	if ((ptsz ? T.cu.ev_record_ptsz : T.cu.ev_record)(t->start, stream)) {
		gs_gate_open(&c->gate, t->gate);
		give_back(c, t);
		return false;
	}
	return true;
}

void gs_timing_copied(__u64 stream, bool ptsz)
{
	void *ctx = NULL;

	if (!T.every || T.no_prime || !load_driver() || T.cu.ctx_get(&ctx) || !ctx)
		return;
	pthread_mutex_lock(&T.lock);
	backlog_of(ctx, stream_key(stream, ptsz))->after_copy = true;
	pthread_mutex_unlock(&T.lock);
}

void gs_timing_end(struct gs_timing *t, int result, const struct gs_timed_call *call)
{
	struct ctx_slot *c = &T.ctx[t->ci];
	__u64 opened, late = gs_clock();
	bool held;
	int r;

	if (!t->start)
		return;
	if (T.end_delay_ns) {
		struct timespec d = { 0, (long)T.end_delay_ns };

		nanosleep(&d, NULL);
		late = gs_clock();
	}
	r = result || (t->ptsz ? T.cu.ev_record_ptsz : T.cu.ev_record)(t->end, t->stream);
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
		give_back(c, t);
		return;
	}
	if (!tl_tid)
		tl_tid = (__u32)syscall(SYS_gettid);
	pthread_mutex_lock(&T.lock);
	if (T.qn == T.qcap) {
		size_t cap = T.qcap ? 2 * T.qcap : 1024;
		struct pending *q = cap <= MAX_PENDING ? realloc(T.q, cap * sizeof(*q)) : NULL;

		if (q) {
			T.q = q;
			T.qcap = cap;
		}
	}
	if (T.qn < T.qcap) {
		T.q[T.qn++] =
			(struct pending){ .start = t->start,
					  .end = t->end,
					  .c = *call,
					  /* A NULL stream of a per-thread variant
						  * is this thread's default stream. */
					  .stream = t->ptsz && !t->stream ? GS_CU_STREAM_PER_THREAD
									  : t->stream,
					  .tid = tl_tid,
					  .ci = (__u8)t->ci,
					  .gated = held,
					  .forced = t->gate && !held,
					  .end_late = late };
		if (opened > T.q[T.qn - 1].c.call_end)
			T.q[T.qn - 1].c.call_end = opened;
		if (!T.harvester)
			start_harvester();
	} else {
		/* Too much outstanding: this call goes untimed, the program is not held up. */
		event_put(c, t->start);
		event_put(c, t->end);
	}
	pthread_mutex_unlock(&T.lock);
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

static void emit_gpu(const struct ctx_slot *c, const struct pending *p, __u64 start, __u64 end)
{
	struct gs_ev_gpu *e = gs_emit_reserve(sizeof(*e), GS_EV_GPU);

	if (!e)
		return;
	gs_fill_hdr(&e->h, GS_EV_GPU, sizeof(*e), p->c.call_ts);
	e->h.tid = p->tid;
	e->start_ns = start;
	e->end_ns = end;
	e->call_end_ns = p->c.call_end;
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
		   (p->end_late && end < p->end_late + END_SOON_NS ? GS_GPU_END_LATE : 0);
	e->device = c->device;
	e->copy_kind = p->c.copy_kind;
	e->pad = 0;
	gs_emit_commit(e);
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
	int q = T.cu.ev_elapsed(&dur, p->start, p->end);
	__s64 start;

	if (q == NOT_READY)
		return 0;
	r = ref_for(c, p->c.call_ts);
	if (q == 0 && dur >= 0 && !T.cu.ev_elapsed(&to_start, r->event, p->start)) {
		start = (__s64)r->host_ns + (__s64)((double)to_start * 1e6);
		if (start > 0)
			emit_gpu(c, p, (__u64)start, (__u64)start + (__u64)((double)dur * 1e6));
	}
	pthread_mutex_lock(&T.lock);
	if (q == 0 && dur >= 0 && p->c.func &&
	    (p->c.kind == GS_GPU_KERNEL || p->c.kind == GS_GPU_GRAPH)) {
		struct last_dur *d = &T.dur[slot_hash(p->c.func, DUR_SLOTS)];

		d->func = p->c.func;
		d->ns = (__u64)((double)dur * 1e6);
	}
	event_put(c, p->start);
	event_put(c, p->end);
	pthread_mutex_unlock(&T.lock);
	return 1;
}

/* One pass over what is pending: emit what finished, keep the rest in order. Returns how
 * many are still pending. */
static size_t harvest_pass(void **current, bool recalibrate)
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

		if (c->ctx != *current && !T.cu.ctx_set(c->ctx))
			*current = c->ctx;
		if (!harvest_one(&batch[i]))
			batch[keep++] = batch[i];
	}
	for (int ci = 0; recalibrate && ci < __atomic_load_n(&T.nctx, __ATOMIC_ACQUIRE); ci++) {
		struct ctx_slot *c = &T.ctx[ci];

		if (c->broken || !c->nref || gs_clock() - c->last_cal < CALIBRATE_NS)
			continue;
		if (!T.cu.ctx_set(c->ctx)) {
			*current = c->ctx;
			calibrate(c);
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
		harvest_pass(&current, true);
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
void gs_timing_synced(void)
{
	void *saved = NULL, *current;

	/* Nothing queued may still mean a pass of the harvester holds it: pass after it. */
	if (!T.every || !__atomic_load_n(&T.harvester, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&T.have_cu, __ATOMIC_ACQUIRE) || T.cu.ctx_get(&saved))
		return;
	current = saved;
	harvest_pass(&current, false);
	if (current != saved)
		T.cu.ctx_set(saved);
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

	while (harvest_pass(&current, false) && gs_clock() < deadline) {
		struct timespec nap = { 0, 100000 };

		nanosleep(&nap, NULL);
	}
	pthread_mutex_lock(&T.harvesting);
	T.stopped = true;
	pthread_mutex_unlock(&T.harvesting);
}
