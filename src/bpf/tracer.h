/* SPDX-License-Identifier: MIT */
/*
 * Kernel-eBPF plane: loads the BPF objects (proc, cuda, nccl) sharing one ring buffer and
 * one set of traced processes, attaches uprobes to CUDA/NCCL libraries for each traced
 * process, and delivers records in ring-buffer order.
 *
 * Two ways to place the uprobes:
 *  - on the library files for every process (the default): the BPF programs keep only the
 *    traced process tree, whose set the fork tracepoint extends before a child runs, so a
 *    child is traced from its first instruction. Other processes using the same files take
 *    the breakpoint and are filtered out in the kernel (about a microsecond per call).
 *  - per process (isolate): only traced processes take breakpoints; a child's probes are
 *    attached when its fork is seen, so calls it makes in that first millisecond are missed.
 */
#ifndef GS_BPF_TRACER_H
#define GS_BPF_TRACER_H

#include <stdbool.h>
#include "gpuscope/event.h"

struct tracer;

struct tracer_opts {
	__u64 ring_bytes;
	bool follow;
	bool isolate;	   /* per-process uprobes instead of per-file */
	bool no_os;	   /* without the OS plane (os.bpf.c) */
	bool all;	   /* every process (the exporter); needs no_os */
	__u32 stack_every; /* call stacks: 0 none; every Nth launch, every allocation and failure */
	__u32 stack_rate;  /* ... launches' at most this many a second a thread (0: no limit) */
	__u64 os_min_ns;   /* shorter off-CPU intervals and system calls are not reported */
	bool driver_names; /* names read from the driver's objects (source/kernel_names.h) */
	/* Each record from the kernel, in ring-buffer order (ev->size bytes). */
	void (*on_event)(void *ctx, const struct gs_hdr *ev);
	void *ctx;
};

/* Load and start the process tracepoints. 0 or -errno (a message was printed). */
int tracer__open(const struct tracer_opts *o, struct tracer **out);
void tracer__close(struct tracer *t);

/* Trace pid: add it to the traced set and attach every known file's probes to it. */
int tracer__track(struct tracer *t, __u32 pid);
void tracer__untrack(struct tracer *t, __u32 pid);

/* How a file is probed (tracer__add_file's flags). */
enum {
	TR_FILE_SYMTAB = 1,   /* its .symtab searched too (an executable with the runtime in it) */
	TR_FILE_LATE = 2,     /* probed after the process started (attach) */
	TR_FILE_NO_KFUNC = 4, /* cuKernelGetFunction not probed (source/kernel_names.h) */
};

/*
 * Probe the traced functions `path` defines, for every traced process now and later
 * (flags: TR_FILE_*). Returns 1 and fills *rec (an ATTACH record without header) for a new
 * file with probes, 0 if the file was known or defines none of the functions, -errno on
 * failure.
 */
int tracer__add_file(struct tracer *t, const char *path, const char *display_path,
		     unsigned int kind, unsigned int flags, struct gs_ev_attach *rec);

/* Wait up to timeout_ms for records and deliver them. Returns records or -errno. */
int tracer__poll(struct tracer *t, int timeout_ms);
/* Deliver everything already in the ring buffer. */
int tracer__drain(struct tracer *t);
/* The last drain of a session: then the OS plane's block requests never seen to complete. */
int tracer__finish(struct tracer *t);
/* Launches whose stacks were due but skipped to keep to the rate, since the last call. */
__u64 tracer__stack_skips(struct tracer *t);
/* cuKernelGetFunction calls whose return was not asked for (cuda.bpf.c's kfunc_unread), in
 * all traced processes so far, and how many of those a launch's check found wanting. */
void tracer__kfunc_counts(const struct tracer *t, __u64 *unread, __u64 *rechecks);
/* Cumulative drop counters, added into d (the header is left to the caller). */
void tracer__drops(const struct tracer *t, struct gs_ev_drops *d);
/* Whether libraries opened after the start are noticed (needs tracefs). */
bool tracer__watches_libs(const struct tracer *t);

/* The Python walker's facts for a process (kernel_py.c), and their removal. */
int tracer__py_config(struct tracer *t, __u32 pid, const struct gs_py_cfg *c);
void tracer__py_forget(struct tracer *t, __u32 pid);
/* Python exceptions: uprobes on an interpreter file's _PyErr_SetObject (raise_off, its
 * file offset; 0: not probed) and _PyErr_Display (display_off; display_file: 0 if it is PyErr_Display,
 * without the file argument), for every process (its records come only for processes in
 * the walker's configuration). Once per file; an offset 0 is not probed. 0 or -errno. */
int tracer__py_exceptions(struct tracer *t, const char *path, __u64 raise_off, __u64 display_off,
			  bool display_file);
/* The kernel's counts of pid's raises (each key, its count), taken out of its map. */
void tracer__py_exc_counts(struct tracer *t, __u32 pid,
			   void (*fn)(void *ctx, const struct gs_pyexc_key *k, __u64 count),
			   void *ctx);

#endif
