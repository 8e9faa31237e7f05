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
 * argv[3] "graphs" adds, before the synchronisation, kernel nodes and modules from files:
 *   vadd: captured from a stream x1; cuGraphAddKernelNode_v2 with its function x1, with
 *         the CUkernel x1, and (CUDA 11's) cuGraphAddKernelNode x1; set again with
 *         cuGraphKernelNodeSetParams_v2 x1 and, instantiated, cuGraphExecKernelNodeSetParams_v2
 *         x1; the graph launched twice; from cuModuleLoad(FILE) x1 and
 *         cuLibraryLoadFromFile(FILE) x1
 *   noargs: cuGraphAddNode_v2 x1, cuGraphNodeSetParams x1, cuGraphExecNodeSetParams x1
 *         (the node calls count as launches: 14 + 11)
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
CUresult cuStreamCreate(CUstream *out, unsigned int flags);
CUresult cuKernelGetFunction(CUfunction *out, CUkernel k);

/* Kernel nodes and modules from files: 11 more launches (see above). */
static void graphs(const char *path, CUfunction vadd, CUkernel kk, CUfunction noargs, void **params,
		   unsigned int block)
{
	CUDA_KERNEL_NODE_PARAMS kp = { .func = vadd,
				       .gridDimX = 2,
				       .gridDimY = 1,
				       .gridDimZ = 1,
				       .blockDimX = block,
				       .blockDimY = 1,
				       .blockDimZ = 1,
				       .kernelParams = params };
	CUgraphNodeParams np = { .type = 0 };
	CUgraph g, cap;
	CUgraphExec e;
	CUgraphNode n1, n2, n3, n4;
	CUstream s;
	CUmodule m;
	CUlibrary lib;
	CUfunction f;
	CUkernel k;

	CHECK(cuStreamCreate(&s, 0), 0);
	CHECK(cuStreamBeginCapture_v2(s, 0), 0);
	CHECK(cuLaunchKernel(vadd, 2, 1, 1, block, 1, 1, 0, s, params, NULL), 0);
	CHECK(cuStreamEndCapture(s, &cap), 0);
	CHECK(cuGraphCreate(&g, 0), 0);
	CHECK(cuGraphAddKernelNode_v2(&n1, g, NULL, 0, &kp), 0);
	kp.func = NULL;
	kp.kern = kk;
	CHECK(cuGraphAddKernelNode_v2(&n2, g, NULL, 0, &kp), 0);
	kp.func = vadd;
	kp.kern = NULL;
	CHECK(cuGraphAddKernelNode(&n3, g, NULL, 0, &kp), 0);
	CHECK(cuGraphKernelNodeSetParams_v2(n1, &kp), 0);
	np.kernel = (CUDA_KERNEL_NODE_PARAMS){ .func = noargs,
					       .gridDimX = 1,
					       .gridDimY = 1,
					       .gridDimZ = 1,
					       .blockDimX = 32,
					       .blockDimY = 1,
					       .blockDimZ = 1 };
	CHECK(cuGraphAddNode_v2(&n4, g, NULL, NULL, 0, &np), 0);
	CHECK(cuGraphNodeSetParams(n4, &np), 0);
	CHECK(cuGraphInstantiateWithFlags(&e, g, 0), 0);
	CHECK(cuGraphExecKernelNodeSetParams_v2(e, n1, &kp), 0);
	CHECK(cuGraphExecNodeSetParams(e, n4, &np), 0);
	for (int i = 0; i < 2; i++)
		CHECK(cuGraphLaunch(e, s), 0);
	CHECK(cuModuleLoad(&m, path), 0);
	CHECK(cuModuleGetFunction(&f, m, "vadd"), 0);
	CHECK(cuLaunchKernel(f, 2, 1, 1, block, 1, 1, 0, NULL, params, NULL), 0);
	CHECK(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0), 0);
	CHECK(cuLibraryGetKernel(&k, lib, "vadd"), 0);
	CHECK(cuLaunchKernel((CUfunction)k, 2, 1, 1, block, 1, 1, 0, NULL, params, NULL), 0);
	CHECK(cuStreamSynchronize(s), 0);
}

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
		fprintf(stderr, "usage: wl_probe FILE.ptx [BLOCK [graphs]]\n");
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
	if (argc > 3 && !strcmp(argv[3], "graphs")) {
		CHECK(cuModuleGetFunction(&noargs, mod, "noargs"), 0); /* (the module's again) */
		graphs(argv[1], vadd, kk, noargs, params, block);
	}
	CHECK(cuCtxSynchronize(), 0);
	truth_add(argc > 3 && !strcmp(argv[3], "graphs") ? 25 : 14, "launches");
	truth_write();
	return 0;
}
