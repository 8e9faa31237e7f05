// SPDX-License-Identifier: MIT
/*
 * Device-side probes (see probe_int.h): their state, and each context's part -- the maps
 * in device memory and their table, the global timer's offset from our clock, the ring
 * buffers' host memory and what their probes wrote.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/util.h"
#include "gpuscope/cuda_abi.h"
#include "inject/probe_int.h"
#include "ptx/gpuring.h"
#include "ptx/translate.h"

struct probe_state P = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * The driver's functions by name, looked up once: the launch path asks for three at every
 * launch, and a dlsym in libcuda's table costs about as much as the launch. Entries are
 * published whole (an entry pointer put in an empty slot) and never taken back; a name
 * that did not fit is looked up each time.
 */
#define REAL_SLOTS 64
struct real_entry {
	const char *name;
	void *fn;
};
static struct real_entry *_Atomic real_cache[REAL_SLOTS];

void *pr_real(const char *name)
{
	unsigned int h = (unsigned int)(gs_str_hash(0, name) % REAL_SLOTS);
	struct real_entry *e, *expected;
	void *fn;

	for (unsigned int i = 0; i < REAL_SLOTS; i++) {
		e = atomic_load_explicit(&real_cache[(h + i) % REAL_SLOTS], memory_order_acquire);
		if (!e)
			break;
		if (e->name == name || !strcmp(e->name, name))
			return e->fn;
	}
	fn = gs_real_by_name(name);
	if (!fn || !(e = gs_malloc(sizeof(*e))))
		return fn;
	*e = (struct real_entry){ name, fn }; /* (names are the callers' literals) */
	for (unsigned int i = 0; i < REAL_SLOTS; i++) {
		expected = NULL;
		if (atomic_compare_exchange_strong(&real_cache[(h + i) % REAL_SLOTS], &expected, e))
			return fn;
		if (!strcmp(expected->name, name))
			break; /* (another thread put it there first) */
	}
	free(e);
	return fn;
}

/* A note, once (callers hold the lock). */
void pr_note(const char *fmt, ...)
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

/* The compute capability of the current context's device (major * 10 + minor) and the
 * device (*dev), or 0 if the driver does not say. */
unsigned int pr_current_sm(int *dev)
{
	fn1 getdev = (fn1)pr_real("cuCtxGetDevice");
	fn3 attr = (fn3)pr_real("cuDeviceGetAttribute");
	int major = 0, minor = 0;

	*dev = 0;
	if (!getdev || !attr || getdev((__u64)(unsigned long)dev) ||
	    attr((__u64)(unsigned long)&major, DEV_CC_MAJOR, (__u64)*dev) ||
	    attr((__u64)(unsigned long)&minor, DEV_CC_MINOR, (__u64)*dev))
		return 0;
	return (unsigned int)(major * 10 + minor);
}

/* ---- contexts: maps and the clock ------------------------------------------------------ */

int pr_push(__u64 ctx)
{
	fn1 f = (fn1)pr_real("cuCtxPushCurrent_v2");

	return f ? f(ctx) : -1;
}

void pr_pop(void)
{
	__u64 c;
	fn1 f = (fn1)pr_real("cuCtxPopCurrent_v2");

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
int pr_calibrate(struct pctx *c)
{
	fn2 load = (fn2)pr_real("cuModuleLoadData");
	fn3 getfn = (fn3)pr_real("cuModuleGetFunction");
	fn3 halloc = (fn3)pr_real("cuMemHostAlloc");
	fn3 hdev = (fn3)pr_real("cuMemHostGetDevicePointer_v2");
	fn1 ssync = (fn1)pr_real("cuStreamSynchronize");
	gs_fn launch = (gs_fn)pr_real("cuLaunchKernel");
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
__u64 pr_gpu_time(const struct pctx *c)
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
	fn3 halloc = (fn3)pr_real("cuMemHostAlloc");
	fn3 hdev = (fn3)pr_real("cuMemHostGetDevicePointer_v2");
	fn4 htod = (fn4)pr_real("cuMemcpyHtoDAsync_v2");
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

/*
 * Shared map i (probe_host.c) in the current context: its host memory (made at the first
 * context) registered with the context if it is not yet (a context that went took its
 * registration with it), its device address in *d. 0, or -1.
 */
int pr_shared_map(size_t i, __u64 *d)
{
	fn3 reg = (fn3)pr_real("cuMemHostRegister_v2");
	fn3 hdev = (fn3)pr_real("cuMemHostGetDevicePointer_v2");
	size_t bytes = bundle_map_bytes(&P.b.maps[i]);
	size_t page = 4096, len = (bytes + page - 1) & ~(page - 1);

	if (!reg || !hdev || !bytes)
		return -1;
	if (!P.shared[i]) {
		void *p =
			mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -1;
		P.shared[i] = p;
	}
	if (!hdev((__u64)(unsigned long)d, (__u64)(unsigned long)P.shared[i], 0))
		return 0;
	/* (PORTABLE | DEVICEMAP) */
	if (reg((__u64)(unsigned long)P.shared[i], len, 0x01 | 0x02) ||
	    hdev((__u64)(unsigned long)d, (__u64)(unsigned long)P.shared[i], 0))
		return -1;
	return 0;
}

struct drained {
	const struct pctx *c; /* (its clock; NULL: none compared) */
	int device;
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
	if (c && c->clock_ok) {
		/* timer = ours + off + drift * (ours - calib_at), solved for ours */
		double ours = (double)(long long)(gpu_ns - (__u64)c->clock_off - c->calib_at) /
			      (1.0 + c->drift);

		ts = c->calib_at + (__u64)(long long)ours;
	}
	gs_fill_hdr(&e->h, GS_EV_PROBE_OUT, size, ts);
	e->h.tid = 0;
	e->gpu_ns = gpu_ns;
	e->device = d->device;
	e->map = d->map;
	e->len = (__u16)len;
	memcpy(e->data, data, len);
	memset(e->data + len, 0, size - offsetof(struct gs_ev_probe_out, data) - len);
	gs_emit_commit(e);
}

/* What the probes wrote into the rings of every context, and the host programs printed,
 * into the event stream (the lock held). Reads host memory only: no driver call. */
void pr_drain_rings(void)
{
	const struct pctx *clock = NULL;

	for (int i = 0; i < P.nctx; i++) {
		struct pctx *c = &P.ctx[i];

		if (c->failed || c->dead)
			continue;
		if (!clock && c->clock_ok)
			clock = c;
		for (size_t m = 0; m < P.b.nmaps; m++) {
			struct drained d = { c, c->device, (__u16)m, 0 };
			long n;

			if (!c->ring_h[m])
				continue;
			n = gpuring_drain((volatile unsigned char *)(c->ring_h[m] + 8),
					  P.b.maps[m].max_entries, c->ring_h[m], 1u << 20,
					  emit_record, &d);
			if (n < 0) {
				pr_note("ring buffer %s on device %d holds what no probe writes: "
					"not read further",
					P.b.maps[m].name, c->device);
				c->ring_h[m] = NULL;
			}
		}
	}
	/* (what the host programs printed: device -1's) */
	for (size_t m = 0; m < P.b.nmaps && P.print_ring && !P.print_dead; m++)
		if (!strcmp(P.b.maps[m].name, GS_PRINT_MAP)) {
			struct drained d = { clock, -1, (__u16)m, 0 };

			if (gpuring_drain((volatile unsigned char *)P.print_ring, PR_PRINT_RING,
					  &P.print_tail, 1u << 20, emit_record, &d) < 0) {
				pr_note("the host programs' printing ring holds what no program "
					"writes: not read further");
				P.print_dead = true; /* (its memory kept: a program still writes) */
			}
		}
}

/* The context's state, made at its first instrumentation (the lock held). */
struct pctx *pr_ctx_get(__u64 ctx)
{
	fn3 attr = (fn3)pr_real("cuDeviceGetAttribute");
	fn2 mkstream = (fn2)pr_real("cuStreamCreate");
	fn2 alloc = (fn2)pr_real("cuMemAlloc_v2");
	fn4 memset8 = (fn4)pr_real("cuMemsetD8Async");
	fn1 ssync = (fn1)pr_real("cuStreamSynchronize");
	struct pctx *c;
	unsigned int sm;
	int dev = 0;

	for (int i = 0; i < P.nctx; i++)
		if (P.ctx[i].ctx == ctx && !P.ctx[i].dead)
			return P.ctx[i].failed ? NULL : &P.ctx[i];
	if (P.nctx == MAX_CTX) {
		pr_note("more than %d contexts: later ones run the original code", MAX_CTX);
		return NULL;
	}
	c = &P.ctx[P.nctx++];
	memset(c, 0, sizeof(*c));
	c->ctx = ctx;
	c->failed = true;
	if (!attr || !mkstream || !alloc || !memset8 || !ssync || !(sm = pr_current_sm(&dev)) ||
	    mkstream((__u64)(unsigned long)&c->stream, 1 /* CU_STREAM_NON_BLOCKING */)) {
		pr_note("a context of device %d: the driver did not answer: probes not run there",
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
		int r;

		if (m->shared) { /* (host memory, one for the process: probe_host.c) */
			if (pr_shared_map(i, &c->dmaps[i])) {
				pr_note("map %s: %zu bytes of host memory could not be shared with "
					"device %d: probes not run there",
					m->name, bytes, dev);
				return NULL;
			}
		} else if ((r = alloc((__u64)(unsigned long)&c->dmaps[i], bytes)) ||
			   memset8(c->dmaps[i], 0, bytes, c->stream)) {
			pr_note("map %s: %zu bytes of device memory could not be had (error %d): "
				"probes not run on device %d",
				m->name, bytes, r, dev);
			return NULL;
		}
		if (ring && ring_init(c, i, m)) {
			pr_note("ring buffer %s: %u bytes of mapped host memory could not be had: "
				"probes not run on device %d",
				m->name, m->max_entries, dev);
			return NULL;
		}
		memcpy(c->desc + i * GS_MAP_DESC, &c->dmaps[i], 8);
		memcpy(c->desc + i * GS_MAP_DESC + 8, w, sizeof(w));
	}
	if (ssync(c->stream)) {
		pr_note("device %d: clearing the maps failed: probes not run there", dev);
		return NULL;
	}
	c->clock_ok = !pr_calibrate(c);
	if (!c->clock_ok)
		pr_note("device %d: the GPU's clock could not be compared with the host's: launch "
			"times are 0",
			dev);
	c->failed = false;
	return c;
}
