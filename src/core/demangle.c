// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>
#undef ARRAY_SIZE /* (libiberty's: ours is in util.h) */

#include "core/demangle.h"
#include "core/util.h"

char *demangle(const char *name)
{
	char *d;

	if (!name)
		return xstrdup("");
	if (strncmp(name, "_Z", 2))
		return xstrdup(name);
	/* (libiberty's demangler: bounded recursion on hostile names.) */
	d = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
	return d ? d : xstrdup(name);
}

static int max_depth(const char *s, char open, char close)
{
	int depth = 0, max = 0;

	for (; *s; s++) {
		if (*s == open && ++depth > max)
			max = depth;
		else if (*s == close && --depth < 0)
			return -1; /* unbalanced ("operator<", "->"): leave it alone */
	}
	return depth ? -1 : max;
}

/* Copy s into out with what is nested more than `keep` deep in open/close folded to "...". */
static void collapse(const char *s, char open, char close, int keep, struct strbuf *out)
{
	int depth = 0;

	sb_reset(out);
	for (; *s; s++) {
		if (*s == open) {
			if (depth == keep)
				sb_printf(out, "%c...", open);
			else if (depth < keep)
				sb_putc(out, *s);
			depth++;
		} else if (*s == close) {
			depth--;
			if (depth <= keep)
				sb_putc(out, *s);
		} else if (depth <= keep) {
			sb_putc(out, *s);
		}
	}
}

/* Fold template arguments from the innermost out, then parameter lists, until it fits. */
char *shorten_name(const char *demangled, size_t width, char *buf, size_t n)
{
	static const char pairs[][2] = { { '<', '>' }, { '(', ')' } };
	struct strbuf cur = {}, next = {};

	sb_puts(&cur, demangled);
	for (size_t p = 0; p < ARRAY_SIZE(pairs) && cur.len > width; p++) {
		int depth = max_depth(cur.buf, pairs[p][0], pairs[p][1]);

		for (int keep = depth - 1; keep >= 0 && cur.len > width; keep--) {
			struct strbuf t;

			collapse(cur.buf, pairs[p][0], pairs[p][1], keep, &next);
			if (keep == 0 || next.len <= width) {
				t = cur;
				cur = next;
				next = t;
			}
		}
	}
	if (cur.len > width && width > 3) {
		cur.buf[width - 3] = 0;
		strcat(cur.buf, "...");
	}
	gs_strlcpy(buf, cur.buf, n);
	sb_free(&cur);
	sb_free(&next);
	return buf;
}
