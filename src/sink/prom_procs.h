/* SPDX-License-Identifier: MIT */
/*
 * The agent's per-process metrics (gpuscope_*), rendered from the model's queries and the
 * memory analyses' results; and what `gpuscope top` shows of the same. Series are bounded:
 * labels are a process (pid, comm) of the node, a kernel's shortened name (the `top` most
 * launched of each process, the rest as "other"), a GPU, a call, an operation.
 */
#ifndef GS_SINK_PROM_PROCS_H
#define GS_SINK_PROM_PROCS_H

#include "analysis/analyses.h"
#include "core/util.h"

struct prom_procs_in {
	const struct analyses *a;
	unsigned int top;	/* kernels named per process */
	bool inject;		/* the in-process plane is read */
	__u64 ninjected, files; /* processes read in-process, library files probed */
	struct gs_ev_drops drops;
};

/* The families; the caller holds what guards the model. */
void prom_procs__render(struct strbuf *sb, const struct prom_procs_in *in);

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
	__u64 gpu_count, gpu_ns; /* launches timed on the GPU, and their time */
};

size_t prom_procs__procs(const struct model *m, struct xproc *out, size_t max);
size_t prom_procs__kernels(const struct model *m, __u32 pid, struct xkernel **out);

#endif
