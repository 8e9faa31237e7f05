// SPDX-License-Identifier: MIT
/* The report's steps, text and JSON (analysis/steps.h). */
#include <stdio.h>
#include <string.h>

#include "analysis/steps.h"
#include "core/json.h"
#include "core/util.h"
#include "sink/sinks.h"

#define SLOW_LISTED 10	  /* slow steps in the text */
#define JSON_STEPS  10000 /* steps in the JSON list */

/* What a part is called in the text; the rest (host) by whether the GPU was timed. */
static const char *part_text(int k, bool timed)
{
	return k == STEP_HOST && timed ? "launch delay (GPU idle, host busy)" : step_parts[k].text;
}

/* "compute 61.2%, ..., host 3.0%" of parts summing to total (those over 0). */
static void parts_line(FILE *f, const __u64 *part, __u64 total, bool timed)
{
	const char *sep = "";

	for (int k = 0; k < STEP_PARTS && total; k++) {
		if (!part[k])
			continue;
		fprintf(f, "%s%s %.1f%%", sep, part_text(k, timed),
			100.0 * (double)part[k] / (double)total);
		sep = ", ";
	}
	fputc('\n', f);
}

static void how_text(FILE *f, const struct report *r)
{
	char func[128], anchor[128];

	safe_text(r->steps_anchor_name, anchor, 80);
	if (r->steps_func[0])
		fprintf(f, "--step=%s: its calls, marked by %s", safe_text(r->steps_func, func, 80),
			anchor);
	else
		fprintf(f, "found from the launch sequence: %s launched once a step", anchor);
}

void report_steps_text(FILE *f, const struct report *r)
{
	char a[32], b[32], c[32], d[32], e[32], line[1024];
	__u64 part[STEP_PARTS] = { 0 }, total = 0;
	size_t listed = 0;

	if (r->steps_func[0] && !r->steps_func_seen) {
		fprintf(f,
			"\nSteps: --step=%s: no launch stack with Python frames held it (stacks "
			"are taken every Nth launch: --stacks 1 takes them all)\n",
			safe_text(r->steps_func, line, 80));
		return;
	}
	if (!r->nsteps)
		return;
	fprintf(f, "\nSteps (pid %u: %zu steps, ", r->steps_pid, r->nsteps);
	how_text(f, r);
	fprintf(f, ")\n  duration: median %s, p90 %s, max %s; %llu slow (over 1.5x the median)\n",
		fmt_dur(a, sizeof(a), (double)r->step_median_ns),
		fmt_dur(b, sizeof(b), (double)r->step_p90_ns),
		fmt_dur(c, sizeof(c), (double)r->step_max_ns), (unsigned long long)r->steps_slow);
	for (size_t i = 0; i < r->nsteps; i++) {
		for (int k = 0; k < STEP_PARTS; k++)
			part[k] += r->steps[i].part[k];
		total += r->steps[i].dur;
	}
	fprintf(f, "  where the time went: ");
	parts_line(f, part, total, r->steps_gpu_timed);
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
		fprintf(f, "    ");
		parts_line(f, s->part, s->dur, r->steps_gpu_timed);
	}
}

/* The parts, in ns: compute null without GPU timing (not known). */
static void parts_json(struct json *j, const struct report *r, const __u64 *part)
{
	json_obj_begin(j, "parts");
	for (int k = 0; k < STEP_PARTS; k++)
		if (k == STEP_COMPUTE && !r->steps_gpu_timed)
			json_str(j, step_parts[k].name, NULL);
		else
			json_u64(j, step_parts[k].name, part[k]);
	json_obj_end(j);
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
	parts_json(j, r, s->part);
	json_bool(j, "slow", s->slow);
	json_str(j, "cause",
		 s->finding >= 0
			 ? finding_describe(&r->findings[s->finding], r->t0, line, sizeof(line))
			 : NULL);
	json_obj_end(j);
}

void report_steps_json(struct json *j, const struct report *r)
{
	__u64 part[STEP_PARTS] = { 0 };

	for (size_t i = 0; i < r->nsteps; i++)
		for (int k = 0; k < STEP_PARTS; k++)
			part[k] += r->steps[i].part[k];
	json_obj_begin(j, "steps");
	json_u64(j, "count", r->nsteps);
	json_str(j, "how",
		 !r->nsteps	    ? NULL
		 : r->steps_func[0] ? "step function"
				    : "launch sequence");
	json_str(j, "step_function", r->steps_func[0] ? r->steps_func : NULL);
	json_bool(j, "step_function_seen", r->steps_func_seen);
	json_u64(j, "pid", r->steps_pid);
	json_str(j, "anchor_kernel", r->nsteps ? r->steps_anchor_name : NULL);
	json_u64(j, "median_ns", r->step_median_ns);
	json_u64(j, "p90_ns", r->step_p90_ns);
	json_u64(j, "max_ns", r->step_max_ns);
	json_u64(j, "slow", r->steps_slow);
	json_bool(j, "gpu_timed", r->steps_gpu_timed);
	parts_json(j, r, part);
	json_bool(j, "list_cut", r->nsteps > JSON_STEPS);
	json_arr_begin(j, "list");
	for (size_t i = 0; i < r->nsteps && i < JSON_STEPS; i++)
		step_row(j, r, i);
	json_arr_end(j);
	json_obj_end(j);
}
