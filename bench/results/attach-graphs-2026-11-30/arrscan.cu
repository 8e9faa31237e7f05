// Look for an array (pointers to nodes, or structs) in memory reachable from a CUgraphExec
// listing its kernel nodes' functions in capture order.
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
static u64 want[64]; static int nwant; static int hits;

static u64 uniq[3]; static int nuniq;
static int tidx(u64 v) { for (int t = 0; t < nuniq; t++) if (uniq[t] == v) return t; return -1; }

/* For each word: the function it is (direct), or the node it points to holds (at *off). */
static void classify(const u64 *w, int *dir, int *via, int *voff)
{
	u64 n[40];
	for (int i = 0; i < W; i++) {
		dir[i] = tidx(w[i]);
		via[i] = -1;
		u64 p = w[i];
		if (p < 0x10000 || p > 0x7fffffffffffULL || (p & 7) || !rd(p, n, sizeof(n))) continue;
		for (int o = 0; o < 40; o++) { int t = tidx(n[o]); if (t >= 0) { via[i] = t; voff[i] = o * 8; break; } }
	}
}

static void check(u64 a, const u64 *w, const char *path)
{
	static int dir[W], via[W], voff[W];
	int wt[64];
	(void)a;
	for (int j = 0; j < nwant; j++) wt[j] = tidx(want[j]);
	classify(w, dir, via, voff);
	for (int S = 8; S <= 512; S += 8)
		for (int i = 0; i < W; i++) {
			int last = i * 8 + (nwant - 1) * S;
			if (last / 8 >= W) break;
			bool direct = true, viaptr = true;
			int off0 = -1;
			for (int j = 0; j < nwant && (direct || viaptr); j++) {
				int x = (i * 8 + j * S) / 8;
				if (dir[x] != wt[j]) direct = false;
				if (via[x] != wt[j] || (off0 >= 0 && voff[x] != off0)) viaptr = false;
				else off0 = voff[x];
			}
			if ((direct || viaptr) && hits < 60) {
				printf("  %s+%d stride %d: %s%s (node off %d)\n", path, i * 8, S, direct ? "functions " : "", viaptr ? "node pointers" : "", off0);
				hits++;
			}
		}
}

static void walk(u64 a, int depth, char *path, int plen)
{
	static u64 w[8][W];
	if (seen(a) || !rd(a, w[depth], WIN)) return;
	check(a, w[depth], path);
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

static void one(CUstream s, CUfunction *f, const int *order, int n, bool destroy, int depth, const char *what)
{
	CUgraph gr; CUgraphExec ex; void *args[1]; u64 zero = 0; args[0] = &zero;
	cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
	printf("== %s:", what);
	for (int i = 0; i < n; i++) { cuLaunchKernel(f[order[i]], 1, 1, 1, 32, 1, 1, 0, s, args, NULL); printf(" k%d", order[i]); want[i] = (u64)f[order[i]]; }
	nwant = n;
	for (int t = 0; t < 3; t++) uniq[t] = (u64)f[t];
	nuniq = 3;
	cuStreamEndCapture(s, &gr);
	printf("\n  instantiate %d", cuGraphInstantiate(&ex, gr, 0));
	if (destroy) printf(" destroy %d", cuGraphDestroy(gr));
	printf(" launch %d %d exec %llx\n", cuGraphLaunch(ex, s), cuStreamSynchronize(s), (u64)ex);
	memset(visited, 0, (size_t)HS * 8); nvis = 0; hits = 0;
	char path[512] = "";
	walk((u64)ex, depth, path, 0);
	printf("  %d hits, %d visited\n", hits, nvis);
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 2;
	CUdevice d; CUcontext c; CUmodule m; CUfunction f[3]; CUstream s; CUlibrary l; CUkernel k[3]; CUfunction kf[3];
	visited = (u64 *)calloc(HS, 8);
	cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
	cuModuleLoadData(&m, ptx);
	const char *names[3] = { "k0", "k1", "k2" };
	for (int i = 0; i < 3; i++) cuModuleGetFunction(&f[i], m, names[i]);
	cuLibraryLoadData(&l, ptx, 0, 0, 0, 0, 0, 0);
	for (int i = 0; i < 3; i++) { cuLibraryGetKernel(&k[i], l, names[i]); cuKernelGetFunction(&kf[i], k[i]); }
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	int o5[] = { 2, 0, 1, 1, 0 };
	int o12[] = { 0, 1, 2, 0, 1, 2, 0, 1, 2, 1, 1, 0 };
	one(s, f, o5, 5, false, depth, "five, kept");
	one(s, f, o12, 12, true, depth, "twelve, graph destroyed");
	one(s, kf, o5, 5, true, depth, "five library kernels by their functions, graph destroyed");
	return 0;
}
