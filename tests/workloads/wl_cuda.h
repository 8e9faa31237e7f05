/* SPDX-License-Identifier: MIT */
/* What the driver workloads set up first: the driver, device 0's primary context made
 * current, and a library of PTX text (the program exits, as CHECK does, if one fails). */
#ifndef GS_TEST_WL_CUDA_H
#define GS_TEST_WL_CUDA_H

#include "fake_cuda.h"
#include "truth.h"

static inline CUlibrary wl_library(const char *ptx)
{
	CUdevice dev;
	CUcontext ctx;
	CUlibrary lib;

	CHECK(cuInit(0), 0);
	CHECK(cuDeviceGet(&dev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
	CHECK(cuCtxSetCurrent(ctx), 0);
	CHECK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0), 0);
	return lib;
}

#endif
