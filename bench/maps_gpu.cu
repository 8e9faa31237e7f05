// SPDX-License-Identifier: MIT
/*
 * Device-side maps under real concurrency (bench/maps_gpu.sh): loads a PTX module that
 * `gpuscope bpf2ptx --into` instrumented (tests/bpf/gpu_maps.bpf.c in the kernel `bump`),
 * sets up its maps from the `// gs_maps[i] ...` lines the translator writes, launches
 * `bump` over BLOCKS x THREADS, and checks what every thread counted: the hash map's keys
 * (one slot each, however many threads inserted them at once), each thread's own slot of
 * the per-thread array, and the array's total. Then times the instrumented kernel against
 * the original (ORIG.ptx), interleaved. Prints one JSON object; exit 0 if all checks pass.
 *
 *   maps_gpu INSTRUMENTED.ptx ORIG.ptx [BLOCKS] [THREADS]
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.cuh"

#define CUCK(x)                                                                   \
	do {                                                                    \
		CUresult r_ = (x);                                              \
		if (r_ != CUDA_SUCCESS) {                                       \
			const char *s_ = "?";                                   \
			cuGetErrorString(r_, &s_);                              \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_); \
			exit(2);                                                \
		}                                                               \
	} while (0)

struct desc {
	unsigned long long data;
	unsigned int value_size, max_entries, kind, extra;
};

static CUmodule load(const char *ptx)
{
	char log[8192] = "";
	CUjit_option o[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *v[] = { log, (void *)(size_t)sizeof(log) };
	CUmodule m;
	CUresult r = cuModuleLoadDataEx(&m, ptx, 2, o, v);

	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "JIT failed (%d): %s\n", (int)r, log);
		exit(2);
	}
	return m;
}

static float time_launches(CUfunction f, unsigned int blocks, unsigned int threads, int n)
{
	CUevent a, b;
	void *p = NULL, *args[] = { &p };
	float ms;

	CUCK(cuEventCreate(&a, 0));
	CUCK(cuEventCreate(&b, 0));
	CUCK(cuEventRecord(a, 0));
	for (int i = 0; i < n; i++)
		CUCK(cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, 0, args, NULL));
	CUCK(cuEventRecord(b, 0));
	CUCK(cuEventSynchronize(b));
	CUCK(cuEventElapsedTime(&ms, a, b));
	return ms / n;
}

int main(int argc, char **argv)
{
	unsigned int blocks = argc > 3 ? atoi(argv[3]) : 1000, threads = argc > 4 ? atoi(argv[4]) : 128;
	unsigned long long nthreads = (unsigned long long)blocks * threads;
	char *ptx, *orig, *line;
	struct desc d[16];
	unsigned char *host[16];
	size_t bytes[16], gsize;
	unsigned int n = 0, ok = 1;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod, omod;
	CUfunction f, of;
	CUdeviceptr g;
	void *p = NULL, *args[] = { &p };

	if (argc < 3) {
		fprintf(stderr, "usage: maps_gpu INSTRUMENTED.ptx ORIG.ptx [BLOCKS] [THREADS]\n");
		return 2;
	}
	ptx = (char *)slurp(argv[1]);
	orig = (char *)slurp(argv[2]);
	CUCK(cuInit(0));
	CUCK(cuDeviceGet(&dev, 0));
	CUCK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CUCK(cuCtxSetCurrent(ctx));
	mod = load(ptx);
	omod = load(orig);
	CUCK(cuModuleGetFunction(&f, mod, "bump"));
	CUCK(cuModuleGetFunction(&of, omod, "bump"));
	CUCK(cuModuleGetGlobal(&g, &gsize, mod, "gs_maps"));
	/* "// gs_maps[i] NAME kind K key KEY value VALUE entries N" */
	for (line = strstr(ptx, "// gs_maps["); line && n < 16; line = strstr(line + 1, "// gs_maps[")) {
		unsigned int i, kind, key, value, entries;
		char name[64];
		size_t slot;

		if (sscanf(line, "// gs_maps[%u] %63s kind %u key %u value %u entries %u", &i, name,
			   &kind, &key, &value, &entries) != 6 || i != n)
			break;
		slot = 8 + ((key + 7) & ~7u) + ((value + 7) & ~7u);
		bytes[n] = kind == 3 ? slot * entries
				     : (size_t)value * entries * (kind == 2 ? nthreads : 1);
		d[n].value_size = value;
		d[n].max_entries = entries;
		d[n].kind = kind;
		d[n].extra = kind == 2 ? (unsigned int)nthreads : kind == 3 ? key : 1;
		CUCK(cuMemAlloc(&d[n].data, bytes[n]));
		CUCK(cuMemsetD8(d[n].data, 0, bytes[n]));
		n++;
	}
	if (n != 3 || gsize < n * sizeof(struct desc)) {
		fprintf(stderr, "expected 3 maps described in the PTX, found %u\n", n);
		return 2;
	}
	CUCK(cuMemcpyHtoD(g, d, n * sizeof(struct desc)));
	CUCK(cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, 0, args, NULL));
	CUCK(cuCtxSynchronize());
	for (unsigned int i = 0; i < n; i++) {
		host[i] = (unsigned char *)malloc(bytes[i]);
		CUCK(cuMemcpyDtoH(host[i], d[i].data, bytes[i]));
	}
	/* by_block (hash): 50 keys, each once, each counted by every thread of its blocks */
	{
		unsigned int full = 0, seen[50] = { 0 }, dup = 0, wrong = 0, other = 0;
		size_t slot = 8 + 8 + 8;

		for (unsigned int s = 0; s < d[0].max_entries; s++) {
			unsigned int state, key;
			unsigned long long v;

			memcpy(&state, host[0] + s * slot, 4);
			memcpy(&key, host[0] + s * slot + 8, 4);
			memcpy(&v, host[0] + s * slot + 16, 8);
			if (state == 0)
				continue;
			if (state != 2 || key >= 50) {
				other++;
				continue;
			}
			full++;
			dup += seen[key]++ > 0;
			wrong += v != (unsigned long long)((blocks - key + 49) / 50) * threads;
		}
		ok &= full == 50 && !dup && !wrong && !other;
		printf("{\"blocks\": %u, \"threads\": %u, \"hash\": {\"full_slots\": %u, "
		       "\"duplicate_keys\": %u, \"wrong_counts\": %u, \"other_slots\": %u}, ",
		       blocks, threads, full, dup, wrong, other);
	}
	/* mine (per-thread): every thread's own slot is 1 */
	{
		unsigned long long bad = 0, v;

		for (unsigned long long t = 0; t < nthreads; t++) {
			memcpy(&v, host[1] + t * 8, 8);
			bad += v != 1;
		}
		ok &= !bad;
		printf("\"per_thread\": {\"threads\": %llu, \"not_one\": %llu}, ", nthreads, bad);
	}
	/* total (array) */
	{
		unsigned long long v;

		memcpy(&v, host[2], 8);
		ok &= v == nthreads;
		printf("\"array_total\": %llu, ", v);
	}
	/* time: instrumented and original, interleaved, 5 rounds of 20 launches */
	{
		float ti = 0, to = 0;

		time_launches(f, blocks, threads, 5);
		time_launches(of, blocks, threads, 5);
		for (int r = 0; r < 5; r++) {
			to += time_launches(of, blocks, threads, 20);
			ti += time_launches(f, blocks, threads, 20);
		}
		printf("\"ms_per_launch\": {\"original\": %.5f, \"instrumented\": %.5f}, ", to / 5,
		       ti / 5);
	}
	printf("\"ok\": %s}\n", ok ? "true" : "false");
	return ok ? 0 : 1;
}
