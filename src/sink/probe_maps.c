// SPDX-License-Identifier: MIT
/*
 * What the probes found (see probe_tools.h): reading the maps of the snapshots, and a
 * user's maps as they are. What was instrumented: probe_summary.c; the tools' own views:
 * probe_views.c.
 */
#include <stdlib.h>
#include <string.h>

#include "core/demangle.h"
#include "core/recording.h"
#include "core/util.h"
#include "ptx/gpuprint.h"
#include "ptx/translate.h"
#include "sink/probe_int.h"

/* ---- reading the maps ----------------------------------------------------------------------- */

int pt_map_index(const struct probe_results *r, const char *name)
{
	for (size_t i = 0; i < r->b->nmaps; i++)
		if (!strcmp(r->b->maps[i].name, name))
			return (int)i;
	return -1;
}

u64 pt_get64(const struct snap_ctx *c, int m, size_t i)
{
	u64 v = 0;

	if (m < 0 || !c->data[m] || (i + 1) * 8 > c->bytes[m])
		return 0;
	memcpy(&v, c->data[m] + i * 8, 8);
	return v;
}

/* A kernel's row in a tool's per-kernel table (the last row is every kernel past it). */
size_t pt_row_of(unsigned int id, size_t rows)
{
	return id < rows - 1 ? id : rows - 1;
}

u64 *pt_krow(struct ktab *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->r[i].name, name))
			return t->r[i].v;
	t->r = xrealloc(t->r, (t->n + 1) * sizeof(*t->r));
	t->r[t->n].name = xstrdup(name);
	t->r[t->n].v = xcalloc(t->width, sizeof(u64));
	return t->r[t->n++].v;
}

void pt_ktab_free(struct ktab *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->r[i].name);
		free(t->r[i].v);
	}
	free(t->r);
}

/* The name to show for a kernel: demangled, shortened. */
const char *pt_shown(const char *name, char *buf, size_t n)
{
	char *d = demangle(name);

	shorten_name(d, 72, buf, n);
	free(d);
	return buf;
}

const char *pt_row_name(const struct snap_kernel *k, size_t rows)
{
	return k->id < rows - 1 ? k->name : "(kernels past the table's rows)";
}

/* Add up each kernel's rows (by name) over processes and contexts: add(v, x, row) for each
 * kernel of each snapshot's context, v its accumulators. */
void pt_each_kernel(const struct probe_results *r, size_t rows, struct ktab *t,
		    void (*add)(u64 *v, const struct snap_ctx *x, size_t row, const int *maps),
		    const int *maps)
{
	for (size_t i = 0; i < r->n; i++)
		for (size_t c = 0; c < r->s[i].nctx; c++)
			FOR_KERNELS(&r->s[i], k)
	add(pt_krow(t, pt_row_name(k, rows)), &r->s[i].ctx[c], pt_row_of(k->id, rows), maps);
}

/* bcc's log2 histogram: [2^i, 2^(i+1)) per line, from the first non-empty to the last. */
void pt_print_log2(FILE *out, const u64 *b, int n, const char *unit)
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

bool pt_zero(const unsigned char *p, size_t n)
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
	char err[256], line[1024];
	bool print = !strcmp(bm->name, GS_PRINT_MAP); /* (helpers 6 and 501's) */
	int k;

	for (size_t i = 0; i < r->n; i++)
		for (size_t c = 0; c < r->s[i].nctx; c++) {
			unsigned long long ctl[2];

			if (r->s[i].ctx[c].data[m] && r->s[i].ctx[c].bytes[m] >= sizeof(ctl)) {
				memcpy(ctl, r->s[i].ctx[c].data[m], sizeof(ctl));
				drops += ctl[1];
			}
		}
	if (print)
		fprintf(out, "GPU output (bpf_trace_printk, ebpf_puts; device host: the host "
			     "programs'):\n");
	else
		fprintf(out, "ring buffer %s (%u bytes on each device):\n", bm->name,
			bm->max_entries);
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
				print ? "" : "bytes",
				print ? "" : "data (64-bit words, little-endian)");
		if (print && (!r->max_records || n < r->max_records)) {
			if (gpu_print_format(o->data, o->len, line, sizeof(line)))
				snprintf(line, sizeof(line), "(not a printing record)");
			char dev[16];

			/* (device -1: a host program's) */
			snprintf(dev, sizeof(dev), o->device < 0 ? "host" : "%d", o->device);
			fprintf(out, "  %12.6f %8u %6s        %s\n",
				ev->ts >= t0 ? (double)(ev->ts - t0) / 1e9 : 0.0, ev->pid, dev,
				line);
		} else if (!r->max_records || n < r->max_records) {
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
					/* (per-thread: key-major, a key's threads together) */
					size_t threads_n =
						bm->kind == GS_MAP_PER_THREAD ? bm->threads : 1;

					for (size_t e = 0; e < bm->max_entries; e++) {
						unsigned char *v = xcalloc(1, bm->value_size);
						size_t threads = 0;

						for (size_t th = 0; th < threads_n; th++) {
							const unsigned char *p =
								d + (e * threads_n + th) *
									    bm->value_size;

							if ((size_t)(p - d) + bm->value_size >
							    x->bytes[m])
								break;
							if (pt_zero(p, bm->value_size))
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
