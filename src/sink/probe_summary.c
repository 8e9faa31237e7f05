// SPDX-License-Identifier: MIT
/* `gpuscope probe`: what was instrumented, and every launch of the program accounted for.
 * The in-process plane records each kernel launch the program makes (the run's recording);
 * the probes' snapshots say which of them ran instrumented and which the original code. The
 * rest are kernels whose module had no PTX gpuscope could take (SASS only: cuBLAS, most of
 * PyTorch's), named here by how often they ran. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "core/hmap.h"
#include "core/recording.h"
#include "core/util.h"
#include "gpuscope/event.h"
#include "sink/probe_int.h"

#define SHOWN 8

struct row {
	const char *name;
	u64 launches, routed, fallback;
};

static int by_launches(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return x->launches < y->launches ? 1 : x->launches > y->launches ? -1 : 0;
}

/* Kernel launches by (pid, handle), read with the model that names the handles. */
static int count(const char *events, struct model *m, struct hmap *n, u64 *graphs)
{
	struct recording *rec;
	const struct gs_hdr *ev;
	char err[256];
	int k;

	if (!(rec = recording__open(events, err, sizeof(err))))
		return -1;
	while ((k = recording__next(rec, &ev, err, sizeof(err))) > 0) {
		const struct gs_ev_launch *l = (const void *)ev;

		model__add(m, ev);
		if (ev->type != GS_EV_LAUNCH || ev->size < sizeof(*l))
			continue;
		if (l->flags & GS_LAUNCH_GRAPH)
			++*graphs;
		else
			++*(u64 *)hmap_get_or_new(n, ev->pid, l->func, sizeof(u64));
	}
	recording__close(rec);
	return k < 0 ? -1 : 0;
}

/* Whether a probe of the bundle is for the kernel (its KERNEL, or *). */
static bool asked(const struct probe_results *r, const char *name)
{
	for (size_t i = 0; i < r->b->nprobes; i++)
		if (!strcmp(r->b->probes[i].kernel, "*") || !strcmp(r->b->probes[i].kernel, name))
			return true;
	return false;
}

/* Every kernel launch of the program (the recording's) against the snapshots: how many ran
 * instrumented, the original code, or had no PTX, and the most launched of those. */
static void render_launches(const struct probe_results *r, FILE *out)
{
	struct model *m;
	struct hmap n = { 0 };
	struct hmap_slot *s;
	struct row *rows = NULL;
	size_t nrows = 0, other = 0;
	u64 total = 0, routed = 0, fallback = 0, graphs = 0, rest = 0, unasked = 0;
	unsigned long long nodes = 0, nodes_fb = 0;
	char buf[128];

	if (!r->events || !(m = model__new()))
		return;
	if (count(r->events, m, &n, &graphs)) {
		fprintf(out, "  (the program's own launches cannot be read from its recording)\n");
		goto out;
	}
	/* By name: the recording's launches, the snapshots' routed and fallen back. */
	hmap_for_each (&n, s) {
		const char *name = model__kernel_name(m, (__u32)s->k1, s->k2);
		size_t i;

		name = name ? name : "(unnamed)";
		for (i = 0; i < nrows && strcmp(rows[i].name, name); i++)
			;
		if (i == nrows) {
			rows = xrealloc(rows, (nrows + 1) * sizeof(*rows));
			rows[nrows++] = (struct row){ .name = name };
		}
		rows[i].launches += *(u64 *)s->val;
		total += *(u64 *)s->val;
	}
	for (size_t i = 0; i < r->n; i++)
		FOR_KERNELS(&r->s[i], k)
		{
			for (size_t j = 0; j < nrows; j++)
				if (!strcmp(rows[j].name, k->name)) {
					rows[j].routed += k->routed;
					rows[j].fallback += k->fallback;
				}
			routed += k->routed;
			fallback += k->fallback;
		}
	for (size_t i = 0; i < nrows; i++)
		if (!rows[i].routed && !rows[i].fallback)
			*(asked(r, rows[i].name) ? &rest : &unasked) += rows[i].launches;
	fprintf(out,
		"  the program launched %zu kernel%s %llu time%s (the in-process plane's count): "
		"%llu instrumented, %llu the original code, %llu of kernels with no PTX to "
		"instrument",
		nrows, nrows == 1 ? "" : "s", total, total == 1 ? "" : "s", routed, fallback, rest);
	if (unasked)
		fprintf(out, ", %llu of kernels no probe is for", unasked);
	if (graphs)
		fprintf(out, "; and %llu graph launch%s", graphs, graphs == 1 ? "" : "es");
	for (size_t i = 0; i < r->n; i++)
		for (size_t j = 0; j < r->s[i].nstats; j++) {
			unsigned long long a, b;

			if (sscanf(r->s[i].stats[j], "graph-nodes %llu %llu", &a, &b) == 2) {
				nodes += a;
				nodes_fb += b;
			}
		}
	if (nodes || nodes_fb)
		fprintf(out,
			" (kernel nodes set by the graph API: %llu to the instrumented code, %llu "
			"to the original)",
			nodes, nodes_fb);
	fprintf(out, "\n");
	qsort(rows, nrows, sizeof(*rows), by_launches);
	for (size_t i = 0; i < nrows; i++) {
		if (rows[i].routed || rows[i].fallback || !asked(r, rows[i].name))
			continue;
		if (other++ == SHOWN) {
			fprintf(out, "    (more)\n");
			break;
		}
		fprintf(out, "    %10llu  %s: no PTX in its module (SASS only)\n", rows[i].launches,
			pt_shown(rows[i].name, buf, sizeof(buf)));
	}
out:
	free(rows);
	hmap_free_with(&n, NULL);
	model__free(m);
}

void render_summary(const struct probe_results *r, FILE *out)
{
	u64 kernels = 0, routed = 0, fallback = 0;
	struct ktab names = { .width = 1 };

	for (size_t i = 0; i < r->n; i++)
		FOR_KERNELS(&r->s[i], k)
		{
			if (k->instrumented)
				pt_krow(&names, k->name);
			routed += k->routed;
			fallback += k->fallback;
		}
	kernels = names.n;
	pt_ktab_free(&names);
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
	render_launches(r, out);
	for (size_t i = 0; i < r->n; i++) {
		const struct snapshot *s = &r->s[i];

		for (size_t j = 0; j < s->nstats; j++) {
			unsigned int a, b2;

			unsigned long long runs;
			int failed;
			char hname[64];

			if (sscanf(s->stats[j], "host-runs %llu %d %63s", &runs, &failed, hname) ==
			    3)
				fprintf(out, "  host program %s: run %llu time%s%s\n", hname, runs,
					runs == 1 ? "" : "s",
					failed ? " (then stopped: below)" : "");
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
					pt_shown(name, buf, sizeof(buf)), a, b2, bytes, t / 1e6,
					t2 / 1e6, dev);
			else if (sscanf(s->stats[j], "kernel %u %d %d %d %1023s", &c2, &regs,
					&local, &maxt, name) == 5)
				fprintf(out,
					"  kernel %s: %d registers, %d bytes of local memory, at "
					"most %d threads a block\n",
					pt_shown(name, buf, sizeof(buf)), regs, local, maxt);
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
