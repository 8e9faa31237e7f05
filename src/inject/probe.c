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
#include "inject/probe_int.h"
#include "ptx/bpfobj.h"
#include "ptx/bundle.h"
#include "ptx/gpuring.h"
#include "ptx/rewrite.h"
#include "ptx/translate.h"

bool gs_probe_on GS_HOT;
void gs_probe_after_fork(void)
{
	/* The child has none of the parent's contexts, nor its thread. */
	P.on = gs_probe_on = false;
	P.thread_on = false;
	P.nctx = 0;
	pthread_mutex_init(&P.lock, NULL);
	pr_host_after_fork();
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
	ptx = gs_devcode_ptx(image, pr_current_sm(&dev), &arch, why, sizeof(why));
	pthread_mutex_lock(&P.lock);
	pr_hook_exit();
	if (!ptx) {
		/* (counted: a PyTorch process loads dozens) */
		if (strstr(why, "SASS") || strstr(why, "cubin"))
			P.sass_only++;
		else
			pr_note("module %u (%s): not instrumented: %s", P.nmods,
				api == GS_API_CU_LIBRARY_LOAD_DATA	  ? "cuLibraryLoadData"
				: api == GS_API_CU_LIBRARY_LOAD_FROM_FILE ? "cuLibraryLoadFromFile"
									  : "cuModuleLoad*",
				why);
		P.nmods++;
		pthread_mutex_unlock(&P.lock);
		return;
	}
	m = gs_calloc(1, sizeof(*m));
	if (!m) {
		pr_note("module %u: not instrumented: out of memory", P.nmods++);
		free(ptx);
		pthread_mutex_unlock(&P.lock);
		return;
	}
	m->handle = handle;
	m->library = api == GS_API_CU_LIBRARY_LOAD_DATA || api == GS_API_CU_LIBRARY_LOAD_FROM_FILE;
	m->ptx = ptx;
	m->ptx_arch = arch;
	m->index = P.nmods++;
	m->next = P.mods;
	P.mods = m;
	if (why[0]) /* (where its PTX came from) */
		pr_note("module %u: %s", m->index, why);
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
		pr_note("kernel %.200s: not instrumented: out of memory", name);
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
/* ---- launches ---------------------------------------------------------------------------- */

/* A launch of k (or a kernel node set) that runs the original code, counted. */
static void fell_back(const struct gs_probe_launch *pl, struct pkern *k)
{
	atomic_fetch_add(pl->node_call ? &k->nodes_fallback : &k->fallback, 1);
}

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
	fn3 fsetattr = (fn3)pr_real("cuFuncSetAttribute");
	const struct ptx_kernel_info *ki;
	__u64 launch_ns = 0;
	struct pfn *f;

	pthread_mutex_lock(&P.lock);
	pr_start_snapshots();
	f = pr_function_of(k, ctx);
	if (f && (unsigned long long)block[0] * block[1] * block[2] > (unsigned)f->max_threads) {
		pr_note("kernel %s: a block of %u threads is more than the instrumented kernel "
			"allows "
			"(%d: it needs more registers): those launches run the original code",
			k->name, block[0] * block[1] * block[2], f->max_threads);
		f = NULL;
	}
	if (f && smem > 48 * 1024 && (int)smem > f->smem_set) {
		if (!fsetattr || fsetattr(f->fn, ATTR_MAX_DYN_SHARED, smem)) {
			pr_note("kernel %s: %u bytes of dynamic shared memory could not be allowed "
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
			launch_ns = pr_gpu_time(&P.ctx[i]);
	if (f && !*params && !*extra && ki->nparams)
		f = NULL; /* (no arguments for a kernel that has some: the driver says so) */
	pthread_mutex_unlock(&P.lock);
	if (!f) {
		fell_back(pl, k);
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
			fell_back(pl, k);
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
			fell_back(pl, k);
			return false;
		}
		pl->bytes = ki->launch_off + 16;
		pl->buf = gs_calloc(1, pl->bytes);
		if (!pl->buf) {
			fell_back(pl, k);
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
	fn1 getctx = (fn1)pr_real("cuCtxGetCurrent");
	__u64 ctx = 0;

	return getctx && !getctx((__u64)(unsigned long)&ctx) ? ctx : 0;
}

/* A launch call (a) of k: b, its arguments, routed. */
static bool route_launch(struct gs_probe_launch *pl, unsigned int api, __u64 *b, struct pkern *k)
{
	fn2 capturing = (fn2)pr_real("cuStreamIsCapturing");
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
	if ((pl->node_call = gs_probe_graph_call(api)))
		pl->routed = route_node(pl, api, a, b);
	else if ((k = lookup(ex ? a[1] : a[0])))
		pl->routed = route_launch(pl, api, b, k);
	if (!pl->routed)
		memcpy(b, a, GS_ARGS * sizeof(*b));
	if (P.b.nhosts && !pl->node_call) { /* (a launch call: its uprobes) */
		pl->host_api = api;
		pl->host_args = a;
		pr_host_run(BPFOBJ_HOST_ENTRY, api, a, 0);
	}
	return pl->routed;
}

void gs_probe_returned(struct gs_probe_launch *pl, int r)
{
	if (pl->host_api)
		pr_host_run(BPFOBJ_HOST_EXIT, pl->host_api, pl->host_args, r);
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
		atomic_fetch_add(pl->node_call ? &pl->k->nodes : &pl->k->routed, 1);
		return false;
	}
	pthread_mutex_lock(&P.lock);
	for (int i = 0; i < pl->k->ninst; i++)
		if (pl->k->inst[i].ctx == pl->ctx && !pl->k->inst[i].failed) {
			pl->k->inst[i].failed = true;
			pr_note("kernel %s: the driver refused a launch of the instrumented kernel "
				"(error %d): it runs the original code from then on",
				pl->k->name, r);
			retry = true;
		}
	pthread_mutex_unlock(&P.lock);
	fell_back(pl, pl->k);
	return retry;
}
