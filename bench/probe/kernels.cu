// SPDX-License-Identifier: MIT
/*
 * Kernels with known behaviour, for `gpuscope probe` on a GPU (bench/probe_gpu.sh):
 *   vector_add   one element per thread, coalesced
 *   divergent    odd threads spin 8x longer than even ones
 *   imbalanced   a grid-stride loop over n = 4 * threads + threads / 8 elements: the first
 *                eighth of the grid's threads make 5 passes, the rest 4
 *   coalesced    thread i reads a[i]
 *   strided      thread i reads a[32 * i]: every access its own 32-byte sector
 *   tiny         an empty kernel (probe overhead on launch-bound work)
 *   heavy        a long dependent FMA chain per thread (compute-bound)
 * Usage: kernels check            each once, results checked on the host
 *        kernels bench KERNEL N [ITERS]   N launches of KERNEL, the GPU time per launch on
 *                                         stdout (ITERS: heavy's loop, 2000 by default)
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(x)                                                                             \
	do {                                                                              \
		cudaError_t e_ = (x);                                                     \
		if (e_ != cudaSuccess) {                                                  \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

__global__ void vector_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

__global__ void divergent(float *out, int iters)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float x = i;
	int n = (threadIdx.x & 1) ? iters * 8 : iters;
	for (int k = 0; k < n; k++)
		x = x * 1.0000001f + 0.5f;
	out[i] = x;
}

__global__ void imbalanced(float *a, int n)
{
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		a[i] = a[i] * 2.0f + 1.0f;
}

__global__ void coalesced(const float *a, float *out)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	out[i] = a[i];
}

__global__ void strided(const float *a, float *out)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	out[i] = a[32 * i];
}

__global__ void tiny() {}

__global__ void heavy(float *out, int iters)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float x = i, y = 1.0f;
	for (int k = 0; k < iters; k++) {
		x = fmaf(x, 1.0000001f, y);
		y = fmaf(y, 0.9999999f, x);
	}
	out[i] = x + y;
}

static const int T = 256, B = 1024, N = T * B;

int main(int argc, char **argv)
{
	float *a, *b, *c, *big;
	CK(cudaMalloc(&a, N * sizeof(float)));
	CK(cudaMalloc(&b, N * sizeof(float)));
	CK(cudaMalloc(&c, (N * 4 + N / 8) * sizeof(float)));
	CK(cudaMalloc(&big, (size_t)N * 32 * sizeof(float)));
	CK(cudaMemset(a, 0, N * sizeof(float)));
	CK(cudaMemset(b, 0, N * sizeof(float)));
	CK(cudaMemset(c, 0, (N * 4 + N / 8) * sizeof(float)));
	CK(cudaMemset(big, 0, (size_t)N * 32 * sizeof(float)));
	if (argc > 1 && !strcmp(argv[1], "check")) {
		float h[4];
		vector_add<<<B, T>>>(a, b, c, N);
		divergent<<<B, T>>>(c, 1000);
		imbalanced<<<B, T>>>(c, N * 4 + N / 8);
		coalesced<<<B, T>>>(a, c);
		strided<<<B, T>>>(big, c);
		tiny<<<1, 32>>>();
		heavy<<<B, T>>>(c, 1000);
		CK(cudaGetLastError());
		CK(cudaDeviceSynchronize());
		/* imbalanced ran last over c: its first elements were 0 -> 1 (divergent wrote
		 * them; check the tail, which only imbalanced touched) */
		CK(cudaMemcpy(h, c + N * 4, sizeof(h), cudaMemcpyDeviceToHost));
		printf("check ok (tail %.1f)\n", h[0]);
		return 0;
	}
	if (argc > 3 && !strcmp(argv[1], "bench")) {
		const char *k = argv[2];
		int n = atoi(argv[3]), iters = argc > 4 ? atoi(argv[4]) : 2000;
		cudaEvent_t e0, e1;
		float ms;
		CK(cudaEventCreate(&e0));
		CK(cudaEventCreate(&e1));
		for (int round = 0; round < 2; round++) { /* (the first: warm-up) */
			CK(cudaEventRecord(e0));
			for (int i = 0; i < n; i++) {
				if (!strcmp(k, "tiny"))
					tiny<<<1, 32>>>();
				else if (!strcmp(k, "heavy"))
					heavy<<<B, T>>>(c, iters);
				else if (!strcmp(k, "vector_add"))
					vector_add<<<B, T>>>(a, b, c, N);
				else {
					fprintf(stderr, "bench: tiny, heavy or vector_add\n");
					return 2;
				}
			}
			CK(cudaEventRecord(e1));
			CK(cudaEventSynchronize(e1));
		}
		CK(cudaGetLastError());
		CK(cudaEventElapsedTime(&ms, e0, e1));
		printf("%s %d launches: %.3f us per launch\n", k, n, ms * 1000.0 / n);
		return 0;
	}
	fprintf(stderr, "usage: kernels check | kernels bench tiny|heavy|vector_add N\n");
	return 2;
}
