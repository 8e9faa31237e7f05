// SPDX-License-Identifier: MIT
/* Names of stack addresses, while their processes live (see symbols.h). */
#include <stdlib.h>
#include <string.h>

#include "core/hmap.h"
#include "core/symbolize.h"
#include "core/util.h"
#include "source/symbols.h"

struct symbols {
	struct stream *s;
	struct symbolizer *sym;
	struct hmap named; /* pid -> struct hmap of addresses given a symbol record */
};

static void forget(struct symbols *y, __u32 pid)
{
	struct hmap *h = hmap_del(&y->named, pid, 0);

	if (h) {
		hmap_free(h);
		free(h);
	}
	symbolizer__forget(y->sym, pid);
}

static const struct gs_hdr *name_frames(void *ctx, const struct gs_hdr *ev)
{
	struct symbols *y = ctx;
	const struct gs_ev_stack *st = (const void *)ev;
	struct hmap *named = hmap_get(&y->named, ev->pid, 0);
	struct gs_ev_symbol sym;

	if (!named) {
		named = xcalloc(1, sizeof(*named));
		hmap_put(&y->named, ev->pid, 0, named);
	}
	for (unsigned int i = 0; i < st->nframes; i++) {
		/* (Python frames are named by the plane that took them.) */
		if (GS_IS_PYFRAME(st->ip[i]) || hmap_get(named, st->ip[i], 0))
			continue;
		hmap_put(named, st->ip[i], 0, (void *)1);
		if (symbolizer__name(y->sym, ev->pid, st->ip[i], sym.name, sizeof(sym.name)))
			continue;
		sym.addr = st->ip[i];
		sym.len = (__u16)strlen(sym.name);
		memset(sym.pad, 0, sizeof(sym.pad));
		stream__emit(y->s, &sym.h, GS_EV_SYMBOL,
			     (__u32)(offsetof(struct gs_ev_symbol, name) + sym.len + 1), ev->pid);
	}
	return ev;
}

/* A new image: its modules are others. (Addresses named before the exec keep their names:
 * CUDA calls, and so stacks, come after a program's exec.) */
static const struct gs_hdr *on_exec(void *ctx, const struct gs_hdr *ev)
{
	struct symbols *y = ctx;

	if (((const struct gs_ev_proc *)ev)->kind == GS_PROC_EXEC)
		symbolizer__forget(y->sym, ev->pid);
	return ev;
}

static void retire(void *ctx, __u32 pid)
{
	forget(ctx, pid);
}

struct symbols *symbols__attach(struct stream *s)
{
	struct symbols *y = xcalloc(1, sizeof(*y));

	y->s = s;
	y->sym = symbolizer__new();
	stream__filter(s, STREAM_TYPE(GS_EV_STACK), name_frames, y);
	stream__filter(s, STREAM_TYPE(GS_EV_PROC), on_exec, y);
	stream__on_retire(s, retire, y);
	return y;
}

__u64 symbols__procs(const struct symbols *y)
{
	return y->named.len;
}

void symbols__free(struct symbols *y)
{
	struct hmap_slot *sl;

	if (!y)
		return;
	hmap_for_each (&y->named, sl) {
		hmap_free(sl->val);
		free(sl->val);
	}
	hmap_free(&y->named);
	symbolizer__free(y->sym);
	free(y);
}
