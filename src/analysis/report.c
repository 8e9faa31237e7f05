// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/findings.h"
#include "analysis/memsites.h"
#include "analysis/report_int.h"
#include "core/demangle.h"
#include "core/names.h"
#include "core/util.h"

/* Three-way comparison without the overflow of a subtraction. */

/* ---- kernels ---------------------------------------------------------------------------- */

/* A kernel's statistics with its name: a live process's handle, or a retired name's. */
struct named_kstat {
	const char *name;
	const struct kstat *k;
};

static int by_name(const void *a, const void *b)
{
	const struct named_kstat *x = a, *y = b;

	int c;

	if (!x->name || !y->name)
		c = (!x->name) - (!y->name);
	else
		c = strcmp(x->name, y->name);
	/* Equal names: by process, then handle, so merging does not depend on hash order. */
	if (!c && x->k->pid != y->k->pid)
		c = x->k->pid < y->k->pid ? -1 : 1;
	if (!c && x->k->handle != y->k->handle)
		c = x->k->handle < y->k->handle ? -1 : 1;
	return c;
}

static void rep_of(struct rep_kernel *rk, const struct kstat *k)
{
	rk->nprocs = k->nprocs;
	rk->launches = k->launches;
	rk->captured = k->captured;
	rk->graph_runs = k->graph_runs;
	rk->errors = k->errors;
	rk->call_ns = kstat_call_ns(k);
	rk->flags = k->flags;
	memcpy(rk->shapes, k->shapes, sizeof(rk->shapes));
	rk->other_shapes = k->other_shapes;
	memcpy(rk->apis, k->apis, sizeof(rk->apis));
	rk->gpu = k->gpu; /* (its own: the merged entry's is not freed) */
}

static int by_runs(const void *a, const void *b)
{
	const struct rep_kernel *x = a, *y = b;
	__u64 rx = x->launches - x->captured + x->graph_runs;
	__u64 ry = y->launches - y->captured + y->graph_runs;

	if (rx != ry)
		return rx < ry ? 1 : -1;
	if (strcmp(x->display, y->display))
		return strcmp(x->display, y->display);
	return GS_CMP(x->pid, y->pid);
}

/* Kernels that keep their own name (renamed handles', retired processes'). */
static size_t add_named(struct named_kstat *v, size_t n, const struct hmap *h)
{
	const struct hmap_slot *s;

	hmap_for_each (h, s) {
		v[n].k = s->val;
		v[n++].name = ((const struct kstat *)s->val)->name;
	}
	return n;
}

static void build_kernels(struct report *r, const struct model *m)
{
	struct named_kstat *v = xcalloc(
		m->kernels.len + m->renamed_kernels.len + m->retired_kernels.len + 1, sizeof(*v));
	struct kstat *acc;
	const struct hmap_slot *s;
	size_t n = 0;

	hmap_for_each (&m->kernels, s) {
		const struct kstat *k = s->val;

		v[n].k = k;
		v[n++].name = model__kernel_name(m, k->pid, k->handle);
	}
	n = add_named(v, n, &m->renamed_kernels);
	n = add_named(v, n, &m->retired_kernels);
	qsort(v, n, sizeof(*v), by_name);
	r->kernels = xcalloc(n + 1, sizeof(*r->kernels));
	acc = xcalloc(n + 1, sizeof(*acc));
	for (size_t i = 0; i < n; i++) {
		struct rep_kernel *rk;

		if (v[i].name && r->nkernels && r->kernels[r->nkernels - 1].mangled &&
		    !strcmp(r->kernels[r->nkernels - 1].mangled, v[i].name)) {
			model__kstat_merge(&acc[r->nkernels - 1], v[i].k);
			continue;
		}
		rk = &r->kernels[r->nkernels];
		model__kstat_merge(&acc[r->nkernels++], v[i].k);
		if (v[i].name) {
			rk->mangled = xstrdup(v[i].name);
			rk->display = demangle(v[i].name);
		} else {
			char buf[96];

			snprintf(buf, sizeof(buf), "unknown kernel 0x%llx (pid %u)",
				 (unsigned long long)v[i].k->handle, v[i].k->pid);
			rk->display = xstrdup(buf);
			rk->handle = v[i].k->handle;
			r->unknown_kernels++;
			r->unknown_launches += v[i].k->launches;
		}
	}
	for (size_t i = 0; i < r->nkernels; i++) {
		rep_of(&r->kernels[i], &acc[i]);
		r->kernels[i].pid = acc[i].pid;
	}
	free(acc);
	free(v);
	qsort(r->kernels, r->nkernels, sizeof(*r->kernels), by_runs);
	r->launches = m->launches;
	r->launch_errors = m->launch_errors;
	r->results_unread = m->results_unread;
	r->graph_launches = m->graph_launches;
	r->cond_graph_launches = m->cond_graph_launches;
	r->graph_nodes_lost = m->graph_nodes_lost;
	r->graph_launches_unseen = m->graph_launches_unseen;
	r->graphs = m->graph_execs.len + m->retired_graphs;
	r->nameless = m->nameless;
	r->driver_names = m->driver_names;
	for (size_t i = 0; i < r->nkernels; i++)
		r->kernel_runs_in_graphs += r->kernels[i].graph_runs;
}

static void build_launch_apis(struct report *r, const struct model *m)
{
	r->launch_apis = xcalloc(GS_API_MAX, sizeof(*r->launch_apis));
	for (int a = 1; a < GS_API_MAX; a++)
		if (api_desc(a)->family == GS_FAM_LAUNCH && m->api_calls[a]) {
			r->launch_apis[r->nlaunch_apis].api = (__u16)a;
			r->launch_apis[r->nlaunch_apis++].count = m->api_calls[a];
		}
}

/* ---- memory ----------------------------------------------------------------------------- */

struct outstanding_ctx {
	struct report *r;
	const struct proc *p;
	size_t cap;
};

static void note_largest(struct report *r, const struct rep_alloc *a)
{
	size_t i = r->nlargest < REP_LARGEST ? r->nlargest++ : REP_LARGEST - 1;

	if (i == REP_LARGEST - 1 && r->nlargest == REP_LARGEST && r->largest[i].size >= a->size)
		return;
	r->largest[i] = *a;
	/* Keep descending order by size (then address) with one insertion step. */
	while (i > 0 && (r->largest[i - 1].size < r->largest[i].size ||
			 (r->largest[i - 1].size == r->largest[i].size &&
			  r->largest[i - 1].addr > r->largest[i].addr))) {
		struct rep_alloc t = r->largest[i - 1];

		r->largest[i - 1] = r->largest[i];
		r->largest[i] = t;
		i--;
	}
}

static void add_outstanding(struct outstanding_ctx *c, __u16 api, __u8 kind, __u64 addr, __u64 size,
			    __u64 ts, __u32 tid)
{
	struct report *r = c->r;
	struct rep_alloc a = { c->p->s.pid, tid, api, kind, addr, size, ts };
	size_t i;

	r->outstanding_count[kind]++;
	r->outstanding_bytes[kind] += size;
	for (i = 0; i < r->noutstanding; i++)
		if (r->outstanding[i].api == api && r->outstanding[i].kind == kind &&
		    r->outstanding[i].size == size)
			break;
	if (i == r->noutstanding) {
		if (r->noutstanding == c->cap) {
			c->cap = c->cap ? c->cap * 2 : 16;
			r->outstanding = xrealloc(r->outstanding, c->cap * sizeof(*r->outstanding));
		}
		r->outstanding[i] = (struct rep_outstanding){ api, kind, size, 0 };
		r->noutstanding++;
	}
	r->outstanding[i].count++;
	note_largest(r, &a);
}

static void outstanding_range(const struct range *rg, void *ctx)
{
	if (rg->kind < MEM_KINDS)
		add_outstanding(ctx, rg->api, rg->kind, rg->addr, rg->size, rg->ts, rg->tid);
}

static int by_bytes(const void *a, const void *b)
{
	const struct rep_outstanding *x = a, *y = b;
	__u64 bx = x->size * x->count, by = y->size * y->count;

	if (bx != by)
		return bx < by ? 1 : -1;
	if (x->api != y->api)
		return GS_CMP(x->api, y->api);
	if (x->kind != y->kind)
		return GS_CMP(x->kind, y->kind);
	return GS_CMP(x->size, y->size);
}

static int by_pid(const void *a, const void *b)
{
	const struct rep_proc *x = a, *y = b;

	return GS_CMP(x->s.pid, y->s.pid);
}

static void rep_proc_of(struct rep_proc *rp, const struct proc *p)
{
	rp->s = p->s;
	rp->cmdline = p->s.cmdline ? xstrdup(p->s.cmdline) : NULL;
	rp->cgroup = p->s.cgroup ? xstrdup(p->s.cgroup) : NULL;
	rp->exe = xstrdup(p->s.exe ? p->s.exe : "");
	rp->s.cmdline = rp->s.cgroup = rp->s.exe = NULL; /* (the model's: the report's own) */
	rp->has_os = p->os || p->os_done;
	if (p->os_done)
		os_result_copy(p->os_done, &rp->os);
	else
		model__os_result(p->os, &rp->os);
}

/* What retired processes never freed (summed when they were retired). */
static void retired_outstanding(struct report *r, const struct model *m, struct outstanding_ctx *c)
{
	for (size_t i = 0; i < m->nretired_allocs; i++) {
		const struct retired_alloc *a = &m->retired_allocs[i];
		size_t k;

		r->outstanding_count[a->kind] += a->count;
		r->outstanding_bytes[a->kind] += a->size * a->count;
		for (k = 0; k < r->noutstanding; k++)
			if (r->outstanding[k].api == a->api && r->outstanding[k].kind == a->kind &&
			    r->outstanding[k].size == a->size)
				break;
		if (k == r->noutstanding) {
			if (r->noutstanding == c->cap) {
				c->cap = c->cap ? c->cap * 2 : 16;
				r->outstanding =
					xrealloc(r->outstanding, c->cap * sizeof(*r->outstanding));
			}
			r->outstanding[k] = (struct rep_outstanding){ a->api, a->kind, a->size, 0 };
			r->noutstanding++;
		}
		r->outstanding[k].count += a->count;
	}
	for (size_t i = 0; i < m->nretired_largest; i++) {
		const struct model_alloc *l = &m->retired_largest[i];
		struct rep_alloc a = { l->pid, l->tid, l->api, l->kind, l->addr, l->size, l->ts };

		note_largest(r, &a);
	}
}

static void build_memory(struct report *r, const struct model *m)
{
	struct outstanding_ctx ctx = { .r = r };
	const struct hmap_slot *s;

	r->alloc_apis = xcalloc(GS_API_MAX, sizeof(*r->alloc_apis));
	r->alloc_api_bytes = xcalloc(GS_API_MAX, sizeof(*r->alloc_api_bytes));
	for (int a = 1; a < GS_API_MAX; a++)
		if (m->alloc_calls[a]) {
			r->alloc_apis[r->nalloc_apis].api = (__u16)a;
			r->alloc_api_bytes[r->nalloc_apis] = m->alloc_bytes[a];
			r->alloc_apis[r->nalloc_apis++].count = m->alloc_calls[a];
		}
	memcpy(r->peak, m->peak, sizeof(r->peak));
	memcpy(r->in_use_end, m->in_use, sizeof(r->in_use_end));
	r->procs = xcalloc(m->procs.len + 1, sizeof(*r->procs));
	hmap_for_each (&m->procs, s) {
		const struct proc *p = s->val;
		struct rep_proc *rp = &r->procs[r->nprocs++];
		const struct hmap_slot *v;
		__u64 before[MEM_KINDS];

		ctx.p = p;
		memcpy(before, r->outstanding_bytes, sizeof(before));
		model__walk_ranges(p, outstanding_range, &ctx);
		hmap_for_each (&p->vmm, v) {
			const struct vmm_handle *h = v->val;

			add_outstanding(&ctx, h->api, MK_DEVICE, h->handle, h->size, h->ts, h->tid);
		}
		rep_proc_of(rp, p);
		for (int k = 0; k < MEM_KINDS; k++)
			rp->outstanding[k] =
				r->outstanding_bytes[k] - before[k] + p->outstanding[k];
		r->allocs += p->s.allocs;
		r->frees += p->s.frees;
		r->failed_allocs += p->s.failed_allocs;
		r->untracked_frees += p->s.untracked_frees;
		r->reserved += p->s.reserved;
	}
	retired_outstanding(r, m, &ctx);
	qsort(r->procs, r->nprocs, sizeof(*r->procs), by_pid);
	if (r->noutstanding)
		qsort(r->outstanding, r->noutstanding, sizeof(*r->outstanding), by_bytes);
}

/* ---- transfers, errors, session --------------------------------------------------------- */

static int by_total(const void *a, const void *b)
{
	const struct rep_sync *x = a, *y = b;

	if (x->s.total_ns != y->s.total_ns)
		return x->s.total_ns < y->s.total_ns ? 1 : -1;
	return GS_CMP(x->api, y->api);
}

static int by_count(const void *a, const void *b)
{
	const struct rep_error *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	if (x->api != y->api)
		return GS_CMP(x->api, y->api);
	return GS_CMP(x->result, y->result);
}

static int by_comm(const void *a, const void *b)
{
	const struct comm_entry *x = a, *y = b;

	if (x->pid != y->pid)
		return GS_CMP(x->pid, y->pid);
	if (x->rank != y->rank)
		return GS_CMP(x->rank, y->rank);
	return GS_CMP(x->comm, y->comm);
}

static void build_transfers(struct report *r, const struct model *m)
{
	const struct hmap_slot *s;

	memcpy(r->copies, m->copies, sizeof(r->copies));
	r->syncs = xcalloc(GS_API_MAX, sizeof(*r->syncs));
	for (int a = 1; a < GS_API_MAX; a++)
		if (m->syncs[a].calls) {
			r->syncs[r->nsyncs].api = (__u16)a;
			r->syncs[r->nsyncs++].s = m->syncs[a];
		}
	qsort(r->syncs, r->nsyncs, sizeof(*r->syncs), by_total);
	memcpy(r->nccl, m->nccl, sizeof(r->nccl));
	r->comms = xcalloc(m->comms.len + 1, sizeof(*r->comms));
	hmap_for_each (&m->comms, s)
		r->comms[r->ncomms++] = *(const struct comm_entry *)s->val;
	qsort(r->comms, r->ncomms, sizeof(*r->comms), by_comm);
}

static void build_errors(struct report *r, const struct model *m)
{
	const struct hmap_slot *s;

	r->errors = xcalloc(m->errors.len + 1, sizeof(*r->errors));
	hmap_for_each (&m->errors, s) {
		const struct err_stat *e = s->val;
		struct rep_error *re = &r->errors[r->nerrors++];

		re->api = e->api;
		re->result = e->result;
		re->count = e->count;
		re->first_ts = e->first_ts > r->start_ts ? e->first_ts - r->start_ts : 0;
		re->pid = e->pid;
		re->tid = e->tid;
		r->error_calls += e->count;
	}
	qsort(r->errors, r->nerrors, sizeof(*r->errors), by_count);
	if (m->have_drops) {
		memcpy(r->drops, m->drops.by_type, sizeof(r->drops));
		for (int t = 0; t < GS_EV_MAX; t++)
			r->drops_total += r->drops[t];
		r->lost_calls = m->drops.lost_calls;
		r->unwrapped = m->drops.unwrapped;
		r->rings_lost = m->drops.rings_lost;
		r->gates_forced = m->drops.gates_forced;
		r->time_capped = m->drops.time_capped;
		r->time_lost = m->drops.time_lost;
	}
	r->stacks_taken = m->stack_records;
	r->stacks_skipped = m->stacks_skipped;
}

static void build_host(struct report *r, const struct model *m)
{
	const struct hmap_slot *s;

	if (model__host(m)) {
		r->host = *model__host(m);
		r->has_host = true;
	}
	r->gpus_info = xcalloc(GS_GPUS_MAX, sizeof(*r->gpus_info));
	for (int i = 0; i < GS_GPUS_MAX; i++)
		if (model__gpu_info(m, i))
			r->gpus_info[r->ngpus_info++] = *model__gpu_info(m, i);
	r->blockdevs = xcalloc(m->blockdevs.len + 1, sizeof(*r->blockdevs));
	hmap_for_each (&m->blockdevs, s) {
		r->blockdevs[r->nblockdevs].dev = (__u32)s->k1;
		gs_strlcpy(r->blockdevs[r->nblockdevs].name, s->val,
			   sizeof(r->blockdevs[r->nblockdevs].name));
		r->nblockdevs++;
	}
}

const char *report__dev_name(const struct report *r, __u32 dev, char *buf, size_t n)
{
	for (size_t i = 0; i < r->nblockdevs; i++)
		if (r->blockdevs[i].dev == dev && r->blockdevs[i].name[0]) {
			snprintf(buf, n, "%s", r->blockdevs[i].name);
			return buf;
		}
	snprintf(buf, n, "%u:%u", dev >> 20, dev & 0xfffff);
	return buf;
}

static void build_session(struct report *r, const struct model *m)
{
	r->exit_status = -1;
	r->events = m->events;
	r->start_ts = m->have_start ? m->start.h.ts : m->first_ts;
	if (m->have_start) {
		r->mode = m->start.mode;
		memcpy(r->cmd, m->start.cmd, sizeof(r->cmd));
		r->cmd[sizeof(r->cmd) - 1] = 0;
		r->target_pid = m->start.target_pid;
		r->follow = m->start.follow;
		r->start_realtime_ns = m->start.realtime_ns;
	}
	if (m->have_end) {
		r->exit_status = m->end.exit_status;
		r->flags = m->end.flags;
		r->duration_ns = m->end.h.ts > r->start_ts ? m->end.h.ts - r->start_ts : 0;
	} else {
		r->duration_ns = m->last_ts > r->start_ts ? m->last_ts - r->start_ts : 0;
	}
	r->complete_recording = m->have_start && m->have_end;
	build_host(r, m);
	r->libs = xcalloc(m->nlibs + 1, sizeof(*r->libs));
	if (m->nlibs)
		memcpy(r->libs, m->libs, m->nlibs * sizeof(*r->libs));
	r->nlibs = m->nlibs;
}

struct report *report__build(const struct model *m, const struct findings *f,
			     const struct memsites *ms)
{
	struct report *r = xcalloc(1, sizeof(*r));

	build_session(r, m);
	build_kernels(r, m);
	build_launch_apis(r, m);
	build_memory(r, m);
	build_transfers(r, m);
	build_errors(r, m);
	report__build_gpu(r, m);
	if (ms)
		memsites__report(ms, r, r->start_ts, m->last_ts);
	report__build_devcode(r, m);
	r->os_plane = model__os_plane(m);
	model__os_result(&m->os, &r->os);
	r->os_min_us = m->have_start ? m->start.os_min_us : 0;
	if (f) {
		const struct finding *list = findings__list(f, &r->nfindings);

		r->findings = xcalloc(r->nfindings + 1, sizeof(*r->findings));
		memcpy(r->findings, list, r->nfindings * sizeof(*list));
		r->findings_total = findings__total(f);
	}
	r->t0 = r->start_ts;
	r->os_events = m->os_events;
	return r;
}

void report__free(struct report *r)
{
	if (!r)
		return;
	report__free_gpu(r);
	report__free_devcode(r);
	os_result_free(&r->os);
	for (size_t i = 0; i < r->nprocs; i++) {
		os_result_free(&r->procs[i].os);
		free(r->procs[i].cmdline);
		free(r->procs[i].cgroup);
		free(r->procs[i].exe);
	}
	for (size_t i = 0; i < r->nkernels; i++) {
		free(r->kernels[i].mangled);
		free(r->kernels[i].display);
	}
	/* (Arrays of plain items.) */
	void *arrays[] = {
		r->pyexc,   r->pyexc_findings, r->sites,      r->pylines,	  r->steps,
		r->ooms,    r->frags,	       r->findings,   r->gpus_info,	  r->blockdevs,
		r->kernels, r->launch_apis,    r->alloc_apis, r->alloc_api_bytes, r->libs,
		r->procs,   r->outstanding,    r->syncs,      r->comms,		  r->errors
	};

	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
		free(arrays[i]);
	free(r);
}
