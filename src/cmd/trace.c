// SPDX-License-Identifier: MIT
/*
 * The live session behind `run` and `attach`: the sources the options ask for (the
 * kernel's eBPF plane, the in-process plane, NVML), the consumers of the stream (the model,
 * the recording and timelines), the records gpuscope makes itself (the session's start and
 * end, the processes found running, the drop counters), and what is written at the end.
 * Every record, gpuscope's own included, takes the stream's one path, so `gpuscope report`
 * of the recording rebuilds the same model and prints the same report.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analysis/analyses.h"
#include "cmd/common.h"
#include "core/libfind.h"
#include "core/procfs.h"
#include "core/session.h"
#include "core/spawn.h"
#include "core/util.h"
#include "sink/outputs.h"
#include "sink/sinks.h"
#include "source/host.h"
#include "source/inject.h"
#include "source/kernel.h"
#include "source/kernel_names.h"
#include "source/nvml.h"
#include "source/symbols.h"

struct trace {
	const struct trace_opts *o;
	struct session s;
	struct kernel_source *kernel;
	struct inject *inject; /* run --inject: the in-process plane */
	struct analyses an;
	struct symbols *symbols;
	struct outputs out;
	struct status status;
	char exe[PATH_MAX]; /* run: the command, resolved */
	__u32 target;
	bool target_exited;
	__s32 target_exit_code;
};

static void analyses_free(void *obj)
{
	analyses__free(obj);
}

static void symbols_free(void *obj)
{
	symbols__free(obj);
}

/* The target's exit, as the kernel saw it (attach: its status). */
static void watch_target(void *ctx, const struct gs_hdr *ev)
{
	struct trace *tr = ctx;
	const struct gs_ev_proc *p = (const void *)ev;

	if (p->kind == GS_PROC_EXIT && ev->pid == tr->target) {
		tr->target_exited = true;
		tr->target_exit_code = p->exit_code;
	}
}

/* Whether pid is one of the session's processes (an in-process ring's proof of owner). */
static bool traced_pid(void *ctx, __u32 pid)
{
	const struct trace *tr = ctx;

	return model__process(tr->an.model, pid, NULL);
}

static void session_record(struct trace *tr, __u32 kind, __s32 exit_status, __u32 flags)
{
	struct gs_ev_session s = {};
	const struct trace_opts *o = tr->o;

	s.kind = kind;
	s.mode = o->mode;
	s.target_pid = (__s32)tr->target;
	s.exit_status = exit_status;
	s.realtime_ns = gs_realtime_ns();
	s.flags = flags | (tr->inject ? GS_SESSION_INJECT : 0) | (o->no_os ? 0 : GS_SESSION_OS) |
		  (tr->inject && o->gpu_chains ? GS_SESSION_GPU_CHAINS : 0) |
		  (tr->inject && o->gpu_cupti ? GS_SESSION_GPU_CUPTI : 0) |
		  (tr->inject && o->gpu_cupti_graphs ? GS_SESSION_GPU_CUPTI_GRAPHS : 0);
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
	stream__emit(tr->s.stream, &s.h, GS_EV_SESSION, sizeof(s), tr->target);
}

static void drops_record(struct trace *tr)
{
	struct gs_ev_drops d = {};

	session__drops(&tr->s, &d);
	stream__emit(tr->s.stream, &d.h, GS_EV_DROPS, sizeof(d), tr->target);
}

static void found_record(struct trace *tr, __u32 pid)
{
	struct gs_ev_proc p = {};

	p.ppid = (__u32)GS_MAX(proc_ppid((pid_t)pid), 0);
	p.kind = GS_PROC_FOUND;
	p.exit_code = -1;
	proc_comm((pid_t)pid, p.comm, sizeof(p.comm));
	proc_exe((pid_t)pid, p.path, sizeof(p.path));
	p.h.tid = pid;
	stream__emit(tr->s.stream, &p.h, GS_EV_PROC, sizeof(p), pid);
}

/* ---- the status line ------------------------------------------------------------------ */

/* Start its clock: the first line comes a second later. */
static __u64 status_start(struct trace *tr)
{
	__u64 now = gs_now_ns();

	if (!tr->o->quiet)
		status__line(&tr->status, stderr, &tr->an, 0, now);
	return now + 1000000000ULL;
}

static void status_tick(struct trace *tr, __u64 *next)
{
	__u64 now = gs_now_ns();

	if (tr->o->quiet || now < *next)
		return;
	status__line(&tr->status, stderr, &tr->an, session__drops_total(&tr->s), now);
	*next = now + 1000000000ULL;
}

/* ---- run -------------------------------------------------------------------------------- */

/*
 * The longest a record waits to be read: the kernel's probes wake nobody (bpf/common.bpf.h's
 * wake_bytes) and the in-process rings never do, so this is how late gpuscope reads what it
 * reads from the live process (a kernel's name the probe could not read, the names of new
 * Python frames). At 100 ms, the last 100 ms of a program went unnamed once it had exited
 * (tests/integration/test_steps.py's evaluation steps). A round a millisecond costs about 2%
 * of a CPU (the CPU machine: 0.36 s of CPU for 5.5 s of `run -- sleep 5`, 0.25 s of it the
 * start).
 */
#define ROUND_MS 1

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return GS_EXIT_RUNTIME;
}

/*
 * Until the command exits. A signal the terminal sent went to the command too: it is given
 * 2 s to finish. A second signal, or the 2 s out, ends the tracing with the command left
 * running (a signal sent to gpuscope alone detaches it). Returns the command's wait status,
 * or -1.
 */
static int run_loop(struct trace *tr, pid_t child, __u32 *flags)
{
	__u64 next_status = status_start(tr), deadline = 0;
	int status;
	sig_atomic_t seen = 0;

	for (;;) {
		pid_t w;

		session__poll(&tr->s, ROUND_MS);
		status_tick(tr, &next_status);
		w = waitpid(child, &status, WNOHANG);
		if (w == child)
			return status;
		if (w < 0 && errno != EINTR) {
			gs_err("lost track of pid %d: %s", (int)child, strerror(errno));
			*flags |= GS_SESSION_TARGET_LOST;
			return -1;
		}
		if (tr->s.signals && !deadline) {
			deadline = gs_now_ns() + 2000000000ULL;
			*flags |= GS_SESSION_INTERRUPTED;
			seen = tr->s.signals;
		} else if (deadline && (gs_now_ns() > deadline || tr->s.signals != seen)) {
			gs_info("stopping: pid %d is still running and will not be traced further",
				(int)child);
			return -1;
		}
	}
}

static int trace_run(struct trace *tr)
{
	const struct trace_opts *o = tr->o;
	char **envp = tr->inject ? inject__env(tr->inject, environ) : environ;
	int go_fd, err_fd, status, exec_err = 0, r;
	__u32 flags = 0;
	pid_t child;

	child = spawn(tr->exe, o->argv, envp, &o->user, &go_fd, &err_fd);
	if (envp != environ)
		inject__free_env(envp);
	if (child < 0) {
		gs_err("cannot start '%s': %s", o->argv[0], strerror(errno));
		return GS_EXIT_RUNTIME;
	}
	tr->target = (__u32)child;
	session_record(tr, GS_SESSION_START, -1, 0);
	session__start(&tr->s);
	if (kernel_source__track(tr->kernel, tr->target)) {
		close(go_fd); /* the child exits without running anything */
		waitpid(child, NULL, 0);
		return GS_EXIT_RUNTIME;
	}
	kernel_source__probe_command(tr->kernel, tr->exe);
	if (!model__libraries(tr->an.model))
		gs_info("no CUDA library found yet for '%s'; probing whatever it loads", tr->exe);
	if (write(go_fd, "x", 1) != 1) {
		gs_err("cannot start '%s': %s", o->argv[0], strerror(errno));
		return GS_EXIT_RUNTIME;
	}
	close(go_fd);
	r = (int)read(err_fd, &exec_err, sizeof(exec_err));
	close(err_fd);
	if (r == sizeof(exec_err)) {
		waitpid(child, NULL, 0);
		if (exec_err < 0)
			gs_err("cannot run '%s' as user %s: %s", tr->exe, o->user.name,
			       strerror(-exec_err));
		else
			gs_err("cannot execute '%s': %s", tr->exe, strerror(exec_err));
		return GS_EXIT_RUNTIME;
	}
	status = run_loop(tr, child, &flags);
	session__finish(&tr->s);
	status__clear(&tr->status, stderr);
	drops_record(tr);
	session_record(tr, GS_SESSION_END, status, flags);
	/* (Stopped by a signal with the command still running: that signal's status.) */
	return status >= 0 ? exit_code_of(status) : 128 + (tr->s.sig ? tr->s.sig : SIGINT);
}

/* ---- attach ----------------------------------------------------------------------------- */

static int trace_attach(struct trace *tr)
{
	const struct trace_opts *o = tr->o;
	__u64 next_status, end = 0;
	__u32 flags = 0;
	char comm[32] = "?";
	int r;

	tr->target = (__u32)o->pid;
	proc_comm(o->pid, comm, sizeof(comm));
	session_record(tr, GS_SESSION_START, -1, 0);
	session__start(&tr->s);
	found_record(tr, tr->target);
	if (kernel_source__track(tr->kernel, tr->target))
		return GS_EXIT_RUNTIME;
	r = kernel_source__probe_mapped(tr->kernel, tr->target);
	if (r) {
		gs_err("cannot read the mappings of pid %d: %s", (int)o->pid, strerror(-r));
		return GS_EXIT_RUNTIME;
	}
	if (!model__libraries(tr->an.model)) {
		gs_err("process %d (%s) has no CUDA or NCCL library loaded (libcuda.so.1, "
		       "libcudart, libnccl): nothing to trace; to trace a program from its start, "
		       "use gpuscope run",
		       (int)o->pid, comm);
		return GS_EXIT_RUNTIME;
	}
	gs_info("attached to pid %d (%s); names of kernels looked up before now are %s%s",
		(int)o->pid, comm,
		late_names__enabled() ? "read from the driver's memory" : "unknown",
		o->duration_s > 0 ? "" : "; Ctrl-C to stop");
	next_status = status_start(tr);
	if (o->duration_s > 0)
		end = gs_now_ns() + (__u64)(o->duration_s * 1e9);
	while (!tr->s.signals) {
		session__poll(&tr->s, ROUND_MS);
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
	if (tr->s.signals)
		flags |= GS_SESSION_INTERRUPTED;
	session__finish(&tr->s);
	status__clear(&tr->status, stderr);
	if (flags & GS_SESSION_TARGET_LOST)
		gs_info("pid %d exited; stopping", (int)o->pid);
	drops_record(tr);
	session_record(tr, GS_SESSION_END, tr->target_exited ? tr->target_exit_code : -1, flags);
	return GS_EXIT_OK;
}

/* ---- the session ------------------------------------------------------------------------ */

/* Checks before anything starts: the command, privileges, the process. 0 or an exit code. */
static int preflight(struct trace *tr, struct trace_opts *o)
{
	int r;

	if (o->mode == GS_MODE_RUN) {
		r = resolve_command(o->argv[0], tr->exe, sizeof(tr->exe));
		if (r) {
			gs_err("cannot execute '%s': %s", o->argv[0],
			       r == -ENOENT ? "command not found" : strerror(-r));
			return GS_EXIT_RUNTIME;
		}
	}
	if (check_privileges())
		return GS_EXIT_RUNTIME;
	if (o->mode == GS_MODE_ATTACH) {
		int tgid;

		if (!proc_exists(o->pid)) {
			gs_err("no process with PID %d", (int)o->pid);
			return GS_EXIT_RUNTIME;
		}
		tgid = proc_tgid(o->pid);
		if (tgid > 0 && tgid != o->pid) {
			gs_info("%d is a thread of process %d: tracing the process", (int)o->pid,
				tgid);
			o->pid = tgid;
		}
	}
	return 0;
}

/* The sources and consumers the options ask for. 0, or an exit code (messages printed). */
static int build(struct trace *tr)
{
	const struct trace_opts *o = tr->o;
	/* Without children to follow, per-process probes cost other processes nothing and
	 * have no race to lose. */
	struct kernel_source_opts ko = {
		.tracer = { .ring_bytes = o->ring_bytes,
			    .follow = o->follow,
			    .isolate = o->isolate || !o->follow,
			    .no_os = o->no_os,
			    .stack_every = o->stack_every,
			    .stack_rate = o->stack_rate,
			    .os_min_ns = o->os_min_ns },
		.no_cuda = o->inject,
		.executables = true,
		.attach_records = true,
		.py_raises = o->py_raises,
	};

	struct analyses_opts ao = { .findings = true,
				    .retire = true,
				    .keep_history = o->memmap_path != NULL,
				    .step_func = o->step_func };

	analyses__attach(&tr->an, tr->s.stream, &ao);
	session__own(&tr->s, analyses_free, &tr->an);
	outputs__subscribe(&tr->out, tr->s.stream, &tr->an);
	stream__subscribe(tr->s.stream, STREAM_TYPE(GS_EV_PROC), watch_target, tr);
	tr->symbols = symbols__attach(tr->s.stream);
	session__own(&tr->s, symbols_free, tr->symbols);
	host_source__open(&tr->s, true);
	if (kernel_source__open(&tr->s, &ko, &tr->kernel))
		return GS_EXIT_RUNTIME;
	kernel_source__control(tr->kernel);
	if (!o->no_nvml)
		nvml_source__open(&tr->s);
	if (o->inject) {
		struct inject_opts io = { .gpu_time = o->gpu_time,
					  .gpu_chains = o->gpu_chains,
					  .gpu_cupti = o->gpu_cupti,
					  .gpu_cupti_graphs = o->gpu_cupti_graphs,
					  .device_code = o->device_code,
					  .probe_bundle = o->probe_bundle,
					  .probe_out = o->probe_out,
					  .ring_bytes = o->ring_bytes,
					  .stack_every = o->stack_every,
					  .stack_rate = o->stack_rate,
					  .traced = traced_pid,
					  .ctx = tr };

		if (o->user.set) {
			io.uid = o->user.uid;
			io.gid = o->user.gid;
		}

		if (inject__open(&tr->s, &io, &tr->inject))
			return GS_EXIT_RUNTIME;
	}
	if (!kernel_source__watches_libs(tr->kernel))
		gs_warn("tracefs is not available: libraries loaded after the start that gpuscope "
			"did not find beforehand will not be traced");
	return 0;
}

int trace_main(const struct trace_opts *options)
{
	struct trace_opts opts = *options;
	struct trace tr = { .o = &opts };
	struct output_paths paths = { .record = opts.record_path,
				      .json = opts.json_path,
				      .perfetto = opts.perfetto_path,
				      .chrome = opts.chrome_path,
				      .folded = opts.folded_path,
				      .memmap = opts.memmap_path };
	int code, r;

	code = preflight(&tr, &opts);
	if (code)
		return code;
	if (outputs__open(&tr.out, &paths))
		return GS_EXIT_RUNTIME;
	gs_raise_fd_limit(0); /* (many per-process probes need many descriptors) */
	session__init(&tr.s);
	session__catch_signals(&tr.s);
	tr.status.tty = isatty(STDERR_FILENO);
	code = build(&tr);
	if (!code)
		code = opts.mode == GS_MODE_RUN ? trace_run(&tr) : trace_attach(&tr);
	{
		struct outputs_end e = { .analyses = model__ended(tr.an.model),
					 .text = opts.no_report ? NULL : stderr,
					 .wide = opts.wide,
					 .top = opts.top };

		r = outputs__close(&tr.out, &e);
		code = code ? code : r;
	}
	/* (Detaching waits for the kernel's RCU grace periods: after the report, not before.) */
	session__close(&tr.s);
	return code;
}
