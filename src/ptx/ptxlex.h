/* SPDX-License-Identifier: MIT */
/* Reading PTX line by line: what the rewriter and its module-variable scan share. */
#ifndef GS_PTX_PTXLEX_H
#define GS_PTX_PTXLEX_H

#include <stdbool.h>
#include <stddef.h>

/* One line's code into out (n + 1 bytes): comments blanked (block comments may span
 * lines: *in_comment). */
void ptx_code_of(const char *line, size_t n, char *out, bool *in_comment);
/* Past spaces and tabs. */
const char *ptx_skip_ws(const char *s);
/* Whether *s opens with the word w (a whole word); if so, *s moves past it and spaces. */
bool ptx_word(const char **s, const char *w);
/* A kernel's name, if the line opens one (".visible .entry NAME(" and the like). */
bool ptx_entry_name(const char *code, char *name, size_t n);

#endif
