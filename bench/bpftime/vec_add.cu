// SPDX-License-Identifier: MIT
/* A vec_add as bpftime's GPU examples have one (its kernel's mangled name is theirs,
 * _Z9vectorAddPKfS0_Pf): LAUNCHES launches of a GRID x BLOCK grid, then a checksum of the
 * result, which a probe must leave unchanged. Like bpftime's, the kernel reads its length
 * from a __device__ variable (d_N) and prints with printf (thread 0, each launch); its
 * factor is a __constant__ one (scale), both set with cudaMemcpyToSymbol: an instrumented
 * kernel that read its own copies (d_N 0, scale 1) would compute nothing and say so.
 * Built as bpftime builds its workload:
 *   nvcc -gencode arch=compute_90,code=[sm_90,compute_90] -cudart shared vec_add.cu
 *   vec_add [LAUNCHES [GRID [BLOCK]]]   (default 10 4 256) */
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__device__ int d_N;
__constant__ float scale = 1.0f;

__global__ void vectorAdd(const float *a, const float *b, float *c)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i == 0)
		printf("vectorAdd: N %d, scale %.1f\n", d_N, scale);
	if (i < d_N)
		c[i] = a[i] + b[i] * scale + c[i];
}

int main(int argc, char **argv)
{
	int launches = argc > 1 ? atoi(argv[1]) : 10, grid = argc > 2 ? atoi(argv[2]) : 4,
	    block = argc > 3 ? atoi(argv[3]) : 256, n = grid * block;
	float *h = (float *)malloc(n * sizeof(float)), *a, *b, *c, two = 2.0f;
	double sum = 0;

	for (int i = 0; i < n; i++)
		h[i] = (float)(i % 97) / 7.0f;
	if (cudaMalloc(&a, n * sizeof(float)) || cudaMalloc(&b, n * sizeof(float)) ||
	    cudaMalloc(&c, n * sizeof(float)))
		return 1;
	cudaMemcpy(a, h, n * sizeof(float), cudaMemcpyHostToDevice);
	cudaMemcpy(b, h, n * sizeof(float), cudaMemcpyHostToDevice);
	cudaMemset(c, 0, n * sizeof(float));
	if (cudaMemcpyToSymbol(d_N, &n, sizeof(n)) ||
	    cudaMemcpyToSymbol(scale, &two, sizeof(two)))
		return 1;
	for (int l = 0; l < launches; l++)
		vectorAdd<<<grid, block>>>(a, b, c);
	if (cudaDeviceSynchronize())
		return 2;
	cudaMemcpy(h, c, n * sizeof(float), cudaMemcpyDeviceToHost);
	for (int i = 0; i < n; i++)
		sum += h[i];
	printf("vec_add: %d launches of %d x %d threads, checksum %.3f\n", launches, grid, block,
	       sum);
	return 0;
}
