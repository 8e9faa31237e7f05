// SPDX-License-Identifier: MIT
/*
 * Device code loaded every way the driver takes it, for the in-process plane's reading of
 * it (--device-code). Each argument is HOW:FILE[:KERNEL,...]:
 *
 *   data     cuModuleLoadData(FILE's bytes)         then cuModuleGetFunction
 *   dataex   cuModuleLoadDataEx(FILE's bytes)       then cuModuleGetFunction
 *   fatbin   cuModuleLoadFatBinary(FILE's bytes)    then cuModuleGetFunction
 *   library  cuLibraryLoadData(FILE's bytes)        then cuLibraryGetKernel
 *   wrapper  cuLibraryLoadData({magic, 1, bytes, NULL}), what cudart passes for a fatbin
 *            it registered
 *   file     cuModuleLoad(FILE)                     then cuModuleGetFunction
 *   libfile  cuLibraryLoadFromFile(FILE)            then cuLibraryGetKernel
 *   bad      cuModuleLoadData(FILE's bytes), expected to fail
 *   limit    FILE is a number of MiB: from here on the process may map only that much more
 *            (RLIMIT_AS), so that a large allocation fails
 *
 * Each KERNEL is looked up and launched 3 times.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "fake_cuda.h"
#include "truth.h"
#include "wl_file.h"

CUresult cuModuleLoadFatBinary(CUmodule *mod, const void *fatbin);
CUresult cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned int n, void *opts,
			    void **vals);

/* Map at most `mib` MiB more than now. */
static void limit_address_space(long mib)
{
	char line[256];
	unsigned long kib = 0;
	FILE *f = fopen("/proc/self/status", "r");
	struct rlimit rl;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %lu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	rl.rlim_cur = rl.rlim_max = (rlim_t)kib * 1024 + (rlim_t)mib * 1024 * 1024;
	CHECK(kib != 0 && setrlimit(RLIMIT_AS, &rl) == 0, 1);
}

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;
	long launches = 0;

	CHECK(cuInit(0), 0);
	CHECK(cuDeviceGet(&dev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
	CHECK(cuCtxSetCurrent(ctx), 0);
	for (int i = 1; i < argc; i++) {
		char *how = argv[i], *file = strchr(how, ':'), *kernels, *k, *save = NULL;
		CUmodule mod = NULL;
		CUlibrary lib = NULL;
		void *img;

		if (!file) {
			fprintf(stderr, "usage: wl_devcode HOW:FILE[:KERNEL,...] ...\n");
			return 2;
		}
		*file++ = 0;
		kernels = strchr(file, ':');
		if (kernels)
			*kernels++ = 0;
		if (!strcmp(how, "limit")) {
			limit_address_space(atol(file));
			continue;
		}
		img = slurp(file);
		if (!strcmp(how, "data")) {
			CHECK(cuModuleLoadData(&mod, img), 0);
		} else if (!strcmp(how, "dataex")) {
			CHECK(cuModuleLoadDataEx(&mod, img, 0, NULL, NULL), 0);
		} else if (!strcmp(how, "fatbin")) {
			CHECK(cuModuleLoadFatBinary(&mod, img), 0);
		} else if (!strcmp(how, "library")) {
			CHECK(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0), 0);
		} else if (!strcmp(how, "wrapper")) {
			static struct {
				unsigned int magic, version;
				const void *data;
				void *filename;
			} w[16];

			w[i % 16] = (typeof(w[0])){ 0x466243b1u, 1, img, NULL };
			CHECK(cuLibraryLoadData(&lib, &w[i % 16], NULL, NULL, 0, NULL, NULL, 0), 0);
		} else if (!strcmp(how, "file")) {
			CHECK(cuModuleLoad(&mod, file), 0);
		} else if (!strcmp(how, "libfile")) {
			CHECK(cuLibraryLoadFromFile(&lib, file, NULL, NULL, 0, NULL, NULL, 0), 0);
		} else if (!strcmp(how, "bad")) {
			CHECK(cuModuleLoadData(&mod, img) != 0, 1);
			continue;
		} else {
			fprintf(stderr, "wl_devcode: unknown way '%s'\n", how);
			return 2;
		}
		for (k = kernels ? strtok_r(kernels, ",", &save) : NULL; k;
		     k = strtok_r(NULL, ",", &save)) {
			CUfunction fn;

			if (lib) {
				CUkernel kk;

				CHECK(cuLibraryGetKernel(&kk, lib, k), 0);
				fn = (CUfunction)kk;
			} else {
				CHECK(cuModuleGetFunction(&fn, mod, k), 0);
			}
			for (int r = 0; r < 3; r++, launches++)
				CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL),
				      0);
		}
	}
	CHECK(cuCtxSynchronize(), 0);
	truth_add(launches, "launches");
	truth_write();
	return 0;
}
