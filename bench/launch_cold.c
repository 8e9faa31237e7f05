// SPDX-License-Identifier: MIT
/*
 * What the in-process plane adds to one launch call when the program's own work has pushed
 * the plane's data out of the nearer caches (issue 22): between launches a training step's
 * CPU side runs tens of microseconds of other code, and what the wrapper reads then comes
 * from the last-level cache or memory, not L1. An empty kernel launched by cuLaunchKernel,
 * SWEEP_KIB of memory written between launches (0: back to back), and a line in each of PAGES
 * pages (their translations pushed out of the TLB while their lines stay in L2: on the GPU
 * guests a TLB miss costs ~45 ns, bench/guest_cpu.c), each launch call timed alone by the TSC; windows of N launches per mode of MODES (GPUSCOPE_AB_FILE, ab.c), the
 * order turned each round. Runs on a GPU and on the test double (the kernel is PTX).
 *
 *   launch_cold FILE MODES ROUNDS [N] [SWEEP_KIB] [PAGES]
 *
 * under `gpuscope run --inject --gpu-time=off` with GPUSCOPE_AB_FILE=FILE. Prints one JSON
 * line: per window its mode, round, and the median, 25th and 75th percentile, mean and mean
 * of the middle 80% of its calls in ns (bench/launch_cold.sh makes the table). With
 * LAUNCH_COLD_MAPS set, its memory map at the end, on stderr (bench/launch_pages.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

/* (The driver API as the test double declares it, with the real layouts and signatures: no
 * toolkit needed to build this, on a GPU machine or here.) */
#include "fake_cuda.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry gs_cold_k()\n{ ret; }\n";

static int cmp(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;

	return x < y ? -1 : x > y;
}

static double mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void set_mode(const char *file, const char *mode)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\n", mode) < 0 || fclose(f) || rename(tmp, file)) {
		fprintf(stderr, "launch_cold: cannot write %s\n", file);
		exit(1);
	}
	usleep(20000); /* (the plane's thread reads it every millisecond) */
}

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction k;
	unsigned long long *t, dummy = 0;
	char *modes[16], *save = NULL;
	int nmodes = 0, rounds, n;
	size_t sweep, pages;
	volatile unsigned char *mem, *pmem;
	double ns_per_tick, w0, c0;
	unsigned aux;

	if (argc < 4) {
		fprintf(stderr, "usage: launch_cold FILE MODES ROUNDS [N] [SWEEP_KIB] [PAGES]\n");
		return 2;
	}
	for (char *m = strtok_r(argv[2], ",", &save); m && nmodes < 16;
	     m = strtok_r(NULL, ",", &save))
		modes[nmodes++] = m;
	rounds = atoi(argv[3]);
	n = argc > 4 ? atoi(argv[4]) : 4000;
	sweep = (size_t)(argc > 5 ? atoi(argv[5]) : 4096) << 10;
	pages = (size_t)(argc > 6 ? atoi(argv[6]) : 0);
	mem = calloc(1, sweep + 64);
	pmem = calloc(pages + 1, 4096);
	t = calloc((size_t)n, sizeof(*t));
	if (!nmodes || rounds < 1 || n < 4 || !mem || !pmem || !t) {
		fprintf(stderr, "launch_cold: bad arguments\n");
		return 2;
	}
	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
	    cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, ptx) ||
	    cuModuleGetFunction(&k, mod, "gs_cold_k")) {
		fprintf(stderr, "launch_cold: no CUDA context or kernel\n");
		return 1;
	}
	w0 = mono_ns();
	c0 = (double)__rdtscp(&aux);
	printf("{\"sweep_kib\": %zu, \"pages\": %zu, \"n\": %d, \"windows\": [", sweep >> 10, pages,
	       n);
	for (int r = 0; r < rounds; r++) {
		for (int j = 0; j < nmodes; j++) {
			const char *mode = modes[(r + j) % nmodes];
			unsigned long long sum = 0, mid = 0;

			set_mode(argv[1], mode);
			for (int i = -n / 10; i < n; i++) {
				unsigned long long a;

				for (size_t b = 0; b < sweep; b += 64)
					mem[b]++;
				/* (a line a page, at a turning place in it: not all in one cache set) */
				for (size_t g = 0; g < pages; g++)
					pmem[g * 4096 + (g % 64) * 64]++;
				a = __rdtscp(&aux);
				if (cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL)) {
					fprintf(stderr, "launch_cold: launch failed\n");
					return 1;
				}
				if (i >= 0)
					t[i] = __rdtscp(&aux) - a;
				if ((i & 255) == 255)
					cuCtxSynchronize();
			}
			cuCtxSynchronize();
			ns_per_tick = (mono_ns() - w0) / ((double)__rdtscp(&aux) - c0);
			qsort(t, (size_t)n, sizeof(*t), cmp);
			for (int i = 0; i < n; i++) {
				sum += t[i];
				mid += i >= n / 10 && i < n - n / 10 ? t[i] : 0;
			}
			printf("%s{\"mode\": \"%s\", \"round\": %d, \"p50\": %.1f, \"p25\": %.1f, "
			       "\"p75\": %.1f, \"mean\": %.1f, \"tmean\": %.1f}",
			       r || j ? ", " : "", mode, r, t[n / 2] * ns_per_tick,
			       t[n / 4] * ns_per_tick, t[3 * n / 4] * ns_per_tick,
			       (double)sum / n * ns_per_tick,
			       (double)mid / (n - 2 * (n / 10)) * ns_per_tick);
			dummy += sum;
		}
	}
	printf("], \"checksum\": %llu}\n", dummy & 1);
	if (getenv("LAUNCH_COLD_MAPS")) { /* (bench/launch_pages.sh: where each library lies) */
		FILE *f = fopen("/proc/self/maps", "re");
		char line[4096];

		while (f && fgets(line, sizeof(line), f))
			fprintf(stderr, "maps %s", line);
		if (f)
			fclose(f);
	}
	return 0;
}
