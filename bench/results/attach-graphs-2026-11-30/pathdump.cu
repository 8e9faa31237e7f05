// Follow exec +104 -> X, X+320 -> Y, entries at Y+256 stride 200 (a node pointer first; a
// kernel node's CUfunction at node+32), for graphs with a memset node, parallel branches
// and 40 nodes; dump what is around, to find the count and the node kinds.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

typedef unsigned long long u64;
static bool rd(u64 a, void *buf, size_t n)
{
	struct iovec l = { buf, n }, r = { (void *)a, n };
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n;
}
static CUfunction F[3];
static const char *fname(u64 v) { for (int i = 0; i < 3; i++) if ((u64)F[i] == v) return i == 0 ? "k0" : i == 1 ? "k1" : "k2"; return NULL; }

static void dump(CUgraphExec ex, int expect)
{
	u64 x = 0, y = 0, w[64];
	rd((u64)ex + 104, &x, 8);
	rd(x + 320, &y, 8);
	printf("  exec %llx X %llx Y %llx (expect %d nodes)\n", (u64)ex, x, y, expect);
	if (rd(x + 256, w, 128)) { printf("  X+256..:"); for (int i = 0; i < 16; i++) printf(" %llx", w[i]); printf("\n"); }
	if (rd(y, w, 256)) { printf("  Y+0..+248:"); for (int i = 0; i < 32; i++) printf(" %llx", w[i]); printf("\n"); }
	for (int j = 0; j < expect + 3; j++) {
		u64 e[25], n[8];
		if (!rd(y + 256 + (u64)j * 200, e, sizeof(e))) { printf("  entry %d unreadable\n", j); break; }
		const char *f = NULL;
		bool ok = rd(e[0], n, sizeof(n));
		if (ok) f = fname(n[4]);
		printf("  entry %2d node %llx %s | node+0..56:", j, e[0], f ? f : "?");
		for (int i = 0; ok && i < 8; i++) printf(" %llx", n[i]);
		printf(" | entry+8..:");
		for (int i = 1; i < 8; i++) printf(" %llx", e[i]);
		printf("\n");
	}
}

static const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry k0(.param .u64 a)\n{ ret; }\n"
	".visible .entry k1(.param .u64 a)\n{ ret; }\n"
	".visible .entry k2(.param .u64 a)\n{ ret; }\n";

int main()
{
	CUdevice d; CUcontext c; CUmodule m; CUstream s, s2; CUevent e1, e2; CUdeviceptr buf;
	void *args[1]; u64 zero = 0; args[0] = &zero;
	cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
	cuModuleLoadData(&m, ptx);
	cuModuleGetFunction(&F[0], m, "k0"); cuModuleGetFunction(&F[1], m, "k1"); cuModuleGetFunction(&F[2], m, "k2");
	printf("k0 %llx k1 %llx k2 %llx\n", (u64)F[0], (u64)F[1], (u64)F[2]);
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING); cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING);
	cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING); cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING);
	cuMemAlloc(&buf, 1 << 20);
	for (int g = 0; g < 4; g++) {
		CUgraph gr; CUgraphExec ex; int n = 0;
		cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
		if (g == 0) { /* 3 kernels (the known case) */
			printf("== k0 k1 k2\n");
			for (int i = 0; i < 3; i++, n++) cuLaunchKernel(F[i], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		} else if (g == 1) {
			printf("== k0 memset k1 memcpy k2\n");
			cuLaunchKernel(F[0], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuMemsetD32Async(buf, 0, 1024, s);
			cuLaunchKernel(F[1], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuMemcpyDtoDAsync(buf + 8192, buf, 4096, s);
			cuLaunchKernel(F[2], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			n = 5;
		} else if (g == 2) {
			printf("== fork: s k0; s2 k1 (after k0); s k2; join\n");
			cuLaunchKernel(F[0], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuEventRecord(e1, s); cuStreamWaitEvent(s2, e1, 0);
			cuLaunchKernel(F[1], 1, 1, 1, 32, 1, 1, 0, s2, args, NULL);
			cuLaunchKernel(F[2], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuEventRecord(e2, s2); cuStreamWaitEvent(s, e2, 0);
			cuLaunchKernel(F[0], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			n = 4;
		} else {
			printf("== 40 kernels: k(i%%3)\n");
			for (int i = 0; i < 40; i++, n++) cuLaunchKernel(F[i % 3], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		}
		cuStreamEndCapture(s, &gr);
		size_t nn = 0; cuGraphGetNodes(gr, NULL, &nn);
		printf("  nodes %zu instantiate %d", nn, cuGraphInstantiate(&ex, gr, 0));
		printf(" destroy %d launch %d %d\n", cuGraphDestroy(gr), cuGraphLaunch(ex, s), cuStreamSynchronize(s));
		dump(ex, g == 3 ? 40 : n);
	}
	return 0;
}
