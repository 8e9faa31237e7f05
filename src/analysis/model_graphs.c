// SPDX-License-Identifier: MIT
/*
 * CUDA graphs: what kernels a graph runs, and so what each launch of an instantiated graph
 * adds to each kernel's runs. A graph gets its kernels two ways:
 *   - stream capture: launches into a capturing stream are counted as launches (marked
 *     captured) and recorded in the graph the capture ends with, each kernel and how
 *     many times (PyTorch's CUDA graphs, torch.compile);
 *   - the graph API (XLA): kernel nodes added (cuGraphAddKernelNode, cuGraphAddNode), their
 *     kernel set again (cuGraphKernelNodeSetParams...), child graphs added (a copy of the
 *     child, as CUDA takes one, kept by its node: an instantiated graph's child node can be
 *     set to another graph, cuGraphExecChildGraphNodeSetParams), a graph cloned; and
 *     captures into a graph the program made (cuStreamBeginCaptureToGraph: XLA traces
 *     library calls, cuBLAS's, into a graph it then sets as a child node, each step).
 * Instantiating takes a copy (an instantiated graph keeps what the graph had then); setting
 * a node of the instantiated graph (cuGraphExecKernelNodeSetParams...) changes the copy,
 * cuGraphExecUpdate takes the graph's again; a kernel node disabled in it
 * (cuGraphNodeSetEnabled) runs nothing until enabled again. A conditional node's bodies
 * run as often as the GPU decides: their kernels are not counted, and the launches of
 * graphs that have one are counted apart (model_kernels.c).
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/util.h"

/* Kernel nodes kept by a process, in its graphs and their copies (16 bytes each, and an
 * index entry): past it, a node is not kept, its runs not counted, and that is said
 * (model's graph_nodes_lost). */
#define NODES_MAX (1u << 20)
/* Child graphs in child graphs, at most this deep (a recording could nest them without end;
 * deeper ones are not kept, counted with the lost nodes). */
#define CHILD_DEPTH_MAX 16

struct gkernels {
	size_t n, cap; /* captured: each kernel, how many times */
	struct {
		__u64 handle, count;
	} * k;
	size_t nn, ncap; /* the graph API's kernel nodes, each its kernel (0: none now) */
	struct {
		__u64 node, func;
	} * nodes;
	struct hmap at;	 /* node -> its index + 1 (XLA sets nodes by the thousand a step) */
	struct hmap off; /* an instantiated graph's kernel nodes disabled (cuGraphNodeSetEnabled) */
	struct {
		__u64 count, bytes;
	} ops[GS_COPY_KIND_MAX]; /* copies and sets captured, by direction */
	size_t nc, ccap;	 /* child graph nodes, each with its copy of the child */
	struct gchild *ch;
	unsigned int depth; /* of children in children (bounded: CHILD_DEPTH_MAX) */
	__u64 into;	    /* capturing into a graph the program made: that graph */
	bool conditional;
	__u64 *kept; /* the process's count of nodes kept (struct proc's graph_nodes) */
};

struct gchild {
	__u64 node;
	struct gkernels *g;
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
		for (size_t i = 0; i < g->nc; i++)
			gk_free(g->ch[i].g);
		free(g->ch);
		hmap_free(&g->at);
		hmap_free(&g->off);
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

/* Whether the node is kept. */
static bool gk_node(const struct gctx *c, struct gkernels *g, __u64 node, __u64 func)
{
	if (*c->kept >= NODES_MAX) {
		++*c->lost;
		return false;
	}
	g->nodes = room(g->nodes, g->nn, &g->ncap, sizeof(*g->nodes));
	g->nodes[g->nn].node = node;
	g->nodes[g->nn++].func = func;
	hmap_put(&g->at, node, 0, (void *)(uintptr_t)g->nn);
	++*c->kept;
	return true;
}

static struct gkernels *gk_copy(const struct gctx *c, const struct gkernels *from);

/* A child graph node of g: a copy of what `child` runs (a child graph's nodes keep their
 * handles: setting one through the parent is not followed). */
static void gk_child(const struct gctx *c, struct gkernels *g, __u64 node,
		     const struct gkernels *child)
{
	if (child->depth >= CHILD_DEPTH_MAX) {
		++*c->lost;
		return;
	}
	g->ch = room(g->ch, g->nc, &g->ccap, sizeof(*g->ch));
	g->ch[g->nc].node = node;
	g->ch[g->nc++].g = gk_copy(c, child);
	g->depth = GS_MAX(g->depth, child->depth + 1);
	g->conditional |= child->conditional;
}

/* What `from` runs, added to `into`. */
static void gk_add(const struct gctx *c, struct gkernels *into, const struct gkernels *from)
{
	for (size_t i = 0; i < from->n; i++)
		gk_count(into, from->k[i].handle, from->k[i].count);
	for (size_t i = 0; i < from->nn; i++)
		gk_node(c, into, from->nodes[i].node, from->nodes[i].func);
	for (int k = 0; k < GS_COPY_KIND_MAX; k++) {
		into->ops[k].count += from->ops[k].count;
		into->ops[k].bytes += from->ops[k].bytes;
	}
	for (size_t i = 0; i < from->nc; i++)
		gk_child(c, into, from->ch[i].node, from->ch[i].g);
	into->conditional |= from->conditional;
}

static struct gkernels *gk_copy(const struct gctx *c, const struct gkernels *from)
{
	struct gkernels *g = gk_new(c);

	if (from)
		gk_add(c, g, from);
	return g;
}

/* A node's kernel set again, in g (if there). */
static void gk_set(struct gkernels *g, __u64 node, __u64 func)
{
	uintptr_t i = g ? (uintptr_t)hmap_get(&g->at, node, 0) : 0;

	if (i && i <= g->nn)
		g->nodes[i - 1].func = func;
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

bool model__graph_op_captured(struct proc *p, __u64 stream, unsigned int kind, __u64 bytes)
{
	struct gkernels *g = hmap_get(&p->capturing, stream, 0);

	if (g && kind < GS_COPY_KIND_MAX) {
		g->ops[kind].count++;
		g->ops[kind].bytes += bytes;
	}
	return g != NULL;
}

static void ops_in(const struct gkernels *g, struct copy_stat *copies, __u64 *bytes)
{
	for (int k = 0; k < GS_COPY_KIND_MAX; k++) {
		copies[k].graph_runs += g->ops[k].count;
		copies[k].graph_bytes += g->ops[k].bytes;
		*bytes += g->ops[k].bytes;
	}
	for (size_t i = 0; i < g->nc; i++)
		ops_in(g->ch[i].g, copies, bytes);
}

void model__graph_ops(const struct proc *p, __u64 exec, struct copy_stat *copies, __u64 *bytes)
{
	const struct gkernels *g = hmap_get(&p->execs, exec, 0);

	if (g)
		ops_in(g, copies, bytes);
}

bool model__capturing(const struct model *m, __u32 pid, __u64 stream)
{
	const struct proc *p = model__proc_get(m, pid);

	return p && hmap_get(&p->capturing, stream, 0);
}

static void each_in(const struct gkernels *g, void (*fn)(void *ctx, __u64 handle, __u64 count),
		    void *ctx)
{
	for (size_t i = 0; i < g->n; i++)
		fn(ctx, g->k[i].handle, g->k[i].count);
	for (size_t i = 0; i < g->nn; i++)
		if (g->nodes[i].func && !(g->off.len && hmap_get(&g->off, g->nodes[i].node, 0)))
			fn(ctx, g->nodes[i].func, 1);
	for (size_t i = 0; i < g->nc; i++)
		each_in(g->ch[i].g, fn, ctx);
}

bool model__graph_known(const struct proc *p, __u64 exec)
{
	return hmap_get(&p->execs, exec, 0) != NULL;
}

bool model__graph_each(const struct proc *p, __u64 exec,
		       void (*fn)(void *ctx, __u64 handle, __u64 count), void *ctx)
{
	const struct gkernels *g = hmap_get(&p->execs, exec, 0);

	if (!g)
		return false;
	each_in(g, fn, ctx);
	return g->conditional;
}

/* An instantiated graph's child node set to run another graph: arg0 the instantiated graph,
 * out the node, arg1 the graph. */
static void exec_child_set(const struct gctx *c, struct proc *p, const struct gs_ev_api *e)
{
	struct gkernels *x = hmap_get(&p->execs, e->arg0, 0);
	const struct gkernels *child = hmap_get(&p->graphs, e->arg1, 0);

	for (size_t i = 0; x && i < x->nc; i++)
		if (x->ch[i].node == e->out) {
			gk_free(x->ch[i].g);
			x->ch[i].g = gk_new(c);
			if (child && child->depth < CHILD_DEPTH_MAX)
				gk_add(c, x->ch[i].g, child);
			else if (child)
				++*c->lost;
			return;
		}
}

/* An instantiated graph's kernel node disabled, or enabled again (cuGraphNodeSetEnabled:
 * arg0 the instantiated graph, arg1 the node, out whether enabled): a disabled node runs
 * nothing. (Only the graph API's nodes: a captured graph's are not known by handle.) */
static void exec_node_enabled(struct proc *p, const struct gs_ev_api *e)
{
	struct gkernels *x = hmap_get(&p->execs, e->arg0, 0);

	if (!x || !hmap_get(&x->at, e->arg1, 0))
		return;
	if (e->out)
		hmap_del(&x->off, e->arg1, 0);
	else
		hmap_put(&x->off, e->arg1, 0, (void *)1);
}

/* A graph's node by the graph API (gs_decode_knode). */
static void node_api(const struct gctx *c, struct proc *p, const struct gs_ev_api *e,
		     const struct gs_api_desc *d)
{
	unsigned int at = d->shape != GS_SH_A_CHILD ? d->arg & 7 : d->arg == 2 ? 2 : 4;
	struct gkernels *g;
	uintptr_t graph;

	if (at >= 4) { /* added to graph arg0 */
		g = graph_of(c, &p->graphs, e->arg0);
		if (e->h.flags & GS_HDR_GNODE_CHILD) {
			const struct gkernels *child = hmap_get(&p->graphs, e->arg1, 0);

			if (child && child != g)
				gk_child(c, g, e->out, child);
		} else if (e->h.flags & GS_HDR_GNODE_COND) {
			g->conditional = true;
		} else if (!e->h.flags && e->arg0 && gk_node(c, g, e->out, e->arg1)) {
			hmap_put(&p->node_graph, e->out, 0, (void *)(uintptr_t)e->arg0);
		}
		return;
	}
	if (at == 2 && e->h.flags == GS_HDR_GNODE_CHILD) {
		exec_child_set(c, p, e);
		return;
	}
	if (e->h.flags) /* (set to another kind than a kernel: nothing counted here) */
		return;
	if (at == 2) {
		gk_set(hmap_get(&p->execs, e->arg0, 0), e->out, e->arg1);
		return;
	}
	graph = (uintptr_t)hmap_get(&p->node_graph, e->arg0, 0);
	if (graph)
		gk_set(hmap_get(&p->graphs, graph, 0), e->arg0, e->arg1);
}

/* A graph gone, with its nodes' way to it. */
static void graph_gone(struct proc *p, __u64 handle)
{
	struct gkernels *g = hmap_del(&p->graphs, handle, 0);

	for (size_t i = 0; g && i < g->nn; i++)
		if ((uintptr_t)hmap_get(&p->node_graph, g->nodes[i].node, 0) == handle)
			hmap_del(&p->node_graph, g->nodes[i].node, 0);
	gk_free(g);
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
	case GS_API_CU_STREAM_BEGIN_CAPTURE_TO_GRAPH:
	case GS_API_CU_STREAM_BEGIN_CAPTURE_TO_GRAPH_PTSZ: {
		struct gkernels *g = gk_new(cp);

		g->into = e->arg1;
		gk_free(hmap_put(&p->capturing, e->arg0, 0, g));
		break;
	}
	case GS_API_CU_STREAM_END_CAPTURE:
	case GS_API_CU_STREAM_END_CAPTURE_PTSZ: {
		struct gkernels *g = hmap_del(&p->capturing, e->arg0, 0), *into;

		/* (Captured into the program's graph: added to what it had.) */
		into = g && g->into ? hmap_get(&p->graphs, g->into, 0) : NULL;
		if (into) {
			gk_add(cp, into, g);
			gk_free(g);
		} else if (g) {
			gk_free(hmap_put(&p->graphs, e->out, 0, g));
		}
		break;
	}
	case GS_API_CU_GRAPH_INSTANTIATE:
	case GS_API_CU_GRAPH_INSTANTIATE_PARAMS:
	case GS_API_CU_GRAPH_INSTANTIATE_PARAMS_PTSZ:
		gk_free(hmap_put(&p->execs, e->out, 0,
				 gk_copy(cp, hmap_get(&p->graphs, e->arg1, 0))));
		break;
	case GS_API_CU_GRAPH_EXEC_UPDATE:
	case GS_API_CU_GRAPH_EXEC_UPDATE_V1:
		if (hmap_get(&p->execs, e->arg0, 0))
			gk_free(hmap_put(&p->execs, e->arg0, 0,
					 gk_copy(cp, hmap_get(&p->graphs, e->arg1, 0))));
		break;
	case GS_API_CU_GRAPH_CLONE:
		gk_free(hmap_put(&p->graphs, e->out, 0,
				 gk_copy(cp, hmap_get(&p->graphs, e->arg1, 0))));
		break;
	case GS_API_CU_GRAPH_DESTROY:
		graph_gone(p, e->arg0);
		break;
	case GS_API_CU_GRAPH_EXEC_DESTROY:
		gk_free(hmap_del(&p->execs, e->arg0, 0));
		break;
	case GS_API_CU_GRAPH_NODE_SET_ENABLED:
		exec_node_enabled(p, e);
		break;
	default:
		if (d && (d->shape == GS_SH_A_KNODE || d->shape == GS_SH_A_CHILD))
			node_api(cp, p, e, d);
		break;
	}
}

void model__graphs_free(struct proc *p)
{
	hmap_free(&p->node_graph);
	hmap_free_with(&p->capturing, gk_free);
	hmap_free_with(&p->graphs, gk_free);
	hmap_free_with(&p->execs, gk_free);
}
