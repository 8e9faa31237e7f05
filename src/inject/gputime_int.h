/* SPDX-License-Identifier: MIT */
/*
 * GPU times of calls (see gputime.h): the state, and what the three files share.
 *   gputime_ctx.c      the state; the driver's functions; per context: events, the
 *                      reference events on the host clock, the calibration kernel;
 *   gputime_harvest.c  the harvester: finished pairs placed on the host clock and emitted,
 *                      at a sync and at exit; launches held to be followed queued;
 *   gputime_chain.c    chains: consecutive launches on a stream held behind one gate, each
 *                      timed from the end event of the one before; follows: the same on
 *                      a busy stream, without a gate;
 *   gputime_graph.c    kernels inside CUDA graphs: twins of the program's graphs with
 *                      event nodes around each kernel, run at sampled launches;
 *   gputime_carry.c    carriers: graphs of ours that run a launch between two event nodes
 *                      in its place, on an idle stream;
 *   gputime.c          the calls timed: sampling, gates, the queue of pending pairs;
 *   gputime_inbox.c    per launching thread, its launches for the CUPTI queues, lockless.
 * Layered: gputime.c uses gputime_chain.c uses gputime_harvest.c uses gputime_ctx.c;
 * gputime_graph.c uses gputime_harvest.c; gputime.c and gputime_harvest.c use
 * gputime_carry.c, which uses gputime_graphcal.c and gputime_ctx.c.
 */
#ifndef GS_INJECT_GPUTIME_INT_H
#define GS_INJECT_GPUTIME_INT_H

#include <pthread.h>
#include <stdbool.h>

#include "gpuscope/cuda_abi.h"
#include "inject/gputime.h"

#define MAX_CTX	      16
#define MAX_EVENTS    8192 /* per context: what timing may hold at once */
#define NREF	      8
#define CALIBRATE_NS  1000000000ULL
#define HARVEST_NS    1000000ULL
#define NOT_READY     600
#define SAMPLE_SLOTS  256
#define MAX_PENDING   (MAX_CTX * MAX_EVENTS / 2)
#define FLUSH_NS      2000000000ULL /* at exit, how long to wait for the GPU to finish */
#define BACKLOG_SLOTS 64	    /* streams whose queued work is estimated */
#define DUR_SLOTS     1024	    /* kernels and graphs whose last GPU time is kept */
#define BACKLOG_MIN   20000ULL	    /* ns of work ahead that make a gate unnecessary */
#define FIRST_HOLD_NS 300000ULL	    /* how long a first launch may keep its gate closed */
#define END_LATE_NS   50000ULL	    /* an end event recorded this late after its call ... */
#define END_SOON_NS   50000ULL	    /* ... that completed this soon after: end not known */
#define CHAIN_MAX     32	    /* launches one gate holds at most (gputime_chain.c) */
#define CHAIN_NS      100000ULL	    /* and for at most this long */
#define CHAIN_CELLS   4096	    /* chains whose gate's opening time is kept */
#define FOLLOW_NS     1000000ULL    /* a launch held to be followed at most this long */
#define TIME_RATE     1000	    /* --gpu-time=N: timed launches a second a thread, at most */
#define TIME_BURST    10	    /* ... of which this many at once */
#define TIME_BUDGET   2500	    /* ... and what timing costs the process, ppm of its time */
#define BUDGET_BURST  40000000ULL   /* ... spent ahead at once (ns of the thread's time) */
#define BUDGET_DEBT   1000000000ULL /* ... and owed at most (kernels' first launches) */
#define CARRY_MAX     512	    /* carriers a context (gputime_carry.c) */
#define CARRY_GROW    16	    /* made at once when none is free */
#define CARRY_HOW     1024	    /* kernels whose way of being carried is kept, a context */
#define CARRY_SAME    256	    /* key slots of free carriers, a context */
#define CARRY_REF     16	    /* every Nth carriable launch of a kernel and shape: a pair */
#define CARRY_KEYS    1024	    /* kernels and shapes whose readings are kept */
#define CARRY_RING    16	    /* ... the latest this many carried, and paired */
#define CARRY_MIN     4		    /* ... this many of each before a correction */

typedef int (*ev_create_fn)(void **, unsigned int);
typedef int (*ev_record_fn)(void *, __u64);
typedef int (*ev_query_fn)(void *);
typedef int (*ev_elapsed_fn)(float *, void *, void *);
typedef int (*ctx_get_fn)(void **);
typedef int (*ctx_set_fn)(void *);
typedef int (*ctx_dev_fn)(int *);
typedef int (*stream_create_fn)(__u64 *, unsigned int);
typedef int (*capturing_fn)(__u64, int *);
typedef int (*func_is_loaded_fn)(int *, void *);
typedef int (*func_load_fn)(void *);
typedef int (*kernel_get_function_fn)(void **, void *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, __u64, void **, void **);

struct ref {
	void *event;
	__u64 host_ns;
};

/* A graph of ours [event record node, kernel node, event record node] that runs a launch
 * of the program's in its place, its kernel node set to the launch (gputime_carry.c). */
struct carrier {
	void *graph, *exec, *node;
	void *ev[2];
	__u64 key; /* the launch shape its node was last set to (0: none) */
	/* While free (1 + index, 0: none): the free one freed before it and after it, and
	 * those of its key's slot before and after it. */
	int older, newer, prev_same, next_same;
};

struct ctx_slot {
	void *ctx;
	__u64 stream; /* ours, for reference events */
	int device;
	bool broken; /* timing failed to set up here: never try again */
	void **free_events;
	int nfree, nevents;
	struct ref refs[NREF];
	int nref;
	__u64 last_cal;
	struct gs_gate gate;
	void *prime;	       /* CUfunction: an empty kernel of ours (see gs_timing_begin) */
	struct backlog *chain; /* the context's open chain, under T.lock (one at a time) */
	void *cal;	       /* CUfunction: our calibration kernel (calibrate_overhead) */
	bool graph_cal;	       /* what a twin's event nodes add measured (gputime_graph.c) */
	int follows;	       /* launches held on its streams to be followed, under T.lock */
	/* Carriers (gputime_carry.c), under T.lock: made, and the free ones (the oldest and
	 * newest freed; per key slot, the newest: 1 + index, 0 none); more wanted (the
	 * harvester makes them); none ever again (carry_off); their calibration done
	 * (carry_cal, the harvester's). */
	struct carrier *carry;
	int *carry_same;
	int carry_oldest, carry_newest;
	int ncarry, ncarry_free;
	bool carry_want, carry_off, carry_cal;
	__u64 *carry_how; /* (gputime_carry.c: how each kernel is set in a node) */
};

/*
 * What is queued on a stream, estimated: each timed launch adds its kernel's last measured
 * GPU time to the stream's predicted end. (Untimed work is not counted: the estimate errs
 * towards an idle stream, which only costs a gate.)
 */
struct backlog {
	__u64 stream;
	void *ctx;
	__u64 busy_until;
	bool after_copy; /* its last operation we saw was a copy, a set or a graph, or we
			  * have seen none */
	/* The chain open on it (gputime_chain.c): its gate (0: none), when it began, its
	 * launches, and the latest one, queued for the harvester once the next one is timed
	 * from its end event or the chain ends. */
	__u64 chain_seq, chain_since;
	__u32 chain_n, chain_cell;
	bool have_held;
	struct pending held;
};

struct last_dur {
	__u64 func, ns;
};

/* A kernel and launch shape run by carriers (gputime_carry.c): its launches (T.lock), and
 * the latest readings of its carried runs and of its gated pairs (the harvest's). */
struct carry_ref {
	__u64 key;
	__u32 launches;
	__u32 carried[CARRY_RING], paired[CARRY_RING];
	__u8 nc, np;
};

struct gt_state {
	__u32 rate;	/* N: timed launches a second a thread, at most (0: any) */
	__u32 budget;	/* N: ppm of the process's time its timed launches may cost (0: any) */
	__u64 cost_tat; /* when what timing has cost so far is paid for at that share (atomic) */
	struct backlog backlog[BACKLOG_SLOTS]; /* under lock */
	struct last_dur dur[DUR_SLOTS];	       /* under lock */
	pthread_mutex_t lock;
	struct ctx_slot ctx[MAX_CTX];
	int nctx;
	struct pending *q;
	size_t qn, qcap;
	bool harvester;
	__u64 harvest_ns; /* between passes */
	bool stopped;	  /* the process is exiting: no more driver calls from the harvester */
	__u64 first_hold_ns;
	bool no_prime;	 /* GPUSCOPE_NO_PRIME (to compare) */
	__u64 chain_ns;	 /* how long a chain may hold its gate (CHAIN_NS) */
	bool no_chains;	 /* not --gpu-time=chained: a pair of events each */
	bool no_follow;	 /* GPUSCOPE_NO_FOLLOW (to compare): a busy stream's launches a pair each */
	bool no_carry;	 /* no GPUSCOPE_CARRY=1: an idle stream's launches a gated pair each */
	bool carry_any;	 /* GPUSCOPE_CARRY_ANY=1: a launch takes the oldest free carrier */
	__u32 carry_ref; /* GPUSCOPE_CARRY_REF: every Nth carriable launch a pair (CARRY_REF) */
	struct carry_ref refs[CARRY_KEYS];
	__u32 next_cell;
	__u64 chain_open_ns[CHAIN_CELLS]; /* when each chain's gate was opened (gs_clock) */
	__u64 end_delay_ns;	    /* GPUSCOPE_END_DELAY_US (tests: a thread held up before it) */
	pthread_mutex_t harvesting; /* one pass at a time: the harvester's or the exit flush */
	struct {
		ev_create_fn ev_create;
		ev_record_fn ev_record, ev_record_ptsz;
		ev_query_fn ev_query;
		ev_elapsed_fn ev_elapsed;
		ctx_get_fn ctx_get;
		ctx_set_fn ctx_set;
		ctx_dev_fn ctx_dev;
		stream_create_fn stream_create;
		capturing_fn capturing, capturing_ptsz;
		ev_query_fn stream_query, stream_query_ptsz;
		func_is_loaded_fn func_is_loaded; /* (CUDA 12.4 and later) */
		func_load_fn func_load;
		kernel_get_function_fn kernel_get_function;
		launch_fn launch;
	} cu;
	bool have_cu;
};
extern struct gt_state T GS_HIDDEN;

static inline unsigned int gt_slot_hash(__u64 v, unsigned int n)
{
	return (unsigned int)((v >> 4) ^ (v >> 16) ^ (v >> 28)) & (n - 1);
}

/* gputime_ctx.c */
bool gt_load_driver(void) GS_HIDDEN;
/* Under T.lock: an event of the context's pool (NULL when none), and one given back. */
void *gt_event_get(struct ctx_slot *c) GS_HIDDEN;
void gt_event_put(struct ctx_slot *c, void *ev) GS_HIDDEN;
/* Both events of a call that goes untimed back to the pool (takes T.lock). */
void gt_give_back(struct ctx_slot *c, struct gs_timing *t) GS_HIDDEN;
/* A new reference event of a context (its context current on this thread). */
void gt_calibrate(struct ctx_slot *c) GS_HIDDEN;
/* Load a kernel's function now, as its first launch would. */
void gt_load_ahead(__u64 handle) GS_HIDDEN;
/* The slot of a context, set up on first use; -1 where timing cannot work there. */
int gt_ctx_slot(void *ctx) GS_HIDDEN;

/* gputime_ctx.c: a calibration record (what: GS_CAL_*) of what the context's events add. */
void gt_emit_calibration(const struct ctx_slot *c, __u64 overhead_ns, __u64 what) GS_HIDDEN;

/* gputime_harvest.c */
void gt_start_harvester(void) GS_HIDDEN;
/* Under T.lock: a pair for the harvester; false (its events given back) when too much is
 * outstanding. */
bool gt_queue(const struct pending *p) GS_HIDDEN;
/* On the calling thread, now: every finished pair, twins' too (leaves the context). */
/* Collect finished times on the program's thread, after a wait for the GPU. */
void gt_harvest_synced(void) GS_HIDDEN;
void gt_harvest_now(void) GS_HIDDEN;
/* Under T.lock, launches held to be followed (gputime_chain.c): whether b holds one; b's
 * no longer held (taken, or queued); b's queued, if any; every one whose call ended before
 * `before` queued. */
bool gt_follow_held(const struct backlog *b) GS_HIDDEN;
void gt_follow_drop(struct backlog *b) GS_HIDDEN;
void gt_follow_flush(struct backlog *b) GS_HIDDEN;
void gt_follow_expire(__u64 before) GS_HIDDEN;

/* gputime_carry.c. Under T.lock: a free carrier for t's launch of func (t->carrier, its
 * events t->start and t->end), the one last set to t->key where one is free, or false
 * (none free: more wanted); carrier i free again. By the harvester (c's context current):
 * more carriers made where wanted. */
bool gt_carry_take(struct ctx_slot *c, struct gs_timing *t, __u64 func) GS_HIDDEN;
void gt_carry_put(struct ctx_slot *c, int i) GS_HIDDEN;
void gt_carry_grow(struct ctx_slot *c) GS_HIDDEN;
/* Under T.lock: whether this carriable launch of key is to be a gated pair all the same (a
 * reference for its carried runs). */
bool gt_carry_ref(__u64 key) GS_HIDDEN;
/* In a harvest, a pair of p->key read (raw ns): kept; for a carried one, how much to take
 * off it to read as its gated pairs do (false: not known yet). */
bool gt_carry_shift(const struct pending *p, __u64 raw, __u64 *shift) GS_HIDDEN;
/* gputime_graphcal.c: what a carrier's event nodes add, measured with carrier k in c's
 * context, c's context current (GS_CAL_CARRIED, GS_CAL_CARRIED_EMPTY, _STILL). */
void gt_carry_calibrate(struct ctx_slot *c, struct carrier *k) GS_HIDDEN;

/* gputime_chain.c, all under T.lock */
/* This launch, a kernel's on b's stream, goes on b's open chain: t timed from the end event
 * of the launch before (t->start, t->gate set). False: no chain to go on with. */
bool gt_chain_next(struct ctx_slot *c, struct backlog *b, struct gs_timing *t, __u64 now) GS_HIDDEN;
/* A gated kernel launch's end event is recorded (p): held in b's chain, opened or new (true),
 * or (false) its gate was opened already by someone else, and the chain is over. */
bool gt_chain_hold(struct ctx_slot *c, struct backlog *b, const struct gs_timing *t,
		   const struct pending *p) GS_HIDDEN;
/* The context's open chain ends: its gate opened, its last launch queued. */
void gt_chain_close(struct ctx_slot *c) GS_HIDDEN;
/* A kernel launch on b's stream: the launch held there to be followed, if any, taken
 * into t->prev (true); those on streams it may wait for, or that may wait for it, queued. */
bool gt_follow_take(struct ctx_slot *c, struct backlog *b, struct gs_timing *t) GS_HIDDEN;
/* A kernel launch's end event is recorded (p): held on b for the next launch there to
 * follow (true), or (false) to be queued now. */
bool gt_follow_hold(struct ctx_slot *c, struct backlog *b, const struct pending *p) GS_HIDDEN;
/* Not under T.lock: t's launch before (t->prev) queued, its end event shared with t (shared)
 * or not (t's call failed). */
void gt_prev_queue(struct gs_timing *t, bool shared) GS_HIDDEN;

/* gputime_inbox.c: a launching thread's entries for the drain of gputime_cupti.c's queues,
 * put and ended without a lock. A slot's body (GT_INBOX_BODY bytes at most) is put before
 * the call, ts the order drains merge threads' slots by (NULL: no room, or no box for this
 * thread); its call's end given after it. Under the caller's lock, gt_inbox_drain places
 * the slots put, in order (place is told the end where it came first), and where an end
 * came after its slot's placement, a drain tells ended where it was placed. */
#define GT_INBOX_BODY 128
struct gt_inbox_end {
	__u64 call_ts, call_end;
	bool failed;
};
struct gt_inbox_where {
	int qi; /* 1 + the queue, 0: not placed */
	__u64 gen, seq;
};
typedef void (*gt_inbox_place_fn)(void *body, const struct gt_inbox_end *end,
				  struct gt_inbox_where *where);
typedef void (*gt_inbox_ended_fn)(const struct gt_inbox_where *where,
				  const struct gt_inbox_end *end);
void *gt_inbox_put(const void *body, size_t n, __u64 ts) GS_HIDDEN;
/* This thread's box three quarters full: to be drained now. */
bool gt_inbox_filling(void) GS_HIDDEN;
void gt_inbox_end(void *slot, const struct gt_inbox_end *end) GS_HIDDEN;
/* (It stops at the oldest slot still in a call begun since begun_before (~0: places them
 * all); true: something placed.) */
bool gt_inbox_drain(gt_inbox_place_fn place, gt_inbox_ended_fn ended, __u64 begun_before) GS_HIDDEN;
/* A switch's readers (gputime_cupti.c's pause): this thread in a call that a switch waits
 * for (false: no box, not waited for), and out of it; every other thread's call that had
 * entered when a switch began has left (false: not within wait_ns). The switch's flag set
 * (sequentially consistent) before gt_inbox_quiet; the caller reads it after entering. */
bool gt_inbox_enter(void) GS_HIDDEN;
void gt_inbox_leave(void) GS_HIDDEN;
bool gt_inbox_quiet(__u64 wait_ns) GS_HIDDEN;
void gt_inbox_after_fork(void) GS_HIDDEN;

#endif
