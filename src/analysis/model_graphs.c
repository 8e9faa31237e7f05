// SPDX-License-Identifier: MIT
/*
 * CUDA graphs: what kernels a graph runs, and so what each launch of an instantiated graph
 * adds to each kernel's runs. A graph gets its kernels two ways:
 *   - stream capture: launches into a capturing stream are counted as launches (marked
 *     captured) and recorded in the graph the capture ends with, each kernel and how
 *     many times (PyTorch's CUDA graphs, torch.compile);
 *   - the graph API (XLA): kernel nodes added (cuGraphAddKernelNode, cuGraphAddNode), their
 *     kernel set again (cuGraphKernelNodeSetParams...), child graphs added (a copy of the
 *     child, as CUDA takes one), a graph cloned.
 * Instantiating takes a copy (an instantiated graph keeps what the graph had then); setting
 * a node of the instantiated graph (cuGraphExecKernelNodeSetParams...) changes the copy,
 * cuGraphExecUpdate takes the graph's again. A conditional node's bodies run as often as
 * the GPU decides: their kernels are not counted, and the launches of graphs that have one
 * are counted apart (model_kernels.c).
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/util.h"

/* Kernel nodes kept by a process, in its graphs and their copies (16 bytes each): past it,
 * a node is not kept, its runs not counted, and that is said (model's graph_nodes_lost). */
#define NODES_MAX (1u << 20)

struct gkernels {
	size_t n, cap; /* captured: each kernel, how many times */
	struct {
		__u64 handle, count;
	} * k;
	size_t nn, ncap; /* the graph API's kernel nodes, each its kernel (0: none now) */
	struct {
		__u64 node, func;
	} * nodes;
	bool conditional;
	__u64 *kept; /* the process's count of nodes kept (struct proc's graph_nodes) */
};

/* Where a graph's nodes are counted, and where those not kept are. */
struct gctx {
	__u64 *kept, *lost;
};

static void gk_free(void *v)
{
	struct gkernels *g = v;

	if (g) {
		*g->kept -= g->nn;
		free(g->k);
		free(g->nodes);
		free(g);
	}
}

static struct gkernels *gk_new(const struct gctx *c)
{
	struct gkernels *g = xcalloc(1, sizeof(*g));

	g->kept = c->kept;
	return g;
}

/* An array v of n items of `size` bytes, room made for one more. */
static void *room(void *v, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return v;
	*cap = *cap ? *cap * 2 : 8;
	return xrealloc(v, *cap * size);
}

static void gk_count(struct gkernels *g, __u64 handle, __u64 count)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->k[i].handle == handle) {
			g->k[i].count += count;
			return;
		}
	g->k = room(g->k, g->n, &g->cap, sizeof(*g->k));
	g->k[g->n].handle = handle;
	g->k[g->n++].count = count;
}

static void gk_node(const struct gctx *c, struct gkernels *g, __u64 node, __u64 func)
{
	if (*c->kept >= NODES_MAX) {
		++*c->lost;
		return;
	}
	g->nodes = room(g->nodes, g->nn, &g->ncap, sizeof(*g->nodes));
	g->nodes[g->nn].node = node;
	g->nodes[g->nn++].func = func;
	++*c->kept;
}

/* What `from` runs, added to `into` (a child graph's nodes keep their handles: setting
 * one through the parent is not followed). */
static void gk_add(const struct gctx *c, struct gkernels *into, const struct gkernels *from)
{
	for (size_t i = 0; i < from->n; i++)
		gk_count(into, from->k[i].handle, from->k[i].count);
	for (size_t i = 0; i < from->nn; i++)
		gk_node(c, into, from->nodes[i].node, from->nodes[i].func);
	into->conditional |= from->conditional;
}

static struct gkernels *gk_copy(const struct gctx *c, const struct gkernels *from)
{
	struct gkernels *g = gk_new(c);

	if (from)
		gk_add(c, g, from);
	return g;
}

/* A node's kernel set again, in g; whether g has the node. */
static bool gk_set(struct gkernels *g, __u64 node, __u64 func)
{
	for (size_t i = 0; i < g->nn; i++)
		if (g->nodes[i].node == node) {
			g->nodes[i].func = func;
			return true;
		}
	return false;
}

static struct gkernels *graph_of(const struct gctx *c, struct hmap *h, __u64 handle)
{
	struct gkernels *g = hmap_get(h, handle, 0);

	if (!g)
		hmap_put(h, handle, 0, g = gk_new(c));
	return g;
}

bool model__graph_captured(struct proc *p, __u64 stream, __u64 func)
{
	struct gkernels *g = hmap_get(&p->capturing, stream, 0);

	if (g)
		gk_count(g, func, 1);
	return g != NULL;
}

bool model__capturing(const struct model *m, __u32 pid, __u64 stream)
{
	const struct proc *p = model__proc_get(m, pid);

	return p && hmap_get(&p->capturing, stream, 0);
}

bool model__graph_each(const struct proc *p, __u64 exec,
		       void (*fn)(void *ctx, __u64 handle, __u64 count), void *ctx)
{
	const struct gkernels *g = hmap_get(&p->execs, exec, 0);

	if (!g)
		return false;
	for (size_t i = 0; i < g->n; i++)
		fn(ctx, g->k[i].handle, g->k[i].count);
	for (size_t i = 0; i < g->nn; i++)
		if (g->nodes[i].func)
			fn(ctx, g->nodes[i].func, 1);
	return g->conditional;
}

/* A graph's node by the graph API (gs_decode_knode). */
static void node_api(const struct gctx *c, struct proc *p, const struct gs_ev_api *e,
		     const struct gs_api_desc *d)
{
	unsigned int at = d->shape == GS_SH_A_CHILD ? 4 : d->arg & 7;
	struct gkernels *g;
	struct hmap_slot *s;

	if (at >= 4) { /* added to graph arg0 */
		g = graph_of(c, &p->graphs, e->arg0);
		if (e->h.flags & GS_HDR_GNODE_CHILD) {
			const struct gkernels *child = hmap_get(&p->graphs, e->arg1, 0);

			if (child && child != g)
				gk_add(c, g, child);
		} else if (e->h.flags & GS_HDR_GNODE_COND) {
			g->conditional = true;
		} else if (!e->h.flags) {
			gk_node(c, g, e->out, e->arg1);
		}
		return;
	}
	if (e->h.flags) /* (set to another kind than a kernel: nothing counted here) */
		return;
	if (at == 2) {
		if ((g = hmap_get(&p->execs, e->arg0, 0)))
			gk_set(g, e->out, e->arg1);
		return;
	}
	hmap_for_each (&p->graphs, s)
		if (gk_set(s->val, e->arg0, e->arg1))
			return;
}

void model__graph_api(struct proc *p, const struct gs_ev_api *e, const struct gs_api_desc *d,
		      __u64 *lost)
{
	const struct gctx c = { &p->graph_nodes, lost }, *cp = &c;

	switch (e->c.api) {
	case GS_API_CU_STREAM_BEGIN_CAPTURE:
	case GS_API_CU_STREAM_BEGIN_CAPTURE_PTSZ:
	case GS_API_CU_STREAM_BEGIN_CAPTURE_V1:
	case GS_API_CU_STREAM_BEGIN_CAPTURE_V1_PTSZ:
		gk_free(hmap_put(&p->capturing, e->arg0, 0, gk_new(cp)));
		break;
	case GS_API_CU_STREAM_END_CAPTURE:
	case GS_API_CU_STREAM_END_CAPTURE_PTSZ: {
		struct gkernels *g = hmap_del(&p->capturing, e->arg0, 0);

		if (g)
			gk_free(hmap_put(&p->graphs, e->out, 0, g));
		break;
	}
	case GS_API_CU_GRAPH_INSTANTIATE:
	case GS_API_CU_GRAPH_INSTANTIATE_PARAMS:
	case GS_API_CU_GRAPH_INSTANTIATE_PARAMS_PTSZ:
		gk_free(hmap_put(&p->execs, e->out, 0,
				 gk_copy(cp, hmap_get(&p->graphs, e->arg1, 0))));
		break;
	case GS_API_CU_GRAPH_EXEC_UPDATE:
		if (hmap_get(&p->execs, e->arg0, 0))
			gk_free(hmap_put(&p->execs, e->arg0, 0,
					 gk_copy(cp, hmap_get(&p->graphs, e->arg1, 0))));
		break;
	case GS_API_CU_GRAPH_CLONE:
		gk_free(hmap_put(&p->graphs, e->out, 0,
				 gk_copy(cp, hmap_get(&p->graphs, e->arg1, 0))));
		break;
	case GS_API_CU_GRAPH_DESTROY:
		gk_free(hmap_del(&p->graphs, e->arg0, 0));
		break;
	case GS_API_CU_GRAPH_EXEC_DESTROY:
		gk_free(hmap_del(&p->execs, e->arg0, 0));
		break;
	default:
		if (d && (d->shape == GS_SH_A_KNODE || d->shape == GS_SH_A_CHILD))
			node_api(cp, p, e, d);
		break;
	}
}

void model__graphs_free(struct proc *p)
{
	hmap_free_with(&p->capturing, gk_free);
	hmap_free_with(&p->graphs, gk_free);
	hmap_free_with(&p->execs, gk_free);
}
