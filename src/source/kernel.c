// SPDX-License-Identifier: MIT
/* The kernel's eBPF plane as a source (see kernel.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/libfind.h"
#include "core/procfs.h"
#include "core/util.h"
#include "gpuscope/api.h"
#include "source/kernel.h"
#include "source/kernel_names.h"
#include "source/kernel_py.h"

struct kernel_source {
	struct kernel_source_opts o;
	struct tracer *t;
	struct stream *s;
	__u64 files;
	struct gs_ev_kname name; /* a name record completed from the process's memory */
	struct kernel_py *py;	 /* (owned by the session: it filters until the end) */
	struct late_names *late; /* (the same) names of kernels looked up before the probes */
};

static void on_record(void *ctx, const struct gs_hdr *ev)
{
	struct kernel_source *k = ctx;

	stream__push(k->s, ev);
}

void kernel_source__add_file(struct kernel_source *k, __u32 pid, const char *path,
			     unsigned int kind, bool use_symtab, bool late)
{
	unsigned int flags = (use_symtab ? TR_FILE_SYMTAB : 0) | (late ? TR_FILE_LATE : 0);
	struct gs_ev_attach rec;
	char real[PATH_MAX];
	int r;

	if ((k->o.no_cuda && kind == GS_LIB_CUDA) || kind == GS_LIB_NONE ||
	    (!k->o.executables && kind == GS_LIB_EXE))
		return;
	/* Resolve inside the process's mount namespace, show the path it knows. */
	if (pid && path[0] == '/')
		proc_root_path(pid, path, real, sizeof(real));
	else
		gs_strlcpy(real, path, sizeof(real));
	/* (On a driver whose objects keep the names, cuKernelGetFunction's functions are named
	 * from them: kernel_names.h.) */
	if (kind == GS_LIB_CUDA && late_names__replaces_kfunc(k->late, real))
		flags |= TR_FILE_NO_KFUNC;
	r = tracer__add_file(k->t, real, path, kind, flags, &rec);
	if (r < 0)
		gs_debug("cannot probe %s: %s", path, strerror(-r));
	if (r <= 0)
		return;
	k->files++;
	if (k->o.attach_records)
		stream__emit(k->s, &rec.h, GS_EV_ATTACH, sizeof(rec), pid);
}

/* Control records: follow children, probe what they load and exec. */
static void act_on(void *ctx, const struct gs_hdr *ev)
{
	struct kernel_source *k = ctx;
	const struct gs_ev_proc *p = (const void *)ev;
	const struct gs_ev_lib *l = (const void *)ev;
	char path[PATH_MAX];

	if (ev->type == GS_EV_LIB) {
		if (l->path[0] == '/') {
			kernel_source__add_file(k, l->h.pid, l->path, l->kind, false, false);
		} else {
			/* Relative to the process's working directory. */
			snprintf(path, sizeof(path), "/proc/%u/cwd/%s", l->h.pid, l->path);
			kernel_source__add_file(k, 0, path, l->kind, false, false);
		}
		return;
	}
	if (k->o.tracer.all)
		return;
	if (p->kind == GS_PROC_FORK) {
		tracer__track(k->t, p->h.pid);
	} else if (p->kind == GS_PROC_EXEC && k->o.executables) {
		/* A new image may carry the CUDA runtime statically. */
		snprintf(path, sizeof(path), "/proc/%u/exe", p->h.pid);
		if (p->path[0] == '/')
			proc_root_path(p->h.pid, p->path, path, sizeof(path));
		kernel_source__add_file(k, 0, path, GS_LIB_EXE, true, false);
	} else if (p->kind == GS_PROC_EXIT) {
		tracer__untrack(k->t, p->h.pid);
	}
}

/* A name the kernel could not read (its page was not resident) is read from the process
 * here, where reading faults the page in; the record then goes on complete. */
static const struct gs_hdr *complete_name(void *ctx, const struct gs_hdr *ev)
{
	struct kernel_source *k = ctx;
	const struct gs_ev_kname *n = (const void *)ev;
	int len;

	if (n->len || !n->name_addr)
		return ev;
	memcpy(&k->name, n, offsetof(struct gs_ev_kname, name));
	len = proc_read_str((pid_t)n->h.pid, n->name_addr, k->name.name, sizeof(k->name.name));
	if (len <= 0)
		return ev;
	k->name.len = (__u16)len;
	k->name.truncated = len == (int)sizeof(k->name.name) - 1;
	k->name.h.size = (__u32)((offsetof(struct gs_ev_kname, name) + (size_t)len + 1 + 7) & ~7UL);
	return &k->name.h;
}

static int poll_fn(void *obj, int timeout_ms)
{
	struct kernel_source *k = obj;

	return tracer__poll(k->t, timeout_ms);
}

static void finish_fn(void *obj)
{
	struct kernel_source *k = obj;
	__u64 skips, unread, rechecks;
	struct late_names_counts late;

	tracer__finish(k->t);
	/* Launches whose stacks were due but skipped to keep to the rate: carried by a stack
	 * record of no frames (as the in-process plane's last skips), after the last stack. */
	skips = tracer__stack_skips(k->t);
	if (skips) {
		struct gs_ev_stack e = { .api = GS_API_CU_LAUNCH_KERNEL,
					 .skipped = skips > 0xffffffffULL ? 0xffffffffU
									  : (__u32)skips };

		stream__emit(k->s, &e.h, GS_EV_STACK, offsetof(struct gs_ev_stack, ip), 0);
	}
	if (k->py)
		kernel_py__take_counts(k->py);
	tracer__kfunc_counts(k->t, &unread, &rechecks);
	if (late_names__all(k->late))
		gs_debug("cuKernelGetFunction not probed: the functions it gives are named from "
			 "the driver's objects");
	else
		gs_debug("cuKernelGetFunction calls whose return was not asked for: %llu (found "
			 "wanting at the next launch: %llu)",
			 (unsigned long long)unread, (unsigned long long)rechecks);
	late_names__counts(k->late, &late);
	if (late.read || late.unreadable || late.agreed || late.differed || late.full)
		gs_debug("kernels whose lookups were not seen: %llu names read from the driver, "
			 "%llu not readable, %llu not read (too many); names looked up since, "
			 "against the driver's: %llu agreed, %llu differed",
			 (unsigned long long)late.read, (unsigned long long)late.unreadable,
			 (unsigned long long)late.full, (unsigned long long)late.agreed,
			 (unsigned long long)late.differed);
}

void kernel_source__drops(const struct kernel_source *k, struct gs_ev_drops *d)
{
	tracer__drops(k->t, d);
}

static void drops_fn(void *obj, struct gs_ev_drops *d)
{
	kernel_source__drops(obj, d);
}

static void py_free(void *obj)
{
	kernel_py__free(obj);
}

static void late_free(void *obj)
{
	late_names__free(obj);
}

/* (Detaching waits for the kernel's RCU grace periods.) */
static void close_fn(void *obj)
{
	if (((struct kernel_source *)obj)->py)
		kernel_py__detach(((struct kernel_source *)obj)->py);
	tracer__close(((struct kernel_source *)obj)->t);
	free(obj);
}

static const struct source_ops ops = {
	.name = "kernel", .poll = poll_fn, .finish = finish_fn, .drops = drops_fn, .close = close_fn
};

int kernel_source__open(struct session *s, const struct kernel_source_opts *o,
			struct kernel_source **out)
{
	struct kernel_source *k = xcalloc(1, sizeof(*k));
	int err;

	k->o = *o;
	k->s = s->stream;
	k->o.tracer.on_event = on_record;
	k->o.tracer.ctx = k;
	k->o.tracer.driver_names = late_names__enabled();
	err = tracer__open(&k->o.tracer, &k->t);
	if (err) {
		free(k);
		return err;
	}
	stream__filter(s->stream, STREAM_TYPE(GS_EV_KNAME), complete_name, k);
	k->late = late_names__new(s->stream);
	if (k->late)
		session__own(s, late_free, k->late);
	/* (Python frames go into stacks: without them, none. GPUSCOPE_NO_PYFRAMES: none, to
	 * measure what they cost.) */
	if (k->o.tracer.stack_every && !getenv("GPUSCOPE_NO_PYFRAMES")) {
		k->py = kernel_py__attach(s->stream, k->t, o->py_raises);
		session__own(s, py_free, k->py);
	}
	session__add_source(s, &ops, k);
	*out = k;
	return 0;
}

/* (Subscribed by the session's builder after its consumers: what a control record makes,
 * an attach record, comes after it, as the kernel saw them.) */
void kernel_source__control(struct kernel_source *k)
{
	stream__subscribe(k->s, STREAM_TYPE(GS_EV_PROC) | STREAM_TYPE(GS_EV_LIB), act_on, k);
}

int kernel_source__track(struct kernel_source *k, __u32 pid)
{
	return tracer__track(k->t, pid);
}

void kernel_source__probe_command(struct kernel_source *k, const char *exe)
{
	struct lib_list libs = {};

	libfind_for_command(exe, &libs);
	for (size_t i = 0; i < libs.n; i++)
		kernel_source__add_file(k, 0, libs.v[i].path, libs.v[i].kind, false, false);
	lib_list_free(&libs);
	kernel_source__add_file(k, 0, exe, GS_LIB_EXE, true, false);
}

int kernel_source__probe_mapped(struct kernel_source *k, __u32 pid)
{
	unsigned int kind;
	bool cuda = false;
	struct map_entry *maps = NULL;
	char exe[PATH_MAX];
	size_t nmaps = 0;
	int r = proc_exec_files((pid_t)pid, &maps, &nmaps);

	if (r)
		return r;
	for (size_t i = 0; i < nmaps; i++) {
		kind = lib_kind_of(maps[i].path);
		kernel_source__add_file(k, pid, maps[i].path, kind, false, true);
		cuda |= kind == GS_LIB_CUDA;
	}
	/* (Its kernels' names looked up before now: read from the driver, kernel_names.h.) */
	if (cuda)
		late_names__process(k->late, pid);
	free(maps);
	if (k->o.executables && proc_exe((pid_t)pid, exe, sizeof(exe)) == 0)
		kernel_source__add_file(k, pid, exe, GS_LIB_EXE, true, true);
	if (k->py)
		kernel_py__look(k->py, pid);
	return 0;
}

__u64 kernel_source__files(const struct kernel_source *k)
{
	return k->files;
}

bool kernel_source__watches_libs(const struct kernel_source *k)
{
	return tracer__watches_libs(k->t);
}
