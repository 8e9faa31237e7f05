// SPDX-License-Identifier: MIT
/*
 * GPU time: what the in-process plane measured with CUDA events around launches and
 * asynchronous copies (GS_EV_GPU), per kernel, per copy direction, per stream and device.
 *
 * When an operation started. The start event completes when everything before it on the
 * stream has finished. If the stream was busy, the operation starts right after: the
 * event's time is its start. If the stream was idle, the event completes as soon as it is
 * submitted, which is before the operation itself was submitted: the operation cannot
 * start before it was submitted (a launch at the end of its call, which may first have
 * loaded a module for milliseconds; a copy during its call), so its start is taken as the
 * later of the two. That keeps the host-side cost of the call out of the GPU time. Gated
 * operations (src/inject/gate.h: every launch but a kernel's first) need none of this.
 *
 * What an event pair adds. Events are processed by the GPU's front end, a kernel's
 * launch and drain come between: a pair measures more than the kernel itself (CUPTI's
 * duration), by about the same whatever the kernel (on an H100: 2.37, 2.43 and 2.75 us
 * for kernels under 2 us, 2-50 us and over 50 us; bench/gputime_bias.py). The in-process
 * plane measures per context two things that bracket it (GS_GPU_CALIBRATION): a gated
 * pair around a kernel of ours less the kernel's own reading of its span (O: too much by
 * the kernel's launch and drain that its clock does not see, about 1 us: 3.33 us on the
 * H100), and a gated pair with nothing between (E: too little by the same kind of cost,
 * 1.28 us). Kernel times have their midpoint taken off, (O + E) / 2 of the device's
 * medians (2.30 us there: kernels under 2 us then read 64 ns long at the median, where
 * O alone made them 960 ns short, 79%), half at each end of the interval; O alone where
 * no E was measured (older recordings). But where the point between O and E that matches
 * CUPTI lies differs between machines (0.53-0.65 of the way on one-GPU H100 machines,
 * 0.60-0.75 on one-GPU H200s, 0.37-0.47 on two-GPU H200s, whose E is 2.9-3.2 us), while what a
 * kernel adds to an empty pair beyond CUPTI's duration (L, the pair's excess over CUPTI
 * less E) stays within 977-1,392 ns on all three (bench/results/launch-2026-11-27.md):
 * what the front end spends on a kernel is the GPU's, what events cost is the machine's.
 * Where the in-process plane knows L for the GPU's architecture (GS_CAL_LAUNCH, or
 * GPUSCOPE_EVENT_LAUNCH_NS), E + L is taken off instead (never more than O).
 *
 * Idle gaps. Event times are good to about half a microsecond (and elapsed times come as
 * float milliseconds), so a pause shorter than GAP_MIN_NS between two operations is not
 * told apart from none: it counts as busy, not as a gap.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/names.h"
#include "core/util.h"
#include "gpuscope/cuda_abi.h"

#define WATERMARK_NS	 2000000000ULL /* how far behind the latest call a record may come */
#define PENDING_FLUSH_AT 8192
#define GAP_MIN_NS	 1000
#define QUEUE_WAIT_NS	 1000000ULL /* a kernel's wait on the GPU worth a finding */
/* An ungated launch on an idle stream started somewhere between its start event and the
 * end of its call: past this, its duration is not known well enough to count. */
#define IDLE_WINDOW_NS 50000ULL

static struct gpu_stat *gpu_stat_of(struct kstat *k)
{
	if (!k->gpu) {
		k->gpu = xcalloc(1, sizeof(*k->gpu));
		k->gpu->min_ns = UINT64_MAX;
	}
	return k->gpu;
}

static void add_to_stat(struct gpu_stat *g, const struct gs_ev_gpu *e, __u64 dur, __u64 queue,
			bool idle)
{
	g->by_driver += !!(e->flags2 & GS_GPU_BY_DRIVER);
	g->gated += (e->flags & (GS_GPU_GATED | GS_GPU_CARRIED)) == GS_GPU_GATED &&
		    !(e->flags2 & GS_GPU_BY_DRIVER);
	g->chained += !!(e->flags & GS_GPU_CHAINED);
	g->followed += (e->flags & (GS_GPU_FROM_PREV | GS_GPU_CHAINED)) == GS_GPU_FROM_PREV;
	g->carried += !!(e->flags & GS_GPU_CARRIED);
	g->count++;
	g->total_ns += dur;
	g->min_ns = GS_MIN(g->min_ns, dur);
	g->max_ns = GS_MAX(g->max_ns, dur);
	g->queue_ns += queue;
	g->idle_starts += idle;
	hist__add(&g->dur, dur);
	hist__add(&g->queue, queue);
}

static struct dev_stat *device_of(struct model *m, __s32 device);

__u64 model__stream_key(__u64 stream, __u32 tid, __u16 api)
{
	const struct gs_api_desc *d = api_desc(api);

	/* The legacy stream has two names; each thread has its own per-thread stream (what
	 * NULL means to the _ptsz variants). */
	if (stream == GS_CU_STREAM_LEGACY)
		stream = 0;
	if (!stream && d && (d->flags & GS_AF_PTSZ))
		stream = GS_CU_STREAM_PER_THREAD;
	return stream | (__u64)(stream == GS_CU_STREAM_PER_THREAD ? tid : 0) << 32;
}

/* ready: when the operation could have started (submitted, its stream's work before it
 * done); 0 for one that is not to be judged. */
static void add_stream(struct model *m, const struct gs_ev_gpu *e, __u64 submitted, __u64 start,
		       __u64 end)
{
	__u64 key = model__stream_key(e->stream, e->h.tid, 0), ready;
	__u64 stream = e->stream == GS_CU_STREAM_LEGACY ? 0 : e->stream;
	__u32 tid = stream == GS_CU_STREAM_PER_THREAD ? e->h.tid : 0;
	struct stream_stat *s = hmap_get(&m->streams, e->h.pid, key);
	__u64 from;

	if (!s) {
		s = xcalloc(1, sizeof(*s));
		s->pid = e->h.pid;
		s->tid = tid;
		s->stream = stream;
		s->device = e->device;
		s->first_start = start;
		hmap_put(&m->streams, e->h.pid, key, s);
	}
	/* A kernel that started well after it could have: it waited for something else. */
	ready = s->ops ? GS_MAX(submitted, s->last_end) : submitted;
	if (submitted && (e->kind == GS_GPU_KERNEL || e->kind == GS_GPU_GRAPH) &&
	    start >= ready + QUEUE_WAIT_NS) {
		const struct dev_stat *d = device_of(m, e->device);

		MODEL_NOTIFY(m, queue_wait, e, key, s->ops ? s->last_call : 0, ready, start,
			     d->recent, GS_MIN(d->nrecent, DEV_RECENT));
	}
	s->last_call = e->h.ts;
	/* A stream runs its work in order: a gap is the time from one end to the next start;
	 * what is closer than a gap continues the busy time from the previous end. */
	from = start;
	if (s->ops && start >= s->last_end + GAP_MIN_NS) {
		__u64 gap = start - s->last_end;

		s->gaps++;
		MODEL_NOTIFY(m, gap, e, s->last_end, start);
		s->idle_ns += gap;
		s->max_gap_ns = GS_MAX(s->max_gap_ns, gap);
	} else if (s->ops) {
		from = GS_MIN(s->last_end, end);
	}
	s->busy_ns += end > from ? end - from : 0;
	s->last_end = GS_MAX(s->last_end, end);
	s->first_start = GS_MIN(s->first_start, start);
	s->ops++;
}

/* ---- device busy time: the union of intervals ---------------------------------------- */

static void dev_merge(struct dev_stat *d, __u64 start, __u64 end)
{
	if (!d->have_cur) {
		d->cur_start = start;
		d->cur_end = end;
		d->have_cur = true;
		d->b.first_start = start;
		return;
	}
	if (start < d->cur_start) {
		/* Behind what is already final: extend what can be extended. */
		d->b.late++;
		d->cur_end = GS_MAX(d->cur_end, end);
		return;
	}
	if (start < d->cur_end + GAP_MIN_NS) {
		d->cur_end = GS_MAX(d->cur_end, end);
		return;
	}
	d->b.busy_ns += d->cur_end - d->cur_start;
	d->b.gaps++;
	d->b.idle_ns += start - d->cur_end;
	d->b.max_gap_ns = GS_MAX(d->b.max_gap_ns, start - d->cur_end);
	d->cur_start = start;
	d->cur_end = end;
}

static int by_start(const void *a, const void *b)
{
	const __u64 *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Merge every pending interval that starts before `upto`, in start order. */
void model__dev_flush(struct dev_stat *d, __u64 upto)
{
	size_t keep = 0;

	d->b.flushes++;
	if (d->npending) /* (none yet: no array to give qsort) */
		qsort(d->pending, d->npending, sizeof(*d->pending), by_start);
	for (size_t i = 0; i < d->npending; i++) {
		if (d->pending[i].start < upto)
			dev_merge(d, d->pending[i].start, d->pending[i].end);
		else
			d->pending[keep++] = d->pending[i];
	}
	d->npending = keep;
	/* What stays is sorted again at the next flush: wait for it to double (a flush per
	 * record would be quadratic when more than PENDING_FLUSH_AT records come within the
	 * watermark, as at 200k launches a second). */
	d->flush_at = GS_MAX((size_t)PENDING_FLUSH_AT, 2 * keep);
}

static struct dev_stat *device_of(struct model *m, __s32 device)
{
	struct dev_stat *d = hmap_get(&m->devices, (__u64)(__s64)device + 1, 0);

	if (!d) {
		d = xcalloc(1, sizeof(*d));
		d->b.device = device;
		hmap_put(&m->devices, (__u64)(__s64)device + 1, 0, d);
	}
	return d;
}

static __u64 median16(const __u64 *x, unsigned int n)
{
	__u64 v[16];

	memcpy(v, x, n * sizeof(v[0]));
	qsort(v, n, sizeof(v[0]), u64_cmp);
	return v[n / 2];
}

/* The midpoint of what a pair around a kernel adds (o, too much) and an empty pair (x, too
 * little); o alone without x. */
static __u64 midpoint(const __u64 *o, unsigned int no, const __u64 *x, unsigned int nx)
{
	__u64 mo = median16(o, no), mx = nx ? median16(x, nx) : mo;

	return mx < mo ? (mo + mx) / 2 : mo;
}

/* Inside graphs (GS_CAL_GRAPH, GS_CAL_GRAPH_EMPTY): the twins' event nodes, measured the
 * same way; the pairs' where not measured. And a carrier's (GS_CAL_CARRIED, _EMPTY). */
static void add_graph_calibration(struct dev_stat *d, const struct gs_ev_gpu *e)
{
	__u64 ns = e->end_ns - e->start_ns;

	if (e->func == GS_CAL_GRAPH && d->ngcal < 16)
		d->gcal[d->ngcal++] = ns;
	else if (e->func == GS_CAL_GRAPH_EMPTY && d->ngempty < 16)
		d->gempty[d->ngempty++] = ns;
	else if (e->func == GS_CAL_CARRIED && d->nccal < 16)
		d->ccal[d->nccal++] = ns;
	else if (e->func == GS_CAL_CARRIED_EMPTY && d->ncempty < 16)
		d->cempty[d->ncempty++] = ns;
}

/*
 * What a carrier's event nodes add (src/inject/gputime_carry.c): what a gated pair adds,
 * and what the calibration kernel reads more in a carrier set before each run, as a
 * launch sets it, than between a gated pair (GS_CAL_CARRIED less GS_CAL_OVERHEAD, never
 * below nothing); the pairs' where not measured. Measured on an H200 that is 0.2-0.5 us
 * more than a pair, where PyTorch's short kernels read 0.8-1.8 us more than paired ones
 * (3-4 us under the PyTorch profiler): carried durations of those stay long, which is why
 * carriers are opt-in (bench/results/carry-2026-11-27-h200.md).
 */
static __u64 carried_overhead(const struct dev_stat *d)
{
	__s64 more = (__s64)median16(d->ccal, d->nccal) - (__s64)median16(d->cal, d->ncal);

	if (!d->nccal || !d->ncal)
		return d->b.overhead_ns;
	return (__u64)GS_MAX((__s64)d->b.overhead_ns + more, 0);
}

/* What a pair adds: E and what a kernel adds to it (L), where L is known for the device
 * (GS_CAL_LAUNCH), never more than O; else the midpoint. */
static void set_overhead(struct dev_stat *d)
{
	__u64 mo = median16(d->cal, d->ncal);

	d->b.launch_ns = d->nempty ? d->launch : 0;
	d->b.overhead_ns = d->b.launch_ns ? GS_MIN(median16(d->empty, d->nempty) + d->launch, mo)
					  : midpoint(d->cal, d->ncal, d->empty, d->nempty);
	/* A kernel launched onto a busy stream (ungated, its start the end event of the launch
	 * before it or its own start event queued behind work) reads as a gated one does where
	 * events are slow, but never less than a floor of the architecture's: on one-GPU H100
	 * and H200 machines (bench/busy_bias.py, 8 processes) 3.0-3.3 us over CUPTI's duration
	 * under 50 us, where E + L is 2.5 us (and O 3.2-3.5 us); on a two-GPU H200 4.1-4.2 us,
	 * as E + L (O 5.6 us). So the larger of what a gated pair adds and that floor
	 * (GS_CAL_BUSY_MIN) where it is known. */
	d->b.busy_min_ns = d->busy_min;
	d->b.busy_overhead_ns = GS_MAX(d->b.overhead_ns, d->b.busy_min_ns);
}

static void add_calibration(struct model *m, const struct gs_ev_gpu *e)
{
	struct dev_stat *d = device_of(m, e->device);

	add_graph_calibration(d, e);
	if (d->ngcal)
		d->b.graph_overhead_ns = midpoint(d->gcal, d->ngcal, d->gempty, d->ngempty);
	if (e->func == GS_CAL_OVERHEAD && d->ncal < 16)
		d->cal[d->ncal++] = e->end_ns - e->start_ns;
	else if (e->func == GS_CAL_EMPTY && d->nempty < 16)
		d->empty[d->nempty++] = e->end_ns - e->start_ns;
	else if (e->func == GS_CAL_LAUNCH)
		d->launch = e->end_ns - e->start_ns;
	else if (e->func == GS_CAL_BUSY_MIN)
		d->busy_min = e->end_ns - e->start_ns;
	else if (e->func != GS_CAL_GRAPH && e->func != GS_CAL_GRAPH_EMPTY &&
		 e->func != GS_CAL_CARRIED && e->func != GS_CAL_CARRIED_EMPTY)
		return;
	if (!d->ncal)
		return;
	set_overhead(d);
	/* A chained launch's pair (the end event before it, its own) is taken as a pair's.
	 * Measured: on an H100 it read 0.26 us more than a pair's against CUPTI at the median
	 * for kernels under 2 us, but the calibration kernels' difference (GS_CAL_CHAINED less
	 * GS_CAL_OVERHEAD) came out the other way (-0.23 us on an H200), and taking it off
	 * made short kernels worse: the record is kept for bench/gputime_bias.py, not used. */
	d->b.chained_overhead_ns = d->b.overhead_ns;
	if (!d->ngcal)
		d->b.graph_overhead_ns = d->b.overhead_ns;
	d->b.carried_overhead_ns = carried_overhead(d);
}

static void add_device(struct model *m, const struct gs_ev_gpu *e, __u64 start, __u64 end)
{
	struct dev_stat *d = device_of(m, e->device);

	d->b.ops++;
	d->b.last_end = GS_MAX(d->b.last_end, end);
	d->recent[d->nrecent++ % DEV_RECENT] =
		(struct gpu_op){ .start = start,
				 .end = end,
				 .stream = model__stream_key(e->stream, e->h.tid, 0),
				 .func = e->func,
				 .pid = e->h.pid,
				 .tid = e->h.tid };
	if (d->npending == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 256;
		d->pending = xrealloc(d->pending, d->cap * sizeof(*d->pending));
	}
	d->pending[d->npending].start = start;
	d->pending[d->npending++].end = end;
	if (d->npending >= GS_MAX((size_t)PENDING_FLUSH_AT, d->flush_at) &&
	    m->gpu_latest_call > WATERMARK_NS)
		model__dev_flush(d, m->gpu_latest_call - WATERMARK_NS);
}

/* ---- records --------------------------------------------------------------------------- */

void model__gpu_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_gpu *e = (const void *)ev;
	/* (A kernel inside a graph: its start event is the graph's, right before it.) */
	/* (Or by a carrier: its start event node is right before it.) */
	bool gated = e->flags & (GS_GPU_GATED | GS_GPU_IN_GRAPH | GS_GPU_CARRIED),
	     launch = e->kind == GS_GPU_KERNEL || e->kind == GS_GPU_GRAPH,
	     by_driver = e->flags2 & GS_GPU_BY_DRIVER; /* (CUPTI's: exact) */
	/* Ungated, work cannot start before it was submitted: a launch's at the end of its
	 * call (which may have loaded a module first), a copy's during it. */
	__u64 submitted = launch ? e->call_end_ns : e->h.ts;
	bool idle = !gated && e->start_ns < submitted;
	__u64 start = idle ? GS_MIN(submitted, e->end_ns) : e->start_ns, end = e->end_ns;
	__u64 dur, queue, overhead;
	const struct dev_busy *b;
	bool late_start, late_end;
	struct copy_stat *c;

	if (e->kind == GS_GPU_CALIBRATION && e->func == GS_CAL_CUPTI) {
		if (e->end_ns - e->start_ns < 4)
			m->cupti_states[e->end_ns - e->start_ns]++;
		return;
	}
	if (e->kind == GS_GPU_CALIBRATION && e->func == GS_CAL_CUPTI_UNMATCHED) {
		m->cupti_unmatched += e->end_ns - e->start_ns;
		return;
	}
	if (e->kind == GS_GPU_CALIBRATION) {
		add_calibration(m, e);
		return;
	}
	/* (Which device a context is on, for the calls of a process attached to late.) */
	if (e->ctx && e->device >= 0 && !hmap_get(&model__proc(m, e->h.pid)->ctx_dev, e->ctx, 0))
		model__context_seen(m, e->h.pid, e->ctx, e->device);
	/* Kernels: what the event pair adds, half on each side (its split is not known); a
	 * start taken from the call rather than from its event has no event's share. */
	b = &device_of(m, e->device)->b;
	overhead = !launch || by_driver		  ? 0
		   : (e->flags & GS_GPU_CHAINED)  ? b->chained_overhead_ns
		   : (e->flags & GS_GPU_IN_GRAPH) ? b->graph_overhead_ns
		   : (e->flags & (GS_GPU_CARRIED | GS_GPU_GATED)) == GS_GPU_CARRIED
			   ? b->carried_overhead_ns
		   : !gated && !idle && e->kind == GS_GPU_KERNEL ? b->busy_overhead_ns
								 : b->overhead_ns;
	overhead = GS_MIN(overhead, end - start);
	if (!idle)
		start += overhead / 2;
	end -= overhead - overhead / 2;
	dur = end - start;
	/* (A chain's launches could not start before its gate opened: that wait is ours.) */
	queue = start - GS_MIN(start, (e->flags & GS_GPU_CHAINED) ? GS_MAX(e->h.ts, e->call_end_ns)
								  : e->h.ts);
	m->gpu_records++;
	m->gpu_latest_call = GS_MAX(m->gpu_latest_call, e->h.ts);
	/*
	 * Not known well enough to count: a launch whose gate the watcher opened; an ungated
	 * launch on an idle stream whose call took long after its start event (the thread
	 * descheduled inside the driver, say: it started anywhere in that time); work whose
	 * end event was recorded late and completed soon after (it may have ended before).
	 * On the timeline (a launch from the end of its call, as an ungated start); in no
	 * figures: a duration from it could be wrong either way.
	 */
	late_start = launch && !(e->flags & GS_GPU_START_UNKNOWN) && idle &&
		     submitted - e->start_ns > IDLE_WINDOW_NS;
	late_end = !late_start && (e->flags & GS_GPU_END_LATE);
	if (launch && ((e->flags & GS_GPU_START_UNKNOWN) || late_start || late_end)) {
		gpu_stat_of(model__kstat(e->kind == GS_GPU_KERNEL ? &m->kernels : &m->graph_execs,
					 e->h.pid, e->func))
			->start_unknown++;
		m->gpu_start_unknown++;
		m->gpu_start_late += late_start;
		m->gpu_end_late += !(e->flags & GS_GPU_START_UNKNOWN) && late_end;
	}
	if (!launch && late_end)
		m->gpu_copy_end_late++;
	if ((launch && ((e->flags & GS_GPU_START_UNKNOWN) || late_start)) || late_end) {
		add_stream(m, e, 0, start, end);
		add_device(m, e, start, end);
		return;
	}
	/* A kernel inside a graph (its twin's event nodes, src/inject/gputime_graph.c): no
	 * call of its own to queue behind, and its stream's time is the graph's. */
	if (e->flags & GS_GPU_IN_GRAPH) {
		struct gpu_stat *g = gpu_stat_of(model__kstat(&m->kernels, e->h.pid, e->func));

		add_to_stat(g, e, dur, 0, false);
		g->in_graph++;
		MODEL_NOTIFY(m, gpu, e, dur);
		add_device(m, e, start, end);
		return;
	}
	switch (e->kind) {
	case GS_GPU_KERNEL:
		add_to_stat(gpu_stat_of(model__kstat(&m->kernels, e->h.pid, e->func)), e, dur,
			    queue, idle);
		break;
	case GS_GPU_GRAPH:
		add_to_stat(gpu_stat_of(model__kstat(&m->graph_execs, e->h.pid, e->func)), e, dur,
			    queue, idle);
		break;
	default: /* copies and sets */
		c = &m->copies[e->kind == GS_GPU_MEMSET
				       ? GS_COPY_MEMSET
				       : model__copy_direction(m, e->h.pid, e->copy_kind, e->dst,
							       e->src)];
		c->gpu_count++;
		c->gpu_bytes += e->bytes;
		c->gpu_ns += dur;
		break;
	}
	MODEL_NOTIFY(m, gpu, e, dur);
	add_stream(m, e, submitted, start, end);
	add_device(m, e, start, end);
}

void model__gpu_free(struct model *m)
{
	struct hmap_slot *s;

	hmap_for_each (&m->kernels, s)
		free(((struct kstat *)s->val)->gpu);
	hmap_for_each (&m->graph_execs, s)
		free(((struct kstat *)s->val)->gpu);
	hmap_free_with(&m->streams, NULL);
	hmap_for_each (&m->devices, s) {
		free(((struct dev_stat *)s->val)->pending);
		free(s->val);
	}
	hmap_free(&m->devices);
}
