/* SPDX-License-Identifier: MIT */
/*
 * The trace model: what the event stream says, per process, stream and allocation. It is
 * fed by the stream (model__add, a consumer) and read through the queries below, which hand
 * out plain values (analysis/results.h), never its state. One model is fed the same way live
 * and from a recording, which is why a replayed recording gives the same report.
 *
 * What it keeps per process: kernel names (handles are process-local) and launch
 * statistics per kernel handle; an allocation model (linear allocations and VMM mappings as
 * address ranges in a balanced tree, so that any pointer can be classified as device or
 * host memory; VMM physical handles; address reservations; the context current to each
 * thread); stream captures turned into graphs; GPU times per stream and device; the OS
 * plane's aggregates; call stacks and the names of their addresses; the device code it
 * loaded. A process retired (core/stream.h) is folded into what the end of the session
 * needs (its summary, its kernels by name, its stacks by name) and the rest is freed.
 *
 * Analyses (analysis/findings.c, memsites.c) observe it: the model tells them what only it
 * can see (an allocation made or freed, a stream that went idle) through the callbacks of
 * struct model_observer, and they keep their own state.
 */
#ifndef GS_ANALYSIS_MODEL_H
#define GS_ANALYSIS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include "analysis/results.h"

struct model;

struct model *model__new(void);
void model__free(struct model *m);
/* Feed one validated record (a consumer of the stream). */
void model__add(struct model *m, const struct gs_hdr *ev);
/* A process retired: fold what the end needs, free the rest (a retire callback). */
void model__retire(struct model *m, __u32 pid);
/* Drop all of a process (gone a while: a long-running agent must not grow). */
void model__forget_proc(struct model *m, __u32 pid);

/* ---- what analyses are told ---------------------------------------------------------------- */

struct model_observer {
	/* A range became live (an allocation, or a VMM mapping), or went (ts). */
	void (*alloc)(void *ctx, const struct model_alloc *a, const struct gs_ev_mem *e);
	void (*free)(void *ctx, const struct model_alloc *a, __u64 ts);
	/* VMM physical memory made (e) and gone (its size, at ts). */
	void (*vmm_create)(void *ctx, const struct gs_ev_mem *e);
	void (*vmm_free)(void *ctx, __u32 pid, __u64 handle, __u64 size, __u64 ts);
	/* An allocation that failed, on a device (-1: not known). */
	void (*failed)(void *ctx, const struct gs_ev_mem *e, int device);
	/* A call, launch or GPU record of a process (its records, as time goes); force: its
	 * last (the process exited). */
	void (*tick)(void *ctx, __u32 pid, __u64 ts, bool force);
	/* A stack record, counted (e: the model's entry for that stack, as long as it lives). */
	void (*stack)(void *ctx, const struct gs_hdr *h, const struct stack_entry *e);
	/* A stream idle from gap_start until e's work started. */
	void (*gap)(void *ctx, const struct gs_ev_gpu *e, __u64 gap_start, __u64 start);
	/* A kernel that waited [ready, start) on the GPU with its stream free; key: its stream
	 * (model__stream_key); prev_call: the call of the stream's previous work; recent: the
	 * device's latest operations before it (n of them, in no order). */
	void (*queue_wait)(void *ctx, const struct gs_ev_gpu *e, __u64 key, __u64 prev_call,
			   __u64 ready, __u64 start, const struct gpu_op *recent, unsigned int n);
	/* A GPU record counted in the GPU figures (a kernel's, a graph's, a copy's or a
	 * set's: e->kind), and the duration they took from it. */
	void (*gpu)(void *ctx, const struct gs_ev_gpu *e, __u64 dur);
	/* A process is about to be folded and freed: its state is still there. */
	void (*retire)(void *ctx, __u32 pid);
	/* A process is about to be dropped altogether (model__forget_proc). */
	void (*forget)(void *ctx, __u32 pid);
};

/* Tell an observer (at most four; before the first record). */
void model__observe(struct model *m, const struct model_observer *o, void *ctx);

/* ---- the session ---------------------------------------------------------------------------- */

/* Keep every allocation's history (the memory map): set before the first record. */
void model__keep_history(struct model *m, bool keep);
bool model__keeps_history(const struct model *m);
/* The session's start and end records, NULL if none came (NULL-safe). */
const struct gs_ev_session *model__start(const struct model *m);
const struct gs_ev_session *model__end(const struct model *m);
/* Whether the session's end record is in (NULL-safe: no). */
bool model__ended(const struct model *m);
/* Whether the OS plane was on (the session's start says so). */
bool model__os_plane(const struct model *m);
/* Library and program files probed (attach records). */
size_t model__libraries(const struct model *m);
void model__counters(const struct model *m, struct model_counters *c);

/* Host facts, as recorded at the start: the machine (NULL: no host record), a GPU's
 * identity by its NVML index (NULL: none), a block device's name (NULL: none). */
const struct gs_ev_host *model__host(const struct model *m);
const struct gs_ev_gpu_info *model__gpu_info(const struct model *m, int gpu);
const char *model__blockdev_name(const struct model *m, __u32 dev);

/* ---- processes ------------------------------------------------------------------------------ */

/* A process the records named: true and *out filled, false if none did. */
bool model__process(const struct model *m, __u32 pid, struct model_proc *out);
/* Every process, in no order. */
void model__each_process(const struct model *m, void (*fn)(void *ctx, const struct model_proc *p),
			 void *ctx);
/* The command name of a process ("" if not known), valid while the model is. */
const char *model__comm(const struct model *m, __u32 pid);
/* Whether the stream has retired it: every record of it is in, what it held folded. */
bool model__retired(const struct model *m, __u32 pid);
/* Whether its exit is in. */
bool model__exited(const struct model *m, __u32 pid);
/* Its command line (NULL if not recorded), interned: valid while the model is, and another
 * pointer once it changes. */
const char *model__cmdline(const struct model *m, __u32 pid);
/* Name a process whose name no record gave (the agent reads it from /proc), and whether
 * it is seen from its start. */
void model__set_comm(struct model *m, __u32 pid, const char *comm);
void model__set_complete(struct model *m, __u32 pid, bool complete);

/* ---- kernels --------------------------------------------------------------------------------- */

/* Mangled name of a launched handle, following aliases; NULL if never seen. */
const char *model__kernel_name(const struct model *m, __u32 pid, __u64 handle);
/* Every kernel handle of a process that launched (pid 0: of every process). */
void model__each_kernel(const struct model *m, __u32 pid,
			void (*fn)(void *ctx, const struct model_kernel *k), void *ctx);
/* Whether a stream of a process is being captured into a graph now. */
bool model__capturing(const struct model *m, __u32 pid, __u64 stream);
/* A stream as streams are told apart (the legacy default stream under one name; each
 * thread's per-thread default stream its own). */
__u64 model__stream_key(__u64 stream, __u32 tid, __u16 api);

/* ---- memory ---------------------------------------------------------------------------------- */

/* The slot of a device in the per-device arrays (the last for an unknown one). */
int model__mem_slot(int device);
/* What a pointer is, in a process: MK_DEVICE, MK_MANAGED, MK_HOST, or -1 unknown. */
int model__classify(const struct model *m, __u32 pid, __u64 addr);
/* A copy's direction: as the API said, or for unified-addressing copies from the pointers. */
unsigned int model__copy_direction(const struct model *m, __u32 pid, unsigned int kind,
				   __u64 dst_addr, __u64 src_addr);
/* Every live range of a process, in address order. */
void model__each_alloc(const struct model *m, __u32 pid,
		       void (*fn)(void *ctx, const struct model_alloc *a), void *ctx);
/* NVML's latest memory reading of a GPU: false if none. */
bool model__nvml_memory(const struct model *m, int gpu, __u64 *used, __u64 *total);

/* ---- copies, synchronisation, NCCL, errors, OS ------------------------------------------------ */

void model__copies(const struct model *m, struct copy_stat out[GS_COPY_KIND_MAX]);
const struct sync_stat *model__sync(const struct model *m, unsigned int api);
const struct nccl_stat *model__nccl(const struct model *m, unsigned int op);
void model__each_error(const struct model *m, void (*fn)(void *ctx, const struct err_stat *e),
		       void *ctx);
/* NET_TCP, NET_UDP or NET_OTHER of a record's protocol. */
int model__net_proto(unsigned int family, unsigned int protocol);

/* ---- stacks ------------------------------------------------------------------------------------ */

/* The name of a code address: its symbol record's, else NULL. */
const char *model__symbol(const struct model *m, __u32 pid, __u64 addr);

/* A distinct call stack, its frames named (what --folded writes). */
struct model_stack {
	const char *comm; /* its process's command */
	__u16 api;
	const char *kernel; /* a launch's kernel (mangled), NULL */
	unsigned int nframes;
	const char *const *frames; /* innermost first; NULL: an address without a name */
	__u64 count;
};

/* Every distinct stack of every process (those of retired processes merged by their
 * names), valid during the callback. */
void model__each_stack(const struct model *m, void (*fn)(void *ctx, const struct model_stack *s),
		       void *ctx);

#endif
