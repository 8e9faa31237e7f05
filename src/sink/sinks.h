/* SPDX-License-Identifier: MIT */
/* Renderers of the report and of the live status. */
#ifndef GS_SINK_SINKS_H
#define GS_SINK_SINKS_H

#include <stdbool.h>
#include <stdio.h>
#include "analysis/analyses.h"

struct text_opts {
	bool wide;  /* full kernel names */
	size_t top; /* kernels listed */
};

void report_text__write(FILE *f, const struct report *r, const struct text_opts *o);
void report_json__write(FILE *f, const struct report *r);
struct json;
void report_os_text(FILE *f, const struct report *r);
/* report_gpu.c: GPU time by kernel and by GPU, and the device code loaded. */
void report_gpu_text(FILE *f, const struct report *r, const struct text_opts *o);
void report_devcode_text(FILE *f, const struct report *r);
void report_gpu_stat_json(struct json *j, const char *key, const struct gpu_stat *g);
void report_gpu_json(struct json *j, const struct report *r);
void report_devcode_json(struct json *j, const struct report *r);
void report_os_json(struct json *j, const struct report *r);
/* report_python.c: GPU work by Python line. */
void report_python_text(FILE *f, const struct report *r);
void report_python_json(struct json *j, const struct report *r);
/* report_pyexc.c: Python exceptions. */
void report_pyexc_text(FILE *f, const struct report *r);
void report_pyexc_json(struct json *j, const struct report *r);
/* report_steps.c: the steps of a loop. */
void report_steps_text(FILE *f, const struct report *r);
void report_steps_json(struct json *j, const struct report *r);
/* One line saying what a finding found; t0: the session's start (times are from it). */
char *finding_describe(const struct finding *f, __u64 t0, char *buf, size_t n);
void report_findings_text(FILE *f, const struct report *r);
void report_findings_json(struct json *j, const struct report *r);
/* The model's call stacks as folded stacks: 0, or -1 if writing failed. */
int folded__write(FILE *f, const struct model *m);
/* The memory map of analyses kept with keep_history (sink/memmap.c), as SVG: 0 or -1. */
int memmap__write(FILE *f, const struct analyses *a);

/* One line a second: rates since the previous call. */
struct status {
	__u64 ts, launches, copy_bytes, events, drops;
	bool tty, printed;
};
void status__line(struct status *s, FILE *f, const struct analyses *a, __u64 drops, __u64 now);
void status__clear(struct status *s, FILE *f);

#endif
