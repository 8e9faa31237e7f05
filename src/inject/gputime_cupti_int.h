/* SPDX-License-Identifier: MIT */
/*
 * --gpu-time=all's CUPTI plane: what its five files share.
 *   gputime_cupti_state.c  the plane's state (CU), its debug lines' counters and dump;
 *   gputime_cupti_records.c  the records: the buffers CUPTI completes, kept for our
 *                          thread, their records matched to the launches waiting;
 *   gputime_cupti_bufs.c   the buffers CUPTI writes into, cleared in a pool off the
 *                          program's threads;
 *   gputime_cupti_queue.c  the launches' queues: a launch's entry put in its thread's inbox
 *                          (gputime_inbox.c), placed on its stream's queue, found again by
 *                          its record;
 *   gputime_cupti.c        finding and starting CUPTI, the pause around graph launches, the
 *                          launches' calls, the records matched, the program's own profiler
 *                          (its opening comment says how the plane works).
 * Layered: gputime_cupti.c uses gputime_cupti_records.c, which uses gputime_cupti_queue.c
 * and gputime_cupti_bufs.c, which use gputime_cupti_state.c.
 */
#ifndef GS_INJECT_GPUTIME_CUPTI_INT_H
#define GS_INJECT_GPUTIME_CUPTI_INT_H

#include <pthread.h>
#include <stdbool.h>

#include "gpuscope/cupti_abi.h"
#include "inject/gputime_int.h"

#define CQ_MAX	      256	 /* streams whose launches wait for their records */
#define CQ_FIRST      1024	 /* entries a stream's queue starts with ... */
#define CQ_CAP	      (1u << 18) /* ... and holds at most */
#define SHAPES	      4096	 /* grids and blocks a stream's queue tells apart */
#define PROBES	      64
#define NONE	      (~0ULL)
#define KEY_N	      8		     /* a launch's key: grid, block, its kernel's name (hash) */
#define NAMES	      1024	     /* kernels whose names a thread keeps (by handle) */
#define STALE_NS      10000000000ULL /* a launch whose record has not come in this long: lost */
#define PAUSE_WAIT_NS 10000000	     /* see call_enter */
#define CUPTI_BUF     (4u << 20)
#define ASK_MS	      50	 /* ours: records of what has completed asked for */
#define DRAIN_MS      10	 /* ... and the launching threads' inboxes drained */
#define IN_CALL_NS    1000000ULL /* see drain */
#define TAKE_CHUNK    256	 /* records matched under one hold of the queues' lock */
#define NAMED_N	      4096
#define NAMED	      (1ULL << 63) /* a kernel run in a graph, by its name: no driver's handle */
#define PER_THREAD    GS_CU_STREAM_PER_THREAD
#define LEGACY	      GS_CU_STREAM_LEGACY

/* What a graph launch's pause switches off (see gs_cupti_pause_what). */
enum {
	PAUSE_KERNELS = 1,
	PAUSE_COPIES = 2
};

enum {
	ST_IDLE,
	ST_STARTING,
	ST_RUNNING,
	ST_FAILED,
	ST_HANDED
};

struct cq_entry {
	__u64 call_ts, call_end, func, stream;
	__u64 bytes, dst, src;	/* a copy's or set's (gs_ev_gpu's) */
	__u32 tid, dims[KEY_N]; /* grid x, y, z, block x, y, z, its kernel's name (hash); a
				 * copy's or set's: gc_copy_key */
	__u32 copy_kind;	/* a copy's or set's enum gs_copy_kind */
	__u8 kind;		/* enum gs_gpu_kind */
	__u16 api;
	bool failed; /* the call failed: no record will come */
	bool silent; /* a synchronous copy's or set's: its record taken, not emitted */
	bool done;   /* its record came (taken out once the entries before it are) */
	__u64 next;  /* the sequence number of the next launch of its shape, or NONE */
};

/* A queue's launches of one grid and block, oldest first (sequence numbers, NONE). */
struct shape {
	__u32 dims[KEY_N];
	__u64 first, last;
};

/* A stream's launches waiting for their records: a ring, the oldest at head. */
struct cq {
	__u64 ctx, stream; /* stream: the handle, PER_THREAD or LEGACY */
	__u32 owner;	   /* a per-thread default stream's thread, else 0 */
	__u32 cctx, cstream;
	int device;
	bool used, closed;
	__u64 gen;  /* bumped whenever the slot changes hands or closes */
	__u64 seq0; /* the sequence number of the entry at head */
	struct cq_entry *e;
	__u32 cap, head, n;
	struct shape *shapes; /* SHAPES, open addressing by grid and block */
};

struct cupti_state {
	int state;		    /* ST_* */
	bool graphs;		    /* --gpu-time=cupti: graphs' kernels by their records too */
	pthread_mutex_t pause_lock; /* graph launches switching our kind, one at a time */
	/* Set by a switch while it waits for the kernel launches in their calls (each entered
	 * in its thread's inbox) and switches: a launch's call sees our kind on or off
	 * throughout (PAUSE_WAIT_NS at most: see call_enter). */
	int switching;
	int paused;	 /* graph launches in their call, our kind off meanwhile (not graphs) */
	int pause_what;	 /* PAUSE_*: what is switched off around graph launches (ab.c) */
	int paused_what; /* ... what the pause under way switched off */
	/* What graph launches switched off (PAUSE_*) stays off after them (see pause_switch),
	 * each kind until a call of the program's wants it on (resume_now; lazy_no: on again
	 * at once). */
	int left_off;
	bool lazy_no;	  /* (ab.c's +resume) */
	__u64 pause_late; /* switches or launches that did not wait longer for the other */
	bool kind_on;	  /* our kind enabled */
	void *handle;
	pthread_mutex_t lock; /* the queues */
	struct cq q[CQ_MAX];
	int last; /* the queue of the last record matched */
	/* The queue the last graph kernel's record was given (of its stream, else of its
	 * context; -1: none), for its context and stream, while no queue was made since. */
	struct {
		__u32 cctx, cstream;
		int qi;
		__u64 made;
	} graph_q;
	__u64 made; /* queues made so far */
	__u64 unmatched, in_graphs;
	__u64 copies_unmatched; /* copies' and sets' records that matched no call's entry */
	__u64 named[NAMED_N];	/* handles of kernels named for their runs in graphs (NAMED) */
	/* (GPUSCOPE_INJECT_DEBUG, at exit: records matched to the oldest launch waiting on
	 * their stream, or to a later one; not matched for want of their stream or shape) */
	__u64 in_order, out_of_order, no_stream, no_shape, graph_runs, graph_dropped;
	int names_told;
	struct {
		gs_cupti_register_fn reg;
		gs_cupti_kind_fn enable, disable;
		gs_cupti_flush_fn flush;
		gs_cupti_next_fn next;
		gs_cupti_dropped_fn dropped;
		gs_cupti_ctx_id_fn ctx_id;
		gs_cupti_stream_id_fn stream_id;
	} f;
};

/* (GPUSCOPE_INJECT_DEBUG, at exit: why launches were not queued, timed with pairs instead) */
enum {
	NQ_START,
	NQ_PAUSED,
	NQ_CTX,
	NQ_IDS,
	NQ_QUEUE,
	NQ_ROOM,
	NQ_SHAPE,
	NQ_N
};

/* gputime_cupti_state.c */
extern struct cupti_state CU GS_HIDDEN;
extern __u64 gc_nq[NQ_N] GS_HIDDEN;	  /* launches not queued, by why */
extern __u64 gc_unplaced[NQ_N] GS_HIDDEN; /* launches put, not placed: lost */
/* For diagnosing the plane itself (GPUSCOPE_INJECT_DEBUG). */
bool gc_debug_on(void) GS_HIDDEN;
/* GPUSCOPE_CUPTI_DUMP: a launch queued or a record read kept (the first few); all of them
 * written at exit. */
void gc_dump_add(bool record, __u64 t, __u32 stream, const __u32 *dims, __u16 api) GS_HIDDEN;
void gc_dump_write(void) GS_HIDDEN;
void gc_not_queued(int why) GS_HIDDEN;

/* gputime_cupti_records.c: the records, matched */
void gc_request(uint8_t **buf, size_t *size, size_t *max_records) GS_HIDDEN;
void gc_complete(void *ctx, uint32_t stream_id, uint8_t *buf, size_t size, size_t valid) GS_HIDDEN;
/* CUPTI's completed records asked for (flag 1: all, completed or not), then taken. */
void gc_flush_and_take(uint32_t flag) GS_HIDDEN;
void gc_count_left(void) GS_HIDDEN;
void gc_flush_at_exit(void) GS_HIDDEN;
void gc_emit_status(__u64 what, __u64 value) GS_HIDDEN;
void gc_records_after_fork(void) GS_HIDDEN;

/* gputime_cupti_bufs.c: CUPTI's buffers, cleared off the program's threads */
void gc_bufs_start(void *cupti) GS_HIDDEN;
uint8_t *gc_buf_get(void) GS_HIDDEN;
void gc_buf_put(uint8_t *buf, size_t valid) GS_HIDDEN;
void gc_bufs_stock(void) GS_HIDDEN;
void gc_bufs_handed(void) GS_HIDDEN;
void gc_bufs_after_fork(void) GS_HIDDEN;
void gc_bufs_debug(void) GS_HIDDEN;

/* gputime_cupti_queue.c */
extern __u64 gc_unloads GS_HIDDEN;			/* modules and libraries unloaded so far */
extern __u64 gc_finds GS_HIDDEN, gc_finds_ns GS_HIDDEN; /* the lock taken to find a queue */
/* A kernel's name's hash (0: none); a launched kernel's, by its handle (kept per thread). */
__u64 gc_name_hash(const char *name) GS_HIDDEN;
__u64 gc_func_name_hash(__u64 func) GS_HIDDEN;
/* Under CU.lock: q's entry i from its head; the entry of sequence number seq, if still
 * there; the slot of a grid and block (made: where it is not there); a shape's oldest launch
 * taken off its list; the queue's oldest entry taken out (lost if its record has not come);
 * the oldest launch of a grid and block whatever its kernel's name. */
struct cq_entry *gc_at(struct cq *q, __u32 i) GS_HIDDEN;
struct cq_entry *gc_by_seq(struct cq *q, __u64 seq) GS_HIDDEN;
struct shape *gc_shape_of(struct cq *q, const __u32 *dims, bool make) GS_HIDDEN;
struct cq_entry *gc_shape_take(struct cq *q, struct shape *sh, __u64 *seq) GS_HIDDEN;
void gc_cq_pop(struct cq *q) GS_HIDDEN;
struct cq_entry *gc_by_dims(struct cq *q, const __u32 *dims, __u64 *seq) GS_HIDDEN;
/* A copy's or set's key: its size, which of the two, a block no launch has. */
void gc_copy_key(__u32 *key, __u64 bytes, bool set) GS_HIDDEN;
/* Under CU.lock: the threads' inboxes drained onto the queues (see there). */
bool gc_drain(bool in_call) GS_HIDDEN;
/* A launch's entry (t, under key) put in its thread's inbox: l->qi where (0: not). */
void gc_enqueue(struct gs_cupti_launch *l, __u64 stream, bool ptsz, const __u32 *key,
		const struct cq_entry *t) GS_HIDDEN;
void gc_queue_after_fork(void) GS_HIDDEN;

#endif
