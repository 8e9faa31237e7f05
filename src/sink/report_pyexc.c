// SPDX-License-Identifier: MIT
/* The report's Python exceptions, text and JSON (analysis/pyexc.h). */
#include <stdio.h>

#include "core/json.h"
#include "core/util.h"
#include "sink/sinks.h"

static const char *finding_kind(const struct rep_pyexc_finding *x)
{
	return x->uncaught && x->cuda ? "uncaught, CUDA error"
	       : x->uncaught	      ? "uncaught"
				      : "CUDA error";
}

void report_pyexc_text(FILE *f, const struct report *r)
{
	char a[GS_PYEXC_TYPE], b[GS_SYM_MAX], c[GS_PYEXC_TEXT], d[1024];

	if (!r->pyexc_raised && !r->npyexc_findings)
		return;
	fprintf(f, "\nPython exceptions (%llu raised at %llu sites; kernel probes)\n",
		(unsigned long long)r->pyexc_raised, (unsigned long long)r->pyexc_sites);
	if (r->npyexc)
		fprintf(f, "      raised      pid  type: site\n");
	for (size_t i = 0; i < r->npyexc; i++) {
		const struct rep_pyexc *x = &r->pyexc[i];

		fprintf(f, "  %10llu %8u  %s: %s\n", (unsigned long long)x->count, x->pid,
			safe_text(x->type, a, sizeof(a)),
			x->site[0] ? safe_text(x->site, b, sizeof(b)) : "(no Python frame)");
	}
	if (r->pyexc_sites > r->npyexc)
		fprintf(f, "  (%llu more sites)\n",
			(unsigned long long)(r->pyexc_sites - r->npyexc));
	for (size_t i = 0; i < r->npyexc_findings; i++) {
		const struct rep_pyexc_finding *x = &r->pyexc_findings[i];

		fprintf(f, "  finding (%s) at %.3f s, pid %u thread %u%s: %s: %s\n    at %s\n",
			finding_kind(x), (double)x->ts / 1e9, x->pid, x->tid,
			x->count > 1 ? ", more than once" : "", safe_text(x->type, a, sizeof(a)),
			safe_text(x->text, c, 120),
			x->stack[0] ? safe_text(x->stack, d, sizeof(d)) : "(no Python frame)");
	}
}

static void site_row(struct json *j, const void *row)
{
	const struct rep_pyexc *x = row;

	json_u64(j, "pid", x->pid);
	json_str(j, "type", x->type);
	json_str(j, "site", x->site[0] ? x->site : NULL);
	json_str(j, "text", x->text);
	json_u64(j, "count", x->count);
}

static void finding_row(struct json *j, const void *row)
{
	const struct rep_pyexc_finding *x = row;

	json_str(j, "kind", finding_kind(x));
	json_bool(j, "uncaught", x->uncaught);
	json_bool(j, "cuda_error", x->cuda);
	json_u64(j, "pid", x->pid);
	json_u64(j, "tid", x->tid);
	json_f64(j, "time_s", (double)x->ts / 1e9);
	json_u64(j, "count", x->count);
	json_str(j, "type", x->type);
	json_str(j, "text", x->text);
	json_str(j, "stack", x->stack[0] ? x->stack : NULL);
}

void report_pyexc_json(struct json *j, const struct report *r)
{
	json_obj_begin(j, "python_exceptions");
	json_u64(j, "raised", r->pyexc_raised);
	json_u64(j, "sites", r->pyexc_sites);
	json_u64(j, "uncounted", r->pyexc_uncounted);
	json_rows(j, "top", r->pyexc, r->npyexc, sizeof(*r->pyexc), site_row);
	json_rows(j, "findings", r->pyexc_findings, r->npyexc_findings, sizeof(*r->pyexc_findings),
		  finding_row);
	json_obj_end(j);
}
