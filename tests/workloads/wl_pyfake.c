// SPDX-License-Identifier: MIT
/*
 * A program that looks like a Python interpreter to the in-process plane (it exports
 * Py_Version and PyGILState_GetThisThreadState, built with -rdynamic) and launches a
 * kernel, for what gpuscope does where it must not walk:
 *   old      claims 3.9.18, a version with no known layout: said once, native stacks kept;
 *   garbage  claims 3.11.2, and its thread state is random bytes whose pointers go
 *            anywhere: the walk reads errors or nonsense and the program runs on.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "truth.h"

unsigned long Py_Version = 0x030b02f0;
static unsigned char state[4096] __attribute__((aligned(16)));

void *PyGILState_GetThisThreadState(void)
{
	return state;
}

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry leafKernel(\n.param .u64 a)\n{ ret; }\n";

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;
	CUlibrary lib;
	CUkernel k;
	uint64_t seed = 0x9e3779b97f4a7c15ULL;

	if (argc < 2 || (strcmp(argv[1], "old") && strcmp(argv[1], "garbage"))) {
		fprintf(stderr, "usage: wl_pyfake old|garbage\n");
		return 2;
	}
	if (!strcmp(argv[1], "old"))
		Py_Version = 0x030912f0;
	/* Random words, some of them pointers into this buffer (so a walk goes on a while). */
	for (size_t i = 0; i < sizeof(state); i += 8) {
		uint64_t v;

		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		v = seed % 3 == 0 ? (uint64_t)(uintptr_t)(state + seed % sizeof(state)) : seed;
		memcpy(state + i, &v, 8);
	}
	CHECK(cuInit(0), 0);
	CHECK(cuDeviceGet(&dev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
	CHECK(cuCtxSetCurrent(ctx), 0);
	CHECK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0), 0);
	CHECK(cuLibraryGetKernel(&k, lib, "leafKernel"), 0);
	for (int i = 0; i < 20; i++)
		CHECK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
	printf("wl_pyfake: 20 launches\n");
	return 0;
}
