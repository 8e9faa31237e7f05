// SPDX-License-Identifier: MIT
/*
 * bench/carry_bias.cu's question through the in-process plane: a kernel that spins NS by
 * %globaltimer launched through the runtime (<<<>>>, as PyTorch's launches reach the
 * driver), RUNS times on the legacy stream, each waited for and 20 us apart, so that
 * `gpuscope run --inject` (GPUSCOPE_CARRY=1 or not) times it by a carrier or a gated pair.
 * Prints one JSON line: the kernel's own spans (median ns), which the events' reading in
 * the recording is compared with (bench/results/carry-2026-11-27-h200.md).
 *
 *   nvcc -O2 -arch=sm_90 carry_plane.cu -o carry_plane
 *   ./carry_plane [RUNS] [NS] [nosync]
 * nosync: not waited for but every 40th, 10 us apart (as a launch-bound loop: PyTorch's
 * launches in bench/carry_cupti.py), the span the last one's of each 40.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <algorithm>
#include <vector>

__global__ void spin(unsigned long long *out, unsigned long long ns)
{
	unsigned long long t0, t1;

	if (threadIdx.x || blockIdx.x)
		return;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
	while (t1 - t0 < ns);
	out[0] = t0;
	out[1] = t1;
}

static double now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 300;
	unsigned long long ns = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000, *out;
	std::vector<double> span;
	bool nosync = argc > 3 && argv[3][0] == 'n';

	if (cudaHostAlloc((void **)&out, 16, cudaHostAllocMapped) != cudaSuccess)
		return 1;
	for (int i = 0; i < runs + 10; i++) {
		spin<<<1, 128>>>(out, ns);
		if (nosync && i % 40 != 39) {
			for (double t = now_ns() + 10000; now_ns() < t;)
				;
			continue;
		}
		if (cudaDeviceSynchronize() != cudaSuccess)
			return 1;
		if (i >= 10)
			span.push_back((double)(out[1] - out[0]));
		for (double t = now_ns() + 20000; now_ns() < t;)
			;
	}
	std::sort(span.begin(), span.end());
	printf("{\"runs\": %d, \"ns\": %llu, \"span_median_ns\": %.0f}\n", runs, ns,
	       span[span.size() / 2]);
	return 0;
}
