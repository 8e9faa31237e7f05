// SPDX-License-Identifier: MIT
/*
 * The CUPTI plane's queues (gputime_cupti_int.h): per stream, the launches waiting for
 * their records, oldest first, indexed by grid, block and kernel name. A launch's entry is
 * put in its thread's inbox without a lock (gputime_inbox.c) and placed on its queue by
 * whoever holds the queues' lock next (gc_drain); a record takes the oldest launch of its
 * kind there (gputime_cupti.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject/gputime_cupti_int.h"

/* This thread's last queue, and its default stream's (per-thread: made once a thread, a
 * thread of the same id before it having been another one). */
struct qcache {
	__u64 ctx, stream, gen;
	int qi; /* 1 + index, 0: none */
};

static __thread struct qcache tl_q __attribute__((tls_model("initial-exec")));

static __thread struct qcache tl_pt __attribute__((tls_model("initial-exec")));

__u64 gc_name_hash(const char *name)
{
	__u64 h = 0xcbf29ce484222325ULL;

	if (!name)
		return 0;
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 0x100000001b3ULL;
	return h | 1;
}

/* Modules and libraries unloaded so far: a handle may then be given to another kernel
 * (the driver does it: XLA's autotuning unloads and loads modules all along). */
__u64 gc_unloads;

/* The hash of a launched kernel's name, from the driver (a function's, or a library
 * kernel's: CUDA 12's runtime launches those), kept per thread by handle until a module is
 * unloaded; 0 where the driver cannot say. */
__u64 gc_func_name_hash(__u64 func)
{
	typedef int (*name_fn)(const char **, void *);
	static name_fn fn, kn;
	static __thread struct {
		__u64 func, hash, unloads;
	} * seen;
	unsigned int i = (unsigned int)((func >> 4) * 0x9E3779B1u) % NAMES;
	__u64 now = __atomic_load_n(&gc_unloads, __ATOMIC_ACQUIRE);
	const char *name = NULL;

	if (!seen && !(seen = calloc(NAMES, sizeof(*seen))))
		return 0;
	if (seen[i].func == func && func && seen[i].unloads == now)
		return seen[i].hash;
	if (!fn && !kn) {
		fn = (name_fn)gs_real_by_name("cuFuncGetName");
		kn = (name_fn)gs_real_by_name("cuKernelGetName");
	}
	if ((!fn || fn(&name, (void *)(unsigned long)func) || !name) &&
	    (!kn || kn(&name, (void *)(unsigned long)func) || !name))
		name = NULL;
	seen[i].func = func;
	seen[i].hash = gc_name_hash(name);
	seen[i].unloads = now;
	if (gc_debug_on() && __atomic_fetch_add(&CU.names_told, 1, __ATOMIC_RELAXED) < 400)
		fprintf(stderr,
			"gpuscope cupti: launch name %016llx of %llx (unloads %llu): %.100s\n",
			(unsigned long long)seen[i].hash, (unsigned long long)func,
			(unsigned long long)now, name ? name : "(none)");
	return seen[i].hash;
}

struct cq_entry *gc_at(struct cq *q, __u32 i)
{
	return &q->e[(q->head + i) % q->cap];
}

/* Under CU.lock: the entry of sequence number seq, if still in the queue. */
struct cq_entry *gc_by_seq(struct cq *q, __u64 seq)
{
	return seq != NONE && seq >= q->seq0 && seq - q->seq0 < q->n
		       ? gc_at(q, (__u32)(seq - q->seq0))
		       : NULL;
}

/* Under CU.lock: the slot of a grid and block (made: where it is not there), or NULL. */
struct shape *gc_shape_of(struct cq *q, const __u32 *dims, bool make)
{
	__u64 h = 0xcbf29ce484222325ULL;

	struct shape *empty = NULL;

	if (!q->shapes) {
		if (!make || !(q->shapes = malloc(SHAPES * sizeof(*q->shapes))))
			return NULL;
		for (int k = 0; k < SHAPES; k++) {
			q->shapes[k].first = q->shapes[k].last = NONE;
			memset(q->shapes[k].dims, 0,
			       sizeof(q->shapes[k].dims)); /* (no grid of 0) */
		}
	}
	for (int i = 0; i < KEY_N; i++)
		h = (h ^ dims[i]) * 0x100000001b3ULL;
	for (int p = 0; p < PROBES; p++) {
		struct shape *s = &q->shapes[(h + (__u64)p) % SHAPES];

		if (!memcmp(s->dims, dims, sizeof(s->dims)))
			return s;
		if (s->first == NONE && !empty)
			empty = s; /* (free, or of a shape with none waiting: may be taken over) */
	}
	if (make && empty)
		memcpy(empty->dims, dims, sizeof(empty->dims));
	return make ? empty : NULL;
}

/* Under CU.lock: the oldest launch of a shape waiting for its record, taken off the shape's
 * list (failed ones on the way dropped from it), or NULL. */
struct cq_entry *gc_shape_take(struct cq *q, struct shape *sh, __u64 *seq)
{
	struct cq_entry *e;

	while ((e = gc_by_seq(q, sh->first))) {
		*seq = sh->first;
		sh->first = e->next;
		if (!e->failed)
			break;
	}
	if (!e || sh->first == NONE)
		sh->first = sh->last = NONE;
	return e;
}

/* Under CU.lock: the queue's oldest entry taken out (if its record has not come: lost). */
void gc_cq_pop(struct cq *q)
{
	struct cq_entry *e = gc_at(q, 0);

	if (!e->done) {
		struct shape *sh = gc_shape_of(q, e->dims, false);

		if (sh && sh->first == q->seq0) {
			sh->first = e->next;
			if (sh->first == NONE)
				sh->last = NONE;
		}
		if (!e->failed && !e->silent) /* (a synchronous copy's: not to be timed) */
			gs_count_time_lost();
	}
	q->head = (q->head + 1) % q->cap;
	q->n--;
	q->seq0++;
}

/* Under CU.lock: room for one more entry (false: full). */
static bool cq_room(struct cq *q)
{
	struct cq_entry *ne;
	__u32 ncap;

	if (q->n < q->cap)
		return true;
	if (q->cap >= CQ_CAP)
		return false;
	ncap = q->cap ? 2 * q->cap : CQ_FIRST;
	if (!(ne = malloc(ncap * sizeof(*ne))))
		return false;
	for (__u32 i = 0; i < q->n; i++)
		ne[i] = *gc_at(q, i);
	free(q->e);
	q->e = ne;
	q->cap = ncap;
	q->head = 0;
	return true;
}

/* Under CU.lock: the queue of (ctx, stream, owner), made with CUPTI's ids if new (-1: no
 * room). A per-thread stream's is always new here: a thread of the same id before was
 * another thread, with another stream. */
static int cq_find(__u64 ctx, __u64 stream, __u32 owner, __u32 cctx, __u32 cstream, int dev)
{
	int free_i = -1;

	for (int i = 0; i < CQ_MAX; i++) {
		struct cq *q = &CU.q[i];

		if (q->used && !q->closed && q->ctx == ctx && q->stream == stream &&
		    q->owner == owner) {
			if (!owner)
				return i;
			gc_drain(true); /* (what waits for it placed first) */
			q->closed = true;
			__atomic_store_n(&q->gen, q->gen + 1, __ATOMIC_RELEASE);
		}
		if (free_i < 0 && (!q->used || (q->closed && !q->n)))
			free_i = i;
	}
	if (free_i >= 0) {
		struct cq *q = &CU.q[free_i];

		q->ctx = ctx;
		q->stream = stream;
		q->owner = owner;
		q->cctx = cctx;
		q->cstream = cstream;
		q->device = dev;
		q->used = true;
		q->closed = false;
		__atomic_store_n(&q->gen, q->gen + 1, __ATOMIC_RELEASE);
		CU.made++;
		q->head = q->n = 0;
		if (q->shapes)
			for (int k = 0; k < SHAPES; k++)
				q->shapes[k].first = q->shapes[k].last = NONE;
	}
	return free_i;
}

void gs_cupti_stream_made(__u64 stream)
{
	pthread_mutex_lock(&CU.lock);
	gc_drain(true); /* (launches on the old stream placed first) */
	for (int i = 0; i < CQ_MAX; i++)
		if (CU.q[i].used && !CU.q[i].closed && CU.q[i].stream == stream) {
			CU.q[i].closed = true; /* (its old stream is gone: a handle given again) */
			__atomic_store_n(&CU.q[i].gen, CU.q[i].gen + 1, __ATOMIC_RELEASE);
		}
	pthread_mutex_unlock(&CU.lock);
}

/* (GPUSCOPE_INJECT_DEBUG, at exit: the queues' lock taken on the program's threads to find
 * a queue not found before, and the ns waited for it) */
__u64 gc_finds, gc_finds_ns;

/* CU.lock taken on the program's thread (the time waited for it: GS_PH_CLOCK). */
static void lock_queues(void)
{
	__u64 t0 = gs_clock();

	pthread_mutex_lock(&CU.lock);
	gc_finds++;
	gc_finds_ns += gs_clock() - t0;
	if (gs_phases_on)
		gs_phase_add(GS_PH_CLOCK, t0);
}

/* A launch waiting in a thread's inbox: its entry, for the queue it found (gen: as it was). */
struct waiting {
	struct cq_entry e;
	int qi;
	__u64 gen;
};
_Static_assert(sizeof(struct waiting) <= GT_INBOX_BODY, "a pending launch fits an inbox slot");

/* Under CU.lock: a launch from an inbox placed on its queue (where: there; qi 0, nowhere, it
 * then going untimed: counted lost), its call's end if that came first. */
static void place(void *body, const struct gt_inbox_end *end, struct gt_inbox_where *where)
{
	struct waiting *p = body;
	struct cq *q = &CU.q[p->qi - 1];
	struct cq_entry *e;
	struct shape *sh;
	int why = -1;
	__u64 seq;

	where->qi = 0;
	if (end && end->failed)
		return; /* (no record will come) */
	/* (Its queue closed or given to another stream meanwhile, full, or without room for
	 * its shape: not timed, as its launch was already made.) */
	if (!q->used || q->closed || q->gen != p->gen)
		why = NQ_QUEUE;
	else if (!cq_room(q))
		why = NQ_ROOM;
	else if (!(sh = gc_shape_of(q, p->e.dims, true)))
		why = NQ_SHAPE;
	if (why >= 0) {
		gc_unplaced[why]++;
		if (!p->e.silent)
			gs_count_time_lost();
		return;
	}
	seq = q->seq0 + q->n;
	e = gc_at(q, q->n++);
	*e = p->e;
	if (end) {
		e->call_ts = end->call_ts;
		e->call_end = end->call_end;
	}
	if (gc_by_seq(q, sh->last))
		gc_by_seq(q, sh->last)->next = seq;
	else
		sh->first = seq;
	sh->last = seq;
	gc_dump_add(false, e->call_ts, q->cstream, e->dims, e->api);
	*where = (struct gt_inbox_where){ .qi = p->qi, .gen = q->gen, .seq = seq };
}

/* Under CU.lock: a placed launch's call ended (not there any more: matched already, its
 * record was that quick). */
static void ended(const struct gt_inbox_where *where, const struct gt_inbox_end *end)
{
	struct cq *q = where->qi ? &CU.q[where->qi - 1] : NULL;
	struct cq_entry *e;

	if (q && q->gen == where->gen && (e = gc_by_seq(q, where->seq))) {
		e->call_ts = end->call_ts;
		e->call_end = end->call_end;
		e->failed = end->failed;
	}
}

/* Under CU.lock: the launches waiting in the threads' inboxes placed on their queues, in the
 * order they began, up to the oldest still in its call (in_call: all; true: something
 * placed). A launch's call takes some microseconds: one begun IN_CALL_NS ago or more is
 * placed (its thread held up in the driver), the others not to wait for it. */
bool gc_drain(bool in_call)
{
	__u64 now = in_call ? 0 : gs_clock();

	return gt_inbox_drain(place, ended,
			      in_call		 ? ~0ULL
			      : now > IN_CALL_NS ? now - IN_CALL_NS
						 : 0);
}

/* Its entry (t, under key) put in the thread's inbox for its stream's queue: l->qi where
 * (0: not queued, counted). CU.lock only to find a queue not found before by this thread. */
void gc_enqueue(struct gs_cupti_launch *l, __u64 stream, bool ptsz, const __u32 *key,
		const struct cq_entry *t)
{
	void *ctx = NULL;
	int capturing = 0, dev = -1, qi;
	bool per_thread = stream == PER_THREAD || (ptsz && !stream);
	__u64 skey = per_thread ? PER_THREAD : !stream ? LEGACY : stream;
	__u32 owner = per_thread ? gs_self_tid() : 0, cctx = 0, cstream = 0;
	struct qcache *qc;
	struct waiting p;

	if (T.cu.ctx_get(&ctx) || !ctx ||
	    (gs_may_capture() &&
	     ((ptsz ? T.cu.capturing_ptsz : T.cu.capturing)(stream, &capturing) || capturing))) {
		gc_not_queued(NQ_CTX);
		return;
	}
	qc = per_thread ? &tl_pt : &tl_q;
	qi = qc->qi;
	if (!qi || qc->ctx != (__u64)(unsigned long)ctx || qc->stream != skey ||
	    __atomic_load_n(&CU.q[qi - 1].gen, __ATOMIC_ACQUIRE) != qc->gen ||
	    __atomic_load_n(&CU.q[qi - 1].owner, __ATOMIC_RELAXED) != owner) {
		/* (CUPTI asked outside our lock: it may deliver buffers, which take it.) */
		if (CU.f.ctx_id(ctx, &cctx) ||
		    CU.f.stream_id(
			    ctx, per_thread || skey == LEGACY ? NULL : (void *)(unsigned long)skey,
			    per_thread, &cstream)) {
			gc_not_queued(NQ_IDS);
			return;
		}
		T.cu.ctx_dev(&dev);
		lock_queues();
		qi = 1 + cq_find((__u64)(unsigned long)ctx, skey, owner, cctx, cstream, dev);
		qc->qi = qi;
		qc->ctx = (__u64)(unsigned long)ctx;
		qc->stream = skey;
		qc->gen = qi ? CU.q[qi - 1].gen : 0;
		pthread_mutex_unlock(&CU.lock);
	}
	if (!qi) {
		gc_not_queued(NQ_QUEUE);
		return;
	}
	p = (struct waiting){ .e = *t, .qi = qi, .gen = qc->gen };
	/* (as pairs name it: the thread's default stream) */
	p.e.stream = per_thread ? PER_THREAD : stream;
	p.e.tid = gs_self_tid();
	p.e.next = NONE;
	memcpy(p.e.dims, key, sizeof(p.e.dims));
	/* (Full: every drain this thread tried since its box filled found the lock taken, by a
	 * holder preempted under load: 970 of 6,000 launches went without records in a test.
	 * The lock waited for then, as to find a queue: once in 4,096 launches at most, the box
	 * then drained empty.
	 * Still no room: timed with a pair instead, its record then matching nothing.) */
	if (!(l->slot = gt_inbox_put(&p, sizeof(p), t->call_ts)) && gt_inbox_filling()) {
		lock_queues();
		gc_drain(true);
		pthread_mutex_unlock(&CU.lock);
		l->slot = gt_inbox_put(&p, sizeof(p), t->call_ts);
	}
	if (!l->slot) {
		gc_not_queued(NQ_ROOM);
		return;
	}
	l->qi = qi;
	/* (Filling: the launches still in their calls placed too, their ends carried later. A
	 * drain that stopped at another thread's launch held up in its call left this box to
	 * fill: its launches then went without records, 877 of 6,000 in a test under load.) */
	if (gt_inbox_filling() && !pthread_mutex_trylock(&CU.lock)) {
		gc_drain(true);
		pthread_mutex_unlock(&CU.lock);
	}
}

/* Under CU.lock: the oldest launch waiting of a grid and block, whatever its kernel's name,
 * taken off its shape's list, or NULL. For a record under a name no launch of its shape
 * had: CUPTI names a kernel by what its handle was when CUPTI learnt it, and XLA's modules
 * are unloaded and loaded all along, handles given again (a JAX run on an H200 under
 * --gpu-time=all: 12 of 1,261 records under another kernel's name of the same module, the
 * launches' names the driver's); and a launch whose name the driver would not tell is
 * under none (0). */
struct cq_entry *gc_by_dims(struct cq *q, const __u32 *dims, __u64 *seq)
{
	for (__u32 k = 0; k < q->n; k++) {
		struct cq_entry *e = gc_at(q, k);
		struct shape *sh;

		/* (the oldest of its own shape too: its shape's list gives it) */
		if (!e->done && !e->failed && !memcmp(e->dims, dims, 6 * sizeof(*dims)))
			return (sh = gc_shape_of(q, e->dims, false)) ? gc_shape_take(q, sh, seq)
								     : NULL;
	}
	return NULL;
}

void gc_queue_after_fork(void)
{
	memset(&tl_q, 0, sizeof(tl_q));
	memset(&tl_pt, 0, sizeof(tl_pt));
}

/* A copy's or set's key: its size, which of the two, and a block no launch has (no kernel's
 * record takes it, by_dims included). */
void gc_copy_key(__u32 *key, __u64 bytes, bool set)
{
	key[0] = (__u32)bytes;
	key[1] = (__u32)(bytes >> 32);
	key[2] = set ? 2 : 1;
	key[3] = key[4] = key[5] = ~0u;
	key[6] = key[7] = 0;
}
