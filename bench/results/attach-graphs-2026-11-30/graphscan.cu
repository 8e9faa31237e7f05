// Where does driver 580 keep a graph exec's kernel nodes' functions? BFS over pointers from
// the CUgraphExec (and the CUgraph), looking for words equal to the launched CUfunctions.
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

#define WORDS 128
#define HS (1 << 22)
static u64 *visited; static int nvis;
static bool seen(u64 a)
{
	if (!visited) visited = (u64 *)calloc(HS, 8);
	u64 h = (a * 0x9E3779B97F4A7C15ULL) >> 42;
	while (visited[h & (HS - 1)]) { if (visited[h & (HS - 1)] == a) return true; h++; }
	if (nvis > HS / 2) return true;
	visited[h & (HS - 1)] = a; nvis++;
	return false;
}

static u64 targets[16]; static int ntargets; static const char *tname[16];
static int found;

static void walk(u64 a, int depth, char *path, int plen)
{
	u64 w[WORDS];
	if (seen(a) || !rd(a, w, sizeof(w))) return;
	for (int i = 0; i < WORDS; i++) {
		for (int t = 0; t < ntargets; t++)
			if (w[i] == targets[t] && found < 400) {
				printf("  %s+%d = %s\n", path, i * 8, tname[t]);
				found++;
			}
	}
	if (depth == 0) return;
	for (int i = 0; i < WORDS; i++) {
		u64 p = w[i];
		if (p < 0x10000 || p > 0x7fffffffffffULL || (p & 7)) continue;
		int n = snprintf(path + plen, 64, "+%d->", i * 8);
		walk(p, depth - 1, path, plen + n);
		path[plen] = 0;
	}
}

static void scan(const char *what, u64 h, int depth)
{
	char path[512] = "";
	if (visited) memset(visited, 0, (size_t)HS * 8);
	nvis = 0; found = 0;
	printf("%s %llx (depth %d)\n", what, h, depth);
	walk(h, depth, path, 0);
	printf("  %d found, %d visited\n", found, nvis);
}

static const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry k0(.param .u64 a)\n{ ret; }\n"
	".visible .entry k1(.param .u64 a)\n{ ret; }\n"
	".visible .entry k2(.param .u64 a)\n{ ret; }\n";

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 3;
	CUdevice d; CUcontext c; CUmodule m; CUfunction f[3]; CUstream s; CUlibrary l; CUkernel k[3];
	cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
	cuModuleLoadData(&m, ptx);
	const char *names[3] = { "k0", "k1", "k2" };
	for (int i = 0; i < 3; i++) { cuModuleGetFunction(&f[i], m, names[i]); targets[ntargets] = (u64)f[i]; tname[ntargets++] = names[i]; }
	cuLibraryLoadData(&l, ptx, 0, 0, 0, 0, 0, 0);
	static const char *kn[3] = { "K0(lib)", "K1(lib)", "K2(lib)" };
	for (int i = 0; i < 3; i++) { cuLibraryGetKernel(&k[i], l, names[i]); targets[ntargets] = (u64)k[i]; tname[ntargets++] = kn[i]; }
	printf("functions %llx %llx %llx kernels %llx %llx %llx\n", (u64)f[0], (u64)f[1], (u64)f[2], (u64)k[0], (u64)k[1], (u64)k[2]);
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	void *args[1]; u64 zero = 0; args[0] = &zero;
	int orders[2][6] = { { 0, 1, 2, -1 }, { 2, 0, 1, 1, 0, -1 } };
	for (int g = 0; g < 2; g++) {
		CUgraph gr; CUgraphExec ex;
		printf("== graph %d: nodes", g);
		cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
		for (int i = 0; orders[g][i] >= 0; i++) {
			printf(" %s", names[orders[g][i]]);
			cuLaunchKernel(f[orders[g][i]], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		}
		printf("\n");
		cuStreamEndCapture(s, &gr);
		printf("instantiate %d\n", cuGraphInstantiate(&ex, gr, 0));
		printf("launch %d sync %d\n", cuGraphLaunch(ex, s), cuStreamSynchronize(s));
		scan("exec", (u64)ex, depth);
		scan("graph", (u64)gr, 2);
	}
	// A graph of library kernels (by CUkernel), launched as CUfunction
	{
		CUgraph gr; CUgraphExec ex;
		printf("== graph 2: library kernels k1 k2 k0 (as CUkernel)\n");
		cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
		cuLaunchKernel((CUfunction)k[1], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		cuLaunchKernel((CUfunction)k[2], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		cuLaunchKernel((CUfunction)k[0], 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		cuStreamEndCapture(s, &gr);
		printf("instantiate %d\n", cuGraphInstantiate(&ex, gr, 0));
		scan("exec", (u64)ex, depth);
	}
	return 0;
}
