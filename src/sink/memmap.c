// SPDX-License-Identifier: MIT
/*
 * The memory map: an SVG picture of a run's device allocations, time across, address up.
 * One panel per process and GPU (the four with the most bytes allocated). Each allocation
 * is a block from its allocation to its free (to the right edge if never freed, outlined),
 * coloured by its site; failed allocations are red lines with a marker at the top; under
 * each panel, its fragmentation score over time.
 *
 * Addresses are sparse: the allocations' ranges are merged into segments laid one above
 * the other, and a gap between segments is drawn to scale only up to a cap (a twentieth of
 * the panel's bytes); a larger one is a dashed break with its size written beside it.
 *
 * Readable at 100k allocations: the largest blocks (by drawn area, at most MAX_RECTS) are
 * drawn one by one with a tooltip; the rest, and anything under two pixels either way, are
 * summed into 4x4-pixel cells drawn with an opacity by how much of them is covered.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analyses.h"
#include "core/names.h"
#include "core/util.h"
#include "sink/sinks.h"

#define W	   1200
#define PLOT_X	   110
#define PLOT_W	   (W - PLOT_X - 40)
#define PLOT_H	   420
#define FRAG_H	   60
#define PANEL_H	   (PLOT_H + FRAG_H + 140)
#define HEADER_H   90
#define LEGEND_H   20
#define MAX_PANELS 4
#define MAX_RECTS  20000
#define CELL	   4
#define GRID_W	   (PLOT_W / CELL)
#define GRID_H	   (PLOT_H / CELL)

struct panel {
	__u32 pid;
	int slot;
	__u64 bytes; /* allocated in all */
	size_t n, failed;
};

struct seg {
	__u64 start, end; /* addresses */
	double y;	  /* compressed bytes below its start */
	bool brk;	  /* a break below it */
	__u64 gap;	  /* the address gap below it */
};

struct axis {
	struct seg *segs;
	size_t n;
	double total; /* compressed bytes */
};

static int by_addr(const void *a, const void *b)
{
	const struct mem_hist *x = *(const struct mem_hist *const *)a,
			      *y = *(const struct mem_hist *const *)b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static bool drawn_kind(const struct mem_hist *h)
{
	return h->kind == MK_DEVICE || h->kind == MK_MAPPING || h->kind == MK_MANAGED;
}

static int slot_of(const struct mem_hist *h)
{
	return model__mem_slot(h->device);
}

static void build_axis(struct axis *ax, const struct mem_hist **v, size_t n)
{
	double cap, used = 0;

	memset(ax, 0, sizeof(*ax));
	qsort(v, n, sizeof(*v), by_addr);
	ax->segs = xcalloc(n + 1, sizeof(*ax->segs));
	for (size_t i = 0; i < n; i++) {
		__u64 end = v[i]->addr + GS_MAX(v[i]->size, 1);

		if (ax->n && v[i]->addr <= ax->segs[ax->n - 1].end) {
			ax->segs[ax->n - 1].end = GS_MAX(ax->segs[ax->n - 1].end, end);
			continue;
		}
		ax->segs[ax->n].start = v[i]->addr;
		ax->segs[ax->n++].end = end;
	}
	for (size_t i = 0; i < ax->n; i++)
		used += (double)(ax->segs[i].end - ax->segs[i].start);
	cap = used / 20;
	for (size_t i = 0; i < ax->n; i++) {
		if (i) {
			__u64 gap = ax->segs[i].start - ax->segs[i - 1].end;

			ax->segs[i].gap = gap;
			ax->segs[i].brk = (double)gap > cap;
			ax->total += ax->segs[i].brk ? cap : (double)gap;
		}
		ax->segs[i].y = ax->total;
		ax->total += (double)(ax->segs[i].end - ax->segs[i].start);
	}
	if (ax->total <= 0)
		ax->total = 1;
}

/* Compressed bytes below an address (which lies in a segment). */
static double axis_at(const struct axis *ax, __u64 addr)
{
	size_t lo = 0, hi = ax->n;

	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (ax->segs[mid].start <= addr)
			lo = mid;
		else
			hi = mid;
	}
	if (!ax->n)
		return 0;
	return ax->segs[lo].y +
	       (double)(GS_MIN(addr, ax->segs[lo].end) - GS_MIN(addr, ax->segs[lo].start));
}

static void xml_text(FILE *f, const char *s)
{
	static const char *const entities[128] = {
		['<'] = "&lt;", ['>'] = "&gt;", ['&'] = "&amp;", ['"'] = "&quot;"
	};

	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		if (*c < 128 && entities[*c])
			fputs(entities[*c], f);
		else if (*c >= 0x20)
			fputc(*c, f);
}

static void site_colour(__u32 site, char *buf, size_t n)
{
	snprintf(buf, n, "hsl(%u,62%%,52%%)", (unsigned int)((site * 137.508) + 200) % 360);
}

/* A site's label ("?" if not known). */
static void site_label(const struct analyses *a, __u32 pid, __u32 id, unsigned int frames,
		       char *buf, size_t n)
{
	memsites__site_label(a->memsites, pid, id, frames, buf, n);
	if (!buf[0])
		snprintf(buf, n, "?");
}

struct drawn {
	const struct mem_hist *h;
	double x0, x1, y0, y1, area;
};

static int bigger(const void *a, const void *b)
{
	const struct drawn *x = a, *y = b;

	return x->area < y->area ? 1 : x->area > y->area ? -1 : 0;
}

static double nice_step(double span, int ticks)
{
	double raw = span / ticks, p = pow(10, floor(log10(raw))), r = raw / p;

	return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * p;
}

/* The sites with the most bytes allocated in the panel, with their colours. */
/* How many leading bytes of whole frames (" < "-separated) all n labels share. */
static size_t common_frames(char labels[][SITE_STACK], size_t n)
{
	size_t best = 0;

	if (n < 2)
		return 0;
	for (const char *p = labels[0]; (p = strstr(p, " < ")); p += 3) {
		size_t len = (size_t)(p - labels[0]) + 3;

		for (size_t k = 1; k < n; k++)
			if (strncmp(labels[k], labels[0], len))
				return best;
		best = len;
	}
	return best;
}

static void legend(FILE *f, const struct analyses *an, const struct mem_hist **v, size_t nv,
		   double y)
{
	struct {
		__u32 site, pid;
		__u64 bytes;
	} top[6] = { { 0, 0, 0 } };
	static char stacks[6][SITE_STACK];
	char colour[40], label[SITE_LABEL], a[32];
	size_t n = 0, skip;

	for (size_t i = 0; i < nv; i++) {
		size_t k;

		for (k = 0; k < 6 && top[k].site && top[k].site != v[i]->site; k++)
			;
		if (k < 6 && !top[k].site) {
			top[k].site = v[i]->site;
			top[k].pid = v[i]->pid;
		}
		if (k < 6)
			top[k].bytes += v[i]->size;
	}
	/* Sites' labels often share their first frames (an allocator's own functions): the
	 * legend shows where they part, three frames from there. */
	for (; n < 6 && top[n].site; n++)
		site_label(an, top[n].pid, top[n].site, 16, stacks[n], sizeof(stacks[n]));
	skip = common_frames(stacks, n);
	for (size_t k = 0; k < n; k++) {
		double x = PLOT_X + (double)(k % 2) * (PLOT_W / 2.0), yy = y + (double)(k / 2) * 15;
		const char *p = stacks[k] + skip, *end = p;

		site_colour(top[k].site, colour, sizeof(colour));
		for (unsigned int fr = 0; fr < 3; fr++) { /* the end of its third frame */
			const char *sep = strstr(end, " < ");

			if (!sep) {
				end = p + strlen(p);
				break;
			}
			end = fr < 2 ? sep + 3 : sep;
		}
		snprintf(label, sizeof(label), "%s%.*s", skip ? "... < " : "", (int)(end - p), p);
		if (strlen(label) > 70)
			strcpy(label + 67, "...");
		fprintf(f,
			"<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" "
			"fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\" class=\"small\">#%u ",
			x, yy - 9, colour, x + 14, yy, top[k].site);
		xml_text(f, label);
		fprintf(f, " (%s)</text>\n", fmt_bytes(a, sizeof(a), (double)top[k].bytes));
	}
}

/* t0: the trace's start (times are given from it); a0..t1: the time axis. */
static void panel_draw(FILE *f, const struct analyses *an, const struct panel *pn,
		       const struct mem_hist **v, size_t nv, double top, __u64 t0, __u64 a0,
		       __u64 t1)
{
	const char *comm = model__comm(an->model, pn->pid);
	size_t nhist;
	bool truncated;
	const struct mem_hist *hist = memsites__history(an->memsites, &nhist, &truncated);
	double span = (double)(t1 > a0 ? t1 - a0 : 1), plot_top = top + 40;
	struct drawn *d = xcalloc(nv + 1, sizeof(*d));
	static float grid[GRID_H][GRID_W];
	size_t nd = 0, nrects = 0, ncells = 0;
	struct axis ax;
	char a[32], b[32], colour[40], label[SITE_LABEL];
	double step;

	build_axis(&ax, v, nv);
	memset(grid, 0, sizeof(grid));
	fprintf(f, "<g class=\"panel\" data-pid=\"%u\" data-gpu=\"%d\">\n", pn->pid,
		pn->slot < MEM_DEVS ? pn->slot : -1);
	fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"title\">pid %u ", PLOT_X, top + 20, pn->pid);
	xml_text(f, comm[0] ? comm : "?");
	if (pn->slot < MEM_DEVS)
		fprintf(f, ", GPU %d", pn->slot);
	else
		fprintf(f, ", GPU not known");
	fprintf(f, ": %zu allocations, %s allocated, %zu failed</text>\n", pn->n,
		fmt_bytes(a, sizeof(a), (double)pn->bytes), pn->failed);
	fprintf(f,
		"<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"#f7f7f7\" "
		"stroke=\"#999\"/>\n",
		PLOT_X, plot_top, PLOT_W, PLOT_H);
	/* Blocks: where they fall, then the largest one by one, the rest into cells. */
	for (size_t i = 0; i < nv; i++) {
		const struct mem_hist *h = v[i];
		__u64 end = h->t1 ? h->t1 : t1;
		struct drawn *x = &d[nd++];

		x->h = h;
		x->x0 = PLOT_X + (double)(h->t0 > a0 ? h->t0 - a0 : 0) / span * PLOT_W;
		x->x1 = PLOT_X + (double)(end > a0 ? end - a0 : 0) / span * PLOT_W;
		x->x1 = GS_MAX(x->x1, x->x0 + 0.5);
		x->y1 = plot_top + PLOT_H - axis_at(&ax, h->addr) / ax.total * PLOT_H;
		x->y0 = plot_top + PLOT_H -
			axis_at(&ax, h->addr + GS_MAX(h->size, 1)) / ax.total * PLOT_H;
		x->area = (x->x1 - x->x0) * (x->y1 - x->y0);
	}
	qsort(d, nd, sizeof(*d), bigger);
	for (size_t i = 0; i < nd; i++) {
		struct drawn *x = &d[i];

		if (nrects < MAX_RECTS && x->x1 - x->x0 >= 2 && x->y1 - x->y0 >= 2) {
			site_label(an, x->h->pid, x->h->site, 3, label, sizeof(label));
			site_colour(x->h->site, colour, sizeof(colour));
			fprintf(f,
				"<rect class=\"alloc\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
				"height=\"%.1f\" fill=\"%s\"%s><title>0x%llx %s, site #%u ",
				x->x0, x->y0, x->x1 - x->x0, x->y1 - x->y0, colour,
				x->h->t1 ? "" : " stroke=\"#222\" stroke-width=\"0.7\"",
				(unsigned long long)x->h->addr,
				fmt_bytes(a, sizeof(a), (double)x->h->size), x->h->site);
			xml_text(f, label);
			if (x->h->t1)
				fprintf(f, ", %.3f s to %.3f s</title></rect>\n",
					(double)(x->h->t0 - GS_MIN(t0, x->h->t0)) / 1e9,
					(double)(x->h->t1 - GS_MIN(t0, x->h->t1)) / 1e9);
			else
				fprintf(f, ", %.3f s, never freed</title></rect>\n",
					(double)(x->h->t0 - GS_MIN(t0, x->h->t0)) / 1e9);
			nrects++;
			continue;
		}
		/* Into the cells it covers, by the area it covers of each. */
		for (int cy = GS_MAX(0, (int)((x->y0 - plot_top) / CELL));
		     cy < GRID_H && cy * CELL + plot_top < x->y1; cy++)
			for (int cx = GS_MAX(0, (int)((x->x0 - PLOT_X) / CELL));
			     cx < GRID_W && cx * CELL + PLOT_X < x->x1; cx++) {
				double cx0 = PLOT_X + cx * CELL, cy0 = plot_top + cy * CELL;
				double w = GS_MIN(x->x1, cx0 + CELL) - GS_MAX(x->x0, cx0),
				       hh = GS_MIN(x->y1, cy0 + CELL) - GS_MAX(x->y0, cy0);

				if (w > 0 && hh > 0)
					grid[cy][cx] += (float)(w * hh / (CELL * CELL));
			}
	}
	/* Cells, a row at a time, runs of one shade as one rectangle. */
	for (int cy = 0; cy < GRID_H; cy++)
		for (int cx = 0; cx < GRID_W;) {
			int q = (int)ceil(GS_MIN(grid[cy][cx], 1.0f) * 8), run = 1;

			if (!q) {
				cx++;
				continue;
			}
			while (cx + run < GRID_W &&
			       (int)ceil(GS_MIN(grid[cy][cx + run], 1.0f) * 8) == q)
				run++;
			fprintf(f,
				"<rect class=\"cells\" x=\"%d\" y=\"%.1f\" width=\"%d\" "
				"height=\"%d\" "
				"fill=\"#3b5b92\" fill-opacity=\"%.3f\"/>\n",
				PLOT_X + cx * CELL, plot_top + cy * CELL, run * CELL, CELL,
				q / 8.0);
			ncells++;
			cx += run;
		}
	/* Address labels and breaks. */
	for (size_t i = 0, labels = 0; i < ax.n; i++) {
		double y = plot_top + PLOT_H - ax.segs[i].y / ax.total * PLOT_H;

		if (ax.segs[i].brk) {
			fprintf(f,
				"<line class=\"break\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
				"stroke=\"#888\" stroke-dasharray=\"6,4\"/>\n",
				PLOT_X, y, PLOT_X + PLOT_W, y);
			fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"small\">gap %s</text>\n",
				PLOT_X + PLOT_W - 90, y - 2,
				fmt_bytes(a, sizeof(a), (double)ax.segs[i].gap));
		}
		if ((i == 0 || ax.segs[i].brk) && labels < 12) {
			fprintf(f,
				"<text x=\"%d\" y=\"%.1f\" class=\"small\" "
				"text-anchor=\"end\">0x%llx</text>\n",
				PLOT_X - 4, y, (unsigned long long)ax.segs[i].start);
			labels++;
		}
	}
	/* Failures. */
	for (size_t i = 0; i < nhist; i++) {
		const struct mem_hist *h = &hist[i];
		double x;

		if (!h->failed || h->pid != pn->pid ||
		    (slot_of(h) != pn->slot && slot_of(h) != MEM_DEVS))
			continue;
		x = PLOT_X + (double)(h->t0 > a0 ? h->t0 - a0 : 0) / span * PLOT_W;
		fprintf(f,
			"<g class=\"failure\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
			"y2=\"%.1f\" "
			"stroke=\"#d40000\" stroke-width=\"1.5\"/><path d=\"M%.1f %.1f l-5 -9 h10 "
			"z\" "
			"fill=\"#d40000\"/><title>failed: %s of %s at %.3f s</title></g>\n",
			x, plot_top, x, plot_top + PLOT_H, x, plot_top, api_name(h->api),
			fmt_bytes(a, sizeof(a), (double)h->size),
			(double)(h->t0 - GS_MIN(t0, h->t0)) / 1e9);
	}
	/* Time axis. */
	step = nice_step(span / 1e9, 8);
	for (double t = ceil((double)(a0 - t0) / 1e9 / step - 1e-9) * step;
	     t <= (double)(t1 - t0) / 1e9 + 1e-12; t += step) {
		double x = PLOT_X + (t * 1e9 - (double)(a0 - t0)) / span * PLOT_W;

		fprintf(f,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" class=\"small\" text-anchor=\"middle\">%g s"
			"</text>\n",
			x, plot_top + PLOT_H, x, plot_top + PLOT_H + 4, x, plot_top + PLOT_H + 16,
			fabs(t) < 1e-9 ? 0.0 : t); /* (not "-0 s") */
	}
	/* Fragmentation under it. */
	{
		unsigned int nfr;
		const struct frag_sample *fr =
			memsites__frag(an->memsites, pn->pid, pn->slot, &nfr);
		double fy = plot_top + PLOT_H + 30;

		fprintf(f,
			"<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" "
			"stroke=\"#ccc\"/><text x=\"%d\" y=\"%.1f\" class=\"small\" "
			"text-anchor=\"end\">fragmentation</text>"
			"<text x=\"%d\" y=\"%.1f\" class=\"small\" "
			"text-anchor=\"end\">0..1</text>\n",
			PLOT_X, fy, PLOT_W, FRAG_H, PLOT_X - 4, fy + 24, PLOT_X - 4, fy + 38);
		if (fr && nfr) {
			fprintf(f, "<polyline class=\"frag\" fill=\"none\" stroke=\"#b05000\" "
				   "stroke-width=\"1.2\" points=\"");
			/* (A step: a sample holds until the next.) */
			for (unsigned int i = 0; i < nfr; i++) {
				double x = PLOT_X + (double)(fr[i].ts > a0 ? fr[i].ts - a0 : 0) /
							    span * PLOT_W,
				       y = fy + FRAG_H - frag_score(&fr[i]) * FRAG_H;

				if (i)
					fprintf(f, "%.1f,%.1f ", x,
						fy + FRAG_H - frag_score(&fr[i - 1]) * FRAG_H);
				fprintf(f, "%.1f,%.1f ", x, y);
			}
			fprintf(f, "\"/>\n");
		}
	}
	legend(f, an, v, nv, plot_top + PLOT_H + FRAG_H + 50);
	fprintf(f,
		"<text x=\"%d\" y=\"%.1f\" class=\"small\">%zu drawn one by one, the rest (%zu "
		"cells) summed; %s of address space shown</text>\n",
		PLOT_X, top + 34, nrects, ncells, fmt_bytes(b, sizeof(b), ax.total));
	fprintf(f, "</g>\n");
	free(ax.segs);
	free(d);
}

static int more_bytes(const void *a, const void *b)
{
	const struct panel *x = a, *y = b;

	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

int memmap__write(FILE *f, const struct analyses *an)
{
	struct panel *pn = NULL;
	size_t npn = 0, shown, nhist;
	struct model_counters c;
	bool truncated;
	const struct mem_hist *hist = memsites__history(an->memsites, &nhist, &truncated);
	__u64 t0, t1, a0;
	double height;

	model__counters(an->model, &c);
	t0 = c.t0;
	t1 = c.last_ts;
	a0 = t1;
	for (size_t i = 0; i < nhist; i++) {
		const struct mem_hist *h = &hist[i];
		size_t k;

		if (!drawn_kind(h) && !h->failed)
			continue;
		a0 = GS_MIN(a0, h->t0);
		for (k = 0; k < npn; k++)
			if (pn[k].pid == h->pid && (pn[k].slot == slot_of(h) || h->failed))
				break;
		if (k == npn) {
			if (h->failed)
				continue; /* (drawn on its process's panels) */
			pn = xrealloc(pn, (npn + 1) * sizeof(*pn));
			pn[npn++] = (struct panel){ .pid = h->pid, .slot = slot_of(h) };
		}
		if (h->failed) {
			pn[k].failed++;
		} else {
			pn[k].n++;
			pn[k].bytes += h->size;
		}
	}
	if (npn)
		qsort(pn, npn, sizeof(*pn), more_bytes);
	/* The time axis starts with the first allocation where the program spent a while
	 * before it (a Python program's imports), so the allocations get the width. */
	if (a0 < t0 || (double)(a0 - t0) < 0.05 * (double)(t1 - GS_MIN(t0, t1)))
		a0 = t0;
	shown = GS_MIN(npn, (size_t)MAX_PANELS);
	height = HEADER_H + (double)GS_MAX(shown, (size_t)1) * PANEL_H + LEGEND_H;
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
		"viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\">\n"
		"<style>.title{font-size:14px;font-weight:bold}.small{font-size:10px;fill:#333}"
		"</style>\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		"<text x=\"20\" y=\"30\" style=\"font-size:18px;font-weight:bold\">gpuscope memory "
		"map</text>\n"
		"<text x=\"20\" y=\"50\" class=\"small\">Device memory of each process by address "
		"(up) and time (across): blocks are allocations, coloured by site, outlined if "
		"never freed; red: failed allocations.</text>\n"
		"<text x=\"20\" y=\"63\" class=\"small\">Under each: fragmentation, the free "
		"share of the 2 MiB pages its allocations occupy (memory only smaller requests can "
		"use).</text>\n",
		W, height, W, height);
	fprintf(f, "<text x=\"20\" y=\"76\" class=\"small\">%zu allocations recorded over %.3f s",
		nhist, (double)(t1 > t0 ? t1 - t0 : 0) / 1e9);
	if (truncated)
		fprintf(f, " (the first %u only)", MEM_HIST_MAX);
	if (a0 > t0)
		fprintf(f, "; time from the first allocation, at %.3f s", (double)(a0 - t0) / 1e9);
	if (npn > shown)
		fprintf(f, "; the %zu of %zu process/GPU pairs with the most bytes allocated shown",
			shown, npn);
	fprintf(f, "</text>\n");
	if (!npn)
		fprintf(f,
			"<text x=\"%d\" y=\"%d\" class=\"title\">no device allocations were "
			"recorded</text>\n",
			PLOT_X, HEADER_H + 40);
	for (size_t k = 0; k < shown; k++) {
		const struct mem_hist **v = xcalloc(pn[k].n + 1, sizeof(*v));
		size_t nv = 0;

		for (size_t i = 0; i < nhist; i++) {
			const struct mem_hist *h = &hist[i];

			if (!h->failed && drawn_kind(h) && h->pid == pn[k].pid &&
			    slot_of(h) == pn[k].slot)
				v[nv++] = h;
		}
		panel_draw(f, an, &pn[k], v, nv, HEADER_H + (double)k * PANEL_H, t0, a0, t1);
		free(v);
	}
	fprintf(f, "</svg>\n");
	free(pn);
	return ferror(f) ? -1 : 0;
}
