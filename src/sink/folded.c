// SPDX-License-Identifier: MIT
/*
 * Folded stacks (Brendan Gregg's format, read by flamegraph.pl, speedscope, inferno): one
 * line per distinct stack, frames from the process down to the CUDA call, then for a
 * launch its kernel, a space and the count. Names are demangled; ';' and line breaks in
 * them become ':' and ' '; frames without a name are [unknown], one for a run of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/demangle.h"
#include "core/names.h"
#include "core/util.h"
#include "sink/sinks.h"

struct line {
	char *text;
	__u64 count;
};

static void append(char **buf, size_t *len, size_t *cap, const char *s, bool sep)
{
	size_t n = strlen(s) + 2;

	if (*len + n + 1 > *cap) {
		*cap = GS_MAX(*cap * 2, *len + n + 256);
		*buf = xrealloc(*buf, *cap);
	}
	if (sep)
		(*buf)[(*len)++] = ';';
	for (; *s; s++)
		(*buf)[(*len)++] = *s == ';' ? ':' : (*s == '\n' || *s == '\r') ? ' ' : *s;
	(*buf)[*len] = 0;
}

static void append_name(char **buf, size_t *len, size_t *cap, const char *mangled)
{
	char *d = demangle(mangled);

	append(buf, len, cap, d, true);
	free(d);
}

static int by_text(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

struct lines {
	struct line *v;
	size_t n, cap;
};

static void add_stack(void *ctx, const struct model_stack *e)
{
	struct lines *ls = ctx;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int top = (int)e->nframes - 1;

	append(&buf, &len, &cap, e->comm && e->comm[0] ? e->comm : "?", false);
	/* Outermost frames without a name are where the frame-pointer chain left the code
	 * that keeps one: not frames. */
	while (top > 0 && !e->frames[top])
		top--;
	for (int i = top; i >= 0; i--) {
		if (e->frames[i])
			append_name(&buf, &len, &cap, e->frames[i]);
		/* Unnamed: one [unknown] for a run of them (code without frame pointers sends
		 * the chain through garbage before it finds its way). */
		else if (i == top || e->frames[i + 1])
			append(&buf, &len, &cap, "[unknown]", true);
	}
	append(&buf, &len, &cap, api_name(e->api), true);
	if (e->kernel)
		append_name(&buf, &len, &cap, e->kernel);
	if (ls->n == ls->cap) {
		ls->cap = ls->cap ? 2 * ls->cap : 64;
		ls->v = xrealloc(ls->v, ls->cap * sizeof(*ls->v));
	}
	ls->v[ls->n].text = buf;
	ls->v[ls->n++].count = e->count;
}

int folded__write(FILE *f, const struct model *m)
{
	struct lines ls = { 0 };
	struct line *lines;
	size_t n;

	model__each_stack(m, add_stack, &ls);
	lines = ls.v;
	n = ls.n;
	qsort(lines, n, sizeof(*lines), by_text);
	for (size_t i = 0; i < n; i++) {
		__u64 count = lines[i].count;

		/* The same names from different processes or addresses: one line. */
		while (i + 1 < n && !strcmp(lines[i].text, lines[i + 1].text)) {
			count += lines[i + 1].count;
			free(lines[i++].text);
		}
		fprintf(f, "%s %llu\n", lines[i].text, (unsigned long long)count);
		free(lines[i].text);
	}
	free(lines);
	return ferror(f) ? -1 : 0;
}
