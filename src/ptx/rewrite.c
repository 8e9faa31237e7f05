// SPDX-License-Identifier: MIT
/* Probe injection into PTX (see rewrite.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "ptx/rewrite.h"

#define MAX_NAME 1024

int ptx_probe_section(const char *section, enum ptx_point *point, const char **kernel)
{
	static const struct {
		const char *prefix;
		enum ptx_point point;
	} kinds[] = { { "gpu/entry/", PTX_ENTRY },
		      { "gpu/exit/", PTX_EXIT },
		      { "kprobe/", PTX_ENTRY },
		      { "kretprobe/", PTX_EXIT } };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t n = strlen(kinds[i].prefix);

		if (!strncmp(section, kinds[i].prefix, n) && section[n]) {
			*point = kinds[i].point;
			*kernel = section + n;
			return 0;
		}
	}
	return -1;
}

/* One line's code: comments blanked (block comments may span lines: *in_comment). */
static void code_of(const char *line, size_t n, char *out, bool *in_comment)
{
	size_t i = 0;

	while (i < n) {
		if (*in_comment) {
			if (i + 1 < n && line[i] == '*' && line[i + 1] == '/') {
				*in_comment = false;
				out[i] = out[i + 1] = ' ';
				i += 2;
			} else {
				out[i++] = ' ';
			}
			continue;
		}
		if (i + 1 < n && line[i] == '/' && line[i + 1] == '/') {
			while (i < n)
				out[i++] = ' ';
			break;
		}
		if (i + 1 < n && line[i] == '/' && line[i + 1] == '*') {
			*in_comment = true;
			out[i] = out[i + 1] = ' ';
			i += 2;
			continue;
		}
		out[i] = line[i];
		i++;
	}
	out[n] = 0;
}

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\r')
		s++;
	return s;
}

static bool word(const char **s, const char *w)
{
	size_t n = strlen(w);

	if (strncmp(*s, w, n) || (isalnum((unsigned char)(*s)[n]) || (*s)[n] == '_'))
		return false;
	*s = skip_ws(*s + n);
	return true;
}

/* A kernel's name, if the line opens one (".visible .entry NAME(" and the like). */
static bool entry_name(const char *code, char *name, size_t n)
{
	const char *s = skip_ws(code);
	size_t k = 0;

	while (word(&s, ".visible") || word(&s, ".weak") || word(&s, ".extern"))
		;
	if (!word(&s, ".entry"))
		return false;
	while (s[k] && (isalnum((unsigned char)s[k]) || strchr("_$.", s[k])) && k + 1 < n) {
		name[k] = s[k];
		k++;
	}
	name[k] = 0;
	return k > 0;
}

/*
 * A ret/exit instruction on the line: where its predicate (or, without one, the
 * instruction) starts in the line, else -1. A label in front of it is left before.
 */
static long ret_at(const char *code)
{
	const char *s = skip_ws(code), *start;

	/* LABEL: */
	{
		const char *p = s;

		while (*p && (isalnum((unsigned char)*p) || strchr("_$.", *p)))
			p++;
		if (p > s && *p == ':')
			s = skip_ws(p + 1);
	}
	start = s;
	if (*s == '@') {
		s++;
		if (*s == '!')
			s++;
		while (*s && !isspace((unsigned char)*s))
			s++;
		s = skip_ws(s);
	}
	if (!strncmp(s, "ret", 3))
		s += 3;
	else if (!strncmp(s, "exit", 4))
		s += 4;
	else
		return -1;
	if (!strncmp(s, ".uni", 4))
		s += 4;
	s = skip_ws(s);
	return *s == ';' ? (long)(start - code) : -1;
}

static void call_block(struct strbuf *o, const char *pred, const char *func, unsigned int kidx)
{
	sb_printf(o,
		  "\t{\n\t.param .b64 gs_p;\n\t.param .b64 gs_r;\n\tst.param.b64 [gs_p], %u;\n"
		  "\t%s%scall (gs_r), %s, (gs_p);\n\t}\n",
		  kidx, pred, *pred ? " " : "", func);
}

int ptx_rewrite(const char *ptx, size_t len, const char *funcs, const struct ptx_probe *probes,
		size_t nprobes, struct strbuf *out, struct ptx_rewrite_stats *st, char *err,
		size_t errlen)
{
	struct strbuf o = { 0 };
	char *code = xmalloc(len + 1), name[MAX_NAME] = "";
	bool in_comment = false, have_version = false, have_target = false, funcs_out = false;
	bool in_kernel = false, want_entry = false, want_exit = false, instrumented = false;
	int depth = 0;
	unsigned int kidx = 0;
	size_t off = 0, lineno = 0;

	memset(st, 0, sizeof(*st));
	while (off < len) {
		const char *line = ptx + off, *nl = memchr(line, '\n', len - off);
		size_t n = nl ? (size_t)(nl - line) : len - off;
		const char *c;
		long at;

		lineno++;
		off += n + (nl != NULL);
		code_of(line, n, code, &in_comment);
		c = skip_ws(code);
		if (!in_kernel && depth == 0) {
			if (!strncmp(c, ".version", 8))
				have_version = true;
			if (!strncmp(c, ".target", 7))
				have_target = true;
			/* The probes before the first function (declared before any use). */
			if (!funcs_out && have_target &&
			    (strstr(c, ".entry") || strstr(c, ".func")) && c[0] == '.') {
				sb_puts(&o, "\n// gpuscope probes\n");
				sb_puts(&o, funcs);
				sb_puts(&o, "\n");
				funcs_out = true;
			}
			if (entry_name(code, name, sizeof(name))) {
				in_kernel = true;
				st->kernels++;
				kidx = st->kernels - 1;
				want_entry = want_exit = instrumented = false;
				for (size_t i = 0; i < nprobes; i++)
					if (!strcmp(probes[i].kernel, "*") ||
					    !strcmp(probes[i].kernel, name)) {
						want_entry |= probes[i].point == PTX_ENTRY;
						want_exit |= probes[i].point == PTX_EXIT;
					}
			}
		}
		if (in_kernel && (want_entry || want_exit)) {
			at = depth > 0 ? ret_at(code) : -1;
			if (at >= 0 && want_exit) {
				/* LABEL: stays in front; the predicate goes on the call too. */
				const char *s = code + at;
				char pred[64] = "";

				if (*s == '@') {
					size_t k = 0;

					while (s[k] && !isspace((unsigned char)s[k]) &&
					       k + 1 < sizeof(pred)) {
						pred[k] = s[k];
						k++;
					}
					pred[k] = 0;
				}
				sb_putn(&o, line, (size_t)at);
				sb_puts(&o, "\n");
				for (size_t i = 0; i < nprobes; i++)
					if (probes[i].point == PTX_EXIT &&
					    (!strcmp(probes[i].kernel, "*") ||
					     !strcmp(probes[i].kernel, name))) {
						call_block(&o, pred, probes[i].func, kidx);
						st->exit_calls++;
						instrumented = true;
					}
				sb_putn(&o, line + at, n - (size_t)at);
				sb_puts(&o, "\n");
				continue;
			}
		}
		/* Braces: the kernel's body opens at its first one. */
		for (size_t i = 0; i < n; i++) {
			if (code[i] == '{') {
				depth++;
				if (in_kernel && depth == 1 && want_entry) {
					sb_putn(&o, line, i + 1);
					sb_puts(&o, "\n");
					for (size_t k = 0; k < nprobes; k++)
						if (probes[k].point == PTX_ENTRY &&
						    (!strcmp(probes[k].kernel, "*") ||
						     !strcmp(probes[k].kernel, name))) {
							call_block(&o, "", probes[k].func, kidx);
							st->entry_calls++;
							instrumented = true;
						}
					/* (the rest of the line follows as it was) */
					line += i + 1;
					n -= i + 1;
					memmove(code, code + i + 1, n + 1);
					i = (size_t)-1;
					want_entry = false;
				}
			} else if (code[i] == '}') {
				if (depth == 0) {
					snprintf(err, errlen, "line %zu: a '}' that closes nothing",
						 lineno);
					goto fail;
				}
				if (--depth == 0 && in_kernel) {
					in_kernel = false;
					st->instrumented += instrumented;
				}
			}
		}
		sb_putn(&o, line, n);
		sb_puts(&o, "\n");
	}
	if (in_comment || depth) {
		snprintf(err, errlen, "the module ends inside %s",
			 in_comment ? "a comment" : "a function body");
		goto fail;
	}
	if (!have_version || !have_target) {
		snprintf(err, errlen, "not a PTX module (no .version or .target directive)");
		goto fail;
	}
	if (!funcs_out) {
		sb_puts(&o, "\n// gpuscope probes\n");
		sb_puts(&o, funcs);
	}
	sb_putn(out, o.buf, o.len);
	sb_free(&o);
	free(code);
	return 0;
fail:
	sb_free(&o);
	free(code);
	return -1;
}
