// SPDX-License-Identifier: MIT
/* A step's GPU time and its thread's waits for the GPU: each the union of the spans inside
 * the step, as a span-by-span count from the start gives it, for spans that overlap, cross
 * steps, or belong to other threads (steps_find.c counts them in one pass). */
#include <stdlib.h>

#include "unit.h"
#include "analysis/model.h"
#include "analysis/steps_int.h"

#define STEPS 300
#define TID   7

static void push(struct arr *a, const void *item, size_t size)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 64;
		a->v = realloc(a->v, a->cap * size);
		assert_non_null(a->v);
	}
	memcpy((char *)a->v + a->n++ * size, item, size);
}

/* The union of the spans of class cls (C_NCLS: any) and thread tid (0: any) within
 * [from, to), every span looked at. */
static __u64 truth(const struct arr *a, __u32 cls, __u32 tid, __u64 from, __u64 to)
{
	__u64 sum = 0;

	/* (1 ns at a time: the spans are short enough) */
	for (__u64 t = from; t < to; t++) {
		const struct span *v = a->v;

		for (size_t i = 0; i < a->n; i++)
			if (v[i].start <= t && t < v[i].end && (cls == C_NCLS || v[i].cls == cls) &&
			    (!tid || v[i].tid == tid)) {
				sum++;
				break;
			}
	}
	return sum;
}

static void spans_counted_once_each(void **state)
{
	struct model *m = model__new();
	struct sproc p = { .pid = 1 };
	struct found f;
	__u64 t = 1000;

	(void)state;
	srand(22);
	/* Each step: kernels 0xA and 0xB launched by TID, 200-400 ns apart; GPU spans of
	 * random lengths, some crossing into the next steps, some overlapping; host spans of
	 * TID's (waits and copies) and of another thread. */
	for (int i = 0; i < STEPS; i++) {
		struct launch la = { .ts = t, .func = 0xA, .tid = TID }, lb = {
			.ts = t + 200 + (__u64)(rand() % 200), .func = 0xB, .tid = TID
		};
		struct span g = { .start = t + (__u64)(rand() % 300),
				  .end = 0,
				  .tid = TID,
				  .cls = C_GPU_COMPUTE },
			    h = { .start = t + (__u64)(rand() % 500),
				  .end = 0,
				  .tid = rand() % 3 ? TID : TID + 1,
				  .cls = rand() % 4 ? C_SYNC : C_COPY_CALL };

		push(&p.launches, &la, sizeof(la));
		push(&p.launches, &lb, sizeof(lb));
		g.end = g.start + (__u64)(rand() % (i % 17 ? 400 : 2500));
		push(&p.gpu, &g, sizeof(g));
		if (rand() % 2) {
			g.start += 50;
			g.end = g.start + (__u64)(rand() % 300);
			g.cls = C_GPU_COPY;
			push(&p.gpu, &g, sizeof(g));
		}
		h.end = h.start + (__u64)(rand() % (i % 13 ? 300 : 1800));
		push(&p.host, &h, sizeof(h));
		t = lb.ts + 100 + (__u64)(rand() % 500);
	}
	steps_find(m, &p, NULL, &f);
	assert_int_equal(f.n, STEPS);
	for (size_t i = 0; i < f.n; i++) {
		__u64 to = f.v[i].start + f.v[i].dur;

		assert_int_equal(f.v[i].launches, 2);
		assert_int_equal(f.v[i].gpu_ns, truth(&p.gpu, C_NCLS, 0, f.v[i].start, to));
		assert_int_equal(f.v[i].sync_ns, truth(&p.host, C_SYNC, TID, f.v[i].start, to));
	}
	free(f.v);
	free(p.launches.v);
	free(p.gpu.v);
	free(p.host.v);
	hmap_free(&p.func_in);
	model__free(m);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(spans_counted_once_each),
};

UNIT_MAIN(tests)
