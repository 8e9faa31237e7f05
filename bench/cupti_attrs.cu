// SPDX-License-Identifier: MIT
/*
 * What CUPTI's kernel activity costs a launch call under each of its activity attributes
 * (issue 22: under --gpu-time=all CUPTI's part of the launch call is 1.5-2.5 us, most of
 * what every-kernel timing costs a training step). One process a configuration, set before
 * the context exists (as the attributes ask):
 *   default   nothing set
 *   pinned    CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED 1 (the timestamps in
 *             pinned host memory, not device memory)
 *   shared    CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER 0 (one buffer for all threads)
 *   zeroed    CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER 1, the buffers handed over
 *             zeroed by calloc (CUPTI does not clear them in the launching thread)
 *   pool      that, the buffers taken from a pool of ones already touched and cleared,
 *             each cleared (its used part) and put back when its records are read
 *   recycle   CUPTI clearing them as by default, the buffers from such a pool
 *   bigdev    CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE 32 MiB, 8 of them allocated ahead
 * and, joined to one of those with '+' (pinned+flush50):
 *   flushMS   a thread of its own asking CUPTI for its completed buffers every MS ms
 *             (cuptiActivityFlushAll(0), as the in-process plane's does every 50 ms)
 *   many      64 kernels of six arguments each launched in turn, not one empty kernel
 * In the process, windows of N launches, each iteration started PACE_NS after the one
 * before (0: back to back), alternating CUPTI's kernel kind off and on, the order turned
 * each round; each launch call timed alone.
 *
 *   nvcc -O2 -arch=sm_90 cupti_attrs.cu -o cupti_attrs -lcuda -lcupti
 *   ./cupti_attrs CONFIG [N] [REPS] [PACE_NS]
 * Prints one JSON object: the medians over rounds of the windows' median and mean call ns
 * with the kind off and on (and of each round's difference), the records CUPTI gave and
 * dropped.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti_activity.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <vector>

#include "bench.cuh" /* CK(), now_us() */

__global__ void empty() {}

#define KINDS 64

template <int K> __global__ void many(float *a, const float *b, const float *c, int n, float x, int y)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		a[i] = b[i] * x + c[i] * (float)(y + K);
}

typedef void (*many_fn)(float *, const float *, const float *, int, float, int);

template <int K> struct many_table {
	static void fill(many_fn *t)
	{
		t[K] = many<K>;
		many_table<K + 1>::fill(t);
	}
};

template <> struct many_table<KINDS> {
	static void fill(many_fn *) {}
};

static long kernels, dropped;
static bool zeroed, use_many;
static int flush_ms;
static many_fn many_fns[KINDS];
static float *dev_buf;

static size_t buf_size = 4 << 20; /* (the in-process plane's) */
static int pooled;		   /* 0 none, 1 pool (cleared by us), 2 recycle */
static std::vector<uint8_t *> pool;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static void CUPTIAPI request_zeroed(uint8_t **buf, size_t *size, size_t *max_records)
{
	*size = buf_size;
	*buf = (uint8_t *)calloc(1, *size);
	*max_records = 0;
}

static void CUPTIAPI request_pooled(uint8_t **buf, size_t *size, size_t *max_records)
{
	pthread_mutex_lock(&pool_lock);
	if (pool.empty())
		*buf = (uint8_t *)calloc(1, buf_size);
	else {
		*buf = pool.back();
		pool.pop_back();
	}
	pthread_mutex_unlock(&pool_lock);
	*size = buf_size;
	*max_records = 0;
}

static void CUPTIAPI request_plain(uint8_t **buf, size_t *size, size_t *max_records)
{
	*size = buf_size;
	*buf = (uint8_t *)aligned_alloc(8, *size);
	*max_records = 0;
}

static void CUPTIAPI buf_complete(CUcontext c, uint32_t stream, uint8_t *buf, size_t size,
				  size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t d = 0;

	(void)size;
	while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
		if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			kernels++;
	if (cuptiActivityGetNumDroppedRecords(c, stream, &d) == CUPTI_SUCCESS)
		dropped += (long)d;
	if (!pooled) {
		free(buf);
		return;
	}
	if (pooled == 1)
		memset(buf, 0, valid);
	pthread_mutex_lock(&pool_lock);
	pool.push_back(buf);
	pthread_mutex_unlock(&pool_lock);
}

static double median(std::vector<double> x)
{
	std::sort(x.begin(), x.end());
	return x.empty() ? 0 : x[x.size() / 2];
}

static void set_u8(CUpti_ActivityAttribute a, uint8_t v)
{
	size_t n = sizeof(v);

	CK(cuptiActivitySetAttribute(a, &n, &v));
}

static void set_size(CUpti_ActivityAttribute a, size_t v)
{
	size_t n = sizeof(v);

	CK(cuptiActivitySetAttribute(a, &n, &v));
}

/* The flushes' durations, us (the flusher's, while the main thread runs the windows). */
static std::vector<double> flush_us;
static pthread_mutex_t flush_lock = PTHREAD_MUTEX_INITIALIZER;

static void *flusher(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec nap = { flush_ms / 1000, (flush_ms % 1000) * 1000000L };
		double t0;

		nanosleep(&nap, NULL);
		t0 = now_us();
		cuptiActivityFlushAll(0);
		pthread_mutex_lock(&flush_lock);
		flush_us.push_back(now_us() - t0);
		pthread_mutex_unlock(&flush_lock);
	}
	return NULL;
}

/* Before the context: the configuration's attributes. */
static void configure(const char *config)
{
	char c[64];
	const char *plus = strchr(config, '+');

	snprintf(c, sizeof(c), "%s", config);
	if (plus)
		c[plus - config] = 0;
	for (const char *t = plus; t; t = strchr(t + 1, '+')) {
		if (!strncmp(t + 1, "flush", 5))
			flush_ms = atoi(t + 6);
		else if (!strncmp(t + 1, "many", 4))
			use_many = true;
		else {
			fprintf(stderr, "unknown configuration %s\n", config);
			exit(2);
		}
	}
	if (!strcmp(c, "pinned"))
		set_u8(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, 1);
	else if (!strcmp(c, "shared"))
		set_u8(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, 0);
	else if (!strcmp(c, "zeroed"))
		zeroed = true;
	else if (!strcmp(c, "pool") || !strcmp(c, "recycle")) {
		pooled = strcmp(c, "pool") ? 2 : 1;
		pthread_mutex_lock(&pool_lock);
		for (int i = 0; i < 8; i++) /* (touched: calloc's pages cleared now) */
			pool.push_back((uint8_t *)memset(malloc(buf_size), 0, buf_size));
		pthread_mutex_unlock(&pool_lock);
	}
	else if (!strcmp(c, "bigdev")) {
		set_size(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, 32 << 20);
		set_size(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, 8);
	} else if (strcmp(c, "default")) {
		fprintf(stderr, "unknown configuration %s\n", c);
		exit(2);
	}
	if (getenv("BUF_MB"))
		buf_size = (size_t)atoi(getenv("BUF_MB")) << 20;
	if (zeroed || pooled == 1)
		set_u8(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, 1);
	CK(cuptiActivityRegisterCallbacks(zeroed ? request_zeroed
					  : pooled ? request_pooled
						   : request_plain,
					  buf_complete));
}

static void launch(long i, CUstream s)
{
	if (use_many)
		many_fns[i % KINDS]<<<2, 128, 0, s>>>(dev_buf, dev_buf + 256, dev_buf + 512, 256, 1.0f,
						      (int)i);
	else
		empty<<<1, 1, 0, s>>>();
}

/* The median ns of a launch call over n paced launches, CUPTI's kernel kind on or off (and
 * their mean in *mean). */
static double window(bool on, long n, double pace, CUstream s, double *mean)
{
	std::vector<double> t;
	double next = now_us() * 1e3, sum = 0;

	t.reserve(n);
	if (on)
		CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	for (long i = 0; i < n; i++) {
		double t0;

		while (now_us() * 1e3 < next)
			;
		t0 = now_us() * 1e3;
		next = t0 + pace;
		launch(i, s);
		t.push_back(now_us() * 1e3 - t0);
		sum += t.back();
		if (i % 4096 == 4095)
			CK(cuStreamSynchronize(s)); /* (back to back: the queue kept short) */
	}
	CK(cuStreamSynchronize(s));
	if (on) {
		CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
		CK(cuptiActivityFlushAll(1));
	}
	if (mean)
		*mean = sum / n;
	return median(t);
}

int main(int argc, char **argv)
{
	const char *config = argc > 1 ? argv[1] : "default";
	long n = argc > 2 ? atol(argv[2]) : 20000;
	int reps = argc > 3 ? atoi(argv[3]) : 7;
	double pace = argc > 4 ? atof(argv[4]) : 9000;
	std::vector<double> off, on, diff, off_mean, on_mean, diff_mean;
	CUstream s;
	pthread_t th;

	configure(config);
	CK(cudaFree(0));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	many_table<0>::fill(many_fns);
	CK(cudaMalloc(&dev_buf, 1024 * sizeof(float)));
	for (int i = 0; i < 2000; i++)
		launch(i, s);
	CK(cuStreamSynchronize(s));
	window(true, 2000, pace, s, NULL); /* (CUPTI's first enabling: its set-up) */
	if (flush_ms && pthread_create(&th, NULL, flusher, NULL))
		exit(1);
	for (int r = 0; r < reps; r++) {
		double a, b, am, bm;

		if (r % 2) {
			b = window(true, n, pace, s, &bm);
			a = window(false, n, pace, s, &am);
		} else {
			a = window(false, n, pace, s, &am);
			b = window(true, n, pace, s, &bm);
		}
		off.push_back(a);
		on.push_back(b);
		diff.push_back(b - a);
		off_mean.push_back(am);
		on_mean.push_back(bm);
		diff_mean.push_back(bm - am);
	}
	pthread_mutex_lock(&flush_lock); /* (held to the end: the flusher stops at its next) */
	printf("{\"config\": \"%s\", \"n\": %ld, \"reps\": %d, \"pace_ns\": %.0f, "
	       "\"off_ns\": %.0f, \"on_ns\": %.0f, \"added_ns\": %.0f, \"added_min\": %.0f, "
	       "\"added_max\": %.0f, \"off_mean_ns\": %.0f, \"on_mean_ns\": %.0f, "
	       "\"added_mean_ns\": %.0f, \"kernels\": %ld, \"dropped\": %ld, \"flushes\": %zu, "
	       "\"flush_us_median\": %.0f, \"flush_us_max\": %.0f}\n",
	       config, n, reps, pace, median(off), median(on), median(diff),
	       *std::min_element(diff.begin(), diff.end()),
	       *std::max_element(diff.begin(), diff.end()), median(off_mean), median(on_mean),
	       median(diff_mean), kernels, dropped, flush_us.size(), median(flush_us),
	       flush_us.empty() ? 0 : *std::max_element(flush_us.begin(), flush_us.end()));
	fflush(stdout);
	_exit(0); /* (the flusher thread left running) */
	return 0;
}
