// SPDX-License-Identifier: MIT
/* Names of kernels whose lookups were not seen, read from the driver (see kernel_names.h). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/hmap.h"
#include "core/stream.h"
#include "core/util.h"
#include "gpuscope/api.h"
#include "source/kernel_names.h"

#define MAX_HANDLES (1 << 18) /* handles kept, all processes: past it, none read */
#define HOSTFN	    (1ULL << 32)

/* Drivers whose objects were seen to keep the name there (their major versions). */
static const unsigned long known_drivers[] = { 580 };

struct late_names {
	/* (pid, 0): read (probed late, or every process: all); its value says whether reading
	 * stopped */
	struct hmap pids;
	bool all; /* every process's unnamed handles read (cuKernelGetFunction not probed) */
	/* (pid, handle): named, by a lookup or from the driver, or tried; (pid | HOSTFN,
	 * address): a host stub named by its registration */
	struct hmap handles;
	struct late_names_counts c;
};

static char reading, stopped, seen; /* (the maps' values: their addresses) */

static bool symbol_like(const char *s, int len)
{
	if (len <= 0 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (int i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '$' || c == '.'))
			return false;
	}
	return true;
}

/* A name's hash, never 0 (a handles value: a lookup's name, to check its object's against). */
static __u64 name_hash(const char *s, unsigned int len)
{
	__u64 h = 0xcbf29ce484222325ULL;

	for (unsigned int i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	return h | 1;
}

/* A name looked up: kept, by its hash until its object's name (which the probe reads at the
 * lookup's return) is checked against it. */
static void looked_up(struct late_names *n, const struct gs_ev_kname *e)
{
	if (!e->len || n->handles.len >= MAX_HANDLES)
		return;
	if (e->ns == GS_NS_DRIVER)
		hmap_put(&n->handles, e->h.pid, e->handle,
			 (void *)(uintptr_t)name_hash(e->name, e->len));
	else
		hmap_put(&n->handles, e->h.pid | HOSTFN, e->handle, &seen);
}

/* A looked-up handle's object's name (e) against its lookup's (hash): the same, counted; a
 * read that failed says nothing; anything else stops the reading in that process. */
static void check(struct late_names *n, const struct gs_ev_kname *e, __u64 hash)
{
	if (!e->len)
		return;
	if (symbol_like(e->name, e->len) && name_hash(e->name, e->len) == hash) {
		n->c.agreed++;
		return;
	}
	n->c.differed++;
	hmap_put(&n->pids, e->h.pid, 0, &stopped);
	gs_debug("pid %u: a kernel looked up where the driver's object says %.*s: names no "
		 "longer read from the driver in this process",
		 (unsigned)e->h.pid, (int)e->len, e->name);
}

/* A handle given another's name (a kernel's function, a runtime kernel's stub) since the
 * probes: named if that one is. */
static void aliased(struct late_names *n, const struct gs_ev_kalias *a)
{
	if (n->handles.len < MAX_HANDLES &&
	    hmap_get(&n->handles, a->h.pid | (a->target_ns == GS_NS_HOSTFN ? HOSTFN : 0),
		     a->target))
		hmap_put(&n->handles, a->h.pid, a->handle, &seen);
}

/* The name a handle's object holds, read by the probe (a name record of no lookup) at the
 * handle's first launch on a CPU, before the launch's record, or at its lookup's return,
 * after the lookup's: passed on once a handle, if its process's names are read, no lookup
 * named the handle, and it is a symbol's; else stopped. One after a lookup is checked
 * against it. */
static const struct gs_hdr *from_driver(struct late_names *n, const struct gs_ev_kname *e,
					const char *state)
{
	void *v = state ? hmap_get(&n->handles, e->h.pid, e->handle) : NULL;

	if (v && v != &seen) {
		if (state == &reading)
			check(n, e, (__u64)(uintptr_t)v);
		hmap_put(&n->handles, e->h.pid, e->handle, &seen);
	}
	if (state != &reading || v)
		return NULL;
	if (n->handles.len >= MAX_HANDLES) {
		n->c.full++;
		return NULL;
	}
	hmap_put(&n->handles, e->h.pid, e->handle, &seen);
	if (!symbol_like(e->name, e->len)) {
		n->c.unreadable++;
		return NULL;
	}
	n->c.read++;
	return &e->h;
}

/* A module or library unloaded: its handles may be given to other functions, so each
 * handle of the process is read again at its next launch (a name looked up since is
 * known again from its lookup). */
static void unloaded(struct late_names *n, const struct gs_ev_api *a)
{
	if (a->c.result == 0 &&
	    (a->c.api == GS_API_CU_MODULE_UNLOAD || a->c.api == GS_API_CU_LIBRARY_UNLOAD))
		hmap_drop_key(&n->handles, false, 0, a->h.pid, NULL);
}

static const struct gs_hdr *on_record(void *ctx, const struct gs_hdr *ev)
{
	struct late_names *n = ctx;
	const char *state;

	state = n->pids.len ? hmap_get(&n->pids, ev->pid, 0) : NULL;
	if (!state && n->all)
		state = &reading;
	if (ev->type == GS_EV_KNAME && ((const struct gs_ev_kname *)ev)->api == GS_API_NONE)
		return from_driver(n, (const void *)ev, state);
	if (!state)
		return ev;
	if (ev->type == GS_EV_API)
		unloaded(n, (const void *)ev);
	else if (ev->type == GS_EV_KNAME)
		looked_up(n, (const void *)ev);
	else
		aliased(n, (const void *)ev);
	return ev;
}

static void retired(void *ctx, __u32 pid)
{
	struct late_names *n = ctx;

	if (hmap_del(&n->pids, pid, 0) || n->all) {
		hmap_drop_key(&n->handles, false, 0, pid, NULL);
		hmap_drop_key(&n->handles, false, 0, pid | HOSTFN, NULL);
	}
}

bool late_names__enabled(void)
{
	return !getenv("GPUSCOPE_NO_DRIVER_NAMES");
}

struct late_names *late_names__new(struct stream *s)
{
	struct late_names *n;

	if (!late_names__enabled())
		return NULL;
	n = xcalloc(1, sizeof(*n));
	stream__filter(
		s, STREAM_TYPE(GS_EV_KNAME) | STREAM_TYPE(GS_EV_KALIAS) | STREAM_TYPE(GS_EV_API),
		on_record, n);
	stream__on_retire(s, retired, n);
	return n;
}

void late_names__process(struct late_names *n, __u32 pid)
{
	if (n && !hmap_get(&n->pids, pid, 0))
		hmap_put(&n->pids, pid, 0, &reading);
}

/* Whether libcuda at path is a driver whose objects keep the name where it is read: its
 * file's name, libcuda.so.MAJOR.MINOR[.PATCH], after its links. */
static bool known_driver(const char *path)
{
	char real[PATH_MAX];
	const char *base, *v;
	char *end;
	unsigned long major;

	if (!realpath(path, real))
		return false;
	base = strrchr(real, '/');
	base = base ? base + 1 : real;
	if (strncmp(base, "libcuda.so.", 11))
		return false;
	v = base + 11;
	major = strtoul(v, &end, 10);
	if (end == v || *end != '.')
		return false;
	for (size_t i = 0; i < sizeof(known_drivers) / sizeof(*known_drivers); i++)
		if (major == known_drivers[i])
			return true;
	return false;
}

bool late_names__replaces_kfunc(struct late_names *n, const char *libcuda)
{
	const char *e = getenv("GPUSCOPE_DRIVER_NAMES");

	if (!n || (e && !strcmp(e, "late")) ||
	    (!(e && !strcmp(e, "all")) && !known_driver(libcuda)))
		return false;
	n->all = true;
	return true;
}

bool late_names__all(const struct late_names *n)
{
	return n && n->all;
}

void late_names__counts(const struct late_names *n, struct late_names_counts *c)
{
	memset(c, 0, sizeof(*c));
	if (n)
		*c = n->c;
}

void late_names__free(struct late_names *n)
{
	if (!n)
		return;
	hmap_free(&n->pids);
	hmap_free(&n->handles);
	free(n);
}
