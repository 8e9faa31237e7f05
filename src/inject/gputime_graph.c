// SPDX-License-Identifier: MIT
/*
 * GPU times of the kernels inside CUDA graphs (gputime_int.h), through a twin.
 *
 * A graph launch runs its kernels where no call of ours comes between them. So when the
 * program instantiates a graph, the graph is cloned (the executable graph is a snapshot,
 * and so is the clone: the program may change or destroy its graph afterwards). At the
 * exec's first sampled launch (not its first launch; every TWIN_EVERY-th at most), the
 * clone gets an event record node in line before and after each kernel node (instrument)
 * and is instantiated: the twin. A sampled launch of the exec runs the twin in its place,
 * on the program's stream, and each kernel's pair of events goes to the harvester as a
 * launch's pair does (GS_GPU_IN_GRAPH; what the nodes add is calibrated apart:
 * gputime_graphcal.c).
 *
 * The twin must do what the exec would have done, so it is only used where that is sure:
 *  - graphs of kernels, copies, sets, host functions, empty nodes, event records and waits
 *    and stream memory operations: no child graphs or conditional nodes (the program may
 *    set their bodies at the exec), no memory allocation or free nodes (the twin would
 *    allocate its own), no external semaphores, no kernel node the device may update, not
 *    instantiated for device launch;
 *  - a kernel node the program sets at the exec (XLA sets them all before each launch of
 *    a command buffer whose buffers moved) is set the same way in the twin before its next
 *    run: the parameters' values are copied at the program's call, as the driver takes
 *    them, and only the last set of each node is applied, at the twin's run
 *    (gputime_graphset.c);
 *  - never once the program changed the exec otherwise (the other exec setters,
 *    cuGraphNodeSetEnabled, cuGraphExecUpdate: wrappers of the table tell us); a program
 *    that obtains an exec setter we do not wrap turns twins off for the whole process
 *    (gs_graphtime_unwrapped);
 *  - the exec's launches stay in order: CUDA orders the launches of one exec, and the twin
 *    is another one, so it runs only on the stream of the exec's launch before, and the
 *    launch after it, on another stream, first waits for an event recorded after it;
 *  - one run of a twin at a time: its events are read before it runs again.
 * A twin that fails to launch is dropped and the exec launched instead.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "inject/gputime_twin.h"

#define TWIN_BUCKETS	      256
#define TWIN_MAX_KERNELS      2048
#define TWIN_MAX_EVENTS	      65536 /* all twins of the process together */
#define NODE_KERNEL	      0
#define NODE_CHILD	      4
#define ATTR_DEVICE_UPDATABLE 13
#define INST_DEVICE_LAUNCH    4ULL
#define INST_NODE_PRIORITY    8ULL
#define EVENT_NO_TIMING	      2U

enum {
	TW_CLONED = 1,
	TW_READY,
	TW_OFF
};

typedef int (*g_clone_fn)(void **, void *);
typedef int (*g_nodes_fn)(void *, void **, size_t *);
typedef int (*g_type_fn)(void *, int *);
typedef int (*g_kparams_fn)(void *, void *);
typedef int (*g_kattr_fn)(void *, int, void *);
typedef int (*g_deps_fn)(void *, void **, void *, size_t *);
typedef int (*g_add_record_fn)(void **, void *, void **, size_t, void *);
typedef int (*g_add_deps_fn)(void *, void **, void **, void *, size_t);
typedef int (*g_inst_fn)(void **, void *, unsigned long long);
typedef int (*g_destroy_fn)(void *);
typedef int (*g_wait_fn)(__u64, void *, unsigned int);
typedef int (*g_add_kernel_fn)(void **, void *, void **, size_t, const struct gs_cu_kernel_node *);
typedef int (*g_find_fn)(void **, void *, void *);

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
} G;

static pthread_mutex_t tw_lock = PTHREAD_MUTEX_INITIALIZER;
static struct twin *twins[TWIN_BUCKETS];
static struct twin *graveyard; /* retired while a run's events were still out */
static int tw_events, tw_count;
static int tw_loaded; /* 1 ready, -1 not available */
static bool tw_off;   /* an exec setter we do not wrap was handed out */
static bool tw_side;  /* GPUSCOPE_TWIN_EDGES=side: events beside the kernels (to compare) */
/* A twin runs at every TWIN_EVERY-th launch of its exec at most (or --gpu-time=N's N, if
 * more): its event nodes cost the GPU about 1.7 us each (H200: a CUDA-graph training step
 * of 19 kernels replayed and waited for 1.94x with a twin at every launch, 1.20x with
 * none; bench/results/twin-2026-11-27-h200.md). GPUSCOPE_TWIN_EVERY to change it. */
#define TWIN_EVERY 16
static int tw_every = TWIN_EVERY;

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
	if (getenv("GPUSCOPE_TWIN_EVERY") && atoi(getenv("GPUSCOPE_TWIN_EVERY")) > 0)
		tw_every = atoi(getenv("GPUSCOPE_TWIN_EVERY"));
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

static bool load(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, load_now);
	return tw_loaded > 0;
}

/* For diagnosing the plane itself (GPUSCOPE_INJECT_DEBUG): why an exec has no twin. */
static void debug(const char *what, __u64 exec)
{
	static int on = -1;

	if (on < 0)
		on = getenv("GPUSCOPE_INJECT_DEBUG") != NULL;
	if (on)
		fprintf(stderr, "gpuscope-inject: graph exec %#llx: %s\n", (unsigned long long)exec,
			what);
}

static unsigned int bucket(__u64 exec)
{
	return gt_slot_hash(exec, TWIN_BUCKETS);
}

/* Under tw_lock: the twin of exec, unlinked if unlink. */
static struct twin *find(__u64 exec, bool unlink)
{
	for (struct twin **p = &twins[bucket(exec)]; *p; p = &(*p)->next) {
		struct twin *t = *p;

		if (t->exec != exec)
			continue;
		if (unlink)
			*p = t->next;
		return t;
	}
	return NULL;
}

/* Under tw_lock. */
static void free_twin(struct twin *t)
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
	tw_count--;
	gt_twin_free_sets(t);
	free(t->knode);
	free(t->byclone);
	free(t->ev);
	free(t->func);
	free(t);
}

/* Under tw_lock: twins retired with a run's events out, freed once those are read. */
static void sweep(void)
{
	for (struct twin **p = &graveyard; *p;) {
		struct twin *t = *p;

		if (__atomic_load_n(&t->outstanding, __ATOMIC_ACQUIRE)) {
			p = &t->next;
			continue;
		}
		*p = t->next;
		free_twin(t);
	}
}

static void retire(struct twin *t)
{
	if (!__atomic_load_n(&t->outstanding, __ATOMIC_ACQUIRE)) {
		free_twin(t);
		return;
	}
	t->state = TW_OFF;
	t->next = graveyard;
	graveyard = t;
}

/* Whether every node of the clone is of a kind the twin can run as the exec would; its
 * kernel nodes, in the clone's order, in t (t->knode, t->nk). */
static bool eligible(struct twin *t, void *graph)
{
	size_t n = 0;
	void **nodes;
	bool ok = true;
	int *nk = &t->nk;

	*nk = 0;
	/* (Not read past a size no twin could have anyway.) */
	if (G.nodes(graph, NULL, &n) || !n || n > 8 * TWIN_MAX_KERNELS)
		return false;
	nodes = calloc(n, sizeof(*nodes));
	t->knode = calloc(n, sizeof(*t->knode));
	if (!nodes || !t->knode || G.nodes(graph, nodes, &n)) {
		free(nodes);
		return false;
	}
	for (size_t i = 0; ok && i < n; i++) {
		/* (The value of a launch attribute: 64 bytes; deviceUpdatable its first int.) */
		__u64 attr[8] = { 0 };
		int type = -1;

		ok = !G.type(nodes[i], &type) && type >= 0 && type <= 12 && type != NODE_CHILD &&
		     (type < 8 || type == 12);
		if (!ok && getenv("GPUSCOPE_INJECT_DEBUG"))
			fprintf(stderr, "gpuscope-inject: graph twin: node type %d\n", type);
		if (ok && type == NODE_KERNEL) {
			t->knode[*nk] = nodes[i];
			ok = ++*nk <= TWIN_MAX_KERNELS;
			/* (A driver that does not know the attribute has no such nodes.) */
			if (ok && G.kattr && !G.kattr(nodes[i], ATTR_DEVICE_UPDATABLE, attr))
				ok = (int)attr[0] == 0;
		}
	}
	free(nodes);
	return ok && *nk > 0;
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
 * A kernel node of the clone: its handle, and an event record node right before it and
 * right after it, in line: the kernel's dependencies go to the first (which the kernel
 * then follows), its dependents follow the second. Beside it instead (the first after the
 * dependencies, the second after the kernel, nothing after that), each event would be
 * the graph's only node on its own path, and measured an H200's kernels 5.9 us long at the
 * median (the hops between the graph's streams, we think).
 */
static bool instrument(struct twin *t, void *node, int k, void **root)
{
	struct gs_cu_kernel_node p = { 0 };
	void *deps[64], *succ[64], *same[64], *start, *end;
	__u64 dedges[64], sedges[64];
	size_t nd, ns;
	int r;

	if ((r = G.kparams(node, &p)))
		return gt_twin_fail("kernel parameters", r);
	if (!edges_of(G.deps, node, deps, dedges, &nd) ||
	    !edges_of(G.succ, node, succ, sedges, &ns))
		return false;
	t->func[k] = p.func ? p.func : p.kern;
	gt_name_kernel(t->func[k], p.func != 0);
	if ((r = T.cu.ev_create(&t->ev[2 * k], 0)) || (r = T.cu.ev_create(&t->ev[2 * k + 1], 0)))
		return gt_twin_fail("events", r);
	if ((r = G.add_record(&start, t->graph, deps, nd, t->ev[2 * k])) ||
	    (r = G.add_record(&end, t->graph, &node, 1, t->ev[2 * k + 1])))
		return gt_twin_fail("event nodes", r);
	*root = nd ? NULL : start;
	if (tw_side)
		return !(r = G.add_deps(t->graph, &start, &node, NULL, 1)) ||
		       gt_twin_fail("edge", r);
	for (size_t i = 0; i < 64; i++)
		same[i] = node;
	if ((nd && (r = G.rm_deps(t->graph, deps, same, dedges, nd))) ||
	    (r = G.add_deps(t->graph, &start, &node, NULL, 1)) ||
	    (ns && (r = G.rm_deps(t->graph, same, succ, sedges, ns))))
		return gt_twin_fail("edges", r);
	for (size_t i = 0; i < ns; i++)
		same[i] = end;
	return !ns || !(r = G.add_deps(t->graph, same, succ, NULL, ns)) ||
	       gt_twin_fail("edges after", r);
}

/*
 * A kernel's start event node that has no dependencies (the graph's first nodes) is put
 * after an empty kernel of ours (*prime, added at the first): run first, such an event is
 * recorded as the launch starts, and measured the H200's first kernel of XLA's graphs
 * 5.7 us long at the median (the others 0.2-0.7 us). (GPUSCOPE_NO_PRIME: not.)
 */
static bool after_prime(struct twin *t, void *root, void **prime)
{
	struct gs_cu_kernel_node p = { .func = (__u64)(unsigned long)T.ctx[t->ci].prime,
				       .grid = { 1, 1, 1 },
				       .block = { 1, 1, 1 } };
	int r;

	if (!p.func || !G.add_kernel)
		return true;
	if (!*prime && (r = G.add_kernel(prime, t->graph, NULL, 0, &p)))
		return gt_twin_fail("empty kernel", r);
	return !(r = G.add_deps(t->graph, prime, &root, NULL, 1)) || gt_twin_fail("edge", r);
}

/* Under tw_lock, the exec's context current: the twin, from the clone. */
static bool build(struct twin *t)
{
	void *ctx = NULL, *root, *prime = NULL;
	int r;
	bool ok;

	if (T.cu.ctx_get(&ctx) || !ctx || (t->ci = gt_ctx_slot(ctx)) < 0 ||
	    tw_events + 2 * t->nk + 1 > TWIN_MAX_EVENTS)
		return false;
	if (!T.ctx[t->ci].graph_cal)
		gt_graph_calibrate(&T.ctx[t->ci]);
	t->ev = calloc(2 * (size_t)t->nk, sizeof(*t->ev));
	t->func = calloc((size_t)t->nk, sizeof(*t->func));
	tw_events += t->ev ? 2 * t->nk + 1 : 0; /* (free_twin gives back as much) */
	ok = t->ev && t->func && !T.cu.ev_create(&t->done, EVENT_NO_TIMING);
	for (int k = 0; ok && k < t->nk; k++) {
		ok = instrument(t, t->knode[k], k, &root);
		if (ok && root && !tw_side)
			ok = after_prime(t, root, &prime);
	}
	ok = ok && (!(r = G.instantiate(&t->twin_exec, t->graph, t->flags)) ||
		    gt_twin_fail("instantiate", r));
	if (!ok)
		t->twin_exec = NULL;
	t->state = ok ? TW_READY : TW_OFF;
	return ok;
}

void gs_graphtime_instantiated(__u64 exec, __u64 graph, unsigned long long flags)
{
	struct twin *t, *old;
	void *clone = NULL;

	if (!T.every || __atomic_load_n(&tw_off, __ATOMIC_RELAXED) || !exec || !graph ||
	    (flags & INST_DEVICE_LAUNCH))
		return;
	pthread_mutex_lock(&tw_lock);
	sweep();
	if (!load() || tw_count >= 4096 || G.clone(&clone, (void *)(unsigned long)graph)) {
		pthread_mutex_unlock(&tw_lock);
		debug(tw_loaded < 0 ? "no twin: driver functions missing" : "no twin: not cloned",
		      exec);
		return;
	}
	t = calloc(1, sizeof(*t));
	if (!t || !eligible(t, clone) || !gt_twin_index(t)) {
		debug("no twin: nodes it cannot have", exec);
		G.graph_destroy(clone);
		free(t ? t->knode : NULL);
		free(t ? t->byclone : NULL);
		free(t);
		pthread_mutex_unlock(&tw_lock);
		return;
	}
	t->exec = exec;
	t->graph = clone;
	t->flags = flags & INST_NODE_PRIORITY;
	t->state = TW_CLONED;
	/* (A handle the driver gives again: the old exec is gone.) */
	if ((old = find(exec, true)))
		retire(old);
	t->next = twins[bucket(exec)];
	twins[bucket(exec)] = t;
	tw_count++;
	pthread_mutex_unlock(&tw_lock);
}

void gs_graphtime_changed(__u64 exec, unsigned int api)
{
	bool destroyed = api == GS_API_CU_GRAPH_EXEC_DESTROY;
	struct twin *t;

	if (!destroyed)
		debug(api_name(api), exec);
	if (!__atomic_load_n(&tw_count, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&tw_lock);
	if ((t = find(exec, destroyed)) && destroyed)
		retire(t);
	else if (t)
		t->state = TW_OFF;
	pthread_mutex_unlock(&tw_lock);
}

void gs_graphtime_kernel_set(unsigned int api, __u64 exec, __u64 node, __u64 params, int result)
{
	struct gs_cu_kernel_node p = { 0 };
	void *cn = NULL;
	struct twin *t;
	int type = 0;

	if (!__atomic_load_n(&tw_count, __ATOMIC_RELAXED))
		return;
	/* (The driver read the parameters in a call that succeeded: they are there.) */
	if (!result && api == GS_API_CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V1)
		memcpy(&p, (const void *)(unsigned long)params,
		       offsetof(struct gs_cu_kernel_node, kern));
	else if (!result && api == GS_API_CU_GRAPH_EXEC_NODE_SET_PARAMS)
		memcpy(&type, (const void *)(unsigned long)params, sizeof(type));
	if (!result && api == GS_API_CU_GRAPH_EXEC_NODE_SET_PARAMS && type == NODE_KERNEL)
		memcpy(&p, (const char *)(unsigned long)params + 16, sizeof(p));
	else if (!result && api == GS_API_CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS)
		memcpy(&p, (const void *)(unsigned long)params, sizeof(p));
	pthread_mutex_lock(&tw_lock);
	t = find(exec, false);
	if (t && t->state != TW_OFF &&
	    (result || type != NODE_KERNEL || !G.find_in_clone ||
	     G.find_in_clone(&cn, (void *)(unsigned long)node, t->graph) ||
	     !gt_twin_keep_set(t, cn, &p))) {
		debug(result ? "no twin: a set that failed" : "no twin: a set it cannot follow",
		      exec);
		t->state = TW_OFF;
	}
	pthread_mutex_unlock(&tw_lock);
}

void gs_graphtime_unwrapped(void)
{
	__atomic_store_n(&tw_off, true, __ATOMIC_RELAXED);
	pthread_mutex_lock(&tw_lock);
	for (int b = 0; b < TWIN_BUCKETS; b++)
		for (struct twin *t = twins[b]; t; t = t->next)
			t->state = TW_OFF;
	pthread_mutex_unlock(&tw_lock);
}

/* A stream's one name (the legacy stream's two; a NULL stream of a _ptsz variant is the
 * thread's own). */
static __u64 stream_name(__u64 stream, bool ptsz)
{
	if (stream == GS_CU_STREAM_LEGACY)
		stream = 0;
	if (!stream && ptsz)
		return GS_CU_STREAM_PER_THREAD | (__u64)gs_self_tid() << 32;
	if (stream == GS_CU_STREAM_PER_THREAD)
		return stream | (__u64)gs_self_tid() << 32;
	return stream;
}

__u64 gs_graphtime_launch(struct gs_graph_launch *gl, __u64 exec, __u64 stream, bool ptsz)
{
	__u64 key, n;
	struct twin *t;
	int capturing = 0;
	bool sample, want;

	gl->twin = NULL;
	if (!__atomic_load_n(&tw_count, __ATOMIC_RELAXED))
		return exec;
	key = stream_name(stream, ptsz);
	pthread_mutex_lock(&tw_lock);
	t = find(exec, false);
	if (!t || t->state == TW_OFF) {
		pthread_mutex_unlock(&tw_lock);
		return exec;
	}
	n = t->launches++;
	/* After a run of the twin on another stream: what CUDA would have ordered. (Not into a
	 * stream being captured: an event of ours would join the program's graph.) */
	if (t->wait_done && key != t->twin_stream &&
	    !(ptsz ? T.cu.capturing_ptsz : T.cu.capturing)(stream, &capturing) && !capturing)
		(ptsz ? G.wait_ptsz : G.wait)(stream, t->done, 0);
	t->wait_done = false;
	want = n >= 1 && key == t->stream &&
	       n % (__u64)(T.every > tw_every ? T.every : tw_every) == 0;
	t->stream = key;
	/* Its last run is over but not read yet (the harvester comes every millisecond): read
	 * now, so that this launch can run it again. */
	if (want && t->state == TW_READY && __atomic_load_n(&t->outstanding, __ATOMIC_ACQUIRE) &&
	    !T.cu.ev_query(t->done)) {
		pthread_mutex_unlock(&tw_lock);
		gt_harvest_now();
		pthread_mutex_lock(&tw_lock);
		if (find(exec, false) != t) {
			pthread_mutex_unlock(&tw_lock);
			return exec;
		}
	}
	sample = want && !__atomic_load_n(&t->outstanding, __ATOMIC_ACQUIRE);
	if (sample && t->state == TW_CLONED && !build(t))
		debug("no twin: building it failed", exec);
	if (sample && t->state == TW_READY && t->npend && !gt_twin_apply_sets(t))
		t->state = TW_OFF;
	/* (Nothing of ours goes into a stream being captured.) */
	sample = sample && t->state == TW_READY &&
		 !(ptsz ? T.cu.capturing_ptsz : T.cu.capturing)(stream, &capturing) && !capturing;
	if (sample) {
		__atomic_store_n(&t->outstanding, t->nk, __ATOMIC_RELEASE);
		gl->twin = t;
	}
	pthread_mutex_unlock(&tw_lock);
	return sample ? (__u64)(unsigned long)t->twin_exec : exec;
}

bool gs_graphtime_launched(struct gs_graph_launch *gl, int result, __u64 stream, bool ptsz,
			   const struct gs_timed_call *call)
{
	struct twin *t = gl->twin;

	if (!t)
		return false;
	pthread_mutex_lock(&tw_lock);
	if (result) {
		t->state = TW_OFF;
		__atomic_store_n(&t->outstanding, 0, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&tw_lock);
		return true; /* the exec itself, then */
	}
	t->wait_done = !(ptsz ? T.cu.ev_record_ptsz : T.cu.ev_record)(t->done, stream);
	t->twin_stream = stream_name(stream, ptsz);
	pthread_mutex_unlock(&tw_lock);
	pthread_mutex_lock(&T.lock);
	for (int k = 0; k < t->nk; k++) {
		struct pending p = { .start = t->ev[2 * k],
				     .end = t->ev[2 * k + 1],
				     .c = *call,
				     .stream = ptsz && !stream ? GS_CU_STREAM_PER_THREAD : stream,
				     .tid = gs_self_tid(),
				     .ci = (__u8)t->ci,
				     .twin = &t->outstanding };

		p.c.func = t->func[k];
		p.c.kind = GS_GPU_KERNEL;
		gt_queue(&p);
	}
	pthread_mutex_unlock(&T.lock);
	return false;
}

void gs_graphtime_after_fork(void)
{
	/* The parent's graphs and events do not exist here (left, not freed). */
	pthread_mutex_init(&tw_lock, NULL);
	memset(twins, 0, sizeof(twins));
	graveyard = NULL;
	tw_events = tw_count = 0;
}
