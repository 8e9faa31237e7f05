// SPDX-License-Identifier: MIT
/*
 * The allocation model. Device bytes in use are linear device allocations plus VMM
 * physical memory; VMM physical memory lives from cuMemCreate until it is both released and
 * unmapped everywhere (the driver keeps released memory while a mapping uses it). Managed
 * and page-locked host memory are counted apart. A free of an address the model does not
 * know (attached late, or a wrong pointer that the driver rejects anyway) is counted, not
 * guessed at. Observers are told of every range that becomes live or goes, every VMM
 * physical handle, and every failed allocation.
 */
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/util.h"

static __u64 span(const struct range *r)
{
	return r->size ? r->size : 1;
}

/* Ranges never overlap, so "overlaps" is "equal" and the order is by address. */
static int range_cmp(const void *pa, const void *pb)
{
	const struct range *a = pa, *b = pb;

	if (a->addr + span(a) <= b->addr)
		return -1;
	if (a->addr >= b->addr + span(b))
		return 1;
	return 0;
}

static struct range *range_at(const struct proc *p, __u64 addr)
{
	struct range key = { .addr = addr, .size = 1 };
	void *const *node = tfind(&key, &p->ranges, range_cmp);

	return node ? *node : NULL;
}

int model__mem_slot(int device)
{
	return device >= 0 && device < MEM_DEVS ? device : MEM_DEVS;
}

static void public_of(const struct range *r, __u32 pid, struct model_alloc *a)
{
	*a = (struct model_alloc){ .addr = r->addr,
				   .size = r->size,
				   .ts = r->ts,
				   .handle = r->handle,
				   .pid = pid,
				   .tid = r->tid,
				   .api = r->api,
				   .kind = r->kind,
				   .device = r->device,
				   .pooled = r->pooled };
}

/* ---- contexts: which device a call was made for --------------------------------------- */

#define CTX_DEPTH 16

struct ctx_stack {
	__u64 ctx[CTX_DEPTH]; /* ctx[depth - 1] is current; deeper pushes are not followed */
	unsigned int depth;
};

void model__context_seen(struct model *m, __u32 pid, __u64 ctx, __s32 device)
{
	struct proc *p = model__proc(m, pid);
	__s32 *d;

	if (!ctx || device < 0)
		return;
	d = hmap_get(&p->ctx_dev, ctx, 0);
	if (!d) {
		d = xmalloc(sizeof(*d));
		hmap_put(&p->ctx_dev, ctx, 0, d);
	}
	*d = device;
}

static struct ctx_stack *ctx_stack(struct model *m, __u32 pid, __u32 tid)
{
	struct ctx_stack *t = hmap_get_or_new(&m->thread_ctx, tid, pid, sizeof(*t));

	return t;
}

void model__context_add(struct model *m, const struct gs_ev_api *e)
{
	struct ctx_stack *t;

	if (e->c.result)
		return;
	switch (e->c.api) {
	case GS_API_CU_DEVICE_PRIMARY_CTX_RETAIN:
		model__context_seen(m, e->h.pid, e->out, (__s32)e->arg1);
		break;
	case GS_API_CU_CTX_CREATE:
	case GS_API_CU_CTX_CREATE_V3:
	case GS_API_CU_CTX_CREATE_V4:
		/* A created context is also pushed onto the thread's stack. */
		model__context_seen(m, e->h.pid, e->out, (__s32)e->arg1);
		/* fall through */
	case GS_API_CU_CTX_PUSH_CURRENT:
		t = ctx_stack(m, e->h.pid, e->h.tid);
		if (t->depth < CTX_DEPTH)
			t->ctx[t->depth++] =
				e->c.api == GS_API_CU_CTX_PUSH_CURRENT ? e->arg0 : e->out;
		else
			t->ctx[CTX_DEPTH - 1] = e->arg0;
		break;
	case GS_API_CU_CTX_SET_CURRENT:
		/* Replaces the top of the stack; NULL pops it (as the driver does). */
		t = ctx_stack(m, e->h.pid, e->h.tid);
		if (!e->arg0)
			t->depth -= t->depth > 0;
		else if (t->depth)
			t->ctx[t->depth - 1] = e->arg0;
		else
			t->ctx[t->depth++] = e->arg0;
		break;
	case GS_API_CU_CTX_POP_CURRENT:
		t = ctx_stack(m, e->h.pid, e->h.tid);
		t->depth -= t->depth > 0;
		break;
	case GS_API_CU_CTX_DESTROY:
		/* Current to this thread: popped. (Elsewhere it is left: the driver says that
		 * is an error for the other threads' later calls.) */
		t = hmap_get(&m->thread_ctx, e->h.tid, e->h.pid);
		if (t && t->depth && t->ctx[t->depth - 1] == e->arg0)
			t->depth--;
		free(hmap_del(&model__proc(m, e->h.pid)->ctx_dev, e->arg0, 0));
		break;
	}
}

/* The device a call was for: as it said; else its thread's current context's; else the
 * process's only one. -1 if not known. */
static int device_of_call(struct model *m, struct proc *p, const struct gs_hdr *h, __s32 said)
{
	const struct ctx_stack *t;
	struct hmap_slot *s;
	const __s32 *d;
	int only = -1;

	if (said >= 0)
		return said;
	t = hmap_get(&m->thread_ctx, h->tid, h->pid);
	if (t && t->depth) {
		d = hmap_get(&p->ctx_dev, t->ctx[t->depth - 1], 0);
		if (d)
			return *d;
	}
	hmap_for_each (&p->ctx_dev, s) {
		d = s->val;
		if (only >= 0 && only != *d)
			return -1;
		only = *d;
	}
	return only;
}

/* ---- bytes in use ---------------------------------------------------------------------- */

static void use(struct model *m, struct proc *p, int kind, int device, __u64 bytes)
{
	int i = model__mem_slot(device);

	p->s.in_use[kind] += bytes;
	if (p->s.in_use[kind] > p->s.peak[kind])
		p->s.peak[kind] = p->s.in_use[kind];
	m->in_use[kind] += bytes;
	if (m->in_use[kind] > m->peak[kind])
		m->peak[kind] = m->in_use[kind];
	if (kind != MK_DEVICE)
		return;
	p->s.dev_in_use[i] += bytes;
	if (p->s.dev_in_use[i] > p->s.dev_peak[i])
		p->s.dev_peak[i] = p->s.dev_in_use[i];
}

static void unuse(struct model *m, struct proc *p, int kind, int device, __u64 bytes)
{
	int i = model__mem_slot(device);

	p->s.in_use[kind] -= GS_MIN(bytes, p->s.in_use[kind]);
	m->in_use[kind] -= GS_MIN(bytes, m->in_use[kind]);
	if (kind == MK_DEVICE)
		p->s.dev_in_use[i] -= GS_MIN(bytes, p->s.dev_in_use[i]);
}

static void range_remove(struct model *m, struct proc *p, struct range *r, __u64 ts)
{
	struct model_alloc a;

	if (!tdelete(r, &p->ranges, range_cmp))
		return;
	p->s.nranges--;
	if (r->kind < MEM_KINDS)
		unuse(m, p, r->kind, r->device, r->size);
	if (r->pooled)
		p->s.pool_in_use -= GS_MIN(r->size, p->s.pool_in_use);
	if (r->kind == MK_MAPPING)
		p->s.vmm_mapped -= GS_MIN(r->size, p->s.vmm_mapped);
	public_of(r, p->s.pid, &a);
	MODEL_NOTIFY(m, free, &a, ts);
	free(r);
}

static struct vmm_handle *vmm_get(struct proc *p, __u64 handle)
{
	return hmap_get(&p->vmm, handle, 0);
}

static void range_insert(struct model *m, struct proc *p, const struct gs_ev_mem *e, int kind,
			 __u64 handle)
{
	struct range *r = xcalloc(1, sizeof(*r));
	struct model_alloc a;
	void **old;
	int dev;

	r->addr = e->addr;
	r->size = GS_MIN(e->size, ~0ULL - e->addr); /* a range must not wrap around */
	r->ts = e->h.ts;
	r->tid = e->h.tid;
	r->api = e->c.api;
	r->kind = (__u8)kind;
	dev = kind == MK_DEVICE ? device_of_call(m, p, &e->h, e->device) : -1;
	if (kind == MK_MAPPING) { /* (on its physical memory's device) */
		const struct vmm_handle *v = vmm_get(p, handle);

		dev = v ? v->device : -1;
	}
	r->device = (__s8)(dev <= 127 ? dev : -1);
	r->handle = handle;
	r->pooled = e->op == GS_MEM_ALLOC_ASYNC;
	/* An overlap means a free we never saw: the old range is gone. */
	while ((old = tfind(r, &p->ranges, range_cmp))) {
		__u64 before = p->s.nranges;

		range_remove(m, p, *old, e->h.ts);
		if (p->s.nranges == before)
			break;
	}
	old = tsearch(r, &p->ranges, range_cmp);
	if (!old || *old != r) {
		free(r);
		return;
	}
	p->s.nranges++;
	if (kind < MEM_KINDS)
		use(m, p, kind, r->device, r->size);
	if (r->pooled) {
		p->s.pool_in_use += r->size;
		p->s.pool_peak = GS_MAX(p->s.pool_peak, p->s.pool_in_use);
	}
	if (kind == MK_MAPPING)
		p->s.vmm_mapped += r->size;
	public_of(r, p->s.pid, &a);
	MODEL_NOTIFY(m, alloc, &a, e);
}

static void vmm_maybe_free(struct model *m, struct proc *p, struct vmm_handle *v, __u64 ts)
{
	if (!v->released || v->mapped)
		return;
	unuse(m, p, MK_DEVICE, v->device, v->size);
	p->s.vmm_physical -= GS_MIN(v->size, p->s.vmm_physical);
	MODEL_NOTIFY(m, vmm_free, p->s.pid, v->handle, v->size, ts);
	p->s.frees++;
	hmap_del(&p->vmm, v->handle, 0);
	free(v);
}

static void free_linear(struct model *m, struct proc *p, const struct gs_ev_mem *e)
{
	struct range *r;

	if (!e->addr)
		return; /* cuMemFree(0) does nothing */
	r = range_at(p, e->addr);
	if (!r || r->addr != e->addr || r->kind == MK_MAPPING) {
		p->s.untracked_frees++;
		return;
	}
	range_remove(m, p, r, e->h.ts);
	p->s.frees++;
}

/* cuMemUnmap may cover several mappings. */
static void unmap(struct model *m, struct proc *p, const struct gs_ev_mem *e)
{
	__u64 at = e->addr, end = e->addr + GS_MIN(GS_MAX(e->size, 1), ~0ULL - e->addr);
	bool any = false;

	while (at < end) {
		struct range *r = range_at(p, at);
		struct vmm_handle *v;
		__u64 next;

		if (!r || r->kind != MK_MAPPING)
			break;
		next = r->addr + span(r);
		v = vmm_get(p, r->handle);
		range_remove(m, p, r, e->h.ts);
		any = true;
		if (v && v->mapped) {
			v->mapped--;
			vmm_maybe_free(m, p, v, e->h.ts);
		}
		at = next;
	}
	if (!any)
		p->s.untracked_frees++;
}

static void count_alloc(struct model *m, struct proc *p, const struct gs_ev_mem *e)
{
	p->s.allocs++;
	m->alloc_calls[e->c.api]++;
	m->alloc_bytes[e->c.api] += e->size;
}

static void vmm_create(struct model *m, struct proc *p, const struct gs_ev_mem *e)
{
	struct vmm_handle *v = xcalloc(1, sizeof(*v));

	v->handle = e->addr;
	v->size = e->size;
	v->ts = e->h.ts;
	v->tid = e->h.tid;
	v->device = device_of_call(m, p, &e->h, e->device);
	v->api = e->c.api;
	MODEL_NOTIFY(m, vmm_create, e);
	use(m, p, MK_DEVICE, v->device, e->size);
	p->s.vmm_physical += e->size;
	v = hmap_put(&p->vmm, e->addr, 0, v);
	if (v) { /* a handle value reused without a release we saw */
		unuse(m, p, MK_DEVICE, v->device, v->size);
		p->s.vmm_physical -= GS_MIN(v->size, p->s.vmm_physical);
		MODEL_NOTIFY(m, vmm_free, p->s.pid, v->handle, v->size, e->h.ts);
		free(v);
	}
	count_alloc(m, p, e);
}

static void reserve(struct proc *p, const struct gs_ev_mem *e)
{
	struct range *r;

	if (e->op == GS_MEM_VA_RESERVE) {
		r = xcalloc(1, sizeof(*r));
		r->addr = e->addr;
		r->size = e->size;
		r->ts = e->h.ts;
		r->api = e->c.api;
		free(hmap_put(&p->resv, e->addr, 0, r));
		p->s.reserved += e->size;
	} else if ((r = hmap_del(&p->resv, e->addr, 0))) {
		p->s.reserved -= GS_MIN(r->size, p->s.reserved);
		free(r);
	}
}

void model__memory_add(struct model *m, struct proc *p, const struct gs_ev_mem *e)
{
	struct vmm_handle *v;

	if (e->c.result) {
		switch (e->op) {
		case GS_MEM_ALLOC:
		case GS_MEM_ALLOC_MANAGED:
		case GS_MEM_ALLOC_HOST:
		case GS_MEM_ALLOC_ASYNC:
		case GS_MEM_VMM_CREATE:
			p->s.failed_allocs++;
			MODEL_NOTIFY(m, failed, e, device_of_call(m, p, &e->h, e->device));
			break;
		}
		return;
	}
	switch (e->op) {
	case GS_MEM_ALLOC:
	case GS_MEM_ALLOC_ASYNC:
	case GS_MEM_ALLOC_MANAGED:
	case GS_MEM_ALLOC_HOST:
		if (!e->addr)
			break;
		range_insert(m, p, e,
			     e->op == GS_MEM_ALLOC_MANAGED ? MK_MANAGED
			     : e->op == GS_MEM_ALLOC_HOST  ? MK_HOST
							   : MK_DEVICE,
			     0);
		count_alloc(m, p, e);
		break;
	case GS_MEM_FREE:
	case GS_MEM_FREE_ASYNC:
	case GS_MEM_FREE_HOST:
		free_linear(m, p, e);
		break;
	case GS_MEM_VMM_CREATE:
		vmm_create(m, p, e);
		break;
	case GS_MEM_VMM_RELEASE:
		v = vmm_get(p, e->addr);
		if (!v) {
			p->s.untracked_frees++;
			break;
		}
		v->released = true;
		vmm_maybe_free(m, p, v, e->h.ts);
		break;
	case GS_MEM_VMM_MAP:
		range_insert(m, p, e, MK_MAPPING, e->aux);
		v = vmm_get(p, e->aux);
		if (v)
			v->mapped++;
		break;
	case GS_MEM_VMM_UNMAP:
		unmap(m, p, e);
		break;
	case GS_MEM_VA_RESERVE:
	case GS_MEM_VA_FREE:
		reserve(p, e);
		break;
	}
}

int model__classify(const struct model *m, __u32 pid, __u64 addr)
{
	const struct proc *p = model__proc_get(m, pid);
	const struct range *r;

	if (!p)
		return -1;
	r = range_at(p, addr);
	if (r)
		return r->kind == MK_MAPPING ? MK_DEVICE : r->kind;
	return p->s.complete ? MK_HOST : -1;
}

/* Memory gpuscope saw allocated as page-locked host memory (not merely unknown). */
static bool known_host(const struct proc *p, __u64 addr)
{
	const struct range *r = p ? range_at(p, addr) : NULL;

	return r && r->kind == MK_HOST;
}

unsigned int model__copy_direction(const struct model *m, __u32 pid, unsigned int kind,
				   __u64 dst_addr, __u64 src_addr)
{
	int dst, src;

	/* The API's direction, unless a side it calls the device's is page-locked host memory
	 * gpuscope saw allocated (XLA copies from cuMemHostAlloc'd memory with
	 * cuMemcpyDtoHAsync): the copy engine, and CUPTI, say host then. */
	if (kind == GS_COPY_HTOD || kind == GS_COPY_DTOH || kind == GS_COPY_DTOD) {
		const struct proc *p = model__proc_get(m, pid);
		bool sh = kind == GS_COPY_HTOD || known_host(p, src_addr),
		     dh = kind == GS_COPY_DTOH || known_host(p, dst_addr);

		return sh ? (dh ? GS_COPY_HTOH : GS_COPY_HTOD) : (dh ? GS_COPY_DTOH : GS_COPY_DTOD);
	}
	if (kind != GS_COPY_DEFAULT)
		return kind;
	dst = model__classify(m, pid, dst_addr);
	src = model__classify(m, pid, src_addr);
	if (dst < 0 || src < 0)
		return GS_COPY_UNKNOWN;
	if (src == MK_HOST)
		return dst == MK_HOST ? GS_COPY_HTOH : GS_COPY_HTOD;
	return dst == MK_HOST ? GS_COPY_DTOH : GS_COPY_DTOD;
}

struct walk_ctx {
	void (*fn)(const struct range *r, void *ctx);
	void *ctx;
};

static void walk_action(const void *node, VISIT which, void *closure)
{
	struct walk_ctx *w = closure;

	if (which == postorder || which == leaf)
		w->fn(*(const struct range *const *)node, w->ctx);
}

void model__walk_ranges(const struct proc *p, void (*fn)(const struct range *r, void *ctx),
			void *ctx)
{
	struct walk_ctx w = { fn, ctx };

	twalk_r(p->ranges, walk_action, &w);
}

struct each_ctx {
	__u32 pid;
	void (*fn)(void *ctx, const struct model_alloc *a);
	void *ctx;
};

static void each_visit(const struct range *r, void *ctx)
{
	struct each_ctx *c = ctx;
	struct model_alloc a;

	public_of(r, c->pid, &a);
	c->fn(c->ctx, &a);
}

void model__each_alloc(const struct model *m, __u32 pid,
		       void (*fn)(void *ctx, const struct model_alloc *a), void *ctx)
{
	const struct proc *p = model__proc_get(m, pid);
	struct each_ctx c = { pid, fn, ctx };

	if (p)
		model__walk_ranges(p, each_visit, &c);
}

bool model__nvml_memory(const struct model *m, int gpu, __u64 *used, __u64 *total)
{
	if (gpu < 0 || gpu >= MEM_DEVS || !m->nvml_mem[gpu].have)
		return false;
	*used = m->nvml_mem[gpu].used;
	*total = m->nvml_mem[gpu].total;
	return true;
}

/* ---- a retired process: its outstanding allocations summed, the rest freed ---------------- */

static void retired_largest(struct model *m, const struct model_alloc *a)
{
	size_t i = m->nretired_largest < 10 ? m->nretired_largest++ : 9;

	if (i == 9 && m->nretired_largest == 10 && m->retired_largest[i].size >= a->size)
		return;
	m->retired_largest[i] = *a;
	/* (As the report keeps them: by size, then address.) */
	while (i > 0 && (m->retired_largest[i - 1].size < m->retired_largest[i].size ||
			 (m->retired_largest[i - 1].size == m->retired_largest[i].size &&
			  m->retired_largest[i - 1].addr > m->retired_largest[i].addr))) {
		struct model_alloc t = m->retired_largest[i - 1];

		m->retired_largest[i - 1] = m->retired_largest[i];
		m->retired_largest[i] = t;
		i--;
	}
}

static void retired_alloc(struct model *m, struct proc *p, const struct model_alloc *a)
{
	size_t i;

	p->outstanding[a->kind] += a->size;
	for (i = 0; i < m->nretired_allocs; i++)
		if (m->retired_allocs[i].api == a->api && m->retired_allocs[i].kind == a->kind &&
		    m->retired_allocs[i].size == a->size)
			break;
	if (i == m->nretired_allocs) {
		m->retired_allocs = xrealloc(m->retired_allocs,
					     (m->nretired_allocs + 1) * sizeof(*m->retired_allocs));
		m->retired_allocs[m->nretired_allocs++] =
			(struct retired_alloc){ a->api, a->kind, a->size, 0 };
	}
	m->retired_allocs[i].count++;
	retired_largest(m, a);
}

struct retire_ctx {
	struct model *m;
	struct proc *p;
};

static void retire_visit(const struct range *r, void *ctx)
{
	struct retire_ctx *c = ctx;
	struct model_alloc a;

	if (r->kind >= MEM_KINDS)
		return;
	public_of(r, c->p->s.pid, &a);
	retired_alloc(c->m, c->p, &a);
}

void model__memory_retire(struct model *m, struct proc *p)
{
	struct retire_ctx c = { m, p };
	struct hmap_slot *s;

	model__walk_ranges(p, retire_visit, &c);
	hmap_for_each (&p->vmm, s) {
		const struct vmm_handle *h = s->val;
		struct model_alloc a = { .addr = h->handle,
					 .size = h->size,
					 .ts = h->ts,
					 .pid = p->s.pid,
					 .tid = h->tid,
					 .api = h->api,
					 .kind = MK_DEVICE };

		retired_alloc(m, p, &a);
	}
	model__memory_free(p);
}

void model__memory_free(struct proc *p)
{
	tdestroy(p->ranges, free);
	p->ranges = NULL;
	hmap_free_with(&p->vmm, NULL);
	hmap_free_with(&p->resv, NULL);
	hmap_free_with(&p->ctx_dev, NULL);
}
