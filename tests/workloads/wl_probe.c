// SPDX-License-Identifier: MIT
/*
 * Kernels launched every way a device-side probe's launch routing must handle, for
 * `gpuscope probe` against the test double. argv[1]: a PTX file with kernels `vadd` (three
 * parameters: two pointers and an int) and `noargs`; argv[2]: the block size (default 64).
 *
 *   vadd: cuLaunchKernel with kernelParams x3, with an `extra` buffer x2,
 *         cuLaunchKernelEx x2; from cuLibraryLoadData: the CUkernel x2, and its
 *         function (cuKernelGetFunction) x2; after cuModuleUnload and a new load x1
 *   noargs: cuLaunchKernel without parameters x2
 *
 * Every call must succeed, probes or not: the program exits 0 only then.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "truth.h"
#include "wl_file.h"

CUresult cuModuleUnload(CUmodule mod);

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUlibrary lib;
	CUfunction vadd, noargs, kf;
	CUkernel kk;
	CUdeviceptr a, b;
	unsigned int block = argc > 2 ? (unsigned int)atoi(argv[2]) : 64;
	int n = 1000;
	void *params[] = { &a, &b, &n };
	struct {
		CUdeviceptr a, b;
		int n, pad;
	} buf;
	size_t size = 20; /* (the three parameters' bytes, without padding) */
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			  NULL };
	CUlaunchConfig cfg = { 0 };
	void *img;

	if (argc < 2) {
		fprintf(stderr, "usage: wl_probe FILE.ptx [BLOCK]\n");
		return 2;
	}
	img = slurp(argv[1]);
	CHECK(cuInit(0), 0);
	CHECK(cuDeviceGet(&dev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
	CHECK(cuCtxSetCurrent(ctx), 0);
	CHECK(cuMemAlloc_v2(&a, 4096), 0);
	CHECK(cuMemAlloc_v2(&b, 4096), 0);
	buf.a = a;
	buf.b = b;
	buf.n = n;
	CHECK(cuModuleLoadData(&mod, img), 0);
	CHECK(cuModuleGetFunction(&vadd, mod, "vadd"), 0);
	CHECK(cuModuleGetFunction(&noargs, mod, "noargs"), 0);
	for (int i = 0; i < 3; i++)
		CHECK(cuLaunchKernel(vadd, 2, 1, 1, block, 1, 1, 0, NULL, params, NULL), 0);
	for (int i = 0; i < 2; i++)
		CHECK(cuLaunchKernel(vadd, 2, 1, 1, block, 1, 1, 0, NULL, NULL, extra), 0);
	cfg.gridDimX = 2;
	cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = block;
	cfg.blockDimY = cfg.blockDimZ = 1;
	for (int i = 0; i < 2; i++)
		CHECK(cuLaunchKernelEx(&cfg, vadd, params, NULL), 0);
	for (int i = 0; i < 2; i++)
		CHECK(cuLaunchKernel(noargs, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
	CHECK(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0), 0);
	CHECK(cuLibraryGetKernel(&kk, lib, "vadd"), 0);
	for (int i = 0; i < 2; i++)
		CHECK(cuLaunchKernel((CUfunction)kk, 2, 1, 1, block, 1, 1, 0, NULL, params, NULL),
		      0);
	CHECK(cuKernelGetFunction(&kf, kk), 0);
	for (int i = 0; i < 2; i++)
		CHECK(cuLaunchKernel(kf, 2, 1, 1, block, 1, 1, 0, NULL, params, NULL), 0);
	CHECK(cuModuleUnload(mod), 0);
	CHECK(cuModuleLoadData(&mod, img), 0);
	CHECK(cuModuleGetFunction(&vadd, mod, "vadd"), 0);
	CHECK(cuLaunchKernel(vadd, 2, 1, 1, block, 1, 1, 0, NULL, params, NULL), 0);
	CHECK(cuCtxSynchronize(), 0);
	truth_add(14, "launches");
	truth_write();
	return 0;
}
