// SPDX-License-Identifier: MIT
/*
 * Device-side probes, in the program (GPUSCOPE_PROBE names the bundle `gpuscope probe`
 * wrote: the probes' PTX, where they go, the maps).
 *
 * - A module or library loaded with PTX (cuModuleLoadData[Ex], cuModuleLoadFatBinary,
 *   cuLibraryLoadData) is remembered with its PTX; one without is left alone.
 * - Its kernels' handles, as the program gets them (cuModuleGetFunction, cuLibraryGetKernel,
 *   cuKernelGetFunction), go into a table the launch path reads without a lock.
 * - The first launch of such a kernel in a context instruments its module there: the PTX
 *   rewritten (ptx/rewrite.c), compiled by the driver's JIT, the maps allocated in device
 *   memory (once per context) and their table (gs_maps) filled in the new module.
 * - Launches (cuLaunchKernel, cuLaunchKernelEx, cooperative, and their per-thread-stream
 *   variants; launches captured into graphs are routed as they are captured) then go to
 *   the instrumented function, with the launch's sequence number and time appended as the
 *   __gs_launch parameter.
 * - Anything that fails falls back to the original code, which runs as if we were not
 *   there: PTX the rewriter refuses, a JIT error, a block larger than the instrumented
 *   kernel allows (it may need more registers), a launch of it the driver refuses (the
 *   launch is then made again with the original). What fell back and why is written down
 *   once.
 * - A thread copies the maps out every GPUSCOPE_PROBE_INTERVAL ms (on a stream of its own,
 *   without waiting for the program's kernels) into the snapshot file in GPUSCOPE_PROBE_OUT;
 *   at exit, and before a context is destroyed, after its work is done.
 * - The launch time is on the GPU's global timer: an offset from this process's clock,
 *   measured in each context by a one-thread kernel that answers the host's requests with
 *   the timer (through mapped host memory), the best of 32 round trips.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/util.h"
#include "gpuscope/cuda_abi.h"
#include "inject/inject.h"
#include "ptx/bundle.h"
#include "ptx/gpuring.h"
#include "ptx/rewrite.h"
#include "ptx/translate.h"

typedef int (*fn1)(__u64);
typedef int (*fn2)(__u64, __u64);
typedef int (*fn3)(__u64, __u64, __u64);
typedef int (*fn4)(__u64, __u64, __u64, __u64);
typedef int (*fn5)(__u64, __u64, __u64, __u64, __u64);

#ifndef GS_ARGS
#define GS_ARGS 11 /* (the wrappers' arguments, gpuscope/decode.h) */
#endif
#define HANDLES	      (1u << 16) /* the handle table's slots */
#define MAX_CTX	      16
#define MAX_NOTES     256
#define CALIB_ROUNDS  32
#define JIT_LOG_BYTES 8192

enum {
	CU_JIT_ERROR_LOG_BUFFER = 5,
	CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
};
enum {
	ATTR_MAX_THREADS = 0,
	ATTR_LOCAL_BYTES = 3,
	ATTR_NUM_REGS = 4,
	ATTR_MAX_DYN_SHARED = 8,
};
enum {
	DEV_SM_COUNT = 16,
	DEV_CC_MAJOR = 75,
	DEV_CC_MINOR = 76
};

struct pctx {
	__u64 ctx;
	int device;
	unsigned int sm;
	__u64 stream;
	__u64 dmaps[BUNDLE_MAX_MAPS];
	unsigned char desc[BUNDLE_MAX_MAPS * GS_MAP_DESC];
	/* The global timer - our clock, ns, at calib_at; and its drift (ns per ns) from the
	 * calibration before. */
	long long clock_off;
	__u64 calib_at;
	double drift;
	__u64 clock_mod, clock_fn, clock_d;
	volatile __u64 *clock_h;
	/* ring buffers: host memory the GPU writes (the consumer position, then the ring) */
	volatile __u64 *ring_h[BUNDLE_MAX_MAPS];
	bool clock_ok, dead, failed;
};

struct pmod {
	__u64 handle; /* CUmodule or CUlibrary */
	char *ptx;
	unsigned int ptx_arch;
	struct ptx_rewrite_stats st; /* laid out at the first rewrite (st.k set) */
	unsigned int kernel_base;    /* its kernels' ids from there */
	bool rewrite_failed;
	unsigned int index; /* in load order */
	struct pmod *next;
};

struct pfn { /* a kernel instrumented in a context */
	__u64 ctx, fn;
	__u64 module; /* its own, compiled by the JIT */
	int max_threads, smem_set;
	bool failed;
};

struct pkern {
	struct pmod *mod;
	char *name;
	int kidx; /* in mod->st.k, -1 until rewritten */
	_Atomic unsigned long long routed, fallback;
	struct pfn inst[MAX_CTX];
	int ninst;
	struct pkern *next; /* all of them */
};

static struct {
	bool on;
	struct bundle b;
	const char *out_dir;
	pthread_mutex_t lock;
	struct pmod *mods;
	unsigned int nmods;
	struct pkern *kerns;
	struct pctx ctx[MAX_CTX];
	int nctx;
	unsigned int next_kernel_id;
	char *notes[MAX_NOTES];
	int nnotes;
	unsigned int notes_lost; /* not kept: out of memory */
	struct strbuf stats;
	_Atomic __u64 keys[HANDLES];
	struct pkern *_Atomic vals[HANDLES];
	_Atomic unsigned long long seq;
	pthread_t thread;
	bool thread_on, thread_tried, exit_hooked;
	unsigned int sass_only; /* modules loaded without PTX */
	_Atomic int stop;
	unsigned int interval_ms;
	unsigned int threads; /* per-thread arrays */
} P = { .lock = PTHREAD_MUTEX_INITIALIZER };

bool gs_probe_on;

static void *real(const char *name)
{
	return gs_real_by_name(name);
}

/* A note, once (callers hold the lock). */
__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
	struct strbuf sb = { 0 };
	va_list ap;

	va_start(ap, fmt);
	sb_vprintf(&sb, fmt, ap);
	va_end(ap);
	if (!sb.buf || sb.oom) {
		P.notes_lost++;
		sb_free(&sb);
		return;
	}
	for (char *c = sb.buf; c && *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	for (int i = 0; i < P.nnotes; i++)
		if (!strcmp(P.notes[i], sb.buf)) {
			sb_free(&sb);
			return;
		}
	if (P.nnotes < MAX_NOTES)
		P.notes[P.nnotes++] = sb.buf;
	else
		sb_free(&sb);
}

void gs_probe_after_fork(void)
{
	/* The child has none of the parent's contexts, nor its thread. */
	P.on = gs_probe_on = false;
	P.thread_on = false;
	P.nctx = 0;
	pthread_mutex_init(&P.lock, NULL);
}

void gs_probe_init(void)
{
	const char *path = getenv("GPUSCOPE_PROBE"), *e;
	char err[256];
	struct strbuf sb = { 0 };
	char buf[65536];
	size_t n;
	FILE *f;

	P.out_dir = getenv("GPUSCOPE_PROBE_OUT");
	if (!path || !*path || !P.out_dir || !*P.out_dir)
		return;
	f = fopen(path, "re");
	if (!f)
		return;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		sb_putn(&sb, buf, n);
	fclose(f);
	if (!sb.buf || sb.oom || bundle_parse(sb.buf, sb.len, &P.b, err, sizeof(err))) {
		sb_free(&sb);
		return;
	}
	sb_free(&sb);
	e = getenv("GPUSCOPE_PROBE_INTERVAL");
	P.interval_ms = e ? (unsigned int)strtoul(e, NULL, 10) : 1000;
	if (P.interval_ms < 10)
		P.interval_ms = 10;
	P.on = gs_probe_on = true;
}

/* ---- the handle table (lock-free reads) ------------------------------------------------ */

static unsigned int slot_of(__u64 h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (unsigned int)h & (HANDLES - 1);
}

static struct pkern *lookup(__u64 h)
{
	unsigned int s = slot_of(h);

	for (unsigned int i = 0; i < HANDLES; i++, s = (s + 1) & (HANDLES - 1)) {
		__u64 k = atomic_load_explicit(&P.keys[s], memory_order_acquire);

		if (!k)
			return NULL;
		if (k == h)
			return atomic_load_explicit(&P.vals[s], memory_order_acquire);
	}
	return NULL;
}

/* Callers hold the lock. val NULL forgets the handle. */
static void insert(__u64 h, struct pkern *val)
{
	unsigned int s = slot_of(h);

	if (!h)
		return;
	for (unsigned int i = 0; i < HANDLES; i++, s = (s + 1) & (HANDLES - 1)) {
		__u64 k = atomic_load_explicit(&P.keys[s], memory_order_relaxed);

		if (k == h || (!k && val)) {
			atomic_store_explicit(&P.vals[s], val, memory_order_release);
			atomic_store_explicit(&P.keys[s], h, memory_order_release);
			return;
		}
		if (!k)
			return;
	}
}

/* ---- modules and kernels ---------------------------------------------------------------- */

static bool wanted(const char *kernel)
{
	for (size_t i = 0; i < P.b.nprobes; i++)
		if (!strcmp(P.b.probes[i].kernel, "*") || !strcmp(P.b.probes[i].kernel, kernel))
			return true;
	return false;
}

static struct pmod *mod_of(__u64 handle)
{
	for (struct pmod *m = P.mods; m; m = m->next)
		if (m->handle == handle)
			return m;
	return NULL;
}

static void at_exit(void);

/* The snapshot at exit, from the first module on (the lock held). atexit, not a destructor:
 * handlers registered after the CUDA runtime's run before its teardown. */
static void hook_exit(void)
{
	if (!P.exit_hooked) {
		P.exit_hooked = true;
		atexit(at_exit);
	}
}

/* The compute capability of the current context's device (major * 10 + minor) and the
 * device (*dev), or 0 if the driver does not say. */
static unsigned int current_sm(int *dev)
{
	fn1 getdev = (fn1)real("cuCtxGetDevice");
	fn3 attr = (fn3)real("cuDeviceGetAttribute");
	int major = 0, minor = 0;

	*dev = 0;
	if (!getdev || !attr || getdev((__u64)(unsigned long)dev) ||
	    attr((__u64)(unsigned long)&major, DEV_CC_MAJOR, (__u64)*dev) ||
	    attr((__u64)(unsigned long)&minor, DEV_CC_MINOR, (__u64)*dev))
		return 0;
	return (unsigned int)(major * 10 + minor);
}

void gs_probe_loaded(unsigned int api, __u64 handle_ptr, __u64 image)
{
	char why[256];
	unsigned int arch = 0;
	int dev;
	__u64 handle;
	struct pmod *m;
	char *ptx;

	if (!P.on || handle_ptr < 4096)
		return;
	memcpy(&handle, (const void *)(unsigned long)handle_ptr, sizeof(handle));
	/* (A library is no context's: the current one's device stands for the others; one it
	 * does not suit runs the original code, see instrument().) */
	ptx = gs_devcode_ptx(image, current_sm(&dev), &arch, why, sizeof(why));
	pthread_mutex_lock(&P.lock);
	hook_exit();
	if (!ptx) {
		/* (counted: a PyTorch process loads dozens) */
		if (strstr(why, "SASS") || strstr(why, "cubin"))
			P.sass_only++;
		else
			note("module %u (%s): not instrumented: %s", P.nmods,
			     api == GS_API_CU_LIBRARY_LOAD_DATA	       ? "cuLibraryLoadData"
			     : api == GS_API_CU_LIBRARY_LOAD_FROM_FILE ? "cuLibraryLoadFromFile"
								       : "cuModuleLoad*",
			     why);
		P.nmods++;
		pthread_mutex_unlock(&P.lock);
		return;
	}
	m = gs_calloc(1, sizeof(*m));
	if (!m) {
		note("module %u: not instrumented: out of memory", P.nmods++);
		free(ptx);
		pthread_mutex_unlock(&P.lock);
		return;
	}
	m->handle = handle;
	m->ptx = ptx;
	m->ptx_arch = arch;
	m->index = P.nmods++;
	m->next = P.mods;
	P.mods = m;
	pthread_mutex_unlock(&P.lock);
}

static struct pkern *kern_new(struct pmod *m, const char *name)
{
	struct pkern *k;

	for (k = P.kerns; k; k = k->next)
		if (k->mod == m && !strcmp(k->name, name))
			return k;
	k = gs_calloc(1, sizeof(*k));
	if (k)
		k->name = gs_strdup(name);
	if (!k || !k->name) {
		/* (the kernel runs its original code) */
		note("kernel %.200s: not instrumented: out of memory", name);
		free(k);
		return NULL;
	}
	k->mod = m;
	k->kidx = -1;
	k->next = P.kerns;
	P.kerns = k;
	return k;
}

void gs_probe_named(unsigned int api, const __u64 *a)
{
	__u64 out;
	struct pkern *k;

	if (!P.on || a[0] < 4096)
		return;
	memcpy(&out, (const void *)(unsigned long)a[0], sizeof(out));
	if (api == GS_API_CU_KERNEL_GET_FUNCTION) {
		/* (CUfunction *out, CUkernel): the function is the kernel's */
		if ((k = lookup(a[1]))) {
			pthread_mutex_lock(&P.lock);
			insert(out, k);
			pthread_mutex_unlock(&P.lock);
		}
		return;
	}
	/* (handle *out, module or library, const char *name) */
	if (a[2] < 4096)
		return;
	pthread_mutex_lock(&P.lock);
	{
		struct pmod *m = mod_of(a[1]);
		const char *name = (const char *)(unsigned long)a[2];

		if (m && wanted(name))
			insert(out, kern_new(m, name));
	}
	pthread_mutex_unlock(&P.lock);
}

void gs_probe_unloaded(__u64 handle)
{
	struct pmod *m;

	if (!P.on)
		return;
	pthread_mutex_lock(&P.lock);
	m = mod_of(handle);
	if (m) {
		/* Its handles may come back for another module's kernels: forget them. The
		 * instrumented modules stay loaded (their maps are the context's). */
		for (unsigned int s = 0; s < HANDLES; s++) {
			struct pkern *k = atomic_load_explicit(&P.vals[s], memory_order_relaxed);

			if (k && k->mod == m)
				atomic_store_explicit(&P.vals[s], NULL, memory_order_release);
		}
		m->handle = 0;
	}
	pthread_mutex_unlock(&P.lock);
}

/* ---- contexts: maps and the clock ------------------------------------------------------ */

static int push(__u64 ctx)
{
	fn1 f = (fn1)real("cuCtxPushCurrent_v2");

	return f ? f(ctx) : -1;
}

static void pop(void)
{
	__u64 c;
	fn1 f = (fn1)real("cuCtxPopCurrent_v2");

	if (f)
		f((__u64)(unsigned long)&c);
}

static const char clock_ptx[] =
	".version 6.0\n.target sm_60\n.address_size 64\n"
	".visible .entry gs_clock(.param .u64 gs_clock_p)\n{\n"
	"\t.reg .b64 %d<8>;\n\t.reg .pred %p<4>;\n"
	"\tld.param.u64 %d0, [gs_clock_p];\n\tmov.u64 %d1, 0;\n"
	"\tmov.u64 %d5, %globaltimer;\n"
	"W:\n\tld.volatile.u64 %d2, [%d0];\n"
	"\tmov.u64 %d6, %globaltimer;\n\tsub.s64 %d6, %d6, %d5;\n"
	"\tsetp.gt.s64 %p3, %d6, 2000000000;\n\t@%p3 bra D;\n"
	"\tsetp.eq.u64 %p1, %d2, %d1;\n\t@%p1 bra W;\n"
	"\tsetp.eq.s64 %p2, %d2, -1;\n\t@%p2 bra D;\n"
	"\tmov.u64 %d3, %globaltimer;\n\tst.volatile.u64 [%d0+16], %d3;\n\tmembar.sys;\n"
	"\tst.volatile.u64 [%d0+8], %d2;\n\tmov.u64 %d1, %d2;\n\tbra W;\n"
	"D:\n\tret;\n}\n";

/*
 * The global timer's offset from our clock in the current context: a one-thread kernel on
 * our stream answers each request written to mapped host memory with the timer; the round
 * trip with the least time bounds the error by half of it. Done again every 100 ms (the
 * host's clock is slewed by NTP, the GPU's is not): the drift between the last two is
 * extrapolated. 0, or -1.
 */
static int calibrate(struct pctx *c)
{
	fn2 load = (fn2)real("cuModuleLoadData");
	fn3 getfn = (fn3)real("cuModuleGetFunction");
	fn3 halloc = (fn3)real("cuMemHostAlloc");
	fn3 hdev = (fn3)real("cuMemHostGetDevicePointer_v2");
	fn1 ssync = (fn1)real("cuStreamSynchronize");
	gs_fn launch = (gs_fn)real("cuLaunchKernel");
	__u64 best = ~0ULL, at = 0;
	long long off = 0;
	volatile __u64 *h;
	void *params[1];
	int rc = -1;

	if (!load || !getfn || !halloc || !hdev || !ssync || !launch)
		return -1;
	if (!c->clock_fn) {
		void *p = NULL;

		if (load((__u64)(unsigned long)&c->clock_mod, (__u64)(unsigned long)clock_ptx) ||
		    getfn((__u64)(unsigned long)&c->clock_fn, c->clock_mod,
			  (__u64)(unsigned long)"gs_clock") ||
		    halloc((__u64)(unsigned long)&p, 64, 0x02 /* DEVICEMAP */) || !p ||
		    hdev((__u64)(unsigned long)&c->clock_d, (__u64)(unsigned long)p, 0)) {
			c->clock_fn = 0;
			return -1;
		}
		c->clock_h = p;
	}
	h = c->clock_h;
	memset((void *)h, 0, 64);
	params[0] = &c->clock_d;
	if (launch(c->clock_fn, 1, 1, 1, 1, 1, 1, 0, c->stream, (__u64)(unsigned long)params, 0))
		return -1;
	for (__u64 i = 1; i <= CALIB_ROUNDS; i++) {
		__u64 t0 = gs_clock(), t1, g;

		__atomic_store_n(&h[0], i, __ATOMIC_SEQ_CST);
		while (__atomic_load_n(&h[1], __ATOMIC_SEQ_CST) != i) {
			/* Not started (the GPU is full), or gone; or this thread or the GPU
			 * held up (a loaded host): the rounds done so far still count. */
			if (gs_clock() - t0 > (i == 1 ? 500000000ULL : 10000000ULL)) {
				rc = i > 1 ? 0 : -1;
				goto stop;
			}
		}
		t1 = gs_clock();
		g = __atomic_load_n(&h[2], __ATOMIC_SEQ_CST);
		if (t1 - t0 < best) {
			best = t1 - t0;
			at = t0 + (t1 - t0) / 2;
			off = (long long)(g - at);
		}
	}
	rc = 0;
stop:
	__atomic_store_n(&h[0], (__u64)-1, __ATOMIC_SEQ_CST);
	ssync(c->stream);
	if (rc)
		return -1;
	if (c->clock_ok && at > c->calib_at + 50000000ULL)
		c->drift = (double)(off - c->clock_off) / (double)(at - c->calib_at);
	if (!c->clock_ok)
		sb_printf(&P.stats, "stat clock %d %llu\n", c->device, (unsigned long long)best);
	c->clock_off = off;
	c->calib_at = at;
	return 0;
}

/* Our clock now on context c's GPU timer (0 if not known). */
static __u64 gpu_time(const struct pctx *c)
{
	__u64 now = gs_clock();

	if (!c->clock_ok)
		return 0;
	return now + (__u64)(c->clock_off + (long long)(c->drift * (double)(now - c->calib_at)));
}

/*
 * Ring buffer i in context c: host memory mapped into the device, its first 64 bytes the
 * consumer position, then the ring; the control block in device memory told where
 * (translate.h). 0, or -1.
 */
static int ring_init(struct pctx *c, size_t i, const struct bundle_map *m)
{
	fn3 halloc = (fn3)real("cuMemHostAlloc");
	fn3 hdev = (fn3)real("cuMemHostGetDevicePointer_v2");
	fn4 htod = (fn4)real("cuMemcpyHtoDAsync_v2");
	void *p = NULL;
	__u64 d = 0, ctl[4] = { 0 };

	if (!halloc || !hdev || !htod ||
	    halloc((__u64)(unsigned long)&p, (__u64)m->max_entries + 64, 0x02 /* DEVICEMAP */) ||
	    !p || hdev((__u64)(unsigned long)&d, (__u64)(unsigned long)p, 0))
		return -1;
	memset(p, 0, (size_t)m->max_entries + 64);
	ctl[2] = d + 64;
	ctl[3] = d;
	if (htod(c->dmaps[i], (__u64)(unsigned long)ctl, sizeof(ctl), c->stream))
		return -1;
	c->ring_h[i] = p;
	return 0;
}

struct drained {
	const struct pctx *c;
	__u16 map;
	unsigned long long n;
};

/* One record a probe wrote: into the event stream, at the GPU's time on our clock. */
static void emit_record(void *arg, unsigned long long gpu_ns, const unsigned char *data,
			unsigned int len)
{
	struct drained *d = arg;
	const struct pctx *c = d->c;
	__u32 size = (__u32)((offsetof(struct gs_ev_probe_out, data) + len + 7) & ~(size_t)7);
	struct gs_ev_probe_out *e = gs_emit_reserve(size, GS_EV_PROBE_OUT);
	__u64 ts = gs_clock();

	d->n++;
	if (!e)
		return;
	if (c->clock_ok) {
		/* timer = ours + off + drift * (ours - calib_at), solved for ours */
		double ours = (double)(long long)(gpu_ns - (__u64)c->clock_off - c->calib_at) /
			      (1.0 + c->drift);

		ts = c->calib_at + (__u64)(long long)ours;
	}
	gs_fill_hdr(&e->h, GS_EV_PROBE_OUT, size, ts);
	e->h.tid = 0;
	e->gpu_ns = gpu_ns;
	e->device = c->device;
	e->map = d->map;
	e->len = (__u16)len;
	memcpy(e->data, data, len);
	memset(e->data + len, 0, size - offsetof(struct gs_ev_probe_out, data) - len);
	gs_emit_commit(e);
}

/* What the probes wrote into the rings of every context, into the event stream (the lock
 * held). Reads host memory only: no driver call. */
static void drain_rings(void)
{
	for (int i = 0; i < P.nctx; i++) {
		struct pctx *c = &P.ctx[i];

		if (c->failed || c->dead)
			continue;
		for (size_t m = 0; m < P.b.nmaps; m++) {
			struct drained d = { c, (__u16)m, 0 };
			long n;

			if (!c->ring_h[m])
				continue;
			n = gpuring_drain((volatile unsigned char *)(c->ring_h[m] + 8),
					  P.b.maps[m].max_entries, c->ring_h[m], 1u << 20,
					  emit_record, &d);
			if (n < 0) {
				note("ring buffer %s on device %d holds what no probe writes: "
				     "not read further",
				     P.b.maps[m].name, c->device);
				c->ring_h[m] = NULL;
			}
		}
	}
}

/* The context's state, made at its first instrumentation (the lock held). */
static struct pctx *ctx_get(__u64 ctx)
{
	fn3 attr = (fn3)real("cuDeviceGetAttribute");
	fn2 mkstream = (fn2)real("cuStreamCreate");
	fn2 alloc = (fn2)real("cuMemAlloc_v2");
	fn4 memset8 = (fn4)real("cuMemsetD8Async");
	fn1 ssync = (fn1)real("cuStreamSynchronize");
	struct pctx *c;
	unsigned int sm;
	int dev = 0;

	for (int i = 0; i < P.nctx; i++)
		if (P.ctx[i].ctx == ctx && !P.ctx[i].dead)
			return P.ctx[i].failed ? NULL : &P.ctx[i];
	if (P.nctx == MAX_CTX) {
		note("more than %d contexts: later ones run the original code", MAX_CTX);
		return NULL;
	}
	c = &P.ctx[P.nctx++];
	memset(c, 0, sizeof(*c));
	c->ctx = ctx;
	c->failed = true;
	if (!attr || !mkstream || !alloc || !memset8 || !ssync || !(sm = current_sm(&dev)) ||
	    mkstream((__u64)(unsigned long)&c->stream, 1 /* CU_STREAM_NON_BLOCKING */)) {
		note("a context of device %d: the driver did not answer: probes not run there",
		     dev);
		return NULL;
	}
	c->device = dev;
	c->sm = sm;
	{
		int nsm = 0;

		if (!attr((__u64)(unsigned long)&nsm, DEV_SM_COUNT, (__u64)dev))
			sb_printf(&P.stats, "stat sms %d %d\n", dev, nsm);
	}
	for (size_t i = 0; i < P.b.nmaps; i++) {
		struct bundle_map *m = &P.b.maps[i];
		size_t bytes = bundle_map_bytes(m);
		bool ring = m->kind == GS_MAP_RING;
		/* (a ring's descriptor: no elements, its bytes last) */
		__u32 w[4] = { ring ? 0 : m->value_size, ring ? 0 : m->max_entries, m->kind,
			       m->kind == GS_MAP_HASH	      ? m->key_size
			       : m->kind == GS_MAP_PER_THREAD ? m->threads
			       : ring			      ? m->max_entries
							      : 1 };
		int r = alloc((__u64)(unsigned long)&c->dmaps[i], bytes);

		if (r || memset8(c->dmaps[i], 0, bytes, c->stream)) {
			note("map %s: %zu bytes of device memory could not be had (error %d): "
			     "probes not run on device %d",
			     m->name, bytes, r, dev);
			return NULL;
		}
		if (ring && ring_init(c, i, m)) {
			note("ring buffer %s: %u bytes of mapped host memory could not be had: "
			     "probes not run on device %d",
			     m->name, m->max_entries, dev);
			return NULL;
		}
		memcpy(c->desc + i * GS_MAP_DESC, &c->dmaps[i], 8);
		memcpy(c->desc + i * GS_MAP_DESC + 8, w, sizeof(w));
	}
	if (ssync(c->stream)) {
		note("device %d: clearing the maps failed: probes not run there", dev);
		return NULL;
	}
	c->clock_ok = !calibrate(c);
	if (!c->clock_ok)
		note("device %d: the GPU's clock could not be compared with the host's: launch "
		     "times are 0",
		     dev);
	c->failed = false;
	return c;
}

/* ---- instrumenting a module in a context ------------------------------------------------- */

/*
 * The module's PTX rewritten for kernel k alone (the lock held): malloc'ed, or NULL with a
 * note. The first rewrite of a module lays out all of its kernels (m->st) and takes their
 * ids; each kernel is compiled on its own, at its first launch in a context, so that a
 * module of hundreds of kernels costs the JIT only those that run.
 */
static char *rewrite(struct pmod *m, struct pkern *k, __u64 *ns)
{
	struct ptx_rewrite_opts o = { .kernel_base = m->st.k ? m->kernel_base : P.next_kernel_id,
				      .launch_param = true,
				      .only = k->name };
	struct ptx_rewrite_stats st;
	struct strbuf out = { 0 };
	char err[256];
	__u64 t0 = gs_clock();

	if (m->rewrite_failed)
		return NULL;
	if (ptx_rewrite(m->ptx, strlen(m->ptx), P.b.funcs, P.b.probes, P.b.nprobes, &o, &out, &st,
			err, sizeof(err))) {
		note("module %u: its PTX was not understood (%s): its kernels run the original "
		     "code",
		     m->index, err);
		m->rewrite_failed = true;
		return NULL;
	}
	if (!m->st.k) {
		m->st = st;
		m->kernel_base = P.next_kernel_id;
		P.next_kernel_id += st.kernels;
	} else {
		for (unsigned int i = 0; i < st.kernels && i < m->st.kernels; i++)
			m->st.k[i].instrumented |= st.k[i].instrumented;
		ptx_rewrite_stats_free(&st);
	}
	sb_putc(&out, 0);
	*ns = gs_clock() - t0;
	if (out.oom) {
		note("module %u: out of memory rewriting it: its kernels run the original code",
		     m->index);
		sb_free(&out);
		return NULL;
	}
	return out.buf;
}

/* Compile a rewritten module in context c and fill its map table: the module, or 0 with a
 * note. */
static __u64 jit(struct pmod *m, struct pctx *c, const char *text)
{
	fn5 loadex = (fn5)real("cuModuleLoadDataEx");
	fn4 global = (fn4)real("cuModuleGetGlobal_v2");
	fn4 htod = (fn4)real("cuMemcpyHtoDAsync_v2");
	fn1 ssync = (fn1)real("cuStreamSynchronize");
	fn1 unload = (fn1)real("cuModuleUnload");
	char log[JIT_LOG_BYTES] = "";
	int opts[2] = { CU_JIT_ERROR_LOG_BUFFER,
			CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES }; /* CUjit_option */
	void *vals[2] = { log, (void *)(unsigned long)sizeof(log) };
	__u64 gptr = 0, gbytes = 0, module = 0;
	int r;

	if (!loadex || !global || !htod || !ssync)
		return 0;
	r = loadex((__u64)(unsigned long)&module, (__u64)(unsigned long)text, 2,
		   (__u64)(unsigned long)opts, (__u64)(unsigned long)vals);
	if (r) {
		char *nl;

		log[sizeof(log) - 1] = 0;
		if ((nl = strchr(log, '\n')))
			*nl = 0;
		note("module %u: the driver's JIT refused the instrumented PTX (error %d%s%s): "
		     "the original code runs",
		     m->index, r, log[0] ? ": " : "", log);
		return 0;
	}
	if (P.b.nmaps &&
	    (global((__u64)(unsigned long)&gptr, (__u64)(unsigned long)&gbytes, module,
		    (__u64)(unsigned long)"gs_maps") ||
	     gbytes < P.b.nmaps * GS_MAP_DESC ||
	     htod(gptr, (__u64)(unsigned long)c->desc, P.b.nmaps * GS_MAP_DESC, c->stream) ||
	     ssync(c->stream))) {
		note("module %u: its map table could not be filled: the original code runs",
		     m->index);
		if (unload)
			unload(module);
		return 0;
	}
	return module;
}

/* The instrumented function of kernel k in the current context, or NULL (the lock held). */
static struct pfn *function_of(struct pkern *k, __u64 ctx)
{
	fn3 getfn = (fn3)real("cuModuleGetFunction");
	fn3 fattr = (fn3)real("cuFuncGetAttribute");
	struct pmod *m = k->mod;
	struct pfn *f;
	struct pctx *c;
	int regs = 0, local = 0;
	__u64 rewrite_ns, t0;
	char *text;

	for (int i = 0; i < k->ninst; i++)
		if (k->inst[i].ctx == ctx)
			return k->inst[i].failed ? NULL : &k->inst[i];
	if (k->ninst == MAX_CTX)
		return NULL;
	f = &k->inst[k->ninst++];
	memset(f, 0, sizeof(*f));
	f->ctx = ctx;
	f->failed = true;
	if (!(c = ctx_get(ctx)) || !getfn || !fattr)
		return NULL;
	if (m->ptx_arch > c->sm) {
		note("module %u: its PTX is for sm_%u, newer than device %d (sm_%u): the original "
		     "code runs",
		     m->index, m->ptx_arch, c->device, c->sm);
		return NULL;
	}
	if (!(text = rewrite(m, k, &rewrite_ns)))
		return NULL;
	for (unsigned int i = 0; k->kidx < 0 && i < m->st.kernels; i++)
		if (!strcmp(m->st.k[i].name, k->name))
			k->kidx = (int)i;
	if (k->kidx < 0) {
		note("kernel %s: not found in its module's PTX: the original code runs", k->name);
	} else if (m->st.k[k->kidx].variable) {
		note("kernel %s: it uses the module's variable %s (__device__, __constant__ or "
		     "__managed__), which an instrumented copy of the module would hold apart from "
		     "the program's: the original code runs",
		     k->name, m->st.k[k->kidx].variable);
	} else if (!m->st.k[k->kidx].instrumented) {
		note("kernel %s: none of the probes' points is in it (a memory probe, and no "
		     "global memory access): the original code runs",
		     k->name);
	} else {
		t0 = gs_clock();
		f->module = jit(m, c, text);
		if (f->module)
			sb_printf(&P.stats, "stat instrumented %u %u %zu %llu %d %llu %s\n",
				  m->index, m->st.kernels, strlen(m->ptx),
				  (unsigned long long)rewrite_ns, c->device,
				  (unsigned long long)(gs_clock() - t0), k->name);
	}
	free(text);
	if (!f->module)
		return NULL;
	if (getfn((__u64)(unsigned long)&f->fn, f->module, (__u64)(unsigned long)k->name) ||
	    fattr((__u64)(unsigned long)&f->max_threads, ATTR_MAX_THREADS, f->fn)) {
		note("kernel %s: not in the instrumented module: the original code runs", k->name);
		return NULL;
	}
	fattr((__u64)(unsigned long)&regs, ATTR_NUM_REGS, f->fn);
	fattr((__u64)(unsigned long)&local, ATTR_LOCAL_BYTES, f->fn);
	sb_printf(&P.stats, "stat kernel %u %d %d %d %s\n", m->st.k[k->kidx].id, regs, local,
		  f->max_threads, k->name);
	f->failed = false;
	return f;
}

/* ---- snapshots ------------------------------------------------------------------------------ */

static void write_snapshot(bool final)
{
	fn4 dtoh = (fn4)real("cuMemcpyDtoHAsync_v2");
	fn1 ssync = (fn1)real("cuStreamSynchronize");
	fn1 csync = (fn1)real("cuCtxSynchronize");
	char path[4096], tmp[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/probe.%d", P.out_dir, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f)
		return;
	fprintf(f, "gpuscope-probe-snapshot 1\npid %d\n", (int)getpid());
	for (struct pkern *k = P.kerns; k; k = k->next)
		if (k->kidx >= 0 || atomic_load(&k->fallback))
			fprintf(f, "kernel %u %d %llu %llu %s\n",
				k->kidx >= 0 ? k->mod->st.k[k->kidx].id : 0xffffffffu,
				k->kidx >= 0 && k->mod->st.k[k->kidx].instrumented,
				(unsigned long long)atomic_load(&k->routed),
				(unsigned long long)atomic_load(&k->fallback), k->name);
	for (int i = 0; i < P.nnotes; i++)
		fprintf(f, "note %s\n", P.notes[i]);
	if (P.sass_only)
		fprintf(f, "stat sass-only %u %u\n", P.sass_only, P.nmods);
	if (P.notes_lost)
		fprintf(f, "note %u notes lost: out of memory\n", P.notes_lost);
	if (P.stats.len)
		fwrite(P.stats.buf, 1, P.stats.len, f);
	for (int i = 0; i < P.nctx; i++) {
		struct pctx *c = &P.ctx[i];

		if (c->failed || c->dead || !dtoh || !ssync || push(c->ctx))
			continue;
		if (final && csync)
			csync(0);
		fprintf(f, "ctx %d %u\n", c->device, c->sm);
		for (size_t m = 0; m < P.b.nmaps; m++) {
			size_t bytes = bundle_map_bytes(&P.b.maps[m]);
			unsigned char *h = calloc(1, bytes);

			if (h && !dtoh((__u64)(unsigned long)h, c->dmaps[m], bytes, c->stream) &&
			    !ssync(c->stream)) {
				fprintf(f, "data %zu %zu\n", m, bytes);
				fwrite(h, 1, bytes, f);
			}
			free(h);
		}
		pop();
	}
	fprintf(f, "end\n");
	if (fclose(f) == 0)
		rename(tmp, path);
	else
		unlink(tmp);
}

/* Every 10 ms the rings drained (when there are any), every 100 ms the clocks compared
 * again, every interval the maps written out. */
static void *snapshot_thread(void *arg)
{
	__u64 last = gs_clock(), calibrated = last;
	bool rings = false;

	(void)arg;
	for (size_t m = 0; m < P.b.nmaps; m++)
		rings |= P.b.maps[m].kind == GS_MAP_RING;
	while (!atomic_load(&P.stop)) {
		struct timespec ts = { 0, rings ? 10000000L : 100000000L };

		nanosleep(&ts, NULL);
		if (atomic_load(&P.stop))
			break;
		pthread_mutex_lock(&P.lock);
		drain_rings();
		for (int i = 0; gs_clock() - calibrated >= 100000000ULL && i < P.nctx; i++) {
			struct pctx *c = &P.ctx[i];

			if (c->failed || c->dead || !c->clock_ok || push(c->ctx))
				continue;
			calibrate(c);
			pop();
		}
		if (gs_clock() - calibrated >= 100000000ULL)
			calibrated = gs_clock();
		if (gs_clock() - last >= P.interval_ms * 1000000ULL) {
			write_snapshot(false);
			last = gs_clock();
		}
		pthread_mutex_unlock(&P.lock);
	}
	return NULL;
}

static void at_exit(void)
{
	if (!P.on)
		return;
	atomic_store(&P.stop, 1);
	if (P.thread_on)
		pthread_join(P.thread, NULL);
	P.thread_on = false;
	pthread_mutex_lock(&P.lock);
	write_snapshot(true); /* (after every context's work is done) */
	drain_rings();
	pthread_mutex_unlock(&P.lock);
}

void gs_probe_ctx_destroy(__u64 ctx)
{
	if (!P.on)
		return;
	pthread_mutex_lock(&P.lock);
	for (int i = 0; i < P.nctx; i++)
		if (P.ctx[i].ctx == ctx && !P.ctx[i].dead && !P.ctx[i].failed) {
			write_snapshot(true);
			drain_rings(); /* (its host memory goes with it) */
			P.ctx[i].dead = true;
		}
	pthread_mutex_unlock(&P.lock);
}

/* ---- launches ---------------------------------------------------------------------------- */

/*
 * Route one launch (or kernel node) of k in context ctx to the instrumented kernel: its
 * function in *fn, its arguments with __gs_launch appended in *params or *extra (pl keeps
 * them until the call returns). timeless: a graph's, whose launches are its replays (launch
 * time 0). False: the original runs.
 */
static bool route(struct gs_probe_launch *pl, struct pkern *k, __u64 ctx,
		  const unsigned int block[3], unsigned int smem, bool timeless, __u64 *fn,
		  __u64 *params, __u64 *extra)
{
	fn3 fsetattr = (fn3)real("cuFuncSetAttribute");
	const struct ptx_kernel_info *ki;
	__u64 launch_ns = 0;
	struct pfn *f;

	pthread_mutex_lock(&P.lock);
	if (!P.thread_on && !P.thread_tried) {
		P.thread_tried = true;
		P.thread_on = !pthread_create(&P.thread, NULL, snapshot_thread, NULL);
	}
	f = function_of(k, ctx);
	if (f && (unsigned long long)block[0] * block[1] * block[2] > (unsigned)f->max_threads) {
		note("kernel %s: a block of %u threads is more than the instrumented kernel allows "
		     "(%d: it needs more registers): those launches run the original code",
		     k->name, block[0] * block[1] * block[2], f->max_threads);
		f = NULL;
	}
	if (f && smem > 48 * 1024 && (int)smem > f->smem_set) {
		if (!fsetattr || fsetattr(f->fn, ATTR_MAX_DYN_SHARED, smem)) {
			note("kernel %s: %u bytes of dynamic shared memory could not be allowed "
			     "the instrumented kernel: those launches run the original code",
			     k->name, smem);
			f = NULL;
		} else {
			f->smem_set = (int)smem;
		}
	}
	ki = f ? &k->mod->st.k[k->kidx] : NULL;
	for (int i = 0; f && !timeless && i < P.nctx; i++)
		if (P.ctx[i].ctx == ctx && !P.ctx[i].dead)
			launch_ns = gpu_time(&P.ctx[i]);
	if (f && !*params && !*extra && ki->nparams)
		f = NULL; /* (no arguments for a kernel that has some: the driver says so) */
	pthread_mutex_unlock(&P.lock);
	if (!f) {
		atomic_fetch_add(&k->fallback, 1);
		return false;
	}
	pl->val[0] = atomic_fetch_add(&P.seq, 1) + 1;
	pl->val[1] = launch_ns;
	if (*params) {
		void **p = (void **)(unsigned long)*params;
		size_t n = ki->nparams;

		pl->params =
			n + 1 <= GS_PROBE_SMALL ? pl->small : gs_malloc((n + 1) * sizeof(void *));
		if (!pl->params) {
			atomic_fetch_add(&k->fallback, 1);
			return false;
		}
		memcpy(pl->params, p, n * sizeof(void *));
		pl->params[n] = pl->val;
		*params = (__u64)(unsigned long)pl->params;
		*extra = 0;
	} else if (*extra) {
		void **e = (void **)(unsigned long)*extra, *buf = NULL;
		size_t *size = NULL;

		for (int i = 0; i < 16 && e[i]; i += 2) {
			if (e[i] == (void *)1)
				buf = e[i + 1];
			else if (e[i] == (void *)2)
				size = e[i + 1];
		}
		if (!buf || !size) {
			atomic_fetch_add(&k->fallback, 1);
			return false;
		}
		pl->bytes = ki->launch_off + 16;
		pl->buf = gs_calloc(1, pl->bytes);
		if (!pl->buf) {
			atomic_fetch_add(&k->fallback, 1);
			return false;
		}
		memcpy(pl->buf, buf, GS_MIN(*size, (size_t)ki->launch_off));
		memcpy(pl->buf + ki->launch_off, pl->val, 16);
		pl->extra[0] = (void *)1;
		pl->extra[1] = pl->buf;
		pl->extra[2] = (void *)2;
		pl->extra[3] = &pl->bytes;
		pl->extra[4] = NULL;
		*extra = (__u64)(unsigned long)pl->extra;
	} else {
		pl->small[0] = pl->val; /* (a kernel without parameters) */
		*params = (__u64)(unsigned long)pl->small;
	}
	*fn = f->fn;
	pl->k = k;
	pl->ctx = ctx;
	return true;
}

static __u64 current_ctx(void)
{
	fn1 getctx = (fn1)real("cuCtxGetCurrent");
	__u64 ctx = 0;

	return getctx && !getctx((__u64)(unsigned long)&ctx) ? ctx : 0;
}

/* A launch call (a) of k: b, its arguments, routed. */
static bool route_launch(struct gs_probe_launch *pl, unsigned int api, __u64 *b, struct pkern *k)
{
	fn2 capturing = (fn2)real("cuStreamIsCapturing");
	bool ex = api == GS_API_CU_LAUNCH_KERNEL_EX || api == GS_API_CU_LAUNCH_KERNEL_EX_PTSZ;
	bool coop = api == GS_API_CU_LAUNCH_COOP || api == GS_API_CU_LAUNCH_COOP_PTSZ;
	unsigned int block[3], smem;
	__u64 ctx = current_ctx(), stream, params, extra, fn;
	bool captured;
	int status = 0;

	if (!ctx)
		return false;
	if (ex) {
		const unsigned char *cfg = (const unsigned char *)(unsigned long)b[0];

		if (!cfg)
			return false;
		memcpy(block, cfg + 12, sizeof(block));
		memcpy(&smem, cfg + 24, sizeof(smem));
		memcpy(&stream, cfg + GS_LAUNCHCFG_STREAM, sizeof(stream));
		params = b[2];
		extra = b[3];
	} else {
		block[0] = (unsigned int)b[4];
		block[1] = (unsigned int)b[5];
		block[2] = (unsigned int)b[6];
		smem = (unsigned int)b[7];
		stream = b[8];
		params = b[9];
		extra = coop ? 0 : b[10];
	}
	/* captured into a graph: its time is each replay's, not known here */
	captured = capturing && !capturing(stream, (__u64)(unsigned long)&status) && status;
	if (!route(pl, k, ctx, block, smem, captured, &fn, &params, &extra))
		return false;
	if (ex) {
		b[1] = fn;
		b[2] = params;
		b[3] = extra;
	} else {
		b[0] = fn;
		b[9] = params;
		if (!coop)
			b[10] = extra;
	}
	return true;
}

/*
 * Graph calls that take kernel node parameters: where they are among the arguments, and
 * their form (CUDA 11's CUDA_KERNEL_NODE_PARAMS, 12's _v2 with the CUkernel and context, or
 * CUgraphNodeParams, whose kernel's are _v3 at 16). -1: not one.
 */
enum {
	NODE_V1 = 56,
	NODE_V2 = 72,
	NODE_ANY = 256
};

static int node_params_at(unsigned int api, int *form)
{
	switch (api) {
	case GS_API_CU_GRAPH_ADD_KERNEL_NODE_V1:
		*form = NODE_V1;
		return 4;
	case GS_API_CU_GRAPH_KERNEL_NODE_SET_PARAMS_V1:
		*form = NODE_V1;
		return 1;
	case GS_API_CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V1:
		*form = NODE_V1;
		return 2;
	case GS_API_CU_GRAPH_ADD_KERNEL_NODE:
		*form = NODE_V2;
		return 4;
	case GS_API_CU_GRAPH_KERNEL_NODE_SET_PARAMS:
		*form = NODE_V2;
		return 1;
	case GS_API_CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS:
		*form = NODE_V2;
		return 2;
	case GS_API_CU_GRAPH_ADD_NODE_V1:
		*form = NODE_ANY;
		return 4;
	case GS_API_CU_GRAPH_ADD_NODE:
		*form = NODE_ANY;
		return 5;
	case GS_API_CU_GRAPH_NODE_SET_PARAMS:
		*form = NODE_ANY;
		return 1;
	case GS_API_CU_GRAPH_EXEC_NODE_SET_PARAMS:
		*form = NODE_ANY;
		return 2;
	default:
		return -1;
	}
}

bool gs_probe_graph_call(unsigned int api)
{
	int form;

	return node_params_at(api, &form) >= 0;
}

/* A kernel node's parameters (a graph call a): b, the call's arguments, routed. */
static bool route_node(struct gs_probe_launch *pl, unsigned int api, const __u64 *a, __u64 *b)
{
	int form, at = node_params_at(api, &form);
	const unsigned char *src = (const unsigned char *)(unsigned long)a[at];
	unsigned char *kp = pl->node + (form == NODE_ANY ? 16 : 0);
	__u64 fn, params, extra, kern = 0, nctx = 0, ctx = current_ctx();
	unsigned int block[3], smem;
	struct pkern *k;
	int type;

	if (!src || !ctx)
		return false;
	if (form == NODE_ANY) {
		memcpy(&type, src, sizeof(type));
		if (type != 0) /* CU_GRAPH_NODE_TYPE_KERNEL */
			return false;
	}
	memcpy(pl->node, src, (size_t)form);
	memcpy(&fn, kp, 8);
	memcpy(block, kp + 20, sizeof(block));
	memcpy(&smem, kp + 32, sizeof(smem));
	memcpy(&params, kp + 40, 8);
	memcpy(&extra, kp + 48, 8);
	if (form != NODE_V1) {
		memcpy(&kern, kp + 56, 8);
		memcpy(&nctx, kp + 64, 8);
	}
	/* (a CUkernel for another context than the current one: left as it is) */
	if (!(k = lookup(fn ? fn : kern)) || (!fn && nctx && nctx != ctx))
		return false;
	if (!route(pl, k, ctx, block, smem, true, &fn, &params, &extra))
		return false;
	memcpy(kp, &fn, 8);
	memcpy(kp + 40, &params, 8);
	memcpy(kp + 48, &extra, 8);
	if (form != NODE_V1)
		memset(kp + 56, 0, 16); /* the function is set: no CUkernel, its context */
	b[at] = (__u64)(unsigned long)pl->node;
	return true;
}

bool gs_probe_launch(unsigned int api, const __u64 *a, __u64 *b, struct gs_probe_launch *pl)
{
	struct pkern *k;
	bool ex = api == GS_API_CU_LAUNCH_KERNEL_EX || api == GS_API_CU_LAUNCH_KERNEL_EX_PTSZ;

	memset(pl, 0, offsetof(struct gs_probe_launch, small));
	memcpy(b, a, GS_ARGS * sizeof(*b));
	if (!P.on || api == GS_API_CU_GRAPH_LAUNCH || api == GS_API_CU_GRAPH_LAUNCH_PTSZ)
		return false;
	if (gs_probe_graph_call(api))
		pl->routed = route_node(pl, api, a, b);
	else if ((k = lookup(ex ? a[1] : a[0])))
		pl->routed = route_launch(pl, api, b, k);
	if (!pl->routed)
		memcpy(b, a, GS_ARGS * sizeof(*b));
	return pl->routed;
}

bool gs_probe_launched(struct gs_probe_launch *pl, int r)
{
	bool retry = false;

	if (pl->params && pl->params != pl->small)
		free(pl->params);
	free(pl->buf);
	if (!pl->routed)
		return false;
	if (r == 0) {
		atomic_fetch_add(&pl->k->routed, 1);
		return false;
	}
	pthread_mutex_lock(&P.lock);
	for (int i = 0; i < pl->k->ninst; i++)
		if (pl->k->inst[i].ctx == pl->ctx && !pl->k->inst[i].failed) {
			pl->k->inst[i].failed = true;
			note("kernel %s: the driver refused a launch of the instrumented kernel "
			     "(error %d): it runs the original code from then on",
			     pl->k->name, r);
			retry = true;
		}
	pthread_mutex_unlock(&P.lock);
	atomic_fetch_add(&pl->k->fallback, 1);
	return retry;
}
