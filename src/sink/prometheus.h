/* SPDX-License-Identifier: MIT */
/*
 * Prometheus text exposition format 0.0.4: metric families (HELP and TYPE once, their
 * samples together), label values escaped, values spelled as Prometheus reads them (NaN,
 * +Inf, -Inf; shortest exact decimal otherwise), independent of the locale.
 */
#ifndef GS_SINK_PROMETHEUS_H
#define GS_SINK_PROMETHEUS_H

#include <stdbool.h>
#include <linux/types.h>

#include "core/util.h"

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define PROM_MAX_LABELS	  12

struct prom_label {
	const char *name, *value;
};

/* Labels shared by a set of samples (a GPU's identity, say), plus a sample's own. */
struct prom_labels {
	struct prom_label l[PROM_MAX_LABELS];
	int n;
};

void prom_labels_add(struct prom_labels *ls, const char *name, const char *value);

/* Start a family: "# HELP" and "# TYPE" lines. type: gauge, counter, histogram. */
void prom_family(struct strbuf *sb, const char *name, const char *type, const char *help);
/* One sample of the current family; extra: a label of this sample only (NULL: none). */
void prom_sample(struct strbuf *sb, const char *name, const struct prom_labels *ls,
		 const char *extra_name, const char *extra_value, double v);
/* A histogram's samples: cumulative buckets with upper bounds `le`, then +Inf, _sum and
 * _count. counts[i]: observations in (le[i-1], le[i]]; counts[n]: above the last bound. */
void prom_histogram(struct strbuf *sb, const char *name, const struct prom_labels *ls,
		    const double *le, const __u64 *counts, int n, double sum);
/* A value as Prometheus spells it. */
void prom_value(struct strbuf *sb, double v);

#endif
