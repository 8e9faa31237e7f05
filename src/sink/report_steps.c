// SPDX-License-Identifier: MIT
/* The report's steps, text and JSON (analysis/steps.h). */
#include <stdio.h>

#include "core/json.h"
#include "core/util.h"
#include "sink/sinks.h"

#define SLOW_LISTED 10	  /* slow steps in the text */
#define JSON_STEPS  10000 /* steps in the JSON list */

void report_steps_text(FILE *f, const struct report *r)
{
	char a[32], b[32], c[32], d[32], e[32], line[1024];
	size_t listed = 0;

	if (!r->nsteps)
		return;
	fprintf(f,
		"\nSteps (pid %u: %zu steps, found from the launch sequence: %s launched once a "
		"step)\n",
		r->steps_pid, r->nsteps, safe_text(r->steps_anchor_name, line, 80));
	fprintf(f, "  duration: median %s, p90 %s, max %s; %llu slow (over 1.5x the median)\n",
		fmt_dur(a, sizeof(a), (double)r->step_median_ns),
		fmt_dur(b, sizeof(b), (double)r->step_p90_ns),
		fmt_dur(c, sizeof(c), (double)r->step_max_ns), (unsigned long long)r->steps_slow);
	for (size_t i = 0; i < r->nsteps && listed < SLOW_LISTED; i++) {
		const struct rep_step *s = &r->steps[i];

		if (!s->slow)
			continue;
		listed++;
		fprintf(f,
			"  step %zu at %.3f s: %s (%.1fx the median), %llu launches, GPU %s, "
			"waiting for the GPU %s%s",
			i, (double)s->start / 1e9, fmt_dur(a, sizeof(a), (double)s->dur),
			(double)s->dur / (double)r->step_median_ns, (unsigned long long)s->launches,
			r->steps_gpu_timed ? fmt_dur(d, sizeof(d), (double)s->gpu_ns) : "not timed",
			fmt_dur(e, sizeof(e), (double)s->sync_ns), s->finding >= 0 ? ": " : "\n");
		if (s->finding >= 0)
			fprintf(f, "%s\n",
				finding_describe(&r->findings[s->finding], r->t0, line,
						 sizeof(line)));
	}
}

static void step_row(struct json *j, const struct report *r, size_t i)
{
	const struct rep_step *s = &r->steps[i];
	char line[1024];

	json_obj_begin(j, NULL);
	json_u64(j, "index", i);
	json_f64(j, "start_s", (double)s->start / 1e9);
	json_u64(j, "duration_ns", s->dur);
	json_u64(j, "launches", s->launches);
	if (r->steps_gpu_timed) {
		json_u64(j, "gpu_ns", s->gpu_ns);
		json_u64(j, "gpu_idle_ns", s->dur - GS_MIN(s->gpu_ns, s->dur));
	} else {
		json_str(j, "gpu_ns", NULL);
		json_str(j, "gpu_idle_ns", NULL);
	}
	json_u64(j, "sync_wait_ns", s->sync_ns);
	json_bool(j, "slow", s->slow);
	json_str(j, "cause",
		 s->finding >= 0
			 ? finding_describe(&r->findings[s->finding], r->t0, line, sizeof(line))
			 : NULL);
	json_obj_end(j);
}

void report_steps_json(struct json *j, const struct report *r)
{
	json_obj_begin(j, "steps");
	json_u64(j, "count", r->nsteps);
	json_str(j, "how", r->nsteps ? "launch sequence" : NULL);
	json_u64(j, "pid", r->steps_pid);
	json_str(j, "anchor_kernel", r->nsteps ? r->steps_anchor_name : NULL);
	json_u64(j, "median_ns", r->step_median_ns);
	json_u64(j, "p90_ns", r->step_p90_ns);
	json_u64(j, "max_ns", r->step_max_ns);
	json_u64(j, "slow", r->steps_slow);
	json_bool(j, "gpu_timed", r->steps_gpu_timed);
	json_bool(j, "list_cut", r->nsteps > JSON_STEPS);
	json_arr_begin(j, "list");
	for (size_t i = 0; i < r->nsteps && i < JSON_STEPS; i++)
		step_row(j, r, i);
	json_arr_end(j);
	json_obj_end(j);
}
