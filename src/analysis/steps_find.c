// SPDX-License-Identifier: MIT
/* Finding a process's steps and where their time went (see steps.h). */
#include <stdlib.h>
#include <string.h>

#include "analysis/steps_int.h"
#include "core/util.h"

#define CONSISTENT 0.8 /* of the steps that must launch each once-a-step kernel once */

/* What find works on: the launches it may use (--step: not FUNC's left out), their counts
 * by kernel, and which kernels may mark steps. */
struct view {
	const struct launch *l;
	size_t n;
	struct hmap counts;	  /* kernel -> launches */
	const struct hmap *marks; /* --step: kernel -> IN_FUNC...; NULL: any kernel */
};

static __u64 count_of(const struct view *w, __u64 func)
{
	return (uintptr_t)hmap_get(&w->counts, func, 0);
}

/* Whether a kernel launched k times may be the loop's, of c steps: m times a step, and
 * fewer than m more (a step cut short at either end: the agent's window, a detach). */
static bool in_loop(__u64 k, __u64 c)
{
	return k >= c && k % c <= k / c;
}

/* Whether it is launched once a step. */
static bool once_a_step(__u64 k, __u64 c)
{
	return k == c || k == c + 1;
}

static bool may_mark(const struct view *w, __u64 func)
{
	return !w->marks || (uintptr_t)hmap_get(w->marks, func, 0) == IN_FUNC;
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The union of the spans (sorted by start) of class cls (C_NCLS: all) and thread tid (0:
 * any): disjoint intervals in order, start and end, into iv (room for n); their number. */
static size_t span_union(const struct span *v, size_t n, __u32 cls, __u32 tid, __u64 (*iv)[2])
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (v[i].end <= v[i].start || (cls != C_NCLS && v[i].cls != cls) ||
		    (tid && v[i].tid != tid))
			continue;
		if (k && v[i].start <= iv[k - 1][1]) {
			iv[k - 1][1] = GS_MAX(iv[k - 1][1], v[i].end);
		} else {
			iv[k][0] = v[i].start;
			iv[k][1] = v[i].end;
			k++;
		}
	}
	return k;
}

/* How much of [from, to) the intervals cover. Asked in order of from, each time past the
 * last to: *at, the first interval that may still count, only moves on, so that all the
 * steps of a run cost one pass (a scan from the first span for each step kept the report
 * of a C loop's 900,000 one-launch steps busy ten times as long as the loop). */
static __u64 covered(const __u64 (*iv)[2], size_t n, size_t *at, __u64 from, __u64 to)
{
	__u64 sum = 0;

	while (*at < n && iv[*at][1] <= from)
		(*at)++;
	for (size_t i = *at; i < n && iv[i][0] < to; i++)
		sum += GS_MIN(iv[i][1], to) - GS_MAX(iv[i][0], from);
	return sum;
}

/* The counts, of kernels that may mark steps, launched three times or more, ascending
 * (candidate step counts); their n. */
static size_t candidates(const struct view *w, __u64 **out)
{
	struct hmap seen = { 0 };
	struct hmap_slot *s;
	size_t n = 0;

	*out = xcalloc(w->counts.len + 1, sizeof(**out));
	hmap_for_each (&w->counts, s) {
		uintptr_t c = (uintptr_t)s->val;

		if (c >= 3 && may_mark(w, s->k1) && !hmap_get(&seen, c, 0)) {
			hmap_put(&seen, c, 0, (void *)1);
			(*out)[n++] = c;
		}
	}
	hmap_free(&seen);
	qsort(*out, n, sizeof(**out), u64_cmp);
	return n;
}

/* Whether most launches are of kernels launched about a multiple of c times (the loop's):
 * summed by kernel, not launch by launch, as it is asked once for each candidate count. */
static bool loop_dominates(const struct view *w, __u64 c)
{
	const struct hmap_slot *s;
	__u64 in = 0;

	hmap_for_each (&w->counts, s)
		if (in_loop((uintptr_t)s->val, c))
			in += (uintptr_t)s->val;
	return 2 * in >= w->n;
}

/* The first kernel in the sequence launched once a step that may mark steps. */
static __u64 first_of_count(const struct view *w, __u64 c)
{
	for (size_t i = 0; i < w->n; i++)
		if (once_a_step(count_of(w, w->l[i].func), c) && may_mark(w, w->l[i].func))
			return w->l[i].func;
	return 0;
}

/* Each step's start (the anchor's launches) and thread, of a loop of about c steps: their
 * number, 0 if the loop is not regular enough. */
static size_t step_starts(const struct view *w, __u64 anchor, size_t c, __u64 *starts, __u32 *tid)
{
	struct hmap seen = { 0 };
	size_t k = 0, good = 0, once = 0;
	bool ok = true;
	struct hmap_slot *s;

	hmap_for_each (&w->counts, s)
		once += once_a_step((uintptr_t)s->val, c);
	for (size_t i = 0; i < w->n; i++) {
		if (w->l[i].func == anchor) {
			if (k)
				good += seen.len == once; /* (each once-a-step kernel, once) */
			else
				*tid = w->l[i].tid;
			hmap_free(&seen);
			memset(&seen, 0, sizeof(seen));
			starts[k++] = w->l[i].ts;
		}
		if (k && once_a_step(count_of(w, w->l[i].func), c)) {
			if (hmap_get(&seen, w->l[i].func, 0))
				ok = false; /* twice in a step: not a step */
			hmap_put(&seen, w->l[i].func, 0, (void *)1);
		}
	}
	good += seen.len == once;
	hmap_free(&seen);
	return ok && (double)good >= CONSISTENT * (double)k ? k : 0;
}

/* A span's edge, for the sweep: where a class starts (+1) or ends (-1). */
struct edge {
	__u64 t;
	__u32 cls;
	__s32 d;
};

static int edge_cmp(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	return x->t < y->t ? -1 : x->t > y->t;
}

/* Whether one of the sorted times v is in [from, to). */
static bool any_in(const __u64 *v, size_t n, __u64 from, __u64 to)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo] < to;
}

/* The edges of a's spans (host: the thread tid's). A wait of the thread while other threads
 * of the process launch (others: their launch times, sorted) is not a wait for data: the
 * step's work goes on there (PyTorch's backward pass, on autograd's engine thread). */
static void add_edges(struct edge *e, size_t *n, const struct arr *a, __u32 tid, bool host,
		      const __u64 *others, size_t nothers)
{
	const struct span *v = a->v;

	for (size_t i = 0; i < a->n; i++) {
		if ((host && v[i].tid != tid) || v[i].end <= v[i].start ||
		    (v[i].cls == C_DATA && any_in(others, nothers, v[i].start, v[i].end)))
			continue;
		e[(*n)++] = (struct edge){ v[i].start, v[i].cls, 1 };
		e[(*n)++] = (struct edge){ v[i].end, v[i].cls, -1 };
	}
}

static const enum step_part part_of[C_NCLS + 1] = {
	[C_GPU_NCCL] = STEP_NCCL,  [C_GPU_COPY] = STEP_COPIES,	[C_GPU_COMPUTE] = STEP_COMPUTE,
	[C_NCCL_CALL] = STEP_NCCL, [C_COPY_CALL] = STEP_COPIES, [C_SYNC] = STEP_SYNC,
	[C_RUNQ] = STEP_HOST,	   [C_DATA] = STEP_DATA,	[C_NCLS] = STEP_HOST,
};

/* Each step's parts: its time swept once, each stretch the highest class there (GPU spans
 * of any thread, host spans of the steps' thread). */
static void parts(const struct sproc *p, __u32 tid, struct rep_step *v, size_t n)
{
	struct edge *e = xcalloc(2 * (p->gpu.n + p->host.n) + 1, sizeof(*e));
	const struct launch *l = p->launches.v;
	__u64 *others = xcalloc(p->launches.n + 1, sizeof(*others));
	size_t ne = 0, ei = 0, no = 0;
	__s64 active[C_NCLS] = { 0 };

	for (size_t i = 0; i < p->launches.n; i++)
		if (l[i].tid != tid)
			others[no++] = l[i].ts;
	qsort(others, no, sizeof(*others), u64_cmp);
	add_edges(e, &ne, &p->gpu, tid, false, others, no);
	add_edges(e, &ne, &p->host, tid, true, others, no);
	free(others);
	qsort(e, ne, sizeof(*e), edge_cmp);
	for (size_t i = 0; i < n; i++) {
		__u64 t = v[i].start, end = v[i].start + v[i].dur;

		for (;;) {
			__u64 next = end;
			__u32 top = 0;

			for (; ei < ne && e[ei].t <= t; ei++)
				active[e[ei].cls] += e[ei].d;
			if (t >= end)
				break;
			if (ei < ne)
				next = GS_MIN(next, e[ei].t);
			while (top < C_NCLS && active[top] <= 0)
				top++;
			v[i].part[part_of[top]] += next - t;
			t = next;
		}
	}
	free(e);
}

/* The launches find may use, and their counts (--step: none of a kernel only ever shown
 * outside FUNC; *keep to free). */
static void view_of(struct sproc *p, const char *func, struct view *w, struct launch **keep)
{
	const struct launch *l = p->launches.v;

	memset(w, 0, sizeof(*w));
	*keep = NULL;
	w->l = l;
	w->n = p->launches.n;
	if (func) {
		size_t k = 0;

		*keep = xcalloc(p->launches.n + 1, sizeof(**keep));
		for (size_t i = 0; i < p->launches.n; i++)
			if ((uintptr_t)hmap_get(&p->func_in, l[i].func, 0) != OUT_OF_FUNC)
				(*keep)[k++] = l[i];
		w->l = *keep;
		w->n = k;
		w->marks = &p->func_in;
	}
	for (size_t i = 0; i < w->n; i++)
		hmap_put(&w->counts, w->l[i].func, 0,
			 (void *)((uintptr_t)hmap_get(&w->counts, w->l[i].func, 0) + 1));
}

/* Where the last step ends: past its last launch of a kernel the loop launches, then the
 * waits that began by then or right after (before the process's next launch, within a
 * period), and the GPU work that began by then. (Past the launch, not at it: a loaded
 * machine may start the wait after it later than a period, and a step of one launch then
 * held none, seen in CI.) */
static __u64 last_end(const struct view *w, const struct sproc *p, __u64 c, const __u64 *starts,
		      size_t n)
{
	const struct span *gpu = p->gpu.v, *host = p->host.v;
	const struct launch *l = p->launches.v;
	__u64 end = 0, bound = UINT64_MAX,
	      period = n > 1 ? (starts[n - 1] - starts[0]) / (n - 1) : 0;

	for (size_t i = 0; i < w->n; i++)
		if (in_loop(count_of(w, w->l[i].func), c))
			end = GS_MAX(end, w->l[i].ts + 1);
	for (size_t i = 0; i < p->launches.n && bound == UINT64_MAX; i++)
		if (l[i].ts >= end)
			bound = l[i].ts;
	for (size_t i = 0; i < p->host.n; i++)
		if (host[i].cls == C_SYNC && host[i].start >= starts[n - 1] &&
		    host[i].start <= end + period && host[i].start < bound)
			end = GS_MAX(end, host[i].end);
	for (size_t i = 0; i < p->gpu.n; i++)
		if (gpu[i].start <= end && gpu[i].start >= starts[n - 1])
			end = GS_MAX(end, gpu[i].end);
	return GS_MAX(end, starts[n - 1]);
}

void steps_find(const struct model *m, struct sproc *p, const char *func, struct found *out)
{
	struct launch *keep;
	struct view w;
	size_t n = 0, ncand;
	__u64 anchor = 0, *starts, *cand, c = 0, end;
	__u32 tid = 0;
	const struct launch *l = p->launches.v;
	const struct span *gpu = p->gpu.v, *host = p->host.v;

	memset(out, 0, sizeof(*out));
	view_of(p, func, &w, &keep);
	/* The smallest count whose kernel marks regular steps: the loop's period (a larger one
	 * would be a part of a step, a layer's say). */
	ncand = candidates(&w, &cand);
	starts = xcalloc(w.n + 1, sizeof(*starts));
	for (size_t i = 0; i < ncand && !n; i++) {
		if (!loop_dominates(&w, cand[i]))
			continue;
		c = cand[i];
		anchor = first_of_count(&w, c);
		n = step_starts(&w, anchor, c, starts, &tid);
	}
	free(cand);
	if (n) {
		if (p->gpu.n)
			qsort(p->gpu.v, p->gpu.n, sizeof(*gpu), span_cmp);
		if (p->host.n)
			qsort(p->host.v, p->host.n, sizeof(*host), span_cmp);
		end = last_end(&w, p, c, starts, n);
		out->pid = p->pid;
		out->anchor = anchor;
		gs_strlcpy(out->anchor_name, model__kernel_name(m, p->pid, anchor) ?: "?",
			   sizeof(out->anchor_name));
		out->gpu_timed = p->gpu.n > 0;
		out->n = n;
		out->v = xcalloc(n, sizeof(*out->v));
	}
	if (n) {
		__u64(*busy)[2] = xcalloc(p->gpu.n + 1, sizeof(*busy));
		__u64(*sync)[2] = xcalloc(p->host.n + 1, sizeof(*sync));
		size_t nbusy = span_union(gpu, p->gpu.n, C_NCLS, 0, busy),
		       nsync = span_union(host, p->host.n, C_SYNC, tid, sync), bi = 0, si = 0;

		for (size_t i = 0, li = 0; i < n; i++) {
			struct rep_step *s = &out->v[i];
			__u64 to = i + 1 < n ? starts[i + 1] : end;

			s->start = starts[i];
			s->dur = to - starts[i];
			for (; li < p->launches.n && l[li].ts < to; li++)
				s->launches += l[li].ts >= starts[i];
			s->gpu_ns = covered(busy, nbusy, &bi, starts[i], to);
			s->sync_ns = covered(sync, nsync, &si, starts[i], to);
			s->finding = -1;
		}
		free(busy);
		free(sync);
		parts(p, tid, out->v, n);
	}
	hmap_free(&w.counts);
	free(keep);
	free(starts);
}
