// SPDX-License-Identifier: MIT
/*
 * A known call chain for stack capture: main -> outer -> middle -> inner, which launches
 * a kernel and makes an allocation that fails (built with frame pointers, without
 * inlining, so that every frame is there).
 *
 * --jit: middle calls inner through a trampoline made at run time in anonymous executable
 * memory, named in /tmp/perf-PID.map as a JIT (CPython's -X perf) would name it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

typedef void (*tramp_fn)(CUkernel k, void (*fn)(CUkernel));
static tramp_fn tramp;

__attribute__((noinline)) void middle(CUkernel k)
{
	if (tramp)
		tramp(k, inner);
	else
		inner(k);
}

/* push rbp; mov rbp, rsp; call rsi; pop rbp; ret: a frame of its own, then fn(k). */
static void make_trampoline(void)
{
	static const unsigned char code[] = { 0x55, 0x48, 0x89, 0xe5, 0xff, 0xd6, 0x5d, 0xc3 };
	char path[64];
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FILE *f;

	if (p == MAP_FAILED)
		exit(3);
	memcpy(p, code, sizeof(code));
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
		exit(3);
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	f = fopen(path, "w");
	if (!f)
		exit(3);
	fprintf(f, "%lx %zx py::jit_trampoline:demo.py\n", (unsigned long)p, sizeof(code));
	fclose(f);
	tramp = (tramp_fn)p;
}

__attribute__((noinline)) void outer(CUkernel k)
{
	middle(k);
}

int main(int argc, char **argv)
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
	if (argc > 1 && !strcmp(argv[1], "--jit"))
		make_trampoline();
	outer(k);
	CHECK(cuCtxSynchronize(), 0);
	/* (Stacks are named while their process lives: stay a moment.) */
	usleep(300000);
	if (tramp) {
		char path[64];

		snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
		unlink(path);
	}
	truth_write();
	return 0;
}
