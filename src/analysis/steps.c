// SPDX-License-Identifier: MIT
/* Steps of a loop, from the launch sequence (see steps.h): what is kept of each process, the
 * agent's online steps, and the report's part. */
#include <stdlib.h>
#include <string.h>

#include "analysis/steps_int.h"
#include "core/names.h"
#include "core/util.h"

#define SLOW_RATIO    1.5
#define SLOW_EXTRA_NS 1000000ULL
#define FIRST_TRY     1024 /* online: launches before the loop is looked for */

const double steps_le[STEPS_BUCKETS] = { 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2,
					 0.5,	1,     2,     5,    10,	  30,	60 };

const struct step_part_desc step_parts[STEP_PARTS] = {
	{ "compute", "part_compute_ns", "compute" },
	{ "nccl", "part_nccl_ns", "NCCL" },
	{ "copies", "part_copies_ns", "copies" },
	{ "sync", "part_sync_ns", "waiting for the GPU" },
	{ "data", "part_data_ns", "blocked (data, I/O)" },
	{ "host", "part_host_ns", "host" },
};

/* What the steps read of the stream (the rest comes from the model: GPU records, stacks). */
#define RECORDS                                                                          \
	(STREAM_TYPE(GS_EV_LAUNCH) | STREAM_TYPE(GS_EV_SYNC) | STREAM_TYPE(GS_EV_COPY) | \
	 STREAM_TYPE(GS_EV_NCCL) | STREAM_TYPE(GS_EV_OFFCPU) | STREAM_TYPE(GS_EV_SYSCALL))

struct steps {
	struct model *m;
	struct steps_opts o;
	struct hmap procs; /* pid -> struct sproc */
	struct found best; /* of the retired processes, the one with the most steps */
	bool func_seen;
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
	p->next_try = p->next_try ?: FIRST_TRY;
	return p;
}

static void observe(struct steps_hist *h, __u64 ns)
{
	double s = (double)ns / 1e9;
	int i = 0;

	while (i < STEPS_BUCKETS && s > steps_le[i])
		i++;
	h->counts[i]++;
	h->sum_s += s;
}

/* Online, the loop not known yet: look for it; found, its ended steps counted and what was
 * kept let go. Else the oldest half dropped at STEPS_ONLINE launches. */
static void online_try(struct steps *st, struct sproc *p)
{
	struct launch *l = p->launches.v;
	struct found f;

	steps_find(st->m, p, st->o.func, &f);
	if (f.n) {
		for (size_t i = 0; i + 1 < f.n; i++)
			observe(&p->hist, f.v[i].dur);
		p->locked = true;
		p->anchor = f.anchor;
		p->last_ts = f.v[f.n - 1].start;
		p->since_anchor = 0;
		for (size_t i = p->launches.n; i-- && l[i].func != p->anchor;)
			p->since_anchor++;
		free(f.v);
		free(p->launches.v);
		memset(&p->launches, 0, sizeof(p->launches));
		return;
	}
	if (p->launches.n >= STEPS_ONLINE) {
		size_t half = p->launches.n / 2;

		memmove(l, l + half, (p->launches.n - half) * sizeof(*l));
		p->launches.n -= half;
	}
	p->next_try = p->launches.n + FIRST_TRY * 8;
}

static void online_launch(struct steps *st, struct sproc *p, const struct launch *x)
{
	if (!p->locked) {
		if (p->launches.n < STEPS_ONLINE)
			push(&p->launches, x, sizeof(*x));
		if (p->launches.n >= p->next_try)
			online_try(st, p);
		return;
	}
	if (x->func == p->anchor) {
		observe(&p->hist, x->ts - GS_MIN(p->last_ts, x->ts));
		p->last_ts = x->ts;
		p->since_anchor = 0;
	} else if (++p->since_anchor > STEPS_ONLINE) {
		/* The loop ended (another began, or an evaluation): look again. */
		p->locked = false;
		p->next_try = FIRST_TRY;
	}
}

static void host_span(struct steps *st, const struct gs_hdr *ev, __u64 skip, __u64 dur, __u32 cls)
{
	struct span x = { ev->ts + skip, ev->ts + dur, ev->tid, cls };

	if (!st->o.online)
		push(&sproc_of(st, ev->pid)->host, &x, sizeof(x));
}

/* A system call (of those the OS plane reports) that waits for data, a timer or a lock,
 * rather than working for the process (mmap, munmap; ioctl: the driver's). */
static bool waits(__u32 nr)
{
	return nr != 9 && nr != 11 && nr != 16;
}

static void on_record(void *ctx, const struct gs_hdr *ev)
{
	struct steps *st = ctx;

	switch (ev->type) {
	case GS_EV_LAUNCH: {
		const struct gs_ev_launch *l = (const void *)ev;
		struct launch x = { l->h.ts, l->func, l->h.tid, 0 };
		struct sproc *p;

		if (l->c.result)
			break;
		p = sproc_of(st, ev->pid);
		if (st->o.online)
			online_launch(st, p, &x);
		else
			push(&p->launches, &x, sizeof(x));
		break;
	}
	case GS_EV_SYNC:
		host_span(st, ev, 0, ((const struct gs_ev_sync *)ev)->c.dur_ns, C_SYNC);
		break;
	case GS_EV_COPY:
		host_span(st, ev, 0, ((const struct gs_ev_copy *)ev)->c.dur_ns, C_COPY_CALL);
		break;
	case GS_EV_NCCL:
		host_span(st, ev, 0, ((const struct gs_ev_nccl *)ev)->c.dur_ns, C_NCCL_CALL);
		break;
	case GS_EV_SYSCALL: {
		const struct gs_ev_syscall *c = (const void *)ev;

		if (waits(c->nr))
			host_span(st, ev, 0, c->dur_ns, C_DATA);
		break;
	}
	case GS_EV_OFFCPU: {
		const struct gs_ev_offcpu *o = (const void *)ev;

		/* (Blocked: preempted is the CPU's, not a wait.) */
		if (o->reason == GS_OFFCPU_SLEEP || o->reason == GS_OFFCPU_DISK)
			host_span(st, ev, 0, o->dur_ns, C_DATA);
		/* Woken, or preempted, and waiting for a CPU: the machine's, not a wait for
		 * data even inside a waiting call (a 2 ms nap read 6 on a loaded machine). */
		if (o->runq_ns)
			host_span(st, ev, o->dur_ns - GS_MIN(o->runq_ns, o->dur_ns), o->dur_ns,
				  C_RUNQ);
		break;
	}
	}
}

/* --step: whether FUNC (a qualified name, or its last part) is among a name's Python
 * frames ("QUALNAME (FILE:LINE)"). */
static bool frame_is(const char *name, const char *func)
{
	const char *end = strstr(name, " (");
	size_t n = end ? (size_t)(end - name) : strlen(name), k = strlen(func);

	return n >= k && !strncmp(name + n - k, func, k) && (n == k || name[n - k - 1] == '.');
}

static void on_stack(void *ctx, const struct gs_hdr *h, const struct stack_entry *e)
{
	struct steps *st = ctx;
	const struct gs_ev_stack *s = (const void *)h;
	bool python = false, in = false;
	struct sproc *p;
	uintptr_t was;

	(void)e;
	if (!st->o.func || !api_desc(s->api) || api_desc(s->api)->family != GS_FAM_LAUNCH)
		return;
	for (unsigned int i = 0; i < s->nframes && i < GS_STACK_MAX && !in; i++) {
		const char *name;

		if (!GS_IS_PYFRAME(s->ip[i]))
			continue;
		python = true;
		name = model__symbol(st->m, h->pid, s->ip[i]);
		in = name && frame_is(name, st->o.func);
	}
	if (!python)
		return; /* (a thread with no Python says nothing of FUNC) */
	p = sproc_of(st, h->pid);
	was = (uintptr_t)hmap_get(&p->func_in, s->arg, 0);
	hmap_put(&p->func_in, s->arg, 0, (void *)(was | (in ? IN_FUNC : OUT_OF_FUNC)));
	st->func_seen |= in;
}

static void on_gpu(void *ctx, const struct gs_ev_gpu *e, __u64 dur)
{
	struct steps *st = ctx;
	const char *name;
	struct span x = { e->end_ns - GS_MIN(dur, e->end_ns), e->end_ns, 0, C_GPU_COMPUTE };

	if (st->o.online)
		return;
	if (e->kind == GS_GPU_COPY || e->kind == GS_GPU_MEMSET) {
		x.cls = C_GPU_COPY;
	} else if (e->kind == GS_GPU_KERNEL) {
		name = model__kernel_name(st->m, e->h.pid, e->func);
		if (name && (strstr(name, "ncclDevKernel") || strstr(name, "ncclKernel")))
			x.cls = C_GPU_NCCL;
	}
	push(&sproc_of(st, e->h.pid)->gpu, &x, sizeof(x));
}

static void sproc_free(struct sproc *p)
{
	free(p->launches.v);
	free(p->gpu.v);
	free(p->host.v);
	hmap_free(&p->func_in);
	free(p);
}

/* A process's end: its steps found, kept if they are the most yet (online: nothing to keep
 * but its histogram, until it is forgotten). */
static void on_retire(void *ctx, __u32 pid)
{
	struct steps *st = ctx;
	struct sproc *p;
	struct found f;

	if (st->o.online || !(p = hmap_del(&st->procs, pid, 0)))
		return;
	steps_find(st->m, p, st->o.func, &f);
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

static const struct model_observer observer = {
	.gpu = on_gpu, .stack = on_stack, .retire = on_retire, .forget = on_forget
};

struct steps *steps__attach(struct stream *s, struct model *m, const struct steps_opts *o)
{
	struct steps *st = xcalloc(1, sizeof(*st));

	st->m = m;
	st->o = *o;
	model__observe(m, &observer, st);
	if (!o->fed)
		stream__subscribe(s, RECORDS, on_record, st);
	return st;
}

void steps__add(struct steps *st, const struct gs_hdr *ev)
{
	on_record(st, ev);
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

bool steps__hist(const struct steps *st, __u32 pid, struct steps_hist *out)
{
	const struct sproc *p = hmap_get(&st->procs, pid, 0);
	__u64 n = 0;

	if (p)
		for (int i = 0; i <= STEPS_BUCKETS; i++)
			n += p->hist.counts[i];
	if (n)
		*out = p->hist;
	return n > 0;
}

size_t steps__best(struct steps *st, struct steps_found *out)
{
	struct found live = { 0 }, cand;
	const struct found *best = &st->best;
	struct hmap_slot *s;

	/* Processes still running: as of now (their records kept: the report may come again). */
	hmap_for_each (&st->procs, s) {
		steps_find(st->m, s->val, st->o.func, &cand);
		if (cand.n > live.n) {
			free(live.v);
			live = cand;
		} else {
			free(cand.v);
		}
	}
	if (live.n > best->n)
		best = &live;
	memset(out, 0, sizeof(*out));
	out->n = best->n;
	out->v = out->n ? xcalloc(out->n, sizeof(*out->v)) : NULL;
	if (out->n)
		memcpy(out->v, best->v, out->n * sizeof(*out->v));
	out->pid = best->pid;
	gs_strlcpy(out->anchor, best->anchor_name, sizeof(out->anchor));
	out->gpu_timed = best->gpu_timed;
	out->func_seen = st->func_seen;
	free(live.v);
	return out->n;
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

void steps__report(struct steps *st, struct report *r, const struct findings *f)
{
	const struct finding *fs = NULL;
	struct steps_found sf;
	size_t nf = 0;
	__u64 *d;

	r->nsteps = steps__best(st, &sf);
	r->steps = sf.v;
	r->steps_pid = sf.pid;
	gs_strlcpy(r->steps_anchor_name, sf.anchor, sizeof(r->steps_anchor_name));
	r->steps_gpu_timed = sf.gpu_timed;
	gs_strlcpy(r->steps_func, st->o.func ?: "", sizeof(r->steps_func));
	r->steps_func_seen = sf.func_seen;
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
