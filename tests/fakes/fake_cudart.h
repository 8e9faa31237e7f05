/* SPDX-License-Identifier: MIT */
/* The CUDA runtime types the runtime test double and its workloads use (cuda_runtime.h). */
#ifndef FAKE_CUDART_H
#define FAKE_CUDART_H

#include "fake_cuda.h"

typedef int cudaError_t;
typedef CUstream cudaStream_t;
typedef struct CUkern_st *cudaKernel_t;

typedef struct {
	unsigned int x, y, z;
} dim3;

enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4
};

#define cudaSuccess		       0
#define cudaErrorInvalidValue	       1
#define cudaErrorMemoryAllocation      2
#define cudaErrorInitializationError   3
#define cudaErrorInsufficientDriver    35
#define cudaErrorInvalidDevice	       101
#define cudaErrorInvalidDeviceFunction 98
#define cudaErrorInvalidResourceHandle 400
#define cudaErrorNotReady	       600
#define cudaErrorUnknown	       999

/* What nvcc places in .nvFatBinSegment: a wrapper pointing at the fatbin (PTX here). */
#define FATBIN_WRAPPER_MAGIC 0x466243b1
struct fatbin_wrapper {
	int magic;
	int version;
	const char *data;
	void *filename_or_fatbins;
};

void **__cudaRegisterFatBinary(void *wrapper);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
			    const char *deviceName, int thread_limit, void *tid, void *bid,
			    void *bDim, void *gDim, int *wSize);
cudaError_t __cudaGetKernel(cudaKernel_t *out, const void *stub);
cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t smem,
			     cudaStream_t stream);
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
			    cudaStream_t s);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);

#endif
