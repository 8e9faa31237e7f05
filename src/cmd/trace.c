// SPDX-License-Identifier: MIT
/*
 * The live trace behind `run` and `attach`. One path for every record: it is written to the
 * recording, fed to the model, and then acted on if it is a control record (a child to
 * attach to, a library to probe). Records gpuscope makes itself (session start and end,
 * probed files, drop counters, already-running processes) take the same path, so
 * `gpuscope report` of the recording rebuilds the same model and prints the same report.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bpf/tracer.h"
#include "cmd/common.h"
#include "nvml/nvml.h"
#include "core/libfind.h"
#include "core/names.h"
#include "core/procfs.h"
#include "core/recording.h"
#include "core/symbolize.h"
#include "core/util.h"
#include "inject/loader.h"
#include "sink/sinks.h"

struct trace {
	const struct trace_opts *o;
	struct tracer *tracer;
	struct inject *inject; /* run --inject: the in-process plane */
	struct model *model;
	struct recording *rec;
	struct timelines timelines;
	struct symbolizer *sym; /* names for stack addresses, while the processes live */
	struct hmap named;	/* (pid, addr) already given a symbol record */
	struct status status;
	struct nvml *nvml; /* device metrics into the stream, once a second; NULL: none */
	__u64 next_nvml;
	char exe[PATH_MAX]; /* run: the command, resolved */
	__u32 target;
	bool record_failed;
	bool target_exited;
	__s32 target_exit_code;
};

static volatile sig_atomic_t signalled;

static void on_signal(int sig)
{
	signalled = sig;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Every record, from the kernel or from gpuscope, goes through here. */
static void push(struct trace *tr, const struct gs_hdr *ev)
{
	if (tr->rec && !tr->record_failed && recording__write(tr->rec, ev))
		tr->record_failed = true;
	model__add(tr->model, ev);
	timelines__add(&tr->timelines, tr->model, ev);
}

static void fill_hdr(struct gs_hdr *h, __u16 type, __u32 size, __u32 pid)
{
	h->type = type;
	h->source = GS_SRC_GPUSCOPE;
	h->flags = 0;
	h->size = size;
	h->ts = gs_now_ns();
	h->pid = pid;
	h->tid = 0;
}

static void add_file(struct trace *tr, __u32 pid, const char *path, unsigned int kind,
		     bool use_symtab, bool late)
{
	struct gs_ev_attach rec;
	char real[PATH_MAX];
	int r;

	/* With the in-process plane, driver calls come from it, not from probes. */
	if (tr->inject && kind == GS_LIB_CUDA)
		return;
	/* Resolve inside the process's mount namespace, show the path it knows. */
	if (pid && path[0] == '/')
		proc_root_path(pid, path, real, sizeof(real));
	else
		gs_strlcpy(real, path, sizeof(real));
	r = tracer__add_file(tr->tracer, real, path, kind, use_symtab, late, &rec);
	if (r <= 0) {
		if (r < 0)
			gs_debug("cannot probe %s: %s", path, strerror(-r));
		return;
	}
	fill_hdr(&rec.h, GS_EV_ATTACH, sizeof(rec), pid);
	push(tr, &rec.h);
}

/* Whether pid is one of the session's processes (an in-process ring's proof of owner). */
static bool traced_pid(void *ctx, __u32 pid)
{
	const struct trace *tr = ctx;

	return hmap_get(&tr->model->procs, pid, 0) != NULL;
}

/* Control records: follow children, probe what they load. */
static void act_on(struct trace *tr, const struct gs_hdr *ev)
{
	const struct gs_ev_proc *p = (const void *)ev;
	const struct gs_ev_lib *l = (const void *)ev;
	char path[PATH_MAX];

	switch (ev->type) {
	case GS_EV_PROC:
		if (p->kind == GS_PROC_FORK) {
			tracer__track(tr->tracer, p->h.pid);
		} else if (p->kind == GS_PROC_EXEC) {
			/* A new image may carry the CUDA runtime statically. */
			snprintf(path, sizeof(path), "/proc/%u/exe", p->h.pid);
			if (p->path[0] == '/')
				proc_root_path(p->h.pid, p->path, path, sizeof(path));
			add_file(tr, 0, path, GS_LIB_EXE, true, false);
		} else if (p->kind == GS_PROC_EXIT) {
			tracer__untrack(tr->tracer, p->h.pid);
			if (p->h.pid == tr->target) {
				tr->target_exited = true;
				tr->target_exit_code = p->exit_code;
			}
		}
		break;
	case GS_EV_LIB:
		if (l->path[0] == '/')
			add_file(tr, l->h.pid, l->path, l->kind, false, false);
		else {
			/* Relative to the process's working directory. */
			snprintf(path, sizeof(path), "/proc/%u/cwd/%s", l->h.pid, l->path);
			add_file(tr, 0, path, l->kind, false, false);
		}
		break;
	}
}

/*
 * A name the kernel could not read (its page was not resident) is read from the process
 * here, where reading faults the page in; the record then enters the stream complete.
 */
static const struct gs_hdr *complete_name(const struct gs_ev_kname *k, struct gs_ev_kname *buf)
{
	int n;

	if (k->len || !k->name_addr)
		return &k->h;
	memcpy(buf, k, offsetof(struct gs_ev_kname, name));
	n = proc_read_str((pid_t)k->h.pid, k->name_addr, buf->name, sizeof(buf->name));
	if (n <= 0)
		return &k->h;
	buf->len = (__u16)n;
	buf->truncated = n == (int)sizeof(buf->name) - 1;
	buf->h.size = (__u32)((offsetof(struct gs_ev_kname, name) + (size_t)n + 1 + 7) & ~7UL);
	return &buf->h;
}

/*
 * A stack's addresses are named now, while its process lives: a symbol record for each
 * address seen for the first time goes into the stream before the stack, so that the
 * recording replays with the names.
 */
static void name_frames(struct trace *tr, const struct gs_ev_stack *s)
{
	struct gs_ev_symbol y;

	if (!tr->sym)
		tr->sym = symbolizer__new();
	for (unsigned int i = 0; i < s->nframes; i++) {
		if (hmap_get(&tr->named, s->h.pid, s->ip[i]))
			continue;
		hmap_put(&tr->named, s->h.pid, s->ip[i], (void *)1);
		if (symbolizer__name(tr->sym, s->h.pid, s->ip[i], y.name, sizeof(y.name)))
			continue;
		fill_hdr(&y.h, GS_EV_SYMBOL, 0, s->h.pid);
		y.addr = s->ip[i];
		y.len = (__u16)strlen(y.name);
		memset(y.pad, 0, sizeof(y.pad));
		y.h.size = (__u32)(offsetof(struct gs_ev_symbol, name) + y.len + 1);
		push(tr, &y.h);
	}
}

static void on_event(void *ctx, const struct gs_hdr *ev)
{
	struct trace *tr = ctx;
	struct gs_ev_kname name;

	if (ev->type == GS_EV_KNAME)
		ev = complete_name((const struct gs_ev_kname *)ev, &name);
	if (ev->type == GS_EV_STACK)
		name_frames(tr, (const struct gs_ev_stack *)ev);
	/* A new image: its modules are others. (Addresses named before the exec keep their
	 * names: CUDA calls, and so stacks, come after a program's exec.) */
	if (ev->type == GS_EV_PROC && ((const struct gs_ev_proc *)ev)->kind == GS_PROC_EXEC &&
	    tr->sym)
		symbolizer__forget(tr->sym, ev->pid);
	push(tr, ev);
	act_on(tr, ev);
}

static void session_record(struct trace *tr, __u32 kind, __s32 exit_status, __u32 flags)
{
	struct gs_ev_session s = {};
	const struct trace_opts *o = tr->o;

	fill_hdr(&s.h, GS_EV_SESSION, sizeof(s), tr->target);
	s.kind = kind;
	s.mode = o->mode;
	s.target_pid = (__s32)tr->target;
	s.exit_status = exit_status;
	s.realtime_ns = gs_realtime_ns();
	s.flags = flags | (tr->inject ? GS_SESSION_INJECT : 0) | (tr->o->no_os ? 0 : GS_SESSION_OS);
	s.follow = o->follow;
	s.gpu_time = tr->inject ? o->gpu_time : 0;
	s.os_min_us = o->no_os ? 0 : (__u32)(o->os_min_ns / 1000);
	if (o->mode == GS_MODE_RUN) {
		struct strbuf sb = {};

		for (char **a = o->argv; *a; a++)
			sb_printf(&sb, "%s%s", a == o->argv ? "" : " ", *a);
		gs_strlcpy(s.cmd, sb.buf ? sb.buf : "", sizeof(s.cmd));
		sb_free(&sb);
	} else {
		proc_comm((pid_t)tr->target, s.cmd, sizeof(s.cmd));
	}
	push(tr, &s.h);
}

static void drops_record(struct trace *tr)
{
	struct gs_ev_drops d = {};

	tracer__drops(tr->tracer, &d);
	if (tr->inject)
		inject__drops(tr->inject, &d);
	fill_hdr(&d.h, GS_EV_DROPS, sizeof(d), tr->target);
	push(tr, &d.h);
}

static void found_record(struct trace *tr, __u32 pid)
{
	struct gs_ev_proc p = {};

	fill_hdr(&p.h, GS_EV_PROC, sizeof(p), pid);
	p.h.tid = pid;
	p.kind = GS_PROC_FOUND;
	p.ppid = (__u32)GS_MAX(proc_ppid((pid_t)pid), 0);
	p.exit_code = -1;
	proc_comm((pid_t)pid, p.comm, sizeof(p.comm));
	proc_exe((pid_t)pid, p.path, sizeof(p.path));
	push(tr, &p.h);
}

/* Start the status clock: the first line then comes a second later. */
static __u64 status_start(struct trace *tr)
{
	__u64 now = gs_now_ns();

	if (!tr->o->quiet)
		status__line(&tr->status, stderr, tr->model, 0, now);
	return now + 1000000000ULL;
}

static void status_tick(struct trace *tr, __u64 *next)
{
	__u64 now = gs_now_ns();

	if (tr->o->quiet || now < *next)
		return;
	status__line(&tr->status, stderr, tr->model,
		     tracer__drops_total(tr->tracer) +
			     (tr->inject ? inject__drops_total(tr->inject) : 0),
		     now);
	*next = now + 1000000000ULL;
}

/* ---- run -------------------------------------------------------------------------------- */

/*
 * Start the command stopped at a pipe, so its probes are attached before it executes
 * anything: the child waits for one byte, then execs; an exec failure comes back through a
 * close-on-exec pipe.
 */
static pid_t spawn(const char *exe, char **argv, char **envp, int *go_fd, int *err_fd)
{
	int go[2], errp[2];
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) || pipe2(errp, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char c;
		int e;

		close(go[1]);
		close(errp[0]);
		signal(SIGPIPE, SIG_DFL);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		execve(exe, argv, envp);
		e = errno;
		if (write(errp[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(errp[1]);
	*go_fd = go[1];
	*err_fd = errp[0];
	return pid;
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return GS_EXIT_RUNTIME;
}

static void probe_command_libraries(struct trace *tr, const char *exe)
{
	struct lib_list libs = {};

	libfind_for_command(exe, &libs);
	for (size_t i = 0; i < libs.n; i++)
		add_file(tr, 0, libs.v[i].path, libs.v[i].kind, false, false);
	lib_list_free(&libs);
	add_file(tr, 0, exe, GS_LIB_EXE, true, false);
	if (!tr->model->nlibs)
		gs_info("no CUDA library found yet for '%s'; probing whatever it loads", exe);
}

/* NVML: each GPU's device metrics as a record, once a second (the fast fields only: about
 * 0.3 ms a sample on an H200). */
static void sample_nvml(struct trace *tr, bool now)
{
	static struct nvml_gpu g[NVML_MAX_DEVICES];
	__u64 t = gs_now_ns();
	unsigned int n;

	if (!tr->nvml || (!now && t < tr->next_nvml))
		return;
	tr->next_nvml = t + 1000000000ULL;
	nvml_sample(tr->nvml, 0);
	n = nvml_snapshot(tr->nvml, g, NVML_MAX_DEVICES);
	for (unsigned int i = 0; i < n; i++) {
		struct gs_ev_nvml e = { .gpu = g[i].index };

		fill_hdr(&e.h, GS_EV_NVML, sizeof(e), 0);
		e.h.source = GS_SRC_NVML;
		e.have = (g[i].have & (1u << NF_UTIL) ? GS_NVML_UTIL : 0) |
			 (g[i].have & (1u << NF_MEMORY) ? GS_NVML_MEMORY : 0) |
			 (g[i].have & (1u << NF_POWER) ? GS_NVML_POWER : 0) |
			 (g[i].have & (1u << NF_TEMP) ? GS_NVML_TEMP : 0) |
			 (g[i].have & (1u << NF_CLOCK_SM) ? GS_NVML_CLOCK : 0) |
			 (g[i].have & (1u << NF_GPM) ? GS_NVML_GPM : 0) |
			 (g[i].lost ? GS_NVML_LOST : 0);
		e.util_gpu = g[i].util_gpu;
		e.util_mem = g[i].util_mem;
		e.mem_used = g[i].mem_used;
		e.mem_total = g[i].mem_total;
		e.power_mw = g[i].power_mw;
		e.temp_c = g[i].temp_c;
		e.clock_sm_mhz = g[i].clock_sm_mhz;
		e.clock_mem_mhz = g[i].clock_mem_mhz;
		e.sm_active = g[i].sm_active;
		e.tensor_active = g[i].tensor_active;
		e.dram_active = g[i].dram_active;
		push(tr, &e.h);
	}
}

/* The kernel's events, and the in-process plane's: its rings are polled (every 10 ms, new
 * rings looked for every 100 ms). */
static void poll_sources(struct trace *tr, __u64 *next_scan)
{
	__u64 now;

	tracer__poll(tr->tracer, tr->inject ? 10 : 100);
	sample_nvml(tr, false);
	if (!tr->inject)
		return;
	now = gs_now_ns();
	inject__poll(tr->inject, now >= *next_scan, false);
	if (now >= *next_scan)
		*next_scan = now + 100000000ULL;
}

static int run_loop(struct trace *tr, pid_t child, int *status, __u32 *flags)
{
	__u64 next_status = status_start(tr), deadline = 0, next_scan = 0;

	for (;;) {
		pid_t w;

		poll_sources(tr, &next_scan);
		status_tick(tr, &next_status);
		w = waitpid(child, status, WNOHANG);
		if (w == child)
			return 0;
		if (w < 0 && errno != EINTR) {
			gs_err("lost track of pid %d: %s", (int)child, strerror(errno));
			*flags |= GS_SESSION_TARGET_LOST;
			return -1;
		}
		if (signalled && !deadline) {
			/* The terminal sent it to the command too: give it time to finish. */
			deadline = gs_now_ns() + 2000000000ULL;
			*flags |= GS_SESSION_INTERRUPTED;
			signalled = 0;
		} else if ((deadline && gs_now_ns() > deadline) || (deadline && signalled)) {
			gs_info("stopping: pid %d is still running and will not be traced further",
				(int)child);
			return -1;
		}
	}
}

static int trace_run(struct trace *tr)
{
	const struct trace_opts *o = tr->o;
	const char *exe = tr->exe;
	int go_fd, err_fd, status = -1, exec_err = 0, r;
	char **envp = tr->inject ? inject__env(tr->inject, environ) : environ;
	__u32 flags = 0;
	pid_t child;

	child = spawn(exe, o->argv, envp, &go_fd, &err_fd);
	if (envp != environ)
		inject__free_env(envp);
	if (child < 0) {
		gs_err("cannot start '%s': %s", o->argv[0], strerror(errno));
		return GS_EXIT_RUNTIME;
	}
	tr->target = (__u32)child;
	session_record(tr, GS_SESSION_START, -1, 0);
	if (tracer__track(tr->tracer, tr->target)) {
		close(go_fd); /* the child exits without running anything */
		waitpid(child, NULL, 0);
		return GS_EXIT_RUNTIME;
	}
	probe_command_libraries(tr, exe);
	if (write(go_fd, "x", 1) != 1) {
		gs_err("cannot start '%s': %s", o->argv[0], strerror(errno));
		return GS_EXIT_RUNTIME;
	}
	close(go_fd);
	r = (int)read(err_fd, &exec_err, sizeof(exec_err));
	close(err_fd);
	if (r == sizeof(exec_err)) {
		waitpid(child, NULL, 0);
		gs_err("cannot execute '%s': %s", exe, strerror(exec_err));
		return GS_EXIT_RUNTIME;
	}
	run_loop(tr, child, &status, &flags);
	tracer__finish(tr->tracer);
	if (tr->inject)
		inject__poll(tr->inject, true, true);
	status__clear(&tr->status, stderr);
	drops_record(tr);
	session_record(tr, GS_SESSION_END, status, flags);
	return status >= 0 ? exit_code_of(status) : 128 + SIGINT;
}

/* ---- attach ----------------------------------------------------------------------------- */

static int trace_attach(struct trace *tr)
{
	const struct trace_opts *o = tr->o;
	struct map_entry *maps = NULL;
	__u64 next_status, end = 0;
	__u32 flags = 0;
	char exe[PATH_MAX], comm[32] = "?";
	size_t nmaps = 0;
	int r;

	tr->target = (__u32)o->pid;
	proc_comm(o->pid, comm, sizeof(comm));
	r = proc_exec_files(o->pid, &maps, &nmaps);
	if (r) {
		gs_err("cannot read the mappings of pid %d: %s", (int)o->pid, strerror(-r));
		return GS_EXIT_RUNTIME;
	}
	session_record(tr, GS_SESSION_START, -1, 0);
	found_record(tr, tr->target);
	if (tracer__track(tr->tracer, tr->target)) {
		free(maps);
		return GS_EXIT_RUNTIME;
	}
	for (size_t i = 0; i < nmaps; i++) {
		unsigned int kind = lib_kind_of(maps[i].path);

		if (kind != GS_LIB_NONE)
			add_file(tr, tr->target, maps[i].path, kind, false, true);
	}
	free(maps);
	if (proc_exe(o->pid, exe, sizeof(exe)) == 0)
		add_file(tr, tr->target, exe, GS_LIB_EXE, true, true);
	if (!tr->model->nlibs) {
		gs_err("process %d (%s) has no CUDA or NCCL library loaded (libcuda.so.1, "
		       "libcudart, libnccl): nothing to trace; to trace a program from its start, "
		       "use gpuscope run",
		       (int)o->pid, comm);
		return GS_EXIT_RUNTIME;
	}
	gs_info("attached to pid %d (%s); names of kernels looked up before now are unknown%s",
		(int)o->pid, comm, o->duration_s > 0 ? "" : "; Ctrl-C to stop");
	next_status = status_start(tr);
	if (o->duration_s > 0)
		end = gs_now_ns() + (__u64)(o->duration_s * 1e9);
	while (!signalled) {
		tracer__poll(tr->tracer, 100);
		sample_nvml(tr, false);
		status_tick(tr, &next_status);
		if (end && gs_now_ns() >= end) {
			flags |= GS_SESSION_DURATION;
			break;
		}
		if (tr->target_exited || !proc_exists(o->pid)) {
			flags |= GS_SESSION_TARGET_LOST;
			break;
		}
	}
	if (signalled)
		flags |= GS_SESSION_INTERRUPTED;
	tracer__finish(tr->tracer);
	status__clear(&tr->status, stderr);
	if (flags & GS_SESSION_TARGET_LOST)
		gs_info("pid %d exited; stopping", (int)o->pid);
	drops_record(tr);
	session_record(tr, GS_SESSION_END, tr->target_exited ? tr->target_exit_code : -1, flags);
	return GS_EXIT_OK;
}

int trace_main(const struct trace_opts *options)
{
	struct trace_opts opts = *options;
	const struct trace_opts *o = &opts;
	/* Without children to follow, per-process probes cost other processes nothing and
	 * have no race to lose. */
	struct tracer_opts to = { .ring_bytes = o->ring_bytes,
				  .follow = o->follow,
				  .isolate = o->isolate || !o->follow,
				  .no_os = o->no_os,
				  .stack_every = o->stack_every,
				  .os_min_ns = o->os_min_ns };
	struct trace tr = { .o = o };
	int code, r;

	if (o->mode == GS_MODE_RUN) {
		r = resolve_command(o->argv[0], tr.exe, sizeof(tr.exe));
		if (r) {
			gs_err("cannot execute '%s': %s", o->argv[0],
			       r == -ENOENT ? "command not found" : strerror(-r));
			return GS_EXIT_RUNTIME;
		}
	}
	if (check_privileges())
		return GS_EXIT_RUNTIME;
	if (o->mode == GS_MODE_ATTACH && !proc_exists(o->pid)) {
		gs_err("no process with PID %d", (int)o->pid);
		return GS_EXIT_RUNTIME;
	}
	if (o->mode == GS_MODE_ATTACH) {
		int tgid = proc_tgid(o->pid);

		if (tgid > 0 && tgid != o->pid) {
			gs_info("%d is a thread of process %d: tracing the process", (int)o->pid,
				tgid);
			opts.pid = tgid;
		}
	}
	gs_raise_fd_limit(0); /* (many per-process probes need many descriptors) */
	install_signals();
	tr.status.tty = isatty(STDERR_FILENO);
	if (o->record_path) {
		tr.rec = recording__create(o->record_path);
		if (!tr.rec)
			return GS_EXIT_RUNTIME;
	}
	if (timelines__open(&tr.timelines, o)) {
		recording__close(tr.rec);
		return GS_EXIT_RUNTIME;
	}
	tr.model = model__new();
	tr.model->keep_history = o->memmap_path != NULL;
	to.on_event = on_event;
	to.ctx = &tr;
	if (tracer__open(&to, &tr.tracer)) {
		recording__close(tr.rec);
		timelines__close(&tr.timelines);
		model__free(tr.model);
		return GS_EXIT_RUNTIME;
	}
	if (o->inject) {
		struct inject_opts io = { .gpu_time = o->gpu_time,
					  .device_code = o->device_code,
					  .probe_bundle = o->probe_bundle,
					  .probe_out = o->probe_out,
					  .ring_bytes = o->ring_bytes,
					  .stack_every = o->stack_every,
					  .on_event = on_event,
					  .traced = traced_pid,
					  .ctx = &tr };

		if (inject__open(&io, &tr.inject)) {
			tracer__close(tr.tracer);
			recording__close(tr.rec);
			timelines__close(&tr.timelines);
			model__free(tr.model);
			return GS_EXIT_RUNTIME;
		}
	}
	if (!tracer__watches_libs(tr.tracer))
		gs_warn("tracefs is not available: libraries loaded after the start that gpuscope "
			"did not find beforehand will not be traced");
	if (!o->no_nvml) {
		char err[256];

		tr.nvml = nvml_open(err, sizeof(err));
		if (!tr.nvml)
			gs_debug("no device metrics in the trace: %s", err);
	}
	code = o->mode == GS_MODE_RUN ? trace_run(&tr) : trace_attach(&tr);
	if (recording__close(tr.rec) || tr.record_failed)
		code = code ? code : GS_EXIT_RUNTIME;
	r = timelines__close(&tr.timelines);
	code = code ? code : r;
	if (o->memmap_path && tr.model->have_end) {
		int r2 = write_memory_map(tr.model, o->memmap_path);

		code = code ? code : r2;
	}
	if (o->folded_path && tr.model->have_end) {
		r = write_folded(tr.model, o->folded_path);
		code = code ? code : r;
	}
	if (tr.model->have_end && !o->no_report) {
		r = write_report(tr.model, o->json_path, stderr, o->wide, o->top);
		if (r && !code)
			code = r;
	}
	/* Detaching waits for the kernel (RCU grace periods): after the report, not before. */
	tracer__close(tr.tracer);
	inject__close(tr.inject);
	nvml_close(tr.nvml);
	symbolizer__free(tr.sym);
	hmap_free(&tr.named);
	model__free(tr.model);
	return code;
}
