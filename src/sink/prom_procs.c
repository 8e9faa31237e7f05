// SPDX-License-Identifier: MIT
/* The agent's per-process metrics (see prom_procs.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/demangle.h"
#include "core/names.h"
#include "core/procfs.h"
#include "sink/prom_procs.h"
#include "sink/prometheus.h"

struct plabels {
	char pid[16], comm[32];
	struct prom_labels ls;
};

/* A process's labels; its name from /proc, kept, if no record gave it. */
static void proc_labels(struct model *m, const struct model_proc *p, struct plabels *pl)
{
	char comm[16];

	if (!model__comm(m, p->pid)[0])
		model__set_comm(m, p->pid,
				proc_comm((pid_t)p->pid, comm, sizeof(comm)) ? "?" : comm);
	snprintf(pl->pid, sizeof(pl->pid), "%u", p->pid);
	gs_strlcpy(pl->comm, model__comm(m, p->pid), sizeof(pl->comm));
	pl->ls.n = 0;
	prom_labels_add(&pl->ls, "pid", pl->pid);
	prom_labels_add(&pl->ls, "comm", pl->comm);
}

static int more_launches(const void *a, const void *b)
{
	const struct xkernel *x = a, *y = b;

	return x->launches < y->launches ? 1 : x->launches > y->launches ? -1 : 0;
}

struct kernels_ctx {
	struct xkernel *ks;
	size_t n, cap;
};

static void by_shown_name(void *ctx, const struct model_kernel *k)
{
	struct kernels_ctx *c = ctx;
	char *full = k->name ? demangle(k->name) : NULL, shortn[96];
	size_t i;

	if (full)
		shorten_name(full, 80, shortn, sizeof(shortn));
	else
		snprintf(shortn, sizeof(shortn), "unknown 0x%llx", (unsigned long long)k->handle);
	free(full);
	for (i = 0; i < c->n && strcmp(c->ks[i].name, shortn); i++)
		;
	if (i == c->n) {
		if (c->n == c->cap) {
			c->cap = c->cap ? 2 * c->cap : 32;
			c->ks = xrealloc(c->ks, c->cap * sizeof(*c->ks));
		}
		memset(&c->ks[c->n], 0, sizeof(c->ks[0]));
		gs_strlcpy(c->ks[c->n++].name, shortn, sizeof(c->ks[0].name));
	}
	c->ks[i].launches += k->launches;
	c->ks[i].call_ns += k->call_ns;
	c->ks[i].gpu_count += k->gpu_count;
	c->ks[i].gpu_ns += k->gpu_ns;
}

/* A process's kernels by shown name (handles of one kernel, and overloads whose shortened
 * names agree, are one), most launched first. */
size_t prom_procs__kernels(const struct model *m, __u32 pid, struct xkernel **out)
{
	struct kernels_ctx c = { 0 };

	model__each_kernel(m, pid, by_shown_name, &c);
	if (c.n)
		qsort(c.ks, c.n, sizeof(*c.ks), more_launches);
	*out = c.ks;
	return c.n;
}

struct procs_ctx {
	struct xproc *out;
	size_t n, max;
};

static void proc_row(void *ctx, const struct model_proc *p)
{
	struct procs_ctx *c = ctx;
	struct xproc *o;

	if (c->n == c->max || (!p->launches && !p->allocs && !p->copy_bytes && !p->sync_ns))
		return;
	o = &c->out[c->n++];
	memset(o, 0, sizeof(*o));
	o->pid = p->pid;
	memcpy(o->comm, p->comm, sizeof(o->comm));
	o->exited = p->exited;
	o->launches = p->launches;
	o->copy_bytes = p->copy_bytes;
	o->sync_ns = p->sync_ns;
	o->mem = p->in_use[MK_DEVICE];
	o->peak = p->peak[MK_DEVICE];
}

size_t prom_procs__procs(const struct model *m, struct xproc *out, size_t max)
{
	struct procs_ctx c = { out, 0, max };

	model__each_process(m, proc_row, &c);
	return c.n;
}

enum kfamily {
	KF_LAUNCHES,
	KF_CALL_SECONDS,
	KF_GPU_SECONDS,
	KF_GPU_TIMED,
	KF_MAX
};

static const struct {
	const char *name, *help;
} kfamilies[KF_MAX] = {
	[KF_LAUNCHES] = { "gpuscope_kernel_launches_total",
			  "Kernel launches, by process and kernel (the most launched by name, "
			  "the rest as other)." },
	[KF_CALL_SECONDS] = { "gpuscope_kernel_launch_call_seconds_total",
			      "Time in kernel launch calls (CPU side), by process and kernel (the "
			      "most launched by name, the rest as other)." },
	[KF_GPU_SECONDS] = { "gpuscope_kernel_gpu_seconds_total",
			     "Time kernels ran on the GPU, of the launches timed (programs that "
			     "preload the in-process library; GPUSCOPE_GPU_TIME=N times every "
			     "Nth), by process and kernel." },
	[KF_GPU_TIMED] = { "gpuscope_kernel_gpu_timed_launches_total",
			   "Launches whose GPU time was measured, by process and kernel (with "
			   "gpuscope_kernel_gpu_seconds_total: the mean; against "
			   "gpuscope_kernel_launches_total: the share timed)." },
};

static double kvalue(const struct xkernel *k, enum kfamily f)
{
	switch (f) {
	case KF_LAUNCHES:
		return (double)k->launches;
	case KF_CALL_SECONDS:
		return k->call_ns / 1e9;
	case KF_GPU_SECONDS:
		return k->gpu_ns / 1e9;
	default:
		return (double)k->gpu_count;
	}
}

/* A process's kernels: the `top` most launched by name, the rest as "other". GPU times
 * only where some were timed. */
static void kernels(const struct prom_procs_in *in, struct strbuf *sb, const struct model_proc *p,
		    const struct plabels *pl, enum kfamily f)
{
	const char *name = kfamilies[f].name;
	bool gpu = f == KF_GPU_SECONDS || f == KF_GPU_TIMED;
	struct xkernel *ks;
	size_t n = prom_procs__kernels(in->a->model, p->pid, &ks);
	double other = 0;
	bool any_other = false, any_gpu = false;

	for (size_t i = 0; i < n; i++)
		any_gpu |= ks[i].gpu_count > 0;
	if (gpu && !any_gpu) {
		free(ks);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		double v = kvalue(&ks[i], f);

		if (i >= in->top) {
			other += v;
			any_other = true;
			continue;
		}
		prom_sample(sb, name, &pl->ls, "kernel", ks[i].name, v);
	}
	if (any_other)
		prom_sample(sb, name, &pl->ls, "kernel", "other", other);
	free(ks);
}

/* Each family walks the processes: this is one walk's state. */
struct walk {
	const struct prom_procs_in *in;
	struct strbuf *sb;
	int family, pass;
	__u64 live;
};

static void count_live(void *ctx, const struct model_proc *p)
{
	struct walk *w = ctx;

	w->live += !p->exited && (p->launches || p->allocs);
}

static void kernel_series(void *ctx, const struct model_proc *p)
{
	struct walk *w = ctx;
	struct plabels pl;

	if (!p->launches)
		return;
	proc_labels(w->in->a->model, p, &pl);
	kernels(w->in, w->sb, p, &pl, (enum kfamily)w->family);
}

static void memory_series(void *ctx, const struct model_proc *p)
{
	struct walk *w = ctx;
	const char *name = w->pass ? "gpuscope_process_device_memory_peak_bytes"
				   : "gpuscope_process_device_memory_bytes";
	struct plabels pl;

	if (!p->allocs)
		return;
	proc_labels(w->in->a->model, p, &pl);
	for (int dv = 0; dv <= MEM_DEVS; dv++) {
		char gpu[8];

		if (!p->dev_peak[dv])
			continue;
		snprintf(gpu, sizeof(gpu), dv < MEM_DEVS ? "%d" : "?", dv);
		prom_sample(w->sb, name, &pl.ls, "gpu", gpu,
			    (double)(w->pass ? p->dev_peak[dv] : p->dev_in_use[dv]));
	}
}

/* Memory analyses (analysis/memsites.c): evaluated as a process's records come. */
static void leak_series(void *ctx, const struct model_proc *p)
{
	struct walk *w = ctx;
	struct memsites_proc mp;
	struct plabels pl;

	if (!memsites__proc(w->in->a->memsites, p->pid, &mp))
		return;
	proc_labels(w->in->a->model, p, &pl);
	prom_sample(w->sb, "gpuscope_memory_leak_suspected_sites", &pl.ls, NULL, NULL,
		    (double)mp.leak_sites);
	prom_sample(w->sb, "gpuscope_memory_leak_suspected_bytes", &pl.ls, NULL, NULL,
		    (double)mp.leak_bytes);
}

static void oom_series(void *ctx, const struct model_proc *p)
{
	struct walk *w = ctx;
	struct memsites_proc mp;
	struct plabels pl;

	if (!memsites__proc(w->in->a->memsites, p->pid, &mp) ||
	    (!mp.ooms[OOM_EXHAUSTION] && !mp.ooms[OOM_FRAGMENTATION] && !mp.ooms[OOM_UNCLEAR]))
		return;
	proc_labels(w->in->a->model, p, &pl);
	for (int c = OOM_EXHAUSTION; c < OOM_CAUSES; c++)
		prom_sample(w->sb, "gpuscope_oom_total", &pl.ls, "cause",
			    oom_cause_key((unsigned int)c), (double)mp.ooms[c]);
}

/* Steps (analysis/steps.h, online): a histogram a process, no label per step. */
static void step_series(void *ctx, const struct model_proc *p)
{
	struct walk *w = ctx;
	struct steps_hist h;
	struct plabels pl;

	if (!w->in->a->steps || !steps__hist(w->in->a->steps, p->pid, &h))
		return;
	proc_labels(w->in->a->model, p, &pl);
	prom_histogram(w->sb, "gpuscope_step_duration_seconds", &pl.ls, steps_le, h.counts,
		       STEPS_BUCKETS, h.sum_s);
}

static void frag_series(void *ctx, const struct model_proc *p)
{
	struct walk *w = ctx;
	struct memsites_proc mp;
	struct plabels pl;

	proc_labels(w->in->a->model, p, &pl);
	if (!memsites__proc(w->in->a->memsites, p->pid, &mp))
		return;
	for (int d = 0; d <= MEM_DEVS; d++) {
		char gpu[8];

		if (!mp.have_frag[d])
			continue;
		snprintf(gpu, sizeof(gpu), d < MEM_DEVS ? "%d" : "?", d);
		prom_sample(w->sb, "gpuscope_memory_fragmentation_ratio", &pl.ls, "gpu", gpu,
			    mp.frag_now[d]);
	}
}

static void error_series(void *ctx, const struct err_stat *e)
{
	struct walk *w = ctx;
	struct prom_labels ls = { .n = 0 };

	prom_labels_add(&ls, "api", api_name(e->api));
	prom_labels_add(&ls, "error", result_name(e->api, e->result));
	prom_sample(w->sb, "gpuscope_cuda_errors_total", &ls, NULL, NULL, (double)e->count);
}

static void transfers(struct strbuf *sb, const struct model *m)
{
	struct copy_stat copies[GS_COPY_KIND_MAX];

	model__copies(m, copies);
	prom_family(sb, "gpuscope_copy_bytes_total", "counter",
		    "Bytes copied by CUDA memcpy calls on the node, by direction (those captured "
		    "into a CUDA graph at each launch of the graph).");
	for (int k = 1; k < GS_COPY_KIND_MAX; k++)
		if (copies[k].count || copies[k].graph_runs)
			prom_sample(sb, "gpuscope_copy_bytes_total", NULL, "direction",
				    copy_kind_name((unsigned int)k),
				    (double)(copies[k].bytes - copies[k].captured_bytes +
					     copies[k].graph_bytes));
	prom_family(sb, "gpuscope_sync_wait_seconds_total", "counter",
		    "Time spent in CUDA synchronisation calls, by call.");
	for (int a = 1; a < GS_API_MAX; a++)
		if (model__sync(m, (unsigned int)a)->calls)
			prom_sample(sb, "gpuscope_sync_wait_seconds_total", NULL, "api",
				    api_name((unsigned int)a),
				    model__sync(m, (unsigned int)a)->total_ns / 1e9);
	prom_family(sb, "gpuscope_nccl_calls_total", "counter", "NCCL calls, by operation.");
	for (int op = 0; op < NCCL_OPS; op++)
		if (model__nccl(m, (unsigned int)op)->calls)
			prom_sample(sb, "gpuscope_nccl_calls_total", NULL, "op",
				    nccl_op_name((unsigned int)op),
				    (double)model__nccl(m, (unsigned int)op)->calls);
	prom_family(sb, "gpuscope_nccl_call_duration_seconds", "histogram",
		    "Duration of NCCL calls (the host call: enqueue, or all of it for "
		    "blocking ones), by operation.");
	for (int op = 0; op < NCCL_OPS; op++) {
		const struct nccl_stat *n = model__nccl(m, (unsigned int)op);
		double le[NCCL_BUCKETS];
		struct prom_labels ls = { .n = 0 };

		if (!n->calls)
			continue;
		for (int b = 0; b < NCCL_BUCKETS; b++)
			le[b] = nccl_bucket_ns[b] / 1e9;
		prom_labels_add(&ls, "op", nccl_op_name((unsigned int)op));
		prom_histogram(sb, "gpuscope_nccl_call_duration_seconds", &ls, le, n->buckets,
			       NCCL_BUCKETS, n->total_ns / 1e9);
	}
}

/* Families of one series a process (or a few, by a label), each from its walk. */
static const struct {
	const char *name, *type, *help;
	void (*series)(void *ctx, const struct model_proc *p);
} pfamilies[] = {
	{ "gpuscope_oom_total", "counter",
	  "Allocations that failed for lack of device memory, by what explains it "
	  "(exhaustion, fragmentation, unclear).",
	  oom_series },
	{ "gpuscope_memory_fragmentation_ratio", "gauge",
	  "Fragmentation of a process's device allocations: the free share of the 2 MiB "
	  "pages they occupy, by GPU.",
	  frag_series },
	{ "gpuscope_step_duration_seconds", "histogram",
	  "Durations of a process's training (or inference) steps: its loop found from the "
	  "launch sequence, a step from one launch of the kernel launched once a step to "
	  "the next.",
	  step_series },
};

void prom_procs__render(struct strbuf *sb, const struct prom_procs_in *in)
{
	const struct model *m = in->a->model;
	struct walk w = { .in = in, .sb = sb };
	__u64 drops = 0;

	model__each_process(m, count_live, &w);
	prom_family(sb, "gpuscope_cuda_processes", "gauge",
		    "Processes on the node that launched kernels or allocated GPU memory and "
		    "are running.");
	prom_sample(sb, "gpuscope_cuda_processes", NULL, NULL, NULL, (double)w.live);
	for (w.family = 0; w.family < KF_MAX; w.family++) {
		prom_family(sb, kfamilies[w.family].name, "counter", kfamilies[w.family].help);
		model__each_process(m, kernel_series, &w);
	}
	for (w.pass = 0; w.pass < 2; w.pass++) {
		const char *name = w.pass ? "gpuscope_process_device_memory_peak_bytes"
					  : "gpuscope_process_device_memory_bytes";

		prom_family(sb, name, "gauge",
			    w.pass ? "Peak device memory a process had allocated, by GPU."
				   : "Device memory a process has allocated (driver allocations), "
				     "by GPU.");
		model__each_process(m, memory_series, &w);
	}
	prom_family(sb, "gpuscope_memory_leak_suspected_sites", "gauge",
		    "Allocation sites of a process whose outstanding bytes keep growing "
		    "(Mann-Kendall trend test, 99.9%).");
	prom_family(sb, "gpuscope_memory_leak_suspected_bytes", "gauge",
		    "Bytes outstanding at the allocation sites suspected of leaking.");
	model__each_process(m, leak_series, &w);
	for (size_t i = 0; i < sizeof(pfamilies) / sizeof(pfamilies[0]); i++) {
		prom_family(sb, pfamilies[i].name, pfamilies[i].type, pfamilies[i].help);
		model__each_process(m, pfamilies[i].series, &w);
	}
	transfers(sb, m);
	prom_family(sb, "gpuscope_cuda_errors_total", "counter",
		    "CUDA and NCCL calls that failed, by call and error.");
	model__each_error(m, error_series, &w);
	prom_family(sb, "gpuscope_inject_processes", "gauge",
		    "Processes whose records the agent reads from the in-process library "
		    "(--inject-dir).");
	prom_sample(sb, "gpuscope_inject_processes", NULL, NULL, NULL, (double)in->ninjected);
	for (int t = 0; t < GS_EV_MAX; t++)
		drops += in->drops.by_type[t];
	prom_family(sb, "gpuscope_dropped_events_total", "counter",
		    "Events lost because a ring buffer was full (the kernel's, or a process's "
		    "in-process ring).");
	prom_sample(sb, "gpuscope_dropped_events_total", NULL, NULL, NULL, (double)drops);
	if (in->inject) {
		prom_family(
			sb, "gpuscope_inject_rings_lost_total", "counter",
			"In-process rings the agent could not read to the end: unreadable, "
			"cut short, corrupt, or refused (no proof of their owner, or more than a "
			"user may have open).");
		prom_sample(sb, "gpuscope_inject_rings_lost_total", NULL, NULL, NULL,
			    (double)in->drops.rings_lost);
	}
	prom_family(sb, "gpuscope_probed_libraries", "gauge",
		    "CUDA and NCCL library files the agent has probes on.");
	prom_sample(sb, "gpuscope_probed_libraries", NULL, NULL, NULL, (double)in->files);
}
