// SPDX-License-Identifier: MIT
/*
 * CUDA graphs built with the graph API, as XLA builds them (no stream capture): kernel nodes
 * (by CUfunction, by CUkernel, through cuGraphAddNode), a child graph (through
 * cuGraphAddNode), an instantiated graph's node set to another kernel, a graph's node set and the instantiated graph updated
 * from it, a node of it disabled and enabled again (cuGraphNodeSetEnabled), a clone, and a
 * graph with a conditional node. Each graph launch runs what the
 * instantiated graph held then; the truth counts each kernel's runs. With `limit`, a graph
 * past what gpuscope keeps (see limit()). Then XLA's traced command buffer (traced()), and
 * a module unloaded and its function's handle given to the next module's function (XLA's
 * autotuning does it): each keeps its launches.
 *
 *     wl_graphapi [limit]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl_cuda.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry kA(.param .u64 a)\n{ ret; }\n"
			  ".visible .entry kB(.param .u64 a)\n{ ret; }\n"
			  ".visible .entry kC(.param .u64 a)\n{ ret; }\n";

static CUDA_KERNEL_NODE_PARAMS params(CUkernel k, int by_kernel)
{
	CUDA_KERNEL_NODE_PARAMS p;

	memset(&p, 0, sizeof(p));
	if (by_kernel)
		p.kern = k;
	else
		p.func = (CUfunction)k;
	p.gridDimX = p.gridDimY = p.gridDimZ = 1;
	p.blockDimX = 32;
	p.blockDimY = p.blockDimZ = 1;
	return p;
}

static void launch(CUgraphExec e, int n, long long a, long long b, long long c)
{
	for (int i = 0; i < n; i++)
		CHECK(cuGraphLaunch(e, NULL), 0);
	truth_add(n, "graph_launches");
	truth_add(n * a, "graph_runs:kA");
	truth_add(n * b, "graph_runs:kB");
	truth_add(n * c, "graph_runs:kC");
}

/* `limit`: a graph of 2^20 + 10 kernel nodes, instantiated and launched once: past
 * gpuscope's 2^20 kept nodes a process, 10 of the graph's and all of its copy's (the 2^20
 * it kept) are lost (said), and no run is counted. */
static int limit(CUkernel ka)
{
	CUDA_KERNEL_NODE_PARAMS p = params(ka, 0);
	CUgraph g;
	CUgraphExec e;
	CUgraphNode n;

	CHECK(cuGraphCreate(&g, 0), 0);
	for (int i = 0; i < (1 << 20) + 10; i++)
		CHECK(cuGraphAddKernelNode_v2(&n, g, NULL, 0, &p), 0);
	CHECK(cuGraphInstantiateWithFlags(&e, g, 0), 0);
	CHECK(cuGraphLaunch(e, NULL), 0);
	CHECK(cuCtxSynchronize(), 0);
	truth_add(1, "graph_launches");
	truth_add(10 + (1 << 20), "graph_nodes_lost"); /* (the copy: what the graph kept) */
	truth_write();
	printf("wl_graphapi: 1 graph launch\n");
	return 0;
}

/* XLA's traced command buffer: launches captured into a graph the program made
 * (cuStreamBeginCaptureToGraph), that graph a child node of the command buffer's graph;
 * at a later step a new trace is set as the instantiated graph's child node. */
static void traced(CUkernel ka, CUkernel kb, CUkernel kc)
{
	CUDA_KERNEL_NODE_PARAMS p = params(kb, 1);
	CUgraph cb, t1, t2, out;
	CUgraphExec e;
	CUgraphNode n, child;
	CUstream st;

	CHECK(cuStreamCreate(&st, 0), 0);
	CHECK(cuGraphCreate(&cb, 0), 0);
	CHECK(cuGraphCreate(&t1, 0), 0);
	CHECK(cuStreamBeginCaptureToGraph(st, t1, NULL, NULL, 0, 1), 0);
	CHECK(cuLaunchKernel((CUfunction)ka, 1, 1, 1, 32, 1, 1, 0, st, NULL, NULL), 0);
	CHECK(cuStreamEndCapture(st, &out), 0);
	CHECK(out == t1, 1);
	truth_add(1, "launch:kA");
	truth_add(1, "captured:kA");
	CHECK(cuGraphAddKernelNode_v2(&n, cb, NULL, 0, &p), 0);
	CHECK(cuGraphAddChildGraphNode(&child, cb, NULL, 0, t1), 0);
	CHECK(cuGraphInstantiateWithFlags(&e, cb, 0), 0);
	launch(e, 2, 1, 1, 0);
	CHECK(cuGraphCreate(&t2, 0), 0);
	CHECK(cuStreamBeginCaptureToGraph(st, t2, NULL, NULL, 0, 1), 0);
	for (int i = 0; i < 2; i++)
		CHECK(cuLaunchKernel((CUfunction)kc, 1, 1, 1, 32, 1, 1, 0, st, NULL, NULL), 0);
	CHECK(cuStreamEndCapture(st, &out), 0);
	truth_add(2, "launch:kC");
	truth_add(2, "captured:kC");
	CHECK(cuGraphExecChildGraphNodeSetParams(e, child, t2), 0);
	launch(e, 3, 0, 1, 2);
	CHECK(cuCtxSynchronize(), 0);
	CHECK(cuGraphExecDestroy(e), 0);
}

/* A module's function launched, the module unloaded, another loaded: the driver gives its
 * function the same handle (the double does it every time; so does the real one often). */
static void handle_reused(void)
{
	static const char *const ptx2[] = {
		".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry kOld()\n{ ret; }\n",
		".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry kNew()\n{ ret; }\n"
	};
	static const char *const names[] = { "kOld", "kNew" };
	CUfunction f[2];

	for (int i = 0; i < 2; i++) {
		CUmodule mod;

		CHECK(cuModuleLoadData(&mod, ptx2[i]), 0);
		CHECK(cuModuleGetFunction(&f[i], mod, names[i]), 0);
		for (int j = 0; j < 3 + 2 * i; j++)
			CHECK(cuLaunchKernel(f[i], 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
		CHECK(cuCtxSynchronize(), 0);
		CHECK(cuModuleUnload(mod), 0);
	}
	if (f[0] != f[1]) {
		fprintf(stderr, "wl_graphapi: the driver did not reuse the handle\n");
		exit(1);
	}
	truth_add(3, "launch:kOld");
	truth_add(5, "launch:kNew");
}

int main(int argc, char **argv)
{
	CUlibrary lib = wl_library(ptx);
	CUkernel ka, kb, kc;
	CUgraph g, child, clone, h, body;
	CUgraphExec e, ec, eh;
	CUgraphNode a1, a2, b, c, n;
	CUDA_KERNEL_NODE_PARAMS p;
	CUgraphNodeParams np;

	CHECK(cuLibraryGetKernel(&ka, lib, "kA"), 0);
	CHECK(cuLibraryGetKernel(&kb, lib, "kB"), 0);
	CHECK(cuLibraryGetKernel(&kc, lib, "kC"), 0);
	if (argc > 1 && !strcmp(argv[1], "limit"))
		return limit(ka);
	/* g: kA (a CUfunction), kB (a CUkernel), kA (cuGraphAddNode), and a child of two kC. */
	CHECK(cuGraphCreate(&g, 0), 0);
	p = params(ka, 0);
	CHECK(cuGraphAddKernelNode_v2(&a1, g, NULL, 0, &p), 0);
	p = params(kb, 1);
	CHECK(cuGraphAddKernelNode_v2(&b, g, NULL, 0, &p), 0);
	memset(&np, 0, sizeof(np));
	np.kernel = params(ka, 0);
	CHECK(cuGraphAddNode_v2(&a2, g, NULL, NULL, 0, &np), 0);
	CHECK(cuGraphCreate(&child, 0), 0);
	p = params(kc, 0);
	CHECK(cuGraphAddKernelNode_v2(&c, child, NULL, 0, &p), 0);
	CHECK(cuGraphAddKernelNode_v2(&c, child, NULL, 0, &p), 0);
	memset(&np, 0, sizeof(np));
	np.type = 4; /* CU_GRAPH_NODE_TYPE_GRAPH (cuGraphAddChildGraphNode: in traced()) */
	np.graph.graph = child;
	CHECK(cuGraphAddNode_v2(&n, g, NULL, NULL, 0, &np), 0);
	CHECK(cuGraphInstantiateWithFlags(&e, g, 0), 0);
	launch(e, 3, 2, 1, 2);
	/* The instantiated graph's kB node now runs kC; g is unchanged. */
	p = params(kc, 0);
	CHECK(cuGraphExecKernelNodeSetParams_v2(e, b, &p), 0);
	launch(e, 2, 2, 0, 3);
	/* g's first kA node now runs kB; the instantiated graph takes g again. */
	p = params(kb, 1);
	CHECK(cuGraphKernelNodeSetParams_v2(a1, &p), 0);
	CHECK(cuGraphExecUpdate_v2(e, g, NULL), 0);
	launch(e, 1, 1, 2, 2);
	/* The instantiated graph's kA node disabled (it runs nothing), then enabled again. */
	CHECK(cuGraphNodeSetEnabled(e, a2, 0), 0);
	launch(e, 2, 0, 2, 2);
	CHECK(cuGraphNodeSetEnabled(e, a2, 1), 0);
	launch(e, 1, 1, 2, 2);
	/* A clone of g, instantiated. */
	CHECK(cuGraphClone(&clone, g), 0);
	CHECK(cuGraphInstantiateWithFlags(&ec, clone, 0), 0);
	launch(ec, 2, 1, 2, 2);
	/* h: a kA node and a conditional node whose body (a kC) the GPU runs as it decides. */
	CHECK(cuGraphCreate(&h, 0), 0);
	p = params(ka, 0);
	CHECK(cuGraphAddKernelNode_v2(&n, h, NULL, 0, &p), 0);
	memset(&np, 0, sizeof(np));
	np.type = 13;
	np.conditional.size = 1;
	np.conditional.phGraph_out = &body;
	CHECK(cuGraphAddNode_v2(&n, h, NULL, NULL, 0, &np), 0);
	p = params(kc, 0);
	CHECK(cuGraphAddKernelNode_v2(&n, body, NULL, 0, &p), 0);
	CHECK(cuGraphInstantiateWithFlags(&eh, h, 0), 0);
	launch(eh, 1, 1, 0, 0);
	truth_add(1, "graph_launches_conditional");
	CHECK(cuCtxSynchronize(), 0);
	CHECK(cuGraphExecDestroy(e), 0);
	CHECK(cuGraphExecDestroy(ec), 0);
	CHECK(cuGraphExecDestroy(eh), 0);
	CHECK(cuGraphDestroy(g), 0);
	traced(ka, kb, kc);
	handle_reused();
	truth_write();
	printf("wl_graphapi: 17 graph launches\n");
	return 0;
}
