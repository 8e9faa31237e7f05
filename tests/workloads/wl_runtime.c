// SPDX-License-Identifier: MIT
/*
 * Runtime-API workload written the way nvcc 13 compiles a .cu file: a constructor registers
 * the fatbin and each kernel's host stub (__cudaRegisterFatBinary/__cudaRegisterFunction),
 * and each launch site asks __cudaGetKernel once for the kernel handle, then calls
 * cudaLaunchKernel with it. The runtime dlopens libcuda.so.1. Linked against the runtime
 * test double as a shared library (wl_runtime) or statically with hidden symbols
 * (wl_static, like nvcc's default -cudart static).
 *
 *   wl_runtime [--loops N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cudart.h"
#include "truth.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry _Z6vecAddPKfS0_Pfi(\n.param .u64 a)\n{ ret; }\n"
			  ".visible .entry _Z4axpyfPKfPf(\n.param .u64 a)\n{ ret; }\n";
static struct fatbin_wrapper wrapper = { FATBIN_WRAPPER_MAGIC, 1, ptx, NULL };
static void **fatbin;

/* Host stubs: their addresses identify the kernels to the runtime. */
__attribute__((noinline)) void __device_stub__vecAdd(void)
{
	__asm__ volatile("");
}
__attribute__((noinline)) void __device_stub__axpy(void)
{
	__asm__ volatile("nop");
}

__attribute__((constructor)) static void register_kernels(void)
{
	fatbin = __cudaRegisterFatBinary(&wrapper);
	__cudaRegisterFunction(fatbin, (const char *)__device_stub__vecAdd,
			       (char *)"_Z6vecAddPKfS0_Pfi", "_Z6vecAddPKfS0_Pfi", -1, NULL, NULL,
			       NULL, NULL, NULL);
	__cudaRegisterFunction(fatbin, (const char *)__device_stub__axpy, (char *)"_Z4axpyfPKfPf",
			       "_Z4axpyfPKfPf", -1, NULL, NULL, NULL, NULL, NULL);
	__cudaRegisterFatBinaryEnd(fatbin);
}

static void launch(void (*stub)(void), const char *name, dim3 grid, dim3 block)
{
	cudaKernel_t k;

	CHECK(__cudaGetKernel(&k, (const void *)stub), cudaSuccess);
	CHECK(cudaLaunchKernel(k, grid, block, NULL, 0, NULL), cudaSuccess);
	truth_add(1, "launch:%s", name);
	truth_add(1, "launch_api:cuLaunchKernel");
	truth_add(1, "launches");
}

int main(int argc, char **argv)
{
	int loops = argc > 2 && !strcmp(argv[1], "--loops") ? atoi(argv[2]) : 1;
	const size_t n = 1 << 20;
	void *a, *b, *c;
	char *host = calloc(1, n);

	truth_add(1, "processes");
	CHECK(cudaMalloc(&a, n), cudaSuccess);
	CHECK(cudaMalloc(&b, n), cudaSuccess);
	CHECK(cudaMalloc(&c, n), cudaSuccess);
	truth_add(3, "alloc:cuMemAlloc_v2");
	CHECK(cudaMemcpy(a, host, n, cudaMemcpyHostToDevice), cudaSuccess);
	CHECK(cudaMemcpy(b, host, n, cudaMemcpyHostToDevice), cudaSuccess);
	truth_add(2, "copy:HtoD:count");
	truth_add(2 * (long long)n, "copy:HtoD:bytes");
	for (int i = 0; i < 50 * loops; i++)
		launch(__device_stub__vecAdd, "_Z6vecAddPKfS0_Pfi", (dim3){ 4096, 1, 1 },
		       (dim3){ 256, 1, 1 });
	for (int i = 0; i < 25 * loops; i++)
		launch(__device_stub__axpy, "_Z4axpyfPKfPf", (dim3){ 2048, 1, 1 },
		       (dim3){ 512, 1, 1 });
	CHECK(cudaMemcpy(host, c, n, cudaMemcpyDeviceToHost), cudaSuccess);
	truth_add(1, "copy:DtoH:count");
	truth_add((long long)n, "copy:DtoH:bytes");
	CHECK(cudaDeviceSynchronize(), cudaSuccess);
	truth_add(1, "sync:cuCtxSynchronize_v2");
	CHECK(cudaFree(a), cudaSuccess);
	CHECK(cudaFree(b), cudaSuccess);
	truth_add((long long)n, "outstanding:device");
	truth_add(3 * (long long)n, "peak:device");
	truth_write();
	free(host);
	return 0;
}
