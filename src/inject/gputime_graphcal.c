// SPDX-License-Identifier: MIT
/*
 * What a twin's event nodes add to the times they read (gputime_twin.h), measured once
 * per context in graphs of ours, as the pairs' calibration does for launches
 * (gputime_ctx.c): GS_CAL_GRAPH and GS_CAL_GRAPH_EMPTY records.
 */
#include <stdlib.h>

#include "inject/gputime_twin.h"

typedef int (*g_create_fn)(void **, unsigned int);
typedef int (*g_add_kernel_fn)(void **, void *, void **, size_t, const struct gs_cu_kernel_node *);
typedef int (*g_add_record_fn)(void **, void *, void **, size_t, void *);
typedef int (*g_inst_fn)(void **, void *, unsigned long long);
typedef int (*g_destroy_fn)(void *);
typedef int (*g_launch_fn)(void *, __u64);

static struct {
	g_create_fn create;
	g_add_kernel_fn add_kernel;
	g_add_record_fn add_record;
	g_inst_fn instantiate;
	g_destroy_fn graph_destroy, exec_destroy, ev_destroy;
	g_launch_fn launch;
} C;

static void load(void)
{
	C.create = (g_create_fn)gs_real_by_name("cuGraphCreate");
	C.add_kernel = (g_add_kernel_fn)gs_real_by_name("cuGraphAddKernelNode_v2");
	C.add_record = (g_add_record_fn)gs_real_by_name("cuGraphAddEventRecordNode");
	C.instantiate = (g_inst_fn)gs_real_by_name("cuGraphInstantiateWithFlags");
	C.graph_destroy = (g_destroy_fn)gs_real_by_name("cuGraphDestroy");
	C.exec_destroy = (g_destroy_fn)gs_real_by_name("cuGraphExecDestroy");
	C.ev_destroy = (g_destroy_fn)gs_real_by_name("cuEventDestroy_v2");
	C.launch = (g_launch_fn)(void *)gs_real(GS_API_CU_GRAPH_LAUNCH);
}

/*
 * One run of a calibration graph of ours on the slot's stream: the calibration kernel,
 * an event node, then (kernel) the calibration kernel again, an event node, each after the
 * one before, as a twin has them. The time between the two events, less the second
 * kernel's span as it read the timer; -1 if not had.
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

/* The calibration graph, with the second kernel (kernel) or without; NULL if not made. */
static void *calibration_graph(void **graph, const struct gs_cu_kernel_node *p, void **ev,
			       bool kernel)
{
	void *k0, *s, *k1, *e, *exec = NULL;

	*graph = NULL;
	if (C.create(graph, 0) || C.add_kernel(&k0, *graph, NULL, 0, p) ||
	    C.add_record(&s, *graph, &k0, 1, ev[0]) ||
	    (kernel && C.add_kernel(&k1, *graph, &s, 1, p)) ||
	    C.add_record(&e, *graph, kernel ? &k1 : &s, 1, ev[1]) ||
	    C.instantiate(&exec, *graph, 0))
		return NULL;
	return exec;
}

/*
 * What a twin's event nodes add, measured once per context before its first twin is built
 * (its context current), with the calibration kernel of the pairs' calibration
 * (gputime_ctx.c: it writes its span at bytes 64..79 of the gate's page) in graphs of ours:
 * GS_CAL_GRAPH and GS_CAL_GRAPH_EMPTY records.
 */
void gt_graph_calibrate(struct ctx_slot *c)
{
	volatile __u64 *span = c->gate.host + 8;
	__u64 out = c->gate.dev + 64, ns = 2000;
	void *params[] = { &out, &ns };
	struct gs_cu_kernel_node p = { .func = (__u64)(unsigned long)c->cal,
				       .grid = { 1, 1, 1 },
				       .block = { 1, 1, 1 },
				       .params = (__u64)(unsigned long)params };
	void *ev[2] = { NULL, NULL }, *graph, *exec;
	int got = 0;

	c->graph_cal = true;
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
		exec = calibration_graph(&graph, &p, ev, with);
		for (int i = 0; exec && i < 8; i++) {
			__s64 added = graph_run(c, exec, ev, span, with);

			if (added < 0)
				break;
			gt_emit_calibration(c, (__u64)added,
					    with ? GS_CAL_GRAPH : GS_CAL_GRAPH_EMPTY);
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
