/* SPDX-License-Identifier: MIT */
/*
 * The model and the analyses that observe it, built together on a session's stream: the
 * model first among its consumers, then the analyses, and the model told when a process is
 * retired. What sinks are handed: they ask the model's queries and the analyses' results.
 */
#ifndef GS_ANALYSIS_ANALYSES_H
#define GS_ANALYSIS_ANALYSES_H

#include "analysis/findings.h"
#include "analysis/memsites.h"
#include "analysis/model.h"
#include "analysis/pyexc.h"
#include "analysis/pylines.h"
#include "analysis/steps.h"
#include "analysis/report.h"
#include "core/stream.h"

struct analyses {
	struct model *model;
	struct findings *findings; /* NULL: not asked for */
	struct memsites *memsites;
	struct pylines *pylines;
	struct steps *steps; /* NULL: not asked for (with the findings, or o->steps) */
	struct pyexc *pyexc; /* NULL: not asked for (with the findings) */
};

struct analyses_opts {
	bool findings;	       /* the cross-layer findings and steps (run, attach, report) */
	bool retire;	       /* fold and free a process once it is retired (not the agent's) */
	bool keep_history;     /* every allocation, for the memory map */
	bool caller_feeds;     /* the model is not subscribed: its user feeds it (analyses__add) */
	bool steps;	       /* the steps without the findings: the agent's, online */
	const char *step_func; /* --step=FUNC */
};

void analyses__attach(struct analyses *a, struct stream *s, const struct analyses_opts *o);
void analyses__free(struct analyses *a);
/* A record, for the caller that feeds the model (caller_feeds). */
void analyses__add(struct analyses *a, const struct gs_hdr *ev);
/* The report of the model and its analyses (report__free it). */
struct report *analyses__report(const struct analyses *a);

#endif
