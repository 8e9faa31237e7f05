// SPDX-License-Identifier: MIT
/* The device code part of the report (see analysis/devcode.c). */
#include <stdlib.h>
#include <string.h>

#include "analysis/report_int.h"
#include "core/util.h"

#define REP_DEVMODS 64

const char *devcode_kind_name(unsigned int kind)
{
	static const char *const n[GS_CODE_KIND_MAX] = {
		[GS_CODE_PTX] = "PTX",
		[GS_CODE_FATBIN] = "fatbin",
		[GS_CODE_CUBIN] = "cubin",
		[GS_CODE_UNKNOWN] = "unknown",
	};

	return kind < GS_CODE_KIND_MAX && n[kind] ? n[kind] : "?";
}

static int older(const void *a, const void *b)
{
	const struct dev_module *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

void report__build_devcode(struct report *r, const struct model *m)
{
	const struct hmap_slot *s;
	size_t n = 0;

	r->devmods_total = m->devmods_total;
	r->probe_records = m->probe_records;
	r->probe_bytes = m->probe_bytes;
	if (!m->devmods.len)
		return;
	r->devmods = xcalloc(m->devmods.len, sizeof(*r->devmods));
	hmap_for_each (&m->devmods, s)
		r->devmods[n++] = *(const struct dev_module *)s->val;
	qsort(r->devmods, n, sizeof(*r->devmods), older);
	for (size_t i = 0; i < n; i++)
		r->devmods[i].why =
			i < REP_DEVMODS && r->devmods[i].why ? xstrdup(r->devmods[i].why) : NULL;
	r->ndevmods = GS_MIN(n, (size_t)REP_DEVMODS);
	hmap_for_each (&m->devkernels, s) {
		const struct dev_kernel *k = s->val;

		r->devkernels++;
		r->devkernels_ptx += k->with_ptx && !k->without_ptx;
		r->devkernels_mixed += k->with_ptx && k->without_ptx;
	}
	r->kernel_ptx = xcalloc(r->nkernels + 1, sizeof(*r->kernel_ptx));
	r->kernel_sass = xcalloc(r->nkernels + 1, sizeof(*r->kernel_sass));
	r->kernel_sass_arch = xcalloc(r->nkernels + 1, sizeof(*r->kernel_sass_arch));
	r->kernel_sass_arch_low = xcalloc(r->nkernels + 1, sizeof(*r->kernel_sass_arch_low));
	for (size_t i = 0; i < r->nkernels; i++) {
		const struct dev_kernel *k =
			r->kernels[i].mangled
				? model__devkernel(m, r->kernels[i].pid, r->kernels[i].mangled)
				: NULL;

		r->kernel_ptx[i] = k ? k->with_ptx : 0;
		r->kernel_sass[i] = k ? k->without_ptx : 0;
		r->kernel_sass_arch[i] = k ? k->sass_arch : 0;
		r->kernel_sass_arch_low[i] = k ? k->sass_arch_low : 0;
	}
}

void report__free_devcode(struct report *r)
{
	for (size_t i = 0; i < r->ndevmods; i++)
		free(r->devmods[i].why);
	free(r->devmods);
	free(r->kernel_ptx);
	free(r->kernel_sass);
	free(r->kernel_sass_arch);
	free(r->kernel_sass_arch_low);
}
