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
 * --step=FUNC: the steps are FUNC's calls. Launch stacks with Python frames say whether
 * FUNC was among them: a kernel only ever shown outside FUNC is left out; the step count
 * and the kernel that marks them are found as above among the rest, and only a kernel
 * only ever shown in FUNC may mark them. (Stacks are sampled: --stacks 1 shows all.)
 *
 * Per step: its duration, launches, the kernels' GPU time (with the in-process plane's
 * timing: the union of the step's kernels' GPU intervals) and the time its thread (the
 * marker's launching thread) waited for the GPU. And where its time went, in parts that sum
 * to its duration: each stretch of the step is the first of these that was going on then:
 * an NCCL kernel ran on the GPU, a copy ran, another kernel ran (GPU timing); the thread
 * was in an NCCL call, in a copy call, waited for the GPU (synchronisations), was blocked
 * off the CPU or in a waiting system call (read, poll, futex, sleeps...: the OS plane's)
 * outside any CUDA call, while no other thread of the process launched (waiting for the
 * next batch, for I/O, for a lock; not for PyTorch's backward pass on its engine thread),
 * not counting the time it then waited for a CPU; else the thread ran, or waited for a CPU
 * (woken or preempted): with GPU timing, the GPU idle while the host prepared and launched
 * the work (host launch delay). A slow step (over 1.5 times the median, and 1 ms more) is
 * explained by the finding of the process whose GPU idle time overlaps it most, where
 * there is one.
 *
 * Bounded: a process's first STEPS_LAUNCHES launches, GPU intervals and host spans are kept
 * (past that, its steps are found among those). The agent's (online): a process's latest
 * STEPS_ONLINE launches, no spans, until its loop is found; then each launch of the kernel
 * that marks its steps ends one, counted in the process's histogram of step durations.
 */
#ifndef GS_ANALYSIS_STEPS_H
#define GS_ANALYSIS_STEPS_H

#include "analysis/findings.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "core/stream.h"

#define STEPS_LAUNCHES (1u << 20)
#define STEPS_ONLINE   (1u << 15) /* (24 bytes each: 768 KiB a process at most) */
#define STEPS_BUCKETS  15

struct steps;

struct steps_opts {
	const char *func; /* --step=FUNC (NULL: none) */
	bool online;	  /* the agent's: steps counted as they end, into histograms */
	bool fed;	  /* not subscribed: the caller feeds records (steps__add) */
};

/* A process's step durations: counts[i] of those at most steps_le[i] seconds (the last:
 * the rest), their sum. */
struct steps_hist {
	__u64 counts[STEPS_BUCKETS + 1];
	double sum_s;
};

extern const double steps_le[STEPS_BUCKETS];
/* The parts (enum step_part): their JSON keys ("compute"), traces' arguments
 * ("part_compute_ns") and words in the text. */
struct step_part_desc {
	const char *name, *arg, *text;
};

extern const struct step_part_desc step_parts[STEP_PARTS];

/* The steps of a process, found as of now (absolute times, no slow marks). */
struct steps_found {
	__u32 pid;
	char anchor[256];   /* the name of the kernel that marks them */
	struct rep_step *v; /* n of them: free it */
	size_t n;
	bool gpu_timed; /* GPU times were there */
	bool func_seen; /* --step: a launch stack held FUNC */
};

struct steps *steps__attach(struct stream *s, struct model *m, const struct steps_opts *o);
void steps__free(struct steps *st);
/* A record, for the caller that feeds (o->fed), after the model has had it. */
void steps__add(struct steps *st, const struct gs_hdr *ev);
/* The steps of the process with the most: their count. */
size_t steps__best(struct steps *st, struct steps_found *out);
/* Online: a process's histogram of step durations; false if no step ended. */
bool steps__hist(const struct steps *st, __u32 pid, struct steps_hist *out);
/* The report's part (times relative to t0); findings: to explain slow steps (NULL: none). */
void steps__report(struct steps *st, struct report *r, const struct findings *f);

#endif
