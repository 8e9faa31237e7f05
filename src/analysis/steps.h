/* SPDX-License-Identifier: MIT */
/*
 * Training (or inference) steps, found from the launch sequence alone: a loop that runs
 * the same work each time launches some kernels exactly once a step. The step count S is
 * the smallest launch count (of kernels launched three times or more) such that most
 * launches are of kernels launched a multiple of S times, and the kernel of that count
 * launched first marks regular steps: nearly every step (80%) launches each once-a-step
 * kernel exactly once. (A larger count would be a part of a step: a layer's kernels.) The
 * last step ends with the work it launched (its GPU time, and the waits for it that
 * followed).
 *
 * Per step: its duration, launches, the kernels' GPU time (with the in-process plane's
 * timing: the union of the step's kernels' GPU intervals) and so the GPU's idle time, and
 * the time its calls waited for the GPU (synchronisations). A slow step (over 1.5 times the
 * median, and 1 ms more) is explained by the finding of the process whose GPU idle time
 * overlaps it most, where there is one.
 *
 * Bounded: a process's first STEPS_LAUNCHES launches, GPU intervals and waits are kept
 * (past that, its steps are found among those).
 */
#ifndef GS_ANALYSIS_STEPS_H
#define GS_ANALYSIS_STEPS_H

#include "analysis/findings.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "core/stream.h"

#define STEPS_LAUNCHES (1u << 20)

struct steps;

struct steps *steps__attach(struct stream *s, struct model *m);
void steps__free(struct steps *st);
/* The steps of the process with the most, found as of now: their count; *out (free it)
 * with absolute times, no slow marks; the process, the anchor kernel's name, whether GPU
 * times were there. */
size_t steps__best(struct steps *st, struct rep_step **out, __u32 *pid, char *anchor,
		   size_t anchor_len, bool *gpu_timed);
/* The report's part (times relative to t0); findings: to explain slow steps (NULL: none). */
void steps__report(struct steps *st, struct report *r, const struct findings *f);

#endif
