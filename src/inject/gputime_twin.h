// SPDX-License-Identifier: MIT
/*
 * The twins of CUDA graphs (gputime_graph.c), inside the in-process library: what the
 * files that follow the program's sets of a twin's kernel nodes (gputime_graphset.c) and
 * calibrate its event nodes (gputime_graphcal.c) share with it.
 */
#ifndef GPUSCOPE_INJECT_GPUTIME_TWIN_H
#define GPUSCOPE_INJECT_GPUTIME_TWIN_H

#include "inject/gputime_int.h"

/* struct CUDA_KERNEL_NODE_PARAMS_v2_st (CUDA 12's and 13's CUDA_KERNEL_NODE_PARAMS) */
struct gs_cu_kernel_node {
	__u64 func;
	__u32 grid[3], block[3], shared_mem;
	__u32 pad;
	__u64 params, extra, kern, ctx;
};

struct kset;
struct layout;

struct twin {
	struct twin *next;
	__u64 exec;
	void *graph;	 /* the clone; the twin's graph once built */
	void *twin_exec; /* NULL until built */
	void *done;	 /* recorded after a run of the twin */
	void **ev;	 /* each kernel's start and end */
	__u64 *func;
	void **knode;	     /* the clone's kernel nodes, by kernel */
	__u64 (*byclone)[2]; /* the same, sorted, and each one's kernel */
	struct kset **pend;  /* each kernel's node as the program last set it, not applied */
	struct layout **lay; /* each kernel's parameters */
	int npend;
	__u64 launches, stream, twin_stream;
	unsigned long long flags;
	int state, nk, outstanding, ci;
	bool wait_done;
};

/* gputime_graphset.c, each under the twins' lock. The clone's kernel nodes indexed (and
 * room for sets), false if not; what the program set the kernel node node (the clone's) to,
 * p, kept (false if it cannot be followed); the sets kept, applied to the built twin
 * before it runs (false if one failed); the sets' memory freed. */
bool gt_twin_index(struct twin *t) GS_HIDDEN;
bool gt_twin_keep_set(struct twin *t, void *node, const struct gs_cu_kernel_node *p) GS_HIDDEN;
bool gt_twin_apply_sets(struct twin *t) GS_HIDDEN;
void gt_twin_free_sets(struct twin *t) GS_HIDDEN;
/* A record of the name of a node's kernel: a function, or (!is_function) a CUkernel. */
void gt_name_kernel(__u64 handle, bool is_function) GS_HIDDEN;

/* gputime_graphcal.c: what a twin's event nodes add, measured in the context of c. */
void gt_graph_calibrate(struct ctx_slot *c) GS_HIDDEN;

/* GPUSCOPE_INJECT_DEBUG: a step of building or keeping a twin that failed (the driver's
 * result r): false. */
bool gt_twin_fail(const char *step, int r) GS_HIDDEN;

#endif
