// SPDX-License-Identifier: MIT
/*
 * What each part of per-launch GPU timing costs the launching thread, on the real driver:
 * an empty kernel launched N times on an idle stream (launch-bound, as the tiny-op loop),
 * alone and with the parts of the in-process plane's timing, each variant its own loop,
 * variants interleaved over REPS rounds (median ns per launch):
 *   plain          the launch
 *   ask            + what the plane asks the driver before a launch it times (the current
 *                  context, whether the stream is being captured)
 *   end            + one event recorded after it (an end marker only)
 *   pair           + events before and after
 *   gate_pair      + a cuStreamWaitValue32 gate before the start event, opened by the host
 *                  after the end event (the plane's gated launch)
 *   gate_end       the gate, the launch, one end event
 *   pair_harvest   pair, and a thread reading each pair every 1 ms (elapsed start-end and
 *                  reference-start: the plane's harvester)
 *   gate_pair_harvest   gate_pair and that thread (the plane's every-kernel timing)
 *   end_harvest    end, and a thread reading one elapsed (reference-end) a launch
 *   gate_end_harvest    gate_end and that thread
 *   graph          instead of the launch, a graph of an event record node, the kernel and
 *                  another event record node (a pool of GRAPHS instantiated ahead, each
 *                  with its own events), its kernel node's parameters set at the exec and
 *                  launched: two driver calls where a gated pair makes four, the two
 *                  events back to back with the kernel on the GPU without a gate
 *   graph_launch   the same without setting the parameters (what the graph's launch
 *                  costs alone)
 *   graph_switch   graph, its kernel node set to another function every other launch
 *   graph_kern     graph, the node set by the kernel's CUkernel handle (as CUDA 13's
 *                  runtime stubs launch) rather than a CUfunction
 * (the first error a graph variant met, if any: "graph_errors")
 * and what the empty kernel reads between its events ("elapsed_ns"), median over 1,000
 * paced launches with a gated pair each, and over the pool's graphs after as many paced
 * launches of them.
 *
 * With PACE_NS, launches paced like a tiny-op loop instead (issue 22: --gpu-time=10 cost
 * the tiny op about 9 us a timed launch, every-kernel timing about 5 us a launch): back to
 * back, the GPU's own time for the events can become the bound; here each iteration starts
 * PACE_NS after the one before (spinning), so the stream is idle at every launch, and each
 * iteration's calls are timed alone. Variants: plain; end, gate_pair and gate_end on every
 * iteration or on every 10th (`_10`); gate_pair with the harvesting thread. Per variant,
 * the median over rounds of the mean host ns of its timed iterations and of its untimed
 * ones.
 *
 *   nvcc -O2 -arch=sm_90 timing_cost.cu -o timing_cost -lcuda
 *   ./timing_cost [N] [REPS] [PACE_NS]
 * Prints one JSON object.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <vector>

#include "bench.cuh" /* CK() */

__global__ void empty() {}
__global__ void empty2() {}

static double now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

enum { PLAIN, ASK, END, PAIR, GATE_PAIR, GATE_END, GRAPH, GRAPH_LAUNCH, GRAPH_SWITCH, GRAPH_KERN };

#define GRAPHS 64
static CUgraphExec graph_exec[GRAPHS];
static CUgraphNode graph_kernel[GRAPHS];
static CUevent graph_ev[GRAPHS][2];
static CUDA_KERNEL_NODE_PARAMS graph_params, graph_params2, graph_params_kern;
static int graph_error[GRAPH_KERN + 1];

/* The pool of graphs [start event, the empty kernel, end event]. */
static void graphs_make(void)
{
	cudaFunction_t f;

	if (cudaGetFuncBySymbol(&f, (const void *)empty) != cudaSuccess)
		exit(1);
	graph_params = (CUDA_KERNEL_NODE_PARAMS){ .func = (CUfunction)f,
						  .gridDimX = 1,
						  .gridDimY = 1,
						  .gridDimZ = 1,
						  .blockDimX = 1,
						  .blockDimY = 1,
						  .blockDimZ = 1 };
	graph_params2 = graph_params;
	if (cudaGetFuncBySymbol(&f, (const void *)empty2) != cudaSuccess)
		exit(1);
	graph_params2.func = (CUfunction)f;
	graph_params_kern = graph_params;
	graph_params_kern.func = NULL;
	{
		cudaKernel_t k;

		if (cudaGetKernel(&k, (const void *)empty) != cudaSuccess)
			exit(1);
		graph_params_kern.kern = (CUkernel)k;
		CK(cuCtxGetCurrent(&graph_params_kern.ctx));
	}
	for (int k = 0; k < GRAPHS; k++) {
		CUgraph g;
		CUgraphNode a, b;

		CK(cuEventCreate(&graph_ev[k][0], 0));
		CK(cuEventCreate(&graph_ev[k][1], 0));
		CK(cuGraphCreate(&g, 0));
		CK(cuGraphAddEventRecordNode(&a, g, NULL, 0, graph_ev[k][0]));
		CK(cuGraphAddKernelNode(&graph_kernel[k], g, &a, 1, &graph_params));
		CK(cuGraphAddEventRecordNode(&b, g, &graph_kernel[k], 1, graph_ev[k][1]));
		CK(cuGraphInstantiate(&graph_exec[k], g, 0));
	}
}

static CUcontext ctx;
static CUevent *starts, *ends, ref;
static long *timed_at; /* what was published, in order: the iterations timed */
static volatile long published, harvested;
static volatile int harvest_stop, harvest_pairs;

/* Reads what was published, every 1 ms, as the plane's harvester does. */
static void *harvester(void *arg)
{
	(void)arg;
	cuCtxSetCurrent(ctx);
	while (!harvest_stop || harvested < published) {
		struct timespec nap = { 0, 1000000 };
		long upto = published;
		float ms;

		nanosleep(&nap, NULL);
		while (harvested < upto) {
			long i = timed_at[harvested];

			if (harvest_pairs) {
				if (cuEventElapsedTime(&ms, starts[i], ends[i]) == CUDA_ERROR_NOT_READY)
					break;
				cuEventElapsedTime(&ms, ref, starts[i]);
			} else if (cuEventElapsedTime(&ms, ref, ends[i]) == CUDA_ERROR_NOT_READY) {
				break;
			}
			harvested++;
		}
	}
	return NULL;
}

struct variant {
	int v, every;
	bool harvest;
	const char *name;
};

/* Host ns a launch: all (the loop's), and with a pace, timed and untimed iterations'. */
struct result {
	double all, timed, untimed;
};

static struct result run(const struct variant *var, long n, double pace, CUstream s,
			 CUdeviceptr gate_dev, volatile unsigned *gate)
{
	pthread_t th;
	double t0, next, sum[2] = { 0, 0 };
	long count[2] = { 0, 0 };
	unsigned seq = *gate;
	int v = var->v;

	published = harvested = 0;
	harvest_stop = 0;
	harvest_pairs = v == PAIR || v == GATE_PAIR;
	CK(cuEventRecord(ref, s));
	CK(cuStreamSynchronize(s));
	if (var->harvest)
		pthread_create(&th, NULL, harvester, NULL);
	t0 = next = now_ns();
	for (long i = 0; i < n; i++) {
		bool timed = v != PLAIN && i % var->every == 0;
		bool gated = timed && (v == GATE_PAIR || v == GATE_END);
		double it0 = 0;

		if (pace) {
			while (now_ns() < next)
				;
			it0 = now_ns();
			next = it0 + pace;
		}
		if (gated)
			CK(cuStreamWaitValue32(s, gate_dev, ++seq, CU_STREAM_WAIT_VALUE_GEQ));
		if (timed && (v == PAIR || v == GATE_PAIR))
			CK(cuEventRecord(starts[i], s));
		if (timed && v == ASK) {
			CUcontext c;
			CUstreamCaptureStatus st;

			CK(cuCtxGetCurrent(&c));
			CK(cuStreamIsCapturing(s, &st));
		}
		if (timed && v >= GRAPH) {
			const CUDA_KERNEL_NODE_PARAMS *p = v == GRAPH_KERN		 ? &graph_params_kern
							   : v == GRAPH_SWITCH && i % 2 ? &graph_params2
											: &graph_params;
			CUresult r = v == GRAPH_LAUNCH
					     ? CUDA_SUCCESS
					     : cuGraphExecKernelNodeSetParams(graph_exec[i % GRAPHS],
									      graph_kernel[i % GRAPHS], p);

			if (!r)
				r = cuGraphLaunch(graph_exec[i % GRAPHS], s);
			if (r && !graph_error[v])
				graph_error[v] = (int)r;
		} else {
			empty<<<1, 1, 0, s>>>();
		}
		if (timed && v != ASK && v < GRAPH)
			CK(cuEventRecord(ends[i], s));
		if (gated)
			__atomic_store_n(gate, seq, __ATOMIC_RELEASE);
		if (timed && v != ASK && v < GRAPH) {
			timed_at[published] = i;
			published = published + 1;
		}
		if (pace) {
			sum[timed] += now_ns() - it0;
			count[timed]++;
		}
	}
	struct result r = { (now_ns() - t0) / n, count[1] ? sum[1] / count[1] : 0,
			    count[0] ? sum[0] / count[0] : 0 };
	harvest_stop = 1;
	if (var->harvest)
		pthread_join(th, NULL);
	CK(cuStreamSynchronize(s));
	return r;
}

static double median(std::vector<double> x)
{
	std::sort(x.begin(), x.end());
	return x.empty() ? 0 : x[x.size() / 2];
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	int reps = argc > 2 ? atoi(argv[2]) : 7;
	double pace = argc > 3 ? atof(argv[3]) : 0;
	CUstream s;
	CUdeviceptr gate_dev;
	unsigned *gate;
	static const struct variant back_to_back[] = {
		{ PLAIN, 1, false, "plain" },
		{ ASK, 1, false, "ask" },
		{ END, 1, false, "end" },
		{ PAIR, 1, false, "pair" },
		{ GATE_PAIR, 1, false, "gate_pair" },
		{ GATE_END, 1, false, "gate_end" },
		{ PAIR, 1, true, "pair_harvest" },
		{ GATE_PAIR, 1, true, "gate_pair_harvest" },
		{ END, 1, true, "end_harvest" },
		{ GATE_END, 1, true, "gate_end_harvest" },
		{ GRAPH, 1, false, "graph" },
		{ GRAPH_LAUNCH, 1, false, "graph_launch" },
		{ GRAPH_SWITCH, 1, false, "graph_switch" },
		{ GRAPH_KERN, 1, false, "graph_kern" },
	};
	static const struct variant paced[] = {
		{ PLAIN, 1, false, "plain" },
		{ END, 1, false, "end" },
		{ END, 10, false, "end_10" },
		{ GATE_PAIR, 1, false, "gate_pair" },
		{ GATE_PAIR, 10, false, "gate_pair_10" },
		{ GATE_END, 1, false, "gate_end" },
		{ GATE_END, 10, false, "gate_end_10" },
		{ GRAPH, 1, false, "graph" },
		{ GRAPH, 10, false, "graph_10" },
		{ GRAPH_LAUNCH, 1, false, "graph_launch" },
		{ GRAPH_SWITCH, 1, false, "graph_switch" },
		{ GRAPH_KERN, 1, false, "graph_kern" },
		{ GATE_PAIR, 1, true, "gate_pair_harvest" },
		{ GATE_PAIR, 10, true, "gate_pair_10_harvest" },
	};
	const struct variant *vars = pace ? paced : back_to_back;
	const int nv = pace ? sizeof(paced) / sizeof(paced[0])
			    : sizeof(back_to_back) / sizeof(back_to_back[0]);
	std::vector<std::vector<double>> t(nv), tt(nv), tu(nv);

	cudaFree(0);
	CK(cuCtxGetCurrent(&ctx));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuMemHostAlloc((void **)&gate, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
	CK(cuMemHostGetDevicePointer(&gate_dev, gate, 0));
	*gate = 0;
	starts = (CUevent *)calloc(n, sizeof(CUevent));
	ends = (CUevent *)calloc(n, sizeof(CUevent));
	timed_at = (long *)calloc(n, sizeof(long));
	for (long i = 0; i < n; i++) {
		CK(cuEventCreate(&starts[i], 0));
		CK(cuEventCreate(&ends[i], 0));
	}
	CK(cuEventCreate(&ref, 0));
	graphs_make();
	for (int k = 0; k < GRAPHS; k++)
		CK(cuGraphLaunch(graph_exec[k], s)); /* (uploaded) */
	for (int i = 0; i < 2000; i++)
		empty<<<1, 1, 0, s>>>();
	CK(cuStreamSynchronize(s));
	/* Back to back, plain first in every round: gates change what later calls cost (a
	 * measured effect on queries), so rounds run the variants in the same order. Paced,
	 * the order is turned each round. */
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < nv; k++) {
			int i = pace ? (k + r) % nv : k;
			struct result x = run(&vars[i], n, pace, s, gate_dev, gate);

			t[i].push_back(x.all);
			tt[i].push_back(x.timed);
			tu[i].push_back(x.untimed);
		}
	std::vector<double> el_pair, el_graph;
	static const struct variant pairs = { GATE_PAIR, 1, false, "" };
	static const struct variant graph = { GRAPH, 1, false, "" };
	long m = n < 1000 ? n : 1000;

	run(&pairs, m, 15000, s, gate_dev, gate);
	for (long i = 0; i < m; i++) {
		float ms;

		if (cuEventElapsedTime(&ms, starts[i], ends[i]) == CUDA_SUCCESS)
			el_pair.push_back(ms * 1e6);
	}
	run(&graph, m, 15000, s, gate_dev, gate);
	for (int k = 0; k < GRAPHS; k++) {
		float ms;

		if (cuEventElapsedTime(&ms, graph_ev[k][0], graph_ev[k][1]) == CUDA_SUCCESS)
			el_graph.push_back(ms * 1e6);
	}
	printf("{\"n\": %ld, \"reps\": %d, \"elapsed_ns\": {\"gate_pair\": %.0f, "
	       "\"graph\": %.0f}, \"graph_errors\": [%d, %d, %d, %d]",
	       n, reps, median(el_pair), median(el_graph), graph_error[GRAPH],
	       graph_error[GRAPH_LAUNCH], graph_error[GRAPH_SWITCH], graph_error[GRAPH_KERN]);
	if (pace)
		printf(", \"pace_ns\": %.0f", pace);
	for (int i = 0; i < nv; i++) {
		std::vector<double> x = t[i];

		std::sort(x.begin(), x.end());
		if (pace)
			printf(", \"%s\": {\"timed_ns\": %.0f, \"untimed_ns\": %.0f}", vars[i].name,
			       median(tt[i]), median(tu[i]));
		else
			printf(", \"%s_ns\": [%.0f, %.0f, %.0f]", vars[i].name, x[x.size() / 2],
			       x[0], x.back());
	}
	printf("}\n");
	return 0;
}
