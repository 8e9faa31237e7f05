// SPDX-License-Identifier: MIT
/*
 * What GPU timing costs and how exact it is, on the real driver: host cost per call of the
 * driver functions the in-process plane uses, and kernel durations measured three ways in
 * a launch-bound loop (an idle stream) and a GPU-bound one (a busy stream):
 *   truth  the kernel reads %globaltimer at its start and end;
 *   plain  events recorded before and after the launch;
 *   gated  the same, behind a cuStreamWaitValue32 gate on host memory, released by the
 *          host after the end event is recorded (start event, kernel and end event are
 *          all queued before the GPU reaches them).
 *
 *   nvcc -O2 -arch=sm_90 primitives.cu -o primitives -lcuda && ./primitives
 * Prints one JSON object.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>
#include <algorithm>

#define CK(x)                                                                      \
	do {                                                                       \
		CUresult r_ = (x);                                                 \
		if (r_) {                                                          \
			fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, r_); \
			exit(1);                                                   \
		}                                                                  \
	} while (0)

__device__ unsigned long long gtimer()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* Spins for ns nanoseconds; thread 0 of block 0 writes its start and end times. */
__global__ void spin(unsigned long long ns, unsigned long long *out)
{
	unsigned long long t0 = gtimer();
	while (gtimer() - t0 < ns)
		;
	if (threadIdx.x == 0 && blockIdx.x == 0) {
		out[0] = t0;
		out[1] = gtimer();
	}
}

static double now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

int main()
{
	CUstream s;
	CUevent a, b;
	CUcontext ctx;
	unsigned long long *dev_out, host_out[2];
	unsigned int *gate;
	CUdeviceptr gate_dev;
	const int N = 2000;
	int capturing;

	cudaFree(0);
	CK(cuCtxGetCurrent(&ctx));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuEventCreate(&a, 0));
	CK(cuEventCreate(&b, 0));
	cudaMalloc(&dev_out, 16);
	CK(cuMemHostAlloc((void **)&gate, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
	CK(cuMemHostGetDevicePointer(&gate_dev, gate, 0));
	*gate = 0;
	for (int i = 0; i < 100; i++)
		spin<<<1, 32, 0, s>>>(1000, dev_out);
	cuStreamSynchronize(s);

	printf("{\n");
	/* ---- host cost per call (idle stream) ---- */
	struct {
		const char *name;
		int kind;
	} prims[] = { { "launch", 0 },	     { "event_record", 1 }, { "stream_query", 2 },
		      { "event_query", 3 }, { "is_capturing", 4 }, { "ctx_get_current", 5 },
		      { "wait_value32", 6 }, { "clock_gettime", 7 } };
	for (auto &p : prims) {
		double t0, t1;
		unsigned int seq = *gate;
		cuStreamSynchronize(s);
		t0 = now_ns();
		for (int i = 0; i < N; i++) {
			switch (p.kind) {
			case 0:
				spin<<<1, 32, 0, s>>>(0, dev_out);
				break;
			case 1:
				cuEventRecord(a, s);
				break;
			case 2:
				cuStreamQuery(s);
				break;
			case 3:
				cuEventQuery(a);
				break;
			case 4:
				cuStreamIsCapturing(s, (CUstreamCaptureStatus *)&capturing);
				break;
			case 5:
				cuCtxGetCurrent(&ctx);
				break;
			case 6:
				cuStreamWaitValue32(s, gate_dev, ++seq, CU_STREAM_WAIT_VALUE_GEQ);
				__atomic_store_n(gate, seq, __ATOMIC_RELEASE);
				break;
			case 7:
				now_ns();
				break;
			}
		}
		t1 = now_ns();
		cuStreamSynchronize(s);
		printf("  \"%s_ns\": %.1f,\n", p.name, (t1 - t0) / N);
	}

	/* ---- accuracy: per launch, truth vs plain vs gated, idle and busy stream ---- */
	const unsigned long long durs[] = { 2000, 10000 };
	for (int busy = 0; busy < 2; busy++)
		for (unsigned long long d : durs)
			for (int gated = 0; gated < 2; gated++) {
				std::vector<double> err, truth;
				for (int i = 0; i < 200; i++) {
					unsigned int seq = *gate + 1;
					float ms;
					if (busy) /* something long ahead of it on the stream */
						spin<<<1, 32, 0, s>>>(50000, dev_out + 0);
					if (gated)
						CK(cuStreamWaitValue32(s, gate_dev, seq,
								       CU_STREAM_WAIT_VALUE_GEQ));
					CK(cuEventRecord(a, s));
					spin<<<1, 32, 0, s>>>(d, dev_out);
					CK(cuEventRecord(b, s));
					if (gated)
						__atomic_store_n(gate, seq, __ATOMIC_RELEASE);
					CK(cuStreamSynchronize(s));
					CK(cuEventElapsedTime(&ms, a, b));
					cudaMemcpy(host_out, dev_out, 16, cudaMemcpyDeviceToHost);
					double t = (double)(host_out[1] - host_out[0]);
					truth.push_back(t);
					err.push_back(ms * 1e6 - t);
				}
				printf("  \"%s_%llu_%s\": {\"truth_med_ns\": %.0f, "
				       "\"err_med_ns\": %.0f, \"err_max_ns\": %.0f},\n",
				       busy ? "busy" : "idle", d, gated ? "gated" : "plain",
				       median(truth), median(err),
				       *std::max_element(err.begin(), err.end()));
			}
	printf("  \"done\": 1\n}\n");
	return 0;
}
