// SPDX-License-Identifier: MIT
/*
 * A known call chain for stack capture: main -> outer -> middle -> inner, which launches
 * a kernel and makes an allocation that fails (built with frame pointers, without
 * inlining, so that every frame is there).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "truth.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry leafKernel(\n.param .u64 a)\n{ ret; }\n";

__attribute__((noinline)) void inner(CUkernel k)
{
	CUdeviceptr p;

	CHECK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
	CHECK(cuMemAlloc_v2(&p, 1ULL << 50), CUDA_ERROR_OUT_OF_MEMORY);
}

__attribute__((noinline)) void middle(CUkernel k)
{
	inner(k);
}

__attribute__((noinline)) void outer(CUkernel k)
{
	middle(k);
}

int main(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUlibrary lib;
	CUkernel k;

	CHECK(cuInit(0), 0);
	CHECK(cuDeviceGet(&dev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
	CHECK(cuCtxSetCurrent(ctx), 0);
	CHECK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0), 0);
	CHECK(cuLibraryGetKernel(&k, lib, "leafKernel"), 0);
	outer(k);
	CHECK(cuCtxSynchronize(), 0);
	/* (Stacks are named while their process lives: stay a moment.) */
	usleep(300000);
	truth_write();
	return 0;
}
