// SPDX-License-Identifier: MIT
/*
 * Driver-API workload (the shape of a statically linked nvcc binary or of Triton: no
 * libcudart). Exercises every probe family against the CUDA test double and records
 * ground truth (truth.h).
 *
 *   wl_driver [--loops N] [--threads T] [--serial] [--fork N] [--exec-child] [--mini]
 *             [--wait FILE] [--burst N] [--entry-points] [--signal N] [--note TEXT]
 *             [--rate R] [--seconds S] [--count FILE] [--linger FILE]
 *
 * --wait FILE   resolve kernel names, then create FILE.ready and wait until FILE exists
 *               before doing anything else (for late attach: the names are missed);
 *               FILE.done is created when the work is done
 * --linger FILE at the end, the truth written, wait until FILE exists (at most 120 s): the
 *               process still there while gpuscope reads its memory
 * --early-graph N  only: three launches of scale captured into a graph and instantiated
 *               before the --wait gate, the graph launched N times after it
 * --burst N     only: N launches back to back after the --wait gate (drop accounting)
 * --rate R      the burst paced at R launches a second at most (0: as fast as it can)
 * --seconds S   the burst ends after S seconds, or N launches if N is given first
 * --count FILE  the burst's launches that have returned, kept in FILE (8 bytes, mapped, so
 *               that they are there when the process is killed mid-burst)
 * --threads T   with --burst or --seconds: T threads share the burst (and its rate)
 * --serial      with --threads: the threads run one after another, never two at once
 * --fork N      N forked children each run the mini scenario
 * --exec-child  one child execs this program with --mini
 * --mini        init, 7 launches of vecAdd, one 1 MiB allocation left outstanding
 * --entry-points  also: launches, copies and syncs through function pointers from
 *               cuGetProcAddress, cuGetProcAddress_v2 and dlsym on libcuda
 * --signal N    also: N launches while a 20 us timer's signal handler polls an event
 *               with cuEventQuery (a CUDA call from a signal handler)
 * --note TEXT   ignored (a command line of a given length)
 * --kinds K N   only: K kernels (in modules of 60), launched in turn N rounds (a training
 *               step's ~80 kernels, each launched often)
 * --kfunc-kinds K N  the same, in libraries, each launch of a function asked for just
 *               before (cuKernelGetFunction), as cuDNN's
 * --kfunc N     only: cuKernelGetFunction before each launch of the function it gives, as
 *               cuDNN does: N launches of vecAdd in device 0's context, N in device 1's
 *               (one thread), N alternating; then scale's function asked once in each
 *               context, each launched N times after (a library that keeps a context's
 *               function); then N times vecAdd's function asked for into a place written
 *               over before triton's kernel is launched (a result used for its
 *               attributes, in a frame gone by the next launch). With FAKECUDA_DEVICES=2,
 *               FAKECUDA_FUNC_PER_CONTEXT=1.
 * --sets N      only: asynchronous sets (PyTorch zeroing gradients: 107 a GPT-2 step): 3
 *               that fail (no device memory at 0), then N on a buffer, every other one by
 *               cuMemsetD32Async_ptsz (which jumps into cuMemsetD32Async), then 3 that fail
 *               (their failures not in the truth: see test_trace.py)
 * --kfunc-reload  only: a library's kernel kOld launched 3 times by its function
 *               (cuKernelGetFunction before each launch), the library unloaded, another
 *               loaded whose kNew the driver gives the same handles, launched 5 times so
 *               (XLA's and cuDNN's ways together)
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "truth.h"

#define MIB (1ULL << 20)
#define KIB (1ULL << 10)

static const char lib_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			      ".visible .entry _Z6vecAddPKfS0_Pfi(\n.param .u64 a)\n{ ret; }\n"
			      ".visible .entry _Z5scalePfif(\n.param .u64 a)\n{ ret; }\n"
			      ".visible .entry _Z9reduceSumPKfPfi(\n.param .u64 a)\n{ ret; }\n";
static const char mod_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			      ".visible .entry triton_poi_fused_add_0(\n.param .u64 a)\n{ ret; }\n";

static const char *VECADD = "_Z6vecAddPKfS0_Pfi";
static const char *SCALE = "_Z5scalePfif";
static const char *REDUCE = "_Z9reduceSumPKfPfi";
static const char *TRITON = "triton_poi_fused_add_0";

static CUkernel k_add, k_scale, k_reduce;
static CUlibrary lib;
static CUfunction f_add, f_triton;
static long long live_device;

static void device_alloc(long long bytes, const char *api)
{
	live_device += bytes;
	truth_set_max(live_device, "peak:device");
	truth_add(1, "alloc:%s", api);
}

static void device_free(long long bytes)
{
	live_device -= bytes;
}

static void launch(const char *name, const char *api)
{
	truth_add(1, "launch:%s", name);
	truth_add(1, "launch_api:%s", api);
	truth_add(1, "launches");
}

static void copied(const char *dir, long long bytes)
{
	truth_add(1, "copy:%s:count", dir);
	truth_add(bytes, "copy:%s:bytes", dir);
}

static void init_names(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;

	CHECK(cuInit(0), 0);
	CHECK(cuDeviceGet(&dev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
	CHECK(cuCtxSetCurrent(ctx), 0);
	CHECK(cuLibraryLoadData(&lib, lib_ptx, NULL, NULL, 0, NULL, NULL, 0), 0);
	CHECK(cuLibraryGetKernel(&k_add, lib, VECADD), 0);
	CHECK(cuLibraryGetKernel(&k_scale, lib, SCALE), 0);
	CHECK(cuLibraryGetKernel(&k_reduce, lib, REDUCE), 0);
	CHECK(cuKernelGetFunction(&f_add, k_add), 0);
	CHECK(cuModuleLoadData(&mod, mod_ptx), 0);
	CHECK(cuModuleGetFunction(&f_triton, mod, TRITON), 0);
}

static void wait_gate(const char *path)
{
	char ready[4096];
	struct stat st;
	FILE *f;

	snprintf(ready, sizeof(ready), "%s.ready", path);
	f = fopen(ready, "w");
	if (f)
		fclose(f);
	while (stat(path, &st) != 0)
		usleep(10000);
}

static void mini(void)
{
	CUdeviceptr p;

	init_names();
	for (int i = 0; i < 7; i++) {
		CHECK(cuLaunchKernel((CUfunction)k_add, 16, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL),
		      0);
		launch(VECADD, "cuLaunchKernel");
	}
	CHECK(cuMemAlloc_v2(&p, MIB), 0);
	device_alloc(MIB, "cuMemAlloc_v2");
	CHECK(cuCtxSynchronize(), 0);
	truth_add(1, "sync:cuCtxSynchronize");
}

struct thread_arg {
	int launches;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	CUstream s;

	CHECK(cuStreamCreate(&s, 0), 0);
	for (int i = 0; i < a->launches; i++)
		CHECK(cuLaunchKernel(f_add, 256, 1, 1, 256, 1, 1, 0, s, NULL, NULL), 0);
	CHECK(cuStreamSynchronize(s), 0);
	return NULL;
}

static void scenario(int loops, int threads)
{
	CUdeviceptr a, b, c, pitched, managed, async_p, pool_p, va, bogus;
	CUmemGenericAllocationHandle h1, h2;
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CUlaunchAttribute cluster = { .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION };
	CUlaunchConfig cfg = { 32, 2, 1, 128, 1, 1, 1024, NULL, NULL, 0 };
	CUmemoryPool pool;
	CUstream s, s2;
	CUevent ev;
	CUgraph g;
	CUgraphExec ge;
	size_t nnodes;
	CUcontext ctx;
	CUkernel missing;
	size_t pitch;
	void *host, *host2;
	char *buf = malloc(2 * MIB);
	int polls = 0, r;

	memset(buf, 7, 2 * MIB);
	CHECK(cuStreamCreate(&s, 0), 0);
	CHECK(cuStreamCreate(&s2, 0), 0);
	CHECK(cuEventCreate(&ev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, 0), 0);

	/* Allocation, every allocator. */
	CHECK(cuMemAlloc_v2(&a, MIB), 0);
	device_alloc(MIB, "cuMemAlloc_v2");
	CHECK(cuMemAlloc_v2(&b, MIB), 0);
	device_alloc(MIB, "cuMemAlloc_v2");
	CHECK(cuMemAlloc_v2(&c, MIB), 0);
	device_alloc(MIB, "cuMemAlloc_v2");
	CHECK(cuMemAllocPitch_v2(&pitched, &pitch, 1000, 64, 4), 0);
	device_alloc((long long)pitch * 64, "cuMemAllocPitch_v2");
	CHECK(cuMemAllocManaged(&managed, 64 * KIB, 1), 0);
	truth_add(1, "alloc:cuMemAllocManaged");
	CHECK(cuMemHostAlloc(&host, 2 * MIB, 0), 0);
	truth_add(1, "alloc:cuMemHostAlloc");
	CHECK(cuMemAllocHost_v2(&host2, 4 * KIB), 0);
	truth_add(1, "alloc:cuMemAllocHost_v2");
	CHECK(cuMemAllocAsync(&async_p, 256 * KIB, s), 0);
	device_alloc(256 * KIB, "cuMemAllocAsync");
	CHECK(cuDeviceGetDefaultMemPool(&pool, 0), 0);
	CHECK(cuMemAllocFromPoolAsync(&pool_p, 128 * KIB, pool, s), 0);
	device_alloc(128 * KIB, "cuMemAllocFromPoolAsync");
	CHECK(cuMemAddressReserve(&va, 8 * MIB, 0, 0, 0), 0);
	CHECK(cuMemCreate(&h1, 2 * MIB, &prop, 0), 0);
	device_alloc(2 * MIB, "cuMemCreate");
	CHECK(cuMemCreate(&h2, 2 * MIB, &prop, 0), 0);
	device_alloc(2 * MIB, "cuMemCreate");
	CHECK(cuMemMap(va, 2 * MIB, 0, h1, 0), 0);
	CHECK(cuMemMap(va + 2 * MIB, 2 * MIB, 0, h2, 0), 0);

	/* Copies and sets, in every direction. */
	CHECK(cuMemcpyHtoD_v2(a, buf, MIB), 0);
	CHECK(cuMemcpyHtoD_v2(a, buf, MIB), 0);
	CHECK(cuMemcpyHtoD_v2_ptds(b, buf, MIB), 0);
	copied("HtoD", 3 * MIB);
	truth_add(2, "copy:HtoD:count");
	CHECK(cuMemcpyHtoD_v2(a, buf, 0), 0); /* a call, no copy (the report: empty) */
	copied("HtoD", 0);
	CHECK(cuMemcpyDtoH_v2(buf, c, MIB), 0);
	copied("DtoH", MIB);
	CHECK(cuMemcpyDtoD_v2(b, a, 512 * KIB), 0);
	copied("DtoD", 512 * KIB);
	CHECK(cuMemcpy(a, (CUdeviceptr)buf, 4 * KIB), 0); /* unified: host to device */
	copied("HtoD", 4 * KIB);
	CHECK(cuMemcpy((CUdeviceptr)buf, a, 8 * KIB), 0); /* unified: device to host */
	copied("DtoH", 8 * KIB);
	CHECK(cuMemcpyAsync(b, (CUdeviceptr)host, 64 * KIB, s), 0);
	copied("HtoD", 64 * KIB);
	CHECK(cuMemcpyHtoDAsync_v2(a, host, 64 * KIB, s), 0);
	copied("HtoD", 64 * KIB);
	CHECK(cuMemcpyDtoHAsync_v2(host, a, 32 * KIB, s), 0);
	copied("DtoH", 32 * KIB);
	/* From page-locked host memory by a device-to-host call (XLA does): host to host. */
	CHECK(cuMemcpyDtoHAsync_v2(host2, (CUdeviceptr)host, 4 * KIB, s), 0);
	copied("HtoH", 4 * KIB);
	CHECK(cuMemcpyPeer(c, ctx, a, ctx, 4 * KIB), 0);
	copied("peer", 4 * KIB);
	{
		CUDA_MEMCPY2D c2 = { .srcMemoryType = CU_MEMORYTYPE_HOST,
				     .srcHost = buf,
				     .srcPitch = 1000,
				     .dstMemoryType = CU_MEMORYTYPE_DEVICE,
				     .dstDevice = pitched,
				     .dstPitch = pitch,
				     .WidthInBytes = 1000,
				     .Height = 64 };
		CUDA_MEMCPY3D c3 = { .srcMemoryType = CU_MEMORYTYPE_DEVICE,
				     .srcDevice = a,
				     .srcPitch = 1000,
				     .srcHeight = 4,
				     .dstMemoryType = CU_MEMORYTYPE_DEVICE,
				     .dstDevice = c,
				     .dstPitch = 1000,
				     .dstHeight = 4,
				     .WidthInBytes = 1000,
				     .Height = 4,
				     .Depth = 2 };

		CHECK(cuMemcpy2D_v2(&c2), 0);
		copied("HtoD", 64000);
		CHECK(cuMemcpy3D_v2(&c3), 0);
		copied("DtoD", 8000);
	}
	CHECK(cuMemsetD8_v2(a, 0, MIB), 0);
	copied("memset", MIB);
	CHECK(cuMemsetD32Async(b, 1, 1024, s), 0);
	copied("memset", 4096);
	CHECK(cuMemsetD2D8_v2(pitched, pitch, 0, 1000, 64), 0);
	copied("memset", 64000);

	/* Launches, every launch API, names from every name source. */
	for (int i = 0; i < 100 * loops; i++) {
		CHECK(cuLaunchKernel((CUfunction)k_add, 1024, 1, 1, 256, 1, 1, 0, s, NULL, NULL),
		      0);
		launch(VECADD, "cuLaunchKernel");
	}
	for (int i = 0; i < 10; i++) {
		CHECK(cuLaunchKernel(f_add, 512, 1, 1, 128, 1, 1, 0, s, NULL, NULL), 0);
		launch(VECADD, "cuLaunchKernel");
	}
	for (int i = 0; i < 20; i++) {
		CHECK(cuLaunchKernel_ptsz((CUfunction)k_scale, 64, 1, 1, 128, 1, 1, 0, NULL, NULL,
					  NULL),
		      0);
		launch(SCALE, "cuLaunchKernel_ptsz");
	}
	cfg.hStream = s;
	for (int i = 0; i < 5; i++) {
		CHECK(cuLaunchKernelEx(&cfg, f_triton, NULL, NULL), 0);
		launch(TRITON, "cuLaunchKernelEx");
	}
	cluster.value.clusterDim.x = 2;
	cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
	cfg.attrs = &cluster;
	cfg.numAttrs = 1;
	CHECK(cuLaunchKernelEx(&cfg, f_triton, NULL, NULL), 0);
	launch(TRITON, "cuLaunchKernelEx");
	/* A kernel whose first launch fails (too many threads a block): the kernel plane reads
	 * the results of a kernel's launches until one succeeds. */
	CHECK(cuLaunchKernel((CUfunction)k_reduce, 8, 1, 1, 2048, 1, 1, 0, s, NULL, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	truth_add(1, "error:cuLaunchKernel:%d", CUDA_ERROR_INVALID_VALUE);
	for (int i = 0; i < 2; i++) {
		CHECK(cuLaunchCooperativeKernel((CUfunction)k_reduce, 8, 1, 1, 256, 1, 1, 0, s,
						NULL),
		      0);
		launch(REDUCE, "cuLaunchCooperativeKernel");
	}
	/* Three launches captured into a graph (recorded, not run), then four replays. */
	CHECK(cuStreamBeginCapture_v2(s2, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
	for (int i = 0; i < 3; i++) {
		CHECK(cuLaunchKernel((CUfunction)k_scale, 8, 1, 1, 32, 1, 1, 0, s2, NULL, NULL), 0);
		launch(SCALE, "cuLaunchKernel");
		truth_add(1, "captured:%s", SCALE);
	}
	/* And a set, recorded too: run (and counted) at each replay, not now. */
	CHECK(cuMemsetD32Async(a, 0, 1024, s2), 0);
	truth_add(1, "copy:memset:count");
	truth_add(4096, "copy:memset:bytes");
	CHECK(cuStreamEndCapture(s2, &g), 0);
	/* Exactly what the program put in: a tracer must add nothing to a capture. */
	CHECK(cuGraphGetNodes(g, NULL, &nnodes), 0);
	CHECK(nnodes, 4);
	CHECK(cuGraphInstantiateWithFlags(&ge, g, 0), 0);
	for (int i = 0; i < 4; i++) {
		CHECK(cuGraphLaunch(ge, s), 0);
		truth_add(1, "graph_launches");
	}

	if (threads) {
		pthread_t tids[16];
		struct thread_arg arg = { 25 * loops };

		for (int t = 0; t < threads && t < 16; t++) {
			CHECK(pthread_create(&tids[t], NULL, thread_main, &arg), 0);
			truth_add(1, "sync:cuStreamSynchronize");
		}
		for (int t = 0; t < threads && t < 16; t++) {
			pthread_join(tids[t], NULL);
			for (int i = 0; i < arg.launches; i++)
				launch(VECADD, "cuLaunchKernel");
		}
	}

	/* Synchronisation. */
	for (int i = 0; i < 3; i++)
		CHECK(cuStreamSynchronize(s), 0);
	truth_add(3, "sync:cuStreamSynchronize");
	CHECK(cuCtxSynchronize(), 0);
	truth_add(1, "sync:cuCtxSynchronize");
	CHECK(cuLaunchKernel((CUfunction)k_add, 4096, 1, 1, 256, 1, 1, 0, s, NULL, NULL), 0);
	launch(VECADD, "cuLaunchKernel");
	CHECK(cuEventRecord(ev, s), 0);
	CHECK(cuEventSynchronize(ev), 0);
	truth_add(1, "sync:cuEventSynchronize");
	CHECK(cuStreamWaitEvent(s2, ev, 0), 0);
	truth_add(1, "sync:cuStreamWaitEvent");
	CHECK(cuLaunchKernel((CUfunction)k_add, 65536, 1, 1, 256, 1, 1, 0, s, NULL, NULL), 0);
	launch(VECADD, "cuLaunchKernel");
	do {
		r = cuStreamQuery(s);
		polls++;
		if (r == CUDA_ERROR_NOT_READY) {
			truth_add(1, "not_ready:cuStreamQuery");
			usleep(100);
		} else
			CHECK(r, 0);
	} while (r == CUDA_ERROR_NOT_READY);
	truth_add(polls, "sync:cuStreamQuery");

	/* Failures: every non-zero result is an event. */
	CHECK(cuMemAlloc_v2(&bogus, 1ULL << 40), CUDA_ERROR_OUT_OF_MEMORY);
	truth_add(1, "error:cuMemAlloc_v2:2");
	CHECK(cuLibraryGetKernel(&missing, lib, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
	truth_add(1, "error:cuLibraryGetKernel:500");
	CHECK(cuMemFree_v2(0xdead0000ULL), CUDA_ERROR_INVALID_VALUE);
	truth_add(1, "error:cuMemFree_v2:1");

	/* Frees; some allocations stay outstanding at exit. */
	CHECK(cuMemFree_v2(a), 0);
	device_free(MIB);
	CHECK(cuMemFree_v2(b), 0);
	device_free(MIB);
	CHECK(cuMemFree_v2(pitched), 0);
	device_free((long long)pitch * 64);
	CHECK(cuMemFreeHost(host2), 0);
	CHECK(cuMemFreeAsync(async_p, s), 0);
	device_free(256 * KIB);
	CHECK(cuMemUnmap(va + 2 * MIB, 2 * MIB), 0);
	CHECK(cuMemRelease(h2), 0);
	device_free(2 * MIB);
	truth_add(MIB + 128 * KIB + 2 * MIB, "outstanding:device"); /* c, pool_p, h1 */
	truth_add(64 * KIB, "outstanding:managed");
	truth_add(2 * MIB, "outstanding:host");
	free(buf);
}

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*copy_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*sync_fn)(void);

/* The ways libraries reach the driver without linking to it. */
static void entry_points(void)
{
	void *self = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	launch_fn by_gpa, by_gpa2, by_gpa2_pt, by_dlsym;
	copy_fn copy;
	sync_fn sync;
	CUdeviceptr d;
	char buf[4096] = { 0 };
	int status = -1;

	if (!self) {
		fprintf(stderr, "wl_driver: libcuda.so.1 is not loaded\n");
		exit(97);
	}
	CHECK(cuGetProcAddress("cuLaunchKernel", (void **)&by_gpa, 12000, 0), 0);
	CHECK(cuGetProcAddress_v2("cuLaunchKernel", (void **)&by_gpa2, 13000, 0, &status), 0);
	CHECK(status, 0);
	CHECK(cuGetProcAddress_v2("cuLaunchKernel", (void **)&by_gpa2_pt, 13000,
				  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL),
	      0);
	CHECK(cuGetProcAddress_v2("cuMemcpyHtoD", (void **)&copy, 13000, 0, NULL), 0);
	CHECK(cuGetProcAddress_v2("cuCtxSynchronize", (void **)&sync, 12000, 0, NULL), 0);
	by_dlsym = (launch_fn)dlsym(self, "cuLaunchKernel");
	if (!by_dlsym)
		exit(97);
	for (int i = 0; i < 3; i++) {
		CHECK(by_gpa((CUfunction)k_scale, 4, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
		launch(SCALE, "cuLaunchKernel");
		CHECK(by_gpa2((CUfunction)k_scale, 4, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
		launch(SCALE, "cuLaunchKernel");
		CHECK(by_gpa2_pt((CUfunction)k_scale, 4, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
		launch(SCALE, "cuLaunchKernel_ptsz");
		CHECK(by_dlsym((CUfunction)k_scale, 4, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
		launch(SCALE, "cuLaunchKernel");
	}
	CHECK(cuMemAlloc_v2(&d, sizeof(buf)), 0);
	device_alloc(sizeof(buf), "cuMemAlloc_v2");
	CHECK(copy(d, buf, sizeof(buf)), 0);
	copied("HtoD", sizeof(buf));
	CHECK(sync(), 0);
	truth_add(1, "sync:cuCtxSynchronize");
	CHECK(cuMemFree_v2(d), 0);
	device_free(sizeof(buf));
	dlclose(self);
}

static CUevent sig_event;
static volatile sig_atomic_t sig_calls, sig_failed;

static void on_alarm(int sig)
{
	int saved = errno;
	CUresult r = cuEventQuery(sig_event);

	(void)sig;
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
		sig_failed = 1;
	/* (Atomic: the handler may run on two threads at once, one of them CUPTI's.) */
	__atomic_fetch_add(&sig_calls, 1, __ATOMIC_RELAXED);
	errno = saved;
}

/* Launches while a signal handler calls into the driver, interrupting whatever runs. */
static void signal_calls(int n)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval every = { { 0, 20 }, { 0, 20 } }, off = { { 0, 0 }, { 0, 0 } };

	CHECK(cuEventCreate(&sig_event, 0), 0);
	CHECK(cuEventRecord(sig_event, NULL), 0);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &every, NULL);
	for (int i = 0; i < n; i++) {
		CHECK(cuLaunchKernel((CUfunction)k_add, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
		launch(VECADD, "cuLaunchKernel");
	}
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN);
	/* (A handler running on another thread then, CUPTI's say, finishes first.) */
	usleep(20000);
	if (sig_failed)
		exit(96);
	truth_add(sig_calls, "sync:cuEventQuery");
	fprintf(stderr, "wl_driver: %d calls from the signal handler\n", (int)sig_calls);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile long long *count_file(const char *path)
{
	long long *p;
	int fd;

	if (!path)
		return NULL;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, sizeof(*p))) {
		perror(path);
		exit(2);
	}
	p = mmap(NULL, sizeof(*p), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		perror(path);
		exit(2);
	}
	return p;
}

struct burst_arg {
	long long n;	      /* 0: no bound */
	double rate, seconds; /* 0: no bound */
	volatile long long *count;
	long long done;
};

static void *burst_thread(void *p)
{
	struct burst_arg *a = p;
	double t0 = now_s();
	long long i = 0;

	while (!a->n || i < a->n) {
		if ((i & 1023) == 0 && (a->rate > 0 || a->seconds > 0)) {
			double t = now_s() - t0;

			if (a->seconds > 0 && t >= a->seconds)
				break;
			if (a->rate > 0 && (double)i > a->rate * t)
				usleep((useconds_t)(((double)i / a->rate - t) * 1e6));
		}
		CHECK(cuLaunchKernel((CUfunction)k_add, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
		i++;
		if (a->count)
			__atomic_add_fetch(a->count, 1, __ATOMIC_RELEASE);
	}
	a->done = i;
	return NULL;
}

/* n launches (0: no bound) or seconds of them, at most rate a second (0: no bound), by
 * `threads` threads (0: this one) sharing them, at once or one after another (serial). */
static void burst(long long n, double rate, double seconds, const char *count_path, int threads,
		  bool serial)
{
	struct burst_arg a[16];
	pthread_t tids[16];
	int k = threads < 1 ? 1 : threads > 16 ? 16 : threads;
	double t0 = now_s();
	long long total = 0;

	for (int t = 0; t < k; t++) {
		a[t] = (struct burst_arg){ .n = n / k + (t < n % k),
					   .rate = rate / k,
					   .seconds = seconds };
		a[t].count = t ? a[0].count : count_file(count_path);
	}
	if (threads < 1) {
		burst_thread(&a[0]);
	} else {
		for (int t = 0; t < k; t++) {
			CHECK(pthread_create(&tids[t], NULL, burst_thread, &a[t]), 0);
			if (serial)
				pthread_join(tids[t], NULL);
		}
		for (int t = 0; t < k && !serial; t++)
			pthread_join(tids[t], NULL);
	}
	for (int t = 0; t < k; t++)
		total += a[t].done;
	truth_add(total, "launch:%s", VECADD);
	truth_add(total, "launches");
	fprintf(stderr, "wl_driver: %lld launches in %.3f s\n", total, now_s() - t0);
}

static void kinds(int k, int n, bool via_kernel)
{
	enum {
		PER_MODULE = 60
	};
	CUfunction *f = calloc((size_t)k, sizeof(*f));
	CUkernel *kern = calloc((size_t)k, sizeof(*kern));
	char *ptx = malloc(64 + PER_MODULE * 64), name[32];
	CUmodule mod = NULL;
	CUlibrary l = NULL;

	if (!f || !kern || !ptx)
		exit(1);
	for (int i = 0; i < k; i++) {
		if (i % PER_MODULE == 0) {
			int len = sprintf(ptx, ".version 8.0\n.target sm_90\n.address_size 64\n");

			for (int j = i; j < i + PER_MODULE && j < k; j++)
				len += sprintf(
					ptx + len,
					".visible .entry kind_%03d(\n.param .u64 a)\n{ ret; }\n",
					j);
			if (via_kernel)
				CHECK(cuLibraryLoadData(&l, ptx, NULL, NULL, 0, NULL, NULL, 0), 0);
			else
				CHECK(cuModuleLoadData(&mod, ptx), 0);
		}
		snprintf(name, sizeof(name), "kind_%03d", i);
		if (via_kernel)
			CHECK(cuLibraryGetKernel(&kern[i], l, name), 0);
		else
			CHECK(cuModuleGetFunction(&f[i], mod, name), 0);
	}
	for (int r = 0; r < n; r++)
		for (int i = 0; i < k; i++) {
			if (via_kernel)
				CHECK(cuKernelGetFunction(&f[i], kern[i]), 0);
			CHECK(cuLaunchKernel(f[i], 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
		}
	for (int i = 0; i < k; i++) {
		truth_add(n, "launch:kind_%03d", i);
		truth_add(n, "launch_api:cuLaunchKernel");
		truth_add(n, "launches");
	}
	CHECK(cuCtxSynchronize(), 0);
	truth_add(1, "sync:cuCtxSynchronize");
	free(ptx);
	free(kern);
	free(f);
}

/* --early-graph N: the graph made before the gate (early_graph_make), launched after. */
static CUgraphExec early_exec;

static void early_graph_make(void)
{
	CUstream s;
	CUgraph g;

	CHECK(cuStreamCreate(&s, 0), 0);
	CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
	for (int i = 0; i < 3; i++)
		CHECK(cuLaunchKernel((CUfunction)k_scale, 8, 1, 1, 32, 1, 1, 0, s, NULL, NULL), 0);
	CHECK(cuStreamEndCapture(s, &g), 0);
	CHECK(cuGraphInstantiateWithFlags(&early_exec, g, 0), 0);
}

static void early_graph_run(int n)
{
	for (int i = 0; i < n; i++) {
		CHECK(cuGraphLaunch(early_exec, NULL), 0);
		truth_add(1, "graph_launches");
		truth_add(3, "graph_runs:%s", SCALE);
	}
	CHECK(cuCtxSynchronize(), 0);
	truth_add(1, "sync:cuCtxSynchronize");
}

static void kfunc(int n)
{
	CUcontext c[2];
	CUfunction f, fs[2];

	CHECK(cuDevicePrimaryCtxRetain(&c[0], 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&c[1], 1), 0);
	for (int phase = 0; phase < 3; phase++)
		for (int i = 0; i < n; i++) {
			CHECK(cuCtxSetCurrent(c[phase == 2 ? i & 1 : phase]), 0);
			CHECK(cuKernelGetFunction(&f, k_add), 0);
			CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
			launch(VECADD, "cuLaunchKernel");
		}
	for (int d = 0; d < 2; d++) {
		CHECK(cuCtxSetCurrent(c[d]), 0);
		CHECK(cuKernelGetFunction(&fs[d], k_scale), 0);
	}
	for (int i = 0; i < 2 * n; i++) {
		CHECK(cuCtxSetCurrent(c[i & 1]), 0);
		CHECK(cuLaunchKernel(fs[i & 1], 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
		launch(SCALE, "cuLaunchKernel");
	}
	CHECK(cuCtxSetCurrent(c[0]), 0);
	for (int i = 0; i < n; i++) {
		volatile CUfunction place;

		CHECK(cuKernelGetFunction((CUfunction *)&place, k_add), 0);
		place = (CUfunction)(uintptr_t)(0x5eed0000 + i);
		CHECK(cuLaunchKernel(f_triton, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
		launch(TRITON, "cuLaunchKernel");
	}
	CHECK(cuCtxSynchronize(), 0);
	truth_add(1, "sync:cuCtxSynchronize");
}

static void sets(int n)
{
	CUdeviceptr b;
	CUstream s;

	CHECK(cuMemAlloc_v2(&b, 4096), 0);
	device_alloc(4096, "cuMemAlloc_v2");
	CHECK(cuStreamCreate(&s, 0), 0);
	for (int i = 0; i < 3; i++)
		CHECK(cuMemsetD32Async(0, 1, 16, s), CUDA_ERROR_INVALID_VALUE);
	for (int i = 0; i < n; i++) {
		if (i & 1)
			CHECK(cuMemsetD32Async_ptsz(b, (unsigned)i, 1024, s), 0);
		else
			CHECK(cuMemsetD32Async(b, (unsigned)i, 1024, s), 0);
		copied("memset", 4096);
	}
	for (int i = 0; i < 3; i++)
		CHECK(cuMemsetD32Async(0, 1, 16, s), CUDA_ERROR_INVALID_VALUE);
	CHECK(cuCtxSynchronize(), 0);
	truth_add(1, "sync:cuCtxSynchronize");
}

static void kfunc_reload(void)
{
	static const char *const ptx[] = {
		".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry kOld()\n{ ret; }\n",
		".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry kNew()\n{ ret; }\n"
	};
	static const char *const names[] = { "kOld", "kNew" };
	CUfunction f[2];

	for (int i = 0; i < 2; i++) {
		CUlibrary lib;
		CUkernel k;

		CHECK(cuLibraryLoadData(&lib, ptx[i], NULL, NULL, 0, NULL, NULL, 0), 0);
		CHECK(cuLibraryGetKernel(&k, lib, names[i]), 0);
		for (int j = 0; j < 3 + 2 * i; j++) {
			CHECK(cuKernelGetFunction(&f[i], k), 0);
			CHECK(cuLaunchKernel(f[i], 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
			launch(names[i], "cuLaunchKernel");
		}
		CHECK(cuCtxSynchronize(), 0);
		truth_add(1, "sync:cuCtxSynchronize");
		CHECK(cuLibraryUnload(lib), 0);
	}
	if (f[0] != f[1]) {
		fprintf(stderr, "wl_driver: the driver did not reuse the handle\n");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	int loops = 1, threads = 0, nfork = 0, nsignal = 0, nkfunc = 0, nkinds = 0, nrounds = 0,
	    nearly = 0;
	bool kinds_via_kernel = false;
	long long nburst = 0;
	double rate = 0, seconds = 0;
	bool exec_child = false, is_mini = false, gpa = false, reload = false, serial = false;
	int nsets = 0;
	const char *wait = NULL, *count = NULL, *linger = NULL;
	pid_t kids[64];
	int nkids = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--loops") && i + 1 < argc)
			loops = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--serial"))
			serial = true;
		else if (!strcmp(argv[i], "--fork") && i + 1 < argc)
			nfork = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--burst") && i + 1 < argc)
			nburst = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			rate = atof(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--count") && i + 1 < argc)
			count = argv[++i];
		else if (!strcmp(argv[i], "--linger") && i + 1 < argc)
			linger = argv[++i];
		else if (!strcmp(argv[i], "--wait") && i + 1 < argc)
			wait = argv[++i];
		else if (!strcmp(argv[i], "--signal") && i + 1 < argc)
			nsignal = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--entry-points"))
			gpa = true;
		else if (!strcmp(argv[i], "--exec-child"))
			exec_child = true;
		else if (!strcmp(argv[i], "--mini"))
			is_mini = true;
		else if (!strcmp(argv[i], "--note") && i + 1 < argc)
			i++;
		else if (!strcmp(argv[i], "--early-graph") && i + 1 < argc)
			nearly = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--sets") && i + 1 < argc)
			nsets = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--kfunc-reload"))
			reload = true;
		else if (!strcmp(argv[i], "--kfunc") && i + 1 < argc)
			nkfunc = atoi(argv[++i]);
		else if ((!strcmp(argv[i], "--kinds") || !strcmp(argv[i], "--kfunc-kinds")) &&
			 i + 2 < argc) {
			kinds_via_kernel = !strcmp(argv[i], "--kfunc-kinds");
			nkinds = atoi(argv[++i]);
			nrounds = atoi(argv[++i]);
		} else {
			fprintf(stderr, "wl_driver: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	if (is_mini) {
		mini();
		return 0;
	}
	/* Children first, before this process touches CUDA (as CUDA requires). */
	for (int i = 0; i < nfork && nkids < 64; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			unsetenv("GS_TRUTH");
			mini();
			_exit(0);
		}
		kids[nkids++] = pid;
	}
	if (exec_child) {
		pid_t pid = fork();

		if (pid == 0) {
			unsetenv("GS_TRUTH");
			execl("/proc/self/exe", argv[0], "--mini", (char *)NULL);
			_exit(127);
		}
		kids[nkids++] = pid;
	}
	/* Each child's mini scenario, counted here. */
	for (int i = 0; i < nkids; i++) {
		truth_add(7, "launch:%s", VECADD);
		truth_add(7, "launch_api:cuLaunchKernel");
		truth_add(7, "launches");
		truth_add(1, "alloc:cuMemAlloc_v2");
		truth_add(MIB, "outstanding:device");
		truth_add(1, "sync:cuCtxSynchronize");
		truth_add(1, "processes");
	}
	truth_add(1, "processes");
	init_names();
	if (nearly)
		early_graph_make();
	if (wait)
		wait_gate(wait);
	if (nearly)
		early_graph_run(nearly);
	else if (nkfunc)
		kfunc(nkfunc);
	else if (reload)
		kfunc_reload();
	else if (nsets)
		sets(nsets);
	else if (nkinds > 0)
		kinds(nkinds, nrounds, kinds_via_kernel);
	else if (nburst || seconds > 0)
		burst(nburst, rate, seconds, count, threads, serial);
	else
		scenario(loops, threads);
	if (gpa)
		entry_points();
	if (nsignal)
		signal_calls(nsignal);
	if (wait) {
		char done[4096];
		FILE *f;

		snprintf(done, sizeof(done), "%s.done", wait);
		f = fopen(done, "w");
		if (f)
			fclose(f);
	}
	for (int i = 0; i < nkids; i++) {
		int st;

		if (waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "wl_driver: child %d failed\n", (int)kids[i]);
			return 97;
		}
	}
	truth_write();
	for (int i = 0; linger && i < 12000 && access(linger, F_OK) != 0; i++)
		usleep(10000);
	return 0;
}
