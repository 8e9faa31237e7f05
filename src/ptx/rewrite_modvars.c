// SPDX-License-Identifier: MIT
/* Which kernels of a module use a module variable (rewrite_int.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/util.h"
#include "ptx/ptxlex.h"
#include "ptx/rewrite_int.h"

static __u64 name_hash(const char *s, size_t n)
{
	__u64 h = 14695981039346656037ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

static bool ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$';
}

static size_t ident_len(const char *s)
{
	size_t n = 0;

	if (!isalpha((unsigned char)*s) && *s != '_' && *s != '$')
		return 0;
	while (ident_char(s[n]))
		n++;
	return n;
}

static int mv_fn_of(struct modvars *v, const char *name, size_t n)
{
	__u64 h = name_hash(name, n);
	void *p = hmap_get(&v->fns, h, 0);

	if (p)
		return (int)((unsigned long)p - 1);
	if (gs_grow(&v->fn, &v->fn_cap, v->nfn + 1, sizeof(*v->fn)) ||
	    hmap_try_put(&v->fns, h, 0, (void *)(unsigned long)(v->nfn + 1), NULL)) {
		v->oom = true;
		return -1;
	}
	v->fn[v->nfn] = (struct mv_fn){ .var = -1 };
	return (int)v->nfn++;
}

/* A module-scope declaration of .global or .const variables: their names. */
static void mv_declared(struct modvars *v, const char *c)
{
	int paren = 0, brace = 0;
	bool want_name = true;

	while (ptx_word(&c, ".visible") || ptx_word(&c, ".weak") || ptx_word(&c, ".common"))
		;
	if (!ptx_word(&c, ".global") && !ptx_word(&c, ".const"))
		return;
	for (; *c && *c != ';'; c++) {
		size_t n;

		if (*c == '(' || *c == '[')
			paren++;
		else if (*c == ')' || *c == ']')
			paren -= paren > 0;
		else if (*c == '{')
			brace++;
		else if (*c == '}')
			brace -= brace > 0;
		else if (*c == '=' && !paren && !brace)
			want_name = false;
		else if (*c == ',' && !paren && !brace)
			want_name = true;
		else if (*c == '.' && !paren) /* .align, .b8, .attribute(...) */
			while (ident_char(c[1]))
				c++;
		else if (want_name && !paren && !brace && (n = ident_len(c))) {
			__u64 h = name_hash(c, n);

			if (!hmap_get(&v->vars, h, 0)) {
				char *name = NULL;

				if (gs_grow(&v->names, &v->names_cap, v->nvars + 1,
					    sizeof(*v->names)) ||
				    !(name = gs_strndup(c, n)) ||
				    hmap_try_put(&v->vars, h, 0,
						 (void *)(unsigned long)(v->nvars + 1), NULL)) {
					free(name);
					v->oom = true;
					return;
				}
				v->names[v->nvars++] = name;
			}
			want_name = false;
			c += n - 1;
		}
	}
}

/* A .func line: its name (after the return parameter's parentheses, if any). */
static const char *func_name(const char *c, size_t *n)
{
	while (ptx_word(&c, ".visible") || ptx_word(&c, ".weak") || ptx_word(&c, ".extern"))
		;
	if (!ptx_word(&c, ".func"))
		return NULL;
	if (*c == '(') {
		if (!(c = strchr(c, ')')))
			return NULL;
		c = ptx_skip_ws(c + 1);
	}
	*n = ident_len(c);
	return *n ? c : NULL;
}

/* The names a function body's line uses: variables and functions. */
static void mv_uses(struct modvars *v, struct mv_fn *f, const char *c)
{
	for (const char *s = c; *s; s++) {
		size_t n;
		void *p;

		if (!(n = ident_len(s)) || (s > c && (ident_char(s[-1]) || strchr(".%", s[-1]))))
			continue;
		if (f->var < 0 && (p = hmap_get(&v->vars, name_hash(s, n), 0)))
			f->var = (int)((unsigned long)p - 1);
		if ((p = hmap_get(&v->fns, name_hash(s, n), 0))) {
			if (gs_grow(&f->callees, &f->cap, f->ncallees + 1, sizeof(*f->callees))) {
				v->oom = true;
				return;
			}
			f->callees[f->ncallees++] = (unsigned long)p - 1;
		}
		s += n - 1;
	}
}

/* Which variable each kernel uses, itself or through the functions it calls. */
void mv_scan(struct modvars *v, const char *ptx, size_t len)
{
	char *code = gs_malloc(len + 1), name[MAX_NAME];
	bool in_comment = false, changed = true;
	int depth = 0, cur = -1;
	size_t off = 0;

	if (!code) {
		v->oom = true;
		return;
	}
	while (off < len && !v->oom) {
		const char *line = ptx + off, *nl = memchr(line, '\n', len - off), *f;
		size_t n = nl ? (size_t)(nl - line) : len - off, fn;

		off += n + (nl != NULL);
		ptx_code_of(line, n, code, &in_comment);
		if (depth == 0) {
			if (ptx_entry_name(code, name, sizeof(name))) {
				/* (named by position: two kernels of one name are not PTX) */
				char key[32];

				snprintf(key, sizeof(key), ".entry %zu", v->nk);
				cur = mv_fn_of(v, key, strlen(key));
				if (cur < 0 ||
				    gs_grow(&v->kfn, &v->kfn_cap, v->nk + 1, sizeof(*v->kfn))) {
					v->oom = true;
					break;
				}
				v->kfn[v->nk++] = cur;
			} else if ((f = func_name(ptx_skip_ws(code), &fn))) {
				cur = mv_fn_of(v, f, fn);
			} else {
				mv_declared(v, ptx_skip_ws(code));
			}
		} else if (cur >= 0) {
			mv_declared(
				v, ptx_skip_ws(code)); /* (one in a function is the module's too) */
			mv_uses(v, &v->fn[cur], code);
		}
		for (const char *s = code; *s; s++)
			if (*s == '{')
				depth++;
			else if (*s == '}' && depth > 0 && --depth == 0)
				cur = -1;
	}
	while (changed && !v->oom) {
		changed = false;
		for (size_t i = 0; i < v->nfn; i++)
			for (size_t k = 0; v->fn[i].var < 0 && k < v->fn[i].ncallees; k++)
				if (v->fn[v->fn[i].callees[k]].var >= 0) {
					v->fn[i].var = v->fn[v->fn[i].callees[k]].var;
					changed = true;
				}
	}
	free(code);
}

void mv_free(struct modvars *v)
{
	for (size_t i = 0; i < v->nvars; i++)
		free(v->names[i]);
	for (size_t i = 0; i < v->nfn; i++)
		free(v->fn[i].callees);
	free(v->names);
	free(v->fn);
	free(v->kfn);
	hmap_free(&v->vars);
	hmap_free(&v->fns);
}

const char *mv_kernel_var(const struct modvars *v, size_t k)
{
	return k < v->nk && v->fn[v->kfn[k]].var >= 0 ? v->names[v->fn[v->kfn[k]].var] : NULL;
}
