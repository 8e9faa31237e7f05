// SPDX-License-Identifier: MIT
/* Reading PTX line by line (see ptxlex.h). */
#include <ctype.h>
#include <string.h>

#include "ptx/ptxlex.h"

/* One line's code: comments blanked (block comments may span lines: *in_comment). */
void ptx_code_of(const char *line, size_t n, char *out, bool *in_comment)
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

const char *ptx_skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\r')
		s++;
	return s;
}

bool ptx_word(const char **s, const char *w)
{
	size_t n = strlen(w);

	if (strncmp(*s, w, n) || (isalnum((unsigned char)(*s)[n]) || (*s)[n] == '_'))
		return false;
	*s = ptx_skip_ws(*s + n);
	return true;
}

/* A kernel's name, if the line opens one (".visible .entry NAME(" and the like). */
bool ptx_entry_name(const char *code, char *name, size_t n)
{
	const char *s = ptx_skip_ws(code);
	size_t k = 0;

	while (ptx_word(&s, ".visible") || ptx_word(&s, ".weak") || ptx_word(&s, ".extern"))
		;
	if (!ptx_word(&s, ".entry"))
		return false;
	while (s[k] && (isalnum((unsigned char)s[k]) || strchr("_$.", s[k])) && k + 1 < n) {
		name[k] = s[k];
		k++;
	}
	name[k] = 0;
	return k > 0;
}
