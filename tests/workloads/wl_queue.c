// SPDX-License-Identifier: MIT
/*
 * A kernel that waits on the GPU with its stream free: stream A is told to wait for an
 * event recorded on stream B after a long kernel (about 30 ms), and a short kernel is
 * launched into A at once. Its launch returns in time and A has nothing before it, yet it
 * starts only when B's kernel ends. A second short kernel, launched into A after it, runs
 * without waiting (no finding).
 *
 *   wl_queue
 */
#include <stdio.h>

#include "fake_cuda.h"
#include "truth.h"

/* The double's kernel time: FAKECUDA_KERNEL_NS (5 us by default) + threads / 16 ns. */
#define LONG_GRID  468750U /* x 1024 threads: 30 ms */
#define LONG_BLOCK 1024U

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry long_kernel(\n.param .u64 a)\n{ ret; }\n"
			  ".visible .entry short_kernel(\n.param .u64 a)\n{ ret; }\n";

int main(void)
{
	CUcontext ctx;
	CUdevice dev;
	CUlibrary lib;
	CUkernel slow, quick;
	CUstream a, b;
	CUevent done;

	CHECK(cuInit(0), 0);
	CHECK(cuDeviceGet(&dev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
	CHECK(cuCtxSetCurrent(ctx), 0);
	CHECK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0), 0);
	CHECK(cuLibraryGetKernel(&slow, lib, "long_kernel"), 0);
	CHECK(cuLibraryGetKernel(&quick, lib, "short_kernel"), 0);
	CHECK(cuStreamCreate(&a, 0), 0);
	CHECK(cuStreamCreate(&b, 0), 0);
	CHECK(cuEventCreate(&done, 0), 0);
	/* Both kernels once, so that neither is a first launch below. */
	CHECK(cuLaunchKernel((CUfunction)quick, 1, 1, 1, 32, 1, 1, 0, a, NULL, NULL), 0);
	CHECK(cuLaunchKernel((CUfunction)slow, 1, 1, 1, 32, 1, 1, 0, b, NULL, NULL), 0);
	CHECK(cuCtxSynchronize(), 0);

	CHECK(cuLaunchKernel((CUfunction)slow, LONG_GRID, 1, 1, LONG_BLOCK, 1, 1, 0, b, NULL, NULL),
	      0);
	CHECK(cuEventRecord(done, b), 0);
	CHECK(cuStreamWaitEvent(a, done, 0), 0);
	CHECK(cuLaunchKernel((CUfunction)quick, 1, 1, 1, 32, 1, 1, 0, a, NULL, NULL), 0);
	CHECK(cuLaunchKernel((CUfunction)quick, 1, 1, 1, 32, 1, 1, 0, a, NULL, NULL), 0);
	CHECK(cuCtxSynchronize(), 0);
	truth_add((long long)LONG_GRID * LONG_BLOCK / 16, "queue:long_ns");
	truth_add(6, "launches");
	truth_write();
	return 0;
}
