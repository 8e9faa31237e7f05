// SPDX-License-Identifier: MIT
/* Steps of a loop, from the launch sequence (see steps.h). */
#include <stdlib.h>
#include <string.h>

#include "analysis/steps.h"
#include "core/hmap.h"
#include "core/names.h"
#include "core/util.h"

#define SLOW_RATIO    1.5
#define SLOW_EXTRA_NS 1000000ULL
#define CONSISTENT    0.8 /* of the steps that must launch each once-a-step kernel once */

struct span {
	__u64 start, end;
};

struct launch {
	__u64 ts, func;
};

/* A growing array of n items of `size` bytes, at most STEPS_LAUNCHES. */
struct arr {
	void *v;
	size_t n, cap;
};

struct sproc {
	__u32 pid;
	struct arr launches, gpu, syncs; /* struct launch, struct span, struct span */
};

/* What a retired process's steps were, kept for the report (the one with the most). */
struct found {
	__u32 pid;
	__u64 anchor;
	char anchor_name[256];
	struct rep_step *v;
	size_t n;
	bool gpu_timed;
};

struct steps {
	struct model *m;
	struct hmap procs; /* pid -> struct sproc */
	struct found best;
};

static void push(struct arr *a, const void *item, size_t size)
{
	if (a->n == a->cap) {
		if (a->cap >= STEPS_LAUNCHES)
			return;
		a->cap = a->cap ? 2 * a->cap : 256;
		a->v = xrealloc(a->v, a->cap * size);
	}
	memcpy((char *)a->v + a->n++ * size, item, size);
}

static struct sproc *sproc_of(struct steps *st, __u32 pid)
{
	struct sproc *p = hmap_get_or_new(&st->procs, pid, 0, sizeof(*p));

	p->pid = pid;
	return p;
}

static void on_record(void *ctx, const struct gs_hdr *ev)
{
	struct steps *st = ctx;

	if (ev->type == GS_EV_LAUNCH) {
		const struct gs_ev_launch *l = (const void *)ev;
		struct launch x = { l->h.ts, l->func };

		if (!l->c.result)
			push(&sproc_of(st, ev->pid)->launches, &x, sizeof(x));
	} else if (ev->type == GS_EV_SYNC) {
		const struct gs_ev_sync *s = (const void *)ev;
		struct span x = { s->h.ts, s->h.ts + s->c.dur_ns };

		push(&sproc_of(st, ev->pid)->syncs, &x, sizeof(x));
	}
}

static void on_gpu(void *ctx, const struct gs_ev_gpu *e, __u64 dur)
{
	struct steps *st = ctx;
	struct span x = { e->end_ns - GS_MIN(dur, e->end_ns), e->end_ns };

	push(&sproc_of(st, e->h.pid)->gpu, &x, sizeof(x));
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int u64_cmp(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

/* The union of the spans (sorted by start) within [from, to). */
static __u64 covered(const struct span *v, size_t n, __u64 from, __u64 to)
{
	__u64 sum = 0, cur_s = 0, cur_e = 0;

	for (size_t i = 0; i < n && v[i].start < to; i++) {
		__u64 s = GS_MAX(v[i].start, from), e = GS_MIN(v[i].end, to);

		if (e <= s)
			continue;
		if (s > cur_e) {
			sum += cur_e - cur_s;
			cur_s = s;
			cur_e = e;
		} else if (e > cur_e) {
			cur_e = e;
		}
	}
	return sum + (cur_e - cur_s);
}

/* The counts launched three times or more, ascending (candidate step counts); their n. */
static size_t candidates(const struct sproc *p, struct hmap *counts, __u64 **out)
{
	const struct launch *l = p->launches.v;
	struct hmap seen = { 0 };
	struct hmap_slot *s;
	size_t n = 0;

	for (size_t i = 0; i < p->launches.n; i++)
		hmap_put(counts, l[i].func, 0,
			 (void *)((uintptr_t)hmap_get(counts, l[i].func, 0) + 1));
	*out = xcalloc(counts->len + 1, sizeof(**out));
	hmap_for_each (counts, s) {
		uintptr_t c = (uintptr_t)s->val;

		if (c >= 3 && !hmap_get(&seen, c, 0)) {
			hmap_put(&seen, c, 0, (void *)1);
			(*out)[n++] = c;
		}
	}
	hmap_free(&seen);
	qsort(*out, n, sizeof(**out), u64_cmp);
	return n;
}

/* Whether most launches are of kernels launched a multiple of c times (the loop's). */
static bool loop_dominates(const struct sproc *p, struct hmap *counts, __u64 c)
{
	const struct launch *l = p->launches.v;
	size_t in = 0;

	for (size_t i = 0; i < p->launches.n; i++)
		in += (uintptr_t)hmap_get(counts, l[i].func, 0) % c == 0;
	return 2 * in >= p->launches.n;
}

/* The first kernel in the sequence launched c times. */
static __u64 first_of_count(const struct sproc *p, struct hmap *counts, __u64 c)
{
	const struct launch *l = p->launches.v;

	for (size_t i = 0; i < p->launches.n; i++)
		if ((uintptr_t)hmap_get(counts, l[i].func, 0) == c)
			return l[i].func;
	return 0;
}

/* Each step's start (the anchor's launches); false if the loop is not regular enough. */
static bool step_starts(const struct sproc *p, __u64 anchor, size_t steps, struct hmap *counts,
			__u64 *starts)
{
	const struct launch *l = p->launches.v;
	struct hmap seen = { 0 };
	size_t k = 0, good = 0, once = 0;
	bool ok = true;
	struct hmap_slot *s;

	hmap_for_each (counts, s)
		once += (uintptr_t)s->val == steps;
	for (size_t i = 0; i < p->launches.n; i++) {
		if (l[i].func == anchor) {
			if (k)
				good += seen.len == once; /* (each once-a-step kernel, once) */
			hmap_free(&seen);
			memset(&seen, 0, sizeof(seen));
			starts[k++] = l[i].ts;
		}
		if (k && (uintptr_t)hmap_get(counts, l[i].func, 0) == steps) {
			if (hmap_get(&seen, l[i].func, 0))
				ok = false; /* twice in a step: not a step */
			hmap_put(&seen, l[i].func, 0, (void *)1);
		}
	}
	good += seen.len == once;
	hmap_free(&seen);
	return ok && (double)good >= CONSISTENT * (double)steps;
}

/* The steps of a process: into out (n), or none. */
static void find_steps(struct steps *st, const struct sproc *p, struct found *out)
{
	struct hmap counts = { 0 };
	size_t n = 0, ncand;
	__u64 anchor = 0, *starts, last_end = 0, *cand;
	const struct launch *l = p->launches.v;
	struct span *gpu = p->gpu.v, *syncs = p->syncs.v;

	memset(out, 0, sizeof(*out));
	/* The smallest count whose kernel marks regular steps: the loop's period (a larger one
	 * would be a part of a step, a layer's say). */
	ncand = candidates(p, &counts, &cand);
	starts = xcalloc(p->launches.n + 1, sizeof(*starts));
	for (size_t i = 0; i < ncand && !n; i++) {
		if (!loop_dominates(p, &counts, cand[i]))
			continue;
		anchor = first_of_count(p, &counts, cand[i]);
		if (step_starts(p, anchor, cand[i], &counts, starts))
			n = cand[i];
	}
	free(cand);
	if (!n) {
		hmap_free(&counts);
		free(starts);
		return;
	}
	if (p->gpu.n)
		qsort(gpu, p->gpu.n, sizeof(*gpu), span_cmp);
	if (p->syncs.n)
		qsort(syncs, p->syncs.n, sizeof(*syncs), span_cmp);
	/* The last step: to its last launch of a kernel the loop launches, then the GPU work and
	 * the waits that began by then or right after. */
	for (size_t i = 0; i < p->launches.n; i++)
		if ((uintptr_t)hmap_get(&counts, l[i].func, 0) % n == 0)
			last_end = GS_MAX(last_end, l[i].ts);
	for (size_t i = 0; i < p->syncs.n; i++)
		if (syncs[i].start >= starts[n - 1] &&
		    syncs[i].start <=
			    last_end + (n > 1 ? (starts[n - 1] - starts[0]) / (n - 1) : 0))
			last_end = GS_MAX(last_end, syncs[i].end);
	for (size_t i = 0; i < p->gpu.n; i++)
		if (gpu[i].start <= last_end && gpu[i].start >= starts[n - 1])
			last_end = GS_MAX(last_end, gpu[i].end);
	out->pid = p->pid;
	out->anchor = anchor;
	gs_strlcpy(out->anchor_name, model__kernel_name(st->m, p->pid, anchor) ?: "?",
		   sizeof(out->anchor_name));
	out->gpu_timed = p->gpu.n > 0;
	out->n = n;
	out->v = xcalloc(n, sizeof(*out->v));
	for (size_t i = 0, li = 0; i < n; i++) {
		struct rep_step *s = &out->v[i];
		__u64 end = i + 1 < n ? starts[i + 1] : GS_MAX(last_end, starts[i]);

		s->start = starts[i];
		s->dur = end - starts[i];
		for (; li < p->launches.n && l[li].ts < end; li++)
			s->launches += l[li].ts >= starts[i];
		s->gpu_ns = covered(gpu, p->gpu.n, starts[i], end);
		s->sync_ns = covered(syncs, p->syncs.n, starts[i], end);
		s->finding = -1;
	}
	hmap_free(&counts);
	free(starts);
}

static void sproc_free(struct sproc *p)
{
	free(p->launches.v);
	free(p->gpu.v);
	free(p->syncs.v);
	free(p);
}

/* A process's end: its steps found, kept if they are the most yet. */
static void on_retire(void *ctx, __u32 pid)
{
	struct steps *st = ctx;
	struct sproc *p = hmap_del(&st->procs, pid, 0);
	struct found f;

	if (!p)
		return;
	find_steps(st, p, &f);
	if (f.n > st->best.n) {
		free(st->best.v);
		st->best = f;
	} else {
		free(f.v);
	}
	sproc_free(p);
}

static void on_forget(void *ctx, __u32 pid)
{
	struct sproc *p = hmap_del(&((struct steps *)ctx)->procs, pid, 0);

	if (p)
		sproc_free(p);
}

static const struct model_observer observer = { .gpu = on_gpu,
						.retire = on_retire,
						.forget = on_forget };

struct steps *steps__attach(struct stream *s, struct model *m)
{
	struct steps *st = xcalloc(1, sizeof(*st));

	st->m = m;
	model__observe(m, &observer, st);
	stream__subscribe(s, STREAM_TYPE(GS_EV_LAUNCH) | STREAM_TYPE(GS_EV_SYNC), on_record, st);
	return st;
}

void steps__free(struct steps *st)
{
	struct hmap_slot *s;

	if (!st)
		return;
	hmap_for_each (&st->procs, s)
		sproc_free(s->val);
	hmap_free(&st->procs);
	free(st->best.v);
	free(st);
}

/* The finding of the process whose idle time overlaps [from, to) most, -1 none. */
static __s32 explain(const struct finding *fs, size_t nf, __u32 pid, __u64 from, __u64 to)
{
	__u64 most = 0;
	__s32 which = -1;

	for (size_t i = 0; i < nf; i++) {
		__u64 s = GS_MAX(fs[i].gap_start, from),
		      e = GS_MIN(fs[i].gap_start + fs[i].gap_ns, to);

		if (fs[i].pid == pid && e > s && e - s > most) {
			most = e - s;
			which = (__s32)i;
		}
	}
	return which;
}

size_t steps__best(struct steps *st, struct rep_step **out, __u32 *pid, char *anchor,
		   size_t anchor_len, bool *gpu_timed)
{
	struct found live = { 0 }, cand;
	const struct found *best = &st->best;
	struct hmap_slot *s;
	size_t n;

	/* Processes still running: as of now (their records kept: the report may come again). */
	hmap_for_each (&st->procs, s) {
		find_steps(st, s->val, &cand);
		if (cand.n > live.n) {
			free(live.v);
			live = cand;
		} else {
			free(cand.v);
		}
	}
	if (live.n > best->n)
		best = &live;
	n = best->n;
	*out = n ? xcalloc(n, sizeof(**out)) : NULL;
	if (n)
		memcpy(*out, best->v, n * sizeof(**out));
	*pid = best->pid;
	gs_strlcpy(anchor, best->anchor_name, anchor_len);
	*gpu_timed = best->gpu_timed;
	free(live.v);
	return n;
}

void steps__report(struct steps *st, struct report *r, const struct findings *f)
{
	const struct finding *fs = NULL;
	size_t nf = 0;
	__u64 *d;

	r->nsteps = steps__best(st, &r->steps, &r->steps_pid, r->steps_anchor_name,
				sizeof(r->steps_anchor_name), &r->steps_gpu_timed);
	if (!r->nsteps)
		return;
	if (f)
		fs = findings__list(f, &nf);
	d = xcalloc(r->nsteps, sizeof(*d));
	for (size_t i = 0; i < r->nsteps; i++)
		d[i] = r->steps[i].dur;
	qsort(d, r->nsteps, sizeof(*d), u64_cmp);
	r->step_median_ns = d[r->nsteps / 2];
	r->step_p90_ns = d[GS_MIN(r->nsteps * 9 / 10, r->nsteps - 1)];
	r->step_max_ns = d[r->nsteps - 1];
	free(d);
	for (size_t i = 0; i < r->nsteps; i++) {
		struct rep_step *x = &r->steps[i];

		x->slow = (double)x->dur > SLOW_RATIO * (double)r->step_median_ns &&
			  x->dur > r->step_median_ns + SLOW_EXTRA_NS;
		if (x->slow) {
			r->steps_slow++;
			x->finding = explain(fs, nf, r->steps_pid, x->start, x->start + x->dur);
		}
		x->start -= GS_MIN(x->start, r->t0);
	}
}
