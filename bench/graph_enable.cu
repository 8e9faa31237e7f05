// SPDX-License-Identifier: MIT
/*
 * A graph built with the graph API (runtime): add1 then add10 on one counter, launched 12
 * times, each waited for, add10 disabled at launches 4-7 (cudaGraphNodeSetEnabled) and
 * at 0-3 of a second exec of it. Prints one JSON line: the counters (each must be
 * 12 + 8 x 10 = 92) and the milliseconds of the last launch. Run untraced and under
 * `gpuscope run --inject` with a twin at every launch (bench/graph_enable_gpu.sh).
 */
#include <cstdio>
#include <cuda_runtime.h>

__global__ void add1(int *x)
{
	if (threadIdx.x == 0)
		x[0] += 1;
}

__global__ void add10(int *x)
{
	if (threadIdx.x == 0)
		x[0] += 10;
}

static int run(cudaGraph_t g, cudaGraphNode_t second, int *x, cudaStream_t s, int first)
{
	cudaGraphExec_t e;
	int v = -1;

	if (cudaGraphInstantiate(&e, g, 0) != cudaSuccess)
		return -1;
	for (int i = 0; i < 12; i++) {
		if (i == first || i == first + 4)
			cudaGraphNodeSetEnabled(e, second, i != first);
		cudaGraphLaunch(e, s);
		cudaStreamSynchronize(s);
	}
	cudaMemcpy(&v, x, sizeof(v), cudaMemcpyDeviceToHost);
	cudaGraphExecDestroy(e);
	return v;
}

int main()
{
	int *x[2];
	cudaStream_t s;
	cudaGraph_t g[2];
	cudaGraphNode_t a[2], b[2];
	int got[2];

	cudaStreamCreate(&s);
	for (int k = 0; k < 2; k++) {
		void *args[] = { &x[k] };
		cudaKernelNodeParams p = {};

		if (cudaMalloc(&x[k], sizeof(int)) != cudaSuccess ||
		    cudaMemset(x[k], 0, sizeof(int)) != cudaSuccess)
			return 1;
		cudaGraphCreate(&g[k], 0);
		p.gridDim = dim3(1);
		p.blockDim = dim3(32);
		p.kernelParams = args;
		p.func = (void *)add1;
		cudaGraphAddKernelNode(&a[k], g[k], nullptr, 0, &p);
		p.func = (void *)add10;
		cudaGraphAddKernelNode(&b[k], g[k], &a[k], 1, &p);
		got[k] = run(g[k], b[k], x[k], s, k ? 0 : 4);
	}
	printf("{\"disabled_4_7\": %d, \"disabled_0_3\": %d, \"want\": 92}\n", got[0], got[1]);
	return got[0] == 92 && got[1] == 92 ? 0 : 1;
}
