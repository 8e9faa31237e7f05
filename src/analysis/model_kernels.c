// SPDX-License-Identifier: MIT
/*
 * Kernels: names per handle (and the aliases between handles), launch statistics per
 * handle, and the runs graphs add (what each graph runs: model_graphs.c). Launches captured
 * into a graph are counted as launches and marked captured; each launch of an instantiated
 * graph then adds one run to every kernel it runs. A retired process's kernels are merged
 * into one entry per name (its handles and names are process-local and go with it).
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/names.h"
#include "core/util.h"

#define NAME_KEY(pid, ns) ((__u64)(pid) << 1 | (ns))

static __u64 name_hash(const char *s);
static void free_kstat(void *v);

/* A driver handle named anew: what its old function ran keeps the old name (XLA unloads
 * its autotuning modules; the driver gives their handles to the next functions), one entry
 * a process and name however often that happens ((pid, name hash) probing on the hash). */
static void renamed(struct model *m, __u32 pid, __u64 handle, const char *old)
{
	struct kstat *k = hmap_del(&m->kernels, pid, handle), *into;
	__u64 h;

	if (!k)
		return;
	for (h = name_hash(old);; h++) {
		into = hmap_get(&m->renamed_kernels, pid, h);
		if (!into || !strcmp(into->name, old))
			break;
	}
	if (into) {
		model__kstat_merge(into, k);
		free_kstat(k);
		return;
	}
	k->name = xstrdup(old);
	hmap_put(&m->renamed_kernels, pid, h, k);
}

/* The same for the handles named by it (a kernel's function, cuKernelGetFunction's: cuDNN
 * launches those; the driver gives both handles out again together). */
static void renamed_with_aliases(struct model *m, __u32 pid, __u64 handle, const char *old)
{
	struct hmap_slot *s;

	renamed(m, pid, handle, old);
	hmap_for_each (&m->aliases, s) {
		const struct alias_entry *a = s->val;

		if (s->k1 == pid && a->target == handle && a->ns == GS_NS_DRIVER)
			renamed(m, pid, s->k2, old);
	}
}

void model__name_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_kname *e = (const void *)ev;
	struct name_entry *n;

	if (e->len == 0) {
		m->nameless++;
		return;
	}
	n = hmap_get(&m->names, NAME_KEY(e->h.pid, e->ns), e->handle);
	/* (A handle read again after an unload, its name unchanged: counted once.) */
	m->driver_names +=
		e->api == GS_API_NONE && e->ns == GS_NS_DRIVER && !(n && !strcmp(n->name, e->name));
	if (!n) {
		n = xcalloc(1, sizeof(*n));
		hmap_put(&m->names, NAME_KEY(e->h.pid, e->ns), e->handle, n);
	} else if (!strcmp(n->name, e->name)) {
		return;
	} else {
		if (e->ns == GS_NS_DRIVER)
			renamed_with_aliases(m, e->h.pid, e->handle, n->name);
		free(n->name);
	}
	n->name = xstrdup(e->name);
	n->api = e->api;
	n->ns = e->ns;
}

void model__alias_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_kalias *e = (const void *)ev;
	struct alias_entry *a = hmap_get_or_new(&m->aliases, e->h.pid, e->handle, sizeof(*a));

	a->target = e->target;
	a->ns = e->target_ns;
}

const char *model__kernel_name(const struct model *m, __u32 pid, __u64 handle)
{
	__u8 ns = GS_NS_DRIVER;

	/* Alias chains are short (function -> kernel -> host stub); bound them anyway. */
	for (int hop = 0; hop < 4; hop++) {
		const struct name_entry *n = hmap_get(&m->names, NAME_KEY(pid, ns), handle);
		const struct alias_entry *a;

		if (n)
			return n->name;
		if (ns != GS_NS_DRIVER)
			return NULL;
		a = hmap_get(&m->aliases, pid, handle);
		if (!a)
			return NULL;
		handle = a->target;
		ns = a->ns;
	}
	return NULL;
}

struct kstat *model__kstat(struct hmap *h, __u32 pid, __u64 handle)
{
	struct kstat *k = hmap_get(h, pid, handle);

	if (!k) {
		k = xcalloc(1, sizeof(*k));
		k->pid = pid;
		k->handle = handle;
		hmap_put(h, pid, handle, k);
	}
	return k;
}

static void count_shape(struct kstat *k, const struct gs_ev_launch *e)
{
	for (int i = 0; i < KSTAT_SHAPES; i++) {
		struct kshape *s = &k->shapes[i];

		if (s->count == 0) {
			memcpy(s->grid, e->grid, sizeof(s->grid));
			memcpy(s->block, e->block, sizeof(s->block));
			s->shmem = e->shmem;
		}
		if (!memcmp(s->grid, e->grid, sizeof(s->grid)) &&
		    !memcmp(s->block, e->block, sizeof(s->block)) && s->shmem == e->shmem) {
			s->count++;
			return;
		}
	}
	k->other_shapes++;
}

static void count_api(struct kstat *k, __u16 api)
{
	for (int i = 0; i < KSTAT_APIS; i++) {
		if (k->apis[i].count == 0)
			k->apis[i].api = api;
		if (k->apis[i].api == api) {
			k->apis[i].count++;
			return;
		}
	}
}

struct runs_of {
	struct model *m;
	__u32 pid;
};

static void add_runs(void *ctx, __u64 handle, __u64 count)
{
	struct runs_of *r = ctx;

	model__kstat(&r->m->kernels, r->pid, handle)->graph_runs += count;
}

static void add_call(struct kstat *k, const struct gs_ev_launch *e)
{
	if (e->flags & GS_LAUNCH_NO_RETURN)
		return;
	k->call_ns += e->c.dur_ns;
	k->call_seen++;
}

__u64 kstat_call_ns(const struct kstat *k)
{
	double v;

	if (!k->call_seen || k->call_seen >= k->launches)
		return k->call_ns;
	v = (double)k->call_ns * (double)k->launches / (double)k->call_seen;
	/* (Saturated: a recording's call times are anything.) */
	return v >= 0x1p64 ? UINT64_MAX : (__u64)v;
}

static void graph_launch(struct model *m, struct proc *p, const struct gs_ev_launch *e)
{
	struct kstat *g = model__kstat(&m->graph_execs, e->h.pid, e->func);
	struct runs_of r = { m, e->h.pid };
	__u64 bytes = 0;

	m->graph_launches++;
	if (e->c.result) {
		g->errors++;
		return;
	}
	g->launches++;
	add_call(g, e);
	m->graph_launches_unseen += !model__graph_known(p, e->func);
	if (model__graph_each(p, e->func, add_runs, &r))
		m->cond_graph_launches++;
	model__graph_ops(p, e->func, m->copies, &bytes);
	m->copy_bytes += bytes;
	p->s.copy_bytes += bytes;
}

void model__launch_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_launch *e = (const void *)ev;
	struct proc *p = model__proc(m, e->h.pid);
	struct kstat *k;

	model__note_error(m, &e->h, &e->c);
	/* (By API: the launches made, as the kernels count them; failures are errors.) */
	if (!e->c.result)
		m->api_calls[e->c.api]++;
	if (e->flags & GS_LAUNCH_NO_RETURN)
		m->results_unread++;
	if (e->flags & GS_LAUNCH_GRAPH) {
		graph_launch(m, p, e);
		return;
	}
	k = model__kstat(&m->kernels, e->h.pid, e->func);
	if (e->c.result) {
		k->errors++;
		m->launch_errors++;
		return;
	}
	k->launches++;
	add_call(k, e);
	k->flags |= e->flags & ~(__u32)GS_LAUNCH_NO_RETURN;
	count_shape(k, e);
	count_api(k, e->c.api);
	p->s.launches++;
	m->launches++;
	if (model__graph_captured(p, e->stream, e->func))
		k->captured++;
}

/* Stream capture and the graph API, from API records (model_graphs.c). */
void model__api_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_api *e = (const void *)ev;

	if (!e->c.result)
		model__graph_api(model__proc(m, e->h.pid), e, api_desc(e->c.api),
				 &m->graph_nodes_lost);
}

/* ---- merging: the report's kernels by name, and a retired process's ----------------------- */

static void merge_shapes(struct kstat *into, const struct kstat *k)
{
	into->other_shapes += k->other_shapes;
	for (int i = 0; i < KSTAT_SHAPES && k->shapes[i].count; i++) {
		const struct kshape *s = &k->shapes[i];
		int j;

		for (j = 0; j < KSTAT_SHAPES && into->shapes[j].count; j++)
			if (!memcmp(into->shapes[j].grid, s->grid, sizeof(s->grid)) &&
			    !memcmp(into->shapes[j].block, s->block, sizeof(s->block)) &&
			    into->shapes[j].shmem == s->shmem)
				break;
		if (j == KSTAT_SHAPES) {
			into->other_shapes += s->count;
			continue;
		}
		if (!into->shapes[j].count)
			into->shapes[j] = *s;
		else
			into->shapes[j].count += s->count;
	}
}

static void merge_apis(struct kstat *into, const struct kstat *k)
{
	for (int i = 0; i < KSTAT_APIS && k->apis[i].count; i++)
		for (int j = 0; j < KSTAT_APIS; j++) {
			if (!into->apis[j].count)
				into->apis[j].api = k->apis[i].api;
			if (into->apis[j].api == k->apis[i].api) {
				into->apis[j].count += k->apis[i].count;
				break;
			}
		}
}

void model__gpu_merge(struct gpu_stat *into, const struct gpu_stat *g)
{
	if (!into->count)
		into->min_ns = g->min_ns;
	into->count += g->count;
	into->total_ns += g->total_ns;
	into->min_ns = GS_MIN(into->min_ns, g->min_ns);
	into->max_ns = GS_MAX(into->max_ns, g->max_ns);
	into->queue_ns += g->queue_ns;
	into->idle_starts += g->idle_starts;
	into->gated += g->gated;
	into->start_unknown += g->start_unknown;
	into->chained += g->chained;
	into->followed += g->followed;
	into->in_graph += g->in_graph;
	into->carried += g->carried;
	into->by_driver += g->by_driver;
	hist__merge(&into->dur, &g->dur);
	hist__merge(&into->queue, &g->queue);
}

void model__kstat_merge(struct kstat *into, const struct kstat *k)
{
	into->launches += k->launches;
	into->captured += k->captured;
	into->graph_runs += k->graph_runs;
	into->errors += k->errors;
	into->call_ns += k->call_ns;
	into->call_seen += k->call_seen;
	into->flags |= k->flags;
	merge_shapes(into, k);
	merge_apis(into, k);
	if (k->gpu && (k->gpu->count || k->gpu->start_unknown)) {
		if (!into->gpu)
			into->gpu = xcalloc(1, sizeof(*into->gpu));
		model__gpu_merge(into->gpu, k->gpu);
	}
	/* (Named, the first process; each kernel handle merged counts once.) */
	into->pid = into->nprocs ? GS_MIN(into->pid, k->pid) : k->pid;
	into->nprocs += k->nprocs ? k->nprocs : 1;
}

static __u64 name_hash(const char *s)
{
	__u64 h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* A retired process's kernel's entry: by name (probing on the hash), or by handle. */
static struct kstat *retired_of(struct model *m, const char *name, __u32 pid, __u64 handle)
{
	struct kstat *k;
	__u64 h;

	if (!name) {
		k = hmap_get(&m->retired_kernels, handle, (__u64)pid + (1ULL << 32));
		if (!k) {
			k = xcalloc(1, sizeof(*k));
			k->handle = handle;
			k->pid = pid;
			hmap_put(&m->retired_kernels, handle, (__u64)pid + (1ULL << 32), k);
		}
		return k;
	}
	for (h = name_hash(name);; h++) {
		k = hmap_get(&m->retired_kernels, h, 0);
		if (!k || !strcmp(k->name, name))
			break;
	}
	if (!k) {
		k = xcalloc(1, sizeof(*k));
		k->name = xstrdup(name);
		k->pid = pid;
		hmap_put(&m->retired_kernels, h, 0, k);
	}
	return k;
}

static void free_kstat(void *v)
{
	struct kstat *k = v;

	free(k->gpu);
	free(k->name);
	free(k);
}

static void free_name(void *v)
{
	free(((struct name_entry *)v)->name);
	free(v);
}

static int by_handle(const void *a, const void *b)
{
	const struct kstat *x = *(const struct kstat *const *)a,
			   *y = *(const struct kstat *const *)b;

	return GS_CMP(x->handle, y->handle);
}

void model__kernels_retire(struct model *m, struct proc *p)
{
	const struct kstat **v = NULL;
	struct hmap_slot *s;
	size_t n = 0, cap = 0;

	/* In handle order, as the report merges a live process's handles of one name: the
	 * merged shapes' order does not depend on the table's. */
	hmap_for_each (&m->kernels, s) {
		const struct kstat *k = s->val;

		if (k->pid != p->s.pid)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[n++] = k;
	}
	if (n)
		qsort(v, n, sizeof(*v), by_handle);
	for (size_t i = 0; i < n; i++)
		model__kstat_merge(retired_of(m, model__kernel_name(m, v[i]->pid, v[i]->handle),
					      v[i]->pid, v[i]->handle),
				   v[i]);
	free(v);
	hmap_for_each (&m->renamed_kernels, s) {
		const struct kstat *k = s->val;

		if (k->pid == p->s.pid)
			model__kstat_merge(retired_of(m, k->name, k->pid, k->handle), k);
	}
	hmap_for_each (&m->graph_execs, s) {
		const struct kstat *k = s->val;

		if (k->pid != p->s.pid)
			continue;
		m->retired_graphs++;
		if (k->gpu && k->gpu->count)
			model__gpu_merge(&m->retired_graph_gpu, k->gpu);
	}
	model__kernels_forget(m, p->s.pid);
	model__graphs_free(p);
}

void model__kernels_forget(struct model *m, __u32 pid)
{
	hmap_drop_key(&m->kernels, false, 0, pid, free_kstat);
	hmap_drop_key(&m->renamed_kernels, false, 0, pid, free_kstat);
	hmap_drop_key(&m->graph_execs, false, 0, pid, free_kstat);
	hmap_drop_key(&m->names, false, 1, pid, free_name);
	hmap_drop_key(&m->aliases, false, 0, pid, free);
}

void model__kernels_free(struct model *m)
{
	hmap_free_with(&m->names, free_name);
	hmap_free_with(&m->aliases, NULL);
	hmap_free_with(&m->kernels, free_kstat);
	hmap_free_with(&m->renamed_kernels, free_kstat);
	hmap_free_with(&m->graph_execs, free_kstat);
	hmap_free_with(&m->retired_kernels, free_kstat);
}

static void each_of(const struct model *m, const struct hmap *h, __u32 pid,
		    void (*fn)(void *ctx, const struct model_kernel *k), void *ctx)
{
	const struct hmap_slot *s;

	hmap_for_each (h, s) {
		const struct kstat *k = s->val;
		struct model_kernel out;

		if ((pid && k->pid != pid) || !k->launches)
			continue;
		out = (struct model_kernel){
			.pid = k->pid,
			.handle = k->handle,
			.name = k->name ?: model__kernel_name(m, k->pid, k->handle),
			.launches = k->launches,
			.captured = k->captured,
			.graph_runs = k->graph_runs,
			.errors = k->errors,
			.call_ns = kstat_call_ns(k),
			.gpu_count = k->gpu ? k->gpu->count : 0,
			.gpu_ns = k->gpu ? k->gpu->total_ns : 0
		};
		fn(ctx, &out);
	}
}

void model__each_kernel(const struct model *m, __u32 pid,
			void (*fn)(void *ctx, const struct model_kernel *k), void *ctx)
{
	each_of(m, &m->kernels, pid, fn, ctx);
	each_of(m, &m->renamed_kernels, pid, fn, ctx);
}
