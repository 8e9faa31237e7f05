// SPDX-License-Identifier: MIT
/* The report's Python lines, text and JSON (analysis/pylines.h). */
#include <stddef.h>
#include <stdio.h>

#include "core/json.h"
#include "core/util.h"
#include "sink/sinks.h"

void report_python_text(FILE *f, const struct report *r)
{
	char t[32], m[32], line[GS_SYM_MAX];

	if (!r->pylines_total)
		return;
	fprintf(f,
		"\nPython lines (the innermost Python frame of each launch whose stack was taken: "
		"%llu launches, %llu timed on the GPU)\n",
		(unsigned long long)r->pyline_launches, (unsigned long long)r->pyline_timed);
	fprintf(f, "    launches      timed   GPU total  share       mean  line\n");
	for (size_t i = 0; i < r->npylines; i++) {
		const struct rep_pyline *p = &r->pylines[i];

		fmt_dur(t, sizeof(t), (double)p->gpu_ns);
		fmt_dur(m, sizeof(m), p->timed ? (double)p->gpu_ns / (double)p->timed : 0);
		fprintf(f, "  %10llu %10llu %11s %5.1f%% %10s  %s\n",
			(unsigned long long)p->launches, (unsigned long long)p->timed,
			p->timed ? t : "-",
			r->pyline_gpu_ns ? 100.0 * (double)p->gpu_ns / (double)r->pyline_gpu_ns
					 : 0.0,
			p->timed ? m : "-", safe_text(p->where, line, sizeof(line)));
	}
	if (r->pylines_total > r->npylines)
		fprintf(f, "  (%llu more lines)\n",
			(unsigned long long)(r->pylines_total - r->npylines));
}

static const struct jfield pyline_counts[] = {
	JU64(struct rep_pyline, "launches", launches),
	JU64(struct rep_pyline, "timed", timed),
	JU64(struct rep_pyline, "gpu_ns", gpu_ns),
};

static void pyline_row(struct json *j, const void *row)
{
	json_str(j, "where", ((const struct rep_pyline *)row)->where);
	JSON_U64S(j, row, pyline_counts);
}

void report_python_json(struct json *j, const struct report *r)
{
	json_obj_begin(j, "python_lines");
	json_u64(j, "lines", r->pylines_total);
	json_u64(j, "launches", r->pyline_launches);
	json_u64(j, "timed", r->pyline_timed);
	json_u64(j, "gpu_ns", r->pyline_gpu_ns);
	json_rows(j, "top", r->pylines, r->npylines, sizeof(*r->pylines), pyline_row);
	json_obj_end(j);
}
