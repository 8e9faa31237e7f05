// SPDX-License-Identifier: MIT
/*
 * Memory analyses: allocation sites, leak suspicion, out-of-memory context, fragmentation
 * over time, and the history the memory map is drawn from (see model.h).
 *
 * Leaks. A site's outstanding bytes are sampled at a process's ticks (every 10 ms of its
 * records at first, slower as samples pile up). The test looks at the later half of what
 * was seen of the site (a cache that grew while warming up and then stayed is not a leak)
 * and asks two things: whether the bytes rise over it (Mann-Kendall's S, with the
 * variance corrected for ties, one-sided, confidence 99.9%), and whether they rise in each
 * third of it (a single step, one buffer more from some point on, is a trend to the test
 * but not a leak). The growth rate is Sen's slope: the median of the pairwise slopes.
 *
 * Out of memory. A failed allocation that says CUDA_ERROR_OUT_OF_MEMORY is a finding:
 * what was asked; what this process holds on the device and in all; NVML's latest reading
 * of the device (its index taken as the CUDA ordinal: CUDA_VISIBLE_DEVICES may reorder
 * them); other traced processes' bytes there; the free ranges between this process's live
 * allocations (their sum, the largest); the sites holding most. Exhaustion: less is free
 * than was asked (by NVML, else no free range of the process adds up to it).
 * Fragmentation: enough is free between the process's allocations, none of it in one
 * piece large enough. Unclear: NVML saw enough free, yet the process's ranges do not
 * show fragmentation.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "core/demangle.h"
#include "core/util.h"
#include "core/names.h"
#include "gpuscope/cuda_abi.h"

#define TICK_NS		10000000ULL /* first sampling interval */
#define MIN_WINDOW	8	    /* samples for a trend test */
#define LEAK_CONFIDENCE 0.999
#define LEAK_MIN_GROWTH (1ULL << 20) /* bytes over the window: less is not worth a finding */
/* The window's least span: a site younger than twice this is not judged. A young site is
 * often in its first rise (a training step's first forward pass: activations pile up
 * until the backward pass frees them); the later half of a second of life holds a fall. */
#define LEAK_MIN_WINDOW_NS 500000000ULL
#define CU_OUT_OF_MEMORY \
	2 /* CUDA_ERROR_OUT_OF_MEMORY (cudaErrorMemoryAllocation is the runtime's) */

struct last_stack {
	__u64 ts;
	__u16 api;
	const struct stack_entry *e;
};

void model__site_stack(struct model *m, const struct gs_hdr *h, const struct stack_entry *e)
{
	struct last_stack *l = hmap_get(&m->last_stack, h->tid, h->pid);

	if (!l) {
		l = xcalloc(1, sizeof(*l));
		hmap_put(&m->last_stack, h->tid, h->pid, l);
	}
	l->ts = h->ts;
	l->api = e->api;
	l->e = e;
}

struct mem_site *model__site_of(struct model *m, struct proc *p, const struct gs_ev_mem *e,
				int kind)
{
	const struct last_stack *l = hmap_get(&m->last_stack, e->h.tid, e->h.pid);
	const struct stack_entry *st = l && l->ts == e->h.ts && l->api == e->c.api ? l->e : NULL;
	__u64 key = st ? (__u64)(uintptr_t)st : (1ULL << 63) | (__u64)e->c.api << 8 | (__u64)kind;
	struct mem_site *s = hmap_get(&m->sites, e->h.pid, key);

	if (s)
		return s;
	s = xcalloc(1, sizeof(*s));
	s->pid = e->h.pid;
	s->id = ++m->next_site;
	s->api = e->c.api;
	s->kind = (__u8)kind;
	s->stack = st;
	s->first_ts = e->h.ts;
	hmap_put(&m->sites, e->h.pid, key, s);
	if (p->nsites == p->sites_cap) {
		p->sites_cap = p->sites_cap ? 2 * p->sites_cap : 16;
		p->sites = xrealloc(p->sites, p->sites_cap * sizeof(*p->sites));
	}
	p->sites[p->nsites++] = s;
	return s;
}

static __u32 hist_add(struct model *m, const struct mem_hist *h)
{
	if (!m->keep_history)
		return NO_HIST;
	if (m->nhist == MEM_HIST_MAX) {
		m->hist_truncated = true;
		return NO_HIST;
	}
	if (m->nhist == m->hist_cap) {
		m->hist_cap = m->hist_cap ? 2 * m->hist_cap : 4096;
		m->hist = xrealloc(m->hist, m->hist_cap * sizeof(*m->hist));
	}
	m->hist[m->nhist] = *h;
	return (__u32)m->nhist++;
}

void model__site_alloc(struct model *m, struct proc *p, struct range *r, const struct gs_ev_mem *e)
{
	struct mem_site *s = model__site_of(m, p, e, r->kind == MK_MAPPING ? MK_DEVICE : r->kind);
	struct mem_hist h = { .addr = r->addr,
			      .size = r->size,
			      .t0 = e->h.ts,
			      .pid = e->h.pid,
			      .site = s->id,
			      .api = e->c.api,
			      .device = r->device,
			      .kind = r->kind };

	r->site = s;
	r->hist = hist_add(m, &h);
	if (r->kind != MK_MAPPING) /* (a mapping's bytes are its physical handle's) */
		model__site_add(s, r->size, e->h.ts);
}

void model__site_add(struct mem_site *s, __u64 bytes, __u64 ts)
{
	s->allocs++;
	s->alloc_bytes += bytes;
	s->live_bytes += bytes;
	s->live_count++;
	s->peak_bytes = GS_MAX(s->peak_bytes, s->live_bytes);
	s->last_ts = ts;
}

void model__site_sub(struct mem_site *s, __u64 bytes, __u64 ts)
{
	s->frees++;
	s->live_bytes -= GS_MIN(bytes, s->live_bytes);
	s->live_count -= s->live_count > 0;
	s->last_ts = ts;
}

void model__site_free(struct model *m, struct range *r, __u64 ts)
{
	if (r->hist != NO_HIST && r->hist < m->nhist)
		m->hist[r->hist].t1 = ts;
	if (r->site && r->kind != MK_MAPPING)
		model__site_sub(r->site, r->size, ts);
}

/* ---- the process's address space on one device ----------------------------------------- */

struct space {
	int slot;
	bool any;
	__u64 prev_end, first, live, holes, largest, ranges, stranded, largest_stranded;
};

static void strand(struct space *sp, __u64 bytes)
{
	sp->stranded += bytes;
	sp->largest_stranded = GS_MAX(sp->largest_stranded, bytes);
}

static void space_visit(const struct range *r, void *ctx)
{
	struct space *sp = ctx;

	if ((r->kind != MK_DEVICE && r->kind != MK_MAPPING) ||
	    model__mem_slot(r->device) != sp->slot)
		return;
	if (sp->any && r->addr > sp->prev_end) {
		__u64 hole = r->addr - sp->prev_end;

		__u64 head_end = (sp->prev_end + MEM_PAGE - 1) / MEM_PAGE * MEM_PAGE,
		      tail_start = r->addr / MEM_PAGE * MEM_PAGE;

		sp->holes += hole;
		sp->largest = GS_MAX(sp->largest, hole);
		/* The free part of the page the last range ends in and of the page this one
		 * starts in (one piece if that is the same page). */
		if (tail_start < head_end) {
			strand(sp, hole);
		} else {
			strand(sp, head_end - sp->prev_end);
			strand(sp, r->addr - tail_start);
		}
	}
	if (!sp->any)
		sp->first = r->addr;
	sp->any = true;
	sp->prev_end = GS_MAX(sp->prev_end, r->addr + r->size);
	sp->live += r->size;
	sp->ranges++;
}

static void space_of(const struct proc *p, int slot, struct space *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->slot = slot;
	model__walk_ranges(p, space_visit, sp);
}

void model__frag_now(const struct proc *p, int slot, __u64 ts, struct frag_sample *out)
{
	struct space sp;

	space_of(p, slot, &sp);
	out->ts = ts;
	out->live = sp.live;
	out->holes = sp.holes;
	out->largest_hole = sp.largest;
	out->ranges = sp.ranges;
	out->stranded = sp.stranded;
	out->largest_stranded = sp.largest_stranded;
}

double model__frag_score(const struct frag_sample *s)
{
	return s->stranded ? (double)s->stranded / (double)(s->stranded + s->live) : 0.0;
}

static void judge(struct model *m, struct mem_site *s, __u64 now);
static void count_suspects(struct proc *p);

/* ---- sampling --------------------------------------------------------------------------- */

static void site_sample(struct mem_site *s, __u64 ts)
{
	if (s->nsamples == SITE_SAMPLES) {
		for (unsigned int i = 0; i < SITE_SAMPLES / 2; i++)
			s->samples[i] = s->samples[2 * i + 1];
		s->nsamples = SITE_SAMPLES / 2;
	}
	s->samples[s->nsamples].ts = ts;
	s->samples[s->nsamples++].bytes = s->live_bytes;
}

static void frag_sample(struct proc *p, int slot, __u64 ts)
{
	struct mem_frag *f = p->frag[slot];

	if (!f) {
		if (!p->dev_in_use[slot])
			return;
		f = p->frag[slot] = xcalloc(1, sizeof(*f));
	}
	if (f->n == SITE_SAMPLES) {
		for (unsigned int i = 0; i < SITE_SAMPLES / 2; i++)
			f->s[i] = f->s[2 * i + 1];
		f->n = SITE_SAMPLES / 2;
	}
	model__frag_now(p, slot, ts, &f->s[f->n++]);
}

void model__mem_tick(struct model *m, struct proc *p, __u64 ts, bool force)
{
	if (!p->nsites || (!force && ts < p->sample_next))
		return;
	if (!p->sample_every)
		p->sample_every = TICK_NS;
	for (size_t i = 0; i < p->nsites; i++)
		site_sample(p->sites[i], ts);
	for (int slot = 0; slot <= MEM_DEVS; slot++)
		frag_sample(p, slot, ts);
	/* Leaks, live: every 8th tick, and the last. */
	if (force || p->nticks % 8 == 7) {
		__u64 before = p->leak_sites;

		for (size_t i = 0; i < p->nsites; i++)
			judge(m, p->sites[i], ts);
		count_suspects(p);
		m->leak_sites = m->leak_sites - GS_MIN(before, m->leak_sites) + p->leak_sites;
	}
	/* As the samples fill, half of them go: sample half as often from then on. */
	if (++p->nticks % (SITE_SAMPLES / 2) == 0)
		p->sample_every *= 2;
	p->sample_next = ts + p->sample_every;
}

/* ---- the trend test --------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

void model__site_trend(const struct mem_site *s, __u64 now, struct leak_test *t)
{
	__u64 ts[SITE_SAMPLES + 1], xs[SITE_SAMPLES + 1], sorted[SITE_SAMPLES + 1];
	double slopes[(SITE_SAMPLES + 1) * SITE_SAMPLES / 2], var, z;
	__u64 from = s->first_ts + (now - GS_MIN(now, s->first_ts)) / 2;
	unsigned int n = 0, ns = 0;
	long long S = 0;
	bool grows = true;

	memset(t, 0, sizeof(*t));
	for (unsigned int i = 0; i < s->nsamples; i++)
		if (s->samples[i].ts >= from) {
			ts[n] = s->samples[i].ts;
			xs[n++] = s->samples[i].bytes;
		}
	if (!n || ts[n - 1] < now) { /* as it is now */
		ts[n] = now;
		xs[n++] = s->live_bytes;
	}
	t->n = n;
	t->from = ts[0];
	t->to = ts[n - 1];
	t->growth = (__s64)xs[n - 1] - (__s64)xs[0];
	if (n < MIN_WINDOW || s->kind == MK_HOST) /* (page-locked host memory: not the GPU's) */
		return;
	for (unsigned int i = 0; i < n; i++)
		for (unsigned int j = i + 1; j < n; j++) {
			S += xs[j] > xs[i] ? 1 : xs[j] < xs[i] ? -1 : 0;
			if (ts[j] > ts[i])
				slopes[ns++] = ((double)xs[j] - (double)xs[i]) /
					       ((double)(ts[j] - ts[i]) / 1e9);
		}
	/* Var(S) with ties: n(n-1)(2n+5) less t(t-1)(2t+5) per group of t equal values. */
	var = (double)n * (n - 1) * (2 * n + 5);
	memcpy(sorted, xs, n * sizeof(*xs));
	qsort(sorted, n, sizeof(*sorted), cmp_u64);
	for (unsigned int i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && sorted[j] == sorted[i]; j++)
			;
		var -= (double)(j - i) * (j - i - 1) * (2 * (j - i) + 5);
	}
	var /= 18;
	z = S > 0 && var > 0 ? ((double)S - 1) / sqrt(var) : 0;
	t->confidence = 0.5 * erfc(-z / M_SQRT2);
	if (ns) {
		qsort(slopes, ns, sizeof(*slopes), cmp_double);
		t->slope_bps = ns % 2 ? slopes[ns / 2] : (slopes[ns / 2 - 1] + slopes[ns / 2]) / 2;
	}
	/* Rising in each third of the window, not in one step. */
	for (unsigned int k = 0; k < 3; k++)
		grows &= xs[(k + 1) * (n - 1) / 3] > xs[k * (n - 1) / 3];
	t->suspected = t->confidence >= LEAK_CONFIDENCE && t->growth >= (__s64)LEAK_MIN_GROWTH &&
		       t->to - t->from >= LEAK_MIN_WINDOW_NS && t->slope_bps > 0 && grows;
}

/* Re-test a site; a newly suspected one is noted (timelines show it). */
/* The cheap half of the test: whether the window's bytes rise in each third (no site can
 * be suspected otherwise). O(samples), where the trend test is O(samples^2): the live
 * check runs it on every site of a process every 8th tick. */
static bool rises_in_thirds(const struct mem_site *s, __u64 now)
{
	__u64 from = s->first_ts + (now - GS_MIN(now, s->first_ts)) / 2, xs[SITE_SAMPLES + 1];
	unsigned int n = 0;

	for (unsigned int i = 0; i < s->nsamples; i++)
		if (s->samples[i].ts >= from)
			xs[n++] = s->samples[i].bytes;
	if (!n || s->samples[s->nsamples - 1].ts < now)
		xs[n++] = s->live_bytes;
	if (n < MIN_WINDOW)
		return false;
	for (unsigned int k = 0; k < 3; k++)
		if (xs[(k + 1) * (n - 1) / 3] <= xs[k * (n - 1) / 3])
			return false;
	return true;
}

static void judge(struct model *m, struct mem_site *s, __u64 now)
{
	struct leak_test t;

	if (!rises_in_thirds(s, now)) {
		s->suspected = false;
		return;
	}
	model__site_trend(s, now, &t);
	s->suspected = t.suspected;
	if (t.suspected) {
		/* (Kept: a site that grew for a while and then stopped is still worth
		 * showing.) */
		s->at_suspicion = t;
		s->suspected_last = now;
	}
	if (t.suspected && !s->suspected_since) {
		s->suspected_since = now;
		m->recent_leaks[m->leaks_total++ % RECENT_FINDINGS] = s;
	}
}

static void count_suspects(struct proc *p)
{
	p->leak_sites = 0;
	for (size_t i = 0; i < p->nsites; i++)
		p->leak_sites += p->sites[i]->suspected;
}

__u64 model__leaks_check(struct model *m, __u64 now)
{
	struct hmap_slot *sl;
	__u64 n = 0;

	hmap_for_each (&m->procs, sl) {
		struct proc *p = sl->val;
		/* (A process that exited: as of its end.) */
		__u64 at = p->exited && p->end_ts ? p->end_ts : now;

		for (size_t i = 0; i < p->nsites; i++)
			judge(m, p->sites[i], at);
		count_suspects(p);
		n += p->leak_sites;
	}
	m->leak_sites = n;
	return n;
}

/* ---- out of memory ---------------------------------------------------------------------- */

static int more_live(const void *a, const void *b)
{
	const struct mem_site *x = *(struct mem_site *const *)a, *y = *(struct mem_site *const *)b;

	return x->live_bytes < y->live_bytes ? 1 : x->live_bytes > y->live_bytes ? -1 : 0;
}

void model__site_failed(struct model *m, struct proc *p, const struct gs_ev_mem *e, int device)
{
	int kind = e->op == GS_MEM_ALLOC_MANAGED ? MK_MANAGED
		   : e->op == GS_MEM_ALLOC_HOST	 ? MK_HOST
						 : MK_DEVICE;
	struct mem_site *s = model__site_of(m, p, e, kind);
	int slot = model__mem_slot(device);
	struct oom_finding *o = &m->last_oom;
	struct mem_site **by;
	struct mem_hist h = { .size = e->size,
			      .t0 = e->h.ts,
			      .pid = e->h.pid,
			      .site = s->id,
			      .api = e->c.api,
			      .device = (__s8)(device <= 127 ? device : -1),
			      .kind = (__u8)kind,
			      .failed = true };
	struct hmap_slot *sl;
	struct space sp;

	s->failed++;
	hist_add(m, &h);
	if (e->c.result != CU_OUT_OF_MEMORY)
		return;
	memset(o, 0, sizeof(*o));
	o->ts = e->h.ts;
	o->pid = e->h.pid;
	o->tid = e->h.tid;
	o->api = e->c.api;
	o->device = device;
	o->requested = e->size;
	o->site = s->id;
	o->live_dev = p->dev_in_use[slot];
	o->live_all = p->in_use[MK_DEVICE];
	if (device >= 0 && device < MEM_DEVS && m->nvml_mem[device].have) {
		o->have_nvml = true;
		o->nvml_used = m->nvml_mem[device].used;
		o->nvml_total = m->nvml_mem[device].total;
	}
	hmap_for_each (&m->procs, sl) {
		const struct proc *q = sl->val;

		if (q == p || q->exited || !q->dev_in_use[slot])
			continue;
		o->others++;
		o->others_bytes += q->dev_in_use[slot];
	}
	space_of(p, slot, &sp);
	o->holes = sp.holes;
	o->largest_hole = sp.largest;
	o->span = sp.any ? sp.prev_end - sp.first : 0;
	o->stranded = sp.stranded;
	o->largest_stranded = sp.largest_stranded;
	by = xmalloc((p->nsites + 1) * sizeof(*by));
	memcpy(by, p->sites, p->nsites * sizeof(*by));
	qsort(by, p->nsites, sizeof(*by), more_live);
	for (size_t i = 0; i < p->nsites && o->ntop < OOM_TOP; i++)
		if (by[i]->live_bytes && by[i]->kind == MK_DEVICE) {
			o->top[o->ntop].site = by[i]->id;
			o->top[o->ntop++].bytes = by[i]->live_bytes;
		}
	free(by);
	/* Fragmentation when what is stranded in the process's partly used pages adds up to
	 * what was asked but no piece is that large (NVML counts those pages as used); else
	 * exhaustion, unless NVML saw that much free (its reading is up to a sampling interval
	 * old, and memory a pool or another context reserved is not in this process's ranges):
	 * then it is not clear. */
	if (o->stranded >= o->requested && o->largest_stranded < o->requested)
		o->cause = OOM_FRAGMENTATION;
	else if (o->have_nvml && o->nvml_total - GS_MIN(o->nvml_used, o->nvml_total) < o->requested)
		o->cause = OOM_EXHAUSTION;
	else
		o->cause = o->have_nvml ? OOM_UNCLEAR : OOM_EXHAUSTION;
	p->ooms[o->cause]++;
	if (m->nooms < MAX_OOMS)
		m->ooms[m->nooms++] = *o;
	m->ooms_total++;
}

void model__nvml_seen(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_nvml *n = (const void *)ev;

	if (n->gpu < 0 || n->gpu >= MEM_DEVS || !(n->have & GS_NVML_MEMORY))
		return;
	m->nvml_mem[n->gpu].have = true;
	m->nvml_mem[n->gpu].ts = ev->ts;
	m->nvml_mem[n->gpu].used = n->mem_used;
	m->nvml_mem[n->gpu].total = n->mem_total;
}

/* ---- names and cleanup ----------------------------------------------------------------- */

/* A frame the symboliser could only place in its file ("libcudart.so.13+0x41b5e"). */
static bool only_placed(const char *sym)
{
	const char *plus = strstr(sym, "+0x");

	if (!plus || plus == sym || strpbrk(sym, "(: "))
		return false;
	for (plus += 3; *plus; plus++)
		if (!isxdigit((unsigned char)*plus))
			return false;
	return true;
}

void model__site_label(const struct model *m, const struct mem_site *s, unsigned int frames,
		       char *buf, size_t n)
{
	unsigned int first = 0;
	size_t len = 0;

	buf[0] = 0;
	if (!s->stack || !s->stack->nframes) {
		snprintf(buf, n, "%s (no stack)", api_name(s->api));
		return;
	}
	/* The innermost frames are often inside a stripped library the call went through
	 * (cudart's cudaMalloc calling cuMemAlloc): the label starts at the first named frame,
	 * where there is one. */
	for (unsigned int i = 0; i < s->stack->nframes; i++) {
		const char *sym = model__symbol(m, s->pid, s->stack->ip[i]);

		if (!sym)
			break;
		if (!only_placed(sym)) {
			first = i;
			break;
		}
	}
	for (unsigned int i = first; i < s->stack->nframes && i - first < frames && len + 1 < n;
	     i++) {
		const char *sym = model__symbol(m, s->pid, s->stack->ip[i]);
		char *d = sym ? demangle(sym) : NULL;
		char hex[32], *paren;

		if (!d) {
			/* Past a named frame, an unnamed one is where the frame-pointer chain
			 * left code that keeps one (what follows is not frames): stop. The
			 * innermost is shown as an address. */
			if (i > first)
				break;
			snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)s->stack->ip[i]);
			d = xstrdup(hex);
		}
		/* (Without its parameters: "f(int, char const*)" reads as "f".) */
		paren = strchr(d, '(');
		if (paren && paren != d)
			*paren = 0;
		len += (size_t)snprintf(buf + len, n - len, "%s%s", i > first ? " < " : "", d);
		free(d);
	}
}

void model__sites_forget(struct model *m, __u32 pid)
{
	struct proc *p = hmap_get(&m->procs, pid, 0);
	struct hmap_slot *sl;
	__u64 *keys = NULL;
	size_t n = 0;

	hmap_for_each (&m->sites, sl)
		if (sl->k1 == pid) {
			keys = xrealloc(keys, (n + 1) * sizeof(*keys));
			keys[n++] = sl->k2;
		}
	for (size_t i = 0; i < n; i++)
		free(hmap_del(&m->sites, pid, keys[i]));
	free(keys);
	keys = NULL;
	n = 0;
	hmap_for_each (&m->last_stack, sl)
		if (sl->k2 == pid) {
			keys = xrealloc(keys, (n + 1) * sizeof(*keys));
			keys[n++] = sl->k1;
		}
	for (size_t i = 0; i < n; i++)
		free(hmap_del(&m->last_stack, keys[i], pid));
	free(keys);
	if (p) {
		free(p->sites);
		p->sites = NULL;
		p->nsites = p->sites_cap = 0;
		for (int i = 0; i <= MEM_DEVS; i++) {
			free(p->frag[i]);
			p->frag[i] = NULL;
		}
	}
}

void model__sites_free(struct model *m)
{
	struct hmap_slot *sl;

	hmap_for_each (&m->sites, sl)
		free(sl->val);
	hmap_free(&m->sites);
	hmap_for_each (&m->last_stack, sl)
		free(sl->val);
	hmap_free(&m->last_stack);
	free(m->hist);
}
