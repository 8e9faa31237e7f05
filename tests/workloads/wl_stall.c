// SPDX-License-Identifier: MIT
/*
 * Planted stalls for the cross-layer findings: a loop of launches on one stream, each
 * waited for, interrupted three times: the launching thread reads a file from disk
 * (O_DIRECT, so it really goes to the device); it sleeps; it waits for a "data loader"
 * thread that reads the file. Each time the stream sits idle waiting for the next launch.
 *
 *   wl_stall DIR   (a directory on a block device)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "truth.h"

#define READ_BYTES (64 << 20)
#define SLEEP_NS   30000000L

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry step(\n.param .u64 a)\n{ ret; }\n";

static void die(const char *what)
{
	fprintf(stderr, "wl_stall: %s: %s\n", what, strerror(errno));
	exit(1);
}

static char path[4096];
static void *buf;

static void read_file(void)
{
	int fd = open(path, O_RDONLY | O_DIRECT);

	if (fd < 0 || pread(fd, buf, READ_BYTES, 0) != READ_BYTES)
		die("pread O_DIRECT");
	close(fd);
}

static void *loader(void *arg)
{
	(void)arg;
	read_file();
	return NULL;
}

static void steps(CUkernel k, CUstream s, int n)
{
	for (int i = 0; i < n; i++) {
		CHECK(cuLaunchKernel((CUfunction)k, 4, 1, 1, 128, 1, 1, 0, s, NULL, NULL), 0);
		CHECK(cuStreamSynchronize(s), 0);
	}
}

int main(int argc, char **argv)
{
	struct timespec nap = { 0, SLEEP_NS };
	CUcontext ctx;
	CUdevice dev;
	CUlibrary lib;
	CUkernel step;
	CUstream s;
	pthread_t th;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: wl_stall DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/wl_stall.data", argv[1]);
	if (posix_memalign(&buf, 4096, READ_BYTES))
		die("posix_memalign");
	memset(buf, 1, READ_BYTES);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0 || write(fd, buf, READ_BYTES) != READ_BYTES || fsync(fd) || close(fd))
		die(path);
	CHECK(cuInit(0), 0);
	CHECK(cuDeviceGet(&dev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
	CHECK(cuCtxSetCurrent(ctx), 0);
	CHECK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0), 0);
	CHECK(cuLibraryGetKernel(&step, lib, "step"), 0);
	CHECK(cuStreamCreate(&s, 0), 0);
	steps(step, s, 5);
	/* Stall 1: the launching thread reads from disk. */
	read_file();
	steps(step, s, 5);
	/* Stall 2: it sleeps. */
	nanosleep(&nap, NULL);
	steps(step, s, 5);
	/* Stall 3: it waits for a thread that reads from disk. */
	pthread_create(&th, NULL, loader, NULL);
	pthread_join(th, NULL);
	steps(step, s, 5);
	unlink(path);
	truth_add(READ_BYTES, "stall:read_bytes");
	truth_add(SLEEP_NS, "stall:sleep_ns");
	truth_add(20, "launches");
	truth_write();
	return 0;
}
