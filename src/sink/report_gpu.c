// SPDX-License-Identifier: MIT
/* The reports' GPU sections, text and JSON: kernels' times on the GPU, how busy each GPU
 * was, and what the loaded modules hold (device code). */
#include <stdio.h>
#include <string.h>

#include "core/demangle.h"
#include "core/json.h"
#include "core/names.h"
#include "core/util.h"
#include "sink/sinks.h"

static void heading(FILE *f, const char *title)
{
	fprintf(f, "\n%s\n", title);
}

static void gpu_mode_str(char *buf, size_t n, const struct report *r)
{
	__u32 mode = r->gpu_time;

	if (mode == 1 && r->gpu_cupti_graphs)
		snprintf(buf, n,
			 "every kernel, in graphs too (copies and sets: CUDA events around "
			 "them)");
	else if (mode == 1 && r->gpu_cupti)
		snprintf(buf, n,
			 "every kernel (in graphs at sampled launches; copies and sets: CUDA "
			 "events around them)");
	else if (mode == 1 && r->gpu_chains)
		snprintf(buf, n,
			 "every launch and asynchronous copy (consecutive launches chained: each "
			 "timed from the end before it)");
	else if (mode == 1)
		snprintf(buf, n, "every launch and asynchronous copy");
	else
		snprintf(buf, n, "every %uth launch of each kernel", mode);
}

static void gpu_kernels(FILE *f, const struct report *r, const struct text_opts *o)
{
	char name[1024], tot[32], mean[32], p50[32], p99[32], q50[32];
	size_t shown = GS_MIN(r->ngpu_kernels, o->top);
	__u64 in_graph = 0;

	fmt_dur(tot, sizeof(tot), (double)r->gpu_kernel_ns);
	fprintf(f, "  kernels: %s on the GPU\n", tot);
	fprintf(f, "  %9s %10s %6s %10s %10s %10s %10s  %s\n", "timed", "GPU total", "share",
		"mean", "p50", "p99", "queue p50", "kernel");
	for (size_t i = 0; i < shown; i++) {
		const struct rep_kernel *k = &r->kernels[r->gpu_order[i]];
		const struct gpu_stat *g = k->gpu;

		if (o->wide)
			gs_strlcpy(name, k->display, sizeof(name));
		else
			shorten_name(k->display, 60, name, sizeof(name));
		fmt_dur(tot, sizeof(tot), (double)g->total_ns);
		fmt_dur(mean, sizeof(mean), (double)g->total_ns / (double)g->count);
		fmt_dur(p50, sizeof(p50), (double)hist__quantile(&g->dur, 0.5));
		fmt_dur(p99, sizeof(p99), (double)hist__quantile(&g->dur, 0.99));
		fmt_dur(q50, sizeof(q50), (double)hist__quantile(&g->queue, 0.5));
		fprintf(f, "  %9llu %10s %5.1f%% %10s %10s %10s %10s  %s\n",
			(unsigned long long)g->count, tot,
			r->gpu_kernel_ns ? 100.0 * (double)g->total_ns / (double)r->gpu_kernel_ns
					 : 0,
			mean, p50, p99, q50, name);
	}
	if (shown < r->ngpu_kernels)
		fprintf(f, "  ... %zu more kernels (--top N, or --json for all)\n",
			r->ngpu_kernels - shown);
	fprintf(f, "  (queue: from the launch call to the kernel starting on the GPU)\n");
	for (size_t i = 0; i < r->ngpu_kernels; i++)
		in_graph += r->kernels[r->gpu_order[i]].gpu->in_graph;
	if (in_graph)
		fprintf(f, "  (%llu of the times are of kernels inside CUDA graphs%s)\n",
			(unsigned long long)in_graph,
			r->gpu_cupti_graphs && r->cupti_on ? "" : ", at sampled graph launches");
}

static void gpu_busy(FILE *f, const struct report *r)
{
	char a[32], b[32], c[32], d[32];

	for (size_t i = 0; i < r->ndevices; i++) {
		const struct dev_busy *dv = &r->devices[i];
		__u64 span = dv->last_end - dv->first_start;

		fmt_dur(a, sizeof(a), (double)dv->busy_ns);
		fmt_dur(b, sizeof(b), (double)span);
		fmt_dur(c, sizeof(c), (double)dv->idle_ns);
		fmt_dur(d, sizeof(d), (double)dv->max_gap_ns);
		if (dv->device >= 0)
			fprintf(f, "  device %d: ", dv->device);
		else
			fprintf(f, "  device ?: ");
		fprintf(f, "busy %s of %s (%.1f%%), idle %s in %llu gaps (longest %s)\n", a, b,
			span ? 100.0 * (double)dv->busy_ns / (double)span : 0, c,
			(unsigned long long)dv->gaps, d);
	}
	if (!r->nstreams)
		return;
	fprintf(f, "  %8s %18s %7s %10s %10s %10s %8s %12s\n", "pid", "stream", "device", "ops",
		"busy", "idle", "gaps", "longest gap");
	for (size_t i = 0; i < r->nstreams && i < 10; i++) {
		const struct stream_stat *s = &r->streams[i];
		char sid[24], dev[12];

		if (s->tid)
			snprintf(sid, sizeof(sid), "tid %u default", s->tid);
		else if (!s->stream)
			snprintf(sid, sizeof(sid), "legacy default");
		else
			snprintf(sid, sizeof(sid), "0x%llx", (unsigned long long)s->stream);
		snprintf(dev, sizeof(dev), s->device >= 0 ? "%d" : "?", s->device);
		fmt_dur(a, sizeof(a), (double)s->busy_ns);
		fmt_dur(c, sizeof(c), (double)s->idle_ns);
		fmt_dur(d, sizeof(d), (double)s->max_gap_ns);
		fprintf(f, "  %8u %18s %7s %10llu %10s %10s %8llu %12s\n", s->pid, sid, dev,
			(unsigned long long)s->ops, a, c, (unsigned long long)s->gaps, d);
	}
	if (r->nstreams > 10)
		fprintf(f, "  ... %zu more streams (--json for all)\n", r->nstreams - 10);
}

void report_gpu_text(FILE *f, const struct report *r, const struct text_opts *o)
{
	char mode[160], a[32], b[32], c[32];

	if (!r->inject)
		return;
	heading(f, "GPU time");
	if (!r->gpu_time) {
		fprintf(f, "  not measured (--gpu-time=off)\n");
		return;
	}
	gpu_mode_str(mode, sizeof(mode), r);
	fprintf(f, "  from %s %s; %llu operations recorded\n",
		r->gpu_cupti ? "the driver's own timestamps (CUPTI) of" : "CUDA events around",
		mode, (unsigned long long)r->gpu_records);
	for (int i = 0; i < 2; i++) {
		static const char *const what[] = {
			"found no CUPTI (or CUPTI refused): timed with CUDA events around every "
			"launch instead (GPUSCOPE_CUPTI=path names the library)",
			"started a profiler of its own (CUPTI has one client): its kernels were "
			"timed with CUDA events from then on",
		};
		__u64 n = i ? r->cupti_handed : r->cupti_missing;

		if (n)
			fprintf(f, "  %llu process%s %s\n", (unsigned long long)n,
				n == 1 ? "" : "es", what[i]);
	}
	if (r->cupti_unmatched)
		fprintf(f,
			"  %llu kernel records of the driver's matched no launch, or ran in a "
			"graph under no name: not in these figures\n",
			(unsigned long long)r->cupti_unmatched);
	if (!r->gpu_records)
		return;
	if (r->gpu_start_unknown - r->gpu_start_late - r->gpu_end_late)
		fprintf(f,
			"  %llu of them launches with no GPU time: the call waited for the GPU "
			"inside the driver (e.g. to grow local memory), so when the kernel started "
			"is not known\n",
			(unsigned long long)(r->gpu_start_unknown - r->gpu_start_late -
					     r->gpu_end_late));
	if (r->gpu_start_late)
		fprintf(f,
			"  %llu of them launches with no GPU time: not gated, on an idle stream, "
			"their call went on over 50 us after the start event (the thread "
			"descheduled?), so when the kernel started is not known\n",
			(unsigned long long)r->gpu_start_late);
	if (r->gpu_end_late || r->gpu_copy_end_late)
		fprintf(f,
			"  %llu launches and %llu copies with no GPU time: not gated, their end "
			"event was recorded over 50 us after the call returned (the thread "
			"descheduled?) and completed soon after, so when the work ended is not "
			"known\n",
			(unsigned long long)r->gpu_end_late,
			(unsigned long long)r->gpu_copy_end_late);
	/* Busy and idle need every operation of a stream; sampled runs show kernels only. */
	if (r->gpu_time == 1)
		gpu_busy(f, r);
	if (r->ngpu_kernels)
		gpu_kernels(f, r, o);
	if (r->graph_gpu.count) {
		fmt_dur(a, sizeof(a), (double)r->graph_gpu.total_ns);
		fmt_dur(b, sizeof(b), (double)r->graph_gpu.total_ns / (double)r->graph_gpu.count);
		fprintf(f, "  graph launches: %llu timed, %s on the GPU (mean %s)\n",
			(unsigned long long)r->graph_gpu.count, a, b);
	}
	for (int k = 0; k < GS_COPY_KIND_MAX; k++) {
		const struct copy_stat *s = &r->copies[k];

		if (!s->gpu_count)
			continue;
		fmt_bytes(a, sizeof(a), (double)s->gpu_bytes);
		fmt_dur(b, sizeof(b), (double)s->gpu_ns);
		fmt_rate_over(c, sizeof(c), s->gpu_bytes, s->gpu_ns);
		fprintf(f, "  async %-7s %llu timed, %s in %s on the GPU (%s)\n", copy_kind_name(k),
			(unsigned long long)s->gpu_count, a, b, c);
	}
}

/* "sm_90", "sm_80-120" (low to high), or "-". */
static void arch_range(char *buf, size_t n, const char *pre, unsigned int low, unsigned int high)
{
	if (!high)
		snprintf(buf, n, "-");
	else if (low && low != high)
		snprintf(buf, n, "%s_%u-%u", pre, low, high);
	else
		snprintf(buf, n, "%s_%u", pre, high);
}

/* Device code read in-process (--device-code): what device-side probes can go in. */
void report_devcode_text(FILE *f, const struct report *r)
{
	unsigned int kinds[GS_CODE_KIND_MAX] = { 0 }, failed = 0, unread = 0, sass = 0;
	char a[32], b[32], c[64], name[128];

	if (r->probe_records)
		fprintf(f,
			"\nDevice-side probes wrote %llu record%s (%llu bytes) into GPU ring "
			"buffers\n",
			(unsigned long long)r->probe_records, r->probe_records == 1 ? "" : "s",
			(unsigned long long)r->probe_bytes);
	if (!r->devmods_total)
		return;
	heading(f, "Device code (read in-process; PTX is what device-side probes go in)");
	for (size_t i = 0; i < r->ndevmods; i++) {
		kinds[r->devmods[i].kind < GS_CODE_KIND_MAX ? r->devmods[i].kind : 0]++;
		failed += r->devmods[i].why != NULL;
	}
	fprintf(f,
		"  %llu module%s loaded (%u fatbin, %u PTX, %u cubin, %u unknown); %u not fully "
		"read\n",
		(unsigned long long)r->devmods_total, r->devmods_total == 1 ? "" : "s",
		kinds[GS_CODE_FATBIN], kinds[GS_CODE_PTX], kinds[GS_CODE_CUBIN],
		kinds[GS_CODE_UNKNOWN], failed);
	fprintf(f,
		"  %llu kernels in them: %llu with PTX, %llu SASS only, %llu with PTX in some "
		"modules and not in others\n",
		(unsigned long long)r->devkernels, (unsigned long long)r->devkernels_ptx,
		(unsigned long long)(r->devkernels - r->devkernels_ptx - r->devkernels_mixed),
		(unsigned long long)r->devkernels_mixed);
	fprintf(f, "  %-18s %-7s %-20s %10s %-11s %-10s %s\n", "module", "kind", "loaded by",
		"bytes", "PTX (max)", "SASS", "kernels");
	for (size_t i = 0; i < r->ndevmods; i++) {
		const struct dev_module *d = &r->devmods[i];

		arch_range(a, sizeof(a), "compute", 0, d->ptx_arch);
		arch_range(b, sizeof(b), "sm", d->sass_arch_low, d->sass_arch);
		fprintf(f, "  0x%-16llx %-7s %-20s %10s %-11s %-10s %u (%u with PTX)%s%s\n",
			(unsigned long long)d->scope, devcode_kind_name(d->kind), api_name(d->api),
			fmt_bytes(c, sizeof(c), (double)d->bytes), a, b, d->nkernels, d->with_ptx,
			d->why ? ": " : "", d->why ? d->why : "");
	}
	for (size_t i = 0; i < r->nkernels; i++) {
		sass += r->kernel_sass[i] > 0;
		unread += r->kernels[i].mangled && !r->kernel_ptx[i] && !r->kernel_sass[i];
	}
	if (sass) {
		fprintf(f, "  launched kernels that device-side probes cannot go in (no PTX):\n");
		for (size_t i = 0; i < r->nkernels; i++) {
			const struct rep_kernel *k = &r->kernels[i];

			if (!r->kernel_sass[i])
				continue;
			shorten_name(k->display, 60, name, sizeof(name));
			arch_range(a, sizeof(a), "sm", r->kernel_sass_arch_low[i],
				   r->kernel_sass_arch[i]);
			if (r->kernel_ptx[i])
				snprintf(c, sizeof(c), "SASS only (%s) in %u of %u modules", a,
					 r->kernel_sass[i], r->kernel_sass[i] + r->kernel_ptx[i]);
			else
				snprintf(c, sizeof(c), "SASS only (%s)", a);
			fprintf(f, "  %10llu launches  %-60s %s\n", (unsigned long long)k->launches,
				name, c);
		}
	}
	if (unread)
		fprintf(f,
			"  %u launched kernel%s from modules not read (loaded before tracing, or "
			"from a file with cuModuleLoad)\n",
			unread, unread == 1 ? "" : "s");
}

/* ---- JSON ------------------------------------------------------------------------------- */

static const struct jfield gpu_stat_counts[] = {
	JU64(struct gpu_stat, "idle_stream_starts", idle_starts),
	JU64(struct gpu_stat, "gated", gated),
	JU64(struct gpu_stat, "chained", chained),
	JU64(struct gpu_stat, "followed", followed),
	JU64(struct gpu_stat, "in_graph", in_graph),
	JU64(struct gpu_stat, "carried", carried),
	JU64(struct gpu_stat, "by_driver", by_driver),
	JU64(struct gpu_stat, "start_unknown", start_unknown)
};

void report_gpu_stat_json(struct json *j, const char *key, const struct gpu_stat *g)
{
	/* (Launches none of which could be timed: all figures 0, and why in start_unknown.) */
	__u64 n = g && g->count ? g->count : 1;

	if (!g || (!g->count && !g->start_unknown)) {
		json_str(j, key, NULL);
		return;
	}
	json_obj_begin(j, key);
	json_u64(j, "timed", g->count);
	json_u64(j, "total_ns", g->total_ns);
	json_u64(j, "mean_ns", g->total_ns / n);
	json_u64(j, "min_ns", g->count ? g->min_ns : 0);
	json_u64(j, "max_ns", g->max_ns);
	json_u64(j, "p50_ns", hist__quantile(&g->dur, 0.5));
	json_u64(j, "p99_ns", hist__quantile(&g->dur, 0.99));
	json_u64(j, "queue_mean_ns", g->queue_ns / n);
	json_u64(j, "queue_p50_ns", hist__quantile(&g->queue, 0.5));
	json_u64(j, "queue_p99_ns", hist__quantile(&g->queue, 0.99));
	JSON_U64S(j, g, gpu_stat_counts);
	json_obj_end(j);
}

static const struct jfield gpu_cupti_counts[] = {
	JU64(struct report, "cupti_processes", cupti_on),
	JU64(struct report, "cupti_missing", cupti_missing),
	JU64(struct report, "cupti_handed_over", cupti_handed),
	JU64(struct report, "cupti_unmatched", cupti_unmatched),
};

static const struct jfield gpu_totals[] = {
	JU64(struct report, "start_unknown_late_call", gpu_start_late),
	JU64(struct report, "start_unknown_end_late", gpu_end_late),
	JU64(struct report, "copies_end_late", gpu_copy_end_late),
	JU64(struct report, "kernel_ns", gpu_kernel_ns)
};

static const struct jfield device_gaps[] = {
	JU64(struct dev_busy, "idle_ns", idle_ns),
	JU64(struct dev_busy, "gaps", gaps),
	JU64(struct dev_busy, "max_gap_ns", max_gap_ns),
	JU64(struct dev_busy, "late", late),
	JU64(struct dev_busy, "event_overhead_ns", overhead_ns),
	JU64(struct dev_busy, "chained_event_overhead_ns", chained_overhead_ns),
	JU64(struct dev_busy, "busy_event_overhead_ns", busy_overhead_ns),
	JU64(struct dev_busy, "graph_event_overhead_ns", graph_overhead_ns),
	JU64(struct dev_busy, "carried_event_overhead_ns", carried_overhead_ns),
	JU64(struct dev_busy, "event_launch_ns", launch_ns),
	JU64(struct dev_busy, "event_busy_min_ns", busy_min_ns)
};

static const struct jfield stream_gaps[] = { JU64(struct stream_stat, "idle_ns", idle_ns),
					     JU64(struct stream_stat, "gaps", gaps),
					     JU64(struct stream_stat, "max_gap_ns", max_gap_ns) };

static const struct jfield copy_gpu[] = { JU64(struct copy_stat, "timed", gpu_count),
					  JU64(struct copy_stat, "bytes", gpu_bytes),
					  JU64(struct copy_stat, "gpu_ns", gpu_ns) };

/* What a GPU and a stream both say: the device, its operations, busy and spanned time. */
static void busy_json(struct json *j, __s32 device, __u64 ops, __u64 busy_ns, __u64 span_ns)
{
	json_i64(j, "device", device);
	json_u64(j, "ops", ops);
	json_u64(j, "busy_ns", busy_ns);
	json_u64(j, "span_ns", span_ns);
}

static void device_json(struct json *j, const void *row)
{
	const struct dev_busy *d = row;

	busy_json(j, d->device, d->ops, d->busy_ns, d->last_end - d->first_start);
	JSON_U64S(j, d, device_gaps);
}

static void stream_json(struct json *j, const void *row)
{
	const struct stream_stat *s = row;

	json_u64(j, "pid", s->pid);
	json_hex(j, "stream", s->stream);
	if (s->tid)
		json_u64(j, "thread", s->tid);
	busy_json(j, s->device, s->ops, s->busy_ns, s->last_end - s->first_start);
	JSON_U64S(j, s, stream_gaps);
}

void report_gpu_json(struct json *j, const struct report *r)
{
	json_obj_begin(j, "gpu");
	json_bool(j, "inject", r->inject);
	json_u64(j, "every", r->gpu_time); /* 0 off, 1 every launch, N every Nth */
	json_bool(j, "chained", r->gpu_chains);
	json_bool(j, "cupti", r->gpu_cupti);
	json_bool(j, "cupti_graphs", r->gpu_cupti_graphs);
	JSON_U64S(j, r, gpu_cupti_counts);
	json_u64(j, "records", r->gpu_records);
	json_u64(j, "start_unknown", r->gpu_start_unknown);
	/* of start_unknown: */
	JSON_U64S(j, r, gpu_totals);
	report_gpu_stat_json(j, "graphs", &r->graph_gpu);
	json_rows(j, "devices", r->devices, r->ndevices, sizeof(r->devices[0]), device_json);
	json_rows(j, "streams", r->streams, r->nstreams, sizeof(r->streams[0]), stream_json);
	json_obj_begin(j, "copies");
	for (int k = 0; k < GS_COPY_KIND_MAX; k++) {
		const struct copy_stat *s = &r->copies[k];

		if (!s->gpu_count)
			continue;
		json_obj_begin(j, copy_kind_name(k));
		JSON_U64S(j, s, copy_gpu);
		json_obj_end(j);
	}
	json_obj_end(j);
	json_obj_end(j);
}

static void arch_or_null(struct json *j, const char *key, unsigned int arch)
{
	if (arch)
		json_u64(j, key, arch);
	else
		json_str(j, key, NULL);
}

/* What device code was read in-process (--device-code); absent when none was. */
static void module_json(struct json *j, const void *row)
{
	const struct dev_module *d = row;

	json_u64(j, "pid", d->pid);
	json_hex(j, "handle", d->scope);
	json_str(j, "kind", devcode_kind_name(d->kind));
	json_str(j, "loaded_by", api_name(d->api));
	json_u64(j, "bytes", d->bytes);
	arch_or_null(j, "ptx_arch", d->ptx_arch);
	arch_or_null(j, "sass_arch", d->sass_arch);
	arch_or_null(j, "sass_arch_lowest", d->sass_arch_low);
	json_u64(j, "ptx_entries", d->nptx);
	json_u64(j, "sass_entries", d->nsass);
	json_u64(j, "kernels", d->nkernels);
	json_u64(j, "kernels_with_ptx", d->with_ptx);
	json_str(j, "error", d->why);
}

void report_devcode_json(struct json *j, const struct report *r)
{
	if (r->probe_records) {
		json_obj_begin(j, "device_probes");
		json_u64(j, "ring_records", r->probe_records);
		json_u64(j, "ring_bytes", r->probe_bytes);
		json_obj_end(j);
	}
	if (!r->devmods_total)
		return;
	json_obj_begin(j, "device_code");
	json_u64(j, "modules_total", r->devmods_total);
	json_rows(j, "modules", r->devmods, r->ndevmods, sizeof(r->devmods[0]), module_json);
	json_obj_begin(j, "kernels");
	json_u64(j, "total", r->devkernels);
	json_u64(j, "with_ptx", r->devkernels_ptx);
	json_u64(j, "sass_only", r->devkernels - r->devkernels_ptx - r->devkernels_mixed);
	json_u64(j, "mixed", r->devkernels_mixed);
	json_obj_end(j);
	/* Each launched kernel: whether device-side probes can go in it. */
	json_arr_begin(j, "launched");
	for (size_t i = 0; i < r->nkernels; i++) {
		const struct rep_kernel *k = &r->kernels[i];

		if (!k->mangled)
			continue;
		json_obj_begin(j, NULL);
		json_str(j, "kernel", k->mangled);
		json_u64(j, "launches", k->launches);
		json_u64(j, "modules_with_ptx", r->kernel_ptx[i]);
		json_u64(j, "modules_without_ptx", r->kernel_sass[i]);
		if (!r->kernel_ptx[i] && !r->kernel_sass[i]) {
			json_str(j, "has_ptx", NULL);
			json_str(j, "why",
				 "its module was not read (loaded before tracing, or "
				 "from a file with cuModuleLoad)");
		} else {
			/* (true only if every module it came from has PTX for it) */
			json_bool(j, "has_ptx", !r->kernel_sass[i]);
			json_str(j, "why",
				 !r->kernel_sass[i] ? NULL
				 : r->kernel_ptx[i]
					 ? "SASS only in some of the modules it was loaded from"
					 : "SASS only: its module has no PTX for it");
		}
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}
