// SPDX-License-Identifier: MIT
/*
 * Memory analyses (see memsites.h): sites, their sampling and the trend test, out-of-memory
 * context, fragmentation, the memory map's history.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/memsites_int.h"
#include "core/names.h"
#include "core/util.h"

#define TICK_NS 10000000ULL /* first sampling interval */
#define CU_OUT_OF_MEMORY \
	2 /* CUDA_ERROR_OUT_OF_MEMORY (cudaErrorMemoryAllocation is the runtime's) */

struct last_stack {
	__u64 ts;
	__u16 api;
	const struct stack_entry *e;
};

static struct ms_proc *ms_proc(struct memsites *ms, __u32 pid)
{
	struct ms_proc *p = hmap_get_or_new(&ms->procs, pid, 0, sizeof(*p));

	p->pid = pid;
	return p;
}

static void on_stack(void *ctx, const struct gs_hdr *h, const struct stack_entry *e)
{
	struct memsites *ms = ctx;
	struct last_stack *l = hmap_get_or_new(&ms->last_stack, h->tid, h->pid, sizeof(*l));

	l->ts = h->ts;
	l->api = e->api;
	l->e = e;
}

/* The site of an allocation being made (created on first use). */
static struct mem_site *site_of(struct memsites *ms, const struct gs_ev_mem *e, int kind)
{
	const struct last_stack *l = hmap_get(&ms->last_stack, e->h.tid, e->h.pid);
	const struct stack_entry *st = l && l->ts == e->h.ts && l->api == e->c.api ? l->e : NULL;
	__u64 key = st ? (__u64)(uintptr_t)st : (1ULL << 63) | (__u64)e->c.api << 8 | (__u64)kind;
	struct mem_site *s = hmap_get(&ms->sites, e->h.pid, key);
	struct ms_proc *p;

	if (s)
		return s;
	p = ms_proc(ms, e->h.pid);
	s = xcalloc(1, sizeof(*s));
	s->pid = e->h.pid;
	s->id = ++ms->next_site;
	s->api = e->c.api;
	s->kind = (__u8)kind;
	s->stack = st;
	s->first_ts = e->h.ts;
	hmap_put(&ms->sites, e->h.pid, key, s);
	if (p->nsites == p->sites_cap) {
		p->sites_cap = p->sites_cap ? 2 * p->sites_cap : 16;
		p->sites = xrealloc(p->sites, p->sites_cap * sizeof(*p->sites));
	}
	p->sites[p->nsites++] = s;
	return s;
}

static __u32 hist_add(struct memsites *ms, const struct mem_hist *h)
{
	if (!ms->keep_history)
		return NO_HIST;
	if (ms->nhist == MEM_HIST_MAX) {
		ms->hist_truncated = true;
		return NO_HIST;
	}
	if (ms->nhist == ms->hist_cap) {
		ms->hist_cap = ms->hist_cap ? 2 * ms->hist_cap : 4096;
		ms->hist = xrealloc(ms->hist, ms->hist_cap * sizeof(*ms->hist));
	}
	ms->hist[ms->nhist] = *h;
	return (__u32)ms->nhist++;
}

static void site_add(struct mem_site *s, __u64 bytes, __u64 ts)
{
	s->allocs++;
	s->alloc_bytes += bytes;
	s->live_bytes += bytes;
	s->live_count++;
	s->peak_bytes = GS_MAX(s->peak_bytes, s->live_bytes);
	s->last_ts = ts;
}

static void site_sub(struct mem_site *s, __u64 bytes, __u64 ts)
{
	s->frees++;
	s->live_bytes -= GS_MIN(bytes, s->live_bytes);
	s->live_count -= s->live_count > 0;
	s->last_ts = ts;
}

static void on_alloc(void *ctx, const struct model_alloc *a, const struct gs_ev_mem *e)
{
	struct memsites *ms = ctx;
	struct mem_site *s = site_of(ms, e, a->kind == MK_MAPPING ? MK_DEVICE : a->kind);
	struct ms_live *l = xmalloc(sizeof(*l));
	struct mem_hist h = { .addr = a->addr,
			      .size = a->size,
			      .t0 = e->h.ts,
			      .pid = e->h.pid,
			      .site = s->id,
			      .api = e->c.api,
			      .device = a->device,
			      .kind = a->kind };

	l->site = s;
	l->hist = hist_add(ms, &h);
	free(hmap_put(&ms->live, a->pid, a->addr, l));
	if (a->kind != MK_MAPPING) /* (a mapping's bytes are its physical handle's) */
		site_add(s, a->size, e->h.ts);
}

static void on_free(void *ctx, const struct model_alloc *a, __u64 ts)
{
	struct memsites *ms = ctx;
	struct ms_live *l = hmap_del(&ms->live, a->pid, a->addr);

	if (!l)
		return;
	if (l->hist != NO_HIST && l->hist < ms->nhist)
		ms->hist[l->hist].t1 = ts;
	if (a->kind != MK_MAPPING)
		site_sub(l->site, a->size, ts);
	free(l);
}

static void on_vmm_create(void *ctx, const struct gs_ev_mem *e)
{
	struct memsites *ms = ctx;
	struct mem_site *s = site_of(ms, e, MK_DEVICE);

	site_add(s, e->size, e->h.ts);
	hmap_put(&ms->vmm, e->h.pid, e->addr, s);
}

static void on_vmm_free(void *ctx, __u32 pid, __u64 handle, __u64 size, __u64 ts)
{
	struct memsites *ms = ctx;
	struct mem_site *s = hmap_del(&ms->vmm, pid, handle);

	if (s)
		site_sub(s, size, ts);
}

/* ---- sampling --------------------------------------------------------------------------- */

static void judge(struct memsites *ms, struct mem_site *s, __u64 now);

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

static void frag_sample(struct memsites *ms, struct ms_proc *p, const struct model_proc *mp,
			int slot, __u64 ts)
{
	struct mem_frag *f = p->frag[slot];

	if (!f) {
		if (!mp->dev_in_use[slot])
			return;
		f = p->frag[slot] = xcalloc(1, sizeof(*f));
	}
	if (f->n == SITE_SAMPLES) {
		for (unsigned int i = 0; i < SITE_SAMPLES / 2; i++)
			f->s[i] = f->s[2 * i + 1];
		f->n = SITE_SAMPLES / 2;
	}
	memsites__frag_now(ms, p->pid, slot, ts, &f->s[f->n++]);
}

static void count_suspects(struct ms_proc *p)
{
	p->leak_sites = 0;
	for (size_t i = 0; i < p->nsites; i++)
		p->leak_sites += p->sites[i]->suspected;
}

static void on_tick(void *ctx, __u32 pid, __u64 ts, bool force)
{
	struct memsites *ms = ctx;
	struct ms_proc *p = hmap_get(&ms->procs, pid, 0);
	struct model_proc mp;

	if (!p || !p->nsites || (!force && ts < p->sample_next) || !model__process(ms->m, pid, &mp))
		return;
	if (!p->sample_every)
		p->sample_every = TICK_NS;
	for (size_t i = 0; i < p->nsites; i++)
		site_sample(p->sites[i], ts);
	for (int slot = 0; slot <= MEM_DEVS; slot++)
		frag_sample(ms, p, &mp, slot, ts);
	/* Leaks, live: every 8th tick, and the last. */
	if (force || p->nticks % 8 == 7) {
		__u64 before = p->leak_sites;

		for (size_t i = 0; i < p->nsites; i++)
			judge(ms, p->sites[i], ts);
		count_suspects(p);
		ms->leak_sites = ms->leak_sites - GS_MIN(before, ms->leak_sites) + p->leak_sites;
	}
	/* As the samples fill, half of them go: sample half as often from then on. */
	if (++p->nticks % (SITE_SAMPLES / 2) == 0)
		p->sample_every *= 2;
	p->sample_next = ts + p->sample_every;
}

/* ---- the trend test --------------------------------------------------------------------- */

/* Re-test a site; a newly suspected one is noted (timelines show it). The cheap half of the
 * test first: the window's bytes rising in each third (no site can be suspected otherwise),
 * O(samples) where the trend test is O(samples^2): the live check runs it on every site of
 * a process every 8th tick. */
static void judge(struct memsites *ms, struct mem_site *s, __u64 now)
{
	__u64 xs[SITE_SAMPLES + 1];
	unsigned int n = memsites__window(s, now, NULL, xs);
	struct leak_test t;

	if (n < MIN_WINDOW || !memsites__in_thirds(xs, n)) {
		s->suspected = false;
		return;
	}
	memsites__trend(s, now, &t);
	s->suspected = t.suspected;
	if (t.suspected) {
		/* (Kept: a site that grew for a while and then stopped is still worth
		 * showing.) */
		s->at_suspicion = t;
		s->suspected_last = now;
	}
	if (t.suspected && !s->suspected_since) {
		struct memsites_leak *l = &ms->recent[ms->leaks_total++ % RECENT_LEAKS];

		s->suspected_since = now;
		l->pid = s->pid;
		l->since = now;
		memsites__trend(s, s->suspected_since, &l->t);
		memsites__label(ms, s, 4, l->label, sizeof(l->label));
		l->live_bytes = s->live_bytes;
	}
}

__u64 memsites__leaks_check(struct memsites *ms, __u64 now)
{
	struct hmap_slot *sl;
	__u64 n = 0;

	hmap_for_each (&ms->procs, sl) {
		struct ms_proc *p = sl->val;
		struct model_proc mp;
		/* (A process that exited: as of its end.) */
		__u64 at = model__process(ms->m, p->pid, &mp) && mp.exited && mp.end_ts ? mp.end_ts
											: now;

		if (p->retired)
			continue;
		for (size_t i = 0; i < p->nsites; i++)
			judge(ms, p->sites[i], at);
		count_suspects(p);
		n += p->leak_sites;
	}
	ms->leak_sites = n;
	return n;
}

/* ---- out of memory ---------------------------------------------------------------------- */

static int more_live(const void *a, const void *b)
{
	const struct mem_site *x = *(struct mem_site *const *)a, *y = *(struct mem_site *const *)b;

	return x->live_bytes < y->live_bytes ? 1 : x->live_bytes > y->live_bytes ? -1 : 0;
}

struct others_ctx {
	__u32 pid;
	int slot;
	struct oom_finding *o;
};

static void other_proc(void *ctx, const struct model_proc *q)
{
	struct others_ctx *c = ctx;

	if (q->pid == c->pid || q->exited || !q->dev_in_use[c->slot])
		return;
	c->o->others++;
	c->o->others_bytes += q->dev_in_use[c->slot];
}

static const char *site_label_by_id(const struct memsites *ms, const struct ms_proc *p, __u32 id,
				    char *buf, size_t n)
{
	buf[0] = 0;
	for (size_t i = 0; p && i < p->nsites; i++)
		if (p->sites[i]->id == id) {
			memsites__label(ms, p->sites[i], 4, buf, n);
			break;
		}
	return buf;
}

static void oom(struct memsites *ms, struct ms_proc *p, const struct gs_ev_mem *e, int device,
		const struct mem_site *s)
{
	struct rep_oom *ro = &ms->last_oom;
	struct oom_finding *o = &ro->o;
	int slot = model__mem_slot(device);
	struct others_ctx oc = { e->h.pid, slot, o };
	struct model_proc mp = { 0 };
	struct mem_site **by;
	struct space sp;

	memset(ro, 0, sizeof(*ro));
	model__process(ms->m, e->h.pid, &mp);
	o->ts = e->h.ts;
	o->pid = e->h.pid;
	o->tid = e->h.tid;
	o->api = e->c.api;
	o->device = device;
	o->requested = e->size;
	o->site = s->id;
	o->live_dev = mp.dev_in_use[slot];
	o->live_all = mp.in_use[MK_DEVICE];
	if (device >= 0 && device < MEM_DEVS)
		o->have_nvml = model__nvml_memory(ms->m, device, &o->nvml_used, &o->nvml_total);
	model__each_process(ms->m, other_proc, &oc);
	memsites__space(ms, e->h.pid, slot, &sp);
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
	/* (Named now: the sites' stacks go with their process.) */
	site_label_by_id(ms, p, o->site, ro->site, sizeof(ro->site));
	for (unsigned int k = 0; k < o->ntop; k++)
		site_label_by_id(ms, p, o->top[k].site, ro->top[k], sizeof(ro->top[k]));
	if (ms->nooms < MAX_OOMS)
		ms->ooms[ms->nooms++] = *ro;
	ms->ooms_total++;
}

static void on_failed(void *ctx, const struct gs_ev_mem *e, int device)
{
	struct memsites *ms = ctx;
	int kind = e->op == GS_MEM_ALLOC_MANAGED ? MK_MANAGED
		   : e->op == GS_MEM_ALLOC_HOST	 ? MK_HOST
						 : MK_DEVICE;
	struct mem_site *s = site_of(ms, e, kind);
	struct mem_hist h = { .size = e->size,
			      .t0 = e->h.ts,
			      .pid = e->h.pid,
			      .site = s->id,
			      .api = e->c.api,
			      .device = (__s8)(device <= 127 ? device : -1),
			      .kind = (__u8)kind,
			      .failed = true };

	s->failed++;
	hist_add(ms, &h);
	if (e->c.result == CU_OUT_OF_MEMORY)
		oom(ms, ms_proc(ms, e->h.pid), e, device, s);
}

/* ---- a process retired or forgotten ------------------------------------------------------- */

static void site_free(void *v)
{
	struct mem_site *s = v;

	for (unsigned int i = 0; s->names && i < s->nnames; i++)
		free(s->names[i]);
	free(s->names);
	free(s);
}

static void proc_free(void *v)
{
	struct ms_proc *p = v;

	free(p->sites);
	for (int i = 0; i <= MEM_DEVS; i++)
		free(p->frag[i]);
	free(p);
}

/* What is kept of a process only while it lives: where its allocations came from. */
static void drop_live(struct memsites *ms, __u32 pid)
{
	hmap_drop_key(&ms->live, false, 0, pid, free);
	hmap_drop_key(&ms->vmm, false, 0, pid, NULL);
	hmap_drop_key(&ms->last_stack, true, 0, pid, free);
}

static void on_retire(void *ctx, __u32 pid)
{
	struct memsites *ms = ctx;
	struct ms_proc *p = hmap_get(&ms->procs, pid, 0);

	if (!p || p->retired)
		return;
	memsites__retire_report(ms, p);
	p->retired = true;
	drop_live(ms, pid);
	if (ms->keep_history) {
		/* (The memory map draws it at the end: its sites' names and its fragmentation
		 * stay.) */
		for (size_t i = 0; i < p->nsites; i++)
			memsites__keep_names(ms, p->sites[i]);
		return;
	}
	hmap_drop_key(&ms->sites, false, 0, pid, site_free);
	free(p->sites);
	p->sites = NULL;
	p->nsites = p->sites_cap = 0;
	for (int i = 0; i <= MEM_DEVS; i++) {
		free(p->frag[i]);
		p->frag[i] = NULL;
	}
}

static void on_forget(void *ctx, __u32 pid)
{
	struct memsites *ms = ctx;
	struct ms_proc *p = hmap_del(&ms->procs, pid, 0);

	drop_live(ms, pid);
	hmap_drop_key(&ms->sites, false, 0, pid, site_free);
	if (p)
		proc_free(p);
}

static const struct model_observer observer = { .alloc = on_alloc,
						.free = on_free,
						.vmm_create = on_vmm_create,
						.vmm_free = on_vmm_free,
						.failed = on_failed,
						.tick = on_tick,
						.stack = on_stack,
						.retire = on_retire,
						.forget = on_forget };

struct memsites *memsites__attach(struct model *m, bool keep_history)
{
	struct memsites *ms = xcalloc(1, sizeof(*ms));

	ms->m = m;
	ms->keep_history = keep_history;
	model__observe(m, &observer, ms);
	return ms;
}

void memsites__free(struct memsites *ms)
{
	if (!ms)
		return;
	hmap_free_with(&ms->procs, proc_free);
	hmap_free_with(&ms->sites, site_free);
	hmap_free_with(&ms->live, NULL);
	hmap_free(&ms->vmm);
	hmap_free_with(&ms->last_stack, NULL);
	free(ms->hist);
	free(ms->retired_frags);
	free(ms);
}
