// SPDX-License-Identifier: MIT
/*
 * What the probes found, shown: every tool's view of its maps (their layouts are those of
 * the programs in src/probes/), and a user's maps as they are. Processes and contexts are added up
 * by kernel name (kernel ids are each process's own).
 */
#include <stdlib.h>
#include <string.h>

#include "cmd/probe.h"
#include "core/recording.h"
#include "core/demangle.h"
#include "core/util.h"
#include "ptx/translate.h"

typedef unsigned long long u64;

#define MAX_KERNELS  1024 /* rows of the tools' per-kernel tables (src/probes/probe.bpf.h) */
#define STRIPES	     16	  /* each row kept this many times over, by SM */
#define RET_BUCKETS  40
#define MAX_SMS	     256
#define SMAP_KERNELS 256

/* ---- reading the maps ----------------------------------------------------------------------- */

static int map_index(const struct probe_results *r, const char *name)
{
	for (size_t i = 0; i < r->b->nmaps; i++)
		if (!strcmp(r->b->maps[i].name, name))
			return (int)i;
	return -1;
}

static u64 get64(const struct snap_ctx *c, int m, size_t i)
{
	u64 v = 0;

	if (m < 0 || !c->data[m] || (i + 1) * 8 > c->bytes[m])
		return 0;
	memcpy(&v, c->data[m] + i * 8, 8);
	return v;
}

/* A kernel's row in a tool's per-kernel table (the last row is every kernel past it). */
static size_t row_of(unsigned int id, size_t rows)
{
	return id < rows - 1 ? id : rows - 1;
}

/* Per-kernel accumulators, by name. */
struct krow {
	char *name;
	u64 *v;
};
struct ktab {
	struct krow *r;
	size_t n, width;
};

static u64 *krow(struct ktab *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->r[i].name, name))
			return t->r[i].v;
	t->r = xrealloc(t->r, (t->n + 1) * sizeof(*t->r));
	t->r[t->n].name = xstrdup(name);
	t->r[t->n].v = xcalloc(t->width, sizeof(u64));
	return t->r[t->n++].v;
}

static void ktab_free(struct ktab *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->r[i].name);
		free(t->r[i].v);
	}
	free(t->r);
}

/* The name to show for a kernel: demangled, shortened. */
static const char *shown(const char *name, char *buf, size_t n)
{
	char *d = demangle(name);

	shorten_name(d, 72, buf, n);
	free(d);
	return buf;
}

/* Each kernel of a snapshot with its row: kernels sharing the overflow row are named so. */
#define FOR_KERNELS(s, k) for (const struct snap_kernel *k = (s)->k; k < (s)->k + (s)->nk; k++)

static const char *row_name(const struct snap_kernel *k, size_t rows)
{
	return k->id < rows - 1 ? k->name : "(kernels past the table's rows)";
}

/* Add up each kernel's rows (by name) over processes and contexts: add(v, x, row) for each
 * kernel of each snapshot's context, v its accumulators. */
static void each_kernel(const struct probe_results *r, size_t rows, struct ktab *t,
			void (*add)(u64 *v, const struct snap_ctx *x, size_t row, const int *maps),
			const int *maps)
{
	for (size_t i = 0; i < r->n; i++)
		for (size_t c = 0; c < r->s[i].nctx; c++)
			FOR_KERNELS(&r->s[i], k)
	add(krow(t, row_name(k, rows)), &r->s[i].ctx[c], row_of(k->id, rows), maps);
}

/* bcc's log2 histogram: [2^i, 2^(i+1)) per line, from the first non-empty to the last. */
static void print_log2(FILE *out, const u64 *b, int n, const char *unit)
{
	int lo = -1, hi = -1;
	u64 max = 0;

	for (int i = 0; i < n; i++)
		if (b[i]) {
			if (lo < 0)
				lo = i;
			hi = i;
			max = GS_MAX(max, b[i]);
		}
	if (lo < 0)
		return;
	fprintf(out, "  %21s : %-10s distribution\n", unit, "count");
	for (int i = lo; i <= hi; i++) {
		u64 from = i ? 1ULL << i : 0, to = (i < 63 ? (1ULL << (i + 1)) : 0) - 1;
		int stars = (int)(max ? b[i] * 40 / max : 0);
		char bar[41];

		memset(bar, '*', (size_t)stars);
		memset(bar + stars, ' ', (size_t)(40 - stars));
		bar[40] = 0;
		fprintf(out, "  %10llu -> %-8llu : %-10llu |%s|\n", from, to, b[i], bar);
	}
}

/* ---- what was instrumented ---------------------------------------------------------------- */

void render_summary(const struct probe_results *r, FILE *out)
{
	u64 kernels = 0, routed = 0, fallback = 0;
	struct ktab names = { .width = 1 };

	for (size_t i = 0; i < r->n; i++)
		FOR_KERNELS(&r->s[i], k)
		{
			if (k->instrumented)
				krow(&names, k->name);
			routed += k->routed;
			fallback += k->fallback;
		}
	kernels = names.n;
	ktab_free(&names);
	if (!r->n) {
		fprintf(out, "gpuscope probe: no process of the command loaded device code (no "
			     "CUDA?)\n");
		return;
	}
	fprintf(out,
		"gpuscope probe: %llu kernel%s instrumented in %zu process%s: %llu launch%s ran "
		"instrumented, %llu the original code\n",
		kernels, kernels == 1 ? "" : "s", r->n, r->n == 1 ? "" : "es", routed,
		routed == 1 ? "" : "es", fallback);
	for (size_t i = 0; i < r->n; i++) {
		const struct snapshot *s = &r->s[i];

		for (size_t j = 0; j < s->nstats; j++) {
			unsigned int a, b2;

			if (sscanf(s->stats[j], "sass-only %u %u", &a, &b2) == 2)
				fprintf(out,
					"  %u of %u modules%s had no PTX (SASS only, as PyTorch's "
					"and "
					"Triton's): their kernels ran unchanged (`gpuscope run "
					"--inject --device-code` lists them)\n",
					a, b2, r->n > 1 ? " of a process" : "");
		}
		for (size_t j = 0; j < s->nnotes; j++)
			fprintf(out, "  %s\n", s->notes[j]);
		if (!r->verbose)
			continue;
		for (size_t j = 0; j < s->nstats; j++) {
			unsigned int a, b2, c2;
			unsigned long long t, t2, bytes;
			char name[1024], buf[128];
			int regs, local, maxt, dev;

			if (sscanf(s->stats[j], "instrumented %u %u %llu %llu %d %llu %1023s", &a,
				   &b2, &bytes, &t, &dev, &t2, name) == 7)
				fprintf(out,
					"  kernel %s (module %u: %u kernels, %llu bytes of PTX): "
					"rewritten in %.1f ms, compiled by the driver in %.1f ms "
					"(device %d)\n",
					shown(name, buf, sizeof(buf)), a, b2, bytes, t / 1e6,
					t2 / 1e6, dev);
			else if (sscanf(s->stats[j], "kernel %u %d %d %d %1023s", &c2, &regs,
					&local, &maxt, name) == 5)
				fprintf(out,
					"  kernel %s: %d registers, %d bytes of local memory, at "
					"most %d threads a block\n",
					shown(name, buf, sizeof(buf)), regs, local, maxt);
			else if (sscanf(s->stats[j], "clock %d %llu", &dev, &t) == 2)
				fprintf(out,
					"  device %d: the GPU's clock read to within %.1f us of "
					"the "
					"host's\n",
					dev, t / 2e3);
		}
	}
	fprintf(out, "\n");
}

/* ---- kernelretsnoop ------------------------------------------------------------------------- */

static void add_ret(u64 *v, const struct snap_ctx *x, size_t row, const int *maps)
{
	for (size_t st = row * STRIPES; st < (row + 1) * STRIPES; st++) {
		for (int j = 0; j < RET_BUCKETS; j++)
			v[j] += get64(x, maps[0], st * RET_BUCKETS + j);
		v[RET_BUCKETS] += get64(x, maps[1], st * 4);
		v[RET_BUCKETS + 1] += get64(x, maps[1], st * 4 + 1);
		if (get64(x, maps[1], st * 4 + 2) > v[RET_BUCKETS + 2]) {
			v[RET_BUCKETS + 2] = get64(x, maps[1], st * 4 + 2);
			v[RET_BUCKETS + 3] = get64(x, maps[1], st * 4 + 3);
		}
	}
}

void render_kernelretsnoop(const struct probe_results *r, FILE *out)
{
	const int maps[2] = { map_index(r, "hist"), map_index(r, "stats") };
	struct ktab t = { .width = RET_BUCKETS + 4 };
	char buf[128], a[32], b[32];

	each_kernel(r, MAX_KERNELS, &t, add_ret, maps);
	fprintf(out, "GPU thread run times, from kernel entry to exit:\n");
	for (size_t i = 0; i < t.n; i++) {
		const u64 *v = t.r[i].v;
		u64 slow = v[RET_BUCKETS + 3];

		if (!v[RET_BUCKETS])
			continue;
		fmt_dur(a, sizeof(a), (double)v[RET_BUCKETS + 1] / (double)v[RET_BUCKETS]);
		fmt_dur(b, sizeof(b), (double)v[RET_BUCKETS + 2]);
		fprintf(out,
			"\nkernel %s\n  %llu threads, mean %s, slowest %s (block %llu, thread "
			"(%llu,%llu))\n",
			shown(t.r[i].name, buf, sizeof(buf)), v[RET_BUCKETS], a, b, slow >> 32,
			slow & 0xffff, (slow >> 16) & 0xffff);
		print_log2(out, v, RET_BUCKETS, "nsecs");
	}
	ktab_free(&t);
}

/* ---- threadhist ----------------------------------------------------------------------------- */

#define TH_EXACT   64
#define TH_BUCKETS (TH_EXACT + 58)

static void add_work(u64 *v, const struct snap_ctx *x, size_t row, const int *maps)
{
	u64 *st = v + TH_BUCKETS;

	for (size_t sr = row * STRIPES; sr < (row + 1) * STRIPES; sr++) {
		for (int j = 0; j < TH_BUCKETS; j++)
			v[j] += get64(x, maps[0], sr * TH_BUCKETS + j);
		st[0] += get64(x, maps[1], sr * 5);
		st[1] += get64(x, maps[1], sr * 5 + 1);
		if (get64(x, maps[1], sr * 5 + 2) > st[2]) {
			st[2] = get64(x, maps[1], sr * 5 + 2);
			st[3] = get64(x, maps[1], sr * 5 + 3);
		}
		st[4] = GS_MAX(st[4], get64(x, maps[1], sr * 5 + 4));
	}
}

void render_threadhist(const struct probe_results *r, FILE *out)
{
	const int maps[2] = { map_index(r, "hist"), map_index(r, "stats") };
	struct ktab t = { .width = TH_BUCKETS + 5 };
	char buf[128];

	each_kernel(r, MAX_KERNELS, &t, add_work, maps);
	fprintf(out, "Work per GPU thread (its global memory accesses), per kernel:\n");
	for (size_t i = 0; i < t.n; i++) {
		const u64 *v = t.r[i].v, *st = v + TH_BUCKETS;
		u64 most = 0, least = ~0ULL;
		double mean;

		if (!st[0])
			continue;
		for (int j = 0; j < TH_BUCKETS; j++) {
			most = GS_MAX(most, v[j]);
			if (v[j] && least == ~0ULL)
				least = j < TH_EXACT ? (u64)j : 1ULL << (j - TH_EXACT + 6);
		}
		mean = (double)st[1] / (double)st[0];
		fprintf(out,
			"\nkernel %s\n  %llu threads, %llu accesses: min %llu, mean %.2f, max %llu "
			"a "
			"thread; imbalance (max/mean) %.2f\n",
			shown(t.r[i].name, buf, sizeof(buf)), st[0], st[1], least, mean, st[2],
			mean > 0 ? (double)st[2] / mean : 0.0);
		if (st[2])
			fprintf(out, "  busiest: block %llu, thread (%llu,%llu) (blocks of %llu)\n",
				st[3] >> 32, st[3] & 0xffff, (st[3] >> 16) & 0xffff, st[4]);
		fprintf(out, "  %21s : %-10s distribution\n", "accesses", "threads");
		for (int j = 0; j < TH_BUCKETS; j++) {
			char range[48], bar[41];
			int stars = (int)(most ? v[j] * 40 / most : 0);

			if (!v[j])
				continue;
			if (j < TH_EXACT)
				snprintf(range, sizeof(range), "%d", j);
			else
				snprintf(range, sizeof(range), "%llu -> %llu",
					 1ULL << (j - TH_EXACT + 6),
					 (1ULL << (j - TH_EXACT + 7)) - 1);
			memset(bar, '*', (size_t)stars);
			memset(bar + stars, ' ', (size_t)(40 - stars));
			bar[40] = 0;
			fprintf(out, "  %21s : %-10llu |%s|\n", range, v[j], bar);
		}
	}
	ktab_free(&t);
}

/* ---- launchlate ----------------------------------------------------------------------------- */

struct lat {
	char *name;
	u64 *v;
	size_t n, cap;
	u64 routed;
};

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

void render_launchlate(const struct probe_results *r, FILE *out)
{
	int m = map_index(r, "launches");
	struct lat *l = NULL;
	size_t nl = 0, slot;
	char buf[128], a[32], b[32], c2[32], d[32];

	if (m < 0)
		return;
	slot = bpf_hash_slot(r->b->maps[m].key_size, r->b->maps[m].value_size);
	for (size_t i = 0; i < r->n; i++) {
		const struct snapshot *s = &r->s[i];

		FOR_KERNELS(s, k)
		{
			size_t j;

			for (j = 0; j < nl && strcmp(l[j].name, k->name); j++)
				;
			if (j == nl) {
				l = xrealloc(l, (nl + 1) * sizeof(*l));
				memset(&l[nl], 0, sizeof(*l));
				l[nl++].name = xstrdup(k->name);
			}
			l[j].routed += k->routed;
		}
		for (size_t c = 0; c < s->nctx; c++) {
			const struct snap_ctx *x = &s->ctx[c];

			for (size_t e = 0; x->data[m] && (e + 1) * slot <= x->bytes[m]; e++) {
				const unsigned char *p = x->data[m] + e * slot;
				unsigned int state;
				u64 lat, kid;
				const char *name;
				size_t j;

				memcpy(&state, p, 4);
				if (state != 2)
					continue;
				memcpy(&lat, p + 16, 8);
				memcpy(&kid, p + 24, 8);
				name = snapshot_kernel_name(s, (unsigned int)kid);
				for (j = 0; j < nl && (!name || strcmp(l[j].name, name)); j++)
					;
				if (j == nl)
					continue;
				if (l[j].n == l[j].cap) {
					l[j].cap = l[j].cap ? 2 * l[j].cap : 64;
					l[j].v = xrealloc(l[j].v, l[j].cap * sizeof(u64));
				}
				l[j].v[l[j].n++] = lat;
			}
		}
	}
	fprintf(out, "From the launch call to the launch's first GPU thread starting:\n");
	for (size_t j = 0; j < nl; j++) {
		u64 hist[64] = { 0 };

		if (!l[j].n) {
			if (l[j].routed)
				fprintf(out,
					"\nkernel %s\n  %llu launches, none timed (the GPU's clock "
					"was not compared with the host's, or launches came "
					"from graphs)\n",
					shown(l[j].name, buf, sizeof(buf)), l[j].routed);
			continue;
		}
		qsort(l[j].v, l[j].n, sizeof(u64), cmp_u64);
		for (size_t i = 0; i < l[j].n; i++)
			hist[l[j].v[i] / 1000 ? 63 - __builtin_clzll(l[j].v[i] / 1000) : 0] += 1;
		fmt_dur(a, sizeof(a), (double)l[j].v[0]);
		fmt_dur(b, sizeof(b), (double)l[j].v[l[j].n / 2]);
		fmt_dur(c2, sizeof(c2), (double)l[j].v[(l[j].n * 99) / 100]);
		fmt_dur(d, sizeof(d), (double)l[j].v[l[j].n - 1]);
		fprintf(out, "\nkernel %s\n  %zu launches: min %s, median %s, p99 %s, max %s\n",
			shown(l[j].name, buf, sizeof(buf)), l[j].n, a, b, c2, d);
		if (l[j].routed > l[j].n)
			fprintf(out,
				"  (%llu launches not timed: from graphs, or past the table's "
				"%u)\n",
				l[j].routed - l[j].n, r->b->maps[m].max_entries);
		print_log2(out, hist, 64, "usecs");
	}
	for (size_t j = 0; j < nl; j++) {
		free(l[j].name);
		free(l[j].v);
	}
	free(l);
}

/* ---- memtrace ------------------------------------------------------------------------------- */

static void add_access(u64 *v, const struct snap_ctx *x, size_t row, const int *maps)
{
	for (int kind = 0; kind < 2; kind++)
		for (size_t st = 0; st < STRIPES; st++)
			for (int j = 0; j < 4; j++)
				v[kind * 4 + j] += get64(x, maps[0],
							 ((row * 2 + kind) * STRIPES + st) * 4 + j);
}

void render_memtrace(const struct probe_results *r, FILE *out)
{
	const int m = map_index(r, "access");
	struct ktab t = { .width = 8 };
	char buf[128];

	each_kernel(r, MAX_KERNELS, &t, add_access, &m);
	fprintf(out, "Global memory accesses per kernel (a request: one warp's instruction; a "
		     "sector: 32 bytes):\n");
	for (size_t i = 0; i < t.n; i++) {
		const u64 *v = t.r[i].v;

		if (!v[0] && !v[4])
			continue;
		fprintf(out, "\nkernel %s\n  %-6s %12s %14s %10s %12s %13s %10s\n",
			shown(t.r[i].name, buf, sizeof(buf)), "", "accesses", "bytes", "requests",
			"sectors/req", "ideal sec/req", "efficiency");
		for (int kind = 0; kind < 2; kind++) {
			const u64 *w = v + kind * 4;
			double per, ideal;

			if (!w[1])
				continue;
			per = (double)w[2] / (double)w[1];
			ideal = (double)w[3] / 32.0 / (double)w[1];
			if (ideal < 1)
				ideal = 1;
			fprintf(out, "  %-6s %12llu %14llu %10llu %12.2f %13.2f %9.0f%%\n",
				kind ? "stores" : "loads", w[0], w[3], w[1], per, ideal,
				per > 0 ? 100.0 * GS_MIN(ideal / per, 1.0) : 0.0);
		}
	}
	ktab_free(&t);
}

/* ---- smmap ---------------------------------------------------------------------------------- */

static void add_sms(u64 *v, const struct snap_ctx *x, size_t row, const int *maps)
{
	for (int j = 0; j < MAX_SMS * 2; j++)
		v[j] += get64(x, maps[0], row * MAX_SMS * 2 + j);
}

void render_smmap(const struct probe_results *r, FILE *out)
{
	static const char shades[] = " .:-=+*#%@";
	const int m = map_index(r, "sms");
	struct ktab t = { .width = MAX_SMS * 2 };
	unsigned int nsm = 0;
	char buf[128];

	for (size_t i = 0; i < r->n; i++)
		for (size_t j = 0; j < r->s[i].nstats; j++) {
			int dev;
			unsigned int n;

			if (sscanf(r->s[i].stats[j], "sms %d %u", &dev, &n) == 2)
				nsm = GS_MAX(nsm, GS_MIN(n, (unsigned int)MAX_SMS));
		}
	each_kernel(r, SMAP_KERNELS, &t, add_sms, &m);
	fprintf(out, "Blocks and warps per SM:\n");
	for (size_t i = 0; i < t.n; i++) {
		const u64 *v = t.r[i].v;
		u64 blocks = 0, warps = 0, bmax = 0, bmin = ~0ULL, wmax = 0;
		unsigned int used = 0, n = nsm;

		for (int sm = 0; sm < MAX_SMS; sm++) {
			blocks += v[sm * 2];
			warps += v[sm * 2 + 1];
			bmax = GS_MAX(bmax, v[sm * 2]);
			wmax = GS_MAX(wmax, v[sm * 2 + 1]);
			if (v[sm * 2] || v[sm * 2 + 1]) {
				used++;
				n = GS_MAX(n, (unsigned int)sm + 1);
			}
		}
		if (!warps)
			continue;
		for (unsigned int sm = 0; sm < n; sm++)
			bmin = GS_MIN(bmin, v[sm * 2]);
		fprintf(out,
			"\nkernel %s\n  %llu blocks, %llu warps on %u of %u SMs; blocks per SM: "
			"min %llu, mean %.1f, max %llu; balance (mean/max) %.2f\n",
			shown(t.r[i].name, buf, sizeof(buf)), blocks, warps, used, n, bmin,
			(double)blocks / n, bmax, bmax ? (double)blocks / n / (double)bmax : 0);
		fprintf(out, "  warps per SM, SM 0 first (' ' none ... '@' the most, %llu):\n",
			wmax);
		for (unsigned int sm = 0; sm < n; sm++) {
			u64 w = v[sm * 2 + 1];
			int shade = w ? 1 + (int)((w * 8 + wmax - 1) / wmax) : 0;

			if (sm % 64 == 0)
				fprintf(out, "%s  |", sm ? "|\n" : "");
			fputc(shades[GS_MIN(shade, 9)], out);
		}
		fprintf(out, "|\n");
	}
	ktab_free(&t);
}

/* ---- a user's maps -------------------------------------------------------------------------- */

static void print_value(FILE *out, const unsigned char *p, unsigned int n)
{
	if (n == 8) {
		u64 v;

		memcpy(&v, p, 8);
		fprintf(out, "%llu", v);
	} else if (n == 4) {
		unsigned int v;

		memcpy(&v, p, 4);
		fprintf(out, "%u", v);
	} else {
		for (unsigned int i = 0; i < n && i < 64; i++)
			fprintf(out, "%02x", p[i]);
		if (n > 64)
			fprintf(out, "...");
	}
}

static bool zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * A ring buffer: what its probes wrote, as the run's recording has it (the first
 * max_records records: time since the run began, process, device, the data as 64-bit
 * little-endian words), and what was dropped for want of room (the control blocks'
 * counts, in the snapshots).
 */
static void render_ring(const struct probe_results *r, size_t m, FILE *out)
{
	const struct bundle_map *bm = &r->b->maps[m];
	unsigned long long drops = 0, n = 0, t0 = 0;
	struct recording *rec = NULL;
	const struct gs_hdr *ev;
	char err[256];
	int k;

	for (size_t i = 0; i < r->n; i++)
		for (size_t c = 0; c < r->s[i].nctx; c++) {
			unsigned long long ctl[2];

			if (r->s[i].ctx[c].data[m] && r->s[i].ctx[c].bytes[m] >= sizeof(ctl)) {
				memcpy(ctl, r->s[i].ctx[c].data[m], sizeof(ctl));
				drops += ctl[1];
			}
		}
	fprintf(out, "ring buffer %s (%u bytes on each device):\n", bm->name, bm->max_entries);
	if (r->events && !(rec = recording__open(r->events, err, sizeof(err))))
		fprintf(out, "  (its records cannot be read: %s)\n", err);
	while (rec && (k = recording__next(rec, &ev, err, sizeof(err))) > 0) {
		const struct gs_ev_probe_out *o = (const void *)ev;

		if (!t0 && ev->type == GS_EV_SESSION)
			t0 = ev->ts;
		if (ev->type != GS_EV_PROBE_OUT || o->map != m)
			continue;
		if (!t0)
			t0 = ev->ts;
		if (!n)
			fprintf(out, "  %12s %8s %6s %5s  %s\n", "time (s)", "pid", "device",
				"bytes", "data (64-bit words, little-endian)");
		if (!r->max_records || n < r->max_records) {
			fprintf(out, "  %12.6f %8u %6d %5u ",
				ev->ts >= t0 ? (double)(ev->ts - t0) / 1e9 : 0.0, ev->pid,
				o->device, o->len);
			for (unsigned int b = 0; b < o->len; b += 8) {
				u64 w = 0;

				memcpy(&w, o->data + b, GS_MIN(8u, o->len - b));
				fprintf(out, " 0x%llx", (unsigned long long)w);
			}
			fprintf(out, "\n");
		}
		n++;
	}
	if (rec && k < 0)
		fprintf(out, "  (the recording ends early: %s)\n", err);
	recording__close(rec);
	if (r->max_records && n > r->max_records)
		fprintf(out, "  (%llu more; --records 0 shows all)\n", n - r->max_records);
	fprintf(out, "  %llu record%s, %llu dropped (the ring was full)\n", n, n == 1 ? "" : "s",
		drops);
}

void render_maps(const struct probe_results *r, FILE *out)
{
	for (size_t m = 0; m < r->b->nmaps; m++) {
		const struct bundle_map *bm = &r->b->maps[m];

		if (bm->kind == GS_MAP_RING) {
			render_ring(r, m, out);
			continue;
		}

		fprintf(out, "map %s (%s, %u entries of %u bytes%s):\n", bm->name,
			bm->kind == GS_MAP_HASH		? "hash"
			: bm->kind == GS_MAP_PER_THREAD ? "per GPU thread"
							: "array",
			bm->max_entries, bm->value_size,
			bm->kind == GS_MAP_PER_THREAD ? ", summed over threads" : "");
		for (size_t i = 0; i < r->n; i++)
			for (size_t c = 0; c < r->s[i].nctx; c++) {
				const struct snap_ctx *x = &r->s[i].ctx[c];
				const unsigned char *d = x->data[m];
				size_t shown_n = 0;

				if (!d)
					continue;
				if (r->n > 1 || r->s[i].nctx > 1)
					fprintf(out, "  process %d, device %d:\n", r->s[i].pid,
						x->device);
				if (bm->kind == GS_MAP_HASH) {
					size_t slot = bpf_hash_slot(bm->key_size, bm->value_size);
					size_t koff = 8, voff = 8 + ((bm->key_size + 7) & ~7u);

					for (size_t e = 0; (e + 1) * slot <= x->bytes[m]; e++) {
						unsigned int state;

						memcpy(&state, d + e * slot, 4);
						if (state != 2 || shown_n++ >= 256)
							continue;
						fprintf(out, "  [");
						print_value(out, d + e * slot + koff, bm->key_size);
						fprintf(out, "] = ");
						print_value(out, d + e * slot + voff,
							    bm->value_size);
						fprintf(out, "\n");
					}
				} else {
					size_t per = (size_t)bm->value_size * bm->max_entries;

					for (size_t e = 0; e < bm->max_entries; e++) {
						unsigned char *v = xcalloc(1, bm->value_size);
						size_t threads = 0;

						for (size_t th = 0;
						     th < (bm->kind == GS_MAP_PER_THREAD
								   ? bm->threads
								   : 1);
						     th++) {
							const unsigned char *p =
								d + th * per + e * bm->value_size;

							if ((size_t)(p - d) + bm->value_size >
							    x->bytes[m])
								break;
							if (zero(p, bm->value_size))
								continue;
							threads++;
							if (bm->value_size == 8 ||
							    bm->value_size == 4) {
								u64 a = 0, b = 0;

								memcpy(&a, v, bm->value_size);
								memcpy(&b, p, bm->value_size);
								a += b;
								memcpy(v, &a, bm->value_size);
							} else {
								memcpy(v, p, bm->value_size);
							}
						}
						if (threads && shown_n++ < 256) {
							fprintf(out, "  [%zu] = ", e);
							print_value(out, v, bm->value_size);
							if (bm->kind == GS_MAP_PER_THREAD)
								fprintf(out, "  (%zu threads)",
									threads);
							fprintf(out, "\n");
						}
						free(v);
					}
				}
				if (shown_n > 256)
					fprintf(out, "  (%zu more)\n", shown_n - 256);
				if (!shown_n)
					fprintf(out, "  (empty)\n");
			}
	}
}
