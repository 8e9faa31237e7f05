// SPDX-License-Identifier: MIT
/*
 * The overhead benchmark's launch-bound CUDA C loop (bench/overhead.py, workload cloop): an
 * empty kernel launched through the runtime API 20,000 times a window, 7 windows after a
 * warm-up; prints one JSON line as bench/workload.py does (the median time per launch).
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>
#include <vector>

__global__ void tiny(float *x)
{
	if (threadIdx.x == 0)
		x[0] += 1.0f;
}

int main()
{
	const int iters = 20000, windows = 7;
	float *x;
	std::vector<double> t;

	if (cudaMalloc(&x, sizeof(float)) != cudaSuccess)
		return 1;
	for (int i = 0; i < 2000; i++)
		tiny<<<1, 32>>>(x);
	cudaDeviceSynchronize();
	for (int w = 0; w < windows; w++) {
		auto t0 = std::chrono::steady_clock::now();

		for (int i = 0; i < iters; i++)
			tiny<<<1, 32>>>(x);
		cudaDeviceSynchronize();
		t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
				    .count() /
			    iters);
	}
	if (cudaGetLastError() != cudaSuccess)
		return 1;
	std::vector<double> s = t;
	std::sort(s.begin(), s.end());
	printf("{\"workload\": \"cloop\", \"per_iter_s\": %.9g, \"iters_total\": %d, "
	       "\"windows_s\": [",
	       s[windows / 2], 2000 + iters * windows);
	for (int w = 0; w < windows; w++)
		printf("%s%.9g", w ? ", " : "", t[w]);
	printf("]}\n");
	return 0;
}
