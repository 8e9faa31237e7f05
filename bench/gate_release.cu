// SPDX-License-Identifier: MIT
/*
 * Issue 3: a launch held behind a gate on an idle GPU sometimes measures ~6 us long (its
 * start event completes late, and the kernel starts ~6 us after it: see
 * bench/results/2026-11-21-h200-first-kernel). Which way of holding and releasing the
 * stream avoids that? Each variant brackets a ~4 us kernel with an event pair, as
 * gpuscope does, on an idle GPU, and compares the pair with the kernel's own view
 * (%globaltimer at its first block's start and its last block's end):
 *
 *   none       start event, kernel, end event: no gate (the pair includes launch latency)
 *   host       wait on a host-memory word (what gpuscope does), released by a host store
 *   host-gpu   wait on a host-memory word, released by cuStreamWriteValue32 on a 2nd stream
 *   dev-gpu    wait on a device-memory word, released by cuStreamWriteValue32 on a 2nd stream
 *   host-prime wait on a host-memory word, an empty kernel after it, then the pair
 *   host-ev    wait on a host-memory word, an extra event record after it, then the pair
 *   ...64      a 64-bit wait (cuStreamWaitValue64, which gpuscope uses where it can)
 *   ...legacy  on the legacy default stream (where bench/first_kernel.cu launches)
 *   ...uev     the program's own event recorded before the gate (as first_kernel.cu does)
 *   ...cpysame the kernel's view read back on the timed stream (default: cudaMemcpy, on the
 *              legacy stream), ...cpyoth on another stream; ...prm, ...ev as host-prime,
 *              host-ev
 *
 * Each is released right after the end event is queued, or HOLD us later. Variants run
 * interleaved, IDLE us apart. Per variant and hold: the pair minus the kernel's own time
 * (excess), as percentiles, and for the GPU-released ones the time from the release
 * (an event recorded after the write on the 2nd stream) to the start event.
 *
 *   nvcc -O2 -arch=sm_90 -o gate_release bench/gate_release.cu -lcuda
 *   ./gate_release [REPS [IDLE_US [poll|-] [VARIANT,...]]]   (poll: a thread queries an event every 1 ms,
 *                                             as gpuscope's harvester does)
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>
#include <string>
#include <vector>

#include "bench.cuh"

__global__ void fill(float *p, int n, unsigned long long *span, unsigned int blocks)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	span_begin(span);
	if (i < n)
		p[i] = p[i] * 0.5f + 1.0f;
	span_end(span, blocks);
}

__global__ void nothing(void)
{
}

enum { NONE, HOST, HOST_GPU, DEV_GPU, HOST_PRIME, HOST_EV, NKIND };
static const struct variant {
	const char *name;
	int kind;
	bool legacy, wide, user_event; /* the legacy stream; a 64-bit wait; the program's
					* own event recorded before the gate */
	int copy; /* the kernel's view read back on: 0 the legacy stream, 1 the timed stream
		   * (asynchronously), 2 another stream */
} vars[] = {
	{ "none", NONE },
	{ "host", HOST },
	{ "host-gpu", HOST_GPU },
	{ "dev-gpu", DEV_GPU },
	{ "host-prime", HOST_PRIME },
	{ "host-ev", HOST_EV },
	{ "host64", HOST, false, true },
	{ "none-legacy", NONE, true },
	{ "host-legacy", HOST, true },
	{ "host64-legacy", HOST, true, true },
	{ "host64-leg-uev", HOST, true, true, true },
	{ "dev-gpu-legacy", DEV_GPU, true },
	{ "host-cpysame", HOST, false, false, false, 1 },
	{ "host-leg-cpyoth", HOST, true, false, false, 2 },
	{ "host-legacy-prm", HOST_PRIME, true },
	{ "host-legacy-ev", HOST_EV, true },
	{ "host-cpysame-prm", HOST_PRIME, false, false, false, 1 },
	{ "host-cpysame-ev", HOST_EV, false, false, false, 1 },
	{ "none-cpysame", NONE, false, false, false, 1 },
};
#define NVAR (int)(sizeof(vars) / sizeof(vars[0]))
static const int holds[] = { 0, 100 };
#define NHOLD 2
static cudaEvent_t latest;
static volatile bool polling = true;

/* What gpuscope's harvester does: ask about the latest end event every millisecond. */
static void *poll(void *)
{
	cudaFree(0);
	while (polling) {
		cudaEventQuery(latest);
		usleep(1000);
	}
	return NULL;
}

static void spin_us(double us)
{
	double end = now_us() + us;

	while (now_us() < end)
		;
}

static unsigned int *hword;
static CUdeviceptr hdev, dword;
static unsigned int seq;

struct sample {
	double excess, release_to_start;
};

static sample one(int vi, int hold, float *p, int n, unsigned long long *span,
		  cudaStream_t s0, cudaStream_t rel)
{
	const struct variant *V = &vars[vi];
	int v = V->kind;
	cudaStream_t s = V->legacy ? 0 : s0;
	cudaEvent_t a, b, r, x, u;
	float ms, rs = -1;
	unsigned long long sp[2];
	unsigned int blocks = (n + 255) / 256;
	CUdeviceptr word = v == DEV_GPU ? dword : hdev;

	cudaEventCreate(&a);
	cudaEventCreate(&b);
	cudaEventCreate(&r);
	cudaEventCreate(&x);
	cudaEventCreate(&u);
	seq++;
	if (V->user_event)
		cudaEventRecord(u, s);
	if (v != NONE && V->wide)
		CK(cuStreamWaitValue64((CUstream)s, word, seq, CU_STREAM_WAIT_VALUE_GEQ));
	else if (v != NONE)
		CK(cuStreamWaitValue32((CUstream)s, word, seq, CU_STREAM_WAIT_VALUE_GEQ));
	if (v == HOST_PRIME)
		nothing<<<1, 1, 0, s>>>();
	if (v == HOST_EV)
		cudaEventRecord(x, s);
	cudaEventRecord(a, s);
	fill<<<blocks, 256, 0, s>>>(p, n, span, blocks);
	cudaEventRecord(b, s);
	cudaEventRecord(latest, s);
	if (hold)
		spin_us(hold);
	if ((v == HOST || v == HOST_PRIME || v == HOST_EV) && V->wide)
		__atomic_store_n((unsigned long long *)hword, seq, __ATOMIC_RELEASE);
	else if (v == HOST || v == HOST_PRIME || v == HOST_EV)
		__atomic_store_n(hword, seq, __ATOMIC_RELEASE);
	if (v == HOST_GPU || v == DEV_GPU) {
		CK(cuStreamWriteValue32((CUstream)rel, word, seq, 0));
		cudaEventRecord(r, rel);
	}
	cudaEventSynchronize(b);
	cudaStreamSynchronize(rel);
	cudaEventElapsedTime(&ms, a, b);
	if (v == HOST_GPU || v == DEV_GPU)
		cudaEventElapsedTime(&rs, r, a);
	if (V->copy == 0) {
		cudaMemcpy(sp, span, sizeof(sp), cudaMemcpyDeviceToHost);
	} else {
		cudaMemcpyAsync(sp, span, sizeof(sp), cudaMemcpyDeviceToHost,
				V->copy == 1 ? s : rel);
		cudaStreamSynchronize(V->copy == 1 ? s : rel);
	}
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	cudaEventDestroy(r);
	cudaEventDestroy(x);
	cudaEventDestroy(u);
	return { ms * 1e6 - (double)(sp[1] - sp[0]), rs < 0 ? -1 : rs * 1e6 };
}

static double pct(std::vector<double> &v, double q)
{
	std::sort(v.begin(), v.end());
	return v[(size_t)(q * (v.size() - 1) + 0.5)];
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 40, idle = argc > 2 ? atoi(argv[2]) : 1000;
	bool harvester = argc > 3 && !strcmp(argv[3], "poll");
	const char *only = argc > 4 ? argv[4] : NULL; /* a comma-separated list of variants */
	bool run[NVAR];
	pthread_t th;
	int n = 1 << 20;
	float *p;
	unsigned long long *span;
	cudaStream_t s, rel;
	std::vector<sample> res[NVAR][NHOLD];

	cudaFree(0);
	CK(cuCtxSynchronize());
	hword = (unsigned int *)aligned_alloc(4096, 4096);
	memset(hword, 0, 4096);
	CK(cuMemHostRegister(hword, 4096, CU_MEMHOSTREGISTER_DEVICEMAP));
	CK(cuMemHostGetDevicePointer(&hdev, hword, 0));
	CK(cuMemAlloc(&dword, 64));
	CK(cuMemsetD32(dword, 0, 16));
	cudaMalloc(&span, 64);
	cudaMalloc(&p, n * sizeof(float));
	cudaMemset(p, 0, n * sizeof(float));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&rel, cudaStreamNonBlocking);
	cudaEventCreate(&latest);
	if (harvester)
		pthread_create(&th, NULL, poll, NULL);
	for (int v = 0; v < NVAR; v++) {
		char key[64];

		snprintf(key, sizeof(key), ",%s,", vars[v].name);
		run[v] = !only || strstr((std::string(",") + only + ",").c_str(), key);
	}
	/* Load both kernels first: CUDA loads a kernel lazily at its first launch, which
	 * waits for the context's work, our held stream included (a deadlock). */
	nothing<<<1, 1, 0, s>>>();
	fill<<<(n + 255) / 256, 256, 0, s>>>(p, n, span, (n + 255) / 256);
	cudaDeviceSynchronize();
	/* warm every path once */
	for (int v = 0; v < NVAR; v++)
		if (run[v])
			one(v, 0, p, n, span, s, rel);
	for (int i = 0; i < reps; i++)
		for (int h = 0; h < NHOLD; h++)
			for (int v = 0; v < NVAR; v++) {
				if (!run[v])
					continue;
				if (idle >= 100)
					usleep(idle);
				else
					spin_us(idle);
				res[v][h].push_back(one(v, holds[h], p, n, span, s, rel));
			}
	polling = false;
	if (harvester)
		pthread_join(th, NULL);
	printf("reps %d idle_us %d%s\n", reps, idle, harvester ? " (a thread polls)" : "");
	printf("%-15s %5s  %7s %7s %7s %7s %7s  late(>min+4us)  release_to_start_ns p50 "
	       "p90\n",
	       "variant", "hold", "ex_min", "p10", "p50", "p90", "max");
	for (int v = 0; v < NVAR; v++)
		for (int h = 0; run[v] && h < NHOLD; h++) {
			std::vector<double> e, r;
			int late = 0;

			for (auto &x : res[v][h]) {
				e.push_back(x.excess);
				if (x.release_to_start >= 0)
					r.push_back(x.release_to_start);
			}
			double mn = pct(e, 0);
			for (double x : e)
				late += x > mn + 4000;
			printf("%-15s %5d  %7.0f %7.0f %7.0f %7.0f %7.0f  %3d/%zu", vars[v].name, holds[h],
			       mn, pct(e, 0.1), pct(e, 0.5), pct(e, 0.9), pct(e, 1), late, e.size());
			if (!r.empty())
				printf("  %7.0f %7.0f", pct(r, 0.5), pct(r, 0.9));
			printf("\n");
		}
	return 0;
}
