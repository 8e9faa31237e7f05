// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/report.h"
#include "core/demangle.h"
#include "core/names.h"
#include "core/util.h"

/* Three-way comparison without the overflow of a subtraction. */
#define CMP3(a, b) ((a) < (b) ? -1 : (a) > (b))

/* ---- kernels ---------------------------------------------------------------------------- */

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

static void merge_shapes(struct rep_kernel *rk, const struct kstat *k)
{
	rk->other_shapes += k->other_shapes;
	for (int i = 0; i < KSTAT_SHAPES && k->shapes[i].count; i++) {
		const struct kshape *s = &k->shapes[i];
		int j;

		for (j = 0; j < KSTAT_SHAPES && rk->shapes[j].count; j++)
			if (!memcmp(rk->shapes[j].grid, s->grid, sizeof(s->grid)) &&
			    !memcmp(rk->shapes[j].block, s->block, sizeof(s->block)) &&
			    rk->shapes[j].shmem == s->shmem)
				break;
		if (j == KSTAT_SHAPES) {
			rk->other_shapes += s->count;
			continue;
		}
		if (!rk->shapes[j].count)
			rk->shapes[j] = *s;
		else
			rk->shapes[j].count += s->count;
	}
}

static void merge_apis(struct rep_kernel *rk, const struct kstat *k)
{
	for (int i = 0; i < KSTAT_APIS && k->apis[i].count; i++)
		for (int j = 0; j < KSTAT_APIS; j++) {
			if (!rk->apis[j].count)
				rk->apis[j].api = k->apis[i].api;
			if (rk->apis[j].api == k->apis[i].api) {
				rk->apis[j].count += k->apis[i].count;
				break;
			}
		}
}

static void merge_kstat(struct rep_kernel *rk, const struct kstat *k)
{
	rk->launches += k->launches;
	rk->captured += k->captured;
	rk->graph_runs += k->graph_runs;
	rk->errors += k->errors;
	rk->call_ns += k->call_ns;
	rk->flags |= k->flags;
	merge_shapes(rk, k);
	merge_apis(rk, k);
	report__merge_gpu(rk, k);
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
	return CMP3(x->pid, y->pid);
}

static void build_kernels(struct report *r, const struct model *m)
{
	struct named_kstat *v = xcalloc(m->kernels.len + 1, sizeof(*v));
	const struct hmap_slot *s;
	size_t n = 0;

	hmap_for_each (&m->kernels, s) {
		const struct kstat *k = s->val;

		v[n].k = k;
		v[n++].name = model__kernel_name(m, k->pid, k->handle);
	}
	qsort(v, n, sizeof(*v), by_name);
	r->kernels = xcalloc(n + 1, sizeof(*r->kernels));
	for (size_t i = 0; i < n; i++) {
		struct rep_kernel *rk;

		if (v[i].name && r->nkernels && r->kernels[r->nkernels - 1].mangled &&
		    !strcmp(r->kernels[r->nkernels - 1].mangled, v[i].name)) {
			rk = &r->kernels[r->nkernels - 1];
			rk->nprocs++;
			merge_kstat(rk, v[i].k);
			continue;
		}
		rk = &r->kernels[r->nkernels++];
		rk->pid = v[i].k->pid;
		rk->nprocs = 1;
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
		merge_kstat(rk, v[i].k);
	}
	free(v);
	qsort(r->kernels, r->nkernels, sizeof(*r->kernels), by_runs);
	r->launches = m->launches;
	r->launch_errors = m->launch_errors;
	r->graph_launches = m->graph_launches;
	r->graphs = m->graph_execs.len;
	r->nameless = m->nameless;
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
	struct rep_alloc a = { c->p->pid, tid, api, kind, addr, size, ts };
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
		return CMP3(x->api, y->api);
	if (x->kind != y->kind)
		return CMP3(x->kind, y->kind);
	return CMP3(x->size, y->size);
}

static int by_pid(const void *a, const void *b)
{
	const struct rep_proc *x = a, *y = b;

	return CMP3(x->pid, y->pid);
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
		rp->pid = p->pid;
		rp->ppid = p->ppid;
		memcpy(rp->comm, p->comm, sizeof(rp->comm));
		rp->os = p->os;
		memcpy(rp->exe, p->exe, sizeof(rp->exe));
		rp->complete = p->complete;
		rp->exited = p->exited;
		rp->exit_code = p->exit_code;
		rp->launches = p->launches;
		memcpy(rp->peak, p->peak, sizeof(rp->peak));
		memcpy(rp->dev_peak, p->dev_peak, sizeof(rp->dev_peak));
		memcpy(rp->dev_in_use, p->dev_in_use, sizeof(rp->dev_in_use));
		for (int k = 0; k < MEM_KINDS; k++)
			rp->outstanding[k] = r->outstanding_bytes[k] - before[k];
		rp->allocs = p->allocs;
		rp->frees = p->frees;
		rp->failed_allocs = p->failed_allocs;
		rp->untracked_frees = p->untracked_frees;
		rp->reserved = p->reserved;
		rp->pool_in_use = p->pool_in_use;
		rp->pool_peak = p->pool_peak;
		rp->vmm_physical = p->vmm_physical;
		rp->vmm_mapped = p->vmm_mapped;
		r->allocs += p->allocs;
		r->frees += p->frees;
		r->failed_allocs += p->failed_allocs;
		r->untracked_frees += p->untracked_frees;
		r->reserved += p->reserved;
	}
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
	return CMP3(x->api, y->api);
}

static int by_count(const void *a, const void *b)
{
	const struct rep_error *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	if (x->api != y->api)
		return CMP3(x->api, y->api);
	return CMP3(x->result, y->result);
}

static int by_comm(const void *a, const void *b)
{
	const struct comm_entry *x = a, *y = b;

	if (x->pid != y->pid)
		return CMP3(x->pid, y->pid);
	if (x->rank != y->rank)
		return CMP3(x->rank, y->rank);
	return CMP3(x->comm, y->comm);
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
	}
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
	r->libs = xcalloc(m->nlibs + 1, sizeof(*r->libs));
	if (m->nlibs)
		memcpy(r->libs, m->libs, m->nlibs * sizeof(*r->libs));
	r->nlibs = m->nlibs;
}

struct report *report__build(const struct model *m)
{
	struct report *r = xcalloc(1, sizeof(*r));

	build_session(r, m);
	build_kernels(r, m);
	build_launch_apis(r, m);
	build_memory(r, m);
	build_transfers(r, m);
	build_errors(r, m);
	report__build_gpu(r, m);
	report__build_memory(r, m);
	report__build_devcode(r, m);
	r->os_plane = m->have_start && (m->start.flags & GS_SESSION_OS);
	r->os = &m->os;
	r->os_min_us = m->have_start ? m->start.os_min_us : 0;
	r->findings = m->findings;
	r->nfindings = m->nfindings;
	r->findings_total = m->findings_total;
	r->t0 = m->have_start ? m->start.h.ts : m->first_ts;
	r->os_events = m->os_events;
	return r;
}

void report__free(struct report *r)
{
	if (!r)
		return;
	report__free_gpu(r);
	report__free_memory(r);
	report__free_devcode(r);
	for (size_t i = 0; i < r->nkernels; i++) {
		free(r->kernels[i].mangled);
		free(r->kernels[i].display);
	}
	free(r->kernels);
	free(r->launch_apis);
	free(r->alloc_apis);
	free(r->alloc_api_bytes);
	free(r->libs);
	free(r->procs);
	free(r->outstanding);
	free(r->syncs);
	free(r->comms);
	free(r->errors);
	free(r);
}
