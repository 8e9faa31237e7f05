/* SPDX-License-Identifier: MIT */
/* The exporter's eBPF plane (cmd/exporter_trace.c). */
#ifndef GS_CMD_EXPORTER_H
#define GS_CMD_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/util.h"
#include "sink/prom_procs.h"

struct xtrace;

struct xtrace_opts {
	char *const *libs; /* more files to probe from the start */
	int nlibs;
	unsigned int top;	/* kernels named per process */
	double retain_s;	/* how long an exited process stays */
	bool ebpf;		/* kernel probes on the CUDA/NCCL libraries of every process */
	const char *inject_dir; /* the in-process plane's directory (inject__open_agent) */
};

/* The per-process planes. NULL if they cannot be had (a message was printed). */
struct xtrace *xtrace_open(const struct xtrace_opts *o);
/* Whether the kernel probes are on. */
bool xtrace_probes(const struct xtrace *x);
/* The in-process library programs preload, NULL without --inject-dir. */
const char *xtrace_library(const struct xtrace *x);
/* Deliver what the planes recorded (waiting up to 100 ms), and forget processes gone long
 * enough. */
void xtrace_poll(struct xtrace *x);
/* The gpuscope_* metrics of the planes (thread-safe against xtrace_poll). */
void xtrace_render(struct xtrace *x, struct strbuf *sb);
void xtrace_close(struct xtrace *x);

/* For gpuscope top: the processes seen, and a process's kernels by shown name (see
 * sink/prom_procs.h). */
size_t xtrace_procs(struct xtrace *x, struct xproc *out, size_t max);
size_t xtrace_kernels(struct xtrace *x, __u32 pid, struct xkernel **out);

#endif
