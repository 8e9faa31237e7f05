// SPDX-License-Identifier: MIT
/*
 * The probe tools' views of their maps (their layouts are those of the programs in
 * src/probes/): kernelretsnoop, threadhist, launchlate, memtrace, smmap.
 */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "ptx/translate.h"
#include "sink/probe_int.h"

/* ---- kernelretsnoop ------------------------------------------------------------------------- */

static void add_ret(u64 *v, const struct snap_ctx *x, size_t row, const int *maps)
{
	for (size_t st = row * STRIPES; st < (row + 1) * STRIPES; st++) {
		for (int j = 0; j < RET_BUCKETS; j++)
			v[j] += pt_get64(x, maps[0], st * RET_BUCKETS + j);
		v[RET_BUCKETS] += pt_get64(x, maps[1], st * 4);
		v[RET_BUCKETS + 1] += pt_get64(x, maps[1], st * 4 + 1);
		if (pt_get64(x, maps[1], st * 4 + 2) > v[RET_BUCKETS + 2]) {
			v[RET_BUCKETS + 2] = pt_get64(x, maps[1], st * 4 + 2);
			v[RET_BUCKETS + 3] = pt_get64(x, maps[1], st * 4 + 3);
		}
	}
}

void render_kernelretsnoop(const struct probe_results *r, FILE *out)
{
	const int maps[2] = { pt_map_index(r, "hist"), pt_map_index(r, "stats") };
	struct ktab t = { .width = RET_BUCKETS + 4 };
	char buf[128], a[32], b[32];

	pt_each_kernel(r, MAX_KERNELS, &t, add_ret, maps);
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
			pt_shown(t.r[i].name, buf, sizeof(buf)), v[RET_BUCKETS], a, b, slow >> 32,
			slow & 0xffff, (slow >> 16) & 0xffff);
		pt_print_log2(out, v, RET_BUCKETS, "nsecs");
	}
	pt_ktab_free(&t);
}

/* ---- threadhist ----------------------------------------------------------------------------- */

#define TH_EXACT   64
#define TH_BUCKETS (TH_EXACT + 58)

static void add_work(u64 *v, const struct snap_ctx *x, size_t row, const int *maps)
{
	u64 *st = v + TH_BUCKETS;

	for (size_t sr = row * STRIPES; sr < (row + 1) * STRIPES; sr++) {
		for (int j = 0; j < TH_BUCKETS; j++)
			v[j] += pt_get64(x, maps[0], sr * TH_BUCKETS + j);
		st[0] += pt_get64(x, maps[1], sr * 5);
		st[1] += pt_get64(x, maps[1], sr * 5 + 1);
		if (pt_get64(x, maps[1], sr * 5 + 2) > st[2]) {
			st[2] = pt_get64(x, maps[1], sr * 5 + 2);
			st[3] = pt_get64(x, maps[1], sr * 5 + 3);
		}
		st[4] = GS_MAX(st[4], pt_get64(x, maps[1], sr * 5 + 4));
	}
}

void render_threadhist(const struct probe_results *r, FILE *out)
{
	const int maps[2] = { pt_map_index(r, "hist"), pt_map_index(r, "stats") };
	struct ktab t = { .width = TH_BUCKETS + 5 };
	char buf[128];

	pt_each_kernel(r, MAX_KERNELS, &t, add_work, maps);
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
			pt_shown(t.r[i].name, buf, sizeof(buf)), st[0], st[1], least, mean, st[2],
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
	pt_ktab_free(&t);
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
	int m = pt_map_index(r, "launches");
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
					pt_shown(l[j].name, buf, sizeof(buf)), l[j].routed);
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
			pt_shown(l[j].name, buf, sizeof(buf)), l[j].n, a, b, c2, d);
		if (l[j].routed > l[j].n)
			fprintf(out,
				"  (%llu launches not timed: from graphs, or past the table's "
				"%u)\n",
				l[j].routed - l[j].n, r->b->maps[m].max_entries);
		pt_print_log2(out, hist, 64, "usecs");
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
				v[kind * 4 + j] += pt_get64(
					x, maps[0], ((row * 2 + kind) * STRIPES + st) * 4 + j);
}

void render_memtrace(const struct probe_results *r, FILE *out)
{
	const int m = pt_map_index(r, "access");
	struct ktab t = { .width = 8 };
	char buf[128];

	pt_each_kernel(r, MAX_KERNELS, &t, add_access, &m);
	fprintf(out, "Global memory accesses per kernel (a request: one warp's instruction; a "
		     "sector: 32 bytes):\n");
	for (size_t i = 0; i < t.n; i++) {
		const u64 *v = t.r[i].v;

		if (!v[0] && !v[4])
			continue;
		fprintf(out, "\nkernel %s\n  %-6s %12s %14s %10s %12s %13s %10s\n",
			pt_shown(t.r[i].name, buf, sizeof(buf)), "", "accesses", "bytes",
			"requests", "sectors/req", "ideal sec/req", "efficiency");
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
	pt_ktab_free(&t);
}

/* ---- smmap ---------------------------------------------------------------------------------- */

static void add_sms(u64 *v, const struct snap_ctx *x, size_t row, const int *maps)
{
	for (int j = 0; j < MAX_SMS * 2; j++)
		v[j] += pt_get64(x, maps[0], row * MAX_SMS * 2 + j);
}

void render_smmap(const struct probe_results *r, FILE *out)
{
	static const char shades[] = " .:-=+*#%@";
	const int m = pt_map_index(r, "sms");
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
	pt_each_kernel(r, SMAP_KERNELS, &t, add_sms, &m);
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
			pt_shown(t.r[i].name, buf, sizeof(buf)), blocks, warps, used, n, bmin,
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
	pt_ktab_free(&t);
}
