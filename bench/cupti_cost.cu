// SPDX-License-Identifier: MIT
/*
 * What every-kernel timing costs the launching thread when the driver writes the kernel's
 * timestamps itself (CUPTI's kernel activity, as the PyTorch profiler's CUDA records),
 * against the plane's gated pair of events (issue 22: every kernel timed 1.5-1.6x on the
 * tiny op, target 1.25x). An empty kernel launched N times, each iteration started PACE_NS
 * after the one before so the stream is idle at every launch (as in the tiny-op loop), each
 * iteration's calls timed alone. Variants interleaved, the order turned each round:
 *   plain       the launch
 *   gate_pair   + a cuStreamWaitValue32 gate, events before and after, the gate opened
 *               (the plane's every-kernel timing today)
 *   cupti       the launch with CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL enabled
 *   cupti_ext   that, and the launch inside an external correlation id pushed and popped
 *               (CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION enabled): how a launch would be
 *               tied to its record
 * Phase 1 runs plain and gate_pair before CUPTI is loaded; phase 2 all four, CUPTI
 * enabled only in its windows. Printed: median (min, max) over rounds of host ns an
 * iteration; the records CUPTI gave (kernels, external ids, launches matched to their
 * record by id, dropped) and the empty kernel's duration by CUPTI (median) and between
 * the gated pair's events.
 *
 *   nvcc -O2 -arch=sm_90 cupti_cost.cu -o cupti_cost -lcuda -lcupti
 *   ./cupti_cost [N] [REPS] [PACE_NS]
 * Prints one JSON object.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti_activity.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "bench.cuh" /* CK(), now_us() */

__global__ void empty() {}

enum { PLAIN, GATE_PAIR, CUPTI, CUPTI_EXT, NV };
static const char *const names[NV] = { "plain", "gate_pair", "cupti", "cupti_ext" };

/* What CUPTI's worker thread found in its buffers. */
static long kernels, externals, matched, dropped;
static std::vector<double> cupti_ns;
static std::unordered_map<uint32_t, uint64_t> ext_of; /* correlation id -> external id */

static void CUPTIAPI buf_complete(CUcontext c, uint32_t stream, uint8_t *buf, size_t size,
				  size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t d = 0;

	(void)size;
	while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
		if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
			CUpti_ActivityExternalCorrelation *e = (CUpti_ActivityExternalCorrelation *)rec;

			externals++;
			ext_of[e->correlationId] = e->externalId;
		} else if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
			CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)rec;
			auto it = ext_of.find(k->correlationId);

			kernels++;
			cupti_ns.push_back((double)(k->end - k->start));
			if (it != ext_of.end()) {
				matched++;
				ext_of.erase(it);
			}
		}
	}
	if (cuptiActivityGetNumDroppedRecords(c, stream, &d) == CUPTI_SUCCESS)
		dropped += (long)d;
	free(buf);
}

static double median(std::vector<double> x)
{
	std::sort(x.begin(), x.end());
	return x.empty() ? 0 : x[x.size() / 2];
}

/* Mean host ns an iteration of variant v over n paced iterations. */
static double run(int v, long n, double pace, CUstream s, CUevent *ev, CUdeviceptr gate_dev,
		  volatile unsigned *gate, unsigned *seq)
{
	double next = now_us() * 1e3, sum = 0;

	if (v == CUPTI || v == CUPTI_EXT)
		CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	if (v == CUPTI_EXT)
		CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
	for (long i = 0; i < n; i++) {
		double it0;

		while (now_us() * 1e3 < next)
			;
		it0 = now_us() * 1e3;
		next = it0 + pace;
		if (v == GATE_PAIR) {
			CK(cuStreamWaitValue32(s, gate_dev, ++*seq, CU_STREAM_WAIT_VALUE_GEQ));
			CK(cuEventRecord(ev[2 * (i % 1000)], s));
		}
		if (v == CUPTI_EXT)
			CK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2,
								  (uint64_t)i + 1));
		empty<<<1, 1, 0, s>>>();
		if (v == CUPTI_EXT)
			CK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2,
								 NULL));
		if (v == GATE_PAIR) {
			CK(cuEventRecord(ev[2 * (i % 1000) + 1], s));
			__atomic_store_n(gate, *seq, __ATOMIC_RELEASE);
		}
		sum += now_us() * 1e3 - it0;
		if (v == GATE_PAIR && i % 1000 == 999)
			CK(cuStreamSynchronize(s)); /* (the events reused) */
	}
	CK(cuStreamSynchronize(s));
	if (v == CUPTI || v == CUPTI_EXT) {
		CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
		if (v == CUPTI_EXT)
			CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
		CK(cuptiActivityFlushAll(1));
	}
	return sum / n;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	int reps = argc > 2 ? atoi(argv[2]) : 7;
	double pace = argc > 3 ? atof(argv[3]) : 9000;
	std::vector<double> t[2][NV];
	std::vector<double> pair_ns;
	CUevent ev[2000];
	CUstream s;
	CUdeviceptr gate_dev;
	unsigned *gate, seq = 0;

	cudaFree(0);
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuMemHostAlloc((void **)&gate, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
	CK(cuMemHostGetDevicePointer(&gate_dev, gate, 0));
	*gate = 0;
	for (int i = 0; i < 2000; i++)
		CK(cuEventCreate(&ev[i], 0));
	for (int i = 0; i < 2000; i++)
		empty<<<1, 1, 0, s>>>();
	CK(cuStreamSynchronize(s));
	for (int phase = 0; phase < 2; phase++) {
		int nv = phase ? NV : 2;

		if (phase)
			CK(cuptiActivityRegisterCallbacks(bench_cupti_request, buf_complete));
		for (int r = 0; r < reps; r++)
			for (int k = 0; k < nv; k++) {
				int v = (k + r) % nv;

				t[phase][v].push_back(run(v, n, pace, s, ev, gate_dev, gate, &seq));
			}
	}
	for (int i = 0; i < 1000; i++) {
		float ms;

		if (cuEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) == CUDA_SUCCESS)
			pair_ns.push_back(ms * 1e6);
	}
	printf("{\"n\": %ld, \"reps\": %d, \"pace_ns\": %.0f, \"kernels\": %ld, \"externals\": %ld, "
	       "\"matched\": %ld, \"dropped\": %ld, \"cupti_kernel_ns\": %.0f, "
	       "\"pair_elapsed_ns\": %.0f",
	       n, reps, pace, kernels, externals, matched, dropped, median(cupti_ns),
	       median(pair_ns));
	for (int phase = 0; phase < 2; phase++)
		for (int v = 0; v < (phase ? NV : 2); v++) {
			std::vector<double> x = t[phase][v];

			std::sort(x.begin(), x.end());
			printf(", \"%s%s_ns\": [%.0f, %.0f, %.0f]", phase ? "" : "before_", names[v],
			       x[x.size() / 2], x[0], x.back());
		}
	printf("}\n");
	return 0;
}
