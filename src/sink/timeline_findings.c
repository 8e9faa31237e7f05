// SPDX-License-Identifier: MIT
/* Timeline: what the analyses found -- idle streams and launch gaps, OOM causes, suspected
 * leaks, fragmentation -- as instants and counters (see timeline_int.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/demangle.h"
#include "core/names.h"
#include "core/util.h"
#include "gpuscope/cuda_abi.h"
#include "sink/sinks.h"
#include "sink/timeline_int.h"

/*
 * The model's newest finding, as an instant where its gap began: on the stream's track when
 * GPU times show the stream idle, else (a gap between launch calls) on the launching
 * thread's.
 */
void tl_findings(struct timeline *tl, const struct analyses *a)
{
	struct model_counters c;
	char text[512];

	if (!a->findings)
		return;
	model__counters(a->model, &c);
	/* (More than the ring holds at once cannot happen: at most a few are settled by one
	 * record.) */
	if (findings__total(a->findings) - tl->findings > RECENT_FINDINGS)
		tl->findings = findings__total(a->findings) - RECENT_FINDINGS;
	for (; tl->findings < findings__total(a->findings); tl->findings++) {
		const struct finding *f = findings__recent(a->findings, tl->findings);
		struct tl_event e = { .ts = f->gap_start, .cat = "finding" };

		if (f->launch_gap) {
			e.track = tl_thread_track(tl, a->model, f->pid, f->tid);
			e.name = "no launch: stream waiting";
		} else {
			e.track = tl_stream_track(tl, f->device, f->pid, f->stream);
			e.name = f->cause == CAUSE_QUEUED ? "kernel waiting on the GPU"
							  : "idle: waiting for a launch";
		}
		tl_arg_str(&e, "finding", finding_describe(f, c.t0, text, sizeof(text)));
		tl->ops->instant(tl->w, &e);
	}
}

/* ---- steps -------------------------------------------------------------------------------- */

/* The steps of the loop found (analysis/steps.h), at the end: a track of the process, a
 * slice a step. */
void timeline__steps(struct timeline *tl, const struct analyses *a)
{
	struct steps_found f;
	struct rep_step *v;
	char name[32];
	__u64 track;

	if (!a->steps || !steps__best(a->steps, &f))
		return;
	v = f.v;
	track = tl_child_track(tl, a->model, f.pid, U_STEPS, 0, "steps");
	for (size_t i = 0; i < f.n; i++) {
		struct tl_event e = { .track = track,
				      .ts = v[i].start,
				      .dur = v[i].dur,
				      .cat = "step",
				      .name = name };

		snprintf(name, sizeof(name), "step %zu", i);
		tl_arg_u64(&e, "launches", v[i].launches);
		if (f.gpu_timed)
			tl_arg_u64(&e, "gpu_ns", v[i].gpu_ns);
		tl_arg_u64(&e, "sync_wait_ns", v[i].sync_ns);
		for (int k = 0; k < STEP_PARTS; k++)
			if (f.gpu_timed || (k != STEP_COMPUTE))
				tl_arg_u64(&e, step_parts[k].arg, v[i].part[k]);
		tl_arg_str(&e, "marked_by", f.anchor);
		tl->ops->slice(tl->w, &e);
	}
	free(v);
}

/* ---- memory analyses: OOM findings, suspected leaks, fragmentation ---------------------- */

void tl_memory_findings(struct timeline *tl, const struct analyses *a, __u32 pid)
{
	const struct model *m = a->model;
	const struct memsites *ms = a->memsites;
	struct proc_state *ps;
	char text[1536], name[64];
	unsigned int ticks;

	if (memsites__ooms_total(ms) != tl->ooms) {
		struct rep_oom ro;
		struct tl_event e = { .cat = "finding", .name = "out of memory" };

		memsites__last_oom(ms, &ro);
		e.ts = ro.o.ts;
		e.track = tl_thread_track(tl, m, ro.o.pid, ro.o.tid);
		tl_arg_str(&e, "finding", report__oom_text(&ro, text, sizeof(text)));
		tl_arg_str(&e, "cause", oom_cause_name(ro.o.cause));
		tl_arg_u64(&e, "requested", ro.o.requested);
		tl_arg_str(&e, "site", ro.site);
		tl->ops->instant(tl->w, &e);
		tl->ooms = memsites__ooms_total(ms);
	}
	if (memsites__leaks_total(ms) - tl->leaks > RECENT_LEAKS)
		tl->leaks = memsites__leaks_total(ms) - RECENT_LEAKS;
	for (; tl->leaks < memsites__leaks_total(ms); tl->leaks++) {
		const struct memsites_leak *l = memsites__leak(ms, tl->leaks);
		struct tl_event e = { .ts = l->since, .cat = "finding", .name = "suspected leak" };
		char rate[32];

		snprintf(text, sizeof(text),
			 "allocations at %s keep growing: +%s/s, confidence %.4f%% over %u samples",
			 l->label, fmt_bytes(rate, sizeof(rate), l->t.slope_bps),
			 100 * l->t.confidence, l->t.n);
		e.track = tl_thread_track(tl, m, l->pid, l->pid);
		tl_arg_str(&e, "finding", text);
		tl_arg_str(&e, "site", l->label);
		tl_arg_u64(&e, "outstanding", l->live_bytes);
		tl->ops->instant(tl->w, &e);
	}
	/* Fragmentation, at each of the process's samples. */
	ticks = memsites__ticks(ms, pid);
	if (!ticks || (ps = tl_proc_state(tl, pid))->ticks == ticks)
		return;
	ps->ticks = ticks;
	for (int d = 0; d <= MEM_DEVS; d++) {
		struct frag_sample f;

		if (!memsites__frag_last(ms, pid, d, &f))
			continue;
		if (d < MEM_DEVS)
			snprintf(name, sizeof(name), "fragmentation (GPU %d)", d);
		else
			snprintf(name, sizeof(name), "fragmentation (GPU ?)");
		tl->ops->counter(
			tl->w,
			tl_counter_track(tl, m, pid, (enum counter_kind)(C_FRAG + d), name, false),
			f.ts, frag_score(&f));
	}
}

/* ---- NVML: device metrics as counters of the GPU ------------------------------------------ */
