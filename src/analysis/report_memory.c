// SPDX-License-Identifier: MIT
/* The memory analyses' part of the report (see analysis/memsites.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/report.h"
#include "core/names.h"
#include "core/util.h"

static __u64 rel(__u64 ts, __u64 t0)
{
	return ts > t0 ? ts - t0 : 0;
}

/* Suspected leaks first, fastest growing first; then those that grew for a while and
 * stopped, fastest first; then the most bytes outstanding. */
static int site_order(const void *a, const void *b)
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
	struct rep_site *sites;
	size_t n;
	__u32 pid;
	__u64 t0;
};

/* A site's oldest live allocations (ranges come in address order), oldest first. */
static void example_visit(const struct range *rg, void *ctx)
{
	struct examples_ctx *c = ctx;
	__u64 ts = rel(rg->ts, c->t0);

	if (!rg->site || rg->kind == MK_MAPPING)
		return;
	for (size_t i = 0; i < c->n; i++) {
		struct rep_site *s = &c->sites[i];
		unsigned int k;

		if (s->pid != c->pid || s->id != rg->site->id)
			continue;
		if (s->nexamples == REP_EXAMPLES && ts >= s->examples[REP_EXAMPLES - 1].ts)
			return;
		k = s->nexamples < REP_EXAMPLES ? s->nexamples++ : REP_EXAMPLES - 1;
		for (; k > 0 && s->examples[k - 1].ts > ts; k--)
			s->examples[k] = s->examples[k - 1];
		s->examples[k].addr = rg->addr;
		s->examples[k].size = rg->size;
		s->examples[k].ts = ts;
		return;
	}
}

static const char *label_of(const struct model *m, __u32 pid, __u32 id, char *buf, size_t n)
{
	const struct proc *p = hmap_get(&m->procs, pid, 0);

	buf[0] = 0;
	for (size_t i = 0; p && i < p->nsites; i++)
		if (p->sites[i]->id == id) {
			model__site_label(m, p->sites[i], 4, buf, n);
			break;
		}
	return buf;
}

void report__oom_of(const struct model *m, const struct oom_finding *o, struct rep_oom *out)
{
	out->o = *o;
	label_of(m, o->pid, o->site, out->site, sizeof(out->site));
	for (unsigned int k = 0; k < o->ntop; k++)
		label_of(m, o->pid, o->top[k].site, out->top[k], sizeof(out->top[k]));
}

void report__build_memory(struct report *r, const struct model *m)
{
	__u64 t0 = r->start_ts ? r->start_ts : m->first_ts, now = m->last_ts;
	struct rep_site *all;
	const struct hmap_slot *sl;
	size_t n = 0, nf = 0;

	all = xcalloc(m->sites.len + 1, sizeof(*all));
	hmap_for_each (&m->sites, sl) {
		const struct mem_site *s = sl->val;
		const struct proc *p = hmap_get(&m->procs, s->pid, 0);
		struct rep_site *o = &all[n++];

		o->pid = s->pid;
		o->id = s->id;
		o->api = s->api;
		o->kind = s->kind;
		o->exited = p && p->exited;
		o->live_bytes = s->live_bytes;
		o->live_count = s->live_count;
		o->peak_bytes = s->peak_bytes;
		o->allocs = s->allocs;
		o->alloc_bytes = s->alloc_bytes;
		o->frees = s->frees;
		o->failed = s->failed;
		/* As of the process's end if it ended, else of the trace's. */
		model__site_trend(s, o->exited && p->end_ts ? p->end_ts : now, &o->leak);
		o->suspected_since = s->suspected_since ? rel(s->suspected_since, t0) : 0;
		o->leak.from = rel(o->leak.from, t0);
		o->leak.to = rel(o->leak.to, t0);
		if (!o->leak.suspected && s->suspected_since) {
			o->grew = true;
			o->earlier = s->at_suspicion;
			o->earlier.from = rel(o->earlier.from, t0);
			o->earlier.to = rel(o->earlier.to, t0);
			o->suspected_last = rel(s->suspected_last, t0);
		}
		r->stacks |= s->stack != NULL;
		model__site_label(m, s, 4, o->label, sizeof(o->label));
		model__site_label(m, s, 16, o->stack, sizeof(o->stack));
	}
	r->sites_total = n;
	qsort(all, n, sizeof(*all), site_order);
	for (size_t i = 0; i < n; i++) {
		r->leaks += all[i].leak.suspected;
		r->grew += all[i].grew;
	}
	/* The suspected ones, those that were, and those holding the most; with nothing
	 * outstanding and no suspicion ever, a site is not worth a line. */
	while (n && !all[n - 1].leak.suspected && !all[n - 1].grew && !all[n - 1].live_bytes &&
	       !all[n - 1].failed)
		n--;
	r->nsites = GS_MIN(n, (size_t)REP_SITES);
	r->sites = all;
	hmap_for_each (&m->procs, sl) {
		const struct proc *p = sl->val;
		struct examples_ctx c = { r->sites, r->nsites, p->pid, t0 };

		if (p->nsites)
			model__walk_ranges(p, example_visit, &c);
	}

	r->ooms_total = m->ooms_total;
	r->nooms = m->nooms;
	r->ooms = xcalloc(m->nooms + 1, sizeof(*r->ooms));
	for (size_t i = 0; i < m->nooms; i++) {
		report__oom_of(m, &m->ooms[i], &r->ooms[i]);
		r->ooms[i].o.ts = rel(r->ooms[i].o.ts, t0);
	}

	hmap_for_each (&m->procs, sl) {
		const struct proc *p = sl->val;

		for (int d = 0; d <= MEM_DEVS; d++)
			nf += p->frag[d] && p->frag[d]->n;
	}
	r->frags = xcalloc(nf + 1, sizeof(*r->frags));
	hmap_for_each (&m->procs, sl) {
		const struct proc *p = sl->val;

		for (int d = 0; d <= MEM_DEVS; d++) {
			const struct mem_frag *f = p->frag[d];
			struct rep_frag *o;

			if (!f || !f->n)
				continue;
			o = &r->frags[r->nfrags++];
			o->pid = p->pid;
			o->device = d < MEM_DEVS ? d : -1;
			o->samples = f->n;
			o->last = f->s[f->n - 1];
			o->worst = f->s[0];
			for (unsigned int i = 1; i < f->n; i++)
				if (model__frag_score(&f->s[i]) > model__frag_score(&o->worst))
					o->worst = f->s[i];
			o->last.ts = rel(o->last.ts, t0);
			o->worst.ts = rel(o->worst.ts, t0);
		}
	}
}

void report__free_memory(struct report *r)
{
	free(r->sites);
	free(r->ooms);
	free(r->frags);
}

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
