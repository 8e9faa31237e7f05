// SPDX-License-Identifier: MIT
/* Names of kernels looked up before the probes, read from the driver (see kernel_names.h). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/hmap.h"
#include "core/procfs.h"
#include "core/stream.h"
#include "core/util.h"
#include "gpuscope/api.h"
#include "source/kernel_names.h"

#define NAME_AT	    8	      /* the name's address in a handle's object (driver 580) */
#define MAX_HANDLES (1 << 18) /* handles kept, all processes: past it, none read */
#define HOSTFN	    (1ULL << 32)

struct late_names {
	struct stream *s;
	struct hmap pids; /* (pid, 0): probed late; its value says whether reading stopped */
	/* (pid, handle): named, by a lookup or from the driver, or tried; (pid | HOSTFN,
	 * address): a host stub named by its registration */
	struct hmap handles;
	struct late_names_counts c;
	struct gs_ev_kname rec;
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

/* The name in handle's object, into buf (n bytes): its length, or 0 (none that is a
 * symbol's); *at: where it is in the process. */
static int driver_name(__u32 pid, __u64 handle, char *buf, size_t n, __u64 *at)
{
	int len;

	*at = 0;
	if (!handle || (handle & 7) ||
	    proc_read((pid_t)pid, handle + NAME_AT, at, sizeof(*at)) != 0 || !*at ||
	    *at >= 1ULL << 47)
		return 0;
	len = proc_read_str((pid_t)pid, *at, buf, n);
	return symbol_like(buf, len) ? len : 0;
}

/* A name looked up in a process probed late: kept, and checked against what the driver's
 * object says now (one unloaded since reads as nothing, which says nothing). */
static void looked_up(struct late_names *n, const struct gs_ev_kname *e, bool on)
{
	char buf[GS_NAME_MAX];
	__u64 at;
	int len;

	if (!e->len || e->h.source == GS_SRC_GPUSCOPE || n->handles.len >= MAX_HANDLES)
		return;
	hmap_put(&n->handles, e->h.pid | (e->ns == GS_NS_HOSTFN ? HOSTFN : 0), e->handle, &seen);
	if (e->ns != GS_NS_DRIVER || !on ||
	    !(len = driver_name(e->h.pid, e->handle, buf, sizeof(buf), &at)))
		return;
	if (len == e->len ? !memcmp(buf, e->name, e->len)
			  : e->truncated && len > e->len && !memcmp(buf, e->name, e->len)) {
		n->c.agreed++;
		return;
	}
	n->c.differed++;
	hmap_put(&n->pids, e->h.pid, 0, &stopped);
	gs_debug("pid %u: kernel %s looked up where the driver's object says %s: names no longer "
		 "read from the driver in this process",
		 (unsigned)e->h.pid, e->name, buf);
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

/* A launch of a handle not named in a process probed late: its name read, and put before
 * it as a record of gpuscope's own. */
static void launched(struct late_names *n, const struct gs_ev_launch *l)
{
	struct gs_ev_kname *r = &n->rec;
	int len;

	if ((l->flags & GS_LAUNCH_GRAPH) || hmap_get(&n->handles, l->h.pid, l->func))
		return;
	if (n->handles.len >= MAX_HANDLES) {
		n->c.full++;
		return;
	}
	hmap_put(&n->handles, l->h.pid, l->func, &seen);
	len = driver_name(l->h.pid, l->func, r->name, sizeof(r->name), &r->name_addr);
	if (!len) {
		n->c.unreadable++;
		return;
	}
	r->handle = l->func;
	r->scope = 0;
	r->api = GS_API_NONE;
	r->len = (__u16)len;
	r->ns = GS_NS_DRIVER;
	r->truncated = len == (int)sizeof(r->name) - 1;
	r->pad = 0;
	n->c.read++;
	stream__emit(n->s, &r->h, GS_EV_KNAME,
		     (__u32)((offsetof(struct gs_ev_kname, name) + (size_t)len + 1 + 7) & ~7UL),
		     l->h.pid);
}

static const struct gs_hdr *on_record(void *ctx, const struct gs_hdr *ev)
{
	struct late_names *n = ctx;
	const char *state;

	if (!n->pids.len || !(state = hmap_get(&n->pids, ev->pid, 0)))
		return ev;
	if (ev->type == GS_EV_KNAME)
		looked_up(n, (const void *)ev, state == &reading);
	else if (ev->type == GS_EV_KALIAS)
		aliased(n, (const void *)ev);
	else if (state == &reading)
		launched(n, (const void *)ev);
	return ev;
}

static void retired(void *ctx, __u32 pid)
{
	struct late_names *n = ctx;

	if (hmap_del(&n->pids, pid, 0)) {
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
	n->s = s;
	stream__filter(
		s, STREAM_TYPE(GS_EV_LAUNCH) | STREAM_TYPE(GS_EV_KNAME) | STREAM_TYPE(GS_EV_KALIAS),
		on_record, n);
	stream__on_retire(s, retired, n);
	return n;
}

void late_names__process(struct late_names *n, __u32 pid)
{
	if (n && !hmap_get(&n->pids, pid, 0))
		hmap_put(&n->pids, pid, 0, &reading);
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
