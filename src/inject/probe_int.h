/* SPDX-License-Identifier: MIT */
/*
 * Device-side probes in the program (see probe.c for what they do): their state, and what
 * the three files share.
 *   probe_ctx.c   the state; contexts: the maps in device memory, the clock, ring buffers;
 *   probe_jit.c   a module instrumented in a context (rewrite, JIT), the snapshots;
 *   probe.c       the bundle read, kernels' handles, modules, and the launches routed;
 *   probe_host.c  the object's host programs, run at launches, and the maps they share.
 */
#ifndef GS_INJECT_PROBE_INT_H
#define GS_INJECT_PROBE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "core/util.h"
#include "inject/inject.h"
#include "ptx/bundle.h"
#include "ptx/rewrite.h"
#include "ptx/translate.h"

typedef int (*fn1)(__u64);
typedef int (*fn2)(__u64, __u64);
typedef int (*fn3)(__u64, __u64, __u64);
typedef int (*fn4)(__u64, __u64, __u64, __u64);
typedef int (*fn5)(__u64, __u64, __u64, __u64, __u64);

#ifndef GS_ARGS
#define GS_ARGS 11 /* (the wrappers' arguments, gpuscope/decode.h) */
#endif
#define HANDLES	      (1u << 16) /* the handle table's slots */
#define MAX_CTX	      16
#define MAX_NOTES     256
#define CALIB_ROUNDS  32
#define JIT_LOG_BYTES 8192
#define PR_PRINT_RING (256u << 10)

enum {
	CU_JIT_ERROR_LOG_BUFFER = 5,
	CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
};
enum {
	ATTR_MAX_THREADS = 0,
	ATTR_LOCAL_BYTES = 3,
	ATTR_NUM_REGS = 4,
	ATTR_MAX_DYN_SHARED = 8,
};
enum {
	DEV_SM_COUNT = 16,
	DEV_CC_MAJOR = 75,
	DEV_CC_MINOR = 76
};

struct pctx {
	__u64 ctx;
	int device;
	unsigned int sm;
	__u64 stream;
	__u64 dmaps[BUNDLE_MAX_MAPS];
	unsigned char desc[BUNDLE_MAX_MAPS * GS_MAP_DESC];
	/* The global timer - our clock, ns, at calib_at; and its drift (ns per ns) from the
	 * calibration before. */
	long long clock_off;
	__u64 calib_at;
	double drift;
	__u64 clock_mod, clock_fn, clock_d;
	volatile __u64 *clock_h;
	/* ring buffers: host memory the GPU writes (the consumer position, then the ring) */
	volatile __u64 *ring_h[BUNDLE_MAX_MAPS];
	bool clock_ok, dead, failed;
};

struct pmod {
	__u64 handle; /* CUmodule or CUlibrary */
	bool library;
	char *ptx;
	unsigned int ptx_arch;
	struct ptx_rewrite_stats st; /* laid out at the first rewrite (st.k set) */
	unsigned int kernel_base;    /* its kernels' ids from there */
	bool rewrite_failed;
	bool retarget_said; /* its PTX is for a newer device: said once */
	unsigned int index; /* in load order */
	struct pmod *next;
};

struct pfn { /* a kernel instrumented in a context */
	__u64 ctx, fn;
	__u64 module; /* its own, compiled by the JIT */
	int max_threads, smem_set;
	bool failed;
};

struct pkern {
	struct pmod *mod;
	char *name;
	int kidx; /* in mod->st.k, -1 until rewritten */
	_Atomic unsigned long long routed, fallback;
	_Atomic unsigned long long nodes,
		nodes_fallback; /* graph kernel nodes set (not launches) */
	struct pfn inst[MAX_CTX];
	int ninst;
	struct pkern *next; /* all of them */
};

struct probe_state {
	bool on;
	struct bundle b;
	const char *out_dir;
	pthread_mutex_t lock;
	struct pmod *mods;
	unsigned int nmods;
	struct pkern *kerns;
	struct pctx ctx[MAX_CTX];
	int nctx;
	unsigned int next_kernel_id;
	char *notes[MAX_NOTES];
	int nnotes;
	unsigned int notes_lost; /* not kept: out of memory */
	struct strbuf stats;
	_Atomic __u64 keys[HANDLES];
	struct pkern *_Atomic vals[HANDLES];
	_Atomic unsigned long long seq;
	pthread_t thread;
	bool thread_on, thread_tried, exit_hooked;
	unsigned int sass_only; /* modules loaded without PTX */
	_Atomic int stop;
	unsigned int interval_ms;
	unsigned int threads; /* per-thread arrays */
	/* host programs (probe_host.c): the shared maps' host memory, the printing ring
	 * (PR_PRINT_RING bytes, drained with the GPU's rings) */
	unsigned char *shared[BUNDLE_MAX_MAPS];
	unsigned char print_ctl[GS_RING_CTL] __attribute__((aligned(8)));
	unsigned char *print_ring;
	unsigned long long print_tail;
	bool print_dead;
	bool host_failed[BUNDLE_MAX_HOST];
	unsigned long long host_runs[BUNDLE_MAX_HOST];
};

/* The probes' state (probe_ctx.c); the lock guards all but the handle table. */
extern struct probe_state P GS_HIDDEN;

/* probe_ctx.c */
void *pr_real(const char *name) GS_HIDDEN;
/* A note, once (callers hold the lock). */
void pr_note(const char *fmt, ...) GS_HIDDEN __attribute__((format(printf, 1, 2)));
/* The compute capability of the current context's device (major * 10 + minor) and the
 * device (*dev), or 0 if the driver does not say. */
unsigned int pr_current_sm(int *dev) GS_HIDDEN;
int pr_push(__u64 ctx) GS_HIDDEN;
void pr_pop(void) GS_HIDDEN;
/* The context's state, set up at its first use (the lock held): NULL if it failed. */
struct pctx *pr_ctx_get(__u64 ctx) GS_HIDDEN;
/* The global timer's offset from our clock measured again (the context current): 0 or -1. */
int pr_calibrate(struct pctx *c) GS_HIDDEN;
/* The GPU's global timer now, on this process's clock. */
__u64 pr_gpu_time(const struct pctx *c) GS_HIDDEN;
/* What the ring buffers' probes wrote, into the process's ring (the lock held). */
void pr_drain_rings(void) GS_HIDDEN;

/* Shared map i's host memory (probe_host.c), registered with the current context: its
 * device address in *d (the lock held). 0, or -1. */
int pr_shared_map(size_t i, __u64 *d) GS_HIDDEN;

/* probe_host.c */
void pr_host_after_fork(void) GS_HIDDEN;
/* The host programs of `when` (enum bpfobj_host_run) for a launch call (its arguments a;
 * its result r, for uretprobe). */
void pr_host_run(int when, unsigned int api, const __u64 *a, int r) GS_HIDDEN;

/* probe_jit.c */
/* Kernel k instrumented in context ctx (the lock held): NULL, with a note, if it cannot be. */
struct pfn *pr_function_of(struct pkern *k, __u64 ctx) GS_HIDDEN;
/* The snapshot at exit, from the first module on (the lock held). */
void pr_hook_exit(void) GS_HIDDEN;
/* The thread that writes the snapshots every interval, once (the lock held). */
void pr_start_snapshots(void) GS_HIDDEN;

#endif
