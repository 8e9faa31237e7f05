// SPDX-License-Identifier: MIT
/*
 * The overhead benchmark's launch-bound CUDA C loop (bench/overhead.py, workload cloop): an
 * empty kernel launched through the runtime API 20,000 times a window, 7 windows after a
 * warm-up; prints one JSON line as bench/workload.py does (the median time per launch).
 *
 *   cloop [--ab FILE MODES N]
 *
 * CLOOP_SPIN_NS=N: the kernel spins about N ns (by its SM's clock) instead, so that the loop
 * waits on the GPU rather than on the launching thread: what a mode costs the GPU per kernel
 * (CUPTI's kernel records) then shows in the time per launch.
 *
 * --ab: as bench/workload.py's (bench/inject_ab.sh): N rounds of one window per mode of MODES
 * (a comma list), the order turned each round, the mode written to FILE before each window
 * (GPUSCOPE_AB_FILE, src/inject/ab.c) and a tenth of the window run untimed after it; "ab_cpu"
 * the same windows' CPU time on this thread (not a guest's time stolen by its host).
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>
#include <string>
#include <thread>
#include <vector>

__global__ void tiny(float *x)
{
	if (threadIdx.x == 0)
		x[0] += 1.0f;
}

__global__ void spin(float *x, long long cycles)
{
	long long t0 = clock64();

	while (clock64() - t0 < cycles)
		;
	if (threadIdx.x == 0)
		x[0] += 1.0f;
}

static const int iters = 20000;
static long long spin_cycles; /* CLOOP_SPIN_NS in the SM's cycles; 0: tiny */

static double thread_cpu_s()
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds a launch; *cpu (if given) the thread's CPU seconds a launch. */
static double window(float *x, int n, double *cpu = nullptr)
{
	auto t0 = std::chrono::steady_clock::now();
	double c0 = thread_cpu_s();

	for (int i = 0; i < n; i++)
		if (spin_cycles)
			spin<<<1, 32>>>(x, spin_cycles);
		else
			tiny<<<1, 32>>>(x);
	cudaDeviceSynchronize();
	if (cpu)
		*cpu = (thread_cpu_s() - c0) / n;
	return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
}

static bool set_mode(const std::string &file, const std::string &mode)
{
	std::string tmp = file + ".tmp";
	FILE *f = fopen(tmp.c_str(), "w");

	if (!f)
		return false;
	fputs(mode.c_str(), f);
	if (fclose(f) || rename(tmp.c_str(), file.c_str()))
		return false;
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	return true;
}

int main(int argc, char **argv)
{
	const int windows = 7;
	std::vector<std::string> modes;
	std::vector<double> t;
	std::string ab, json, json_cpu;
	int rounds = 0, total = 2000;
	float *x;

	if (argc == 5 && !strcmp(argv[1], "--ab")) {
		ab = argv[2];
		for (const char *p = argv[3]; *p;) {
			size_t n = strcspn(p, ",");

			modes.emplace_back(p, n);
			p += n + (p[n] == ',');
		}
		rounds = atoi(argv[4]);
	} else if (argc != 1) {
		fprintf(stderr, "usage: cloop [--ab FILE MODES N]\n");
		return 1;
	}
	if (cudaMalloc(&x, sizeof(float)) != cudaSuccess)
		return 1;
	if (getenv("CLOOP_SPIN_NS")) {
		int khz = 0;

		cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
		spin_cycles = atoll(getenv("CLOOP_SPIN_NS")) * khz / 1000000;
	}
	window(x, 2000);
	for (int r = 0; r < rounds; r++)
		for (size_t j = 0; j < modes.size(); j++) {
			const std::string &m = modes[(r + j) % modes.size()];
			char buf[128];
			double cpu;

			if (!set_mode(ab, m)) {
				fprintf(stderr, "cloop: cannot write %s\n", ab.c_str());
				return 1;
			}
			window(x, iters / 10);
			t.push_back(window(x, iters, &cpu));
			snprintf(buf, sizeof(buf), "%s[\"%s\", %.9g, %d]", json.empty() ? "" : ", ",
				 m.c_str(), t.back(), r);
			json += buf;
			snprintf(buf, sizeof(buf), "%s[\"%s\", %.9g, %d]", json_cpu.empty() ? "" : ", ",
				 m.c_str(), cpu, r);
			json_cpu += buf;
			total += iters / 10 + iters;
		}
	for (int w = 0; !rounds && w < windows; w++, total += iters)
		t.push_back(window(x, iters));
	if (cudaGetLastError() != cudaSuccess || t.empty())
		return 1;
	std::vector<double> s = t;
	std::sort(s.begin(), s.end());
	printf("{\"workload\": \"cloop\", \"per_iter_s\": %.9g, \"iters_total\": %d, "
	       "\"windows_s\": [",
	       s[s.size() / 2], total);
	for (size_t w = 0; w < t.size(); w++)
		printf("%s%.9g", w ? ", " : "", t[w]);
	printf("], \"ab\": [%s], \"ab_cpu\": [%s], \"ab_iters\": %d}\n", json.c_str(),
	       json_cpu.c_str(), iters / 10 + iters);
	return 0;
}
