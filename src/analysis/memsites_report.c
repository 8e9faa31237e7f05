// SPDX-License-Identifier: MIT
/* What the memory analyses hand out: the report's part, and the queries of timelines, the
 * status line, the agent and the memory map (see memsites.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/memsites_int.h"
#include "core/names.h"
#include "core/util.h"

static __u64 rel(__u64 ts, __u64 t0)
{
	return ts > t0 ? ts - t0 : 0;
}

void memsites__rep_site(const struct memsites *ms, const struct mem_site *s, bool exited,
			__u64 end_ts, __u64 now, struct rep_site *o)
{
	memset(o, 0, sizeof(*o));
	o->pid = s->pid;
	o->id = s->id;
	o->api = s->api;
	o->kind = s->kind;
	o->exited = exited;
	o->live_bytes = s->live_bytes;
	o->live_count = s->live_count;
	o->peak_bytes = s->peak_bytes;
	o->allocs = s->allocs;
	o->alloc_bytes = s->alloc_bytes;
	o->frees = s->frees;
	o->failed = s->failed;
	/* As of the process's end if it ended, else of the trace's. */
	memsites__trend(s, exited && end_ts ? end_ts : now, &o->leak);
	o->suspected_since = s->suspected_since;
	if (!o->leak.suspected && s->suspected_since) {
		o->grew = true;
		o->earlier = s->at_suspicion;
		o->suspected_last = s->suspected_last;
	}
	memsites__label(ms, s, 4, o->label, sizeof(o->label));
	memsites__label(ms, s, 16, o->stack, sizeof(o->stack));
}

/* Its times from t0 (kept as they were measured until the report is built). */
static void site_relative(struct rep_site *o, __u64 t0)
{
	o->suspected_since = o->suspected_since ? rel(o->suspected_since, t0) : 0;
	o->leak.from = rel(o->leak.from, t0);
	o->leak.to = rel(o->leak.to, t0);
	if (o->grew) {
		o->earlier.from = rel(o->earlier.from, t0);
		o->earlier.to = rel(o->earlier.to, t0);
		o->suspected_last = rel(o->suspected_last, t0);
	}
	for (unsigned int i = 0; i < o->nexamples; i++)
		o->examples[i].ts = rel(o->examples[i].ts, t0);
}

int memsites__site_order(const void *a, const void *b)
{
	const struct rep_site *x = a, *y = b;

	if (x->leak.suspected != y->leak.suspected)
		return x->leak.suspected ? -1 : 1;
	if (x->leak.suspected && x->leak.slope_bps != y->leak.slope_bps)
		return x->leak.slope_bps < y->leak.slope_bps ? 1 : -1;
	if (x->grew != y->grew)
		return x->grew ? -1 : 1;
	if (x->grew && x->earlier.slope_bps != y->earlier.slope_bps)
		return x->earlier.slope_bps < y->earlier.slope_bps ? 1 : -1;
	if (x->live_bytes != y->live_bytes)
		return x->live_bytes < y->live_bytes ? 1 : -1;
	return x->id < y->id ? -1 : x->id > y->id;
}

struct examples_ctx {
	const struct memsites *ms;
	struct rep_site *sites;
	size_t n;
	__u32 pid;
};

/* A site's oldest live allocations (ranges come in address order), oldest first. */
static void example_visit(void *ctx, const struct model_alloc *a)
{
	struct examples_ctx *c = ctx;
	const struct ms_live *l = hmap_get(&c->ms->live, a->pid, a->addr);

	if (!l || a->kind == MK_MAPPING)
		return;
	for (size_t i = 0; i < c->n; i++) {
		struct rep_site *s = &c->sites[i];
		unsigned int k;

		if (s->pid != c->pid || s->id != l->site->id)
			continue;
		if (s->nexamples == REP_EXAMPLES && a->ts >= s->examples[REP_EXAMPLES - 1].ts)
			return;
		k = s->nexamples < REP_EXAMPLES ? s->nexamples++ : REP_EXAMPLES - 1;
		for (; k > 0 && s->examples[k - 1].ts > a->ts; k--)
			s->examples[k] = s->examples[k - 1];
		s->examples[k].addr = a->addr;
		s->examples[k].size = a->size;
		s->examples[k].ts = a->ts;
		return;
	}
}

static void examples(const struct memsites *ms, __u32 pid, struct rep_site *sites, size_t n)
{
	struct examples_ctx c = { ms, sites, n, pid };

	model__each_alloc(ms->m, pid, example_visit, &c);
}

/* A process's fragmentation on a device slot, as the report shows it. */
static bool rep_frag_of(const struct ms_proc *p, int d, struct rep_frag *o)
{
	const struct mem_frag *f = p->frag[d];

	if (!f || !f->n)
		return false;
	o->pid = p->pid;
	o->device = d < MEM_DEVS ? d : -1;
	o->samples = f->n;
	o->last = f->s[f->n - 1];
	o->worst = f->s[0];
	for (unsigned int i = 1; i < f->n; i++)
		if (frag_score(&f->s[i]) > frag_score(&o->worst))
			o->worst = f->s[i];
	return true;
}

/* A retired site among the best kept: they stay sorted, REP_SITES at most. */
static void keep_retired(struct memsites *ms, const struct rep_site *o)
{
	size_t i = ms->nretired;

	if (i == REP_SITES) {
		if (memsites__site_order(o, &ms->retired[REP_SITES - 1]) >= 0)
			return;
		i--;
	} else {
		ms->nretired++;
	}
	for (; i > 0 && memsites__site_order(o, &ms->retired[i - 1]) < 0; i--)
		ms->retired[i] = ms->retired[i - 1];
	ms->retired[i] = *o;
}

void memsites__retire_report(struct memsites *ms, struct ms_proc *p)
{
	struct model_proc mp = { 0 };
	struct rep_site *v = xcalloc(p->nsites + 1, sizeof(*v));
	struct rep_frag f;

	model__process(ms->m, p->pid, &mp);
	for (size_t i = 0; i < p->nsites; i++) {
		memsites__rep_site(ms, p->sites[i], mp.exited, mp.end_ts, mp.end_ts, &v[i]);
		ms->retired_stacks |= p->sites[i]->stack != NULL;
		ms->retired_leaks += v[i].leak.suspected;
		ms->retired_grew += v[i].grew;
	}
	ms->retired_sites += p->nsites;
	examples(ms, p->pid, v, p->nsites);
	for (size_t i = 0; i < p->nsites; i++)
		keep_retired(ms, &v[i]);
	free(v);
	for (int d = 0; d <= MEM_DEVS; d++)
		if (rep_frag_of(p, d, &f)) {
			ms->retired_frags =
				xrealloc(ms->retired_frags,
					 (ms->nretired_frags + 1) * sizeof(*ms->retired_frags));
			ms->retired_frags[ms->nretired_frags++] = f;
		}
}

void memsites__report(const struct memsites *ms, struct report *r, __u64 t0, __u64 now)
{
	const struct hmap_slot *sl;
	struct rep_site *all = xcalloc(ms->sites.len + ms->nretired + 1, sizeof(*all));
	size_t n = 0, nf = ms->nretired_frags, live_from;

	hmap_for_each (&ms->procs, sl) {
		const struct ms_proc *p = sl->val;
		struct model_proc mp = { 0 };

		if (p->retired)
			continue;
		model__process(ms->m, p->pid, &mp);
		for (size_t i = 0; i < p->nsites; i++) {
			memsites__rep_site(ms, p->sites[i], mp.exited, mp.end_ts, now, &all[n++]);
			r->stacks |= p->sites[i]->stack != NULL;
		}
		for (int d = 0; d <= MEM_DEVS; d++)
			nf += p->frag[d] && p->frag[d]->n;
	}
	live_from = n;
	r->stacks |= ms->retired_stacks;
	for (size_t i = 0; i < ms->nretired; i++)
		all[n++] = ms->retired[i];
	r->sites_total = live_from + ms->retired_sites;
	r->leaks = ms->retired_leaks;
	r->grew = ms->retired_grew;
	for (size_t i = 0; i < live_from; i++) {
		r->leaks += all[i].leak.suspected;
		r->grew += all[i].grew;
	}
	qsort(all, n, sizeof(*all), memsites__site_order);
	/* The suspected ones, those that were, and those holding the most; with nothing
	 * outstanding and no suspicion ever, a site is not worth a line. */
	while (n && !all[n - 1].leak.suspected && !all[n - 1].grew && !all[n - 1].live_bytes &&
	       !all[n - 1].failed)
		n--;
	r->nsites = GS_MIN(n, (size_t)REP_SITES);
	r->sites = all;
	hmap_for_each (&ms->procs, sl) {
		const struct ms_proc *p = sl->val;

		if (!p->retired && p->nsites)
			examples(ms, p->pid, r->sites, r->nsites);
	}
	for (size_t i = 0; i < r->nsites; i++)
		site_relative(&r->sites[i], t0);

	r->ooms_total = ms->ooms_total;
	r->nooms = ms->nooms;
	r->ooms = xcalloc(ms->nooms + 1, sizeof(*r->ooms));
	for (size_t i = 0; i < ms->nooms; i++) {
		r->ooms[i] = ms->ooms[i];
		r->ooms[i].o.ts = rel(r->ooms[i].o.ts, t0);
	}

	r->frags = xcalloc(nf + 1, sizeof(*r->frags));
	hmap_for_each (&ms->procs, sl) {
		const struct ms_proc *p = sl->val;

		for (int d = 0; d <= MEM_DEVS && !p->retired; d++)
			r->nfrags += rep_frag_of(p, d, &r->frags[r->nfrags]);
	}
	for (size_t i = 0; i < ms->nretired_frags; i++)
		r->frags[r->nfrags++] = ms->retired_frags[i];
	for (size_t i = 0; i < r->nfrags; i++) {
		r->frags[i].last.ts = rel(r->frags[i].last.ts, t0);
		r->frags[i].worst.ts = rel(r->frags[i].worst.ts, t0);
	}
}

/* ---- queries ------------------------------------------------------------------------------ */

void memsites__status(const struct memsites *ms, __u64 *leak_sites, __u64 *ooms,
		      unsigned int *last_cause)
{
	*leak_sites = ms->leak_sites;
	*ooms = ms->ooms_total;
	*last_cause = ms->last_oom.o.cause;
}

bool memsites__proc(const struct memsites *ms, __u32 pid, struct memsites_proc *out)
{
	const struct ms_proc *p = hmap_get(&ms->procs, pid, 0);

	memset(out, 0, sizeof(*out));
	if (!p || !p->nsites)
		return false;
	out->leak_sites = p->leak_sites;
	for (size_t i = 0; i < p->nsites; i++)
		out->leak_bytes += p->sites[i]->suspected ? p->sites[i]->live_bytes : 0;
	memcpy(out->ooms, p->ooms, sizeof(out->ooms));
	for (int d = 0; d <= MEM_DEVS; d++) {
		struct frag_sample now;

		if (!p->frag[d])
			continue;
		memsites__frag_now(ms, pid, d, 0, &now);
		out->have_frag[d] = true;
		out->frag_now[d] = frag_score(&now);
	}
	return true;
}

__u64 memsites__ooms_total(const struct memsites *ms)
{
	return ms->ooms_total;
}

void memsites__last_oom(const struct memsites *ms, struct rep_oom *out)
{
	*out = ms->last_oom;
}

__u64 memsites__leaks_total(const struct memsites *ms)
{
	return ms->leaks_total;
}

const struct memsites_leak *memsites__leak(const struct memsites *ms, __u64 n)
{
	return n < ms->leaks_total && ms->leaks_total - n <= RECENT_LEAKS
		       ? &ms->recent[n % RECENT_LEAKS]
		       : NULL;
}

unsigned int memsites__ticks(const struct memsites *ms, __u32 pid)
{
	const struct ms_proc *p = hmap_get(&ms->procs, pid, 0);

	return p ? p->nticks : 0;
}

bool memsites__frag_last(const struct memsites *ms, __u32 pid, int slot, struct frag_sample *out)
{
	const struct ms_proc *p = hmap_get(&ms->procs, pid, 0);

	if (!p || !p->frag[slot] || !p->frag[slot]->n)
		return false;
	*out = p->frag[slot]->s[p->frag[slot]->n - 1];
	return true;
}

const struct mem_hist *memsites__history(const struct memsites *ms, size_t *n, bool *truncated)
{
	*n = ms->nhist;
	*truncated = ms->hist_truncated;
	return ms->hist;
}

void memsites__site_label(const struct memsites *ms, __u32 pid, __u32 site, unsigned int frames,
			  char *buf, size_t n)
{
	const struct ms_proc *p = hmap_get(&ms->procs, pid, 0);

	buf[0] = 0;
	for (size_t i = 0; p && i < p->nsites; i++)
		if (p->sites[i]->id == site) {
			memsites__label(ms, p->sites[i], frames, buf, n);
			return;
		}
}

const struct frag_sample *memsites__frag(const struct memsites *ms, __u32 pid, int slot,
					 unsigned int *n)
{
	const struct ms_proc *p = hmap_get(&ms->procs, pid, 0);

	*n = p && p->frag[slot] ? p->frag[slot]->n : 0;
	return *n ? p->frag[slot]->s : NULL;
}

/* ---- OOM findings in words ------------------------------------------------------------- */

const char *oom_cause_key(unsigned int cause)
{
	return cause == OOM_FRAGMENTATION ? "fragmentation"
	       : cause == OOM_UNCLEAR	  ? "unclear"
					  : "exhaustion";
}

const char *oom_cause_name(unsigned int cause)
{
	return cause == OOM_UNCLEAR ? "unclear (NVML saw enough free)" : oom_cause_key(cause);
}

const char *report__caching_allocator(const char *label)
{
	static const struct {
		const char *frame, *name;
	} known[] = {
		{ "CUDACachingAllocator", "PyTorch's caching allocator" },
		{ "BFCAllocator", "XLA's BFC allocator" },
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strstr(label, known[i].frame))
			return known[i].name;
	return NULL;
}

const char *report__oom_text(const struct rep_oom *ro, char *buf, size_t n)
{
	const char *cache = report__caching_allocator(ro->site);
	const struct oom_finding *o = &ro->o;
	char req[32], live[32], all[32], holes[32], big[32], used[32], total[32], other[32],
		str[32], piece[32];
	size_t len;

	fmt_bytes(req, sizeof(req), (double)o->requested);
	fmt_bytes(live, sizeof(live), (double)o->live_dev);
	fmt_bytes(all, sizeof(all), (double)o->live_all);
	fmt_bytes(holes, sizeof(holes), (double)o->holes);
	fmt_bytes(big, sizeof(big), (double)o->largest_hole);
	fmt_bytes(str, sizeof(str), (double)o->stranded);
	fmt_bytes(piece, sizeof(piece), (double)o->largest_stranded);
	len = (size_t)snprintf(buf, n, "%s of %s on GPU %d failed: %s. ", api_name(o->api), req,
			       o->device, oom_cause_name(o->cause));
	if (o->have_nvml) {
		fmt_bytes(used, sizeof(used), (double)o->nvml_used);
		fmt_bytes(total, sizeof(total), (double)o->nvml_total);
		len += (size_t)snprintf(buf + len, n - GS_MIN(len, n), "NVML: %s of %s used. ",
					used, total);
	}
	len += (size_t)snprintf(
		buf + len, n - GS_MIN(len, n),
		"This process held %s there (%s on all GPUs); free in its partly "
		"used 2 MiB pages: %s, the largest piece %s; free ranges between its "
		"allocations: %s, the largest %s",
		live, all, str, piece, holes, big);
	if (o->others) {
		fmt_bytes(other, sizeof(other), (double)o->others_bytes);
		len += (size_t)snprintf(buf + len, n - GS_MIN(len, n),
					"; %u other traced process%s held %s there", o->others,
					o->others == 1 ? "" : "es", other);
	}
	if (o->have_nvml && o->nvml_used > o->live_dev + o->others_bytes) {
		fmt_bytes(other, sizeof(other),
			  (double)(o->nvml_used - o->live_dev - o->others_bytes));
		len += (size_t)snprintf(buf + len, n - GS_MIN(len, n),
					"; %s used by what gpuscope does not see (other processes, "
					"the driver's own, pools' reserves)",
					other);
	}
	if (o->ntop && ro->top[0][0]) {
		fmt_bytes(other, sizeof(other), (double)o->top[0].bytes);
		len += (size_t)snprintf(buf + len, n - GS_MIN(len, n), "; most held by %s (%s)",
					ro->top[0], other);
	}
	len += (size_t)snprintf(buf + GS_MIN(len, n - 1), n - GS_MIN(len, n - 1), ".");
	if (cache)
		snprintf(buf + GS_MIN(len, n - 1), n - GS_MIN(len, n - 1),
			 " The call came from %s: the driver sees its segments, not what it handed "
			 "out of them, so memory it holds unused (its own fragmentation) is not "
			 "visible here; its own report is (torch.cuda.memory_summary() for "
			 "PyTorch).",
			 cache);
	return buf;
}
