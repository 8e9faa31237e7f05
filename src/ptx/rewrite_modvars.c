// SPDX-License-Identifier: MIT
/* A module's variables, read where the program's are (rewrite_int.h). */
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

/* A declaration of .global or .const variables (their names kept): whether it is one. */
static bool mv_declared(struct modvars *v, const char *c, size_t lineno)
{
	int paren = 0, brace = 0;
	bool want_name = true, opaque;

	while (ptx_word(&c, ".visible") || ptx_word(&c, ".weak") || ptx_word(&c, ".common"))
		;
	if (!ptx_word(&c, ".global") && !ptx_word(&c, ".const"))
		return false;
	opaque = strstr(c, ".texref") || strstr(c, ".samplerref") || strstr(c, ".surfref");
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

				if (gs_grow(&v->var, &v->var_cap, v->nvars + 1, sizeof(*v->var)) ||
				    !(name = gs_strndup(c, n)) ||
				    hmap_try_put(&v->vars, h, 0,
						 (void *)(unsigned long)(v->nvars + 1), NULL)) {
					free(name);
					v->oom = true;
					return true;
				}
				v->var[v->nvars++] = (struct mv_var){ name, lineno, opaque };
			}
			want_name = false;
			c += n - 1;
		}
	}
	return true;
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
		if (f->var < 0 && (p = hmap_get(&v->vars, name_hash(s, n), 0)) &&
		    v->var[(unsigned long)p - 1].opaque)
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

/* The module's variables, the opaque one each kernel uses (itself or through the functions
 * it calls), and where __gs_vars can go. */
void mv_scan(struct modvars *v, const char *ptx, size_t len)
{
	char *code = gs_malloc(len + 1), name[MAX_NAME];
	bool in_comment = false, changed = true;
	int depth = 0, cur = -1;
	size_t off = 0, lineno = 0, header = 0;

	if (!code) {
		v->oom = true;
		return;
	}
	while (off < len && !v->oom) {
		const char *line = ptx + off, *nl = memchr(line, '\n', len - off), *f;
		size_t n = nl ? (size_t)(nl - line) : len - off, fn;

		bool decl = false;

		off += n + (nl != NULL);
		lineno++;
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
				header = lineno;
			} else if ((f = func_name(ptx_skip_ws(code), &fn))) {
				cur = mv_fn_of(v, f, fn);
				header = lineno;
			} else {
				decl = mv_declared(v, ptx_skip_ws(code), lineno);
			}
		} else if (cur >= 0) {
			/* (one in a function is the module's too) */
			mv_declared(v, ptx_skip_ws(code), lineno);
			mv_uses(v, &v->fn[cur], code);
		}
		for (const char *s = code; *s; s++) {
			if (*s == '{') {
				/* a function's body: __gs_vars is declared before its header */
				if (depth++ == 0 && cur >= 0 && !decl && !v->table_line)
					v->table_line = header;
			} else if (*s == '}' && depth > 0 && --depth == 0) {
				cur = -1;
			}
		}
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
		free(v->var[i].name);
	for (size_t i = 0; i < v->nfn; i++)
		free(v->fn[i].callees);
	free(v->var);
	free(v->fn);
	free(v->kfn);
	hmap_free(&v->vars);
	hmap_free(&v->fns);
}

const char *mv_kernel_var(const struct modvars *v, size_t k)
{
	return k < v->nk && v->fn[v->kfn[k]].var >= 0 ? v->var[v->fn[v->kfn[k]].var].name : NULL;
}

/* A reference's offset outside brackets ("var+8", "var - 4"): its length, and *off. */
static size_t offset_at(const char *s, long long *off)
{
	const char *p = ptx_skip_ws(s);
	char *end;
	int sign = *p == '-' ? -1 : 1;

	if (*p != '+' && *p != '-')
		return 0;
	p = ptx_skip_ws(p + 1);
	if (!isdigit((unsigned char)*p))
		return 0;
	*off = sign * strtoll(p, &end, 0);
	return (size_t)(end - s);
}

/* The opcode's .const state space gone (its address is a generic one now). */
static void opcode_out(struct strbuf *out, const char *op, size_t n)
{
	static const struct {
		const char *from, *to;
	} map[] = { { "ld.const.", "ld." },
		    { "cvta.const.", "mov." },
		    { "cvta.to.const.", "mov." } };

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (n >= strlen(map[i].from) && !strncmp(op, map[i].from, strlen(map[i].from))) {
			sb_puts(out, map[i].to);
			sb_putn(out, op + strlen(map[i].from), n - strlen(map[i].from));
			return;
		}
	sb_putn(out, op, n);
}

int mv_line(const struct modvars *v, const char *code, bool continued, struct strbuf *pre,
	    struct strbuf *out, unsigned char *used)
{
	const char *s = ptx_skip_ws(code), *op, *lab = s;
	size_t n = ident_len(s), labn = 0, refs = 0;
	long long adds[8];
	int slot[8], bracket = 0;

	if (!v->nvars || *s == '.' || !*s)
		return 0;
	/* LABEL: stays in front of the block, so that branches to it load the addresses */
	if (n && *ptx_skip_ws(s + n) == ':') {
		labn = (size_t)(ptx_skip_ws(s + n) + 1 - lab);
		s = ptx_skip_ws(lab + labn);
	}
	op = s;
	if (*op == '@')
		while (*op && !isspace((unsigned char)*op))
			op++;
	op = ptx_skip_ws(op);
	sb_reset(out);
	sb_putc(out, '\t');
	sb_putn(out, s, (size_t)(op - s));
	n = 0;
	while (!continued && op[n] && !isspace((unsigned char)op[n]))
		n++;
	opcode_out(out, op, n);
	for (const char *c = op + n; *c; c++) {
		void *p;
		size_t k;

		if (*c == '[' || *c == ']')
			bracket += *c == '[' ? 1 : -1;
		if (!(k = ident_len(c)) ||
		    (c > code && (ident_char(c[-1]) || strchr(".%", c[-1]))) ||
		    !(p = hmap_get(&v->vars, name_hash(c, k), 0)) ||
		    v->var[(unsigned long)p - 1].opaque) {
			k = k ? k : 1;
			sb_putn(out, c, k);
			c += k - 1;
			continue;
		}
		if (refs == 8 || continued || strchr(code, '{') || strchr(code, '}') ||
		    !strchr(code, ';'))
			return -1;
		slot[refs] = (int)((unsigned long)p - 1);
		adds[refs] = 0;
		used[slot[refs]] = 1;
		sb_printf(out, "%%gsv%zu", refs);
		c += k;
		if (!bracket)
			c += offset_at(c, &adds[refs]);
		c--;
		refs++;
	}
	if (out->oom)
		return -1;
	if (!refs) {
		if (!strcmp(out->buf + 1, s))
			return 0;
		sb_reset(pre); /* (the label back in front) */
		sb_putn(pre, lab, labn);
		sb_puts(pre, out->buf);
		sb_reset(out);
		sb_puts(out, pre->buf ? pre->buf : "");
		return out->oom || pre->oom ? -1 : 2;
	}
	sb_reset(pre);
	if (labn)
		sb_printf(pre, "%.*s\n", (int)labn, lab);
	sb_printf(pre, "{\n\t.reg .b64 %%gsv<%zu>;\n", refs);
	for (size_t i = 0; i < refs; i++) {
		sb_printf(pre, "\tld.global.u64 %%gsv%zu, [__gs_vars+%d];\n", i, slot[i] * 8);
		if (adds[i])
			sb_printf(pre, "\tadd.s64 %%gsv%zu, %%gsv%zu, %lld;\n", i, i, adds[i]);
	}
	return 1;
}

void mv_table(const struct modvars *v, struct strbuf *o)
{
	if (!v->nvars)
		return;
	sb_printf(o,
		  "\n// gpuscope: where the module's variables are\n"
		  ".visible .global .align 8 .u64 __gs_vars[%zu] = {",
		  v->nvars);
	for (size_t i = 0; i < v->nvars; i++) {
		const struct mv_var *x = &v->var[i];

		if (x->opaque || x->line >= v->table_line)
			sb_printf(o, "%s0", i ? ", " : "");
		else
			sb_printf(o, "%sgeneric(%s)", i ? ", " : "", x->name);
	}
	sb_puts(o, "};\n\n");
}
