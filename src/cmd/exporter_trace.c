// SPDX-License-Identifier: MIT
/*
 * The exporter's eBPF plane: kernel uprobes on the CUDA and NCCL libraries for every
 * process on the node (tracer option `all`), fed into one model, rendered as gpuscope_*
 * metrics per process. Libraries are probed at start (those loaded by running processes,
 * and the system's libcuda from ld.so.cache, so that a program started later is seen from
 * its first call) and whenever a process opens one. A process that exits is shown for
 * `retain` seconds more, then forgotten, so that a long-running agent does not grow.
 *
 * With --inject-dir, programs that preload the in-process library from that directory
 * write their records into rings the agent reads (src/source/inject.h): GPU time per
 * kernel, at a lower cost per call. For such a process the kernel probes' records of the
 * calls the ring has (those made since it appeared, which is before its first call reached
 * the driver) are left out, and the ring's records of calls before it are too: each call
 * is counted once. A process seen first by the kernel probes is looked for among the rings
 * at once, before its record is counted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analysis/model.h"
#include "analysis/report.h"
#include "cmd/exporter.h"
#include "core/demangle.h"
#include "core/libfind.h"
#include "core/names.h"
#include "core/procfs.h"
#include "core/session.h"
#include "core/util.h"
#include "sink/prometheus.h"
#include "source/inject.h"
#include "source/kernel.h"

#define MAX_EXITED 4096

struct injected {
	__u64 since; /* its earliest open ring's creation */
	unsigned int rings;
};

struct xtrace {
	struct session s;
	struct kernel_source *kernel;	 /* NULL: no kernel probes (--no-ebpf with --inject-dir) */
	struct inject *inject;		 /* NULL: no in-process plane */
	struct hmap injected;		 /* pid -> struct injected (the polling thread's) */
	__u64 ninjected;		 /* processes with a ring (under the lock) */
	struct gs_ev_drops inject_drops; /* the rings', as of the last poll (under the lock) */
	struct model *model;
	pthread_mutex_t lock; /* the model, against rendering */
	unsigned int top;
	double retain_s;
	struct {
		__u32 pid;
		double at;
	} exited[MAX_EXITED];
	double probed_boot_s; /* CLOCK_BOOTTIME when the libraries known at start were probed */
	unsigned int nexited;
};

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double boot_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whether the process started after `t` (seconds since boot), from /proc/PID/stat. */
static bool started_after(__u32 pid, double t)
{
	__u64 mono;
	struct timespec b, m;

	if (proc_start_ns((pid_t)pid, &mono))
		return false;
	clock_gettime(CLOCK_BOOTTIME, &b);
	clock_gettime(CLOCK_MONOTONIC, &m);
	return (double)mono / 1e9 +
		       ((double)(b.tv_sec - m.tv_sec) + (double)(b.tv_nsec - m.tv_nsec) / 1e9) >
	       t;
}

/* Whether pid is on the list of exited processes (its ring's end and the kernel's exit
 * record may both say so). */
static bool listed_exited(const struct xtrace *x, __u32 pid)
{
	for (unsigned int i = 0; i < x->nexited; i++)
		if (x->exited[i].pid == pid)
			return true;
	return false;
}

/*
 * What of the stream goes into the model. Process records: only the exit of a process the
 * model knows (every process's exit comes). Calls the kernel's probes saw: not those of a
 * process whose ring has them (since the ring appeared); a process not seen before is
 * looked for among the rings first.
 */
static const struct gs_hdr *gate(void *ctx, const struct gs_hdr *ev)
{
	struct xtrace *x = ctx;
	const struct gs_ev_proc *p = (const void *)ev;
	const struct injected *in;
	bool known;

	if (ev->type == GS_EV_PROC) {
		if (p->kind != GS_PROC_EXIT)
			return NULL;
		pthread_mutex_lock(&x->lock);
		known = model__process(x->model, ev->pid) && !listed_exited(x, ev->pid);
		pthread_mutex_unlock(&x->lock);
		return known ? ev : NULL;
	}
	if (x->inject && ev->type <= GS_EV_NCCL && ev->source != GS_SRC_INJECT) {
		pthread_mutex_lock(&x->lock);
		known = model__process(x->model, ev->pid) != NULL;
		pthread_mutex_unlock(&x->lock);
		/* A process not seen before: if it has a ring, it is there now. */
		if (!known)
			inject__poll(x->inject, true, false);
		in = hmap_get(&x->injected, ev->pid, 0);
		if (in && ev->ts >= in->since)
			return NULL; /* the ring has this call */
	}
	return ev;
}

static void on_ring(void *ctx, __u32 pid, __u64 created_ns, bool open)
{
	struct xtrace *x = ctx;
	struct injected *in = hmap_get(&x->injected, pid, 0);

	if (open) {
		if (!in) {
			in = xcalloc(1, sizeof(*in));
			in->since = created_ns;
			hmap_put(&x->injected, pid, 0, in);
			pthread_mutex_lock(&x->lock);
			x->ninjected++;
			pthread_mutex_unlock(&x->lock);
		}
		in->since = GS_MIN(in->since, created_ns);
		in->rings++;
		return;
	}
	if (in && !--in->rings) {
		/* (It exited, or exec'ed a program without the library: the kernel's probes
		 * count its calls again.) */
		free(hmap_del(&x->injected, pid, 0));
		pthread_mutex_lock(&x->lock);
		x->ninjected--;
		pthread_mutex_unlock(&x->lock);
	}
	if (!x->kernel && kill((pid_t)pid, 0) && errno == ESRCH) {
		/* No kernel probes to say it exited. */
		struct gs_ev_proc e = { .kind = GS_PROC_EXIT };

		stream__emit(x->s.stream, &e.h, GS_EV_PROC, sizeof(e), pid);
	}
}

static void add_record(void *ctx, const struct gs_hdr *ev)
{
	struct xtrace *x = ctx;
	struct proc *p2;
	bool fresh;

	pthread_mutex_lock(&x->lock);
	fresh = !model__process(x->model, ev->pid);
	model__add(x->model, ev);
	if (ev->type == GS_EV_PROC && ((const struct gs_ev_proc *)ev)->kind == GS_PROC_EXIT) {
		if (x->nexited < MAX_EXITED)
			x->exited[x->nexited++] = (typeof(x->exited[0])){ ev->pid, mono_s() };
		else
			model__forget_proc(x->model, ev->pid);
	} else if (fresh && (p2 = (struct proc *)model__process(x->model, ev->pid))) {
		/* Its name now, while it runs (exec records are not sent for every process). */
		if (!p2->comm[0] && proc_comm((pid_t)ev->pid, p2->comm, sizeof(p2->comm)))
			gs_strlcpy(p2->comm, "?", sizeof(p2->comm));
		/* Seen from its first driver call (cuInit), or started after the probes were:
		 * every allocation of it is known (so a pointer outside them is host memory,
		 * which gives copies their direction). (A short process may be gone before its
		 * records are read: hence cuInit first.) */
		p2->complete = (ev->type == GS_EV_API &&
				((const struct gs_ev_api *)ev)->c.api == GS_API_CU_INIT) ||
			       started_after(ev->pid, x->probed_boot_s);
	}
	pthread_mutex_unlock(&x->lock);
}

/* Libraries already loaded by running processes. */
static void scan_processes(struct xtrace *x)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		long pid = strtol(de->d_name, NULL, 10);

		if (pid > 0)
			kernel_source__probe_mapped(x->kernel, (__u32)pid);
	}
	closedir(d);
}

static void from_ldcache(const char *path, void *ctx)
{
	kernel_source__add_file(ctx, 0, path, lib_kind_of(path), false, false);
}

/* The system's libcuda and NCCL, before any program loads them. */
static void scan_ldcache(struct xtrace *x)
{
	int fd = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC);
	struct stat st;
	void *buf;

	if (fd < 0)
		return;
	if (fstat(fd, &st) || st.st_size <= 0) {
		close(fd);
		return;
	}
	buf = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (buf == MAP_FAILED)
		return;
	ldcache_lookup(buf, (size_t)st.st_size, "libcuda.so.1", from_ldcache, x->kernel);
	ldcache_lookup(buf, (size_t)st.st_size, "libnccl.so.2", from_ldcache, x->kernel);
	munmap(buf, (size_t)st.st_size);
}

static void model_free(void *obj)
{
	model__free(obj);
}

struct xtrace *xtrace_open(const struct xtrace_opts *o)
{
	struct xtrace *x = xcalloc(1, sizeof(*x));
	/* (8 MiB: 100 ms of events at well over 100k launches/s; its pages are resident,
	 * mapped twice, so they count twice in RSS.) */
	struct kernel_source_opts ko = {
		.tracer = { .ring_bytes = 8ULL << 20, .follow = true, .no_os = true, .all = true },
	};
	struct inject_opts io = { .on_ring = on_ring, .ctx = x, .skip_before_ring = o->ebpf };

	session__init(&x->s);
	x->model = model__new();
	session__own(&x->s, model_free, x->model);
	x->top = o->top;
	x->retain_s = o->retain_s;
	pthread_mutex_init(&x->lock, NULL);
	stream__filter(x->s.stream, STREAM_ALL, gate, x);
	/* (Libraries opened are the kernel source's to probe, nothing for the model.) */
	stream__subscribe(x->s.stream, STREAM_ALL & ~STREAM_TYPE(GS_EV_LIB), add_record, x);
	if ((o->ebpf && kernel_source__open(&x->s, &ko, &x->kernel)) ||
	    (o->inject_dir && inject__open_agent(&x->s, o->inject_dir, &io, &x->inject))) {
		xtrace_close(x);
		return NULL;
	}
	if (x->kernel) {
		kernel_source__control(x->kernel);
		for (int i = 0; i < o->nlibs; i++)
			kernel_source__add_file(x->kernel, 0, o->libs[i],
						lib_kind_of(o->libs[i]) ?: GS_LIB_CUDA, false,
						false);
		scan_ldcache(x);
		scan_processes(x);
		gs_debug("eBPF probes on %llu libraries",
			 (unsigned long long)kernel_source__files(x->kernel));
	}
	x->probed_boot_s = boot_s();
	/* Rings of programs that ran before: read on from where they are. */
	if (x->inject)
		inject__poll(x->inject, true, false);
	return x;
}

bool xtrace_probes(const struct xtrace *x)
{
	return x->kernel != NULL;
}

const char *xtrace_library(const struct xtrace *x)
{
	return x->inject ? inject__library(x->inject) : NULL;
}

void xtrace_poll(struct xtrace *x)
{
	double now;
	unsigned int kept = 0;
	int got;

	got = session__poll(&x->s, 100);
	now = mono_s();
	if (x->inject) {
		struct gs_ev_drops d = {};

		inject__drops(x->inject, &d);
		pthread_mutex_lock(&x->lock);
		x->inject_drops = d;
		pthread_mutex_unlock(&x->lock);
	}
	pthread_mutex_lock(&x->lock);
	for (unsigned int i = 0; i < x->nexited; i++) {
		if (now - x->exited[i].at >= x->retain_s)
			model__forget_proc(x->model, x->exited[i].pid);
		else
			x->exited[kept++] = x->exited[i];
	}
	x->nexited = kept;
	pthread_mutex_unlock(&x->lock);
	/* A busy stream's records are read in batches, 100 times a second, rather than one
	 * wake-up each: a waiting reader is woken by nearly every record of a sparse stream,
	 * and those wake-ups cost more of the agent's CPU than the events (on an H100 with
	 * ResNet-50 training: 11% of a core, nearly all system time, before this). The first
	 * record after a quiet spell is still read at once: a new process's ring must be
	 * found while the process is there. */
	if (got > 0 && x->kernel)
		usleep(10000);
}

void xtrace_close(struct xtrace *x)
{
	struct hmap_slot *s;

	if (!x)
		return;
	if (x->inject)
		inject__poll(x->inject, false, false);
	session__close(&x->s);
	hmap_for_each (&x->injected, s)
		free(s->val);
	hmap_free(&x->injected);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

/* ---- rendering ---------------------------------------------------------------------------- */

struct plabels {
	char pid[16], comm[32];
	struct prom_labels ls;
};

static void proc_labels(struct proc *p, struct plabels *pl)
{
	if (!p->comm[0] && proc_comm((pid_t)p->pid, p->comm, sizeof(p->comm)))
		gs_strlcpy(p->comm, "?", sizeof(p->comm));
	snprintf(pl->pid, sizeof(pl->pid), "%u", p->pid);
	gs_strlcpy(pl->comm, p->comm, sizeof(pl->comm));
	pl->ls.n = 0;
	prom_labels_add(&pl->ls, "pid", pl->pid);
	prom_labels_add(&pl->ls, "comm", pl->comm);
}

static int more_launches(const void *a, const void *b)
{
	const struct xkernel *x = a, *y = b;

	return x->launches < y->launches ? 1 : x->launches > y->launches ? -1 : 0;
}

/* A process's kernels by shown name (handles of one kernel, and overloads whose shortened
 * names agree, are one), most launched first. Under the lock. */
static size_t kernels_of(struct xtrace *x, __u32 pid, struct xkernel **out)
{
	struct hmap_slot *s;
	struct xkernel *ks = NULL;
	size_t n = 0, cap = 0;

	hmap_for_each (&x->model->kernels, s) {
		const struct kstat *k = s->val;
		const char *mangled;
		char *full, shortn[96];
		size_t i;

		if (k->pid != pid || !k->launches)
			continue;
		mangled = model__kernel_name(x->model, pid, k->handle);
		full = mangled ? demangle(mangled) : NULL;
		if (full)
			shorten_name(full, 80, shortn, sizeof(shortn));
		else
			snprintf(shortn, sizeof(shortn), "unknown 0x%llx",
				 (unsigned long long)k->handle);
		free(full);
		for (i = 0; i < n && strcmp(ks[i].name, shortn); i++)
			;
		if (i == n) {
			if (n == cap) {
				cap = cap ? 2 * cap : 32;
				ks = xrealloc(ks, cap * sizeof(*ks));
			}
			memset(&ks[n], 0, sizeof(ks[n]));
			gs_strlcpy(ks[n++].name, shortn, sizeof(ks[0].name));
		}
		ks[i].launches += k->launches;
		ks[i].call_ns += k->call_ns;
		if (k->gpu) {
			ks[i].gpu_count += k->gpu->count;
			ks[i].gpu_ns += k->gpu->total_ns;
		}
	}
	if (n)
		qsort(ks, n, sizeof(*ks), more_launches);
	*out = ks;
	return n;
}

size_t xtrace_kernels(struct xtrace *x, __u32 pid, struct xkernel **out)
{
	size_t n;

	pthread_mutex_lock(&x->lock);
	n = kernels_of(x, pid, out);
	pthread_mutex_unlock(&x->lock);
	return n;
}

size_t xtrace_procs(struct xtrace *x, struct xproc *out, size_t max)
{
	struct hmap_slot *s;
	size_t n = 0;

	pthread_mutex_lock(&x->lock);
	hmap_for_each (&x->model->procs, s) {
		const struct proc *p = s->val;
		struct xproc *o;

		if (n == max)
			break;
		if (!p->launches && !p->allocs && !p->copy_bytes && !p->sync_ns)
			continue;
		o = &out[n++];
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
	pthread_mutex_unlock(&x->lock);
	return n;
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
static void kernels(struct xtrace *x, struct strbuf *sb, const struct proc *p,
		    const struct plabels *pl, enum kfamily f)
{
	const char *name = kfamilies[f].name;
	bool gpu = f == KF_GPU_SECONDS || f == KF_GPU_TIMED;
	struct xkernel *ks;
	size_t n = kernels_of(x, p->pid, &ks);
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

		if (i >= x->top) {
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

void xtrace_render(struct xtrace *x, struct strbuf *sb)
{
	struct model *m = x->model;
	struct hmap_slot *s;
	struct gs_ev_drops d = {};
	__u64 live = 0, drops = 0;

	pthread_mutex_lock(&x->lock);
	hmap_for_each (&m->procs, s) {
		const struct proc *p = s->val;

		live += !p->exited && (p->launches || p->allocs);
	}
	prom_family(sb, "gpuscope_cuda_processes", "gauge",
		    "Processes on the node that launched kernels or allocated GPU memory and "
		    "are running.");
	prom_sample(sb, "gpuscope_cuda_processes", NULL, NULL, NULL, (double)live);
	for (int f = 0; f < KF_MAX; f++) {
		prom_family(sb, kfamilies[f].name, "counter", kfamilies[f].help);
		hmap_for_each (&m->procs, s) {
			struct plabels pl;

			if (!((struct proc *)s->val)->launches)
				continue;
			proc_labels(s->val, &pl);
			kernels(x, sb, s->val, &pl, (enum kfamily)f);
		}
	}
	for (int pass = 0; pass < 2; pass++) {
		const char *name = pass ? "gpuscope_process_device_memory_peak_bytes"
					: "gpuscope_process_device_memory_bytes";

		prom_family(sb, name, "gauge",
			    pass ? "Peak device memory a process had allocated, by GPU."
				 : "Device memory a process has allocated (driver allocations), by "
				   "GPU.");
		hmap_for_each (&m->procs, s) {
			struct proc *p = s->val;
			struct plabels pl;

			if (!p->allocs)
				continue;
			proc_labels(p, &pl);
			for (int dv = 0; dv <= MEM_DEVS; dv++) {
				char gpu[8];

				if (!p->dev_peak[dv])
					continue;
				snprintf(gpu, sizeof(gpu), dv < MEM_DEVS ? "%d" : "?", dv);
				prom_sample(sb, name, &pl.ls, "gpu", gpu,
					    (double)(pass ? p->dev_peak[dv] : p->dev_in_use[dv]));
			}
		}
	}
	/* Memory analyses (analysis/memsites.c): evaluated as a process's records come. */
	prom_family(sb, "gpuscope_memory_leak_suspected_sites", "gauge",
		    "Allocation sites of a process whose outstanding bytes keep growing "
		    "(Mann-Kendall trend test, 99.9%).");
	prom_family(sb, "gpuscope_memory_leak_suspected_bytes", "gauge",
		    "Bytes outstanding at the allocation sites suspected of leaking.");
	hmap_for_each (&m->procs, s) {
		struct proc *p = s->val;
		struct plabels pl;
		__u64 bytes = 0;

		if (!p->nsites)
			continue;
		for (size_t i = 0; i < p->nsites; i++)
			bytes += p->sites[i]->suspected ? p->sites[i]->live_bytes : 0;
		proc_labels(p, &pl);
		prom_sample(sb, "gpuscope_memory_leak_suspected_sites", &pl.ls, NULL, NULL,
			    (double)p->leak_sites);
		prom_sample(sb, "gpuscope_memory_leak_suspected_bytes", &pl.ls, NULL, NULL,
			    (double)bytes);
	}
	prom_family(sb, "gpuscope_oom_total", "counter",
		    "Allocations that failed for lack of device memory, by what explains it "
		    "(exhaustion, fragmentation, unclear).");
	hmap_for_each (&m->procs, s) {
		struct proc *p = s->val;
		struct plabels pl;

		if (!p->ooms[OOM_EXHAUSTION] && !p->ooms[OOM_FRAGMENTATION] &&
		    !p->ooms[OOM_UNCLEAR])
			continue;
		proc_labels(p, &pl);
		for (int c = OOM_EXHAUSTION; c < OOM_CAUSES; c++)
			prom_sample(sb, "gpuscope_oom_total", &pl.ls, "cause",
				    oom_cause_key((unsigned int)c), (double)p->ooms[c]);
	}
	prom_family(sb, "gpuscope_memory_fragmentation_ratio", "gauge",
		    "Fragmentation of a process's device allocations: the free share of the 2 MiB "
		    "pages they occupy, by GPU.");
	hmap_for_each (&m->procs, s) {
		struct proc *p = s->val;
		struct plabels pl;

		proc_labels(p, &pl);
		for (int d = 0; d <= MEM_DEVS; d++) {
			struct frag_sample now;
			char gpu[8];

			if (!p->frag[d])
				continue;
			model__frag_now(p, d, 0, &now);
			snprintf(gpu, sizeof(gpu), d < MEM_DEVS ? "%d" : "?", d);
			prom_sample(sb, "gpuscope_memory_fragmentation_ratio", &pl.ls, "gpu", gpu,
				    model__frag_score(&now));
		}
	}
	prom_family(sb, "gpuscope_copy_bytes_total", "counter",
		    "Bytes copied by CUDA memcpy calls on the node, by direction.");
	for (int k = 1; k < GS_COPY_KIND_MAX; k++)
		if (m->copies[k].count)
			prom_sample(sb, "gpuscope_copy_bytes_total", NULL, "direction",
				    copy_kind_name((unsigned int)k), (double)m->copies[k].bytes);
	prom_family(sb, "gpuscope_sync_wait_seconds_total", "counter",
		    "Time spent in CUDA synchronisation calls, by call.");
	for (int a = 1; a < GS_API_MAX; a++)
		if (m->syncs[a].calls)
			prom_sample(sb, "gpuscope_sync_wait_seconds_total", NULL, "api",
				    api_name((unsigned int)a), m->syncs[a].total_ns / 1e9);
	prom_family(sb, "gpuscope_nccl_calls_total", "counter", "NCCL calls, by operation.");
	for (int op = 0; op < NCCL_OPS; op++)
		if (m->nccl[op].calls)
			prom_sample(sb, "gpuscope_nccl_calls_total", NULL, "op",
				    nccl_op_name((unsigned int)op), (double)m->nccl[op].calls);
	prom_family(sb, "gpuscope_nccl_call_duration_seconds", "histogram",
		    "Duration of NCCL calls (the host call: enqueue, or all of it for "
		    "blocking ones), by operation.");
	for (int op = 0; op < NCCL_OPS; op++) {
		double le[NCCL_BUCKETS];
		struct prom_labels ls = { .n = 0 };

		if (!m->nccl[op].calls)
			continue;
		for (int b = 0; b < NCCL_BUCKETS; b++)
			le[b] = nccl_bucket_ns[b] / 1e9;
		prom_labels_add(&ls, "op", nccl_op_name((unsigned int)op));
		prom_histogram(sb, "gpuscope_nccl_call_duration_seconds", &ls, le,
			       m->nccl[op].buckets, NCCL_BUCKETS, m->nccl[op].total_ns / 1e9);
	}
	prom_family(sb, "gpuscope_cuda_errors_total", "counter",
		    "CUDA and NCCL calls that failed, by call and error.");
	hmap_for_each (&m->errors, s) {
		const struct err_stat *e = s->val;
		struct prom_labels ls = { .n = 0 };

		prom_labels_add(&ls, "api", api_name(e->api));
		prom_labels_add(&ls, "error", result_name(e->api, e->result));
		prom_sample(sb, "gpuscope_cuda_errors_total", &ls, NULL, NULL, (double)e->count);
	}
	prom_family(sb, "gpuscope_inject_processes", "gauge",
		    "Processes whose records the agent reads from the in-process library "
		    "(--inject-dir).");
	prom_sample(sb, "gpuscope_inject_processes", NULL, NULL, NULL, (double)x->ninjected);
	pthread_mutex_unlock(&x->lock);
	if (x->kernel)
		kernel_source__drops(x->kernel, &d);
	pthread_mutex_lock(&x->lock);
	for (int t = 0; t < GS_EV_MAX; t++)
		d.by_type[t] += x->inject_drops.by_type[t];
	d.rings_lost = x->inject_drops.rings_lost;
	pthread_mutex_unlock(&x->lock);
	for (int t = 0; t < GS_EV_MAX; t++)
		drops += d.by_type[t];
	prom_family(sb, "gpuscope_dropped_events_total", "counter",
		    "Events lost because a ring buffer was full (the kernel's, or a process's "
		    "in-process ring).");
	prom_sample(sb, "gpuscope_dropped_events_total", NULL, NULL, NULL, (double)drops);
	if (x->inject) {
		prom_family(
			sb, "gpuscope_inject_rings_lost_total", "counter",
			"In-process rings the agent could not read to the end: unreadable, "
			"cut short, corrupt, or refused (no proof of their owner, or more than a "
			"user may have open).");
		prom_sample(sb, "gpuscope_inject_rings_lost_total", NULL, NULL, NULL,
			    (double)d.rings_lost);
	}
	prom_family(sb, "gpuscope_probed_libraries", "gauge",
		    "CUDA and NCCL library files the agent has probes on.");
	prom_sample(sb, "gpuscope_probed_libraries", NULL, NULL, NULL,
		    x->kernel ? (double)kernel_source__files(x->kernel) : 0);
}
