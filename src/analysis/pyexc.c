// SPDX-License-Identifier: MIT
/* Python exceptions, counted and found (see pyexc.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/pyexc.h"
#include "core/hmap.h"
#include "core/util.h"

#define PYEXC_SITES    10000 /* (and threads whose latest raise is kept) */
#define PYEXC_FINDINGS 100

/* A site as the kernel counts it: (process, type object, innermost frame). */
struct site {
	__u64 type_addr, site;
	__u64 full;	    /* full records of it */
	__u64 total;	    /* the kernel's count, once it came */
	struct rep_pyexc r; /* names: its first full record's */
};

/* A thread's latest raise: an uncaught exception's stack, once it is printed. */
struct last {
	char type[GS_PYEXC_TYPE];
	char stack[1024];
};

struct pyexc {
	struct model *m;
	struct hmap sites;   /* (pid and type mixed, site) -> struct site (collisions: next) */
	struct hmap threads; /* (pid, tid) -> struct last */
	struct rep_pyexc_finding *findings;
	size_t nfindings;
	__u64 uncounted;
};

/* The record's Python frames named, innermost first, " < " between; the innermost's name
 * into site ("" if none). */
static void stack_text(const struct pyexc *px, const struct gs_ev_pyexc *x, char *out, size_t n,
		       char *site, size_t site_len)
{
	size_t len = 0;

	out[0] = site[0] = 0;
	for (unsigned int i = 0; i < x->nframes && i < GS_PYSTACK_MAX && len + 4 < n; i++) {
		const char *name = model__symbol(
			px->m, x->h.pid, x->frames[x->outer_first ? x->nframes - 1 - i : i]);
		int w;

		if (!name)
			name = "?";
		if (!i)
			gs_strlcpy(site, name, site_len);
		w = snprintf(out + len, n - len, "%s%s", i ? " < " : "", name);
		len = w < 0 ? len : GS_MIN(len + (size_t)w, n - 1);
	}
}

/* Whether an exception carries a CUDA error: by its type (PyTorch's, CuPy's), or by its
 * text (the messages of PyTorch, cuBLAS, cuDNN, NCCL, the driver), not merely naming CUDA
 * (a KeyError of CUDA_VISIBLE_DEVICES is not one). */
static bool is_cuda_error(const char *type, const char *text)
{
	static const char *const types[] = { "OutOfMemoryError", "AcceleratorError",
					     "CUDARuntimeError", "CUDADriverError",
					     "CUBLASError",	 "CUDNNError" };
	static const char *const texts[] = {
		"CUDA error",	     "CUDA out of memory", "CUDA driver error",
		"CUDA_ERROR_",	     "CUBLAS_STATUS_",	   "CUDNN_STATUS_",
		"cuDNN error",	     "NCCL error",	   "illegal memory access",
		"device-side assert"
	};

	for (size_t i = 0; i < ARRAY_SIZE(types); i++)
		if (strstr(type, types[i]))
			return true;
	for (size_t i = 0; i < ARRAY_SIZE(texts); i++)
		if (strstr(text, texts[i]))
			return true;
	return false;
}

/* A kernel site's entry (new: with the record's names; NULL past PYEXC_SITES). */
static struct site *site_of(struct pyexc *px, const struct gs_ev_pyexc *x, const char *name)
{
	__u64 k1 = (x->type_addr ^ x->h.pid) * 0x9e3779b97f4a7c15ULL, k2 = x->site;
	struct site *s;

	for (;; k2++) {
		s = hmap_get(&px->sites, k1, k2);
		if (!s ||
		    (s->r.pid == x->h.pid && s->type_addr == x->type_addr && s->site == x->site))
			break;
	}
	if (s || px->sites.len >= PYEXC_SITES)
		return s;
	s = xcalloc(1, sizeof(*s));
	s->type_addr = x->type_addr;
	s->site = x->site;
	s->r.pid = x->h.pid;
	gs_strlcpy(s->r.type, x->type[0] ? x->type : "?", sizeof(s->r.type));
	gs_strlcpy(s->r.site, name, sizeof(s->r.site));
	gs_strlcpy(s->r.text, x->text, sizeof(s->r.text));
	hmap_put(&px->sites, k1, k2, s);
	return s;
}

/* A raise counted at its site: a full record, or the kernel's count. */
static void count_site(struct pyexc *px, const struct gs_ev_pyexc *x, const char *name)
{
	struct site *s = site_of(px, x, name);

	if (!s) {
		px->uncounted += x->count;
		return;
	}
	if (x->kind == GS_PYEXC_COUNT)
		s->total = GS_MAX(s->total, x->count);
	else
		s->full++;
}

/* A finding: counted again if it is one already (same process, kind, type and stack). */
static void find(struct pyexc *px, const struct gs_ev_pyexc *x, bool uncaught, bool cuda,
		 const char *stack, const char *text)
{
	struct rep_pyexc_finding *f;

	for (size_t i = 0; i < px->nfindings; i++) {
		f = &px->findings[i];
		if (f->pid == x->h.pid && f->uncaught == uncaught && !strcmp(f->type, x->type) &&
		    !strcmp(f->stack, stack)) {
			f->count++;
			return;
		}
	}
	if (px->nfindings >= PYEXC_FINDINGS)
		return;
	if (!px->findings)
		px->findings = xcalloc(PYEXC_FINDINGS, sizeof(*px->findings));
	f = &px->findings[px->nfindings++];
	*f = (struct rep_pyexc_finding){ .pid = x->h.pid,
					 .tid = x->h.tid,
					 .ts = x->h.ts,
					 .count = 1,
					 .uncaught = uncaught,
					 .cuda = cuda };
	gs_strlcpy(f->type, x->type, sizeof(f->type));
	gs_strlcpy(f->text, text, sizeof(f->text));
	gs_strlcpy(f->stack, stack, sizeof(f->stack));
}

static void on_record(void *ctx, const struct gs_hdr *ev)
{
	struct pyexc *px = ctx;
	const struct gs_ev_pyexc *x = (const void *)ev;
	struct last *l;
	char stack[1024], site[GS_SYM_MAX];
	bool cuda = is_cuda_error(x->type, x->text);
	const char *name;

	if (x->kind == GS_PYEXC_COUNT) {
		name = x->site ? model__symbol(px->m, ev->pid, x->site) : NULL;
		count_site(px, x, name ?: "");
		return;
	}
	stack_text(px, x, stack, sizeof(stack), site, sizeof(site));
	if (x->kind == GS_PYEXC_RAISED) {
		count_site(px, x, site);
		if (cuda)
			find(px, x, false, true, stack, x->text);
		if (px->threads.len < PYEXC_SITES || hmap_get(&px->threads, ev->pid, ev->tid)) {
			l = hmap_get_or_new(&px->threads, ev->pid, ev->tid, sizeof(*l));
			gs_strlcpy(l->type, x->type, sizeof(l->type));
			gs_strlcpy(l->stack, stack, sizeof(l->stack));
		}
		return;
	}
	/* Uncaught: its traceback's frames; else where its type was last raised in the thread
	 * (as a record: one of its site's first). */
	l = hmap_get(&px->threads, ev->pid, ev->tid);
	find(px, x, true, cuda, stack[0] || !l || strcmp(l->type, x->type) ? stack : l->stack,
	     x->text);
}

static void on_retire(void *ctx, __u32 pid)
{
	hmap_drop_key(&((struct pyexc *)ctx)->threads, false, 0, pid, free);
}

struct pyexc *pyexc__attach(struct stream *s, struct model *m)
{
	struct pyexc *px = xcalloc(1, sizeof(*px));

	px->m = m;
	stream__subscribe(s, STREAM_TYPE(GS_EV_PYEXC), on_record, px);
	stream__on_retire(s, on_retire, px);
	return px;
}

void pyexc__free(struct pyexc *px)
{
	if (px) {
		hmap_free_with(&px->sites, NULL);
		hmap_free_with(&px->threads, NULL);
		free(px->findings);
	}
	free(px);
}

static int more_raised(const void *a, const void *b)
{
	const struct rep_pyexc *x = a, *y = b;

	return x->count < y->count ? 1 : x->count > y->count ? -1 : strcmp(x->site, y->site);
}

/* The kernel's sites added up by their names: (process, type, line). */
static size_t by_name(const struct pyexc *px, struct rep_pyexc *out)
{
	struct hmap named = { 0 };
	struct hmap_slot *sl;
	size_t n = 0;

	hmap_for_each (&px->sites, sl) {
		const struct site *s = sl->val;
		__u64 h = gs_str_hash(gs_str_hash(s->r.pid, s->r.type), s->r.site);
		struct rep_pyexc *o;

		for (;; h++) {
			o = hmap_get(&named, h, 0);
			if (!o || (o->pid == s->r.pid && !strcmp(o->type, s->r.type) &&
				   !strcmp(o->site, s->r.site)))
				break;
		}
		if (!o) {
			o = &out[n++];
			*o = s->r;
			o->count = 0;
			hmap_put(&named, h, 0, o);
		}
		o->count += GS_MAX(s->full, s->total);
	}
	hmap_free(&named);
	return n;
}

void pyexc__report(const struct pyexc *px, struct report *r)
{
	size_t n;

	r->pyexc_uncounted = px->uncounted;
	if (px->sites.len) {
		struct rep_pyexc *all = xcalloc(px->sites.len, sizeof(*all));

		n = by_name(px, all);
		for (size_t i = 0; i < n; i++)
			r->pyexc_raised += all[i].count;
		r->pyexc_sites = n;
		qsort(all, n, sizeof(*all), more_raised);
		r->npyexc = GS_MIN(n, (size_t)REP_PYEXC);
		r->pyexc = xrealloc(all, r->npyexc * sizeof(*all));
	}
	if (px->nfindings) {
		r->npyexc_findings = px->nfindings;
		r->pyexc_findings = xcalloc(px->nfindings, sizeof(*r->pyexc_findings));
		memcpy(r->pyexc_findings, px->findings, px->nfindings * sizeof(*px->findings));
		for (size_t i = 0; i < px->nfindings; i++)
			r->pyexc_findings[i].ts -= GS_MIN(r->pyexc_findings[i].ts, r->t0);
	}
}
