// SPDX-License-Identifier: MIT
/*
 * libcupti.so.13 test double: the activity API's kernel, memcpy and memset records, as
 * --gpu-time=all uses them (src/inject/gputime_cupti.c).
 *
 * While CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL is enabled, the double of libcuda tells it of
 * every kernel queued, and every kernel node a graph launch runs (with the graph's id, as
 * CUPTI's graphId), through fakecuda_kernel_hook, with the simulated start and end; it
 * keeps a record of each, as CUpti_ActivityKernel10 lays one out, its times on
 * CLOCK_REALTIME as CUPTI's are. Records are delivered in a buffer the client gave, once
 * the kernel has ended on the simulated clock: at cuptiActivityFlushAll (all of them when
 * forced) and every flush period on a thread of its own. Context and stream ids: small
 * numbers given in order of first asking, the same for the same context or stream (the
 * double's stream behind a handle: fakecuda_stream_of), as CUPTI's are. While
 * CUPTI_ACTIVITY_KIND_MEMCPY or MEMSET is enabled, the same of every 1-D copy or set
 * (fakecuda_copy_hook), as CUpti_ActivityMemcpy6 and CUpti_ActivityMemset4 lay them out.
 * A buffer's records are GS_CUPTI_K_SIZE apart whatever their kind (the client walks them
 * with cuptiActivityGetNextRecord).
 *
 * FAKECUPTI_LOSE=N: the Nth kernel's record is never delivered (as records CUPTI drops).
 * FAKECUPTI_MISNAME=N: the Nth kernel's record carries the name of the last other kernel
 * recorded before it (as CUPTI names a kernel by what its handle was when it learnt it,
 * after XLA's unloads gave the handle to another kernel).
 * FAKECUPTI_REVERSE=1: each buffer's records in the reverse of their order (CUPTI keeps a
 * buffer per thread, and delivers them as they fill: records of one stream come out of
 * order when two threads launch on it).
 * FAKECUPTI_PER_THREAD=1: as CUPTI keeps a buffer per launching thread, each delivery
 * holds one thread's records after another's (records of one stream come out of order
 * when two threads launch on it); FAKECUPTI_HOLD=1: records delivered only by a forced
 * flush (as CUPTI's own thread delivers only full buffers).
 * FAKECUPTI_FULL=N: once N records wait, those of kernels that have ended are delivered at
 * once, inside the launch that made the Nth (as CUPTI completes a full buffer inside the
 * program's call that filled it).
 * FAKECUPTI_CALLS=path: at exit, which of the client-facing functions were called, one
 * name a line (tests: whose calls reached the double). FAKECUPTI_SWITCHES=path: at exit,
 * how often the kernel kind was switched, and the memset kind: "enabled N disabled M sets
 * enabled N disabled M". FAKECUPTI_BUFFERS=path: at exit, the buffers asked for, how many
 * of them the client was to clear (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER set by
 * cuptiActivitySetAttribute: the double then clears none itself, as CUPTI), and how many
 * of those were not clear, and whether the client was to clear them at the end:
 * "requests N client-cleared N unclear N cleared-at-exit 0|1". FAKECUPTI_SLOW_REQUEST_MS=N:
 * each delivery holds a lock N ms before it asks the client for a buffer, and across the
 * request, as CUPTI may hold one of its own, which cuptiActivitySetAttribute takes too
 * (recursive: the client may set the attribute inside its request, as CUPTI's
 * documentation says it may).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../include/gpuscope/cupti_abi.h"

#define EXPORT			__attribute__((visibility("default")))
#define MAX_IDS			1024
#define ERROR_INVALID_PARAMETER 1
#define ERROR_MAX_LIMIT_REACHED 12

struct rec {
	uint32_t kind; /* CUPTI's activity kind */
	uint32_t ctx, stream, thread, graph;
	uint64_t start, end; /* CLOCK_MONOTONIC */
	uint64_t bytes;	     /* copies and sets */
	unsigned int dims[6];
	const char *name;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gs_cupti_request_fn request;
static gs_cupti_complete_fn complete;
static int kernels_on, copies_on, sets_on;
static struct rec *recs;
static size_t nrecs, caprecs;
static unsigned long kernels_seen, lose_at, full_at, misname_at;
static int reverse, per_thread, hold;
static __thread uint32_t thread_no;
static uint32_t threads;
static void *ids[MAX_IDS];
static int nids;
static uint32_t period_ms;
static char calls[512];
static unsigned long kernel_on_n, kernel_off_n; /* (the kernel kind's switches) */
static unsigned long set_on_n, set_off_n;	/* (the memset kind's) */
static int zeroed_out;				/* the client clears the buffers */
static unsigned long buf_requests, buf_client, buf_unclear;
static unsigned int slow_request_ms;
static pthread_mutex_t req_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

typedef void (*kernel_hook_fn)(void *, void *, unsigned long long, unsigned long long,
			       const unsigned int *, const char *, unsigned int);
typedef void (*set_hook_fn)(kernel_hook_fn);
typedef void (*copy_hook_fn)(void *, void *, unsigned long long, unsigned long long,
			     unsigned long long, int);
typedef void (*set_copy_hook_fn)(copy_hook_fn);
typedef void *(*stream_of_fn)(void *, int);

static uint64_t clock_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void called(const char *name)
{
	pthread_mutex_lock(&lock);
	if (!strstr(calls, name) && strlen(calls) + strlen(name) + 2 < sizeof(calls)) {
		strcat(calls, name);
		strcat(calls, "\n");
	}
	pthread_mutex_unlock(&lock);
}

/* Under lock: a small id for a pointer. */
static uint32_t id_of(void *p)
{
	for (int i = 0; i < nids; i++)
		if (ids[i] == p)
			return (uint32_t)i + 1;
	if (nids == MAX_IDS)
		return 0;
	ids[nids++] = p;
	return (uint32_t)nids;
}

static void deliver(int how);
static void deliver_locked(int how);

/* Under lock: the record's copy of a kernel's name, or at the FAKECUPTI_MISNAME'th kernel
 * (kernels_seen), the last other kernel's. */
static char *record_name(const char *name)
{
	static char *last, *other; /* the last kernel's name, the last other's before it */
	const char *use = name;

	if (kernels_seen == misname_at)
		use = last && strcmp(last, name) ? last : other ? other : name;
	use = strdup(use);
	if (!last || strcmp(last, name)) {
		free(other);
		other = last;
		last = strdup(name);
	}
	return (char *)use;
}

static void on_kernel(void *ctx, void *stream, unsigned long long start, unsigned long long end,
		      const unsigned int *dims, const char *name, unsigned int graph)
{
	bool full;

	pthread_mutex_lock(&lock);
	if (kernels_on && ++kernels_seen != lose_at) {
		char *copy = name ? record_name(name) : NULL;

		if (nrecs == caprecs) {
			caprecs = caprecs ? 2 * caprecs : 1024;
			recs = realloc(recs, caprecs * sizeof(*recs));
		}
		if (!thread_no)
			thread_no = ++threads;
		recs[nrecs++] = (struct rec){ .kind = GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
					      .ctx = id_of(ctx),
					      .stream = id_of(stream),
					      .thread = thread_no,
					      .start = start,
					      .end = end,
					      .graph = graph,
					      /* (CUPTI's own copy: the kernel may be unloaded
					       * before the record is read) */
					      .name = copy };
		memcpy(recs[nrecs - 1].dims, dims, sizeof(recs[0].dims));
	}
	full = full_at && nrecs >= full_at;
	pthread_mutex_unlock(&lock);
	if (full)
		deliver(2);
}

static void on_copy(void *ctx, void *stream, unsigned long long start, unsigned long long end,
		    unsigned long long bytes, int set)
{
	pthread_mutex_lock(&lock);
	if (set ? sets_on : copies_on) {
		if (nrecs == caprecs) {
			caprecs = caprecs ? 2 * caprecs : 1024;
			recs = realloc(recs, caprecs * sizeof(*recs));
		}
		if (!thread_no)
			thread_no = ++threads;
		recs[nrecs++] = (struct rec){ .kind = set ? GS_CUPTI_ACTIVITY_KIND_MEMSET
							  : GS_CUPTI_ACTIVITY_KIND_MEMCPY,
					      .ctx = id_of(ctx),
					      .stream = id_of(stream),
					      .thread = thread_no,
					      .start = start,
					      .end = end,
					      .bytes = bytes };
	}
	pthread_mutex_unlock(&lock);
}

/* The double of libcuda's function, wherever it was loaded (Python's ctypes loads it
 * RTLD_LOCAL: not found by RTLD_DEFAULT), as CUPTI finds the driver. */
static void *cuda_sym(const char *name)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), *p;

	p = h ? dlsym(h, name) : NULL;
	if (h)
		dlclose(h);
	return p ? p : dlsym(RTLD_DEFAULT, name);
}

static void hook(kernel_hook_fn fn)
{
	set_hook_fn set = (set_hook_fn)cuda_sym("fakecuda_kernel_hook");

	if (set)
		set(fn);
}

static void hook_copies(void)
{
	set_copy_hook_fn set = (set_copy_hook_fn)cuda_sym("fakecuda_copy_hook");

	if (set)
		set(on_copy);
}

/* The records of kernels that have ended (all: forced), delivered in buffers. */
static int by_thread(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* how: 0 the ended (not while held), 1 all (forced), 2 the ended, held or not. One
 * delivery at a time, its buffers completed in order (a flush and a full buffer at once:
 * the client would see the later records first otherwise). */
static void deliver(int how)
{
	static pthread_mutex_t delivering = PTHREAD_MUTEX_INITIALIZER;

	pthread_mutex_lock(&delivering);
	deliver_locked(how);
	pthread_mutex_unlock(&delivering);
}

static void deliver_locked(int how)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC), off = clock_ns(CLOCK_REALTIME) - now;
	int forced = how == 1;

	if (hold && !how)
		return;
	if (per_thread) {
		pthread_mutex_lock(&lock);
		qsort(recs, nrecs, sizeof(*recs), by_thread);
		pthread_mutex_unlock(&lock);
	}
	for (;;) {
		uint8_t *buf = NULL;
		size_t size = 0, max = 0, valid = 0, k = 0, left = 0;

		pthread_mutex_lock(&lock);
		if (!request || !complete || !nrecs) {
			pthread_mutex_unlock(&lock);
			return;
		}
		pthread_mutex_lock(&req_lock);
		if (slow_request_ms) {
			struct timespec t = { slow_request_ms / 1000,
					      (long)(slow_request_ms % 1000) * 1000000L };

			nanosleep(&t, NULL);
		}
		request(&buf, &size, &max);
		pthread_mutex_unlock(&req_lock);
		if (!buf || size < GS_CUPTI_K_SIZE) {
			pthread_mutex_unlock(&lock);
			return;
		}
		buf_requests++;
		if (zeroed_out) {
			buf_client++;
			for (size_t i = 0; i < size; i++)
				if (buf[i]) {
					buf_unclear++;
					break;
				}
		}
		memset(buf, 0, size);
		for (size_t i = 0; i < nrecs; i++) {
			struct rec *r = &recs[i];
			uint8_t *p = buf + valid;
			uint64_t s = r->start + off, e = r->end + off;

			if ((!forced && r->end > now) || valid + GS_CUPTI_K_SIZE > size ||
			    (max && k == max)) {
				recs[left++] = *r;
				continue;
			}
			memcpy(p, &r->kind, 4);
			if (r->kind != GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
				memcpy(p + GS_CUPTI_C_BYTES, &r->bytes, 8);
				memcpy(p + GS_CUPTI_C_START, &s, 8);
				memcpy(p + GS_CUPTI_C_END, &e, 8);
				memcpy(p + GS_CUPTI_C_CONTEXT, &r->ctx, 4);
				memcpy(p + GS_CUPTI_C_STREAM, &r->stream, 4);
				valid += GS_CUPTI_K_SIZE;
				k++;
				continue;
			}
			memcpy(p + GS_CUPTI_K_START, &s, 8);
			memcpy(p + GS_CUPTI_K_END, &e, 8);
			memcpy(p + GS_CUPTI_K_CONTEXT, &r->ctx, 4);
			memcpy(p + GS_CUPTI_K_STREAM, &r->stream, 4);
			memcpy(p + GS_CUPTI_K_GRID, r->dims, sizeof(r->dims));
			memcpy(p + GS_CUPTI_K_NAME, &r->name, sizeof(r->name));
			memcpy(p + GS_CUPTI_K_GRAPH, &r->graph, 4);
			valid += GS_CUPTI_K_SIZE;
			k++;
		}
		nrecs = left;
		pthread_mutex_unlock(&lock);
		for (size_t i = 0; reverse && i < k / 2; i++) {
			uint8_t t[GS_CUPTI_K_SIZE], *a = buf + i * GS_CUPTI_K_SIZE,
						    *b = buf + (k - 1 - i) * GS_CUPTI_K_SIZE;

			memcpy(t, a, sizeof(t));
			memcpy(a, b, sizeof(t));
			memcpy(b, t, sizeof(t));
		}
		complete(NULL, 0, buf, size, valid);
		if (!k || !left || !forced)
			return;
	}
}

static void *flusher(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec t = { 0, (long)period_ms * 1000000L };

		nanosleep(&t, NULL);
		deliver(0);
	}
	return NULL;
}

static void write_calls(void)
{
	const char *path = getenv("FAKECUPTI_CALLS");
	FILE *f = path ? fopen(path, "w") : NULL;

	if (f) {
		fputs(calls, f);
		fclose(f);
	}
	path = getenv("FAKECUPTI_BUFFERS");
	if (path && (f = fopen(path, "w"))) {
		fprintf(f, "requests %lu client-cleared %lu unclear %lu cleared-at-exit %d\n",
			buf_requests, buf_client, buf_unclear, zeroed_out);
		fclose(f);
	}
	path = getenv("FAKECUPTI_SWITCHES");
	if (path && (f = fopen(path, "w"))) {
		fprintf(f, "enabled %lu disabled %lu sets enabled %lu disabled %lu\n", kernel_on_n,
			kernel_off_n, set_on_n, set_off_n);
		fclose(f);
	}
}

__attribute__((constructor)) static void init(void)
{
	const char *s = getenv("FAKECUPTI_LOSE");

	lose_at = s ? strtoul(s, NULL, 10) : 0;
	s = getenv("FAKECUPTI_MISNAME");
	misname_at = s ? strtoul(s, NULL, 10) : 0;
	full_at = getenv("FAKECUPTI_FULL") ? strtoul(getenv("FAKECUPTI_FULL"), NULL, 10) : 0;
	reverse = getenv("FAKECUPTI_REVERSE") != NULL;
	per_thread = getenv("FAKECUPTI_PER_THREAD") != NULL;
	hold = getenv("FAKECUPTI_HOLD") != NULL;
	s = getenv("FAKECUPTI_SLOW_REQUEST_MS");
	slow_request_ms = s ? (unsigned int)strtoul(s, NULL, 10) : 0;
	atexit(write_calls);
}

EXPORT int cuptiActivityRegisterCallbacks(gs_cupti_request_fn req, gs_cupti_complete_fn done)
{
	called("cuptiActivityRegisterCallbacks");
	if (!req || !done)
		return ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	request = req;
	complete = done;
	pthread_mutex_unlock(&lock);
	return GS_CUPTI_SUCCESS;
}

/* Under lock: the flag of a kind the double records, or NULL. */
static int *kind_on(int kind)
{
	return kind == GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ? &kernels_on
	       : kind == GS_CUPTI_ACTIVITY_KIND_MEMCPY		? &copies_on
	       : kind == GS_CUPTI_ACTIVITY_KIND_MEMSET		? &sets_on
								: NULL;
}

/* A kind switched on or off, and the switch counted (FAKECUPTI_SWITCHES). */
static void switch_kind(int kind, int on)
{
	pthread_mutex_lock(&lock);
	if (kind_on(kind))
		*kind_on(kind) = on;
	if (kind == GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		(*(on ? &kernel_on_n : &kernel_off_n))++;
	if (kind == GS_CUPTI_ACTIVITY_KIND_MEMSET)
		(*(on ? &set_on_n : &set_off_n))++;
	pthread_mutex_unlock(&lock);
}

EXPORT int cuptiActivityEnable(int kind)
{
	called("cuptiActivityEnable");
	switch_kind(kind, 1);
	if (kind == GS_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		hook(on_kernel);
	else if (kind_on(kind))
		hook_copies();
	return GS_CUPTI_SUCCESS;
}

EXPORT int cuptiActivityDisable(int kind)
{
	switch_kind(kind, 0);
	return GS_CUPTI_SUCCESS;
}

/* CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER (5, a uint8_t) only. */
EXPORT int cuptiActivitySetAttribute(int attr, size_t *size, void *value)
{
	if (attr != 5 || !size || *size != 1 || !value)
		return ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&req_lock);
	zeroed_out = *(uint8_t *)value != 0;
	pthread_mutex_unlock(&req_lock);
	return GS_CUPTI_SUCCESS;
}

EXPORT int cuptiActivityFlushAll(uint32_t flag)
{
	deliver(flag & 1);
	return GS_CUPTI_SUCCESS;
}

EXPORT int cuptiActivityFlushPeriod(uint32_t ms)
{
	pthread_t t;

	pthread_mutex_lock(&lock);
	if (!period_ms && ms) {
		period_ms = ms;
		pthread_create(&t, NULL, flusher, NULL);
	}
	pthread_mutex_unlock(&lock);
	return GS_CUPTI_SUCCESS;
}

EXPORT int cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, void **rec)
{
	uint8_t *next = *rec ? (uint8_t *)*rec + GS_CUPTI_K_SIZE : buf;

	if (next + GS_CUPTI_K_SIZE > buf + valid)
		return ERROR_MAX_LIMIT_REACHED;
	*rec = next;
	return GS_CUPTI_SUCCESS;
}

EXPORT int cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *n)
{
	(void)ctx;
	(void)stream;
	*n = 0;
	return GS_CUPTI_SUCCESS;
}

EXPORT int cuptiGetContextId(void *ctx, uint32_t *id)
{
	pthread_mutex_lock(&lock);
	*id = id_of(ctx);
	pthread_mutex_unlock(&lock);
	return GS_CUPTI_SUCCESS;
}

EXPORT int cuptiGetStreamIdEx(void *ctx, void *stream, uint8_t per_thread, uint32_t *id)
{
	stream_of_fn of = (stream_of_fn)cuda_sym("fakecuda_stream_of");

	(void)ctx;
	if (!of)
		return ERROR_INVALID_PARAMETER;
	stream = of(stream, per_thread);
	pthread_mutex_lock(&lock);
	*id = id_of(stream);
	pthread_mutex_unlock(&lock);
	return GS_CUPTI_SUCCESS;
}

EXPORT int cuptiSubscribe(void *subscriber, void *callback, void *userdata)
{
	(void)subscriber;
	(void)callback;
	(void)userdata;
	called("cuptiSubscribe");
	return GS_CUPTI_SUCCESS;
}
