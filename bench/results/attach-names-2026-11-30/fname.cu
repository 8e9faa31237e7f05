// Where does driver 580 keep a function's name? Scan handles for pointer paths to the name.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

__global__ void rt_kernel_for_names(float *x, int n) { if (threadIdx.x < n) x[threadIdx.x] += 1; }

static bool rd(unsigned long long a, void *buf, size_t n)
{
	struct iovec l = { buf, n }, r = { (void *)a, n };
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n;
}

static void scan(const char *what, unsigned long long h, const char *name)
{
	unsigned long long w1[128], w2[128];
	char s[256];
	printf("%s handle %llx\n", what, h);
	if (!rd(h, w1, sizeof(w1))) { printf("  unreadable\n"); return; }
	for (int i = 0; i < 128; i++) {
		if (rd(w1[i], s, sizeof(s))) {
			s[255] = 0;
			if (strstr(s, name)) printf("  +%d -> \"%s\" (at %ld)\n", i * 8, s, strstr(s, name) - s);
			if (rd(w1[i], w2, sizeof(w2)))
				for (int j = 0; j < 128; j++)
					if (rd(w2[j], s, sizeof(s))) {
						s[255] = 0;
						if (strstr(s, name)) printf("  +%d -> +%d -> \"%.80s\" (at %ld)\n", i * 8, j * 8, s, strstr(s, name) - s);
					}
		}
	}
}

static const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry _Z21drv_kernel_for_namesPfi(.param .u64 a, .param .u32 b)\n{ ret; }\n"
	".visible .entry lib_kernel_plain_name(.param .u64 a)\n{ ret; }\n";

int main()
{
	CUdevice d; CUcontext c; CUmodule m; CUfunction f, f2, f3; CUlibrary l; CUkernel k;
	cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
	int drv; cuDriverGetVersion(&drv); printf("driver api %d\n", drv);
	printf("load %d\n", cuModuleLoadData(&m, ptx));
	printf("getf %d\n", cuModuleGetFunction(&f, m, "_Z21drv_kernel_for_namesPfi"));
	scan("module function", (unsigned long long)f, "drv_kernel_for_names");
	printf("lib %d\n", cuLibraryLoadData(&l, ptx, 0, 0, 0, 0, 0, 0));
	printf("getk %d\n", cuLibraryGetKernel(&k, l, "lib_kernel_plain_name"));
	scan("library kernel", (unsigned long long)k, "lib_kernel_plain_name");
	printf("kfunc %d\n", cuKernelGetFunction(&f2, k));
	scan("kernel's function", (unsigned long long)f2, "lib_kernel_plain_name");
	cudaFunction_t rf; printf("rt %d\n", cudaGetFuncBySymbol(&rf, (const void *)rt_kernel_for_names));
	scan("runtime function", (unsigned long long)rf, "rt_kernel_for_names");
	cudaKernel_t rk; printf("rtk %d\n", cudaGetKernel(&rk, (const void *)rt_kernel_for_names));
	scan("runtime kernel", (unsigned long long)rk, "rt_kernel_for_names");
	const char *nm = 0; cuFuncGetName(&nm, f); printf("cuFuncGetName %p %s\n", nm, nm ? nm : "");
	return 0;
}
