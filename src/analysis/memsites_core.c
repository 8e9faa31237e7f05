// SPDX-License-Identifier: MIT
/* The memory analyses' pieces that keep no state: address spaces, the trend test, labels
 * (see memsites.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/memsites_int.h"
#include "core/demangle.h"
#include "core/names.h"
#include "core/util.h"

#define LEAK_CONFIDENCE 0.999
#define LEAK_MIN_GROWTH (1ULL << 20) /* bytes over the window: less is not worth a finding */
/* The window's least span: a site younger than twice this is not judged. A young site is
 * often in its first rise (a training step's first forward pass: activations pile up
 * until the backward pass frees them); the later half of a second of life holds a fall. */
#define LEAK_MIN_WINDOW_NS 500000000ULL

/* ---- the process's address space on one device ----------------------------------------- */

static void strand(struct space *sp, __u64 bytes)
{
	sp->stranded += bytes;
	sp->largest_stranded = GS_MAX(sp->largest_stranded, bytes);
}

static void space_visit(void *ctx, const struct model_alloc *r)
{
	struct space *sp = ctx;

	if ((r->kind != MK_DEVICE && r->kind != MK_MAPPING) ||
	    model__mem_slot(r->device) != sp->slot)
		return;
	if (sp->any && r->addr > sp->prev_end) {
		__u64 hole = r->addr - sp->prev_end;
		__u64 head_end = (sp->prev_end + MEM_PAGE - 1) / MEM_PAGE * MEM_PAGE,
		      tail_start = r->addr / MEM_PAGE * MEM_PAGE;

		sp->holes += hole;
		sp->largest = GS_MAX(sp->largest, hole);
		/* The free part of the page the last range ends in and of the page this one
		 * starts in (one piece if that is the same page). */
		if (tail_start < head_end) {
			strand(sp, hole);
		} else {
			strand(sp, head_end - sp->prev_end);
			strand(sp, r->addr - tail_start);
		}
	}
	if (!sp->any)
		sp->first = r->addr;
	sp->any = true;
	sp->prev_end = GS_MAX(sp->prev_end, r->addr + r->size);
	sp->live += r->size;
	sp->ranges++;
}

void memsites__space(const struct memsites *ms, __u32 pid, int slot, struct space *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->slot = slot;
	model__each_alloc(ms->m, pid, space_visit, sp);
}

void memsites__frag_now(const struct memsites *ms, __u32 pid, int slot, __u64 ts,
			struct frag_sample *out)
{
	struct space sp;

	memsites__space(ms, pid, slot, &sp);
	out->ts = ts;
	out->live = sp.live;
	out->holes = sp.holes;
	out->largest_hole = sp.largest;
	out->ranges = sp.ranges;
	out->stranded = sp.stranded;
	out->largest_stranded = sp.largest_stranded;
}

double frag_score(const struct frag_sample *s)
{
	return s->stranded ? (double)s->stranded / (double)(s->stranded + s->live) : 0.0;
}

/* ---- the trend test --------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The samples of the later half of what was seen of the site, and its bytes now. */
unsigned int memsites__window(const struct mem_site *s, __u64 now, __u64 *ts, __u64 *xs)
{
	__u64 from = s->first_ts + (now - GS_MIN(now, s->first_ts)) / 2;
	unsigned int n = 0;

	for (unsigned int i = 0; i < s->nsamples; i++)
		if (s->samples[i].ts >= from) {
			if (ts)
				ts[n] = s->samples[i].ts;
			xs[n++] = s->samples[i].bytes;
		}
	if (!n || s->samples[s->nsamples - 1].ts < now) { /* as it is now */
		if (ts)
			ts[n] = now;
		xs[n++] = s->live_bytes;
	}
	return n;
}

/* Whether the window's bytes rise in each third of it. */
bool memsites__in_thirds(const __u64 *xs, unsigned int n)
{
	for (unsigned int k = 0; k < 3; k++)
		if (xs[(k + 1) * (n - 1) / 3] <= xs[k * (n - 1) / 3])
			return false;
	return true;
}

void memsites__trend(const struct mem_site *s, __u64 now, struct leak_test *t)
{
	__u64 ts[SITE_SAMPLES + 1], xs[SITE_SAMPLES + 1], sorted[SITE_SAMPLES + 1];
	double slopes[(SITE_SAMPLES + 1) * SITE_SAMPLES / 2], var, z;
	unsigned int n, ns = 0;
	long long S = 0;

	memset(t, 0, sizeof(*t));
	n = memsites__window(s, now, ts, xs);
	t->n = n;
	t->from = ts[0];
	t->to = ts[n - 1];
	t->growth = (__s64)xs[n - 1] - (__s64)xs[0];
	if (n < MIN_WINDOW || s->kind == MK_HOST) /* (page-locked host memory: not the GPU's) */
		return;
	for (unsigned int i = 0; i < n; i++)
		for (unsigned int j = i + 1; j < n; j++) {
			S += xs[j] > xs[i] ? 1 : xs[j] < xs[i] ? -1 : 0;
			if (ts[j] > ts[i])
				slopes[ns++] = ((double)xs[j] - (double)xs[i]) /
					       ((double)(ts[j] - ts[i]) / 1e9);
		}
	/* Var(S) with ties: n(n-1)(2n+5) less t(t-1)(2t+5) per group of t equal values. */
	var = (double)n * (n - 1) * (2 * n + 5);
	memcpy(sorted, xs, n * sizeof(*xs));
	qsort(sorted, n, sizeof(*sorted), u64_cmp);
	for (unsigned int i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && sorted[j] == sorted[i]; j++)
			;
		var -= (double)(j - i) * (j - i - 1) * (2 * (j - i) + 5);
	}
	var /= 18;
	z = S > 0 && var > 0 ? ((double)S - 1) / sqrt(var) : 0;
	t->confidence = 0.5 * erfc(-z / M_SQRT2);
	if (ns) {
		qsort(slopes, ns, sizeof(*slopes), cmp_double);
		t->slope_bps = ns % 2 ? slopes[ns / 2] : (slopes[ns / 2 - 1] + slopes[ns / 2]) / 2;
	}
	/* Rising in each third of the window, not in one step. */
	t->suspected = t->confidence >= LEAK_CONFIDENCE && t->growth >= (__s64)LEAK_MIN_GROWTH &&
		       t->to - t->from >= LEAK_MIN_WINDOW_NS && t->slope_bps > 0 &&
		       memsites__in_thirds(xs, n);
}

/* ---- labels ----------------------------------------------------------------------------- */

/* A frame the symboliser could only place in its file ("libcudart.so.13+0x41b5e"). */
static bool only_placed(const char *sym)
{
	const char *plus = strstr(sym, "+0x");

	if (!plus || plus == sym || strpbrk(sym, "(: "))
		return false;
	for (plus += 3; *plus; plus++)
		if (!isxdigit((unsigned char)*plus))
			return false;
	return true;
}

/*
 * A site's frames' names, as its labels show them: from the first named frame (the
 * innermost are often inside a stripped library the call went through: cudart's cudaMalloc
 * calling cuMemAlloc), demangled, without their parameters ("f(int, char const*)" reads as
 * "f"); up to the first unnamed one past it (where the frame-pointer chain left code that
 * keeps one: what follows is not frames). The innermost, unnamed, is its address. A stack
 * with Python frames is labelled by them alone, from the innermost: the line of the
 * program that allocated.
 */
static unsigned int site_names(const struct memsites *ms, const struct mem_site *s, char **out)
{
	const struct stack_entry *st = s->stack;
	unsigned int first = 0, n = 0;

	bool python = false;

	for (unsigned int i = 0; i < st->nframes && !python; i++)
		if (GS_IS_PYFRAME(st->ip[i])) {
			first = i;
			python = true;
		}
	for (unsigned int i = 0; i < st->nframes && !python; i++) {
		const char *sym = model__symbol(ms->m, s->pid, st->ip[i]);

		if (!sym)
			break;
		if (!only_placed(sym)) {
			first = i;
			break;
		}
	}
	for (unsigned int i = first; i < st->nframes && n < SITE_FRAMES; i++) {
		const char *sym = model__symbol(ms->m, s->pid, st->ip[i]);
		char *d, hex[32], *paren;

		if (python) {
			/* The program's Python lines, from the innermost: native frames between
			 * them (the interpreter's) are left out. */
			if (GS_IS_PYFRAME(st->ip[i]))
				out[n++] = xstrdup(sym ? sym : "(unnamed Python frame)");
			continue;
		}
		d = sym ? demangle(sym) : NULL;
		if (!d) {
			if (i > first)
				break;
			snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)st->ip[i]);
			d = xstrdup(hex);
		}
		paren = strchr(d, '(');
		if (paren && paren != d)
			*paren = 0;
		out[n++] = d;
	}
	return n;
}

void memsites__label(const struct memsites *ms, const struct mem_site *s, unsigned int frames,
		     char *buf, size_t n)
{
	char *names[SITE_FRAMES];
	char *const *v = s->names ? s->names : names;
	unsigned int count;
	size_t len = 0;

	buf[0] = 0;
	if (!s->names && (!s->stack || !s->stack->nframes)) {
		snprintf(buf, n, "%s (no stack)", api_name(s->api));
		return;
	}
	count = s->names ? s->nnames : site_names(ms, s, names);
	for (unsigned int i = 0; i < count && i < frames && len + 1 < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? " < " : "", v[i]);
	if (s->names)
		return;
	for (unsigned int i = 0; i < count; i++)
		free(names[i]);
}

/* Its names kept: its stack goes with its process. */
void memsites__keep_names(struct memsites *ms, struct mem_site *s)
{
	char *names[SITE_FRAMES];

	if (!s->stack || s->names)
		return;
	if (!s->stack->nframes) { /* (labelled as without a stack) */
		s->stack = NULL;
		return;
	}
	s->nnames = site_names(ms, s, names);
	s->names = xcalloc(s->nnames + 1, sizeof(*s->names));
	memcpy(s->names, names, s->nnames * sizeof(*names));
	s->stack = NULL;
}
