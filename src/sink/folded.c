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

int folded__write(FILE *f, const struct model *m)
{
	struct line *lines = xcalloc(m->stacks.len + 1, sizeof(*lines));
	struct hmap_slot *s;
	size_t n = 0;

	hmap_for_each (&m->stacks, s) {
		const struct stack_entry *e = s->val;
		const struct proc *p = hmap_get(&m->procs, e->pid, 0);
		char *buf = NULL;
		size_t len = 0, cap = 0;
		const char *k;

		int top = e->nframes - 1;

		append(&buf, &len, &cap, p && p->comm[0] ? p->comm : "?", false);
		/* Outermost frames without a name are where the frame-pointer chain left the
		 * code that keeps one: not frames. */
		while (top > 0 && !model__symbol(m, e->pid, e->ip[top]))
			top--;
		for (int i = top; i >= 0; i--) {
			const char *name = model__symbol(m, e->pid, e->ip[i]);

			if (name)
				append_name(&buf, &len, &cap, name);
			/* Unnamed: one [unknown] for a run of them (code without frame
			 * pointers sends the chain through garbage before it finds its way). */
			else if (i == top || model__symbol(m, e->pid, e->ip[i + 1]))
				append(&buf, &len, &cap, "[unknown]", true);
		}
		append(&buf, &len, &cap, api_name(e->api), true);
		k = e->arg ? model__kernel_name(m, e->pid, e->arg) : NULL;
		if (k)
			append_name(&buf, &len, &cap, k);
		lines[n].text = buf;
		lines[n++].count = e->count;
	}
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
