// SPDX-License-Identifier: MIT
/*
 * libcudart test double: the parts of the CUDA runtime that nvcc-generated code and the
 * workloads call, behaving as the CUDA 13 runtime does towards the driver:
 *   - the driver is dlopen'ed ("libcuda.so.1") at the first call and every driver function
 *     is fetched with cuGetProcAddress_v2 at version 13000, as the real runtime does (so
 *     cudaDeviceSynchronize reaches cuCtxSynchronize_v2);
 *   - nvcc's registration calls (__cudaRegisterFatBinary, __cudaRegisterFunction) record
 *     host stub -> device name; in this test world the fatbin wrapper's data is PTX text;
 *   - __cudaGetKernel(&handle, stub) loads the fatbin lazily with cuLibraryLoadData and
 *     resolves the kernel with cuLibraryGetKernel, returning the driver's CUkernel handle,
 *     which cudaLaunchKernel passes on to cuLaunchKernel unchanged.
 * Built twice: as libcudart.so.13, and as a static archive with hidden symbols that a
 * workload links in, like nvcc's default static runtime.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_cudart.h"

#ifdef FAKE_CUDART_STATIC
#define EXPORT __attribute__((visibility("hidden")))
#else
#define EXPORT __attribute__((visibility("default")))
#endif

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*LibraryLoadData)(CUlibrary *, const void *, void *, void **, unsigned, void *,
				    void **, unsigned);
	CUresult (*LibraryGetKernel)(CUkernel *, CUlibrary, const char *);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
				 unsigned, unsigned, CUstream, void **, void **);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemAllocHost)(void **, size_t);
	CUresult (*MemFreeHost)(void *);
	CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
	CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
	CUresult (*Memcpy)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*CtxSynchronize)(CUcontext); /* CUDA 13: cuCtxSynchronize_v2 */
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*DeviceGetCount)(int *);
} drv;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cudaError_t init_error;
static __thread cudaError_t last_error;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define FETCH(field, name)                                          \
	do {                                                        \
		if (gpa(name, (void **)&drv.field, 13000, 0, NULL)) \
			goto fail;                                  \
	} while (0)

static void load_driver(void)
{
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, int *);
	CUcontext ctx;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

	if (!h || !(gpa = (CUresult(*)(const char *, void **, int, cuuint64_t, int *))dlsym(
			    h, "cuGetProcAddress_v2"))) {
		init_error = cudaErrorInsufficientDriver;
		return;
	}
	FETCH(Init, "cuInit");
	FETCH(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	FETCH(CtxSetCurrent, "cuCtxSetCurrent");
	FETCH(LibraryLoadData, "cuLibraryLoadData");
	FETCH(LibraryGetKernel, "cuLibraryGetKernel");
	FETCH(LaunchKernel, "cuLaunchKernel");
	FETCH(MemAlloc, "cuMemAlloc");
	FETCH(MemFree, "cuMemFree");
	FETCH(MemAllocHost, "cuMemAllocHost");
	FETCH(MemFreeHost, "cuMemFreeHost");
	FETCH(MemAllocAsync, "cuMemAllocAsync");
	FETCH(MemFreeAsync, "cuMemFreeAsync");
	FETCH(Memcpy, "cuMemcpy");
	FETCH(MemcpyHtoD, "cuMemcpyHtoD");
	FETCH(MemcpyDtoH, "cuMemcpyDtoH");
	FETCH(MemcpyDtoD, "cuMemcpyDtoD");
	FETCH(MemcpyAsync, "cuMemcpyAsync");
	FETCH(MemsetD8, "cuMemsetD8");
	FETCH(CtxSynchronize, "cuCtxSynchronize");
	FETCH(StreamSynchronize, "cuStreamSynchronize");
	FETCH(StreamCreate, "cuStreamCreate");
	FETCH(DeviceGetCount, "cuDeviceGetCount");
	if (drv.Init(0) || drv.DevicePrimaryCtxRetain(&ctx, 0) || drv.CtxSetCurrent(ctx))
		goto fail;
	return;
fail:
	init_error = cudaErrorInitializationError;
}

static cudaError_t ready(void)
{
	pthread_once(&once, load_driver);
	return init_error;
}

static cudaError_t ret(CUresult r)
{
	cudaError_t e = r == CUDA_SUCCESS		 ? cudaSuccess
			: r == CUDA_ERROR_OUT_OF_MEMORY	 ? cudaErrorMemoryAllocation
			: r == CUDA_ERROR_INVALID_VALUE	 ? cudaErrorInvalidValue
			: r == CUDA_ERROR_NOT_READY	 ? cudaErrorNotReady
			: r == CUDA_ERROR_INVALID_HANDLE ? cudaErrorInvalidResourceHandle
							 : cudaErrorUnknown;
	if (e)
		last_error = e;
	return e;
}

#define DRIVER(call) (ready() ? (last_error = init_error) : ret(call))

/* ---- registration (what nvcc emits into every object with kernels) -------------------- */

struct registration {
	const void *stub;
	const char *name;
	struct fatbin *fb;
	CUkernel kernel;
	struct registration *next;
};

struct fatbin {
	const char *ptx;
	CUlibrary lib;
};

static struct registration *regs;

EXPORT void **__cudaRegisterFatBinary(void *wrapper)
{
	const struct fatbin_wrapper *w = wrapper;
	struct fatbin *fb = calloc(1, sizeof(*fb));

	fb->ptx = w && w->magic == FATBIN_WRAPPER_MAGIC ? w->data : NULL;
	return (void **)fb;
}

EXPORT void __cudaRegisterFatBinaryEnd(void **handle)
{
	(void)handle;
}

EXPORT void __cudaUnregisterFatBinary(void **handle)
{
	(void)handle; /* registrations live until exit, as in the real runtime */
}

EXPORT void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
				   const char *deviceName, int thread_limit, void *tid, void *bid,
				   void *bDim, void *gDim, int *wSize)
{
	struct registration *r = calloc(1, sizeof(*r));

	(void)deviceName, (void)thread_limit, (void)tid, (void)bid, (void)bDim, (void)gDim;
	(void)wSize;
	r->stub = hostFun;
	r->name = deviceFun;
	r->fb = (struct fatbin *)handle;
	pthread_mutex_lock(&lock);
	r->next = regs;
	regs = r;
	pthread_mutex_unlock(&lock);
}

static struct registration *find_reg(const void *stub)
{
	for (struct registration *r = regs; r; r = r->next)
		if (r->stub == stub)
			return r;
	return NULL;
}

static cudaError_t resolve(struct registration *r)
{
	cudaError_t e = cudaSuccess;

	if (r->kernel)
		return cudaSuccess;
	if (!r->fb->lib)
		e = DRIVER(
			drv.LibraryLoadData(&r->fb->lib, r->fb->ptx, NULL, NULL, 0, NULL, NULL, 0));
	if (!e)
		e = DRIVER(drv.LibraryGetKernel(&r->kernel, r->fb->lib, r->name));
	return e;
}

EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *out, const void *stub)
{
	struct registration *r;
	cudaError_t e;

	if (ready())
		return last_error = init_error;
	pthread_mutex_lock(&lock);
	r = find_reg(stub);
	e = r ? resolve(r) : cudaErrorInvalidDeviceFunction;
	if (!e)
		*out = (cudaKernel_t)r->kernel;
	pthread_mutex_unlock(&lock);
	return e ? (last_error = e) : cudaSuccess;
}

/* Accepts a handle from __cudaGetKernel or, as older code passes, a registered stub. */
EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
				    size_t smem, cudaStream_t stream)
{
	struct registration *r;

	if (ready())
		return last_error = init_error;
	pthread_mutex_lock(&lock);
	r = find_reg(func);
	if (r && !resolve(r))
		func = r->kernel;
	pthread_mutex_unlock(&lock);
	return ret(drv.LaunchKernel((CUfunction)func, grid.x, grid.y, grid.z, block.x, block.y,
				    block.z, (unsigned)smem, stream, args, NULL));
}

EXPORT cudaError_t __cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
				      size_t smem, cudaStream_t stream)
{
	return cudaLaunchKernel(func, grid, block, args, smem, stream);
}

/* ---- memory, copies, synchronisation -------------------------------------------------- */

EXPORT cudaError_t cudaMalloc(void **p, size_t n)
{
	return DRIVER(drv.MemAlloc((CUdeviceptr *)p, n));
}

EXPORT cudaError_t cudaFree(void *p)
{
	return DRIVER(drv.MemFree((CUdeviceptr)p));
}

EXPORT cudaError_t cudaMallocHost(void **p, size_t n)
{
	return DRIVER(drv.MemAllocHost(p, n));
}

EXPORT cudaError_t cudaFreeHost(void *p)
{
	return DRIVER(drv.MemFreeHost(p));
}

EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
	return DRIVER(drv.MemAllocAsync((CUdeviceptr *)p, n, s));
}

EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
	return DRIVER(drv.MemFreeAsync((CUdeviceptr)p, s));
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	if (ready())
		return last_error = init_error;
	switch (kind) {
	case cudaMemcpyHostToDevice:
		return ret(drv.MemcpyHtoD((CUdeviceptr)dst, src, n));
	case cudaMemcpyDeviceToHost:
		return ret(drv.MemcpyDtoH(dst, (CUdeviceptr)src, n));
	case cudaMemcpyDeviceToDevice:
		return ret(drv.MemcpyDtoD((CUdeviceptr)dst, (CUdeviceptr)src, n));
	default:
		return ret(drv.Memcpy((CUdeviceptr)dst, (CUdeviceptr)src, n));
	}
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
				   cudaStream_t s)
{
	(void)kind;
	return DRIVER(drv.MemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, n, s));
}

EXPORT cudaError_t cudaMemset(void *p, int v, size_t n)
{
	return DRIVER(drv.MemsetD8((CUdeviceptr)p, (unsigned char)v, n));
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
	return DRIVER(drv.CtxSynchronize(NULL));
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	return DRIVER(drv.StreamSynchronize(s));
}

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	return DRIVER(drv.StreamCreate(s, 0));
}

EXPORT cudaError_t cudaGetDeviceCount(int *n)
{
	return DRIVER(drv.DeviceGetCount(n));
}

EXPORT cudaError_t cudaSetDevice(int dev)
{
	return dev == 0 ? ready() : (last_error = cudaErrorInvalidDevice);
}

EXPORT cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;

	last_error = cudaSuccess;
	return e;
}

EXPORT const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "error (CUDA runtime test double)";
}
