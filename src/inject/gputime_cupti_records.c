// SPDX-License-Identifier: MIT
/*
 * The CUPTI plane's records (gputime_cupti_int.h): the buffers CUPTI completes, kept for
 * our thread; their kernel, copy and set records matched to the launches and calls waiting
 * on their streams' queues (gputime_cupti_queue.c), or emitted as they come (a graph's
 * kernels under --gpu-time=cupti); what was never matched counted at the end. How the plane
 * works: gputime_cupti.c's opening comment.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inject/gputime_cupti_int.h"

/* A status record (GS_CAL_CUPTI, GS_CAL_CUPTI_UNMATCHED) in the current context's name. */
void gc_emit_status(__u64 what, __u64 value)
{
	struct gs_ev_gpu *e;
	void *ctx = NULL;
	int dev = -1;
	__u64 now = gs_clock();

	if (T.cu.ctx_get && T.cu.ctx_get(&ctx) == 0 && ctx && T.cu.ctx_dev)
		T.cu.ctx_dev(&dev);
	if (!(e = gs_emit_reserve(sizeof(*e), GS_EV_GPU)))
		return;
	gs_fill_hdr(&e->h, GS_EV_GPU, sizeof(*e), now);
	memset((char *)e + sizeof(e->h), 0, sizeof(*e) - sizeof(e->h));
	e->start_ns = e->call_end_ns = now;
	e->end_ns = now + value;
	e->ctx = (__u64)(unsigned long)ctx;
	e->api = GS_API_CU_LAUNCH_KERNEL;
	e->kind = GS_GPU_CALIBRATION;
	e->device = dev;
	e->func = what;
	gs_emit_commit(e);
}

/* ---- records -------------------------------------------------------------------------- */

/* A buffer CUPTI completed, waiting for our thread: CUPTI completes a full one inside the
 * program's call that filled it, where matching its ~19,000 records would be the program's
 * time (measured on an H200: a CUDA-graph training step, 19 kernels a replay, 1.32x so,
 * against 1.05x when CUPTI's own thread took them). Kept at the end of the buffer. */
struct done {
	uint8_t *buf;
	size_t valid;
	__s64 offset; /* CLOCK_REALTIME less CLOCK_MONOTONIC when it was completed */
	struct done *next;
};
#define DONE_AT ((CUPTI_BUF - sizeof(struct done)) & ~(size_t)7)
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t taking = PTHREAD_MUTEX_INITIALIZER; /* (taken in the order completed) */
static struct done *done_first, *done_last;

void gc_request(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = gc_buf_get();
	*size = *buf ? DONE_AT : 0;
	*max_records = 0;
}

static __u64 rd64(const uint8_t *r, int off)
{
	__u64 v;

	memcpy(&v, r + off, sizeof(v));
	return v;
}

static __u32 rd32(const uint8_t *r, int off)
{
	__u32 v;

	memcpy(&v, r + off, sizeof(v));
	return v;
}

/* CLOCK_REALTIME less CLOCK_MONOTONIC, now (the narrowest of three readings). */
static __s64 realtime_offset(void)
{
	__s64 best = 0;
	__u64 width = ~0ULL;

	for (int i = 0; i < 3; i++) {
		struct timespec a, r, b;
		__u64 ta, tb, tr;

		clock_gettime(CLOCK_MONOTONIC, &a);
		clock_gettime(CLOCK_REALTIME, &r);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ta = (__u64)a.tv_sec * 1000000000ULL + (__u64)a.tv_nsec;
		tb = (__u64)b.tv_sec * 1000000000ULL + (__u64)b.tv_nsec;
		tr = (__u64)r.tv_sec * 1000000000ULL + (__u64)r.tv_nsec;
		if (tb - ta < width) {
			width = tb - ta;
			best = (__s64)(tr - (ta + tb) / 2);
		}
	}
	return best;
}

/* A kernel's, copy's or set's record of the driver's, as its call e's (tid 0: no thread of
 * the program's launched it as such), in context ctx on device. */
static void emit(const struct cq_entry *e, __u64 ctx, int device, __u8 flags, __u64 start,
		 __u64 end)
{
	struct gs_ev_gpu *g = gs_emit_reserve(sizeof(*g), GS_EV_GPU);

	if (!g)
		return;
	gs_fill_hdr(&g->h, GS_EV_GPU, sizeof(*g), e->call_ts);
	memset((char *)g + sizeof(g->h), 0, sizeof(*g) - sizeof(g->h));
	g->h.tid = e->tid ? e->tid : g->h.pid;
	g->start_ns = start;
	g->end_ns = end > start ? end : start;
	g->call_end_ns = e->call_end > e->call_ts ? e->call_end : e->call_ts;
	g->func = e->func;
	g->stream = e->stream;
	g->bytes = e->bytes;
	g->dst = e->dst;
	g->src = e->src;
	g->copy_kind = e->copy_kind;
	g->ctx = ctx;
	g->api = e->api;
	g->kind = e->kind ? e->kind : GS_GPU_KERNEL;
	g->flags = flags;
	g->flags2 = GS_GPU_BY_DRIVER;
	g->device = device;
	gs_emit_commit(g);
}

/* Under CU.lock: a kernel run by a graph. Its record carries the graph launch's correlation,
 * and no launch of ours is its own; it is known by its name, under a handle of its own
 * (NAMED | the name's hash, named once: the report merges a kernel's handles by name), on
 * the stream and context of our queue there if there is one. */
static void in_graph(const uint8_t *r, const char *name, __u64 nh, __u64 start, __u64 end)
{
	__u32 cctx = rd32(r, GS_CUPTI_K_CONTEXT), cstream = rd32(r, GS_CUPTI_K_STREAM);
	const struct cq *q = NULL;
	struct cq_entry launch;
	__u64 handle = NAMED | nh;
	unsigned int i = (unsigned int)(nh % NAMED_N);

	if (!nh) {
		CU.in_graphs++; /* (no name: not told apart) */
		return;
	}
	if (CU.graph_q.made == CU.made && CU.graph_q.cctx == cctx &&
	    CU.graph_q.cstream == cstream) {
		q = CU.graph_q.qi >= 0 ? &CU.q[CU.graph_q.qi] : NULL;
	} else {
		for (int k = 0; k < CQ_MAX; k++)
			if (CU.q[k].used && CU.q[k].cctx == cctx &&
			    (!q || (CU.q[k].cstream == cstream && q->cstream != cstream)))
				q = &CU.q[k]; /* (another stream's of its context: for the context) */
		CU.graph_q.cctx = cctx;
		CU.graph_q.cstream = cstream;
		CU.graph_q.qi = q ? (int)(q - CU.q) : -1;
		CU.graph_q.made = CU.made;
	}
	for (int p = 0; p < 8 && CU.named[i] != handle; p++, i = (i + 1) % NAMED_N)
		if (!CU.named[i]) {
			CU.named[i] = handle;
			gs_emit_kname(handle, 0, name, GS_API_CU_GRAPH_LAUNCH, start);
			break;
		}
	if (CU.named[i] != handle) /* (the table full there: named again, harmless) */
		gs_emit_kname(handle, 0, name, GS_API_CU_GRAPH_LAUNCH, start);
	launch = (struct cq_entry){ .call_ts = start,
				    .call_end = start,
				    .func = handle,
				    .stream = q && q->cstream == cstream ? q->stream : 0,
				    .api = GS_API_CU_GRAPH_LAUNCH };
	emit(&launch, q ? q->ctx : 0, q ? q->device : (int)rd32(r, GS_CUPTI_K_DEVICE),
	     GS_GPU_IN_GRAPH, start, end);
	CU.graph_runs++;
}

/* Under CU.lock: the queue of CUPTI's context and stream ids, or NULL. */
static struct cq *queue_of(__u32 cctx, __u32 cstream)
{
	if (CU.q[CU.last].used && CU.q[CU.last].cctx == cctx && CU.q[CU.last].cstream == cstream)
		return &CU.q[CU.last];
	for (int i = 0; i < CQ_MAX; i++)
		if (CU.q[i].used && CU.q[i].n && CU.q[i].cctx == cctx &&
		    CU.q[i].cstream == cstream) {
			CU.last = i;
			return &CU.q[i];
		}
	return NULL;
}

/* Under CU.lock: e's record came (emitted); what is done, failed, or has waited too long for
 * its record (lost) taken out of q's head. */
static void matched(struct cq *q, struct cq_entry *e, __u64 seq, __u64 start, __u64 end)
{
	if (seq == q->seq0)
		CU.in_order++;
	else
		CU.out_of_order++;
	if (!e->silent)
		emit(e, q->ctx, q->device, GS_GPU_GATED, start, end);
	e->done = true;
	while (q->n && (gc_at(q, 0)->done || gc_at(q, 0)->failed ||
			gc_at(q, 0)->call_ts + STALE_NS < start))
		gc_cq_pop(q);
}

/* Under CU.lock: a copy's or set's record, matched to the oldest call of its kind and size
 * waiting on its stream (synchronous ones are queued too, so that an asynchronous one's
 * record is not taken by one of theirs on the same stream), or counted. One run by a graph is the graph's (timed as a whole,
 * or by its twin: left out, as a graph's kernels are under --gpu-time=all). */
static void match_copy(const uint8_t *r, __s64 offset)
{
	__u64 start = rd64(r, GS_CUPTI_C_START) - (__u64)offset,
	      end = rd64(r, GS_CUPTI_C_END) - (__u64)offset, seq;
	struct cq_entry *e = NULL;
	__u32 key[KEY_N];
	struct shape *sh;
	struct cq *q;

	if (rd32(r, GS_CUPTI_C_GRAPH)) {
		CU.graph_dropped++;
		return;
	}
	gc_copy_key(key, rd64(r, GS_CUPTI_C_BYTES), rd32(r, 0) == GS_CUPTI_ACTIVITY_KIND_MEMSET);
	gc_dump_add(true, start, rd32(r, GS_CUPTI_C_STREAM), key, 0);
	/* (Its call not ended yet, maybe: then still in its thread's inbox, see drain.) */
	for (bool again = false; !e; again = true) {
		q = queue_of(rd32(r, GS_CUPTI_C_CONTEXT), rd32(r, GS_CUPTI_C_STREAM));
		if (q && (sh = gc_shape_of(q, key, false)))
			e = gc_shape_take(q, sh, &seq);
		if (again || !gc_drain(true))
			break;
	}
	/* (2-D and 3-D copies and sets, and those not queued, have their records too, and no
	 * entry: counted apart, for the debug line. An entry whose record never comes is
	 * counted lost, as a launch's.) */
	if (!e) {
		CU.copies_unmatched++;
		return;
	}
	matched(q, e, seq, start, end > start ? end : start);
}

/* Under CU.lock: one kernel record, matched to its launch and emitted, or counted. */
static void match(const uint8_t *r, __s64 offset)
{
	__u32 cctx = rd32(r, GS_CUPTI_K_CONTEXT), cstream = rd32(r, GS_CUPTI_K_STREAM), dims[KEY_N];
	const char *name = (const char *)(unsigned long)rd64(r, GS_CUPTI_K_NAME);
	__u64 nh = gc_name_hash(name);
	__u64 start = rd64(r, GS_CUPTI_K_START) - (__u64)offset,
	      end = rd64(r, GS_CUPTI_K_END) - (__u64)offset;
	struct cq *q = NULL;
	struct cq_entry *e;
	struct shape *sh;
	__u64 seq;

	/* (Ours: a calibration's, a gated launch's prime, run outside the program's calls.) */
	if (name && !strncmp(name, "gpuscope_", 9))
		return;
	/* (Under --gpu-time=all, a graph's kernels are its twin's to time: one whose launch
	 * found our kind on, a switch late, is left out.) */
	if (rd32(r, GS_CUPTI_K_GRAPH)) {
		if (CU.graphs)
			in_graph(r, name, nh, start, end);
		else
			CU.graph_dropped++;
		return;
	}
	memcpy(dims, r + GS_CUPTI_K_GRID, 6 * sizeof(*dims));
	dims[6] = (__u32)nh;
	dims[7] = (__u32)(nh >> 32);
	gc_dump_add(true, start, cstream, dims, 0);
	/* (The oldest launch of its kernel, grid and block on its stream: where one kernel and
	 * shape run many times, it may be another of the same. Where none of its kernel and
	 * shape was ever waiting, the oldest of its grid and block: see by_dims. Its call not
	 * ended yet, maybe: then still in its thread's inbox, see drain.) */
	e = NULL;
	for (bool again = false; !e; again = true) {
		if ((q = queue_of(cctx, cstream)))
			e = (sh = gc_shape_of(q, dims, false)) ? gc_shape_take(q, sh, &seq)
							       : gc_by_dims(q, dims, &seq);
		if (again || !gc_drain(true))
			break;
	}
	if (!q || !e) {
		CU.unmatched++;
		if (q)
			CU.no_shape++;
		else
			CU.no_stream++;
		if (gc_debug_on() && CU.unmatched <= 8)
			fprintf(stderr,
				"gpuscope cupti: no launch of grid %u,%u,%u block %u,%u,%u name "
				"%016llx on context %u stream %u (%u waiting there) at %llu: "
				"%.100s\n",
				dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
				(unsigned long long)nh, cctx, cstream, q ? q->n : 0,
				(unsigned long long)start, name ? name : "(none)");
		return;
	}
	matched(q, e, seq, start, end);
}

_Static_assert(GS_CUPTI_K_START == GS_CUPTI_C_START, "one start offset for the three kinds");

static int by_start(const void *a, const void *b)
{
	__u64 x = rd64(*(const uint8_t *const *)a, GS_CUPTI_K_START),
	      y = rd64(*(const uint8_t *const *)b, GS_CUPTI_K_START);

	return x < y ? -1 : x > y;
}

void gc_complete(void *ctx, uint32_t stream_id, uint8_t *buf, size_t size, size_t valid)
{
	struct done *d = (struct done *)(void *)(buf + DONE_AT);

	(void)ctx;
	(void)stream_id;
	(void)size;
	*d = (struct done){ .buf = buf, .valid = valid, .offset = realtime_offset() };
	pthread_mutex_lock(&done_lock);
	if (done_last)
		done_last->next = d;
	else
		done_first = d;
	done_last = d;
	pthread_mutex_unlock(&done_lock);
}

/* A completed buffer's records matched and emitted, and the buffer freed. */
static __u32 take_chunk = TAKE_CHUNK;

void gs_cupti_take_chunk(__u32 n)
{
	__atomic_store_n(&take_chunk, n, __ATOMIC_RELAXED);
}

__u32 gs_cupti_take_chunk_now(void)
{
	return __atomic_load_n(&take_chunk, __ATOMIC_RELAXED);
}

static void take(uint8_t *buf, size_t valid, __s64 offset)
{
	size_t dropped = 0, n = 0, unread = 0, cap = valid / GS_CUPTI_MEMSET_SIZE + 1, chunk;
	const uint8_t **k = malloc(cap * sizeof(*k));
	void *rec = NULL;

	/* (A buffer's kernel, copy and set records matched in the order they started: the
	 * three have their start at the same offset.) */
	while (valid && CU.f.next(buf, valid, &rec) == GS_CUPTI_SUCCESS)
		if (rd32(rec, 0) == GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
		    rd32(rec, 0) == GS_CUPTI_ACTIVITY_KIND_MEMCPY ||
		    rd32(rec, 0) == GS_CUPTI_ACTIVITY_KIND_MEMSET) {
			if (k && n < cap)
				k[n++] = rec;
			else
				unread++; /* (no memory to sort them in) */
		}
	if (k)
		qsort(k, n, sizeof(*k), by_start);
	/* (TAKE_CHUNK at a time, the queues' lock let go between: a launch waits for one
	 * chunk's matching at most, not for a buffer's thousands of records.) */
	chunk = __atomic_load_n(&take_chunk, __ATOMIC_RELAXED);
	pthread_mutex_lock(&CU.lock);
	CU.unmatched += unread;
	/* (Every launch whose record is here was put before its call: placed by now.) */
	gc_drain(false);
	for (size_t i = 0; i < n; i++) {
		if (i && chunk && i % chunk == 0) {
			pthread_mutex_unlock(&CU.lock);
			pthread_mutex_lock(&CU.lock);
			gc_drain(false);
		}
		if (rd32(k[i], 0) == GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			match(k[i], offset);
		else
			match_copy(k[i], offset);
	}
	pthread_mutex_unlock(&CU.lock);
	free(k);
	if (CU.f.dropped && CU.f.dropped(NULL, 0, &dropped) == GS_CUPTI_SUCCESS)
		for (size_t i = 0; i < dropped && i < 1000000; i++)
			gs_count_time_lost();
	gc_buf_put(buf, valid);
}

/* CUPTI's completed records asked for (flag 1: all, completed or not), then taken: by the
 * thread that asks (ours, or at exit, an unload, the program's profiler starting). */
void gc_flush_and_take(uint32_t flag)
{
	struct done *d, *next;

	CU.f.flush(flag);
	pthread_mutex_lock(&taking);
	pthread_mutex_lock(&done_lock);
	d = done_first;
	done_first = done_last = NULL;
	pthread_mutex_unlock(&done_lock);
	for (; d; d = next) {
		next = d->next;
		take(d->buf, d->valid, d->offset);
	}
	pthread_mutex_unlock(&taking);
}

/* After the last flush: the launches whose records never came, counted as lost. */
void gc_count_left(void)
{
	__u64 left = 0;

	pthread_mutex_lock(&CU.lock);
	gc_drain(true);
	for (int i = 0; i < CQ_MAX; i++) {
		struct cq *q = &CU.q[i];

		for (__u32 k = 0; k < q->n; k++) {
			const struct cq_entry *e = gc_at(q, k);

			if (e->failed || e->done || e->silent)
				continue;
			if (gc_debug_on() && left < 8)
				fprintf(stderr,
					"gpuscope cupti: left: grid %u,%u,%u block %u,%u,%u name "
					"%08x%08x on context %u stream %u (%llx, thread %u, queue "
					"%s) launched at %llu by thread %u, api %u\n",
					e->dims[0], e->dims[1], e->dims[2], e->dims[3], e->dims[4],
					e->dims[5], e->dims[7], e->dims[6], q->cctx, q->cstream,
					(unsigned long long)q->stream, q->owner,
					q->closed ? "closed" : "open",
					(unsigned long long)e->call_ts, e->tid, e->api);
			left++;
		}
		while (q->n)
			gc_cq_pop(q);
	}
	gc_dump_write();
	pthread_mutex_unlock(&CU.lock);
	gc_emit_status(GS_CAL_CUPTI_UNMATCHED, CU.unmatched + CU.in_graphs);
	if (gc_debug_on())
		fprintf(stderr,
			"gpuscope cupti: records matched %llu in order, %llu out of order; "
			"unmatched %llu (no stream %llu, no launch of the shape %llu); in graphs "
			"%llu (nameless %llu, left to twins %llu); copies' and sets' records "
			"matching no call %llu; launches left %llu; pause late "
			"%llu; not queued: not started %llu, paused %llu, no context or capturing "
			"%llu, no ids %llu, no queue %llu, queue full %llu, no shape %llu; put, "
			"not "
			"placed: no queue %llu, queue full %llu, no shape %llu; the queues' lock "
			"taken by the program's threads to find a queue %llu (%llu us waited)\n",
			(unsigned long long)CU.in_order, (unsigned long long)CU.out_of_order,
			(unsigned long long)CU.unmatched, (unsigned long long)CU.no_stream,
			(unsigned long long)CU.no_shape, (unsigned long long)CU.graph_runs,
			(unsigned long long)CU.in_graphs, (unsigned long long)CU.graph_dropped,
			(unsigned long long)CU.copies_unmatched, (unsigned long long)left,
			(unsigned long long)CU.pause_late, (unsigned long long)gc_nq[NQ_START],
			(unsigned long long)gc_nq[NQ_PAUSED], (unsigned long long)gc_nq[NQ_CTX],
			(unsigned long long)gc_nq[NQ_IDS], (unsigned long long)gc_nq[NQ_QUEUE],
			(unsigned long long)gc_nq[NQ_ROOM], (unsigned long long)gc_nq[NQ_SHAPE],
			(unsigned long long)gc_unplaced[NQ_QUEUE],
			(unsigned long long)gc_unplaced[NQ_ROOM],
			(unsigned long long)gc_unplaced[NQ_SHAPE], (unsigned long long)gc_finds,
			(unsigned long long)gc_finds_ns / 1000);
	gc_bufs_debug();
}

void gc_flush_at_exit(void)
{
	if (__atomic_load_n(&CU.state, __ATOMIC_ACQUIRE) != ST_RUNNING)
		return;
	gc_flush_and_take(1);
	gc_count_left();
}

void gc_records_after_fork(void)
{
	pthread_mutex_init(&done_lock, NULL);
	pthread_mutex_init(&taking, NULL);
	done_first = done_last = NULL;
}
