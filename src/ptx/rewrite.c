// SPDX-License-Identifier: MIT
/* Probe injection into PTX (see rewrite.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/util.h"
#include "ptx/ptxlex.h"
#include "ptx/rewrite.h"
#include "ptx/rewrite_int.h"

int ptx_probe_section(const char *section, enum ptx_point *point, const char **kernel)
{
	static const struct {
		const char *prefix;
		enum ptx_point point;
	} kinds[] = { { "gpu/entry/", PTX_ENTRY }, { "gpu/exit/", PTX_EXIT },
		      { "gpu/load/", PTX_LOAD },   { "gpu/store/", PTX_STORE },
		      { "gpu/mem/", PTX_MEM },	   { "kprobe/", PTX_ENTRY },
		      { "kretprobe/", PTX_EXIT } };

	/* bpftime's mem_trace: a probe at every global load and store of every kernel */
	if (!strcmp(section, "kprobe/__memcapture")) {
		*point = PTX_MEM;
		*kernel = "*";
		return 0;
	}
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
/*
 * A ret/exit instruction on the line: where its predicate (or, without one, the
 * instruction) starts in the line, else -1. A label in front of it is left before.
 */
static long ret_at(const char *code)
{
	const char *s = ptx_skip_ws(code), *start;

	/* LABEL: */
	{
		const char *p = s;

		while (*p && (isalnum((unsigned char)*p) || strchr("_$.", *p)))
			p++;
		if (p > s && *p == ':')
			s = ptx_skip_ws(p + 1);
	}
	start = s;
	if (*s == '@') {
		s++;
		if (*s == '!')
			s++;
		while (*s && !isspace((unsigned char)*s))
			s++;
		s = ptx_skip_ws(s);
	}
	if (!strncmp(s, "ret", 3))
		s += 3;
	else if (!strncmp(s, "exit", 4))
		s += 4;
	else
		return -1;
	if (!strncmp(s, ".uni", 4))
		s += 4;
	s = ptx_skip_ws(s);
	return *s == ';' ? (long)(start - code) : -1;
}

/* The bytes of a PTX fundamental type (".u32" without its dot), 0 if not one. */
static unsigned int type_bytes(const char *t, size_t n)
{
	static const struct {
		const char *name;
		unsigned int bytes;
	} types[] = { { "b8", 1 },	   { "u8", 1 },	    { "s8", 1 },    { "b16", 2 },
		      { "u16", 2 },	   { "s16", 2 },    { "f16", 2 },   { "bf16", 2 },
		      { "b32", 4 },	   { "u32", 4 },    { "s32", 4 },   { "f32", 4 },
		      { "f16x2", 4 },	   { "bf16x2", 4 }, { "b64", 8 },   { "u64", 8 },
		      { "s64", 8 },	   { "f64", 8 },    { "b128", 16 }, { "texref", 8 },
		      { "samplerref", 8 }, { "surfref", 8 } };

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strlen(types[i].name) == n && !memcmp(types[i].name, t, n))
			return types[i].bytes;
	return 0;
}

/*
 * Lay out a kernel's parameter list (the text between its parentheses): how many
 * parameters and where the next one, 8-aligned, would go. 0, or -1 if a declaration is not
 * understood.
 */
static int param_layout(const char *list, unsigned int *nparams, unsigned int *end)
{
	const char *s = list;
	unsigned long off = 0;

	*nparams = 0;
	while (*(s = ptx_skip_ws(s))) {
		const char *e = strchr(s, ',');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		unsigned long align = 0, tsize = 0, count = 1;
		const char *p = s;

		while (n && isspace((unsigned char)s[n - 1]))
			n--;
		if (n) {
			while (p < s + n) {
				const char *w = p;

				while (p < s + n && !isspace((unsigned char)*p) && *p != '[')
					p++;
				if (*w == '.' && p - w == 6 && !strncmp(w, ".align", 6)) {
					align = strtoul(ptx_skip_ws(p), (char **)&p, 10);
				} else if (*w == '.' && type_bytes(w + 1, (size_t)(p - w - 1))) {
					tsize = type_bytes(w + 1, (size_t)(p - w - 1));
				} else if (*w == '[' || *p == '[') {
					p = strchr(p, '[');
					count = strtoul(p + 1, (char **)&p, 10);
					p = strchr(p, ']');
					if (!p)
						return -1;
					p++;
				}
				if (p == w)
					p++;
				while (p < s + n && isspace((unsigned char)*p))
					p++;
			}
			if (!tsize || !count || strncmp(s, ".param", 6))
				return -1;
			if (!align)
				align = tsize;
			if (align & (align - 1) || align > 256)
				return -1;
			off = (off + align - 1) & ~(align - 1);
			off += tsize * count;
			(*nparams)++;
			if (off > (1u << 20))
				return -1;
		}
		if (!e)
			break;
		s = e + 1;
	}
	*end = (unsigned int)((off + 7) & ~7ul);
	return 0;
}

/* A global memory access found on a line. */
struct access {
	long at;       /* where its predicate (or it) starts in the line */
	char pred[64]; /* "@%p1", "@!%p1" or "" */
	int point;     /* PTX_LOAD, PTX_STORE */
	unsigned int size;
	char base[128]; /* a register (%rd...) or a symbol */
	long long off;
	bool generic; /* no state space: global only if isspacep.global says so */
};

static bool access_at(const char *code, struct access *a)
{
	const char *s = ptx_skip_ws(code), *op, *b, *e;
	unsigned int vec = 1, tsize = 0;
	bool global = false;
	size_t k = 0;

	{
		const char *p = s;

		while (*p && (isalnum((unsigned char)*p) || strchr("_$.", *p)))
			p++;
		if (p > s && *p == ':')
			s = ptx_skip_ws(p + 1);
	}
	a->at = (long)(s - code);
	a->pred[0] = 0;
	if (*s == '@') {
		while (s[k] && !isspace((unsigned char)s[k]) && k + 1 < sizeof(a->pred)) {
			a->pred[k] = s[k];
			k++;
		}
		a->pred[k] = 0;
		s = ptx_skip_ws(s + k);
	}
	op = s;
	if (!strncmp(op, "ld.", 3) || !strncmp(op, "ld ", 3))
		a->point = PTX_LOAD;
	else if (!strncmp(op, "st.", 3) || !strncmp(op, "atom.", 5) || !strncmp(op, "red.", 4))
		a->point = PTX_STORE;
	else
		return false;
	while (*s && !isspace((unsigned char)*s)) {
		const char *t = ++s;

		while (*s && *s != '.' && !isspace((unsigned char)*s))
			s++;
		if (t == s)
			continue;
		if (!strncmp(t, "shared", 6) || !strncmp(t, "local", 5) ||
		    !strncmp(t, "param", 5) || !strncmp(t, "const", 5) || !strncmp(t, "tex", 3) ||
		    !strncmp(t, "async", 5))
			return false;
		if (s - t == 6 && !strncmp(t, "global", 6))
			global = true;
		else if (s - t == 2 && t[0] == 'v' && strchr("248", t[1]))
			vec = (unsigned int)(t[1] - '0');
		else if (type_bytes(t, (size_t)(s - t)))
			tsize = type_bytes(t, (size_t)(s - t));
	}
	if (!tsize || !(b = strchr(s, '[')) || !(e = strchr(b, ']')))
		return false;
	a->size = vec * tsize;
	a->generic = !global;
	b = ptx_skip_ws(b + 1);
	k = 0;
	while (b < e && (isalnum((unsigned char)*b) || strchr("_$%.", *b)) &&
	       k + 1 < sizeof(a->base))
		a->base[k++] = *b++;
	a->base[k] = 0;
	b = ptx_skip_ws(b);
	a->off = 0;
	if (*b == '+' || *b == '-') {
		char *end;

		a->off = strtoll(*b == '+' ? b + 1 : b, &end, 0);
		b = ptx_skip_ws(end);
	}
	if (b != e || !k)
		return false;
	/* 64-bit registers by nvcc's and Triton's naming; symbols only for .global */
	if (a->base[0] == '%')
		return !strncmp(a->base, "%rd", 3);
	return global && !isdigit((unsigned char)a->base[0]);
}

/* The call of func with the context filled in for point; acc for memory accesses. */
static void call_block(struct strbuf *o, const char *pred, const char *func, unsigned int kid,
		       int point, const struct access *acc)
{
	const char *call_pred = pred;

	sb_printf(o, "\t{\n\t.reg .b64 gs_a;\n\t.param .b64 gs_p;\n\t.param .b64 gs_r;\n");
	if (acc) {
		if (acc->base[0] == '%')
			sb_printf(o, "\tadd.s64 gs_a, %s, %lld;\n", acc->base, acc->off);
		else
			sb_printf(o, "\tmov.u64 gs_a, %s;\n\tadd.s64 gs_a, gs_a, %lld;\n",
				  acc->base, acc->off);
		if (!acc->generic)
			sb_printf(o, "\tcvta.global.u64 gs_a, gs_a;\n");
		sb_printf(o,
			  "\tst.local.u64 [__gs_ctx+8], gs_a;\n\tst.local.u32 [__gs_ctx+16], %u;\n",
			  acc->size);
		if (acc->generic) {
			sb_printf(o, "\t.reg .pred gs_q;\n\tisspacep.global gs_q, gs_a;\n");
			if (*pred) {
				bool neg = pred[1] == '!';

				sb_printf(o,
					  "\t.reg .pred gs_n;\n\t%s gs_n, %s;\n"
					  "\tand.pred gs_q, gs_q, gs_n;\n",
					  neg ? "not.pred" : "mov.pred", pred + 1 + neg);
			}
			call_pred = "@gs_q";
		}
	}
	sb_printf(o,
		  "\tst.local.u32 [__gs_ctx], %u;\n\tst.local.u32 [__gs_ctx+4], %d;\n"
		  "\tmov.u64 gs_a, __gs_ctx;\n\tcvta.local.u64 gs_a, gs_a;\n"
		  "\tst.param.b64 [gs_p], gs_a;\n"
		  "\t%s%scall (gs_r), %s, (gs_p);\n\t}\n",
		  kid, point, call_pred, *call_pred ? " " : "", func);
}

/* The context's declaration, and its launch part, as the body opens. */
static void ctx_block(struct strbuf *o, bool launch_param)
{
	sb_puts(o, "\t.local .align 8 .b8 __gs_ctx[40];\n");
	if (launch_param)
		sb_puts(o, "\t{\n\t.reg .b64 gs_l;\n\tld.param.u64 gs_l, [__gs_launch];\n"
			   "\tst.local.u64 [__gs_ctx+24], gs_l;\n"
			   "\tld.param.u64 gs_l, [__gs_launch+8];\n"
			   "\tst.local.u64 [__gs_ctx+32], gs_l;\n\t}\n");
	else
		sb_puts(o, "\tst.local.u64 [__gs_ctx+24], 0;\n\tst.local.u64 [__gs_ctx+32], 0;\n");
}

static bool probe_matches(const struct ptx_probe *p, const char *kernel, int point)
{
	if (strcmp(p->kernel, "*") && strcmp(p->kernel, kernel))
		return false;
	if ((int)p->point == point)
		return true;
	return p->point == PTX_MEM && (point == PTX_LOAD || point == PTX_STORE);
}

void ptx_rewrite_stats_free(struct ptx_rewrite_stats *st)
{
	for (unsigned int i = 0; st->k && i < st->kernels; i++) {
		free(st->k[i].name);
		free(st->k[i].variable);
	}
	for (unsigned int i = 0; st->var_names && i < st->nvars; i++)
		free(st->var_names[i]);
	free(st->k);
	free(st->var_names);
	free(st->var_used);
	st->k = NULL;
	st->var_names = NULL;
	st->var_used = NULL;
}
int ptx_rewrite(const char *ptx, size_t len, const char *funcs, const struct ptx_probe *probes,
		size_t nprobes, const struct ptx_rewrite_opts *opts, struct strbuf *out,
		struct ptx_rewrite_stats *st, char *err, size_t errlen)
{
	static const struct ptx_rewrite_opts none = { 0, false };
	struct strbuf o = { 0 }, params = { 0 }, pre = { 0 }, tl = { 0 };
	char *code_buf = gs_malloc(len + 1), *code, name[MAX_NAME] = "";
	bool in_comment = false, have_version = false, have_target = false, funcs_out = false;
	bool in_kernel = false, want[5] = { false }, any = false, instrumented = false;
	bool left_out = false, drop, continued = false;
	int rc = -1;
	int depth = 0, pstate = 0; /* parameters: 0 before '(', 1 inside, 2 done */
	unsigned int kidx = 0, kid = 0;
	size_t off = 0, lineno = 0, kcap = 0;
	struct modvars mv = { 0 };

	if (!opts)
		opts = &none;
	memset(st, 0, sizeof(*st));
	if (!code_buf)
		goto oom;
	mv_scan(&mv, ptx, len);
	if (mv.oom || !(st->var_used = gs_calloc(mv.nvars + 1, 1)) ||
	    !(st->var_names = gs_calloc(mv.nvars + 1, sizeof(char *))))
		goto oom;
	for (; st->nvars < mv.nvars; st->nvars++)
		if (!(st->var_names[st->nvars] = gs_strdup(mv.var[st->nvars].name)))
			goto oom;
	while (off < len) {
		const char *line = ptx + off, *nl = memchr(line, '\n', len - off);
		size_t n = nl ? (size_t)(nl - line) : len - off;
		const char *c;
		struct access acc;
		bool close = false;
		long at;
		int r;

		lineno++;
		off += n + (nl != NULL);
		code = code_buf;
		ptx_code_of(line, n, code, &in_comment);
		if (lineno == mv.table_line)
			mv_table(&mv, &o);
		/* The module's variables read where the program's are (rewrite_int.h). */
		if (depth > 0 && !(in_kernel && left_out) &&
		    (r = mv_line(&mv, code, continued, &pre, &tl, st->var_used))) {
			if (r < 0) {
				snprintf(err, errlen,
					 "line %zu: an instruction that uses a module variable is "
					 "not understood",
					 lineno);
				goto fail;
			}
			if (r == 1)
				sb_putn(&o, pre.buf, pre.len);
			/* (one buffer for both: a body line, never cut at a brace below) */
			line = code = tl.buf;
			n = tl.len;
			close = r == 1;
		}
		c = ptx_skip_ws(code);
		/* (an instruction goes on to the next line unless this one ends it) */
		if (*c) {
			const char *e = c + strlen(c);

			while (e > c && isspace((unsigned char)e[-1]))
				e--;
			continued = e > c && !strchr(";{}:", e[-1]);
		}
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
			if (ptx_entry_name(code, name, sizeof(name))) {
				in_kernel = true;
				if (gs_grow(&st->k, &kcap, st->kernels + 1, sizeof(*st->k)))
					goto oom;
				kidx = st->kernels++;
				kid = opts->kernel_base + kidx;
				st->k[kidx] = (struct ptx_kernel_info){ .name = gs_strdup(name),
									.id = kid };
				if (!st->k[kidx].name)
					goto oom;
				memset(want, 0, sizeof(want));
				for (size_t i = 0; i < nprobes; i++)
					for (int p = PTX_ENTRY; p <= PTX_STORE; p++)
						want[p] |= probe_matches(&probes[i], name, p);
				any = want[PTX_ENTRY] || want[PTX_EXIT] || want[PTX_LOAD] ||
				      want[PTX_STORE];
				if (any && mv_kernel_var(&mv, kidx)) {
					st->k[kidx].variable = gs_strdup(mv_kernel_var(&mv, kidx));
					if (!st->k[kidx].variable)
						goto oom;
					st->variables++;
					any = false;
					memset(want, 0, sizeof(want));
				}
				/* Another kernel than the one asked for: left out, its id kept. */
				left_out = opts->only && strcmp(name, opts->only);
				if (left_out) {
					any = false;
					memset(want, 0, sizeof(want));
				}
				instrumented = false;
				pstate = 0;
				sb_reset(&params);
			}
		}
		drop = in_kernel && left_out;
		/* The parameter list: laid out, and __gs_launch appended. */
		if (in_kernel && pstate < 2 && depth == 0) {
			size_t i = 0, from = 0;

			for (; i < n && pstate < 2; i++) {
				if (pstate == 0 && code[i] == '(') {
					pstate = 1;
					from = i + 1;
				} else if (pstate == 1 && code[i] == ')') {
					struct ptx_kernel_info *k = &st->k[kidx];

					sb_putn(&params, code + from, i - from);
					sb_putc(&params, 0);
					if (params.oom)
						goto oom;
					if (param_layout(params.buf, &k->nparams, &k->launch_off) &&
					    any) {
						snprintf(err, errlen,
							 "line %zu: the parameters of %s are not "
							 "understood",
							 lineno, name);
						goto fail;
					}
					pstate = 2;
					if (any && opts->launch_param) {
						sb_putn(&o, line, i);
						sb_printf(&o,
							  "%s.param .align 8 .b8 __gs_launch[16]",
							  k->nparams ? ",\n\t" : "");
						line += i;
						n -= i;
						memmove(code, code + i, n + 1);
						i = 0;
						break;
					}
				}
			}
			if (pstate == 1) {
				sb_putn(&params, code + from, n - from);
				sb_putc(&params, ' ');
			}
		}
		if (in_kernel && any && depth > 0) {
			at = ret_at(code);
			if (at >= 0 && want[PTX_EXIT]) {
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
					if (probe_matches(&probes[i], name, PTX_EXIT)) {
						call_block(&o, pred, probes[i].func, kid, PTX_EXIT,
							   NULL);
						st->exit_calls++;
						instrumented = true;
					}
				sb_putn(&o, line + at, n - (size_t)at);
				sb_puts(&o, close ? "\n}\n" : "\n");
				continue;
			}
			if ((want[PTX_LOAD] || want[PTX_STORE]) && access_at(code, &acc) &&
			    want[acc.point]) {
				sb_putn(&o, line, (size_t)acc.at);
				sb_puts(&o, "\n");
				for (size_t i = 0; i < nprobes; i++)
					if (probe_matches(&probes[i], name, acc.point)) {
						call_block(&o, acc.pred, probes[i].func, kid,
							   acc.point, &acc);
						if (acc.point == PTX_LOAD)
							st->load_calls++;
						else
							st->store_calls++;
						instrumented = true;
					}
				sb_putn(&o, line + acc.at, n - (size_t)acc.at);
				sb_puts(&o, close ? "\n}\n" : "\n");
				continue;
			}
		}
		/* Braces: the kernel's body opens at its first one. */
		for (size_t i = 0; i < n; i++) {
			if (code[i] == '{') {
				depth++;
				if (in_kernel && depth == 1 && any) {
					sb_putn(&o, line, i + 1);
					sb_puts(&o, "\n");
					ctx_block(&o, opts->launch_param);
					for (size_t k = 0; k < nprobes; k++)
						if (probe_matches(&probes[k], name, PTX_ENTRY)) {
							call_block(&o, "", probes[k].func, kid,
								   PTX_ENTRY, NULL);
							st->entry_calls++;
							instrumented = true;
						}
					/* (the rest of the line follows as it was) */
					line += i + 1;
					n -= i + 1;
					memmove(code, code + i + 1, n + 1);
					i = (size_t)-1;
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
					st->k[kidx].instrumented = instrumented;
				}
			}
		}
		if (drop)
			continue;
		sb_putn(&o, line, n);
		sb_puts(&o, close ? "\n}\n" : "\n");
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
	if (o.oom || params.oom || pre.oom || tl.oom)
		goto oom;
	sb_putn(out, o.buf, o.len);
	if (out->oom)
		goto oom;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	ptx_rewrite_stats_free(st);
out:
	sb_free(&o);
	sb_free(&params);
	sb_free(&pre);
	sb_free(&tl);
	free(code_buf);
	mv_free(&mv);
	return rc;
}
