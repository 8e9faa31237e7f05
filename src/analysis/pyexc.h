/* SPDX-License-Identifier: MIT */
/*
 * Python exceptions (the kernel probes' GS_EV_PYEXC records): each raise counted by process,
 * type and site (the innermost Python frame of the raising thread: "load (train.py:12)").
 * Findings, with the Python stack: an exception that carries a CUDA error (its type
 * PyTorch's OutOfMemoryError or AcceleratorError, CuPy's CUDA errors; or its text a CUDA,
 * cuBLAS, cuDNN, NCCL or driver error's), caught or not, and one left uncaught (printed by the default hooks: its stack is the one of the
 * thread's latest raise of its type). Bounded (pyexc.c): 10,000 sites, 100 findings (each
 * counted again when it recurs); past that, counted only.
 */
#ifndef GS_ANALYSIS_PYEXC_H
#define GS_ANALYSIS_PYEXC_H

#include "analysis/model.h"
#include "analysis/report.h"
#include "core/stream.h"

struct pyexc;

struct pyexc *pyexc__attach(struct stream *s, struct model *m);
void pyexc__free(struct pyexc *px);
/* The report's part: the sites most raised at first, and the findings in time order. */
void pyexc__report(const struct pyexc *px, struct report *r);

#endif
