// SPDX-License-Identifier: MIT
/*
 * Device code the traced processes loaded, as the in-process plane read it (GS_EV_DEVCODE,
 * inject/devcode.c): modules with what they hold, and their kernels with whether each has
 * PTX, so that the report can say which kernels device-side probes can go in, and why the
 * others cannot.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/util.h"

static __u64 name_hash(const char *s)
{
	__u64 h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

void model__devcode_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_devcode *e = (const void *)ev;
	struct dev_module *d = hmap_get(&m->devmods, e->h.pid, e->scope);

	if (!e->kernel) {
		/* (A handle reused after an unload: the latest load is the module now.) */
		if (!d) {
			d = xcalloc(1, sizeof(*d));
			hmap_put(&m->devmods, e->h.pid, e->scope, d);
			m->devmods_total++;
		}
		free(d->why);
		*d = (struct dev_module){ .pid = e->h.pid,
					  .scope = e->scope,
					  .bytes = e->bytes,
					  .ts = e->h.ts,
					  .api = e->api,
					  .ptx_arch = e->ptx_arch,
					  .sass_arch = e->sass_arch,
					  .sass_arch_low = e->sass_arch_low,
					  .nptx = e->nptx,
					  .nsass = e->nsass,
					  .kind = e->kind,
					  .nkernels = e->nkernels,
					  .why = e->name[0] ? xstrdup(e->name) : NULL };
		return;
	}
	{
		__u64 h = name_hash(e->name);
		struct dev_kernel *k = hmap_get(&m->devkernels, e->h.pid, h);

		if (d)
			d->with_ptx += e->has_ptx;
		if (k && strcmp(k->name, e->name))
			return; /* (a hash collision: the first name keeps the slot) */
		if (!k) {
			k = xcalloc(1, sizeof(*k));
			k->pid = e->h.pid;
			k->name = xstrdup(e->name);
			hmap_put(&m->devkernels, e->h.pid, h, k);
		}
		/* Loaded in several modules: a launch may use any of them. */
		k->with_ptx += e->has_ptx;
		k->without_ptx += !e->has_ptx;
		k->ptx_arch = GS_MAX(k->ptx_arch, e->ptx_arch);
		k->sass_arch = GS_MAX(k->sass_arch, e->sass_arch);
		if (e->sass_arch_low && (!k->sass_arch_low || e->sass_arch_low < k->sass_arch_low))
			k->sass_arch_low = e->sass_arch_low;
	}
}

const struct dev_kernel *model__devkernel(const struct model *m, __u32 pid, const char *name)
{
	const struct dev_kernel *k = hmap_get(&m->devkernels, pid, name_hash(name));

	return k && !strcmp(k->name, name) ? k : NULL;
}

void model__devcode_free(struct model *m)
{
	struct hmap_slot *s;

	hmap_for_each (&m->devmods, s) {
		struct dev_module *d = s->val;

		free(d->why);
		free(d);
	}
	hmap_for_each (&m->devkernels, s) {
		struct dev_kernel *k = s->val;

		free(k->name);
		free(k);
	}
	hmap_free(&m->devmods);
	hmap_free(&m->devkernels);
}
