// SPDX-License-Identifier: MIT
// A CUDA runtime program as users write them, built by tests/gpu/check.py twice: with
// nvcc's default static runtime and with -cudart shared. It keeps ground truth
// (tests/workloads/truth.h) and checks its own results.
//
//   vector_add [--loops N] [--wait FILE]
// --wait FILE: launch each kernel once, create FILE.ready, wait for FILE (late attach).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

#include "../workloads/truth.h"

#define N (1 << 22)
#define CK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "vector_add: %s: %s\n", #call, cudaGetErrorString(e_));    \
			exit(98);                                                                  \
		}                                                                                  \
	} while (0)

__global__ void vecAdd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		c[i] = a[i] + b[i];
}

__global__ void scale(float *x, float s, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] *= s;
}

static void launched(const char *name, long long n)
{
	truth_add(n, "launch:%s", name);
	truth_add(n, "launches");
}

int main(int argc, char **argv)
{
	int loops = 1;
	const char *wait = NULL;
	float *a, *b, *c, *ha, *hb, *hc;
	size_t bytes = N * sizeof(float);
	int bad = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--loops") && i + 1 < argc)
			loops = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--wait") && i + 1 < argc)
			wait = argv[++i];
	}
	ha = (float *)malloc(bytes);
	hb = (float *)malloc(bytes);
	hc = (float *)malloc(bytes);
	for (int i = 0; i < N; i++) {
		ha[i] = (float)(i % 1000);
		hb[i] = 1.0f;
	}
	CK(cudaMalloc(&a, bytes));
	CK(cudaMalloc(&b, bytes));
	CK(cudaMalloc(&c, bytes));
	truth_add(3, "alloc:cuMemAlloc_v2");
	if (wait) {
		char ready[4096];
		struct stat st;
		FILE *f;

		vecAdd<<<N / 256, 256>>>(a, b, c, N);
		scale<<<N / 256, 256>>>(c, 1.0f, N);
		CK(cudaDeviceSynchronize());
		truth_add(2, "warmup_launches");
		snprintf(ready, sizeof(ready), "%s.ready", wait);
		f = fopen(ready, "w");
		if (f)
			fclose(f);
		while (stat(wait, &st))
			usleep(10000);
	}
	CK(cudaMemcpy(a, ha, bytes, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(b, hb, bytes, cudaMemcpyHostToDevice));
	truth_add(2, "copy:HtoD:count");
	truth_add(2 * (long long)bytes, "copy:HtoD:bytes");
	for (int l = 0; l < loops; l++) {
		for (int i = 0; i < 200; i++)
			vecAdd<<<N / 256, 256>>>(a, b, c, N);
		for (int i = 0; i < 100; i++)
			scale<<<N / 256, 256>>>(c, 1.0f, N);
	}
	CK(cudaGetLastError());
	launched("_Z6vecAddPKfS0_Pfi", 200LL * loops + (wait ? 1 : 0));
	launched("_Z5scalePffi", 100LL * loops + (wait ? 1 : 0));
	CK(cudaDeviceSynchronize());
	truth_add(1 + (wait ? 1 : 0), "sync:cuCtxSynchronize_v2");
	CK(cudaMemcpy(hc, c, bytes, cudaMemcpyDeviceToHost));
	truth_add(1, "copy:DtoH:count");
	truth_add((long long)bytes, "copy:DtoH:bytes");
	for (int i = 0; i < N; i += 997)
		bad += hc[i] != ha[i] + hb[i];
	CK(cudaFree(a));
	CK(cudaFree(b));
	truth_add((long long)bytes, "outstanding:device");
	truth_add(1, "processes");
	truth_write();
	printf("vector_add: %s\n", bad ? "WRONG RESULTS" : "results correct");
	return bad ? 1 : 0;
}
