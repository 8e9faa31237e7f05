// SPDX-License-Identifier: MIT
/*
 * Call stacks and the names of their addresses. A live process's stacks are kept by
 * address; when it is retired they are kept by name instead (its command, its frames' and
 * kernel's names, interned), so that the stacks of many like processes are one, and its
 * addresses and symbols go.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/util.h"

static __u64 stack_hash(const struct gs_ev_stack *s)
{
	__u64 h = 0xcbf29ce484222325ULL ^ s->api ^ (s->arg << 16);

	for (unsigned int i = 0; i < s->nframes && i < GS_STACK_MAX; i++)
		h = (h ^ s->ip[i]) * 0x100000001b3ULL;
	return h;
}

void model__stack_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_symbol *y = (const void *)ev;
	const struct gs_ev_stack *s = (const void *)ev;
	struct stack_entry *e;
	__u64 h;

	if (ev->type == GS_EV_SYMBOL) {
		if (!hmap_get(&m->symbols, ev->pid, y->addr))
			hmap_put(&m->symbols, ev->pid, y->addr, xstrdup(y->name));
		return;
	}
	m->stacks_skipped += s->skipped;
	if (gs_stack_only_skips(s))
		return;
	m->stack_records++;
	h = stack_hash(s);
	/* (Linear probing on the hash: a collision of different stacks takes the next key.) */
	for (;; h++) {
		e = hmap_get(&m->stacks, h, ev->pid);
		if (!e || (e->api == s->api && e->arg == s->arg && e->nframes == s->nframes &&
			   !memcmp(e->ip, s->ip, s->nframes * sizeof(s->ip[0]))))
			break;
	}
	if (!e) {
		e = xcalloc(1, sizeof(*e));
		e->pid = ev->pid;
		e->api = s->api;
		e->arg = s->arg;
		e->nframes = GS_MIN(s->nframes, GS_STACK_MAX);
		memcpy(e->ip, s->ip, e->nframes * sizeof(e->ip[0]));
		hmap_put(&m->stacks, h, ev->pid, e);
	}
	e->count++;
	MODEL_NOTIFY(m, stack, ev, e);
}

const char *model__symbol(const struct model *m, __u32 pid, __u64 addr)
{
	return hmap_get(&m->symbols, pid, addr);
}

/* A live stack's view: its frames named now. */
static void view_of(const struct model *m, const struct stack_entry *e, const char **frames,
		    struct model_stack *v)
{
	for (unsigned int i = 0; i < e->nframes; i++)
		frames[i] = model__symbol(m, e->pid, e->ip[i]);
	*v = (struct model_stack){ .comm = model__comm(m, e->pid),
				   .api = e->api,
				   .kernel = e->arg ? model__kernel_name(m, e->pid, e->arg) : NULL,
				   .nframes = e->nframes,
				   .frames = frames,
				   .count = e->count };
}

static __u64 named_hash(const struct named_stack *n)
{
	/* (Interned: equal names are equal pointers.) */
	__u64 h = 0xcbf29ce484222325ULL ^ n->api ^ (__u64)(uintptr_t)n->comm ^
		  ((__u64)(uintptr_t)n->kernel << 7);

	for (unsigned int i = 0; i < n->nframes; i++)
		h = (h ^ (__u64)(uintptr_t)n->frames[i]) * 0x100000001b3ULL;
	return h;
}

static bool named_equal(const struct named_stack *a, const struct named_stack *b)
{
	return a->comm == b->comm && a->kernel == b->kernel && a->api == b->api &&
	       a->nframes == b->nframes &&
	       !memcmp(a->frames, b->frames, a->nframes * sizeof(a->frames[0]));
}

static void retire_one(struct model *m, const struct stack_entry *e)
{
	const char *frames[GS_STACK_MAX];
	struct model_stack v;
	struct named_stack *key, *n;
	__u64 h;

	view_of(m, e, frames, &v);
	key = xcalloc(1, sizeof(*key) + e->nframes * sizeof(key->frames[0]));
	key->comm = model__intern(m, v.comm);
	key->kernel = model__intern(m, v.kernel);
	key->api = v.api;
	key->nframes = v.nframes;
	key->count = v.count;
	for (unsigned int i = 0; i < v.nframes; i++)
		key->frames[i] = model__intern(m, frames[i]);
	for (h = named_hash(key);; h++) {
		n = hmap_get(&m->named_stacks, h, 0);
		if (!n || named_equal(n, key))
			break;
	}
	if (n) {
		n->count += key->count;
		free(key);
	} else {
		hmap_put(&m->named_stacks, h, 0, key);
	}
}

void model__stacks_retire(struct model *m, __u32 pid)
{
	struct hmap_slot *s;
	__u64 *keys = NULL;
	size_t n = 0, cap = 0;

	hmap_for_each (&m->stacks, s) {
		if (s->k2 != pid)
			continue;
		retire_one(m, s->val);
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			keys = xrealloc(keys, cap * sizeof(*keys));
		}
		keys[n++] = s->k1;
	}
	for (size_t i = 0; i < n; i++)
		free(hmap_del(&m->stacks, keys[i], pid));
	n = 0;
	hmap_for_each (&m->symbols, s) {
		if (s->k1 != pid)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			keys = xrealloc(keys, cap * sizeof(*keys));
		}
		keys[n++] = s->k2;
	}
	for (size_t i = 0; i < n; i++)
		free(hmap_del(&m->symbols, pid, keys[i]));
	free(keys);
}

void model__each_stack(const struct model *m, void (*fn)(void *ctx, const struct model_stack *s),
		       void *ctx)
{
	const struct hmap_slot *s;

	hmap_for_each (&m->stacks, s) {
		const char *frames[GS_STACK_MAX];
		struct model_stack v;

		view_of(m, s->val, frames, &v);
		fn(ctx, &v);
	}
	hmap_for_each (&m->named_stacks, s) {
		const struct named_stack *n = s->val;
		struct model_stack v = { .comm = n->comm,
					 .api = n->api,
					 .kernel = n->kernel,
					 .nframes = n->nframes,
					 .frames = n->frames,
					 .count = n->count };

		fn(ctx, &v);
	}
}

void model__stacks_free(struct model *m)
{
	hmap_free_with(&m->symbols, NULL);
	hmap_free_with(&m->stacks, NULL);
	hmap_free_with(&m->named_stacks, NULL);
}
