// SPDX-License-Identifier: MIT
/*
 * The CUPTI plane's state (gputime_cupti_int.h), and what its debug lines count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject/gputime_cupti_int.h"

struct cupti_state CU = { .lock = PTHREAD_MUTEX_INITIALIZER,
			  .pause_lock = PTHREAD_MUTEX_INITIALIZER,
			  .pause_what = PAUSE_KERNELS | PAUSE_COPIES,
			  .made = 1 };

/* For diagnosing the plane itself (GPUSCOPE_INJECT_DEBUG). */
bool gc_debug_on(void)
{
	static int on = -1;

	if (on < 0)
		on = getenv("GPUSCOPE_INJECT_DEBUG") != NULL;
	return on;
}

/* GPUSCOPE_CUPTI_DUMP=path (diagnosing the matching): the first DUMP_N / 2 launches queued
 * and records read, written there at exit. */
#define DUMP_N 4000
struct dump_row {
	__u64 t;
	__u32 stream, dims[KEY_N]; /* (with the name's hash) */
	__u16 api;
	bool record;
};
static struct dump_row *dump;
static int ndump, ndumped[2];

void gc_dump_add(bool record, __u64 t, __u32 stream, const __u32 *dims, __u16 api)
{
	static int on = -1;

	if (on < 0)
		on = getenv("GPUSCOPE_CUPTI_DUMP") && (dump = calloc(DUMP_N, sizeof(*dump)));
	if (!on || ndumped[record] >= DUMP_N / 2)
		return;
	ndumped[record]++;
	dump[ndump] = (struct dump_row){ .t = t, .stream = stream, .api = api, .record = record };
	memcpy(dump[ndump++].dims, dims, sizeof(dump[0].dims));
}

void gc_dump_write(void)
{
	FILE *f = dump ? fopen(getenv("GPUSCOPE_CUPTI_DUMP"), "w") : NULL;

	for (int i = 0; f && i < ndump; i++)
		fprintf(f, "%s %llu %u %u,%u,%u %u,%u,%u %08x%08x %u\n",
			dump[i].record ? "rec" : "launch", (unsigned long long)dump[i].t,
			dump[i].stream, dump[i].dims[0], dump[i].dims[1], dump[i].dims[2],
			dump[i].dims[3], dump[i].dims[4], dump[i].dims[5], dump[i].dims[7],
			dump[i].dims[6], dump[i].api);
	if (f)
		fclose(f);
}

__u64 gc_nq[NQ_N];

__u64 gc_unplaced[NQ_N]; /* (under CU.lock: launches put, not placed: lost) */

void gc_not_queued(int why)
{
	__atomic_fetch_add(&gc_nq[why], 1, __ATOMIC_RELAXED);
}
