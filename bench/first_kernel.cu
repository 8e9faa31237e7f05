// SPDX-License-Identifier: MIT
/*
 * Why a process's first kernel measures 3-4 us long under --inject (issue 3): an event pair
 * around a kernel against the kernel's own view (%globaltimer at its first block's start
 * and its last block's end), for the first kernel to touch freshly allocated memory and
 * for later ones. One line per launch:
 *   CASE i event_ns kernel_ns (event - kernel)
 * Cases: fresh (cudaMalloc, then the kernel first touches it), touched (the memory written
 * by a kernel first), again (the same kernel, later launches), other (fresh memory, but a
 * kernel of ours ran in the context before).
 */
#include <cstdio>
#include <cuda_runtime.h>

#include "bench.cuh"

__global__ void fill(float *p, int n, unsigned long long *span, unsigned int blocks)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	span_begin(span);
	if (i < n)
		p[i] = 0.0f;
	span_end(span, blocks);
}

__global__ void nothing(void)
{
}

static unsigned long long *span;

static void measure(const char *what, int i, float *p, int n)
{
	cudaEvent_t a, b;
	float ms;
	unsigned long long s[2];
	unsigned int blocks = (n + 255) / 256;

	cudaEventCreate(&a);
	cudaEventCreate(&b);
	cudaEventRecord(a, 0);
	fill<<<blocks, 256>>>(p, n, span, blocks);
	cudaEventRecord(b, 0);
	cudaEventSynchronize(b);
	cudaEventElapsedTime(&ms, a, b);
	cudaMemcpy(s, span, sizeof(s), cudaMemcpyDeviceToHost);
	printf("%s %d %.0f %llu %.0f\n", what, i, ms * 1e6, s[1] - s[0], ms * 1e6 - (s[1] - s[0]));
	cudaEventDestroy(a);
	cudaEventDestroy(b);
}

int main(int argc, char **argv)
{
	int n = 1 << 20;
	float *p;
	const char *mode = argc > 1 ? argv[1] : "fresh";

	cudaMalloc(&span, 64);
	cudaMemset(span, 0, 64);
	cudaDeviceSynchronize();
	if (mode[0] == 'o') { /* other: a kernel of ours first */
		nothing<<<1, 1>>>();
		cudaDeviceSynchronize();
	}
	cudaMalloc(&p, n * sizeof(float));
	if (mode[0] == 't') { /* touched first */
		cudaMemset(p, 1, n * sizeof(float));
		cudaDeviceSynchronize();
	}
	for (int i = 0; i < 6; i++)
		measure(mode, i, p, n);
	/* fresh memory again, later in the process */
	cudaMalloc(&p, n * sizeof(float) * 4);
	for (int i = 0; i < 3; i++)
		measure("fresh-later", i, p, n);
	return 0;
}
