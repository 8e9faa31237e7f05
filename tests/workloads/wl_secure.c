// SPDX-License-Identifier: MIT
/*
 * Loads the in-process library and the CUDA test double by path, then launches through the
 * library's cuLaunchKernel. As a setuid program run by another user (secure execution, where
 * the loader ignores LD_PRELOAD paths anyway), the library must stay inactive: no ring, no
 * records, the launches done all the same. Run normally, it records them.
 *
 *   wl_secure INJECT.so LIBCUDA.so N
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "fake_cuda.h"

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*dev_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_fn)(CUcontext);
typedef CUresult (*load_fn)(CUlibrary *, const void *, void *, void *, unsigned, void *, void *,
			    unsigned);
typedef CUresult (*get_fn)(CUkernel *, CUlibrary, const char *);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, unsigned, CUstream, void **, void **);

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry secure(\n.param .u64 a)\n{ ret; }\n";

static void *need(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p) {
		fprintf(stderr, "wl_secure: %s: %s\n", name, dlerror());
		exit(2);
	}
	return p;
}

int main(int argc, char **argv)
{
	void *inject, *cuda;
	CUdevice dev;
	CUcontext ctx;
	CUlibrary lib;
	CUkernel k;
	int n;

	if (argc != 4) {
		fprintf(stderr, "usage: wl_secure INJECT.so LIBCUDA.so N\n");
		return 2;
	}
	n = atoi(argv[3]);
	cuda = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
	inject = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!cuda || !inject) {
		fprintf(stderr, "wl_secure: %s\n", dlerror());
		return 2;
	}
	/* Through the library's entry points: the ones it would record. */
	if (((init_fn)need(inject, "cuInit"))(0) || ((dev_fn)need(cuda, "cuDeviceGet"))(&dev, 0) ||
	    ((retain_fn)need(cuda, "cuDevicePrimaryCtxRetain"))(&ctx, dev) ||
	    ((set_fn)need(cuda, "cuCtxSetCurrent"))(ctx) ||
	    ((load_fn)need(inject, "cuLibraryLoadData"))(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0) ||
	    ((get_fn)need(inject, "cuLibraryGetKernel"))(&k, lib, "secure"))
		return 3;
	for (int i = 0; i < n; i++)
		if (((launch_fn)need(inject, "cuLaunchKernel"))((CUfunction)k, 1, 1, 1, 32, 1, 1, 0,
								NULL, NULL, NULL))
			return 4;
	printf("wl_secure: %d launches done\n", n);
	return 0;
}
