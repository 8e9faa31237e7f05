// SPDX-License-Identifier: MIT
/*
 * GPU times of the kernels inside CUDA graphs (gputime_int.h), through a twin.
 *
 * A graph launch runs its kernels where no call of ours comes between them. So when the
 * program instantiates a graph, the graph is cloned (the executable graph is a snapshot,
 * and so is the clone: the program may change or destroy its graph afterwards). At the
 * exec's first sampled launch (not its first launch; every TWIN_EVERY-th at most, and no
 * more often than keeps the twin's runs under a share of the exec's GPU time), the clone
 * gets an event record node in line before and after each kernel node (one between two
 * kernels of a chain) and is instantiated and uploaded: the twin (gputime_graphbuild.c).
 * A sampled launch of the exec runs the twin in its place, on the program's stream, and
 * each kernel's pair of events goes to the harvester as a launch's pair does
 * (GS_GPU_IN_GRAPH; what the nodes add is calibrated apart: gputime_graphcal.c).
 *
 * The twin must do what the exec would have done, so it is only used where that is sure:
 *  - graphs of kernels, copies, sets, host functions, empty nodes, event records and waits,
 *    stream memory operations and child graphs of the same (a child's kernels get their
 *    event nodes in the child): no conditional nodes (the GPU picks their bodies), no
 *    memory allocation or free nodes (the twin would allocate its own), no external
 *    semaphores, no kernel node the device may update, not instantiated for device launch;
 *  - a kernel node the program sets at the exec (XLA sets them all before each launch of
 *    a command buffer whose buffers moved) is set the same way in the twin before its next
 *    run: the parameters' values are copied at the program's call, as the driver takes
 *    them, and only the last set of each node is applied, at the twin's run
 *    (gputime_graphset.c); a child node the program sets at the exec (XLA's traced cuBLAS
 *    calls, before each launch) is cloned when the launch right after may run the twin,
 *    and set in the twin, with its event nodes, before it does (gputime_graphbuild.c), and
 *    so is an update of the whole exec (cuGraphExecUpdate: llama.cpp updates its exec
 *    from each token's capture);
 *    the other nodes' exec setters (copies, sets, host functions, events, memory
 *    operations) are made on the twin too, at once;
 *  - a kernel node the program disables or enables again (cuGraphNodeSetEnabled) is the
 *    same in the twin, and a disabled kernel's time is not read (copies and sets of a
 *    built twin too; not after an update of the exec);
 *  - never once the program changed the exec otherwise (the semaphore nodes' setters:
 *    wrappers of the table tell us); a program
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

#define TWIN_BUCKETS	   256
#define TWIN_MAX	   4096 /* twins of a process */
#define NODE_KERNEL	   0
#define INST_DEVICE_LAUNCH 4ULL
#define INST_NODE_PRIORITY 8ULL

static pthread_mutex_t tw_lock = PTHREAD_MUTEX_INITIALIZER;
static struct twin *twins[TWIN_BUCKETS];
static struct twin *graveyard; /* retired while a run's events were still out */
static int tw_count;
static bool tw_off; /* an exec setter we do not wrap was handed out */
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
		gt_twin_free(t);
		tw_count--;
	}
}

static void retire(struct twin *t)
{
	if (!__atomic_load_n(&t->outstanding, __ATOMIC_ACQUIRE)) {
		gt_twin_free(t);
		tw_count--;
		return;
	}
	t->state = TW_OFF;
	t->next = graveyard;
	graveyard = t;
}

void gs_graphtime_instantiated(__u64 exec, __u64 graph, unsigned long long flags)
{
	struct twin *t, *old;
	const char *why = NULL;

	/* (Under --gpu-time=cupti, a graph's kernels have records of the driver's.) */
	if (!gt_every || __atomic_load_n(&tw_off, __ATOMIC_RELAXED) || !exec || !graph ||
	    (flags & INST_DEVICE_LAUNCH) || gs_cupti_times_graphs())
		return;
	pthread_mutex_lock(&tw_lock);
	sweep();
	if (tw_count >= TWIN_MAX || !(t = gt_twin_new(graph, flags & INST_NODE_PRIORITY, &why))) {
		pthread_mutex_unlock(&tw_lock);
		debug(why ? why : "no twin: too many", exec);
		return;
	}
	t->exec = exec;
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
	if (t && t->state != TW_OFF && !result && type != NODE_KERNEL)
		result = !gt_twin_node_set(t, api, node, params, 0);
	else if (t && t->state != TW_OFF && !result)
		result = !gt_twin_kernel_set(t, node, &p);
	if (t && t->state != TW_OFF && result) {
		debug(result ? "no twin: a set that failed" : "no twin: a set it cannot follow",
		      exec);
		t->state = TW_OFF;
	}
	pthread_mutex_unlock(&tw_lock);
}

void gs_graphtime_node_set(unsigned int api, __u64 exec, __u64 node, __u64 params, __u64 ctx,
			   int result)
{
	struct twin *t;

	if (!__atomic_load_n(&tw_count, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&tw_lock);
	t = find(exec, false);
	if (t && t->state != TW_OFF && (result || !gt_twin_node_set(t, api, node, params, ctx))) {
		debug(api_name(api), exec);
		t->state = TW_OFF;
	}
	pthread_mutex_unlock(&tw_lock);
}

void gs_graphtime_enabled(__u64 exec, __u64 node, unsigned int on, int result)
{
	struct twin *t;

	if (!__atomic_load_n(&tw_count, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&tw_lock);
	t = find(exec, false);
	if (t && t->state != TW_OFF && (result || !gt_twin_enabled(t, node, on != 0))) {
		debug("no twin: a node enabled or disabled that it cannot follow", exec);
		t->state = TW_OFF;
	}
	pthread_mutex_unlock(&tw_lock);
}

void gs_graphtime_graph_set(__u64 exec, __u64 node, __u64 graph, int result)
{
	struct twin *t;

	if (!__atomic_load_n(&tw_count, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&tw_lock);
	t = find(exec, false);
	if (t && t->state != TW_OFF && (result || !gt_twin_graph_set(t, node, graph))) {
		debug(node ? "no twin: a child set it cannot follow"
			   : "no twin: an update it cannot follow",
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
	bool sample, want, ready = true;

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
		gt_twin_wait(stream, ptsz, t->done);
	t->wait_done = false;
	/* (Not where the driver's records time the kernels: --gpu-time=cupti, as ab.c may
	 * switch to after the twin was made.) */
	want = n >= 1 && key == t->stream && n % (__u64)t->interval == 0 &&
	       !gs_cupti_times_graphs();
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
	if (sample && t->state == TW_CLONED && !gt_twin_build(t))
		debug("no twin: building it failed", exec);
	if (sample && t->state == TW_READY && !gt_twin_prepare(t, &ready))
		t->state = TW_OFF;
	/* (Nothing of ours goes into a stream being captured.) */
	sample = sample && ready && t->state == TW_READY &&
		 !(ptsz ? T.cu.capturing_ptsz : T.cu.capturing)(stream, &capturing) && !capturing;
	if (sample) {
		t->interval = gt_twin_interval(t);
		__atomic_store_n(&t->outstanding, t->nk - t->noff, __ATOMIC_RELEASE);
		gl->twin = t;
		gl->off_gen = t->off_gen;
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
	/* (Another thread enabled or disabled a kernel node since the launch: which of this
	 * run's kernels ran is not sure, and none is read.) */
	if (t->off_gen != gl->off_gen) {
		__atomic_store_n(&t->outstanding, 0, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&tw_lock);
		return false;
	}
	/* (Both locks: off stays as it was at the launch; tw_lock is taken before T.lock
	 * wherever both are.) */
	pthread_mutex_lock(&T.lock);
	for (int k = 0; k < t->nk; k++) {
		struct pending p = { .start = t->sev[k],
				     .end = t->eev[k],
				     .c = *call,
				     .stream = ptsz && !stream ? GS_CU_STREAM_PER_THREAD : stream,
				     .tid = gs_self_tid(),
				     .ci = (__u8)t->ci,
				     .twin = &t->outstanding };

		/* (A kernel disabled ran nothing: no time.) */
		if (t->off && t->off[k])
			continue;
		p.c.func = t->func[k];
		p.c.kind = GS_GPU_KERNEL;
		gt_queue(&p);
	}
	pthread_mutex_unlock(&T.lock);
	pthread_mutex_unlock(&tw_lock);
	return false;
}

void gs_graphtime_after_fork(void)
{
	/* The parent's graphs and events do not exist here (left, not freed). */
	pthread_mutex_init(&tw_lock, NULL);
	memset(twins, 0, sizeof(twins));
	graveyard = NULL;
	tw_count = 0;
	gt_twin_forget();
}
