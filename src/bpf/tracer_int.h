/* SPDX-License-Identifier: MIT */
/*
 * The tracer's parts (see tracer.h):
 *   tracer.c         the BPF objects loaded and attached, the ring buffer, the end;
 *   tracer_attach.c  uprobes placed on a file's functions, for all or for tracked
 *                    processes (multi-uprobe links where the kernel has them), and removed.
 * Layered: tracer.c uses tracer_attach.c.
 */
#ifndef GS_BPF_TRACER_INT_H
#define GS_BPF_TRACER_INT_H

#include <limits.h>
#include <stdbool.h>

#include "bpf/tracer.h"
#include "core/elfsym.h"
#include "core/hmap.h"

struct tfile {
	char path[PATH_MAX];
	__u64 dev, ino;
	struct elf_apis apis;
};

/* A multi-uprobe link (an fd) or a perf-event uprobe (a libbpf link). */
struct plink {
	int fd;
	struct bpf_link *link;
};

struct linkset {
	size_t n, cap;
	struct plink *v;
};

/* The programs a file's functions go to: entries, then returns by family. */
enum {
	PG_CUDA_ENTER,
	PG_NCCL_ENTER,
	PG_LAUNCH,
	PG_KNAME,
	PG_MEM,
	PG_COPY,
	PG_SYNC,
	PG_API,
	PG_NCCL,
	PG_LAUNCH_SESSION, /* launches, entry and return, where the kernel has uprobe sessions */
	PG_KFUNC_SESSION,  /* cuKernelGetFunction, the same */
	PG_SET_SESSION,	   /* asynchronous 1-D sets, the same */
	PG_COUNT
};

/* Key of the links of a file placed for every process. */
#define ALL_PIDS 0xffffffffU

struct tracer {
	struct tracer_opts opts;
	struct cuda_bpf *cuda;
	struct nccl_bpf *nccl;
	struct proc_bpf *proc;
	struct os_bpf *os; /* NULL: no OS plane */
	struct bpf_program *prog[PG_COUNT];
	struct ring_buffer *rb;
	struct tfile *files;
	size_t nfiles;
	struct hmap pids;  /* pid -> (void *)1 */
	struct hmap links; /* (file index, pid) -> struct linkset */
	__u64 nlinks;
	bool watch_libs;
	bool multi;   /* the kernel has uprobe_multi links with process filtering */
	bool session; /* launches and cuKernelGetFunction go to uprobe session programs */
	/* The traced set's generation (common.bpf.h), mapped: bumped when a process leaves
	 * it, what threads keep of it is then stale. */
	__u64 *tracked_gen;
	__u64 wake_bytes; /* the BPF objects' wake_bytes (common.bpf.h) */
};

/* Multi-uprobe links: their attach type (see tracer_attach.c). */
#define GS_TRACE_UPROBE_MULTI	 48
#define GS_TRACE_UPROBE_SESSION	 57
#define GS_F_UPROBE_MULTI_RETURN 1U

/* Whether program group g is a uprobe session program (entry and return in one). */
static inline bool tr_is_session(int g)
{
	return g == PG_LAUNCH_SESSION || g == PG_KFUNC_SESSION || g == PG_SET_SESSION;
}

/* tracer_attach.c */
/* Whether the kernel has multi-uprobe links with process filtering. */
bool tr_have_uprobe_multi(void);
/* Whether it also has uprobe sessions, with the session functions cuda.bpf.c calls. */
bool tr_have_uprobe_session(void);
/* Detach links, many at once. */
void tr_destroy_links(struct plink *v, size_t n);

#endif
