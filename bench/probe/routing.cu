// SPDX-License-Identifier: MIT
/*
 * What device-side probe routing must get right on a real GPU, each checked by its result
 * (bench/probe_gpu.sh routing; the same program untraced and under gpuscope probe):
 *   - a graph built by hand (cudaGraphAddKernelNode, then cudaGraphExecKernelNodeSetParams),
 *     launched 3 times;
 *   - a kernel reading a __constant__ array filled with cudaMemcpyToSymbol, and one counting
 *     in a __device__ variable read back with cudaMemcpyFromSymbol (an instrumented copy of
 *     the module would hold its own: gpuscope must leave these two alone);
 *   - a module loaded from a PTX file (cuModuleLoad) and a fatbin with PTX for compute_80 and
 *     compute_100 only (cuModuleLoadData): on sm_90 the compute_80 PTX must be instrumented.
 * argv[1]: the PTX file, argv[2]: the fatbin. Prints one line per check, "ok" or "FAIL".
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "../bench.cuh"

__constant__ float coef[4];
__device__ unsigned int hits;

__global__ void gnode(int *out, int v)
{
	out[blockIdx.x * blockDim.x + threadIdx.x] += v;
}

__global__ void uses_const(float *out)
{
	out[threadIdx.x] = coef[threadIdx.x & 3];
}

__global__ void uses_device_var(void)
{
	atomicAdd(&hits, 1);
}

static int failed;

static void check(const char *what, bool ok)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", what);
	failed |= !ok;
}

/* A driver module's `fill(int *out, int v)`: out[i] = v + i, 256 threads. */
static bool driver_module(CUmodule m, int v)
{
	CUfunction f;
	CUdeviceptr d;
	int host[256];
	bool ok = true;

	if (cuModuleGetFunction(&f, m, "fill") || cuMemAlloc(&d, sizeof(host)))
		return false;
	void *args[] = { &d, &v };
	if (cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, 0, args, NULL) || cuCtxSynchronize() ||
	    cuMemcpyDtoH(host, d, sizeof(host)))
		return false;
	for (int i = 0; i < 256; i++)
		ok &= host[i] == v + i;
	cuMemFree(d);
	return ok;
}

int main(int argc, char **argv)
{
	int *out, host[1024];
	float *fout, fhost[32], c[4] = { 1.5f, 2.5f, 3.5f, 4.5f };
	unsigned int h = 0;
	bool ok = true;

	if (argc < 3) {
		fprintf(stderr, "usage: routing FILE.ptx FILE.fatbin\n");
		return 2;
	}
	cudaMalloc(&out, sizeof(host));
	cudaMemset(out, 0, sizeof(host));

	/* A graph by hand: one kernel node adding 1 to 1024 ints, set to add 10, 3 launches. */
	{
		cudaGraph_t g;
		cudaGraphExec_t e;
		cudaGraphNode_t n;
		cudaStream_t s;
		int v = 1;
		void *args[] = { &out, &v };
		cudaKernelNodeParams p = {};

		p.func = (void *)gnode;
		p.gridDim = dim3(4);
		p.blockDim = dim3(256);
		p.kernelParams = args;
		cudaStreamCreate(&s);
		cudaGraphCreate(&g, 0);
		cudaGraphAddKernelNode(&n, g, NULL, 0, &p);
		cudaGraphInstantiate(&e, g, 0);
		v = 10;
		cudaGraphExecKernelNodeSetParams(e, n, &p);
		for (int i = 0; i < 3; i++)
			cudaGraphLaunch(e, s);
		cudaStreamSynchronize(s);
		cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
		for (int i = 0; i < 1024; i++)
			ok &= host[i] == 30;
		check("graph kernel node (added, set, 3 launches): every int is 30", ok);
	}

	/* Module variables. */
	cudaMemcpyToSymbol(coef, c, sizeof(c));
	cudaMalloc(&fout, sizeof(fhost));
	uses_const<<<1, 32>>>(fout);
	cudaMemcpy(fhost, fout, sizeof(fhost), cudaMemcpyDeviceToHost);
	ok = true;
	for (int i = 0; i < 32; i++)
		ok &= fhost[i] == c[i & 3];
	check("__constant__ filled by cudaMemcpyToSymbol read by a kernel", ok);
	for (int i = 0; i < 5; i++)
		uses_device_var<<<2, 64>>>();
	cudaMemcpyFromSymbol(&h, hits, sizeof(h));
	check("__device__ counter read back by cudaMemcpyFromSymbol: 640", h == 640);

	/* Driver modules: a PTX file, and a fatbin with PTX for compute_80 and compute_100. */
	{
		CUmodule m1, m2;

		check("cuModuleLoad(PTX file): fill", !cuModuleLoad(&m1, argv[1]) &&
							       driver_module(m1, 7));
		check("cuModuleLoadData(compute_80 + compute_100 PTX): fill",
		      !cuModuleLoadData(&m2, slurp(argv[2])) && driver_module(m2, 9));
	}
	check("no CUDA error", cudaDeviceSynchronize() == cudaSuccess &&
				       cudaGetLastError() == cudaSuccess);
	return failed;
}
