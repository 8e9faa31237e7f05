// SPDX-License-Identifier: MIT
/*
 * Loads the driver from a path given on the command line, the way a program finds a
 * driver nobody could predict (a container mount, a copy), then pauses (as Python's import
 * machinery would) before using it: gpuscope must notice the library being opened and
 * probe it in that time.
 *
 *   wl_dlopen /path/to/libcuda.so.1
 */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "truth.h"

#define SYM(var, name)                                                    \
	do {                                                              \
		*(void **)&var = dlsym(h, name);                          \
		if (!var) {                                               \
			fprintf(stderr, "wl_dlopen: %s missing\n", name); \
			return 98;                                        \
		}                                                         \
	} while (0)

int main(int argc, char **argv)
{
	static const char ptx[] = ".version 8.0\n.target sm_90\n"
				  ".visible .entry _Z7latecomerv()\n{ ret; }\n";
	CUresult (*init)(unsigned), (*retain)(CUcontext *, CUdevice), (*set)(CUcontext);
	CUresult (*load)(CUlibrary *, const void *, void *, void **, unsigned, void *, void **,
			 unsigned);
	CUresult (*get)(CUkernel *, CUlibrary, const char *), (*sync)(void);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, CUstream, void **, void **);
	CUcontext ctx;
	CUlibrary lib;
	CUkernel k;
	void *h;

	if (argc != 2) {
		fprintf(stderr, "usage: wl_dlopen LIBCUDA\n");
		return 2;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "wl_dlopen: %s\n", dlerror());
		return 97;
	}
	usleep(300000);
	SYM(init, "cuInit");
	SYM(retain, "cuDevicePrimaryCtxRetain");
	SYM(set, "cuCtxSetCurrent");
	SYM(load, "cuLibraryLoadData");
	SYM(get, "cuLibraryGetKernel");
	SYM(launch, "cuLaunchKernel");
	SYM(sync, "cuCtxSynchronize");
	CHECK(init(0), 0);
	CHECK(retain(&ctx, 0), 0);
	CHECK(set(ctx), 0);
	CHECK(load(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0), 0);
	CHECK(get(&k, lib, "_Z7latecomerv"), 0);
	for (int i = 0; i < 10; i++)
		CHECK(launch((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
	CHECK(sync(), 0);
	truth_add(10, "launch:_Z7latecomerv");
	truth_add(10, "launch_api:cuLaunchKernel");
	truth_add(10, "launches");
	truth_add(1, "sync:cuCtxSynchronize");
	truth_add(1, "processes");
	truth_write();
	return 0;
}
