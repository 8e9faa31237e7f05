// SPDX-License-Identifier: MIT
/*
 * What a twin's event nodes add to the times they read (gputime_twin.h), and a carrier's
 * (gputime_carry.c), measured once per context in graphs of ours, as the pairs'
 * calibration does for launches (gputime_ctx.c): GS_CAL_GRAPH and GS_CAL_GRAPH_EMPTY
 * records, GS_CAL_CARRIED and GS_CAL_CARRIED_EMPTY.
 */
#include <pthread.h>
#include <stdlib.h>

#include "inject/gputime_twin.h"

static struct gt_graph_fns C;

static void load_once(void)
{
	C.create = (g_create_fn)gs_real_by_name("cuGraphCreate");
	C.add_kernel = (g_add_kernel_fn)gs_real_by_name("cuGraphAddKernelNode_v2");
	C.add_record = (g_add_record_fn)gs_real_by_name("cuGraphAddEventRecordNode");
	C.instantiate = (g_inst_fn)gs_real_by_name("cuGraphInstantiateWithFlags");
	C.graph_destroy = (g_destroy_fn)gs_real_by_name("cuGraphDestroy");
	C.exec_destroy = (g_destroy_fn)gs_real_by_name("cuGraphExecDestroy");
	C.ev_destroy = (g_destroy_fn)gs_real_by_name("cuEventDestroy_v2");
	C.upload = (g_upload_fn)gs_real_by_name("cuGraphUpload");
	C.launch = (g_launch_fn)(void *)gs_real(GS_API_CU_GRAPH_LAUNCH);
	C.launch_ptsz = (g_launch_fn)(void *)gs_real(GS_API_CU_GRAPH_LAUNCH_PTSZ);
	if (!C.launch_ptsz)
		C.launch_ptsz = C.launch;
	C.set = (k_set_fn)(void *)gs_real(GS_API_CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS);
}

const struct gt_graph_fns *gt_graph_fns(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, load_once);
	return &C;
}

static void load(void)
{
	gt_graph_fns();
}

/*
 * One run of a calibration graph of ours on the slot's stream: (lead) the calibration
 * kernel, an event node, then (kernel) the calibration kernel again, an event node, each
 * after the one before, as a twin has them (a carrier: without the lead). The time between
 * the two events, less the second kernel's span as it read the timer; -1 if not had.
 */
static __s64 graph_run(struct ctx_slot *c, void *exec, void **ev, volatile __u64 *span, bool kernel)
{
	__u64 spins = 0;
	float ms;

	span[0] = span[1] = 0;
	if (!C.launch || C.launch(exec, c->stream))
		return -1;
	while (T.cu.ev_query(ev[1]) == NOT_READY && ++spins < 10000000)
		;
	if (T.cu.ev_elapsed(&ms, ev[0], ev[1]) || ms < 0)
		return -1;
	if (!kernel)
		return (__s64)((double)ms * 1e6);
	/* Nothing written (no real GPU ran it) or nonsense: none. */
	if (!span[0] || span[1] < span[0] || (double)(span[1] - span[0]) > (double)ms * 1e6)
		return -1;
	return (__s64)((double)ms * 1e6) - (__s64)(span[1] - span[0]);
}

/* The calibration graph, with the lead kernel (lead) or without, with the second kernel
 * (kernel) or without; NULL if not made. */
static void *calibration_graph(void **graph, const struct gs_cu_kernel_node *p, void **ev,
			       bool lead, bool kernel)
{
	void *k0, *s, *k1, *e, *exec = NULL;

	*graph = NULL;
	if (C.create(graph, 0) || (lead && C.add_kernel(&k0, *graph, NULL, 0, p)) ||
	    C.add_record(&s, *graph, lead ? &k0 : NULL, lead, ev[0]) ||
	    (kernel && C.add_kernel(&k1, *graph, &s, 1, p)) ||
	    C.add_record(&e, *graph, kernel ? &k1 : &s, 1, ev[1]) ||
	    C.instantiate(&exec, *graph, 0))
		return NULL;
	return exec;
}

/*
 * The gate page's words the calibration kernel writes its span to, one pair each for what
 * may run at once: the pairs' calibration (gputime_ctx.c, as a context is first set up, in
 * the program's thread) at bytes 64..95, twins' primes at 96..111 (gputime_graphbuild.c),
 * twins' calibration (before a context's first twin, in the program's thread) at
 * 112..127, carriers' (with a context's first carriers, by the harvester) at 128..143.
 */
#define SPAN_TWINS    14
#define SPAN_CARRIERS 16

/*
 * What event nodes add, measured with the calibration kernel of the pairs' calibration
 * in graphs of ours, c's context current: after a lead kernel (a twin's) or first in the
 * graph (a carrier's); records of what (around the kernel) and empty (nothing between);
 * the kernel's span written at word `at` of the gate's page.
 */
static void calibrate(struct ctx_slot *c, bool lead, __u64 what, __u64 empty, int at)
{
	volatile __u64 *span = c->gate.host + at;
	__u64 out = c->gate.dev + 8 * (__u64)at, ns = 2000;
	void *params[] = { &out, &ns };
	struct gs_cu_kernel_node p = { .func = (__u64)(unsigned long)c->cal,
				       .grid = { 1, 1, 1 },
				       .block = { 1, 1, 1 },
				       .params = (__u64)(unsigned long)params };
	void *ev[2] = { NULL, NULL }, *graph, *exec;
	int got = 0;

	load();
	if (!c->cal || !C.create || !C.add_record || !C.instantiate || !C.launch || !C.add_kernel ||
	    T.cu.ev_create(&ev[0], 0))
		return;
	if (T.cu.ev_create(&ev[1], 0)) {
		C.ev_destroy(ev[0]);
		return;
	}
	/* (The empty graph only where the kernel's did: a GPU that runs our kernel.) */
	for (int with = 1; with >= 0 && (with || got); with--) {
		exec = calibration_graph(&graph, &p, ev, lead, with);
		for (int i = 0; exec && i < 8; i++) {
			__s64 added = graph_run(c, exec, ev, span, with);

			if (added < 0)
				break;
			gt_emit_calibration(c, (__u64)added, with ? what : empty);
			got++;
		}
		if (exec)
			C.exec_destroy(exec);
		if (graph)
			C.graph_destroy(graph);
	}
	C.ev_destroy(ev[0]);
	C.ev_destroy(ev[1]);
}

/* Before a context's first twin is built. */
void gt_graph_calibrate(struct ctx_slot *c)
{
	c->graph_cal = true;
	calibrate(c, true, GS_CAL_GRAPH, GS_CAL_GRAPH_EMPTY, SPAN_TWINS);
}

/*
 * With its first carrier k (gputime_carry.c), before it is used: k's node set to the
 * calibration kernel before each run, as a launch sets it (its spin 2,000 and 2,001 ns in
 * turn: a set that changes something), then the same in a graph of ours never set, and an
 * empty one.
 */
void gt_carry_calibrate(struct ctx_slot *c, struct carrier *k)
{
	volatile __u64 *span = c->gate.host + SPAN_CARRIERS;
	__u64 out = c->gate.dev + 8 * SPAN_CARRIERS, ns[2] = { 2000, 2001 };

	load();
	for (int i = 0; c->cal && C.set && C.launch && i < 8; i++) {
		void *params[] = { &out, &ns[i & 1] };
		struct gs_cu_kernel_node p = { .func = (__u64)(unsigned long)c->cal,
					       .grid = { 1, 1, 1 },
					       .block = { 1, 1, 1 },
					       .params = (__u64)(unsigned long)params };
		__s64 added;

		if (C.set(k->exec, k->node, &p))
			break;
		added = graph_run(c, k->exec, k->ev, span, true);
		if (added < 0)
			break;
		gt_emit_calibration(c, (__u64)added, GS_CAL_CARRIED);
	}
	calibrate(c, false, GS_CAL_CARRIED_STILL, GS_CAL_CARRIED_EMPTY, SPAN_CARRIERS);
}
