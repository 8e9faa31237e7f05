// SPDX-License-Identifier: MIT
/*
 * What a graph launch costs its thread under each way --gpu-time=all could treat graphs
 * (issue 22): the default switches CUPTI's kernel kind off around each graph launch's call
 * (a graph's kernels' records cost the launch 1.3-1.9 us each) and times the launch with a
 * pair of events; CUPTI's graph-level kind (CUPTI_ACTIVITY_KIND_GRAPH_TRACE: one record a
 * graph launch, start and end) might do both at once, if it can be on beside the kernel
 * kind and keeps the graphs' kernels out of it. A graph of K empty kernels (stream
 * capture), launched and waited for N times an iteration's window, then one eager kernel
 * (which must keep its own record). Variants interleaved, the order turned each round:
 *   none      no CUPTI kind on
 *   kernels   the kernel kind on (every graph kernel recorded)
 *   pause     the kernel kind on, switched off around each graph launch's call
 *   gtrace    the kernel kind and the graph-level kind on
 *   gtrace_only  the graph-level kind alone
 * Printed (one JSON object): per variant, median (min, max) over rounds of host ns a graph
 * launch's call and an iteration; and the records CUPTI gave in its windows: kernels in
 * graphs, kernels outside them, graph-level records, and whether enabling failed.
 *
 *   nvcc -O2 -arch=sm_90 graph_trace.cu -o graph_trace -lcuda -lcupti
 *   ./graph_trace [K] [N] [ROUNDS]
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti_activity.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "bench.cuh" /* CK(), now_us() */

__global__ void empty() {}

enum { NONE, KERNELS, PAUSE, GTRACE, GTRACE_ONLY, NV };
static const char *const names[NV] = { "none", "kernels", "pause", "gtrace", "gtrace_only" };

static long in_graph[NV], eager[NV], graphs[NV], dropped;
static int cur; /* (the variant whose window records are counted in) */
static CUptiResult enable_err[NV];

static void CUPTIAPI buf_complete(CUcontext c, uint32_t stream, uint8_t *buf, size_t size,
				  size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t d = 0;

	(void)c;
	(void)stream;
	(void)size;
	while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
		if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
			if (((CUpti_ActivityKernel10 *)rec)->graphId)
				in_graph[cur]++;
			else
				eager[cur]++;
		} else if (rec->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) {
			graphs[cur]++;
		}
	}
	if (cuptiActivityGetNumDroppedRecords(NULL, 0, &d) == CUPTI_SUCCESS)
		dropped += (long)d;
	free(buf);
}

static void kinds(int v, bool on)
{
	CUptiResult (*f)(CUpti_ActivityKind) = on ? cuptiActivityEnable : cuptiActivityDisable;
	CUptiResult r = CUPTI_SUCCESS;

	if (v == KERNELS || v == PAUSE || v == GTRACE)
		r = f(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if ((v == GTRACE || v == GTRACE_ONLY) && r == CUPTI_SUCCESS)
		r = f(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
	if (on && r != CUPTI_SUCCESS)
		enable_err[v] = r;
	if (getenv("GT_VERBOSE"))
		fprintf(stderr, "%s %s: %d\n", on ? "enable" : "disable", names[v], (int)r);
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 19, n = argc > 2 ? atoi(argv[2]) : 500,
	    rounds = argc > 3 ? atoi(argv[3]) : 9;
	std::vector<double> call[NV], iter[NV];
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t ge;

	CK(cudaSetDevice(0));
	/* (GT_EARLY: CUPTI registered, and the graph-level kind on and off again, before the
	 * graph is made.) */
	if (getenv("GT_EARLY")) {
		if (cuptiActivityRegisterCallbacks(bench_cupti_request, buf_complete) != CUPTI_SUCCESS)
			return 1;
		kinds(GTRACE_ONLY, true);
		kinds(GTRACE_ONLY, false);
	}
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	for (int i = 0; i < k; i++)
		empty<<<1, 32, 0, s>>>();
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	if (!getenv("GT_EARLY") &&
	    cuptiActivityRegisterCallbacks(bench_cupti_request, buf_complete) != CUPTI_SUCCESS)
		return 1;
	for (int r = 0; r < rounds + 1; r++) {
		for (int j = 0; j < NV; j++) {
			int v = (getenv("GT_ORDER") ? NV - 1 - j + r : j + r) % NV;
			double c = 0, t0;

			cur = v;
			if (getenv("GT_VERBOSE"))
				fprintf(stderr, "round %d: %s\n", r, names[v]);
			kinds(v, true);
			t0 = now_us();
			for (int i = 0; i < n; i++) {
				double a;

				if (v == PAUSE)
					cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
				a = now_us();
				CK(cudaGraphLaunch(ge, s));
				c += now_us() - a;
				if (getenv("GT_VERBOSE") && !i)
					fprintf(stderr, "launched\n");
				if (v == PAUSE)
					cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
				empty<<<1, 32, 0, s>>>();
				CK(cudaStreamSynchronize(s));
			}
			if (r) { /* (round 0: warm-up) */
				iter[v].push_back((now_us() - t0) * 1000.0 / n);
				call[v].push_back(c * 1000.0 / n);
			}
			kinds(v, false);
			cuptiActivityFlushAll(1);
		}
	}
	printf("{\"k\": %d, \"n\": %d, \"rounds\": %d, \"dropped\": %ld, \"variants\": {", k, n,
	       rounds, dropped);
	for (int v = 0; v < NV; v++) {
		auto mm = std::minmax_element(iter[v].begin(), iter[v].end());

		printf("%s\"%s\": {\"launch_call_ns\": %.0f, \"iteration_ns\": %.0f, "
		       "\"iteration_min_max\": [%.0f, %.0f], \"enable_error\": %d, "
		       "\"records\": {\"kernels_in_graphs\": %ld, \"eager_kernels\": %ld, "
		       "\"graph_traces\": %ld}}",
		       v ? ", " : "", names[v], median(call[v]), median(iter[v]), *mm.first,
		       *mm.second, (int)enable_err[v], in_graph[v], eager[v], graphs[v]);
	}
	printf("}}\n");
	return 0;
}
