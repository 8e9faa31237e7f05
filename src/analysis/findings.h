/* SPDX-License-Identifier: MIT */
/*
 * Cross-layer findings: a GPU stream that sat idle waiting for its next launch, and what
 * the launching thread was doing meanwhile, from its recent OS activity; a kernel that
 * waited on the GPU with its stream free. An analysis: it takes the OS plane's records and
 * launches from the stream, and is told by the model (analysis/model.h) when a stream went
 * idle or a kernel waited.
 */
#ifndef GS_ANALYSIS_FINDINGS_H
#define GS_ANALYSIS_FINDINGS_H

#include "analysis/model.h"
#include "core/stream.h"

#define MAX_FINDINGS	16
#define RECENT_FINDINGS 64

struct findings;

/* Subscribe to s (after m: it reads what m made of each record) and observe m. */
struct findings *findings__attach(struct stream *s, struct model *m);
void findings__free(struct findings *f);
/* Explain the findings still waiting for their OS records (the session's end says so; a
 * recording cut short has none). */
void findings__settle(struct findings *f);
/* The longest ones, longest first. */
const struct finding *findings__list(const struct findings *f, size_t *n);
/* Findings made so far, and the nth of them (the latest RECENT_FINDINGS are kept). */
__u64 findings__total(const struct findings *f);
const struct finding *findings__recent(const struct findings *f, __u64 n);

#endif
