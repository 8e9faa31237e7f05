/* SPDX-License-Identifier: MIT */
/* The exporter's eBPF plane (cmd/exporter_trace.c). */
#ifndef GS_CMD_EXPORTER_H
#define GS_CMD_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/util.h"

struct xtrace;

/* Probe the CUDA/NCCL libraries of every process (libs: more files to probe from the
 * start). NULL if the eBPF planes cannot be loaded (a message was printed). */
struct xtrace *xtrace_open(char *const *libs, int nlibs, unsigned int top_kernels, double retain_s);
/* Deliver the kernel's records (up to timeout_ms), and forget processes gone long enough. */
void xtrace_poll(struct xtrace *x, int timeout_ms);
/* The gpuscope_* metrics of the planes (thread-safe against xtrace_poll). */
void xtrace_render(struct xtrace *x, struct strbuf *sb);
void xtrace_close(struct xtrace *x);

/* For gpuscope top: the processes seen, and a process's kernels by shown name, most
 * launched first (*out: to free). */
struct xproc {
	__u32 pid;
	char comm[16];
	bool exited;
	__u64 launches, copy_bytes, sync_ns;
	__u64 mem, peak; /* device memory, all GPUs */
};

struct xkernel {
	char name[96];
	__u64 launches, call_ns;
};

size_t xtrace_procs(struct xtrace *x, struct xproc *out, size_t max);
size_t xtrace_kernels(struct xtrace *x, __u32 pid, struct xkernel **out);

#endif
