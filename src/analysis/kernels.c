// SPDX-License-Identifier: MIT
/*
 * Kernels: names per handle (and the aliases between handles), launch statistics per
 * handle, stream capture and graphs. Launches captured into a graph are counted as
 * launches and marked captured; each launch of an instantiated graph then adds one run to
 * every kernel its capture recorded.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "core/util.h"

#define NAME_KEY(pid, ns) ((__u64)(pid) << 1 | (ns))

static void add_name(struct model *m, const struct gs_ev_kname *e)
{
	struct name_entry *n;

	if (e->len == 0) {
		m->nameless++;
		return;
	}
	n = hmap_get(&m->names, NAME_KEY(e->h.pid, e->ns), e->handle);
	if (!n) {
		n = xcalloc(1, sizeof(*n));
		hmap_put(&m->names, NAME_KEY(e->h.pid, e->ns), e->handle, n);
	} else if (!strcmp(n->name, e->name)) {
		return;
	} else {
		free(n->name);
	}
	n->name = xstrdup(e->name);
	n->api = e->api;
	n->ns = e->ns;
}

static void add_alias(struct model *m, const struct gs_ev_kalias *e)
{
	struct alias_entry *a = hmap_get(&m->aliases, e->h.pid, e->handle);

	if (!a) {
		a = xcalloc(1, sizeof(*a));
		hmap_put(&m->aliases, e->h.pid, e->handle, a);
	}
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

static void capture_add(struct capture *c, __u64 handle)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->k[i].handle == handle) {
			c->k[i].count++;
			return;
		}
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 8;
		c->k = xrealloc(c->k, c->cap * sizeof(*c->k));
	}
	c->k[c->n].handle = handle;
	c->k[c->n++].count = 1;
}

static void graph_launch(struct model *m, struct proc *p, const struct gs_ev_launch *e)
{
	struct kstat *g = model__kstat(&m->graph_execs, e->h.pid, e->func);
	__u64 *graph;
	struct capture *c;

	m->graph_launches++;
	if (e->c.result) {
		g->errors++;
		return;
	}
	g->launches++;
	g->call_ns += e->c.dur_ns;
	graph = hmap_get(&p->execs, e->func, 0);
	c = graph ? hmap_get(&p->graphs, *graph, 0) : NULL;
	for (size_t i = 0; c && i < c->n; i++)
		model__kstat(&m->kernels, e->h.pid, c->k[i].handle)->graph_runs += c->k[i].count;
}

static void add_launch(struct model *m, const struct gs_ev_launch *e)
{
	struct proc *p = model__proc(m, e->h.pid);
	struct capture *cap;
	struct kstat *k;

	model__note_error(m, &e->h, &e->c);
	m->api_calls[e->c.api]++;
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
	k->call_ns += e->c.dur_ns;
	k->flags |= e->flags;
	count_shape(k, e);
	count_api(k, e->c.api);
	p->launches++;
	m->launches++;
	cap = hmap_get(&p->capturing, e->stream, 0);
	if (cap) {
		k->captured++;
		capture_add(cap, e->func);
	}
}

static void free_capture(struct capture *c)
{
	if (c) {
		free(c->k);
		free(c);
	}
}

/* Stream capture and graph instantiation, from API records. */
static void add_api(struct model *m, const struct gs_ev_api *e)
{
	struct proc *p;
	__u64 *graph;

	if (e->c.result)
		return;
	p = model__proc(m, e->h.pid);
	switch (e->c.api) {
	case GS_API_CU_STREAM_BEGIN_CAPTURE:
	case GS_API_CU_STREAM_BEGIN_CAPTURE_PTSZ:
	case GS_API_CU_STREAM_BEGIN_CAPTURE_V1:
	case GS_API_CU_STREAM_BEGIN_CAPTURE_V1_PTSZ:
		free_capture(
			hmap_put(&p->capturing, e->arg0, 0, xcalloc(1, sizeof(struct capture))));
		break;
	case GS_API_CU_STREAM_END_CAPTURE:
	case GS_API_CU_STREAM_END_CAPTURE_PTSZ: {
		struct capture *c = hmap_del(&p->capturing, e->arg0, 0);

		if (c)
			free_capture(hmap_put(&p->graphs, e->out, 0, c));
		break;
	}
	case GS_API_CU_GRAPH_INSTANTIATE:
	case GS_API_CU_GRAPH_INSTANTIATE_PARAMS:
	case GS_API_CU_GRAPH_INSTANTIATE_PARAMS_PTSZ:
		graph = xmalloc(sizeof(*graph));
		*graph = e->arg1;
		free(hmap_put(&p->execs, e->out, 0, graph));
		break;
	}
}

void model__kernels_add(struct model *m, const struct gs_hdr *ev)
{
	switch (ev->type) {
	case GS_EV_LAUNCH:
		add_launch(m, (const void *)ev);
		break;
	case GS_EV_KNAME:
		add_name(m, (const void *)ev);
		break;
	case GS_EV_KALIAS:
		add_alias(m, (const void *)ev);
		break;
	case GS_EV_API:
		add_api(m, (const void *)ev);
		break;
	}
}
