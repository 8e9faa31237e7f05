/* SPDX-License-Identifier: MIT */
/*
 * libgpuscope-inject.so: the in-process plane. Preloaded into the traced program by
 * `gpuscope run --inject`, it stands between the program and the CUDA driver for every
 * caller -- symbols bound at load time, dlsym lookups, and the entry points cuGetProcAddress
 * hands out (cudart, cuBLAS, Triton and NCCL use that) -- and writes the same records as
 * the kernel probes into a shared-memory ring that gpuscope drains (src/source/inject.c).
 *
 * Files, each using only those above it:
 *   clock.c    the clock of every record, per-thread rates, measurements' sums of calls;
 *   ring.c     the process's ring, record emission, per-thread state;
 *   resolve.c  the real driver functions, and where a call came from;
 *   gate.c     (gate.h) what may be timed: no stream in capture;
 *   devcode.c  what a loaded module's image holds (GS_EV_DEVCODE);
 *   tritonptx.c the PTX Triton keeps beside a cubin it loads (its cache);
 *   pyframes.c Python frames of a stack, named (GS_EV_PYTHON, GS_EV_SYMBOL);
 *   stacks.c   call stacks by the unwinder;
 *   probe.c    device-side probes: eBPF programs run in instrumented kernels (with
 *              probe_ctx.c and probe_jit.c below it: probe_int.h);
 *   gputime.c  (gputime.h) GPU start and end times of launches and copies (with
 *              gputime_chain.c, gputime_harvest.c and gputime_ctx.c below it:
 *              gputime_int.h);
 *   wrap.c     the wrappers, generated from the API table;
 *   handout.c  dlsym and cuGetProcAddress answered with our wrappers;
 *   ab.c       measurements: modes switched inside one process (GPUSCOPE_AB_FILE);
 *   inject.c   activation (the constructor) and what a fork resets.
 */
#ifndef GS_INJECT_H
#define GS_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include "gpuscope/api.h"

#define GS_HIDDEN __attribute__((visibility("hidden")))
/*
 * What every wrapped call reads and almost never writes (the plane's switches, the ring's
 * and the clock's constants, the modes): all in one section, so a call finds it in one or
 * two cache lines, not in the twenty it was scattered over (each a miss once the program's
 * work between launches has evicted it: bench/launch_cold.c). Only for such variables:
 * anything written often here would be shared with every thread's reads.
 */
#define GS_HOT __attribute__((section("gs_hot")))
/*
 * The code a launch runs, likewise together: a launch touched 15 pages of ours, 9 of them
 * code (bench/launch_pages.sh), and on the GPU guests a page not in the TLB costs ~45 ns
 * (bench/guest_cpu.c; the H200 did not show a gain: cost-2026-11-30c.md). The linker's
 * default script puts .text.sorted.* at the start of .text in the order of their names
 * (wrap.c's empty .text.sorted.gs_hot_0 starts them on a page), and src/inject/hot.ld
 * puts gs_hot on a page of its own.
 */
#define GS_HOT_FN __attribute__((section(".text.sorted.gs_hot_1")))
/* (gs_call, the largest: after the others, so that the lines a launch runs of it follow
 * theirs and the path fills two pages, not three.) */
#define GS_HOT_FN_LAST __attribute__((section(".text.sorted.gs_hot_2")))

typedef int (*gs_fn)(__u64, __u64, __u64, __u64, __u64, __u64, __u64, __u64, __u64, __u64, __u64);

/* clock.c */
__u64 gs_clock(void) GS_HIDDEN;
void gs_clock_init(void) GS_HIDDEN;
/* A thread's budget of something a second (stacks taken, launches timed): whether one more
 * may be had at now, keeping to per_s a second on average with up to burst at once. *tat
 * (the thread's own, 0 at first) is when the next would come if they came evenly spaced. */
bool gs_rate_allows(__u64 *tat, __u64 now, __u32 per_s, __u32 burst) GS_HIDDEN;
/* The same with the rate as the ns between two (1e9 / per_s, worked out once). */
bool gs_gap_allows(__u64 *tat, __u64 now, __u64 gap, __u32 burst) GS_HIDDEN;
/* Measurements only (GPUSCOPE_AB_PHASES, with GPUSCOPE_AB_FILE): the time of parts of the
 * launches' calls by our clock, summed and counted per part, written with the mode they ran
 * in at each switch (bench/inject_ab.sh). */
enum gs_phase {
	GS_PH_TIMED,	/* a timed launch's wrapper, from entry to return */
	GS_PH_UNTIMED,	/* an untimed launch's */
	GS_PH_REAL,	/* the driver's launch call in a timed one */
	GS_PH_REAL_UNT, /* in an untimed one */
	GS_PH_BEGIN,	/* gs_timing_begin */
	GS_PH_END,	/* gs_timing_end */
	GS_PH_ASK,	/* its questions before a launch: the context, a capture */
	GS_PH_LOCK,	/* taking T.lock on the program's thread (waiting for it) */
	GS_PH_QUERY,	/* cuStreamQuery of a stream that looks busy */
	GS_PH_GATE,	/* the gate's cuStreamWaitValue */
	GS_PH_START_EV, /* the start event's cuEventRecord */
	GS_PH_END_EV,	/* the end event's */
	GS_PH_STACK,	/* gs_stack_maybe after a launch */
	GS_PH_EMIT,	/* a launch's record */
	GS_PH_HARVEST,	/* a pair's first cuEventElapsedTime (harvester, or after a sync) */
	GS_PH_LOCKED,	/* gs_timing_begin's work under T.lock */
	GS_PH_UNWIND,	/* a stack's native frames (backtrace), in GS_PH_STACK */
	GS_PH_PYWALK,	/* its Python frames, mixed in (gs_py_stack), in GS_PH_STACK */
	GS_PH_CLOCK,	/* taking C.lock (gputime_cupti.c) before and after a call queued */
	GS_PH_PAUSE,	/* entering and leaving the pause around a call queued (inbox) */
	GS_PH_PRIME,   /* gs_timing_begin's empty kernel launched before a gated one after a copy */
	GS_PH_FIRST,   /* its work for a kernel's first launch (loaded ahead, the gate watched) */
	GS_PH_AFTER,   /* its start event put after all before (start_after_all: T.lock again) */
	GS_PH_CTX,     /* its context's slot found (made and calibrated at the context's first) */
	GS_PH_PYBEGIN, /* in GS_PH_PYWALK: the walk begun, the last one's pages read again */
	GS_PH_STACKREC, /* in GS_PH_STACK: a stack's record written */
	GS_PH_N
};
extern bool gs_phases_on GS_HIDDEN; /* (set by ab.c) */
void gs_phase_sum(enum gs_phase ph, __u64 t0) GS_HIDDEN;
/* A part's count and ns since the last take (ab.c, at a switch). */
void gs_phase_take(enum gs_phase ph, __u64 *n, __u64 *ns) GS_HIDDEN;
/* The start of a part (0 when not measuring: gs_phase_add then adds nothing). */
static inline __u64 gs_phase_t0(void)
{
	return __builtin_expect(gs_phases_on, 0) ? gs_clock() : 0;
}
/* The part that began at t0 has ended (inline: not measuring costs a test, not a call). */
static inline void gs_phase_add(enum gs_phase ph, __u64 t0)
{
	if (__builtin_expect(t0 != 0, 0))
		gs_phase_sum(ph, t0);
}

/* ring.c */
/* Whether the agent holds its lock on DIR/agent.lock (it runs). */
bool gs_agent_locked(const char *dir) GS_HIDDEN;
extern bool gs_active;	    /* a gpuscope session is there to read what we write */
extern bool gs_ab_norecord; /* measurements (ab.c): every record given up before the ring */
/* (ab.c: the ring's producer prefetch at a record, shmring.c, and at a launch's start) */
void gs_ab_prefetch(bool on, bool warm) GS_HIDDEN;
/* Before a launch's call: its record's lines asked for (ring.c). */
void gs_ring_warm(void) GS_HIDDEN;
/* How deep this thread is in our wrappers (wrap.c keeps it). */
extern __thread int gs_depth __attribute__((tls_model("initial-exec")));
/* Whether this thread is inside a wrapper called from inside another (a signal handler). */
bool gs_nested(void) GS_HIDDEN;
/* The ring to make at the first record: in dir (the agent's: named with a random part). */
void gs_ring_init(const char *dir, bool agent, __u64 ring_bytes) GS_HIDDEN;
void gs_ring_after_fork(void) GS_HIDDEN;
/* A thread of ours, detached, that no signal of the program is delivered to: true if it
 * started. */
bool gs_thread(void *(*fn)(void *)) GS_HIDDEN;
/* Records: reserve in this process's ring (NULL if full or inactive), then commit. */
void *gs_emit_reserve(__u32 size, __u16 type) GS_HIDDEN;
void gs_emit_commit(void *rec) GS_HIDDEN;
void gs_fill_hdr(struct gs_hdr *h, __u16 type, __u32 size, __u64 ts) GS_HIDDEN;
/* A kernel's name: handle (in the driver's name space, of scope) -> name, by api. */
void gs_emit_kname(__u64 handle, __u64 scope, const char *name, unsigned int api,
		   __u64 ts) GS_HIDDEN;
/* The calling thread's id (cached; forgotten in a forked child). */
__u32 gs_self_tid(void) GS_HIDDEN;
/* Make the ring now if there is none yet (before the first call reaches the driver). */
void gs_ring_prepare(void) GS_HIDDEN;
/* Counters in the ring's header. */
void gs_count_unwrapped(void) GS_HIDDEN;
void gs_count_gate_forced(void) GS_HIDDEN;
void gs_count_time_capped(void) GS_HIDDEN;
void gs_count_time_lost(void) GS_HIDDEN;

/* resolve.c */
/* The real driver function behind an API of the table (resolved on first use; GS_HOT). */
extern void *gs_real_fn[GS_API_MAX] GS_HIDDEN;
/* The API table's descriptors (gs_api_descs) again, in GS_HOT's page: read at every call. */
extern struct gs_api_desc gs_descs[GS_API_MAX] GS_HIDDEN;
gs_fn gs_real_find(unsigned int api) GS_HIDDEN;
static inline gs_fn gs_real(unsigned int api)
{
	void *p = __atomic_load_n(&gs_real_fn[api], __ATOMIC_ACQUIRE);

	return p ? (gs_fn)p : gs_real_find(api);
}
/* What dlsym or cuGetProcAddress returned for it (replace: even if one is known). */
void gs_real_learn(unsigned int api, void *p, bool replace) GS_HIDDEN;
/* Any other libcuda function, by name (NULL while libcuda is not loaded). */
void *gs_real_by_name(const char *name) GS_HIDDEN;
/* glibc's dlsym (not ours), and libcuda's handle once it is loaded (else NULL). */
void *gs_real_sym(void *handle, const char *name) GS_HIDDEN;
void *gs_libcuda(void) GS_HIDDEN;
void gs_resolve_init(void) GS_HIDDEN;
/*
 * Whether another copy of this library was loaded before this one (preloaded, and also
 * dlopen'ed by path; or a gpuscope run inside another). Then this copy stays inactive and
 * passes every call on to the other's entry points: recorded once, into one ring (two
 * copies would each make the process's ring, the second replacing the first).
 */
bool gs_resolve_other_copy(void) GS_HIDDEN;
/* Whether two entry points are variants of one function (cuLaunchKernel, _ptsz). */
bool gs_same_function(unsigned int a, unsigned int b) GS_HIDDEN;
/* Whether a call into a wrapper comes from libcuda's own code. */
bool gs_called_from_driver(void *caller) GS_HIDDEN;
/* The return address is in our own library (a wrapper's call of the real function). */
bool gs_called_from_self(void *caller) GS_HIDDEN;

/* devcode.c */
/* After a successful module or library load: what the image held. handle_ptr: where the
 * call wrote the CUmodule/CUlibrary; image: what it was given. */
void gs_devcode_loaded(unsigned int api, __u64 handle_ptr, __u64 image, __u64 ts) GS_HIDDEN;
/* A device code file's bytes (cuModuleLoad, cuLibraryLoadFromFile: path, a NUL-terminated
 * name in this process), NUL-terminated: malloc'ed, or NULL. */
void *gs_devcode_read_file(__u64 path) GS_HIDDEN;
/* The PTX of an image suited to a device of compute capability sm (major * 10 + minor: the
 * newest it can run, else the oldest; 0: the newest), whole: malloc'ed, or NULL with why.
 * A cubin's PTX may come from Triton's cache: then why says where from (else, on success,
 * why is empty). */
char *gs_devcode_ptx(__u64 image, unsigned int sm, unsigned int *arch, char *why,
		     size_t whylen) GS_HIDDEN;

/* tritonptx.c: the PTX beside a cubin of n bytes equal to img in Triton's cache, whole:
 * malloc'ed, its directory in where; or NULL (where says why if the cache was refused). */
char *gs_triton_ptx(const unsigned char *img, size_t n, char *where, size_t wn) GS_HIDDEN;

/* pyframes.c: a stack's native frames (innermost first) with the interpreter's own replaced
 * by the Python frames they ran, into out (at most max); the count. A thread with no
 * Python state takes the frames of the Python thread whose launch (launch: this is one)
 * showed its own last. */
int gs_py_stack(void *const *native, int n, bool launch, __u64 *out, int max) GS_HIDDEN;
void gs_py_after_fork(void) GS_HIDDEN;
/* (ab.c's "+pylist": a borrowed stack's thread found in the interpreter's list each time, the
 * C frame read by a call, and no walk begun by the last one's windows, as before) */
extern bool gs_py_uncached GS_HIDDEN;
/* unwind.c: this thread's return addresses from its caller's on (at most max), as glibc's
 * backtrace() gives them less its first (gs_unwind's own); the count. */
int gs_unwind(void **out, int max) GS_HIDDEN;
void gs_unwind_init(void) GS_HIDDEN;
/* Whether [addr, addr + n) lies in this thread's stack between sp (in it) and its top. */
bool gs_own_stack(__u64 sp, __u64 addr, size_t n) GS_HIDDEN;
/* (GPUSCOPE_INJECT_DEBUG) stacks by the kept rules, by backtrace(), rules worked out. */
void gs_unwind_counts(__u64 *rules, __u64 *libgcc, __u64 *worked_out, __u64 *from_memo) GS_HIDDEN;
extern bool gs_unwind_libgcc GS_HIDDEN; /* (ab.c's "+libgcc") */
/* (ab.c's "+nomemo": no thread's memo of its last stacks, the unwinder's rules or the Python
 * frames named, is used) */
extern bool gs_memo_off GS_HIDDEN;
/* stacks.c: call stacks (GS_EV_STACK), by the unwinder: "0" none, else every Nth launch. */
/* GPUSCOPE_STACKS (a stack every Nth launch) and GPUSCOPE_STACK_RATE (at most that many
 * launches' stacks a second a thread; no limit if unset). */
void gs_stacks_init(const char *every, const char *per_s) GS_HIDDEN;
/* Measurements (ab.c): a stack every nth launch, at most per_s a second, from now on; the
 * start's. */
void gs_stacks_set(__u32 every, __u32 per_s) GS_HIDDEN;
extern struct gs_stacks_start {
	__u32 every, rate;
} gs_stacks_start GS_HIDDEN;
/* After a call returned: its stack if it is one to take (failed, an allocation, a sampled
 * launch). ts: the call's entry time, as its record's. */
void gs_stack_maybe(unsigned int api, __u64 ts, int result, __u64 arg) GS_HIDDEN;
/* In a forked child: the forking thread's counts are the parent's. */
void gs_stacks_after_fork(void) GS_HIDDEN;
void gs_wrap_after_fork(void) GS_HIDDEN; /* (each thread's recorded aliases new again) */

/* probe.c, probe_jit.c: device-side probes (GPUSCOPE_PROBE). */
extern bool gs_probe_on GS_HIDDEN;
#define GS_PROBE_SMALL 64
struct gs_probe_launch { /* what a routed launch needs until it returns */
	bool routed;
	bool node_call; /* a graph's kernel node set, not a launch */
	struct pkern *k;
	__u64 ctx;
	void **params;
	unsigned char *buf;
	size_t bytes;
	void *extra[5];
	__u64 val[2];	       /* __gs_launch: sequence number, launch time on the GPU's timer */
	unsigned int host_api; /* a launch call with host programs to run after it */
	const __u64 *host_args;
	void *small[GS_PROBE_SMALL];
	unsigned char node[256] __attribute__((aligned(8))); /* kernel node parameters */
};
void gs_probe_init(void) GS_HIDDEN;
void gs_probe_after_fork(void) GS_HIDDEN;
void gs_probe_loaded(unsigned int api, __u64 handle_ptr, __u64 image) GS_HIDDEN;
void gs_probe_unloaded(__u64 handle) GS_HIDDEN;
void gs_probe_named(unsigned int api, const __u64 *a) GS_HIDDEN;
void gs_probe_ctx_destroy(__u64 ctx) GS_HIDDEN;
/* Whether api is a graph call that takes kernel node parameters (routed as launches). */
bool gs_probe_graph_call(unsigned int api) GS_HIDDEN;
/* Before a launch, or a graph call that sets a kernel node's parameters: b = a, or a routed
 * to the instrumented kernel (true). */
bool gs_probe_launch(unsigned int api, const __u64 *a, __u64 *b,
		     struct gs_probe_launch *pl) GS_HIDDEN;
/* After it: true if the driver refused the routed launch (then launch a, the original). */
bool gs_probe_launched(struct gs_probe_launch *pl, int r) GS_HIDDEN;
/* And when the launch is made: the host programs run after it (uretprobe). */
void gs_probe_returned(struct gs_probe_launch *pl, int r) GS_HIDDEN;

/* wrap.c */
extern void *const gs_wrappers[GS_API_MAX] GS_HIDDEN;
int gs_call(unsigned int api, void *caller, __u64 a0, __u64 a1, __u64 a2, __u64 a3, __u64 a4,
	    __u64 a5, __u64 a6, __u64 a7, __u64 a8, __u64 a9, __u64 a10) GS_HIDDEN;

/* handout.c */
/* The wrapper for a real driver function pointer, or the pointer itself if unknown. */
void *gs_wrap_pointer(void *real) GS_HIDDEN;

/* ab.c */
/* With GPUSCOPE_AB_FILE: the thread that switches modes as the file says. */
void gs_ab_init(void) GS_HIDDEN;

#endif
