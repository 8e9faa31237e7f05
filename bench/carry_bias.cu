// SPDX-License-Identifier: MIT
/*
 * What a carrier's events read beyond the kernel between them (src/inject/gputime_carry.c),
 * and what it depends on. On an H200 PyTorch's kernels read 3-4 us more between a
 * carrier's events than CUPTI has them, where a gated pair reads 2.4 us more, and our
 * calibration kernel in a carrier set before each run reads no more than in a pair
 * (bench/results/carry-2026-11-27-h200.md). Here a kernel that spins NS by %globaltimer
 * and writes its span runs in a carrier [event node, kernel node, event node] launched on
 * an idle stream (each run waited for, then 20 us of nothing); the excess is what the
 * events read less that span. Per kernel (its parameters 16 bytes, 1 KiB or 4 KiB; 1 block
 * or 1,024 blocks of 128 threads; NS 1,000 or 20,000) and per way of running it:
 *   still     the carrier launched again, its node not set since the first
 *   set       its node set before each run to the same values
 *   setv      set to other values each run (the output pointer alternating)
 *   switch    set to another kernel (of 16-byte parameters) and back, in turn
 *   stream    no carrier: the kernel launched between two events on the stream (ungated:
 *             the first event completes before the launch is submitted)
 *   kern      set each run by the kernel's CUkernel handle (kern, ctx; func NULL; as a
 *             CUkernel in func the driver refuses it: CUDA_ERROR_INVALID_VALUE)
 *   gated     no carrier: a gated pair (cuStreamWaitValue32 on host memory, opened after
 *             the end event is recorded), as the in-process plane times a launch
 *   setall    set, every byte of the parameters other each run
 *   pool      set, each run on the next of 64 carriers in turn (as the plane's pool)
 *   poolall   both
 *   pool_paced2, pool_paced8   set, on the next carrier, launched 2 or 8 us after the one
 *             before without waiting (as a launch-bound loop does), read every 64
 *   gated_paced2, gated_paced8 the same with gated pairs
 * (and a kernel "write" whose every thread also writes a float of device memory: 128 or
 * 131,072 of them; not setall, poolall)
 *   gridsw, gated_gridsw   set, the grid one block different every other run; a gated
 *             pair the same
 *   tmpl16, tmpl4k   set, on a carrier instantiated with another kernel (of 16-byte or
 *             4 KiB parameters), as the plane's carriers are made with a kernel of its own
 * median excess ns over RUNS runs.
 *
 *   nvcc -O2 -arch=sm_90 carry_bias.cu -o carry_bias -lcuda
 *   ./carry_bias [RUNS] [legacy]      (legacy: on the legacy default stream, as PyTorch
 *                                      launches by default; else a non-blocking stream)
 * Prints one JSON object.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>

#include "bench.cuh" /* CK() */

template <int B> struct pad {
	unsigned char b[B];
};

__device__ unsigned long long gtimer()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* Every thread adds 1 to its float of buf (its parameter bytes hold the pointer), then
 * as spin. */
__global__ void spinw(unsigned long long *out, unsigned long long ns, float *buf)
{
	buf[blockIdx.x * blockDim.x + threadIdx.x] += 1.0f;
	if (threadIdx.x || blockIdx.x)
		return;
	unsigned long long t0 = gtimer(), t1;
	do
		t1 = gtimer();
	while (t1 - t0 < ns);
	out[0] = t0;
	out[1] = t1;
}

template <int B>
__global__ void spin(unsigned long long *out, unsigned long long ns, pad<B> p)
{
	if (threadIdx.x || blockIdx.x)
		return;
	unsigned long long t0 = gtimer(), t1;
	do
		t1 = gtimer();
	while (t1 - t0 < ns);
	out[0] = t0 + p.b[0] * 0;
	out[1] = t1;
}

static double now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void pause_us(double us)
{
	double t = now_ns() + us * 1000;
	while (now_ns() < t)
		;
}

static double median(std::vector<double> v)
{
	if (v.empty())
		return -1;
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

struct kern {
	CUfunction f;
	const char *name;
	int bytes;
	CUkernel k;
};

static unsigned long long *host_out; /* mapped: a span per slot (16 bytes), slots 0-63 */
static CUdeviceptr dev_out;
static unsigned char params_buf[4096];

/* Node parameters for kernel k writing to slot (0 or 1), spinning ns. */
static void node_of(CUDA_KERNEL_NODE_PARAMS *p, const kern &k, int slot, unsigned long long *ns,
		    CUdeviceptr *out, void **args, unsigned grid)
{
	*out = dev_out + 16 * slot;
	args[0] = out;
	args[1] = ns;
	args[2] = params_buf;
	*p = CUDA_KERNEL_NODE_PARAMS{};
	p->func = k.f;
	p->gridDimX = grid;
	p->gridDimY = p->gridDimZ = 1;
	p->blockDimX = 128;
	p->blockDimY = p->blockDimZ = 1;
	p->kernelParams = args;
}

struct carrier {
	CUgraphExec exec;
	CUgraphNode node;
	CUevent ev[2];
};

#define POOL 64

/*
 * p's kernel launched between two events (ev) on s, behind a gate (gated: a wait on the
 * host word after the spans, opened once the end event is recorded, as the in-process
 * plane's gate) or not.
 */
static void pair_launch(CUstream s, const CUDA_KERNEL_NODE_PARAMS *p, CUevent *ev, bool gated)
{
	static unsigned seq;
	volatile unsigned *gate = (volatile unsigned *)(host_out + 2 * POOL);

	if (gated)
		CK(cuStreamWaitValue32(s, dev_out + 16 * POOL, ++seq, CU_STREAM_WAIT_VALUE_GEQ));
	CK(cuEventRecord(ev[0], s));
	CK(cuLaunchKernel(p->func, p->gridDimX, 1, 1, p->blockDimX, 1, 1, 0, s, p->kernelParams,
			  NULL));
	CK(cuEventRecord(ev[1], s));
	if (gated)
		*gate = seq;
}

/* A carrier of p's kernel, its events its own, uploaded on s. */
static void carrier_make(carrier *c, const CUDA_KERNEL_NODE_PARAMS *p, CUstream s)
{
	CUgraph g;
	CUgraphNode a, b;

	CK(cuEventCreate(&c->ev[0], 0));
	CK(cuEventCreate(&c->ev[1], 0));
	CK(cuGraphCreate(&g, 0));
	CK(cuGraphAddEventRecordNode(&a, g, NULL, 0, c->ev[0]));
	CK(cuGraphAddKernelNode(&c->node, g, &a, 1, p));
	CK(cuGraphAddEventRecordNode(&b, g, &c->node, 1, c->ev[1]));
	CK(cuGraphInstantiate(&c->exec, g, 0));
	CK(cuGraphUpload(c->exec, s));
}

/* Once s has run a launch between ev: what they read less the span its kernel wrote into
 * slot; then 20 us of nothing (the stream idle at the next launch). */
static double waited_excess(CUstream s, const CUevent *ev, int slot)
{
	const unsigned long long *o = host_out + 2 * slot;
	float ms;

	CK(cuStreamSynchronize(s));
	CK(cuEventElapsedTime(&ms, ev[0], ev[1]));
	pause_us(20);
	return ms * 1e6 - (double)(o[1] - o[0]);
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 200;
	CUcontext ctx;
	CUstream s;
	cudaFunction_t f16, f1k, f4k;
	cudaKernel_t k16, k1k, k4k;
	static const char *ways[] = { "still", "set",	  "setv",   "switch", "stream",
				      "kern",  "gated", "setall", "pool",	"poolall",
				      "pool_paced2", "pool_paced8", "gated_paced2", "gated_paced8",
				      "tmpl16", "tmpl4k", "gridsw", "gated_gridsw" };
	static carrier pool[POOL];

	cudaFree(0);
	CK(cuCtxGetCurrent(&ctx));
	if (argc > 2 && !strcmp(argv[2], "legacy"))
		s = CU_STREAM_LEGACY;
	else
		CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuMemHostAlloc((void **)&host_out, 16 * POOL + 64, CU_MEMHOSTALLOC_DEVICEMAP));
	CK(cuMemHostGetDevicePointer(&dev_out, host_out, 0));
	*(volatile unsigned *)(host_out + 2 * POOL) = 0;
	cudaGetFuncBySymbol(&f16, (const void *)spin<16>);
	cudaGetFuncBySymbol(&f1k, (const void *)spin<1024>);
	cudaGetFuncBySymbol(&f4k, (const void *)spin<4000>);
	cudaGetKernel(&k16, (const void *)spin<16>);
	cudaGetKernel(&k1k, (const void *)spin<1024>);
	cudaGetKernel(&k4k, (const void *)spin<4000>);
	cudaFunction_t fw;
	cudaKernel_t kw;
	CUdeviceptr dbuf;

	cudaGetFuncBySymbol(&fw, (const void *)spinw);
	cudaGetKernel(&kw, (const void *)spinw);
	CK(cuMemAlloc(&dbuf, 1024 * 128 * sizeof(float)));
	kern ks[] = { { (CUfunction)f16, "16B", 16, (CUkernel)k16 },
		      { (CUfunction)f1k, "1KiB", 1024, (CUkernel)k1k },
		      { (CUfunction)f4k, "4KiB", 4000, (CUkernel)k4k },
		      { (CUfunction)fw, "write", 8, (CUkernel)kw } };
	printf("{\"runs\": %d, \"excess_ns\": {", runs);
	bool first = true;
	for (const kern &k : ks)
		for (unsigned grid : { 1u, 1024u })
			for (unsigned long long ns : { 1000ull, 20000ull }) {
				unsigned long long nsv = ns, ns16 = ns;
				CUdeviceptr out, out16;
				void *args[3], *args16[3];
				CUDA_KERNEL_NODE_PARAMS p, p16;
				bool write = k.bytes == 8;

				/* (write's buffer: the first 8 bytes of the parameters) */
				memset(params_buf, 0, sizeof(params_buf));
				if (write)
					memcpy(params_buf, &dbuf, sizeof(dbuf));

				node_of(&p, k, 0, &nsv, &out, args, grid);
				for (carrier &c : pool)
					carrier_make(&c, &p, s);
				for (int w = 0; w < 10; w++) {
					std::vector<double> ex;


					CK(cuGraphExecKernelNodeSetParams(pool[0].exec, pool[0].node, &p));
					for (int i = 0; i < runs + 10; i++) {
						int slot = w == 2 ? i & 1 : 0;
						carrier &c = w >= 8 ? pool[i % POOL] : pool[0];
						CUevent *ev = w == 4 || w == 6 ? pool[0].ev : c.ev;

						if (write && (w == 7 || w == 9))
							break; /* (its pointer) */
						if (w == 7 || w == 9)
							memset(params_buf, i, sizeof(params_buf));
						node_of(&p, k, slot, &nsv, &out, args, grid);
						if (w == 5) {
							p.func = NULL;
							p.kern = k.k;
							p.ctx = ctx;
						}
						if (w == 3 && (i & 1)) {
							node_of(&p16, ks[0], 0, &ns16, &out16, args16,
								grid);
							CK(cuGraphExecKernelNodeSetParams(c.exec, c.node,
											  &p16));
						} else if (w >= 1 && w != 4 && w != 6) {
							CK(cuGraphExecKernelNodeSetParams(c.exec, c.node,
											  &p));
						}
						if (w == 4 || w == 6) {
							pair_launch(s, &p, ev, w == 6);
						} else {
							CK(cuGraphLaunch(c.exec, s));
						}
						double e = waited_excess(s, ev, slot);

						/* (switch: the runs of k, each set back to it) */
						if (i >= 10 && (w != 3 || !(i & 1)))
							ex.push_back(e);
					}
					printf("%s\"%s/%u/%llu/%s\": %.0f", first ? "" : ", ", k.name, grid,
					       ns, ways[w], median(ex));
					first = false;
				}
				/* Paced: launches PACE us apart (spinning), not waited for, each on
				 * the next carrier (or a gated pair with the next carrier's events),
				 * its own span slot; read every POOL launches. */
				for (int w = 10; w < 14; w++) {
					std::vector<double> ex;
					double pace = w % 2 ? 8 : 2;
					bool gated = w >= 12;

					for (int i = 0; i < runs + POOL; i++) {
						carrier &c = pool[i % POOL];

						node_of(&p, k, i % POOL, &nsv, &out, args, grid);
						if (gated) {
							pair_launch(s, &p, c.ev, true);
						} else {
							CK(cuGraphExecKernelNodeSetParams(c.exec, c.node,
											  &p));
							CK(cuGraphLaunch(c.exec, s));
						}
						pause_us(pace);
						if (i % POOL != POOL - 1)
							continue;
						CK(cuStreamSynchronize(s));
						for (int j = 0; j < POOL && i >= POOL; j++) {
							unsigned long long *o = host_out + 2 * j;
							float ms;

							CK(cuEventElapsedTime(&ms, pool[j].ev[0],
									      pool[j].ev[1]));
							ex.push_back(ms * 1e6 - (double)(o[1] - o[0]));
						}
						pause_us(20);
					}
					printf(", \"%s/%u/%llu/%s\": %.0f", k.name, grid, ns, ways[w],
					       median(ex));
				}
				/* A carrier instantiated with another kernel (16-byte or 4 KiB
				 * parameters), set to this one before each run, waited for. */
				for (int w = 14; w < 16; w++) {
					std::vector<double> ex;
					carrier t;
					CUDA_KERNEL_NODE_PARAMS pt;
					CUdeviceptr outt;
					void *argst[3];
					unsigned long long nst = ns;

					node_of(&pt, ks[w == 14 ? 0 : 2], 0, &nst, &outt, argst, grid);
					carrier_make(&t, &pt, s);
					for (int i = 0; i < runs + 10; i++) {

						node_of(&p, k, 0, &nsv, &out, args, grid);
						CK(cuGraphExecKernelNodeSetParams(t.exec, t.node, &p));
						CK(cuGraphLaunch(t.exec, s));
						double e = waited_excess(s, t.ev, 0);

						if (i >= 10)
							ex.push_back(e);
					}
					printf(", \"%s/%u/%llu/%s\": %.0f", k.name, grid, ns, ways[w],
					       median(ex));
					CK(cuGraphExecDestroy(t.exec));
				}
				/* The grid changed each run (grid, then one block more or less), on
				 * the carrier set before each run, or a gated pair; waited for. */
				for (int w = 16; w < 18; w++) {
					std::vector<double> ex;
					carrier &c = pool[0];

					for (int i = 0; i < runs + 10; i++) {
						unsigned gi = i & 1 ? (grid > 1 ? grid - 1 : 2) : grid;

						node_of(&p, k, 0, &nsv, &out, args, gi);
						if (w == 16) {
							CK(cuGraphExecKernelNodeSetParams(c.exec, c.node,
											  &p));
							CK(cuGraphLaunch(c.exec, s));
						} else {
							pair_launch(s, &p, c.ev, true);
						}
						double e = waited_excess(s, c.ev, 0);

						if (i >= 10)
							ex.push_back(e);
					}
					printf(", \"%s/%u/%llu/%s\": %.0f", k.name, grid, ns, ways[w],
					       median(ex));
				}
				for (carrier &c : pool) {
					CK(cuGraphExecDestroy(c.exec));
					CK(cuEventDestroy(c.ev[0]));
					CK(cuEventDestroy(c.ev[1]));
				}
			}
	printf("}}\n");
	return 0;
}
