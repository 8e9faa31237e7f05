// SPDX-License-Identifier: MIT
/*
 * The making of a twin (gputime_twin.h): which graphs can have one (walk), the clone's
 * event nodes (instrument), and what the program sets at the exec, carried over to the
 * twin before it runs (its children here; its kernel nodes in gputime_graphset.c). Each
 * function under the twins' lock of gputime_graph.c, the exec's context current where the
 * twin is built or run.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject/gputime_twin.h"

#define TWIN_MAX_KERNELS      2048
#define TWIN_MAX_CHILDREN     256   /* child graph nodes of a graph */
#define TWIN_MAX_DEPTH	      4	    /* children in children */
#define TWIN_MAX_EVENTS	      65536 /* all twins of the process together */
#define NODE_KERNEL	      0
#define NODE_CHILD	      4
#define ATTR_DEVICE_UPDATABLE 13
#define EVENT_NO_TIMING	      2U

typedef int (*g_clone_fn)(void **, void *);
typedef int (*g_nodes_fn)(void *, void **, size_t *);
typedef int (*g_type_fn)(void *, int *);
typedef int (*g_kparams_fn)(void *, void *);
typedef int (*g_kattr_fn)(void *, int, void *);
typedef int (*g_deps_fn)(void *, void **, void *, size_t *);
typedef int (*g_add_deps_fn)(void *, void **, void **, void *, size_t);
typedef int (*g_wait_fn)(__u64, void *, unsigned int);
typedef int (*g_find_fn)(void **, void *, void *);
typedef int (*g_child_fn)(void *, void **);
typedef int (*g_exec_child_fn)(void *, void *, void *);
typedef int (*g_exec_update_fn)(void *, void *, void *);
typedef int (*g_sync_fn)(__u64);
typedef int (*g_enable_fn)(void *, void *, unsigned int);

static struct {
	g_clone_fn clone;
	g_nodes_fn nodes;
	g_type_fn type;
	g_kparams_fn kparams;
	g_kattr_fn kattr;
	g_deps_fn deps;
	g_add_record_fn add_record;
	g_add_deps_fn add_deps, rm_deps;
	g_deps_fn succ;
	g_inst_fn instantiate;
	g_destroy_fn graph_destroy, exec_destroy, ev_destroy;
	g_wait_fn wait, wait_ptsz;
	g_add_kernel_fn add_kernel;
	g_find_fn find_in_clone;
	g_child_fn child;	      /* a child node's graph */
	g_exec_child_fn exec_child;   /* a twin's child node set */
	g_exec_update_fn exec_update; /* a twin updated (CUDA 12's signature) */
	g_upload_fn upload;	      /* a twin uploaded when built */
	g_enable_fn set_enabled;      /* a twin's node disabled or enabled */
	g_sync_fn sync;
} G;

static int tw_events; /* of all twins */
static int tw_loaded; /* 1 ready, -1 not available */
static bool tw_side;  /* GPUSCOPE_TWIN_EDGES=side: events beside the kernels (to compare) */
static bool tw_pairs; /* GPUSCOPE_TWIN_EVENTS=pairs: no chained starts (to compare) */
static __u64 tw_prime_ns = 120000; /* GPUSCOPE_TWIN_PRIME_NS: how long the first kernel spins */
/*
 * A twin runs at every TWIN_EVERY-th launch of its exec at most (or --gpu-time=N's N, if
 * more), and at fewer where its runs would add more than TWIN_BUDGET_PCT of the exec's GPU
 * time (its last whole launch, as timed): a run adds the first kernel's spin and about
 * 1.7 us an event node (H200: a CUDA-graph training step of 19 kernels replayed and
 * waited for 1.94x with a pair of event nodes around each kernel at every launch, 1.20x
 * with none; bench/results/twin-2026-11-27-h200.md). GPUSCOPE_TWIN_EVERY: every that
 * many launches, whatever it costs.
 */
#define TWIN_EVERY	   16
#define TWIN_BUDGET_PCT	   5
#define TWIN_EVENT_NODE_NS 1700
static int tw_every = TWIN_EVERY;
static bool tw_every_given;

int gt_twin_every(void)
{
	int every = __atomic_load_n(&gt_every, __ATOMIC_RELAXED); /* (once: ab.c may change it) */

	return every > tw_every ? every : tw_every;
}

int gt_twin_interval(const struct twin *t)
{
	const struct last_dur *d = &T.dur[gt_slot_hash(t->exec, DUR_SLOTS)];
	/* (The harvester's, read without its lock: a torn pair is one interval off.) */
	__u64 func = __atomic_load_n(&d->func, __ATOMIC_RELAXED),
	      ns = __atomic_load_n(&d->ns, __ATOMIC_RELAXED),
	      extra = tw_prime_ns + (__u64)t->nev * TWIN_EVENT_NODE_NS, n;

	if (tw_every_given || func != t->exec || !ns)
		return gt_twin_every();
	n = (extra * 100 + TWIN_BUDGET_PCT * ns - 1) / (TWIN_BUDGET_PCT * ns);
	return n <= (__u64)gt_twin_every() ? gt_twin_every() : n < (1U << 30) ? (int)n : 1 << 30;
}

static void load_now(void)
{
	G.clone = (g_clone_fn)gs_real_by_name("cuGraphClone");
	G.nodes = (g_nodes_fn)gs_real_by_name("cuGraphGetNodes");
	G.type = (g_type_fn)gs_real_by_name("cuGraphNodeGetType");
	G.kparams = (g_kparams_fn)gs_real_by_name("cuGraphKernelNodeGetParams_v2");
	G.kattr = (g_kattr_fn)gs_real_by_name("cuGraphKernelNodeGetAttribute");
	G.deps = (g_deps_fn)gs_real_by_name("cuGraphNodeGetDependencies_v2");
	G.add_record = (g_add_record_fn)gs_real_by_name("cuGraphAddEventRecordNode");
	G.add_deps = (g_add_deps_fn)gs_real_by_name("cuGraphAddDependencies_v2");
	G.rm_deps = (g_add_deps_fn)gs_real_by_name("cuGraphRemoveDependencies_v2");
	G.succ = (g_deps_fn)gs_real_by_name("cuGraphNodeGetDependentNodes_v2");
	tw_side = getenv("GPUSCOPE_TWIN_EDGES") && !strcmp(getenv("GPUSCOPE_TWIN_EDGES"), "side");
	tw_pairs =
		getenv("GPUSCOPE_TWIN_EVENTS") && !strcmp(getenv("GPUSCOPE_TWIN_EVENTS"), "pairs");
	tw_every_given = getenv("GPUSCOPE_TWIN_EVERY") && atoi(getenv("GPUSCOPE_TWIN_EVERY")) > 0;
	if (tw_every_given)
		tw_every = atoi(getenv("GPUSCOPE_TWIN_EVERY"));
	if (getenv("GPUSCOPE_TWIN_PRIME_NS"))
		tw_prime_ns = strtoull(getenv("GPUSCOPE_TWIN_PRIME_NS"), NULL, 10);
	if (getenv("GPUSCOPE_NO_TWINS")) { /* (to compare) */
		tw_loaded = -1;
		return;
	}
	G.instantiate = (g_inst_fn)gs_real_by_name("cuGraphInstantiateWithFlags");
	G.graph_destroy = (g_destroy_fn)gs_real_by_name("cuGraphDestroy");
	G.exec_destroy = (g_destroy_fn)gs_real_by_name("cuGraphExecDestroy");
	G.ev_destroy = (g_destroy_fn)gs_real_by_name("cuEventDestroy_v2");
	G.wait = (g_wait_fn)gs_real_by_name("cuStreamWaitEvent");
	G.wait_ptsz = (g_wait_fn)gs_real_by_name("cuStreamWaitEvent_ptsz");
	G.add_kernel = (g_add_kernel_fn)gs_real_by_name("cuGraphAddKernelNode_v2");
	G.find_in_clone = (g_find_fn)gs_real_by_name("cuGraphNodeFindInClone");
	G.child = (g_child_fn)gs_real_by_name("cuGraphChildGraphNodeGetGraph");
	G.exec_child = (g_exec_child_fn)gs_real_by_name("cuGraphExecChildGraphNodeSetParams");
	G.exec_update = (g_exec_update_fn)gs_real_by_name("cuGraphExecUpdate_v2");
	/* (GPUSCOPE_TWIN_NO_UPLOAD: uploaded by the first run, to compare.) */
	G.upload = getenv("GPUSCOPE_TWIN_NO_UPLOAD")
			   ? NULL
			   : (g_upload_fn)gs_real_by_name("cuGraphUpload");
	G.sync = (g_sync_fn)gs_real_by_name("cuStreamSynchronize");
	G.set_enabled = (g_enable_fn)gs_real_by_name("cuGraphNodeSetEnabled");
	if (!G.wait_ptsz)
		G.wait_ptsz = G.wait;
	tw_loaded = gt_load_driver() && G.clone && G.nodes && G.type && G.kparams && G.deps &&
				    G.add_record && G.add_deps && G.rm_deps && G.succ &&
				    G.instantiate && G.graph_destroy && G.exec_destroy &&
				    G.ev_destroy && G.wait
			    ? 1
			    : -1;
	if (tw_loaded < 0 && getenv("GPUSCOPE_INJECT_DEBUG"))
		fprintf(stderr,
			"gpuscope-inject: graph twins: clone %d nodes %d type %d kparams %d deps "
			"%d "
			"succ %d add_record %d add_deps %d rm_deps %d instantiate %d wait %d\n",
			!!G.clone, !!G.nodes, !!G.type, !!G.kparams, !!G.deps, !!G.succ,
			!!G.add_record, !!G.add_deps, !!G.rm_deps, !!G.instantiate, !!G.wait);
}

bool gt_twin_load(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, load_now);
	return tw_loaded > 0;
}

void gt_twin_free(struct twin *t)
{
	if (t->twin_exec)
		G.exec_destroy(t->twin_exec);
	if (t->graph)
		G.graph_destroy(t->graph);
	for (int i = 0; t->ev && i < 2 * t->nk; i++)
		if (t->ev[i])
			G.ev_destroy(t->ev[i]);
	if (t->done)
		G.ev_destroy(t->done);
	tw_events -= t->ev ? 2 * t->nk + 1 : 0;
	gt_twin_free_sets(t);
	for (int i = 0; i < t->nchild; i++)
		if (t->child[i].pend)
			G.graph_destroy(t->child[i].pend);
	if (t->upd)
		G.graph_destroy(t->upd);
	free(t->child);
	free(t->kgraph);
	free(t->knode);
	free(t->byclone);
	free(t->ev);
	free(t->sev);
	free(t->off);
	free(t->func);
	free(t);
}

/* The kernel nodes of a graph and its children's, in order (knode, and the graph of each:
 * kgraph), up to cap; the graph's own child nodes (child: NULL for none); false if a node
 * is of a kind a twin cannot run as the exec would. */
struct walk {
	void **knode, **kgraph;
	struct tchild *child;
	int nk, cap, nchild;
};

static bool walk(struct walk *w, void *graph, int depth)
{
	size_t n = 0;
	void **nodes;
	bool ok = true;

	/* (Not read past a size no twin could have anyway.) */
	if (G.nodes(graph, NULL, &n) || n > 8 * TWIN_MAX_KERNELS)
		return false;
	if (!n)
		return true;
	if (!(nodes = calloc(n, sizeof(*nodes))) || G.nodes(graph, nodes, &n)) {
		free(nodes);
		return false;
	}
	for (size_t i = 0; ok && i < n; i++) {
		/* (The value of a launch attribute: 64 bytes; deviceUpdatable its first int.) */
		__u64 attr[8] = { 0 };
		void *cg = NULL;
		int type = -1;

		ok = !G.type(nodes[i], &type) && type >= 0 && type <= 12 &&
		     (type < 8 || type == 12);
		if (!ok && getenv("GPUSCOPE_INJECT_DEBUG"))
			fprintf(stderr, "gpuscope-inject: graph twin: node type %d\n", type);
		if (ok && type == NODE_KERNEL) {
			ok = w->nk < w->cap;
			if (ok) {
				w->kgraph[w->nk] = graph;
				w->knode[w->nk++] = nodes[i];
			}
			/* (A driver that does not know the attribute has no such nodes.) */
			if (ok && G.kattr && !G.kattr(nodes[i], ATTR_DEVICE_UPDATABLE, attr))
				ok = (int)attr[0] == 0;
		} else if (ok && type == NODE_CHILD) {
			struct tchild *c = w->child && !depth ? &w->child[w->nchild] : NULL;

			ok = G.child && depth < TWIN_MAX_DEPTH && !G.child(nodes[i], &cg) && cg &&
			     (!c || w->nchild < TWIN_MAX_CHILDREN);
			if (ok && c)
				*c = (struct tchild){ .node = nodes[i], .k0 = w->nk };
			ok = ok && walk(w, cg, depth + 1);
			if (ok && c) {
				c->k1 = w->nk;
				w->nchild++;
			}
		}
	}
	free(nodes);
	return ok;
}

/* *p made bytes long (left as it was if it cannot be). */
static void shrink(void **p, size_t bytes)
{
	void *q = realloc(*p, bytes);

	if (q)
		*p = q;
}

/* Whether the clone is a graph a twin can be made of: its kernel nodes and child nodes in
 * t. */
static bool eligible(struct twin *t, void *graph)
{
	struct walk w = { .cap = TWIN_MAX_KERNELS };

	t->knode = w.knode = calloc(TWIN_MAX_KERNELS, sizeof(*w.knode));
	t->kgraph = w.kgraph = calloc(TWIN_MAX_KERNELS, sizeof(*w.kgraph));
	t->child = w.child = calloc(TWIN_MAX_CHILDREN, sizeof(*w.child));
	if (!w.knode || !w.kgraph || !w.child || !walk(&w, graph, 0) || !w.nk)
		return false;
	t->nk = w.nk;
	t->nchild = w.nchild;
	/* (Kept as long as the exec: no more than it has.) */
	shrink((void **)&t->knode, (size_t)w.nk * sizeof(*w.knode));
	shrink((void **)&t->kgraph, (size_t)w.nk * sizeof(*w.kgraph));
	shrink((void **)&t->child, (size_t)(w.nchild ? w.nchild : 1) * sizeof(*w.child));
	return true;
}

/* A node's dependencies (succ: its dependents) and their edges' data (8 bytes each), at
 * most 64: false if more. (Counted first: given room for fewer, the driver fills what
 * fits and says so.) */
static bool edges_of(g_deps_fn get, void *node, void **nodes, __u64 *edges, size_t *n)
{
	int r;

	*n = 0;
	if ((r = get(node, NULL, NULL, n)) || *n > 64)
		return gt_twin_fail("count edges", r);
	return !*n || !(r = get(node, nodes, edges, n)) || gt_twin_fail("read edges", r);
}

/*
 * Links of a chain, among the kernels instrumented before k in this pass (from k0): the
 * one whose end node is the node's only dependency (other) and has no other dependent
 * (before: the node starts at that end event), or whose start node is the node's only
 * dependent and depends on nothing else (the node ends at that start event); -1 if none.
 * (Both ways: the driver lists a graph's nodes in an order of its own.)
 */
static int linked(struct twin *t, int k0, int k, void *other, size_t n, bool before)
{
	g_deps_fn far = before ? G.succ : G.deps;
	void **mine = before ? t->endn : t->startn;
	size_t m = 0;

	if (n != 1 || tw_pairs || tw_side)
		return -1;
	for (int j = k0; j < k; j++)
		if (mine[j] == other)
			return far(other, NULL, NULL, &m) || m != 1 ? -1 : j;
	return -1;
}

/*
 * A kernel node of the clone (kernel k, instrumented in a pass from k0): its handle, and
 * event record nodes in line, one right before it and one right after it: the kernel's
 * dependencies go to the first (which the kernel then follows), its dependents follow the
 * second. Between two kernels of a chain (the second follows the first alone), one event
 * node ends the first and starts the second, as in the calibration graph
 * (gputime_graphcal.c): half the event nodes' GPU time in a chain
 * (GPUSCOPE_TWIN_EVENTS=pairs: a pair for every kernel, to compare). Beside the kernel
 * instead (the first after the dependencies, the second after the kernel, nothing after
 * that), each event would be the graph's only node on its own path, and measured an
 * H200's kernels 5.9 us long at the median (the hops between the graph's streams, we
 * think).
 */
static bool instrument(struct twin *t, void *graph, void *node, int k0, int k)
{
	struct gs_cu_kernel_node p = { 0 };
	void *deps[64], *succ[64], *same[64], *start = NULL, *end = NULL;
	__u64 dedges[64], sedges[64];
	size_t nd, ns;
	int r, j, i;

	if ((r = G.kparams(node, &p)))
		return gt_twin_fail("kernel parameters", r);
	if (!edges_of(G.deps, node, deps, dedges, &nd) ||
	    !edges_of(G.succ, node, succ, sedges, &ns))
		return false;
	t->func[k] = p.func ? p.func : p.kern;
	gt_name_kernel(t->func[k], p.func != 0);
	j = linked(t, k0, k, nd == 1 ? deps[0] : NULL, nd, true);
	i = linked(t, k0, k, ns == 1 ? succ[0] : NULL, ns, false);
	/* (A child set again: its kernels take the same events.) */
	if ((j < 0 && !t->ev[2 * k] && (r = T.cu.ev_create(&t->ev[2 * k], 0))) ||
	    (i < 0 && !t->ev[2 * k + 1] && (r = T.cu.ev_create(&t->ev[2 * k + 1], 0))))
		return gt_twin_fail("events", r);
	if ((j < 0 && (r = G.add_record(&start, graph, deps, nd, t->ev[2 * k]))) ||
	    (i < 0 && (r = G.add_record(&end, graph, &node, 1, t->ev[2 * k + 1]))))
		return gt_twin_fail("event nodes", r);
	t->sev[k] = j < 0 ? t->ev[2 * k] : t->eev[j];
	t->eev[k] = i < 0 ? t->ev[2 * k + 1] : t->sev[i];
	t->startn[k] = j < 0 ? start : deps[0];
	t->endn[k] = i < 0 ? end : succ[0];
	if (tw_side)
		return !(r = G.add_deps(graph, &start, &node, NULL, 1)) || gt_twin_fail("edge", r);
	for (size_t n = 0; n < 64; n++)
		same[n] = node;
	if ((start && nd && (r = G.rm_deps(graph, deps, same, dedges, nd))) ||
	    (start && (r = G.add_deps(graph, &start, &node, NULL, 1))) ||
	    (end && ns && (r = G.rm_deps(graph, same, succ, sedges, ns))))
		return gt_twin_fail("edges", r);
	for (size_t n = 0; n < ns; n++)
		same[n] = end;
	return !end || !ns || !(r = G.add_deps(graph, same, succ, NULL, ns)) ||
	       gt_twin_fail("edges after", r);
}

/*
 * The graph's first nodes (no dependencies) are put after a kernel of ours that spins 120
 * us (the calibration kernel): an event node first in a graph, or first in a child graph
 * node first in it, is recorded as the launch starts, before the first kernel is set up,
 * and measured an H200's first kernel of XLA's graphs 5.7 us long at the median, in a
 * child (cuBLAS traced) 3.4 us; after an empty kernel 1.2-1.3 us, after 3 us of spinning
 * 0.9 us (bench/results/twin-xla-2026-11-27-h200.md), and the graph's first 5-8 kernels
 * still 0.5-0.9 us long, the rest 0.1-0.3; after 120 us, every place +0.02-0.4 us, 98-99%
 * of the kernels within 2% or 0.5 us of CUPTI (twin-chain-2026-11-27-h200.md).
 * (GPUSCOPE_TWIN_PRIME_NS=0: the empty kernel; GPUSCOPE_NO_PRIME: neither.)
 */
static bool after_prime(struct twin *t, void *graph)
{
	struct ctx_slot *c = &T.ctx[t->ci];
	struct gs_cu_kernel_node p = { .func = (__u64)(unsigned long)c->prime,
				       .grid = { 1, 1, 1 },
				       .block = { 1, 1, 1 } };
	/* (The calibration kernel spinning tw_prime_ns writes its span at bytes 96..111 of the
	 * gate's page, read by no one.) */
	__u64 out = c->gate.dev + 96, ns = tw_prime_ns;
	void *params[] = { &out, &ns }, **nodes = NULL, *prime = NULL;
	size_t n = 0, nd;
	bool ok;
	int r;

	if (p.func && ns && c->cal && c->gate.host && c->gate.dev) {
		p.func = (__u64)(unsigned long)c->cal;
		p.params = (__u64)(unsigned long)params;
	}

	if (!p.func || !G.add_kernel || G.nodes(graph, NULL, &n) || !n)
		return true;
	if (!(nodes = calloc(n, sizeof(*nodes))) || G.nodes(graph, nodes, &n)) {
		free(nodes);
		return false;
	}
	ok = !(r = G.add_kernel(&prime, graph, NULL, 0, &p)) || gt_twin_fail("empty kernel", r);
	for (size_t i = 0; ok && i < n; i++) {
		if ((r = G.deps(nodes[i], NULL, NULL, &nd)))
			ok = gt_twin_fail("edges", r);
		else if (!nd && (r = G.add_deps(graph, &prime, &nodes[i], NULL, 1)))
			ok = gt_twin_fail("edge", r);
	}
	free(nodes);
	return ok;
}

bool gt_twin_build(struct twin *t)
{
	void *ctx = NULL;
	int r;
	bool ok;

	if (T.cu.ctx_get(&ctx) || !ctx || (t->ci = gt_ctx_slot(ctx)) < 0 ||
	    tw_events + 2 * t->nk + 1 > TWIN_MAX_EVENTS)
		return false;
	if (!T.ctx[t->ci].graph_cal)
		gt_graph_calibrate(&T.ctx[t->ci]);
	t->ev = calloc(2 * (size_t)t->nk, sizeof(*t->ev));
	t->sev = calloc(4 * (size_t)t->nk, sizeof(*t->sev));
	t->eev = t->sev ? t->sev + t->nk : NULL;
	t->startn = t->sev ? t->sev + 2 * t->nk : NULL;
	t->endn = t->sev ? t->sev + 3 * t->nk : NULL;
	t->func = calloc((size_t)t->nk, sizeof(*t->func));
	tw_events += t->ev ? 2 * t->nk + 1 : 0; /* (free_twin gives back as much) */
	ok = t->ev && t->sev && t->func && !T.cu.ev_create(&t->done, EVENT_NO_TIMING);
	for (int k = 0; ok && k < t->nk; k++)
		ok = instrument(t, t->kgraph[k], t->knode[k], 0, k);
	for (int k = 0; ok && k < t->nk; k++)
		t->nev += (t->sev[k] == t->ev[2 * k]) + (t->eev[k] == t->ev[2 * k + 1]);
	ok = ok && (tw_side || after_prime(t, t->graph)) &&
	     (!(r = G.instantiate(&t->twin_exec, t->graph, t->flags)) ||
	      gt_twin_fail("instantiate", r));
	/* Kernel nodes the program disabled before: disabled in the twin too. */
	for (int k = 0; ok && t->off && k < t->nk; k++)
		ok = !t->off[k] || !G.set_enabled(t->twin_exec, t->knode[k], 0) ||
		     gt_twin_fail("disabled node", -1);
	/* Uploaded now, on our stream, and waited for: not by its first run, which would be
	 * timed with the upload in it. (Without the call, or if it fails: by that run.) */
	if (ok && G.upload && !G.upload(t->twin_exec, T.ctx[t->ci].stream) && G.sync)
		G.sync(T.ctx[t->ci].stream);
	if (!ok)
		t->twin_exec = NULL;
	t->state = ok ? TW_READY : TW_OFF;
	return ok;
}

/*
 * Under tw_lock: the program set a child node of t's exec to graph, or updated the whole
 * exec from it; *pend and *stale are the child's, or the update's. Only the launch right
 * after can run the twin (it is due), so the graph is cloned only then, to be set in the
 * twin before it runs (set_child, apply_update); otherwise the set is only noted, and the
 * twin does not run until it is set again right before a launch that may run it (XLA sets
 * its traced children before every launch). False if it cannot be followed.
 */
static bool keep_graph(struct twin *t, void **pend, bool *stale, __u64 graph)
{
	void *clone = NULL;

	if (*pend)
		G.graph_destroy(*pend);
	*pend = NULL;
	*stale = true;
	if (t->launches % (__u64)t->interval)
		return true;
	if (G.clone(&clone, (void *)(unsigned long)graph))
		return false;
	*pend = clone;
	*stale = false;
	return true;
}

/* An update of the whole exec: what was set before it no longer counts. */
static bool keep_update(struct twin *t, __u64 graph)
{
	if (!G.exec_update)
		return false;
	gt_twin_drop_sets(t);
	for (int i = 0; i < t->nchild; i++) {
		if (t->child[i].pend)
			G.graph_destroy(t->child[i].pend);
		t->child[i].pend = NULL;
		t->child[i].stale = false;
	}
	return keep_graph(t, &t->upd, &t->upd_stale, graph);
}

/* Under tw_lock, before a run of the built twin: the update kept, its clone given the
 * twin's event nodes (the same events) and empty kernel, as built. */
static bool apply_update(struct twin *t)
{
	__u64 info[8] = { 0 }; /* (CUgraphExecUpdateResultInfo) */
	struct walk w = { .cap = t->nk };
	bool ok;
	int r;

	w.knode = calloc((size_t)t->nk, sizeof(*w.knode));
	w.kgraph = calloc((size_t)t->nk, sizeof(*w.kgraph));
	/* (CUDA updates an exec only from a graph of the same shape.) */
	ok = w.knode && w.kgraph && walk(&w, t->upd, 0) && w.nk == t->nk;
	for (int k = 0; ok && k < t->nk; k++)
		ok = instrument(t, w.kgraph[k], w.knode[k], 0, k);
	ok = ok && (tw_side || after_prime(t, t->upd)) &&
	     (!(r = G.exec_update(t->twin_exec, t->upd, info)) || gt_twin_fail("update", r));
	t->updated = true;
	free(w.knode);
	free(w.kgraph);
	G.graph_destroy(t->upd);
	t->upd = NULL;
	return ok;
}

/* Under tw_lock, before a run of the built twin: child c as the program set it last (its
 * clone given the same event nodes, with the same events). */
static bool set_child(struct twin *t, struct tchild *c)
{
	int n = c->k1 - c->k0, r;
	struct walk w = { .cap = n };
	bool ok;

	w.knode = calloc((size_t)n + 1, sizeof(*w.knode));
	w.kgraph = calloc((size_t)n + 1, sizeof(*w.kgraph));
	/* (CUDA sets a child only to a graph of the same shape.) */
	ok = w.knode && w.kgraph && walk(&w, c->pend, 1) && w.nk == n;
	for (int j = 0; ok && j < n; j++)
		ok = instrument(t, w.kgraph[j], w.knode[j], c->k0, c->k0 + j);
	ok = ok &&
	     (!(r = G.exec_child(t->twin_exec, c->node, c->pend)) || gt_twin_fail("child", r));
	free(w.knode);
	free(w.kgraph);
	G.graph_destroy(c->pend);
	c->pend = NULL;
	return ok;
}

static bool apply_children(struct twin *t, bool *ready)
{
	for (int i = 0; i < t->nchild; i++) {
		struct tchild *c = &t->child[i];

		if (c->pend && !set_child(t, c))
			return false;
		if (c->stale)
			*ready = false;
	}
	return true;
}

struct twin *gt_twin_new(__u64 graph, unsigned long long flags, const char **why)
{
	struct twin *t = NULL;
	void *clone = NULL;

	*why = "no twin: driver functions missing";
	if (!gt_twin_load())
		return NULL;
	*why = "no twin: not cloned";
	if (G.clone(&clone, (void *)(unsigned long)graph))
		return NULL;
	*why = "no twin: nodes it cannot have";
	if (!(t = calloc(1, sizeof(*t))) || !eligible(t, clone) || !gt_twin_index(t)) {
		G.graph_destroy(clone);
		if (t) {
			free(t->knode);
			free(t->kgraph);
			free(t->child);
			free(t->byclone);
		}
		free(t);
		return NULL;
	}
	t->graph = clone;
	t->flags = flags;
	t->interval = gt_twin_every(); /* (until its first run) */
	t->state = TW_CLONED;
	return t;
}

bool gt_twin_kernel_set(struct twin *t, __u64 node, const struct gs_cu_kernel_node *p)
{
	void *cn = NULL;

	return G.find_in_clone && !G.find_in_clone(&cn, (void *)(unsigned long)node, t->graph) &&
	       gt_twin_keep_set(t, cn, p);
}

bool gt_twin_graph_set(struct twin *t, __u64 node, __u64 graph)
{
	void *cn = NULL;
	int i = -1;

	if (!node)
		return keep_update(t, graph);
	if (G.find_in_clone && G.exec_child &&
	    !G.find_in_clone(&cn, (void *)(unsigned long)node, t->graph))
		for (i = t->nchild - 1; i >= 0 && t->child[i].node != cn; i--)
			;
	return i >= 0 && keep_graph(t, &t->child[i].pend, &t->child[i].stale, graph);
}

/* The graph's setter of the same node (for a clone not built yet) of each exec setter that
 * a twin follows at once. */
static const struct {
	unsigned int api;
	const char *graph_set;
} node_setters[] = {
	{ GS_API_CU_GRAPH_EXEC_MEMCPY_NODE_SET_PARAMS, "cuGraphMemcpyNodeSetParams" },
	{ GS_API_CU_GRAPH_EXEC_MEMSET_NODE_SET_PARAMS, "cuGraphMemsetNodeSetParams" },
	{ GS_API_CU_GRAPH_EXEC_HOST_NODE_SET_PARAMS, "cuGraphHostNodeSetParams" },
	{ GS_API_CU_GRAPH_EXEC_EVENT_RECORD_NODE_SET_EVENT, "cuGraphEventRecordNodeSetEvent" },
	{ GS_API_CU_GRAPH_EXEC_EVENT_WAIT_NODE_SET_EVENT, "cuGraphEventWaitNodeSetEvent" },
	{ GS_API_CU_GRAPH_EXEC_BATCH_MEM_OP_NODE_SET_PARAMS, "cuGraphBatchMemOpNodeSetParams" },
	{ GS_API_CU_GRAPH_EXEC_NODE_SET_PARAMS, "cuGraphNodeSetParams" },
};

bool gt_twin_node_set(struct twin *t, unsigned int api, __u64 node, __u64 params, __u64 ctx)
{
	typedef int (*graph_set_fn)(void *, __u64);
	gs_fn exec_set = gs_real(api);
	graph_set_fn graph_set = NULL;
	void *cn = NULL;
	int type = -1;

	for (size_t i = 0; i < sizeof(node_setters) / sizeof(node_setters[0]); i++)
		if (node_setters[i].api == api)
			graph_set = (graph_set_fn)gs_real_by_name(node_setters[i].graph_set);
	/* (A child or conditional node by the generic setter: not followed.) */
	if (!G.find_in_clone || G.find_in_clone(&cn, (void *)(unsigned long)node, t->graph) ||
	    G.type(cn, &type) || type == NODE_CHILD || type == 13)
		return false;
	/* A set after an update not applied yet: the twin waits for the next update. */
	if (t->upd || t->upd_stale) {
		if (t->upd)
			G.graph_destroy(t->upd);
		t->upd = NULL;
		t->upd_stale = true;
		return true;
	}
	if (t->state == TW_READY)
		return exec_set &&
		       !exec_set((__u64)(unsigned long)t->twin_exec, (__u64)(unsigned long)cn,
				 params, ctx, 0, 0, 0, 0, 0, 0, 0);
	return graph_set && !graph_set(cn, params);
}

bool gt_twin_enabled(struct twin *t, __u64 node, bool on)
{
	void *cn = NULL;
	int k;

	/* (After an update, which graph's node the program means is not sure.) */
	if (t->updated || t->upd || t->upd_stale || !G.find_in_clone || !G.set_enabled ||
	    G.find_in_clone(&cn, (void *)(unsigned long)node, t->graph))
		return false;
	for (k = 0; k < t->nk && t->knode[k] != cn; k++)
		;
	if (k == t->nk && t->state != TW_READY)
		return false;
	if (k < t->nk) {
		if (!t->off && !(t->off = calloc((size_t)t->nk, sizeof(*t->off))))
			return false;
		t->noff += (!on && !t->off[k]) - (on && t->off[k]);
		t->off_gen += t->off[k] != !on;
		t->off[k] = !on;
	}
	return t->state != TW_READY || !G.set_enabled(t->twin_exec, cn, on);
}

bool gt_twin_prepare(struct twin *t, bool *ready)
{
	*ready = !t->upd_stale;
	return (!t->upd || apply_update(t)) && (!t->npend || gt_twin_apply_sets(t)) &&
	       (!t->nchild || apply_children(t, ready));
}

void gt_twin_wait(__u64 stream, bool ptsz, void *event)
{
	(ptsz ? G.wait_ptsz : G.wait)(stream, event, 0);
}

void gt_twin_forget(void)
{
	tw_events = 0;
}
