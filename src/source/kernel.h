/* SPDX-License-Identifier: MIT */
/*
 * The kernel's eBPF plane as a source of the session (the loader is bpf/tracer.c): uprobes
 * on the CUDA and NCCL libraries, the process and OS tracepoints, one ring buffer. It also
 * acts on what it delivers: a child forked is traced, a program exec'ed is probed for a
 * statically linked runtime, a library a process opens is probed, and each file probed is
 * an attach record in the stream; a kernel name the kernel could not read (its page was
 * not resident) is read from the process before the record goes on.
 */
#ifndef GS_SOURCE_KERNEL_H
#define GS_SOURCE_KERNEL_H

#include <stdbool.h>
#include "bpf/tracer.h"
#include "core/session.h"

struct kernel_source;

struct kernel_source_opts {
	struct tracer_opts tracer; /* (its on_event is the source's own) */
	bool no_cuda;		   /* not libcuda: the in-process plane has its calls */
	bool executables;	   /* probe programs exec'ed, and named by probe_command */
	bool attach_records;	   /* each file probed: an attach record in the stream */
	bool py_raises;		   /* Python raises counted too (kernel_py.h), not only uncaught */
};

/* Load and start it, as a source of s. 0, or -errno (a message was printed). */
int kernel_source__open(struct session *s, const struct kernel_source_opts *o,
			struct kernel_source **out);
/* Act on the control records (forks, execs, libraries opened) from here on: subscribed
 * after the session's consumers, so that an attach record comes after what caused it. */
void kernel_source__control(struct kernel_source *k);
int kernel_source__track(struct kernel_source *k, __u32 pid);
/* Probe a library or program file (late: probed after the process had it loaded). */
void kernel_source__add_file(struct kernel_source *k, __u32 pid, const char *path,
			     unsigned int kind, bool use_symtab, bool late);
/* The CUDA libraries a command will load, and the command itself. */
void kernel_source__probe_command(struct kernel_source *k, const char *exe);
/* The CUDA and NCCL libraries (and program) a running process has mapped. 0 or -errno. */
int kernel_source__probe_mapped(struct kernel_source *k, __u32 pid);
/* Its loss counters, added into d (thread-safe: counters the kernel keeps). */
void kernel_source__drops(const struct kernel_source *k, struct gs_ev_drops *d);
/* Files with probes on them. */
__u64 kernel_source__files(const struct kernel_source *k);
bool kernel_source__watches_libs(const struct kernel_source *k);

#endif
