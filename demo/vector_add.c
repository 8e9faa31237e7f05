// SPDX-License-Identifier: MIT
/*
 * The demo gpuscope traces: a vector add and a saxpy through the CUDA driver API, the way
 * a statically linked CUDA program or Triton reaches the GPU. It loads libcuda.so.1 at run
 * time, so the same binary runs on a real GPU (the PTX is compiled by the driver) or on
 * gpuscope's CUDA test double (tests/fakes), and it says which.
 *
 * What it does, so the report can be checked by eye: 2 copies host to device and 1 back
 * (4 MiB each), 1 memset, 100 launches of vecAdd and 100 of saxpy, one deliberately failed
 * allocation (out of memory), 1 MiB left allocated at exit.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h" /* the driver API's types and signatures */
#include "kernels_ptx.h"

#define N	 (1 << 20)
#define LAUNCHES 100

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*LibraryLoadData)(CUlibrary *, const void *, void *, void **, unsigned, void *,
				    void **, unsigned);
	CUresult (*LibraryGetKernel)(CUkernel *, CUlibrary, const char *);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*MemsetD32)(CUdeviceptr, unsigned, size_t);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
				 unsigned, unsigned, CUstream, void **, void **);
	CUresult (*CtxSynchronize)(void);
	CUresult (*GetErrorName)(CUresult, const char **);
} cu;

static void check(CUresult r, const char *what)
{
	const char *name = "?";

	if (r == CUDA_SUCCESS)
		return;
	if (cu.GetErrorName)
		cu.GetErrorName(r, &name);
	fprintf(stderr, "vector_add: %s failed: %s (%d)\n", what, name, r);
	exit(1);
}

static void load_driver(void)
{
	static const struct {
		const char *name;
		void **fn;
	} syms[] = {
		{ "cuInit", (void **)&cu.Init },
		{ "cuDeviceGet", (void **)&cu.DeviceGet },
		{ "cuDeviceGetName", (void **)&cu.DeviceGetName },
		{ "cuDevicePrimaryCtxRetain", (void **)&cu.DevicePrimaryCtxRetain },
		{ "cuCtxSetCurrent", (void **)&cu.CtxSetCurrent },
		{ "cuModuleLoadData", (void **)&cu.ModuleLoadData },
		{ "cuModuleGetFunction", (void **)&cu.ModuleGetFunction },
		{ "cuLibraryLoadData", (void **)&cu.LibraryLoadData },
		{ "cuLibraryGetKernel", (void **)&cu.LibraryGetKernel },
		{ "cuMemAlloc_v2", (void **)&cu.MemAlloc },
		{ "cuMemFree_v2", (void **)&cu.MemFree },
		{ "cuMemcpyHtoD_v2", (void **)&cu.MemcpyHtoD },
		{ "cuMemcpyDtoH_v2", (void **)&cu.MemcpyDtoH },
		{ "cuMemsetD32_v2", (void **)&cu.MemsetD32 },
		{ "cuLaunchKernel", (void **)&cu.LaunchKernel },
		{ "cuCtxSynchronize", (void **)&cu.CtxSynchronize },
		{ "cuGetErrorName", (void **)&cu.GetErrorName },
	};
	void *h = dlopen("libcuda.so.1", RTLD_NOW);

	if (!h) {
		fprintf(stderr, "vector_add: no CUDA driver: %s\n", dlerror());
		exit(1);
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].fn = dlsym(h, syms[i].name);
		if (!*syms[i].fn) {
			fprintf(stderr, "vector_add: the driver has no %s\n", syms[i].name);
			exit(1);
		}
	}
}

int main(void)
{
	float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float));
	float *c = malloc(N * sizeof(float)), alpha = 2.0f;
	CUdeviceptr da, db, dc, keep, huge;
	CUfunction vec_add, saxpy;
	CUcontext ctx;
	CUlibrary lib;
	CUmodule mod;
	CUkernel k;
	CUdevice dev;
	char name[256];
	int n = N, fake, bad = 0;
	void *add_args[] = { &da, &db, &dc, &n }, *saxpy_args[] = { &alpha, &da, &dc, &n };

	load_driver();
	check(cu.Init(0), "cuInit");
	check(cu.DeviceGet(&dev, 0), "cuDeviceGet");
	check(cu.DeviceGetName(name, sizeof(name), dev), "cuDeviceGetName");
	fake = strstr(name, "test double") != NULL;
	printf("vector_add: device %s\n", name);
	check(cu.DevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	check(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
	/* Both ways a kernel gets its handle: a library (lazy loading, as the CUDA runtime
	 * does) and a module (as Triton does). */
	check(cu.LibraryLoadData(&lib, kernels_ptx, NULL, NULL, 0, NULL, NULL, 0),
	      "cuLibraryLoadData");
	check(cu.LibraryGetKernel(&k, lib, "_Z6vecAddPKfS0_Pfi"), "cuLibraryGetKernel");
	vec_add = (CUfunction)k;
	check(cu.ModuleLoadData(&mod, kernels_ptx), "cuModuleLoadData");
	check(cu.ModuleGetFunction(&saxpy, mod, "_Z5saxpyfPKfPfi"), "cuModuleGetFunction");

	for (int i = 0; i < N; i++) {
		a[i] = (float)i;
		b[i] = 2.0f * (float)i;
	}
	check(cu.MemAlloc(&da, N * sizeof(float)), "cuMemAlloc");
	check(cu.MemAlloc(&db, N * sizeof(float)), "cuMemAlloc");
	check(cu.MemAlloc(&dc, N * sizeof(float)), "cuMemAlloc");
	check(cu.MemAlloc(&keep, 1 << 20), "cuMemAlloc");
	check(cu.MemcpyHtoD(da, a, N * sizeof(float)), "cuMemcpyHtoD");
	check(cu.MemcpyHtoD(db, b, N * sizeof(float)), "cuMemcpyHtoD");
	check(cu.MemsetD32(dc, 0, N), "cuMemsetD32");
	for (int i = 0; i < LAUNCHES; i++)
		check(cu.LaunchKernel(vec_add, N / 256, 1, 1, 256, 1, 1, 0, NULL, add_args, NULL),
		      "cuLaunchKernel vecAdd");
	for (int i = 0; i < LAUNCHES; i++)
		check(cu.LaunchKernel(saxpy, N / 512, 1, 1, 512, 1, 1, 0, NULL, saxpy_args, NULL),
		      "cuLaunchKernel saxpy");
	check(cu.CtxSynchronize(), "cuCtxSynchronize");
	check(cu.MemcpyDtoH(c, dc, N * sizeof(float)), "cuMemcpyDtoH");
	/* A failure gpuscope must report: far more memory than any GPU has. */
	if (cu.MemAlloc(&huge, 1ULL << 50) != CUDA_ERROR_OUT_OF_MEMORY)
		fprintf(stderr, "vector_add: a 1 PiB allocation did not fail as expected\n");
	if (!fake) {
		/* c = a + b, then LAUNCHES times c += alpha * a. */
		for (int i = 0; i < N; i += 4099) {
			float want = 3.0f * (float)i + LAUNCHES * alpha * (float)i;

			bad += fabsf(c[i] - want) > 1e-3f * fabsf(want) + 1e-3f;
		}
		printf("vector_add: results %s\n", bad ? "WRONG" : "correct");
	} else {
		printf("vector_add: the test double does not run kernels; results not checked\n");
	}
	check(cu.MemFree(da), "cuMemFree");
	check(cu.MemFree(db), "cuMemFree");
	check(cu.MemFree(dc), "cuMemFree");
	printf("vector_add: %d launches, 3 copies of %zu MiB, 1 MiB left allocated\n", 2 * LAUNCHES,
	       N * sizeof(float) >> 20);
	free(a);
	free(b);
	free(c);
	return bad ? 1 : 0;
}
