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
 *
 *   nvcc -O2 -arch=sm_90 timing_cost.cu -o timing_cost -lcuda && ./timing_cost [N] [REPS]
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

#define CK(x)                                                                              \
	do {                                                                               \
		CUresult r_ = (x);                                                         \
		if (r_) {                                                                  \
			fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, (int)r_); \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

__global__ void empty() {}

static double now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

enum { PLAIN, ASK, END, PAIR, GATE_PAIR, GATE_END };

static CUcontext ctx;
static CUevent *starts, *ends, ref;
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
			long i = harvested;
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

static double run(int v, bool harvest, long n, CUstream s, CUdeviceptr gate_dev,
		  volatile unsigned *gate)
{
	pthread_t th;
	double t0, t1;
	unsigned seq = *gate;

	published = harvested = 0;
	harvest_stop = 0;
	harvest_pairs = v == PAIR || v == GATE_PAIR;
	CK(cuEventRecord(ref, s));
	CK(cuStreamSynchronize(s));
	if (harvest)
		pthread_create(&th, NULL, harvester, NULL);
	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		bool gated = v == GATE_PAIR || v == GATE_END;
		if (gated)
			CK(cuStreamWaitValue32(s, gate_dev, ++seq, CU_STREAM_WAIT_VALUE_GEQ));
		if (v == PAIR || v == GATE_PAIR)
			CK(cuEventRecord(starts[i], s));
		if (v == ASK) {
			CUcontext c;
			CUstreamCaptureStatus st;

			CK(cuCtxGetCurrent(&c));
			CK(cuStreamIsCapturing(s, &st));
		}
		empty<<<1, 1, 0, s>>>();
		if (v != PLAIN && v != ASK)
			CK(cuEventRecord(ends[i], s));
		if (gated)
			__atomic_store_n(gate, seq, __ATOMIC_RELEASE);
		published = i + 1;
	}
	t1 = now_ns();
	harvest_stop = 1;
	if (harvest)
		pthread_join(th, NULL);
	CK(cuStreamSynchronize(s));
	return (t1 - t0) / n;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	int reps = argc > 2 ? atoi(argv[2]) : 7;
	CUstream s;
	CUdeviceptr gate_dev;
	unsigned *gate;
	struct {
		int v;
		bool harvest;
		const char *name;
	} variants[] = { { PLAIN, false, "plain" },
			 { ASK, false, "ask" },
			 { END, false, "end" },
			 { PAIR, false, "pair" },
			 { GATE_PAIR, false, "gate_pair" },
			 { GATE_END, false, "gate_end" },
			 { PAIR, true, "pair_harvest" },
			 { GATE_PAIR, true, "gate_pair_harvest" },
			 { END, true, "end_harvest" },
			 { GATE_END, true, "gate_end_harvest" } };
	const int nv = sizeof(variants) / sizeof(variants[0]);
	std::vector<std::vector<double>> t(nv);

	cudaFree(0);
	CK(cuCtxGetCurrent(&ctx));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuMemHostAlloc((void **)&gate, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
	CK(cuMemHostGetDevicePointer(&gate_dev, gate, 0));
	*gate = 0;
	starts = (CUevent *)calloc(n, sizeof(CUevent));
	ends = (CUevent *)calloc(n, sizeof(CUevent));
	for (long i = 0; i < n; i++) {
		CK(cuEventCreate(&starts[i], 0));
		CK(cuEventCreate(&ends[i], 0));
	}
	CK(cuEventCreate(&ref, 0));
	for (int i = 0; i < 2000; i++)
		empty<<<1, 1, 0, s>>>();
	CK(cuStreamSynchronize(s));
	/* Plain first in every round too: gates change what later calls cost (a measured
	 * effect on queries), so rounds run the variants in the same order and report it. */
	for (int r = 0; r < reps; r++)
		for (int i = 0; i < nv; i++)
			t[i].push_back(run(variants[i].v, variants[i].harvest, n, s, gate_dev, gate));
	printf("{\"n\": %ld, \"reps\": %d", n, reps);
	for (int i = 0; i < nv; i++) {
		std::vector<double> x = t[i];
		std::sort(x.begin(), x.end());
		printf(", \"%s_ns\": [%.0f, %.0f, %.0f]", variants[i].name, x[x.size() / 2], x[0],
		       x.back());
	}
	printf("}\n");
	return 0;
}
