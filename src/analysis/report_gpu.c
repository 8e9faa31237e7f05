// SPDX-License-Identifier: MIT
/* The report's GPU time: kernels by GPU time, graphs, streams and devices. */
#include <stdlib.h>
#include <string.h>

#include "analysis/report_int.h"
#include "core/util.h"

static const struct report *sort_r; /* qsort has no context argument */

static int by_gpu_total(const void *a, const void *b)
{
	const struct rep_kernel *x = &sort_r->kernels[*(const size_t *)a];
	const struct rep_kernel *y = &sort_r->kernels[*(const size_t *)b];

	if (x->gpu->total_ns != y->gpu->total_ns)
		return x->gpu->total_ns < y->gpu->total_ns ? 1 : -1;
	return strcmp(x->display, y->display);
}

static int by_busy(const void *a, const void *b)
{
	const struct stream_stat *x = a, *y = b;

	if (x->busy_ns != y->busy_ns)
		return x->busy_ns < y->busy_ns ? 1 : -1;
	if (x->pid != y->pid)
		return GS_CMP(x->pid, y->pid);
	return GS_CMP(x->stream, y->stream);
}

static int by_device(const void *a, const void *b)
{
	const struct dev_busy *x = a, *y = b;

	return GS_CMP(x->device, y->device);
}

/* A device's totals with everything pending merged, leaving the model as it is. */
static void device_final(const struct dev_stat *d, struct dev_busy *out)
{
	struct dev_stat t = *d;

	t.pending = NULL;
	t.npending = t.cap = 0;
	if (d->npending) {
		t.pending = xmalloc(d->npending * sizeof(*t.pending));
		memcpy(t.pending, d->pending, d->npending * sizeof(*t.pending));
		t.npending = t.cap = d->npending;
	}
	model__dev_flush(&t, UINT64_MAX);
	if (t.have_cur)
		t.b.busy_ns += t.cur_end - t.cur_start;
	free(t.pending);
	*out = t.b;
}

void report__build_gpu(struct report *r, const struct model *m)
{
	const struct hmap_slot *s;
	size_t n = 0;

	r->inject = m->have_start && (m->start.flags & GS_SESSION_INJECT);
	r->gpu_time = r->inject ? m->start.gpu_time : 0;
	r->gpu_chains = r->inject && (m->start.flags & GS_SESSION_GPU_CHAINS);
	r->gpu_cupti = r->inject && (m->start.flags & GS_SESSION_GPU_CUPTI);
	r->gpu_cupti_graphs = r->gpu_cupti && (m->start.flags & GS_SESSION_GPU_CUPTI_GRAPHS);
	r->cupti_on = m->cupti_states[GS_CUPTI_ON];
	r->cupti_missing = m->cupti_states[GS_CUPTI_MISSING];
	r->cupti_handed = m->cupti_states[GS_CUPTI_HANDED];
	r->cupti_unmatched = m->cupti_unmatched;
	r->gpu_records = m->gpu_records;
	r->gpu_start_unknown = m->gpu_start_unknown;
	r->gpu_start_late = m->gpu_start_late;
	r->gpu_end_late = m->gpu_end_late;
	r->gpu_copy_end_late = m->gpu_copy_end_late;
	r->gpu_order = xcalloc(r->nkernels + 1, sizeof(*r->gpu_order));
	for (size_t i = 0; i < r->nkernels; i++)
		if (r->kernels[i].gpu && r->kernels[i].gpu->count) {
			r->gpu_order[r->ngpu_kernels++] = i;
			r->gpu_kernel_ns += r->kernels[i].gpu->total_ns;
		}
	sort_r = r;
	qsort(r->gpu_order, r->ngpu_kernels, sizeof(*r->gpu_order), by_gpu_total);
	hmap_for_each (&m->graph_execs, s) {
		const struct kstat *k = s->val;

		if (k->gpu && k->gpu->count)
			model__gpu_merge(&r->graph_gpu, k->gpu);
	}
	if (m->retired_graph_gpu.count)
		model__gpu_merge(&r->graph_gpu, &m->retired_graph_gpu);
	r->streams = xcalloc(m->streams.len + 1, sizeof(*r->streams));
	hmap_for_each (&m->streams, s)
		r->streams[n++] = *(const struct stream_stat *)s->val;
	r->nstreams = n;
	qsort(r->streams, n, sizeof(*r->streams), by_busy);
	n = 0;
	r->devices = xcalloc(m->devices.len + 1, sizeof(*r->devices));
	hmap_for_each (&m->devices, s)
		device_final(s->val, &r->devices[n++]);
	r->ndevices = n;
	qsort(r->devices, n, sizeof(*r->devices), by_device);
}

void report__free_gpu(struct report *r)
{
	for (size_t i = 0; i < r->nkernels; i++)
		free(r->kernels[i].gpu);
	free(r->gpu_order);
	free(r->streams);
	free(r->devices);
}
