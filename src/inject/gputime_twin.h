// SPDX-License-Identifier: MIT
/*
 * The twins of CUDA graphs, inside the in-process library: gputime_graph.c runs them in
 * the exec's place, gputime_graphbuild.c makes them, gputime_graphset.c follows the
 * program's sets of their kernel nodes and gputime_graphcal.c calibrates their event
 * nodes.
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

/* A child graph node of the graph (not of a child's): its kernels are the twin's
 * [k0, k1); what the program set it to at the exec last, cloned (pend), or a set not kept
 * (stale: the twin cannot run until a set is kept). */
struct tchild {
	void *node; /* the clone's */
	void *pend;
	int k0, k1;
	bool stale;
};

struct twin {
	struct twin *next;
	__u64 exec;
	void *graph;	       /* the clone; the twin's graph once built */
	void *twin_exec;       /* NULL until built */
	void *done;	       /* recorded after a run of the twin */
	void **ev;	       /* each kernel's own start and end events (made where used) */
	void **sev, **eev;     /* each kernel's start and end: its own, or its chain neighbour's */
	void **startn, **endn; /* the event nodes that record them (one allocation: sev's) */
	__u64 *func;
	void **knode;  /* the clone's kernel nodes, by kernel */
	void **kgraph; /* the graph each is a node of: the clone, or a child's graph */
	struct tchild *child;
	void *upd;	     /* what the program updated the exec from last, cloned (as a child) */
	bool upd_stale;	     /* an update not kept: no run until one is */
	__u64 (*byclone)[2]; /* the same, sorted, and each one's kernel */
	struct kset **pend;  /* each kernel's node as the program last set it, not applied */
	struct layout **lay; /* each kernel's parameters */
	int npend, nchild;
	__u64 launches, stream, twin_stream;
	unsigned long long flags;
	int state, nk, outstanding, ci;
	int nev;      /* event nodes of its own, a run (with nk kernels: nk + 1 to 2 nk) */
	int interval; /* a run every that many launches (gt_twin_interval) */
	bool *off;    /* kernels the program disabled (NULL: none yet), noff of them */
	int noff;
	unsigned int off_gen; /* changes of off */
	bool updated;	      /* an update of the exec applied to the twin */
	bool wait_done;
};

enum {
	TW_CLONED = 1, /* not built yet */
	TW_READY,
	TW_OFF
};

/* gputime_graphbuild.c, each under the twins' lock but the first two. The driver's graph
 * functions there (false: no twins); every how many launches of an exec at most a twin
 * runs; a twin of graph (instantiated with flags) not built yet, or NULL and why not;
 * freed (its events too); built; made what the program set the exec to since its last
 * run (false: cannot be; *ready false: not now); what the program set a kernel node, or a
 * child node (node), or the whole exec (node 0: cuGraphExecUpdate), to, kept for that,
 * or another node set by api (made on the twin, or its clone, at once) (false: cannot be
 * followed); the order wait of a launch after a twin's run on another
 * stream; after fork(). */
bool gt_twin_load(void) GS_HIDDEN;
int gt_twin_every(void) GS_HIDDEN;
int gt_twin_interval(const struct twin *t) GS_HIDDEN;
bool gt_twin_enabled(struct twin *t, __u64 node, bool on) GS_HIDDEN;
struct twin *gt_twin_new(__u64 graph, unsigned long long flags, const char **why) GS_HIDDEN;
void gt_twin_free(struct twin *t) GS_HIDDEN;
bool gt_twin_build(struct twin *t) GS_HIDDEN;
bool gt_twin_prepare(struct twin *t, bool *ready) GS_HIDDEN;
bool gt_twin_kernel_set(struct twin *t, __u64 node, const struct gs_cu_kernel_node *p) GS_HIDDEN;
bool gt_twin_graph_set(struct twin *t, __u64 node, __u64 graph) GS_HIDDEN;
bool gt_twin_node_set(struct twin *t, unsigned int api, __u64 node, __u64 params,
		      __u64 ctx) GS_HIDDEN;
void gt_twin_wait(__u64 stream, bool ptsz, void *event) GS_HIDDEN;
void gt_twin_forget(void) GS_HIDDEN;

/* gputime_graphset.c, each under the twins' lock. The clone's kernel nodes indexed (and
 * room for sets), false if not; what the program set the kernel node node (the clone's) to,
 * p, kept (false if it cannot be followed); the sets kept, applied to the built twin
 * before it runs (false if one failed); the sets kept dropped (an update of the whole exec
 * came after them); the sets' memory freed. */
bool gt_twin_index(struct twin *t) GS_HIDDEN;
bool gt_twin_keep_set(struct twin *t, void *node, const struct gs_cu_kernel_node *p) GS_HIDDEN;
bool gt_twin_apply_sets(struct twin *t) GS_HIDDEN;
void gt_twin_drop_sets(struct twin *t) GS_HIDDEN;
void gt_twin_free_sets(struct twin *t) GS_HIDDEN;
/* A record of the name of a node's kernel: a function, or (!is_function) a CUkernel. */
void gt_name_kernel(__u64 handle, bool is_function) GS_HIDDEN;

/* gputime_graphcal.c: what a twin's event nodes add, measured in the context of c. */
void gt_graph_calibrate(struct ctx_slot *c) GS_HIDDEN;
/* And the driver's functions for graphs of ours (calibration graphs, carriers), resolved at
 * the first call; each NULL where the driver has none. */
typedef int (*g_create_fn)(void **, unsigned int);
typedef int (*g_add_kernel_fn)(void **, void *, void **, size_t, const struct gs_cu_kernel_node *);
typedef int (*g_add_record_fn)(void **, void *, void **, size_t, void *);
typedef int (*g_inst_fn)(void **, void *, unsigned long long);
typedef int (*g_destroy_fn)(void *);
typedef int (*g_launch_fn)(void *, __u64);
typedef int (*g_upload_fn)(void *, __u64);
typedef int (*k_set_fn)(void *, void *, const struct gs_cu_kernel_node *);
struct gt_graph_fns {
	g_create_fn create;
	g_add_kernel_fn add_kernel;
	g_add_record_fn add_record;
	g_inst_fn instantiate;
	g_destroy_fn graph_destroy, exec_destroy, ev_destroy;
	g_upload_fn upload;
	g_launch_fn launch, launch_ptsz; /* (cuGraphLaunch's where no _ptsz) */
	k_set_fn set;			 /* cuGraphExecKernelNodeSetParams_v2 */
};
const struct gt_graph_fns *gt_graph_fns(void) GS_HIDDEN;

/* GPUSCOPE_INJECT_DEBUG: a step of building or keeping a twin that failed (the driver's
 * result r): false. */
bool gt_twin_fail(const char *step, int r) GS_HIDDEN;

#endif
