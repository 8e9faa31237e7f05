// SPDX-License-Identifier: MIT
/*
 * Which launches block inside the call while their stream is held by a gate (a
 * cuStreamWaitValue32 on host memory)? A launch that waits for the GPU inside the call
 * cannot return before the gate opens, so an in-process timer that gates such a launch
 * stalls the program until its watchdog opens it.
 *
 * Each case: close a gate on the stream, launch, time the call; a helper thread opens the
 * gate after HOLD_US. A call that takes about HOLD_US blocked behind the gate.
 *
 *   nvcc -O2 -o gate_probe bench/gate_probe.cu -lcuda
 *   ./gate_probe            (lazy loading, the default)
 *   CUDA_MODULE_LOADING=EAGER ./gate_probe
 * Prints one JSON object.
 *
 * Also: what an event record, and a gate already open, cost on the GPU between kernels.
 * 1000 tiny kernels are queued behind a 20 ms kernel with 0, 1 or 2 events (or one open
 * gate) after each, and their drain is timed with events at its ends.
 *
 * And: does the GPU do work of the driver's between a gated start event and the kernel
 * after a new allocation (a mapping change)? Event-timed tiny kernel, gated, with and
 * without a cudaMalloc just before.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.cuh"

#define HOLD_US 3000

#define K(n)                                                                              \
	__global__ void k##n(float *p)                                                    \
	{                                                                                 \
		p[threadIdx.x] += n;                                                      \
	}
K(0) K(1) K(2) K(3) K(4) K(5) K(6) K(7) K(8) K(9) K(10) K(11)

__global__ void big_stack(float *p, int i)
{
	volatile float a[16384]; /* 64 KiB of local memory per thread */

	a[i & 16383] = p[threadIdx.x];
	p[threadIdx.x] = a[(i * 7) & 16383];
}

static volatile unsigned int *flag;
static CUdeviceptr dflag;
static unsigned int seq;

static void *opener(void *arg)
{
	unsigned int s = *(unsigned int *)arg;

	usleep(HOLD_US);
	__atomic_store_n(flag, s, __ATOMIC_RELEASE);
	return NULL;
}

typedef void (*launch_fn)(cudaStream_t s, float *p, int i);

/* Time one launch behind a closed gate, in us. */
static double gated(cudaStream_t s, launch_fn f, float *p, int i)
{
	pthread_t th;
	unsigned int mine = ++seq;
	double t0, t1;

	CK(cuStreamWaitValue32((CUstream)s, dflag, mine, CU_STREAM_WAIT_VALUE_GEQ));
	pthread_create(&th, NULL, opener, &mine);
	t0 = now_us();
	f(s, p, i);
	t1 = now_us();
	pthread_join(th, NULL);
	CK(cudaStreamSynchronize(s));
	return t1 - t0;
}

static void (*const ks[])(float *) = { k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10, k11 };

static void launch_k(cudaStream_t s, float *p, int i)
{
	ks[i]<<<1, 32, 0, s>>>(p);
}

static void launch_big(cudaStream_t s, float *p, int i)
{
	big_stack<<<132 * 4, 256, 0, s>>>(p, i);
}

/* GPU time per kernel, in ns, of `n` tiny kernels queued behind a gate, each followed
 * by `events` event records and `gates` waits on a value already reached. */
__global__ void spin(unsigned long long ns)
{
	unsigned long long t0, t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < ns);
}

static double drain(cudaStream_t s, float *p, int n, int events, int gates)
{
	static cudaEvent_t ev[2 * 1000 + 2];
	static int made;
	float ms;

	for (; made < 2 * n + 2; made++)
		CK(cudaEventCreate(&ev[made]));
	spin<<<1, 1, 0, s>>>(20000000ULL); /* the rest queues up behind it */
	CK(cudaEventRecord(ev[0], s));
	for (int i = 0; i < n; i++) {
		k0<<<1, 32, 0, s>>>(p);
		for (int e = 0; e < events; e++)
			CK(cudaEventRecord(ev[2 + 2 * i + e], s));
		for (int g = 0; g < gates; g++)
			CK(cuStreamWaitValue32((CUstream)s, dflag, 1, CU_STREAM_WAIT_VALUE_GEQ));
	}
	CK(cudaEventRecord(ev[1], s));
	CK(cudaStreamSynchronize(s));
	CK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
	return ms * 1e6 / n;
}

/* A gated event pair around one tiny kernel, in ns (GPU clock). */
static double timed_once(cudaStream_t s, float *p)
{
	static cudaEvent_t e0, e1;
	unsigned int mine = ++seq;
	float ms;

	if (!e0) {
		CK(cudaEventCreate(&e0));
		CK(cudaEventCreate(&e1));
	}
	CK(cuStreamWaitValue32((CUstream)s, dflag, mine, CU_STREAM_WAIT_VALUE_GEQ));
	CK(cudaEventRecord(e0, s));
	k0<<<1, 32, 0, s>>>(p);
	CK(cudaEventRecord(e1, s));
	__atomic_store_n(flag, mine, __ATOMIC_RELEASE);
	CK(cudaStreamSynchronize(s));
	CK(cudaEventElapsedTime(&ms, e0, e1));
	return ms * 1e6;
}

int main(void)
{
	cudaStream_t s;
	float *p;
	void *host;
	const char *mode = getenv("CUDA_MODULE_LOADING");

	CK(cudaFree(0));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&p, 1 << 20));
	CK(posix_memalign(&host, 4096, 4096));
	memset(host, 0, 4096);
	CK(cuMemHostRegister(host, 4096, CU_MEMHOSTREGISTER_DEVICEMAP));
	CK(cuMemHostGetDevicePointer(&dflag, host, 0));
	flag = (volatile unsigned int *)host;

	printf("{\"loading\": \"%s\", \"hold_us\": %d", mode ? mode : "default", HOLD_US);
	/* A launch of a kernel launched before: the control. */
	launch_k(s, p, 0);
	CK(cudaStreamSynchronize(s));
	printf(", \"relaunch_us\": %.1f", gated(s, launch_k, p, 0));
	/* First launches, nothing done before. */
	printf(", \"first_us\": [%.1f, %.1f, %.1f]", gated(s, launch_k, p, 1),
	       gated(s, launch_k, p, 2), gated(s, launch_k, p, 3));
	/* First launches after cuFuncLoad on the function cudart hands out. */
	printf(", \"first_after_funcload_us\": [");
	for (int i = 4; i < 7; i++) {
		cudaFunction_t f;
		CUfunctionLoadingState st = CU_FUNCTION_LOADING_STATE_MAX;

		CK(cudaGetFuncBySymbol(&f, (const void *)ks[i]));
		CK(cuFuncIsLoaded(&st, (CUfunction)f));
		CK(cuFuncLoad((CUfunction)f));
		printf("%s%.1f", i > 4 ? ", " : "", gated(s, launch_k, p, i));
		fprintf(stderr, "k%d loading state before cuFuncLoad: %d\n", i, (int)st);
	}
	printf("]");
	/* First launches after cudaFuncGetAttributes (a runtime call that loads). */
	printf(", \"first_after_getattr_us\": [");
	for (int i = 7; i < 10; i++) {
		cudaFuncAttributes a;

		CK(cudaFuncGetAttributes(&a, (const void *)ks[i]));
		printf("%s%.1f", i > 7 ? ", " : "", gated(s, launch_k, p, i));
	}
	printf("]");
	/* A kernel that needs more local memory than the context holds: loaded first, so
	 * only the local memory resize is left to the launch. */
	{
		cudaFunction_t f;

		CK(cudaGetFuncBySymbol(&f, (const void *)big_stack));
		CK(cuFuncLoad((CUfunction)f));
		printf(", \"big_stack_first_us\": %.1f", gated(s, launch_big, p, 1));
		printf(", \"big_stack_again_us\": %.1f", gated(s, launch_big, p, 2));
	}
	/* Ungated first launch, for the call's own cost. */
	{
		double t0 = now_us();

		launch_k(s, p, 10);
		printf(", \"first_ungated_us\": %.1f", now_us() - t0);
		CK(cudaStreamSynchronize(s));
		t0 = now_us();
		launch_k(s, p, 10);
		printf(", \"relaunch_ungated_us\": %.1f", now_us() - t0);
	}
	/* After a new allocation, on the program's stream and on the legacy one. */
	{
		cudaStream_t sts[2] = { s, 0 };

		for (int w = 0; w < 2; w++) {
			printf(", \"%s\": {\"plain_ns\": [", w ? "legacy_stream" : "own_stream");
			for (int i = 0; i < 3; i++)
				printf("%s%.0f", i ? ", " : "", timed_once(sts[w], p));
			printf("], \"after_malloc_ns\": [");
			for (int i = 0; i < 3; i++) {
				float *q;

				CK(cudaMalloc(&q, (64 << 20) + i * 4096));
				printf("%s%.0f", i ? ", " : "", timed_once(sts[w], q));
			}
			printf("]}");
		}
	}
	/* GPU cost of what a timer puts between kernels. */
	printf(", \"gpu_ns_per_kernel\": [");
	for (int rep = 0; rep < 3; rep++) {
		printf("%s{\"plain\": %.0f, \"1_event\": %.0f, \"2_events\": %.0f, "
		       "\"open_gate\": %.0f, \"2_events_open_gate\": %.0f}",
		       rep ? ", " : "", drain(s, p, 1000, 0, 0), drain(s, p, 1000, 1, 0),
		       drain(s, p, 1000, 2, 0), drain(s, p, 1000, 0, 1), drain(s, p, 1000, 2, 1));
	}
	printf("]}\n");
	return 0;
}
