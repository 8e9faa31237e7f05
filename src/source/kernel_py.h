/* SPDX-License-Identifier: MIT */
/*
 * Python frames in the kernel-probe plane: the filter that tells the kernel's walker about
 * each Python process and puts the frames it read into the stacks (see kernel_py.c).
 */
#ifndef GS_SOURCE_KERNEL_PY_H
#define GS_SOURCE_KERNEL_PY_H

#include "bpf/tracer.h"
#include "core/stream.h"

struct kernel_py;

/* raises: Python raises probed too (each costs ~8 us: bench/results/python-*.md), not
 * only the print of an uncaught exception. */
struct kernel_py *kernel_py__attach(struct stream *s, struct tracer *t, bool raises);
/* Look at a process now (attach: before its next calls). */
void kernel_py__look(struct kernel_py *k, __u32 pid);
/* The kernel's counts of the running processes' raises, as records (the trace's end). */
void kernel_py__take_counts(struct kernel_py *k);
/* The tracer is closing: the walker is not told any more. */
void kernel_py__detach(struct kernel_py *k);
void kernel_py__free(struct kernel_py *k);

#endif
