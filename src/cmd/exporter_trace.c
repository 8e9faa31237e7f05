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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis/analyses.h"
#include "cmd/exporter.h"
#include "core/hmap.h"
#include "core/libfind.h"
#include "core/names.h"
#include "core/procfs.h"
#include "core/session.h"
#include "core/util.h"
#include "sink/prom_procs.h"
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
	struct analyses an;
	struct model *model;  /* (an's) */
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
		known = model__process(x->model, ev->pid, NULL) && !listed_exited(x, ev->pid);
		pthread_mutex_unlock(&x->lock);
		return known ? ev : NULL;
	}
	if (x->inject && ev->type <= GS_EV_NCCL && ev->source != GS_SRC_INJECT) {
		pthread_mutex_lock(&x->lock);
		known = model__process(x->model, ev->pid, NULL);
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

/*
 * A driver call, fork, exec or library seen by the kernel probes for a pid whose exit is
 * in is another process's: the pid was given out again (the kernel's ring has a process's
 * records in order, its exit last). Not the OS plane's records, which may come after the
 * exit, nor gpuscope's own about it, nor an in-process ring's, which may be read after the
 * exit: a process seen only through its ring is not told apart from the one before.
 */
static bool pid_reused(const struct model *m, const struct gs_hdr *ev)
{
	switch (ev->type) {
	case GS_EV_PROC:
		if (((const struct gs_ev_proc *)ev)->kind != GS_PROC_FORK &&
		    ((const struct gs_ev_proc *)ev)->kind != GS_PROC_EXEC)
			return false;
		break;
	case GS_EV_LAUNCH:
	case GS_EV_MEM:
	case GS_EV_COPY:
	case GS_EV_SYNC:
	case GS_EV_API:
	case GS_EV_NCCL:
	case GS_EV_LIB:
		break;
	default:
		return false;
	}
	return ev->pid && (ev->source == GS_SRC_UPROBE || ev->source == GS_SRC_TRACEPOINT) &&
	       model__exited(m, ev->pid);
}

/* The process before on a pid given out again forgotten now, kept series and all, not
 * merged into the new one; nor is the new one forgotten when the old one's time is up.
 * (Under the lock.) */
static void forget_before(struct xtrace *x, __u32 pid)
{
	unsigned int kept = 0;

	model__forget_proc(x->model, pid);
	for (unsigned int i = 0; i < x->nexited; i++)
		if (x->exited[i].pid != pid)
			x->exited[kept++] = x->exited[i];
	x->nexited = kept;
}

static void add_record(void *ctx, const struct gs_hdr *ev)
{
	struct xtrace *x = ctx;
	struct model_proc p;
	bool fresh;

	pthread_mutex_lock(&x->lock);
	if (pid_reused(x->model, ev))
		forget_before(x, ev->pid);
	fresh = !model__process(x->model, ev->pid, NULL);
	analyses__add(&x->an, ev);
	if (ev->type == GS_EV_PROC && ((const struct gs_ev_proc *)ev)->kind == GS_PROC_EXIT) {
		if (x->nexited < MAX_EXITED)
			x->exited[x->nexited++] = (typeof(x->exited[0])){ ev->pid, mono_s() };
		else
			model__forget_proc(x->model, ev->pid);
	} else if (fresh && model__process(x->model, ev->pid, &p)) {
		char comm[16];

		/* Its name now, while it runs (exec records are not sent for every process). */
		if (!p.comm[0])
			model__set_comm(x->model, ev->pid,
					proc_comm((pid_t)ev->pid, comm, sizeof(comm)) ? "?" : comm);
		/* Seen from its first driver call (cuInit), or started after the probes were:
		 * every allocation of it is known (so a pointer outside them is host memory,
		 * which gives copies their direction). (A short process may be gone before its
		 * records are read: hence cuInit first.) */
		model__set_complete(x->model, ev->pid,
				    (ev->type == GS_EV_API &&
				     ((const struct gs_ev_api *)ev)->c.api == GS_API_CU_INIT) ||
					    started_after(ev->pid, x->probed_boot_s));
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
	static const char *const names[] = { "libcuda.so.1", "libnccl.so.2" };

	ldcache_each(names, 2, from_ldcache, x->kernel);
}

static void analyses_free(void *obj)
{
	analyses__free(obj);
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

	/* (The model is fed under the lock, by add_record.) */
	struct analyses_opts ao = {
		.findings = false, .retire = false, .caller_feeds = true, .steps = true
	};

	session__init(&x->s);
	x->top = o->top;
	x->retain_s = o->retain_s;
	pthread_mutex_init(&x->lock, NULL);
	stream__filter(x->s.stream, STREAM_ALL, gate, x);
	/* (Libraries opened are the kernel source's to probe, nothing for the model.) */
	analyses__attach(&x->an, x->s.stream, &ao);
	x->model = x->an.model;
	session__own(&x->s, analyses_free, &x->an);
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
	if (!x)
		return;
	if (x->inject)
		inject__poll(x->inject, false, false);
	session__close(&x->s);
	hmap_free_with(&x->injected, NULL);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

/* ---- what the agent serves ------------------------------------------------------------------ */

size_t xtrace_kernels(struct xtrace *x, __u32 pid, struct xkernel **out)
{
	size_t n;

	pthread_mutex_lock(&x->lock);
	n = prom_procs__kernels(x->model, pid, out);
	pthread_mutex_unlock(&x->lock);
	return n;
}

size_t xtrace_procs(struct xtrace *x, struct xproc *out, size_t max)
{
	size_t n;

	pthread_mutex_lock(&x->lock);
	n = prom_procs__procs(x->model, out, max);
	pthread_mutex_unlock(&x->lock);
	return n;
}

void xtrace_render(struct xtrace *x, struct strbuf *sb)
{
	struct prom_procs_in in = { .a = &x->an, .top = x->top, .inject = x->inject != NULL };

	pthread_mutex_lock(&x->lock);
	in.ninjected = x->ninjected;
	in.drops = x->inject_drops;
	pthread_mutex_unlock(&x->lock);
	if (x->kernel) {
		kernel_source__drops(x->kernel, &in.drops);
		in.files = kernel_source__files(x->kernel);
	}
	pthread_mutex_lock(&x->lock);
	prom_procs__render(sb, &in);
	pthread_mutex_unlock(&x->lock);
}
