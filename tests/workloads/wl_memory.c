// SPDX-License-Identifier: MIT
/*
 * Memory problems, planted, for the memory analyses (built with frame pointers and without
 * inlining, so that each site is its own stack):
 *
 *   leak        over 150 iterations 8 ms apart: leak_site() allocates 64 KiB and never
 *               frees it; steady_site() allocates 256 KiB and frees the one before;
 *               warmup_site() allocates 1 MiB in each of the first 10 iterations and keeps
 *               it (a cache that grew and stayed); step_site() allocates 2 MiB once, at
 *               iteration 100, and keeps it. Only leak_site leaks.
 *   grow        over 150 iterations 8 ms apart: grow_site() allocates 64 KiB, kept in a
 *               list; then the whole list is freed at once (a leak that ends: a list of
 *               tensors kept until a function returns)
 *   wrapped     two callers allocate through one wrapper (as every PyTorch tensor comes
 *               through its caching allocator): 4 MiB from wrapped_a, 2 MiB from
 *               wrapped_b, kept
 *   exhaust     1 MiB blocks until the device is full (FAKECUDA_MEM): the failure is
 *               exhaustion; then everything is freed
 *   fragment    1 MiB blocks until the device is full, every other one freed, then 2 MiB
 *               asked: half the device is free, in 1 MiB pieces
 *   vmm         a VMM allocator: 16 MiB of addresses reserved, two 4 MiB physical
 *               allocations mapped into them, one unmapped and released
 *   pool        stream-ordered allocations from the default pool and a created one
 *   many N      N allocations of sizes 4 KiB to 4 MiB, each freed a while later (the memory
 *               map of a long run)
 *
 *   linger      200 ms doing nothing (for gpuscope to name the stacks' frames while the
 *               process is still there)
 *
 * Ground truth: what each phase did, in bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"
#include "truth.h"

#define KIB (1ULL << 10)
#define MIB (1ULL << 20)

static void nap_us(long us)
{
	struct timespec ts = { 0, us * 1000 };

	nanosleep(&ts, NULL);
}

__attribute__((noinline)) CUdeviceptr leak_site(void)
{
	CUdeviceptr p;

	CHECK(cuMemAlloc_v2(&p, 64 * KIB), 0);
	return p;
}

__attribute__((noinline)) CUdeviceptr grow_site(void)
{
	CUdeviceptr p;

	CHECK(cuMemAlloc_v2(&p, 64 * KIB), 0);
	return p;
}

__attribute__((noinline)) CUdeviceptr steady_site(void)
{
	CUdeviceptr p;

	CHECK(cuMemAlloc_v2(&p, 256 * KIB), 0);
	return p;
}

__attribute__((noinline)) CUdeviceptr warmup_site(void)
{
	CUdeviceptr p;

	CHECK(cuMemAlloc_v2(&p, MIB), 0);
	return p;
}

__attribute__((noinline)) CUdeviceptr step_site(void)
{
	CUdeviceptr p;

	CHECK(cuMemAlloc_v2(&p, 2 * MIB), 0);
	return p;
}

__attribute__((noinline)) CUdeviceptr alloc_wrapper(size_t size)
{
	CUdeviceptr p;

	CHECK(cuMemAlloc_v2(&p, size), 0);
	return p;
}

__attribute__((noinline)) CUdeviceptr wrapped_a(void)
{
	return alloc_wrapper(4 * MIB);
}

__attribute__((noinline)) CUdeviceptr wrapped_b(void)
{
	return alloc_wrapper(2 * MIB);
}

static void grow(void)
{
	CUdeviceptr kept[150];

	for (int i = 0; i < 150; i++) {
		kept[i] = grow_site();
		nap_us(8000);
	}
	for (int i = 0; i < 150; i++)
		CHECK(cuMemFree_v2(kept[i]), 0);
	truth_add(150 * 64 * KIB, "grow:bytes");
}

static void leak(void)
{
	CUdeviceptr prev = 0;

	for (int i = 0; i < 150; i++) {
		CUdeviceptr s;

		leak_site();
		s = steady_site();
		if (prev)
			CHECK(cuMemFree_v2(prev), 0);
		prev = s;
		if (i < 10)
			warmup_site();
		if (i == 100)
			step_site();
		nap_us(8000);
	}
	CHECK(cuMemFree_v2(prev), 0);
	truth_add(150 * 64 * KIB, "leak:bytes");
	truth_add(150, "leak:count");
	truth_add(10 * MIB, "warmup:bytes");
	truth_add(2 * MIB, "step:bytes");
}

__attribute__((noinline)) CUresult block_site(CUdeviceptr *p, size_t size)
{
	return cuMemAlloc_v2(p, size);
}

static int fill(CUdeviceptr *blocks, int max)
{
	int n = 0;

	while (n < max && block_site(&blocks[n], MIB) == CUDA_SUCCESS)
		n++;
	return n;
}

static void exhaust(void)
{
	static CUdeviceptr blocks[1 << 14];
	int n = fill(blocks, 1 << 14);

	truth_add((long long)n * MIB, "exhaust:live");
	truth_add(MIB, "exhaust:requested");
	for (int i = 0; i < n; i++)
		CHECK(cuMemFree_v2(blocks[i]), 0);
}

__attribute__((noinline)) CUresult big_site(CUdeviceptr *p)
{
	return cuMemAlloc_v2(p, 2 * MIB);
}

static void fragment(void)
{
	static CUdeviceptr blocks[1 << 14];
	int n = fill(blocks, 1 << 14);
	CUdeviceptr p;
	int first = 1, last = n % 2 ? n - 2 : n - 1, holes = 0; /* the live ones: odd */

	for (int i = 0; i < n; i += 2) {
		CHECK(cuMemFree_v2(blocks[i]), 0);
		holes += i > first && i < last;
	}
	CHECK(big_site(&p), CUDA_ERROR_OUT_OF_MEMORY);
	truth_add((long long)(n / 2) * MIB, "fragment:live");
	/* (free ranges between live allocations: not the freed block below the first) */
	truth_add((long long)holes * MIB, "fragment:holes");
	truth_add(2 * MIB, "fragment:requested");
}

static void vmm(void)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CUmemGenericAllocationHandle h1, h2;
	CUdeviceptr va;

	CHECK(cuMemAddressReserve(&va, 16 * MIB, 0, 0, 0), 0);
	CHECK(cuMemCreate(&h1, 4 * MIB, &prop, 0), 0);
	CHECK(cuMemCreate(&h2, 4 * MIB, &prop, 0), 0);
	CHECK(cuMemMap(va, 4 * MIB, 0, h1, 0), 0);
	CHECK(cuMemMap(va + 4 * MIB, 4 * MIB, 0, h2, 0), 0);
	CHECK(cuMemUnmap(va + 4 * MIB, 4 * MIB), 0);
	CHECK(cuMemRelease(h2), 0);
	truth_add(16 * MIB, "vmm:reserved");
	truth_add(4 * MIB, "vmm:mapped");
	truth_add(4 * MIB, "vmm:physical");
}

static void pool(CUstream s)
{
	CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
				 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CUmemoryPool mine;
	CUdeviceptr a, b, c;

	CHECK(cuMemPoolCreate(&mine, &props), 0);
	CHECK(cuMemAllocAsync(&a, 512 * KIB, s), 0);
	CHECK(cuMemAllocFromPoolAsync(&b, 256 * KIB, mine, s), 0);
	CHECK(cuMemAllocFromPoolAsync(&c, 128 * KIB, mine, s), 0);
	CHECK(cuMemFreeAsync(b, s), 0);
	CHECK(cuStreamSynchronize(s), 0);
	truth_add(512 * KIB + 128 * KIB, "pool:live");
	truth_add(512 * KIB + 256 * KIB + 128 * KIB, "pool:peak");
}

__attribute__((noinline)) CUdeviceptr many_site(size_t size)
{
	CUdeviceptr p;

	CHECK(cuMemAlloc_v2(&p, size), 0);
	return p;
}

static void many(int n)
{
	enum {
		WINDOW = 64
	};
	CUdeviceptr live[WINDOW] = { 0 };
	unsigned long long seed = 12345, total = 0;

	for (int i = 0; i < n; i++) {
		size_t size;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		size = (size_t)(4 * KIB) << ((seed >> 33) % 11); /* 4 KiB .. 4 MiB */
		if (live[i % WINDOW])
			CHECK(cuMemFree_v2(live[i % WINDOW]), 0);
		live[i % WINDOW] = many_site(size);
		total += size;
	}
	for (int i = 0; i < WINDOW; i++)
		if (live[i])
			CHECK(cuMemFree_v2(live[i]), 0);
	truth_add(n, "many:count");
	truth_add((long long)total, "many:bytes");
}

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;
	CUstream s;

	if (argc < 2) {
		fprintf(stderr, "usage: wl_memory leak|grow|wrapped|exhaust|fragment|vmm|pool|many "
				"N|linger ...\n");
		return 2;
	}
	CHECK(cuInit(0), 0);
	CHECK(cuDeviceGet(&dev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
	CHECK(cuCtxSetCurrent(ctx), 0);
	CHECK(cuStreamCreate(&s, 0), 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "leak"))
			leak();
		else if (!strcmp(argv[i], "grow"))
			grow();
		else if (!strcmp(argv[i], "wrapped"))
			wrapped_a(), wrapped_b();
		else if (!strcmp(argv[i], "exhaust"))
			exhaust();
		else if (!strcmp(argv[i], "fragment"))
			fragment();
		else if (!strcmp(argv[i], "vmm"))
			vmm();
		else if (!strcmp(argv[i], "pool"))
			pool(s);
		else if (!strcmp(argv[i], "linger"))
			nap_us(200000);
		else if (!strcmp(argv[i], "many") && i + 1 < argc)
			many(atoi(argv[++i]));
		else {
			fprintf(stderr, "wl_memory: unknown phase '%s'\n", argv[i]);
			return 2;
		}
	}
	truth_write();
	return 0;
}
