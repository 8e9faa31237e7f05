// Every pointer, reachable from a CUgraphExec (3 levels, 4 KiB an object), to one of its own
// nodes (an object whose +24 is the exec): where it is, and the node's index (+0), +32, +40.
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
#define HS (1 << 22)
static u64 *visited; static int nvis;
static bool seen(u64 a)
{
	u64 h = (a * 0x9E3779B97F4A7C15ULL) >> 42;
	while (visited[h & (HS - 1)]) { if (visited[h & (HS - 1)] == a) return true; h++; }
	if (nvis > HS / 2) return true;
	visited[h & (HS - 1)] = a; nvis++;
	return false;
}
#define WIN 4096
#define W (WIN / 8)
static u64 EX; static CUfunction F[3]; static int hits;
static u64 nodes[256]; static int nnodes;
static int node_idx(u64 p) { for (int i = 0; i < nnodes; i++) if (nodes[i] == p) return i; return -1; }
static const char *fname(u64 v) { for (int i = 0; i < 3; i++) if ((u64)F[i] == v) return i == 0 ? "k0" : i == 1 ? "k1" : "k2"; return "other"; }

static void walk(u64 a, int depth, char *path, int plen)
{
	static u64 w[8][W];
	if (seen(a) || !rd(a, w[depth], WIN)) return;
	/* runs of node pointers in this object */
	int run = 0;
	for (int i = 0; i < W; i++) {
		u64 n[6];
		u64 p = w[depth][i];
		bool node = p > 0x10000 && p < 0x7fffffffffffULL && !(p & 7) && rd(p, n, sizeof(n)) && n[3] == EX;
		if (node) {
			hits++;
			if (node_idx(p) < 0 && nnodes < 256) nodes[nnodes++] = p;
		}
		run = node ? run + 1 : 0;
	}
	if (depth == 0) return;
	for (int i = 0; i < W; i++) {
		u64 p = w[depth][i];
		if (p < 0x10000 || p > 0x7fffffffffffULL || (p & 7)) continue;
		int n = snprintf(path + plen, 32, "+%d->", i * 8);
		walk(p, depth - 1, path, plen + n);
		path[plen] = 0;
	}
}

static const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry k0(.param .u64 a)\n{ ret; }\n"
	".visible .entry k1(.param .u64 a)\n{ ret; }\n"
	".visible .entry k2(.param .u64 a)\n{ ret; }\n";

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 3;
	CUdevice d; CUcontext c; CUmodule m; CUstream s, s2; CUevent e1, e2; CUdeviceptr buf;
	void *args[1]; u64 zero = 0; args[0] = &zero;
	visited = (u64 *)calloc(HS, 8);
	cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
	cuModuleLoadData(&m, ptx);
	cuModuleGetFunction(&F[0], m, "k0"); cuModuleGetFunction(&F[1], m, "k1"); cuModuleGetFunction(&F[2], m, "k2");
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING); cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING);
	cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING); cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING);
	cuMemAlloc(&buf, 1 << 20);
	for (int g = 0; g < 3; g++) {
		CUgraph gr; CUgraphExec ex;
		cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
		if (g == 0) {
			printf("== k0 memset k1 memcpy k2\n");
			cuLaunchKernel(F[0], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuMemsetD32Async(buf, 0, 1024, s);
			cuLaunchKernel(F[1], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuMemcpyDtoDAsync(buf + 8192, buf, 4096, s);
			cuLaunchKernel(F[2], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		} else if (g == 2) {
			printf("== chain k0 k1 k2 k1\n");
			cuLaunchKernel(F[0], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuLaunchKernel(F[1], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuLaunchKernel(F[2], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuLaunchKernel(F[1], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		} else {
			printf("== fork: s k0; s2 k1 (after k0); s k2; join; k0\n");
			cuLaunchKernel(F[0], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuEventRecord(e1, s); cuStreamWaitEvent(s2, e1, 0);
			cuLaunchKernel(F[1], 1, 1, 1, 32, 1, 1, 0, s2, args, NULL);
			cuLaunchKernel(F[2], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
			cuEventRecord(e2, s2); cuStreamWaitEvent(s, e2, 0);
			cuLaunchKernel(F[0], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		}
		cuStreamEndCapture(s, &gr);
		int ri = cuGraphInstantiate(&ex, gr, 0);
		int rd_ = cuGraphDestroy(gr);
		printf("  instantiate %d destroy %d", ri, rd_);
		printf(" launch %d %d exec %llx\n", cuGraphLaunch(ex, s), cuStreamSynchronize(s), (u64)ex);
		EX = (u64)ex; hits = 0;
		memset(visited, 0, (size_t)HS * 8); nvis = 0;
		char path[512] = "";
		nnodes = 0;
		walk(EX, depth, path, 0);
		printf("  %d node pointers, %d objects, %d nodes; exec+104 %s, +112 %s\n", hits, nvis, nnodes, "", "");
		u64 x104 = 0, x112 = 0; rd(EX + 104, &x104, 8); rd(EX + 112, &x112, 8);
		printf("  exec+104 = node %d, exec+112 = node %d\n", node_idx(x104), node_idx(x112));
		for (int i = 0; i < nnodes; i++) {
			u64 w[512];
			if (!rd(nodes[i], w, sizeof(w))) continue;
			printf("  node @%d #%llu %s +40 %llx:", i, w[0] & 0xffffffff, fname(w[4]), w[5]);
			for (int o = 0; o < 512; o++) { int j = node_idx(w[o]); if (j >= 0) printf(" +%d->@%d", o * 8, j); }
			printf("\n");
		}
		/* node0 (exec+104) +112 -> Z, Z+8 -> R, R+56 + 200 j */
		u64 z = 0, r = 0; rd(x104 + 112, &z, 8); rd(z + 8, &r, 8);
		printf("  first+112 -> %llx, +8 -> %llx:", z, r);
		for (int j = 0; j < 12; j++) { u64 v = 0; if (!rd(r + 56 + 200 * j, &v, 8)) break; int k = node_idx(v); u64 ix = 0; if (k >= 0) rd(v, &ix, 8); printf(" %s", k >= 0 ? "" : (v ? "?" : "0")); if (k >= 0) printf("#%llu", ix & 0xffffffff); }
		printf("\n");
	}
	return 0;
}
