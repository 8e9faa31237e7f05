/* SPDX-License-Identifier: MIT */
/*
 * GPU work by Python line: each launch whose stack was taken (every launch with
 * --stacks 1) is counted at the innermost Python frame of its stack (the line that made
 * it: "Conv1D.forward (.../pytorch_utils.py:119)"), and, where the in-process plane timed
 * it, its GPU time is added there, as the kernel tables count it. Observes the model
 * (stacks, GPU records); lines are kept by name, so like processes add up and a process's
 * end loses nothing.
 */
#ifndef GS_ANALYSIS_PYLINES_H
#define GS_ANALYSIS_PYLINES_H

#include "analysis/model.h"
#include "analysis/report.h"

struct pylines;

struct pylines *pylines__attach(struct model *m);
void pylines__free(struct pylines *pl);
/* The report's part: the lines, most GPU time first (most launches where none was timed). */
void pylines__report(const struct pylines *pl, struct report *r);

#endif
