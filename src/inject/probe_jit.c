// SPDX-License-Identifier: MIT
/*
 * Device-side probes (see probe_int.h): a module instrumented in a context -- its PTX
 * rewritten for the kernel launched, compiled by the driver's JIT -- and the snapshots of
 * the maps, written by a thread every interval, at exit and before a context goes.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
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
#include "ptx/fatbin.h"
#include "ptx/gpuring.h"
#include "ptx/rewrite.h"
#include "ptx/translate.h"

/* ---- instrumenting a module in a context ------------------------------------------------- */

/*
 * The module's PTX rewritten for kernel k alone (the lock held): malloc'ed, or NULL with a
 * note. The first rewrite of a module lays out all of its kernels (m->st) and takes their
 * ids; each kernel is compiled on its own, at its first launch in a context, so that a
 * module of hundreds of kernels costs the JIT only those that run. *used: the slots of
 * __gs_vars it reads (malloc'ed).
 */
static char *rewrite(struct pmod *m, struct pkern *k, __u64 *ns, unsigned char **used)
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
		pr_note("module %u: its PTX was not understood (%s): its kernels run the original "
			"code",
			m->index, err);
		m->rewrite_failed = true;
		return NULL;
	}
	*used = st.var_used;
	st.var_used = NULL;
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
	if (out.oom || !*used) {
		pr_note("module %u: out of memory rewriting it: its kernels run the original code",
			m->index);
		sb_free(&out);
		free(*used);
		*used = NULL;
		return NULL;
	}
	return out.buf;
}

/*
 * The addresses of the program's own variables that the text reads, for its __gs_vars
 * (ptx/rewrite.h): its module's, or its library's in this context. NULL, or what failed
 * (in why).
 */
static const char *program_vars(struct pmod *m, const unsigned char *used, __u64 *vals, char *why,
				size_t n)
{
	fn4 get = (fn4)pr_real(m->library ? "cuLibraryGetGlobal" : "cuModuleGetGlobal_v2");
	__u64 bytes;
	int r;

	for (unsigned int i = 0; i < m->st.nvars; i++) {
		vals[i] = 0;
		if (!used[i])
			continue;
		r = get ? get((__u64)(unsigned long)&vals[i], (__u64)(unsigned long)&bytes,
			      m->handle, (__u64)(unsigned long)m->st.var_names[i])
			: -1;
		if (r || !vals[i]) {
			snprintf(why, n,
				 "its variables' table (%s not found in the program's module: "
				 "error %d)",
				 m->st.var_names[i], r);
			return why;
		}
	}
	return NULL;
}

/* Compile a rewritten module in context c and fill its map table and its variables' (used:
 * the slots it reads): the module, or 0 with a note. */
static __u64 jit(struct pmod *m, struct pctx *c, const char *text, const unsigned char *used)
{
	fn5 loadex = (fn5)pr_real("cuModuleLoadDataEx");
	fn4 global = (fn4)pr_real("cuModuleGetGlobal_v2");
	fn4 htod = (fn4)pr_real("cuMemcpyHtoDAsync_v2");
	fn1 ssync = (fn1)pr_real("cuStreamSynchronize");
	fn1 unload = (fn1)pr_real("cuModuleUnload");
	char log[JIT_LOG_BYTES] = "";
	int opts[2] = { CU_JIT_ERROR_LOG_BUFFER,
			CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES }; /* CUjit_option */
	void *vals[2] = { log, (void *)(unsigned long)sizeof(log) };
	__u64 gptr = 0, gbytes = 0, module = 0;
	__u64 env[2] = { (__u64)getpid() << 32 | (__u32)getpid(), (__u64)c->device };
	__u64 *vars = gs_calloc(m->st.nvars + 1, sizeof(*vars));
	const char *what = NULL;
	char why[1200]; /* (a variable's name: up to 1 KiB) */
	int r;

	if (!loadex || !global || !htod || !ssync || !vars)
		goto out;
	r = loadex((__u64)(unsigned long)&module, (__u64)(unsigned long)text, 2,
		   (__u64)(unsigned long)opts, (__u64)(unsigned long)vals);
	if (r) {
		char *nl;

		log[sizeof(log) - 1] = 0;
		if ((nl = strchr(log, '\n')))
			*nl = 0;
		pr_note("module %u: the driver's JIT refused the instrumented PTX (error %d%s%s): "
			"the original code runs",
			m->index, r, log[0] ? ": " : "", log);
		module = 0;
		goto out;
	}
	/* The map table, what helpers 14 and 512 read (the process and main thread, the
	 * device) and the program's variables, copied in and waited for once. */
	if (P.b.nmaps &&
	    (global((__u64)(unsigned long)&gptr, (__u64)(unsigned long)&gbytes, module,
		    (__u64)(unsigned long)"gs_maps") ||
	     gbytes < P.b.nmaps * GS_MAP_DESC ||
	     htod(gptr, (__u64)(unsigned long)c->desc, P.b.nmaps * GS_MAP_DESC, c->stream)))
		what = "its map table";
	else if (!global((__u64)(unsigned long)&gptr, (__u64)(unsigned long)&gbytes, module,
			 (__u64)(unsigned long)"gs_env") &&
		 gbytes >= sizeof(env) &&
		 htod(gptr, (__u64)(unsigned long)env, sizeof(env), c->stream))
		what = "its gs_env";
	else if (m->st.nvars && (what = program_vars(m, used, vars, why, sizeof(why))))
		;
	else if (m->st.nvars &&
		 (global((__u64)(unsigned long)&gptr, (__u64)(unsigned long)&gbytes, module,
			 (__u64)(unsigned long)"__gs_vars") ||
		  gbytes < m->st.nvars * sizeof(*vars) ||
		  htod(gptr, (__u64)(unsigned long)vars, m->st.nvars * sizeof(*vars), c->stream)))
		what = "its variables' table";
	else if (ssync(c->stream))
		what = "its map table";
	if (what) {
		pr_note("module %u: %s could not be filled: the original code runs", m->index,
			what);
		if (unload)
			unload(module);
		module = 0;
	}
out:
	free(vars);
	return module;
}

/* The instrumented function of kernel k in the current context, or NULL (the lock held). */
struct pfn *pr_function_of(struct pkern *k, __u64 ctx)
{
	fn3 getfn = (fn3)pr_real("cuModuleGetFunction");
	fn3 fattr = (fn3)pr_real("cuFuncGetAttribute");
	struct pmod *m = k->mod;
	struct pfn *f;
	struct pctx *c;
	int regs = 0, local = 0;
	__u64 rewrite_ns, t0;
	unsigned char *used = NULL;
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
	if (!(c = pr_ctx_get(ctx)) || !getfn || !fattr)
		return NULL;
	if (!(text = rewrite(m, k, &rewrite_ns, &used)))
		return NULL;
	/* PTX for a newer device (PyTorch ships it for its newest target only): for this one,
	 * if it uses nothing newer (else the JIT says so, and the original runs) */
	if (m->ptx_arch > c->sm && !m->retarget_said) {
		m->retarget_said = true;
		pr_note("module %u: its PTX is for sm_%u, newer than device %d (sm_%u): retargeted "
			"to sm_%u",
			m->index, m->ptx_arch, c->device, c->sm, c->sm);
	}
	if (m->ptx_arch > c->sm && !ptx_retarget(text, c->sm)) {
		pr_note("module %u: its PTX's target could not be made sm_%u: the original code "
			"runs",
			m->index, c->sm);
		free(text);
		free(used);
		return NULL;
	}
	for (unsigned int i = 0; k->kidx < 0 && i < m->st.kernels; i++)
		if (!strcmp(m->st.k[i].name, k->name))
			k->kidx = (int)i;
	if (k->kidx < 0) {
		pr_note("kernel %s: not found in its module's PTX: the original code runs",
			k->name);
	} else if (m->st.k[k->kidx].variable) {
		pr_note("kernel %s: it uses the module's texture, sampler or surface reference %s, "
			"which an instrumented copy of the module cannot share with the program's: "
			"the original code runs",
			k->name, m->st.k[k->kidx].variable);
	} else if (!m->st.k[k->kidx].instrumented) {
		pr_note("kernel %s: none of the probes' points is in it (a memory probe, and no "
			"global memory access): the original code runs",
			k->name);
	} else {
		t0 = gs_clock();
		f->module = jit(m, c, text, used);
		if (f->module)
			sb_printf(&P.stats, "stat instrumented %u %u %zu %llu %d %llu %s\n",
				  m->index, m->st.kernels, strlen(m->ptx),
				  (unsigned long long)rewrite_ns, c->device,
				  (unsigned long long)(gs_clock() - t0), k->name);
	}
	free(text);
	free(used);
	if (!f->module)
		return NULL;
	if (getfn((__u64)(unsigned long)&f->fn, f->module, (__u64)(unsigned long)k->name) ||
	    fattr((__u64)(unsigned long)&f->max_threads, ATTR_MAX_THREADS, f->fn)) {
		pr_note("kernel %s: not in the instrumented module: the original code runs",
			k->name);
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

static bool any_shared(void)
{
	for (size_t m = 0; m < P.b.nmaps; m++)
		if (P.shared[m])
			return true;
	return false;
}

/* The maps in host memory, one for the process: in the first context's part. True. */
static bool write_shared(FILE *f)
{
	for (size_t m = 0; m < P.b.nmaps; m++)
		if (P.shared[m]) {
			size_t bytes = bundle_map_bytes(&P.b.maps[m]);

			fprintf(f, "data %zu %zu\n", m, bytes);
			fwrite(P.shared[m], 1, bytes, f);
		}
	return true;
}

static void pr_write_snapshot(bool final)
{
	bool shared_done = false;
	fn4 dtoh = (fn4)pr_real("cuMemcpyDtoHAsync_v2");
	fn1 ssync = (fn1)pr_real("cuStreamSynchronize");
	fn1 csync = (fn1)pr_real("cuCtxSynchronize");
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
	{
		unsigned long long nodes = 0, nodes_fb = 0;

		for (struct pkern *k = P.kerns; k; k = k->next) {
			nodes += atomic_load(&k->nodes);
			nodes_fb += atomic_load(&k->nodes_fallback);
		}
		if (nodes || nodes_fb)
			fprintf(f, "stat graph-nodes %llu %llu\n", nodes, nodes_fb);
	}
	for (int i = 0; i < (int)P.b.nhosts; i++)
		fprintf(f, "stat host-runs %llu %d %s\n", P.host_runs[i], (int)P.host_failed[i],
			P.b.hosts[i].name);
	if (P.notes_lost)
		fprintf(f, "note %u notes lost: out of memory\n", P.notes_lost);
	if (P.stats.len)
		fwrite(P.stats.buf, 1, P.stats.len, f);
	/* (every context's work done before the maps shared by all are read) */
	for (int i = 0; final && csync && i < P.nctx; i++)
		if (!P.ctx[i].failed && !P.ctx[i].dead && !pr_push(P.ctx[i].ctx)) {
			csync(0);
			pr_pop();
		}
	for (int i = 0; i < P.nctx; i++) {
		struct pctx *c = &P.ctx[i];

		if (c->failed || c->dead || !dtoh || !ssync || pr_push(c->ctx))
			continue;
		fprintf(f, "ctx %d %u\n", c->device, c->sm);
		if (!shared_done)
			shared_done = write_shared(f);
		for (size_t m = 0; m < P.b.nmaps; m++) {
			size_t bytes = bundle_map_bytes(&P.b.maps[m]);
			unsigned char *h = P.b.maps[m].shared ? NULL : calloc(1, bytes);

			if (h && !dtoh((__u64)(unsigned long)h, c->dmaps[m], bytes, c->stream) &&
			    !ssync(c->stream)) {
				fprintf(f, "data %zu %zu\n", m, bytes);
				fwrite(h, 1, bytes, f);
			}
			free(h);
		}
		pr_pop();
	}
	if (!shared_done && any_shared()) { /* (no context left: the process's own) */
		fprintf(f, "ctx -1 0\n");
		write_shared(f);
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
		pr_drain_rings();
		for (int i = 0; gs_clock() - calibrated >= 100000000ULL && i < P.nctx; i++) {
			struct pctx *c = &P.ctx[i];

			if (c->failed || c->dead || !c->clock_ok || pr_push(c->ctx))
				continue;
			pr_calibrate(c);
			pr_pop();
		}
		if (gs_clock() - calibrated >= 100000000ULL)
			calibrated = gs_clock();
		if (gs_clock() - last >= P.interval_ms * 1000000ULL) {
			pr_write_snapshot(false);
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
	pr_write_snapshot(true); /* (after every context's work is done) */
	pr_drain_rings();
	pthread_mutex_unlock(&P.lock);
}

void gs_probe_ctx_destroy(__u64 ctx)
{
	if (!P.on)
		return;
	pthread_mutex_lock(&P.lock);
	for (int i = 0; i < P.nctx; i++)
		if (P.ctx[i].ctx == ctx && !P.ctx[i].dead && !P.ctx[i].failed) {
			pr_write_snapshot(true);
			pr_drain_rings(); /* (its host memory goes with it) */
			P.ctx[i].dead = true;
		}
	pthread_mutex_unlock(&P.lock);
}

/* The snapshot at exit, from the first module on (the lock held). atexit, not a destructor:
 * handlers registered after the CUDA runtime's run before its teardown. */
void pr_hook_exit(void)
{
	if (!P.exit_hooked) {
		P.exit_hooked = true;
		atexit(at_exit);
	}
}

void pr_start_snapshots(void)
{
	if (!P.thread_on && !P.thread_tried) {
		P.thread_tried = true;
		P.thread_on = !pthread_create(&P.thread, NULL, snapshot_thread, NULL);
	}
}
