// SPDX-License-Identifier: MIT
/*
 * What a timed launch costs the launching thread when launches are paced like a tiny-op
 * loop (issue 22: --gpu-time=10 cost the tiny op about 9 us a timed launch, every-kernel
 * timing about 5 us a launch). bench/timing_cost.cu launches back to back, where the GPU's
 * own time for the events can become the bound; here each iteration starts PACE ns after
 * the one before (spinning), so the stream is idle at every launch, and the host time of
 * each iteration's calls is measured alone: the launch of an empty kernel, and on the
 * iterations timed (every one, or every 10th) what the in-process plane adds:
 *   end          one event recorded after the launch
 *   gate_pair    a cuStreamWaitValue32 gate, events before and after, the gate opened
 *   gate_end     the gate and the end event
 * each optionally with a thread reading each finished pair every 1 ms (`_harvest`, as the
 * plane's harvester). Variants interleaved over REPS rounds; per variant the median over
 * rounds of the mean host ns of its timed iterations and of its untimed ones.
 *
 *   nvcc -O2 -arch=sm_90 timing_paced.cu -o timing_paced -lcuda
 *   ./timing_paced [N] [REPS] [PACE_NS]
 * Prints one JSON object.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
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

enum { PLAIN, END, GATE_PAIR, GATE_END };

static CUcontext ctx;
static CUevent *starts, *ends, ref;
static volatile long published, harvested;
static volatile int harvest_stop, harvest_pairs;
static long *timed_at; /* published index -> iteration */

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
			CUevent a = harvest_pairs ? starts[i] : ref;

			if (cuEventElapsedTime(&ms, a, ends[i]) == CUDA_ERROR_NOT_READY)
				break;
			if (harvest_pairs)
				cuEventElapsedTime(&ms, ref, starts[i]);
			harvested++;
		}
	}
	return NULL;
}

struct result {
	double timed, untimed;
};

static struct result run(int v, int every, bool harvest, long n, double pace, CUstream s,
			 CUdeviceptr gate_dev, volatile unsigned *gate)
{
	pthread_t th;
	unsigned seq = *gate;
	double sum_t = 0, sum_u = 0, next;
	long n_t = 0, n_u = 0;

	published = harvested = 0;
	harvest_stop = 0;
	harvest_pairs = v == GATE_PAIR;
	CK(cuEventRecord(ref, s));
	CK(cuStreamSynchronize(s));
	if (harvest)
		pthread_create(&th, NULL, harvester, NULL);
	next = now_ns();
	for (long i = 0; i < n; i++) {
		bool timed = v != PLAIN && i % every == 0;
		bool gated = timed && (v == GATE_PAIR || v == GATE_END);
		double t0, t1;

		while (now_ns() < next)
			;
		t0 = now_ns();
		next = t0 + pace;
		if (gated)
			CK(cuStreamWaitValue32(s, gate_dev, ++seq, CU_STREAM_WAIT_VALUE_GEQ));
		if (timed && v == GATE_PAIR)
			CK(cuEventRecord(starts[i], s));
		empty<<<1, 1, 0, s>>>();
		if (timed)
			CK(cuEventRecord(ends[i], s));
		if (gated)
			__atomic_store_n(gate, seq, __ATOMIC_RELEASE);
		if (timed) {
			timed_at[published] = i;
			published = published + 1;
		}
		t1 = now_ns();
		if (timed) {
			sum_t += t1 - t0;
			n_t++;
		} else {
			sum_u += t1 - t0;
			n_u++;
		}
	}
	harvest_stop = 1;
	if (harvest)
		pthread_join(th, NULL);
	CK(cuStreamSynchronize(s));
	return (struct result){ n_t ? sum_t / n_t : 0, n_u ? sum_u / n_u : 0 };
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
	double pace = argc > 3 ? atof(argv[3]) : 9000;
	CUstream s;
	CUdeviceptr gate_dev;
	unsigned *gate;
	struct {
		int v, every;
		bool harvest;
		const char *name;
	} variants[] = {
		{ PLAIN, 1, false, "plain" },
		{ END, 1, false, "end" },
		{ END, 10, false, "end_10" },
		{ GATE_PAIR, 1, false, "gate_pair" },
		{ GATE_PAIR, 10, false, "gate_pair_10" },
		{ GATE_END, 1, false, "gate_end" },
		{ GATE_END, 10, false, "gate_end_10" },
		{ GATE_PAIR, 1, true, "gate_pair_harvest" },
		{ GATE_PAIR, 10, true, "gate_pair_10_harvest" },
	};
	const int nv = sizeof(variants) / sizeof(variants[0]);
	std::vector<std::vector<double>> tt(nv), tu(nv);

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
	for (int i = 0; i < 2000; i++)
		empty<<<1, 1, 0, s>>>();
	CK(cuStreamSynchronize(s));
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < nv; k++) {
			int i = (k + r) % nv; /* (the order turned each round) */
			struct result x = run(variants[i].v, variants[i].every, variants[i].harvest,
					      n, pace, s, gate_dev, gate);

			tt[i].push_back(x.timed);
			tu[i].push_back(x.untimed);
		}
	printf("{\"n\": %ld, \"reps\": %d, \"pace_ns\": %.0f", n, reps, pace);
	for (int i = 0; i < nv; i++)
		printf(", \"%s\": {\"timed_ns\": %.0f, \"untimed_ns\": %.0f}", variants[i].name,
		       median(tt[i]), median(tu[i]));
	printf("}\n");
	return 0;
}
