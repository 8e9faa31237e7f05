/* SPDX-License-Identifier: MIT */
/* What steps.c keeps of a process and steps_find.c finds in it (see steps.h). */
#ifndef GS_ANALYSIS_STEPS_INT_H
#define GS_ANALYSIS_STEPS_INT_H

#include "analysis/steps.h"
#include "core/hmap.h"

struct launch {
	__u64 ts, func;
	__u32 tid, pad;
};

/* What a span of a step's time was, highest first: where several overlap, the step's time
 * there is the highest one's (steps.h). */
enum span_cls {
	C_GPU_NCCL,    /* an NCCL kernel ran (GPU timing) */
	C_GPU_COPY,    /* a copy or set ran on the GPU */
	C_GPU_COMPUTE, /* another kernel, or a graph, ran */
	C_NCCL_CALL,   /* the launching thread was in an NCCL call */
	C_COPY_CALL,   /* ... in a copy call */
	C_SYNC,	       /* ... waited for the GPU */
	C_RUNQ,	       /* ... was runnable, waiting for a CPU (woken, or preempted) */
	C_DATA,	       /* ... was blocked, or in a waiting system call, outside CUDA calls */
	C_NCLS,
};

struct span {
	__u64 start, end;
	__u32 tid; /* host spans: the thread's */
	__u32 cls; /* enum span_cls */
};

/* A growing array of n items of `size` bytes, at most STEPS_LAUNCHES. */
struct arr {
	void *v;
	size_t n, cap;
};

/* --step=FUNC: what a kernel's stacks said (flags). */
enum {
	IN_FUNC = 1,
	OUT_OF_FUNC = 2
};

struct sproc {
	__u32 pid;
	struct arr launches, gpu, host; /* struct launch, struct span, struct span */
	struct hmap func_in;		/* --step: kernel handle -> IN_FUNC | OUT_OF_FUNC */
	/* The agent's (steps__attach online): the steps seen as they end. */
	bool locked;		/* the loop is known: its anchor marks each step */
	__u64 anchor, last_ts;	/* its kernel, and the latest step's start */
	__u64 since_anchor;	/* launches since */
	size_t next_try;	/* not locked: look for the loop at this many launches */
	struct steps_hist hist; /* the steps ended */
};

/* The steps found in a process. */
struct found {
	__u32 pid;
	char anchor_name[256];
	__u64 anchor;
	struct rep_step *v;
	size_t n;
	bool gpu_timed;
};

/* The steps of p (into out: out->n 0 if none); func: --step's (NULL: none). */
void steps_find(const struct model *m, struct sproc *p, const char *func, struct found *out);

#endif
