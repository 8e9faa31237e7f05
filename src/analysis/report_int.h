/* SPDX-License-Identifier: MIT */
/* The report's parts, built from the model's state (report.c, report_gpu.c,
 * report_devcode.c: with the model's files, the only ones that see it). */
#ifndef GS_ANALYSIS_REPORT_INT_H
#define GS_ANALYSIS_REPORT_INT_H

#include "analysis/model_int.h"
#include "analysis/report.h"

void report__build_gpu(struct report *r, const struct model *m);
void report__free_gpu(struct report *r);
void report__build_devcode(struct report *r, const struct model *m);
void report__free_devcode(struct report *r);

#endif
