// SPDX-License-Identifier: MIT
/*
 * The loops of bench/kplane_cost.py: what the kernel plane's probes and tracepoints add to one
 * call of a program's, traced or beside a traced one (issue 22).
 *
 *   kplane_cost MODE N ROUNDS [START END]
 *
 * MODE: launch (cuLaunchKernel of an empty kernel, a sync every 256), copy (4 bytes by
 * cuMemcpyHtoDAsync_v2, a sync every 256: an entry and a return probe), getppid (a system call
 * the OS plane only notes), read (a selected one: 1 byte of /dev/zero), pingpong (a byte to
 * a second thread and back through pipes: two switches and two wakeups a round trip). Runs
 * ROUNDS windows of N calls and prints each window's ns a call on one line, then the page
 * faults the loop's process took over the windows (getrusage) on a second. START and END
 * are files it makes before the first window (then waits 0.3 s) and after the last: the
 * driver reads the kernel's program statistics between them. Builds on the test double's
 * declarations of the driver API (-Itests/fakes), so no toolkit is needed; on a GPU machine it
 * links the real driver.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "fake_cuda.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry gs_kplane_k()\n{ ret; }\n";
static int to_echo[2], from_echo[2];
static CUfunction k;
static CUdeviceptr dbuf;

static double mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void touch(const char *path)
{
	FILE *f = fopen(path, "w");

	if (f)
		fclose(f);
}

static void *echo(void *arg)
{
	char c;

	(void)arg;
	while (read(to_echo[0], &c, 1) == 1)
		if (write(from_echo[1], &c, 1) != 1)
			break;
	return NULL;
}

/* One call of the mode; 0 on success. */
static int once(const char *mode, int fd, int i)
{
	char c = 0;

	if (!strcmp(mode, "launch")) {
		if (cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL))
			return 1;
		return (i & 255) == 255 ? (int)cuCtxSynchronize() : 0;
	}
	if (!strcmp(mode, "copy")) {
		static int x;

		if (cuMemcpyHtoDAsync_v2(dbuf, &x, sizeof(x), NULL))
			return 1;
		return (i & 255) == 255 ? (int)cuCtxSynchronize() : 0;
	}
	if (!strcmp(mode, "getppid"))
		return syscall(SYS_getppid) < 0;
	if (!strcmp(mode, "read"))
		return read(fd, &c, 1) != 1;
	return write(to_echo[1], &c, 1) != 1 || read(from_echo[0], &c, 1) != 1;
}

static int setup(const char *mode)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	pthread_t t;

	if (!strcmp(mode, "launch") || !strcmp(mode, "copy"))
		return cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
		       cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, ptx) ||
		       cuModuleGetFunction(&k, mod, "gs_kplane_k") || cuMemAlloc_v2(&dbuf, 64);
	if (!strcmp(mode, "pingpong"))
		return pipe(to_echo) || pipe(from_echo) || pthread_create(&t, NULL, echo, NULL);
	return strcmp(mode, "getppid") && strcmp(mode, "read");
}

int main(int argc, char **argv)
{
	int n, rounds, fd = open("/dev/zero", O_RDONLY);
	struct rusage ru0, ru1;
	const char *mode;

	if (argc < 4 || (n = atoi(argv[2])) < 1 || (rounds = atoi(argv[3])) < 1 || fd < 0) {
		fprintf(stderr, "usage: kplane_cost launch|copy|getppid|read|pingpong N ROUNDS "
				"[START END]\n");
		return 2;
	}
	mode = argv[1];
	if (setup(mode)) {
		fprintf(stderr, "kplane_cost: cannot set up %s\n", mode);
		return 1;
	}
	for (int i = 0; i < n / 10 + 1; i++) /* (warm: first launches, page faults) */
		if (once(mode, fd, i))
			return 1;
	if (argc > 5) {
		touch(argv[4]);
		usleep(300000);
	}
	getrusage(RUSAGE_SELF, &ru0);
	for (int r = 0; r < rounds; r++) {
		double t0 = mono_ns();

		for (int i = 0; i < n; i++)
			if (once(mode, fd, i)) {
				fprintf(stderr, "kplane_cost: %s failed\n", mode);
				return 1;
			}
		if ((!strcmp(mode, "launch") || !strcmp(mode, "copy")) && cuCtxSynchronize())
			return 1;
		printf("%s%.1f", r ? " " : "", (mono_ns() - t0) / n);
	}
	getrusage(RUSAGE_SELF, &ru1);
	printf("\nfaults %ld\n", ru1.ru_minflt - ru0.ru_minflt);
	fflush(stdout);
	if (argc > 5) {
		touch(argv[5]);
		usleep(500000);
	}
	return 0;
}
