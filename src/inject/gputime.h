/* SPDX-License-Identifier: MIT */
/*
 * GPU start and end times of launches and asynchronous copies, from a pair of CUDA events
 * recorded around the call on the same stream. A harvester thread reads finished pairs
 * with the real driver functions (never through our wrappers), converts them to the host
 * clock and writes GS_EV_GPU records.
 *
 * Host clock: per context, a reference event is recorded on a stream of our own and
 * polled to completion while the host clock is read around it; the narrowest of a few
 * tries gives the reference's host time. References are renewed every second, and each
 * event is placed relative to the latest reference before its call: elapsed times come
 * back as float milliseconds, precise only over short spans, and the GPU and host clocks
 * drift apart slowly.
 *
 * Never in the way: a stream being captured into a graph is not timed (an event recorded
 * there would become part of the graph); a pool of events caps what timing can hold; every
 * failure only means the call goes untimed.
 */
#ifndef GS_INJECT_GPUTIME_H
#define GS_INJECT_GPUTIME_H

#include <stdbool.h>
#include "inject/gate.h"
#include "inject/inject.h"

/* What the GPU record says of the call besides its times. */
struct gs_timed_call {
	__u64 call_ts, call_end, func, bytes, dst, src;
	__u32 copy_kind;
	__u16 api;
	__u8 kind;
};

/* A call timed, waiting for the harvester (internal to gputime*.c; here for struct
 * gs_timing). */
struct pending {
	void *start, *end; /* start: the end event of the launch before, chained or followed */
	struct gs_timed_call c;
	__u64 stream;
	__u64 end_late; /* ungated, its end event recorded late: when that call returned */
	__u32 tid;
	__u32 cell; /* in a chain: its cell of T.chain_open_ns (0: none) */
	__u8 ci;
	bool gated, forced;
	bool end_shared; /* its end event is the next one's start: that one gives it back */
	__u16 carrier;	 /* run by carrier carrier - 1 of its context, its events (0: none) */
	/* A carriable launch's kernel and shape (gputime_carry.c: its carried runs corrected
	 * by its gated pairs' readings), 0: none. */
	__u64 key;
	bool from_prev; /* its start is the end event of the launch before it */
	/* A kernel node's pair of a graph's twin (gputime_graph.c): the twin's events, and its
	 * count of pairs not read yet, which reading this one takes one off. */
	int *twin;
};

struct gs_timing {
	void *ctx;
	void *start; /* CUevent recorded before the call; NULL: the call is not timed */
	void *end;   /* CUevent to record after it */
	__u64 gate;  /* the gate closed before the start event (gate.h), 0 if none */
	__u64 stream;
	int ci;	      /* context slot */
	bool ptsz;    /* per-thread default stream semantics for a NULL stream */
	bool chained; /* start: the end event of the launch before, behind the same gate */
	bool follows; /* start: the end event of the launch before, on a busy stream */
	bool kernel;  /* a kernel's launch, not its first: it may begin a chain, or be followed */
	int carrier;  /* run by carrier carrier - 1 (gputime_carry.c: start and end are its
		       * events), 0: not */
	__u64 key;    /* carriers on, a plain launch: its kernel and shape (0: not) */
	__u64 cost;   /* ns its timing took in gs_timing_begin (--gpu-time=N's budget) */
	/* The launch before, whose end event is this one's start (chained or follows): queued
	 * once this one's end event is recorded (with its end event shared) or its call failed
	 * (not shared: this one's record is not kept). */
	struct pending prev;
};

/* Before a call of the program's that is not a timed kernel launch: the gates of chains
 * of launches are opened (what it does may wait for, or depend on, their work), and the
 * launches held to be followed are queued (what it does may come between). Both counted in
 * gs_timing_chains_open. */
void gs_timing_unchain(void) GS_HIDDEN;
extern int gs_timing_chains_open GS_HIDDEN;
static inline bool gs_timing_chained(void)
{
	return __atomic_load_n(&gs_timing_chains_open, __ATOMIC_RELAXED) != 0;
}
/* The program's thread just waited for the GPU: collect finished times now. */
void gs_timing_synced(void) GS_HIDDEN;
/* GPUSCOPE_GPU_TIME: "all" (every kernel by CUPTI where found, gputime_cupti.c), "pairs"
 * (every launch by events), "chained", "off", or N (every Nth launch of each kernel, per
 * thread). */
void gs_timing_init(const char *mode) GS_HIDDEN;
/* Measurements (ab.c): another --gpu-time from now on ("off", "all", "pairs", N), or every
 * launch with a pair each on busy streams too ("nofollow"), or with carriers ("carry"). False, and nothing changed, for anything else ("chained"
 * included). */
bool gs_timing_switch(const char *mode) GS_HIDDEN;
/* Measurements (ab.c): with --gpu-time=N, at most per_s launches timed a second a thread
 * (0: no limit) from now on. */
void gs_timing_rate(__u32 per_s) GS_HIDDEN;
/* ab.c: timed launches on idle streams run by carriers (on) or gated pairs. */
void gs_timing_carriers(bool on) GS_HIDDEN;
__u32 gs_timing_rate_now(void) GS_HIDDEN; /* (per second, 0: no limit) */
/* Measurements (ab.c): with --gpu-time=N, the share of the process's time (ppm) its timed
 * launches may cost (0: no limit) from now on. */
void gs_timing_budget(__u32 ppm) GS_HIDDEN;
__u32 gs_timing_budget_now(void) GS_HIDDEN;
void gs_timing_after_fork(void) GS_HIDDEN;
/* Whether this call should be timed (mode, sampling by func; with --gpu-time=N, a due launch
 * that would exceed the thread's rate is not, and is counted: see gputime.c). */
/* --gpu-time as how many launches of a kernel make one timed: 0 off, 1 all, N every Nth
 * (read at every call: not in gputime's state, whose lock is taken often) */
extern int gt_every GS_HIDDEN;
bool gs_timing_sampled(__u64 func, int every) GS_HIDDEN;
static inline bool gs_timing_wanted(__u64 func)
{
	int every = __atomic_load_n(&gt_every, __ATOMIC_RELAXED); /* (once: ab.c may change it) */

	return every <= 1 ? every == 1 : gs_timing_sampled(func, every);
}
/* --gpu-time=all: whether a graph launch of exec is timed as a whole (its first on the
 * thread, then within the rate and the budget); ab.c: every one (on), or so (off). */
bool gs_timing_graph_wanted(__u64 exec) GS_HIDDEN;
void gs_timing_graphs_every(bool on) GS_HIDDEN;
bool gs_timing_graphs_every_now(void) GS_HIDDEN;
/* Set (before its call) once the program begins a stream capture, whatever the plane's
 * state: until then no stream can be capturing, and a launch need not ask the driver
 * (cuStreamIsCapturing; with the context's question ~0.3 us a timed launch on an H200,
 * ~0.1 us saved without it: bench/results/cupti-pause-2026-11-29.md). */
extern bool gs_capture_begun GS_HIDDEN;
static inline bool gs_may_capture(void)
{
	return __atomic_load_n(&gs_capture_begun, __ATOMIC_ACQUIRE);
}
/* Record the start event on `stream` (behind a gate where that is safe), or take a carrier
 * for the launch (t->carrier; key: a plain cuLaunchKernel's kernel and shape, 0 for any
 * other call); false if the call goes untimed. kind: enum gs_gpu_kind; func: the kernel or
 * graph exec launched. */
bool gs_timing_begin(struct gs_timing *t, __u64 stream, bool ptsz, __u8 kind, __u64 func,
		     __u64 key) GS_HIDDEN;
/* A launch given a carrier (t->carrier): made by it (a: cuLaunchKernel's arguments), 0; or
 * not (the driver's answer, t then untimed and the carrier given back): the caller makes
 * the program's launch itself. */
int gs_timing_carry(struct gs_timing *t, const __u64 *a) GS_HIDDEN;
/* A copy or set was queued on `stream` (a synchronous one's: 0): the next gated launch on
 * it gets an empty kernel of ours before its start event (see gs_timing_begin). */
void gs_timing_copied(__u64 stream, bool ptsz) GS_HIDDEN;
/* After the call: record the end event and queue the pair (or give the start back). */
void gs_timing_end(struct gs_timing *t, int result, const struct gs_timed_call *c) GS_HIDDEN;

/* Kernels inside CUDA graphs (gputime_graph.c). The program instantiated graph as exec
 * (flags: the instantiation's); is about to change the exec by api, or to destroy it; set
 * a kernel node of the exec by api, a child node to graph, (node 0) the whole exec from
 * graph, or another node by api (params, ctx: its arguments) (after the call: its result);
 * obtained an exec setter that has no wrapper (twins off from now on). */
void gs_graphtime_instantiated(__u64 exec, __u64 graph, unsigned long long flags) GS_HIDDEN;
void gs_graphtime_changed(__u64 exec, unsigned int api) GS_HIDDEN;
void gs_graphtime_kernel_set(unsigned int api, __u64 exec, __u64 node, __u64 params,
			     int result) GS_HIDDEN;
void gs_graphtime_graph_set(__u64 exec, __u64 node, __u64 graph, int result) GS_HIDDEN;
void gs_graphtime_enabled(__u64 exec, __u64 node, unsigned int on, int result) GS_HIDDEN;
void gs_graphtime_node_set(unsigned int api, __u64 exec, __u64 node, __u64 params, __u64 ctx,
			   int result) GS_HIDDEN;
void gs_graphtime_unwrapped(void) GS_HIDDEN;
void gs_graphtime_after_fork(void) GS_HIDDEN;
struct gs_graph_launch {
	struct twin *twin;    /* run in the exec's place, or NULL */
	unsigned int off_gen; /* its disabled kernels as they were then (twin->off_gen) */
};
/* Before a launch of exec on stream: the exec to launch instead (its twin), or exec. */
__u64 gs_graphtime_launch(struct gs_graph_launch *gl, __u64 exec, __u64 stream,
			  bool ptsz) GS_HIDDEN;
/* After it: true if the twin failed to launch, and the exec must be launched after all. */
bool gs_graphtime_launched(struct gs_graph_launch *gl, int result, __u64 stream, bool ptsz,
			   const struct gs_timed_call *call) GS_HIDDEN;

/* --gpu-time=cupti (gputime_cupti.c): kernels timed by the driver's own timestamps. A
 * launch's place in its stream's queue (qi: 1 + the queue, 0: none). */
struct gs_cupti_launch {
	int qi;
	bool held;  /* entered (a switch of the pause waits), to the end of the call */
	void *slot; /* its slot in the thread's inbox (gputime_inbox.c) */
};
extern bool gs_cupti_on GS_HIDDEN;
static inline bool gs_cupti_wanted(void)
{
	return __atomic_load_n(&gs_cupti_on, __ATOMIC_RELAXED);
}
/* Wanted, and started (here, if not yet): kernels' records coming, graphs' included. */
bool gs_cupti_active(void) GS_HIDDEN;
/* --gpu-time=cupti (on): graphs' kernels by their records at every run; all (off): CUPTI's
 * kind off around each graph launch's call (CUPTI's records of a graph's kernels cost the
 * launch ~1.3-1.9 us each, measured on an H200: a CUDA-graph step of 19 kernels 1.25-1.36x,
 * against 1.01-1.02x so), the graphs' kernels timed by twins as with pairs. */
void gs_cupti_graphs(bool on) GS_HIDDEN;
bool gs_cupti_times_graphs(void) GS_HIDDEN;
/* Before a graph launch's call (true: paused), and after it where it paused. */
bool gs_cupti_graph_pause(void) GS_HIDDEN;
/* Measurements (ab.c): what a graph launch switches off, 1 the kernels' kind, 3 also
 * copies' and sets' (as by default), 0 nothing. */
void gs_cupti_pause_what(int what) GS_HIDDEN;
int gs_cupti_pause_what_now(void) GS_HIDDEN;
/* Measurements (ab.c): what graph launches switched off is on again as the last ends (on),
 * or left off until a launch wants it (off: the default). */
void gs_cupti_resume_at_once(bool on) GS_HIDDEN;
bool gs_cupti_resume_at_once_now(void) GS_HIDDEN;
void gs_cupti_graph_resume(void) GS_HIDDEN;
/* Before a kernel launch's call (dims: grid x, y, z, block x, y, z; now: when it began),
 * and after it, always. l->qi 0: not queued (to be timed otherwise). */
void gs_cupti_before(struct gs_cupti_launch *l, __u64 stream, bool ptsz, __u64 func,
		     const __u32 *dims, unsigned int api, __u64 now) GS_HIDDEN;
/* The same before a 1-D copy's or set's call (its records by CUPTI's memcpy and memset
 * kinds; a synchronous one's taken, not emitted). */
struct gs_cupti_copy {
	__u64 bytes, dst, src; /* as gs_ev_gpu has them */
	__u32 copy_kind;       /* enum gs_copy_kind */
	__u8 kind;	       /* GS_GPU_COPY or GS_GPU_MEMSET */
	bool silent;	       /* a synchronous one: its record only taken (not timed) */
};
void gs_cupti_copy_before(struct gs_cupti_launch *l, __u64 stream, bool ptsz,
			  const struct gs_cupti_copy *c, unsigned int api, __u64 now) GS_HIDDEN;
void gs_cupti_after(struct gs_cupti_launch *l, int result, __u64 call_ts, __u64 call_end) GS_HIDDEN;
/* The program unloaded a module or library (its kernels' handles may be given again). */
void gs_cupti_unloaded(void) GS_HIDDEN;
/* The program made a stream (its handle may have been another stream's). */
void gs_cupti_stream_made(__u64 stream) GS_HIDDEN;
/* Measurements (ab.c): records matched under one hold of the queues' lock (0: a buffer's). */
void gs_cupti_take_chunk(__u32 n) GS_HIDDEN;
/* CUPTI's buffers from a pool cleared off the program's threads (ab.c's +nopool: off). */
void gs_cupti_pool(bool on) GS_HIDDEN;
/* How often our thread asks CUPTI for its completed records, ms (ab.c's +ask=N). */
void gs_cupti_ask_ms(__u32 ms) GS_HIDDEN;
__u32 gs_cupti_ask_ms_now(void) GS_HIDDEN;
bool gs_cupti_pool_now(void) GS_HIDDEN;
__u32 gs_cupti_take_chunk_now(void) GS_HIDDEN;
/* --gpu-time=cupti from now on (on), or not (ab.c). */
void gs_cupti_want(bool on) GS_HIDDEN;
void gs_cupti_after_fork(void) GS_HIDDEN;
/* dlsym found p for name, a CUPTI function: ours in its place if a profiler starts with it
 * (p then called by it). */
void *gs_cupti_dlsym(const char *name, void *p) GS_HIDDEN;

#endif
