// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "core/hmap.h"
#include "core/util.h"

static size_t hash(__u64 k1, __u64 k2)
{
	__u64 h = k1 * 0x9e3779b97f4a7c15ULL ^ (k2 + 0x7f4a7c159e3779b9ULL) * 0xc2b2ae3d27d4eb4fULL;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	return (size_t)h;
}

static struct hmap_slot *find(const struct hmap *m, __u64 k1, __u64 k2)
{
	size_t mask = m->cap - 1, i;

	if (!m->cap)
		return NULL;
	for (i = hash(k1, k2) & mask;; i = (i + 1) & mask) {
		struct hmap_slot *s = &m->slots[i];

		if (!s->val)
			return s;
		if (s->k1 == k1 && s->k2 == k2)
			return s;
	}
}

void *hmap_get(const struct hmap *m, __u64 k1, __u64 k2)
{
	struct hmap_slot *s = find(m, k1, k2);

	return s ? s->val : NULL;
}

static int grow(struct hmap *m)
{
	struct hmap old = *m;
	struct hmap_slot *s, *slots;
	size_t cap = old.cap ? old.cap * 2 : 64;

	slots = gs_calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	m->slots = slots;
	m->cap = cap;
	m->len = 0;
	hmap_for_each (&old, s) {
		struct hmap_slot *to = find(m, s->k1, s->k2);

		*to = *s;
		m->len++;
	}
	free(old.slots);
	return 0;
}

int hmap_try_put(struct hmap *m, __u64 k1, __u64 k2, void *val, void **prev)
{
	struct hmap_slot *s;

	if ((m->len + 1) * 4 > m->cap * 3 && grow(m))
		return -ENOMEM;
	s = find(m, k1, k2);
	if (prev)
		*prev = s->val;
	if (!s->val)
		m->len++;
	s->k1 = k1;
	s->k2 = k2;
	s->val = val;
	return 0;
}

#ifndef GS_IN_TARGET
void *hmap_put(struct hmap *m, __u64 k1, __u64 k2, void *val)
{
	void *prev;

	if (hmap_try_put(m, k1, k2, val, &prev))
		gs_out_of_memory(m->cap * 2 * sizeof(*m->slots));
	return prev;
}

void *hmap_get_or_new(struct hmap *m, __u64 k1, __u64 k2, size_t size)
{
	void *v = hmap_get(m, k1, k2);

	if (!v) {
		v = xcalloc(1, size);
		hmap_put(m, k1, k2, v);
	}
	return v;
}

size_t hmap_drop_if(struct hmap *m, bool (*pred)(void *ctx, const struct hmap_slot *s), void *ctx,
		    void (*free_fn)(void *))
{
	struct hmap_slot *s, *doomed = NULL;
	size_t n = 0, cap = 0;

	/* (Collected first: deleting shifts the table under an iteration.) */
	hmap_for_each (m, s) {
		if (!pred(ctx, s))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			doomed = xrealloc(doomed, cap * sizeof(*doomed));
		}
		doomed[n++] = *s;
	}
	for (size_t i = 0; i < n; i++) {
		void *v = hmap_del(m, doomed[i].k1, doomed[i].k2);

		if (free_fn)
			free_fn(v);
	}
	free(doomed);
	return n;
}

struct key_match {
	bool second;
	unsigned int shift;
	__u64 key;
};

static bool key_matches(void *ctx, const struct hmap_slot *s)
{
	const struct key_match *k = ctx;

	return (k->second ? s->k2 : s->k1) >> k->shift == k->key;
}

size_t hmap_drop_key(struct hmap *m, bool second, unsigned int shift, __u64 key,
		     void (*free_fn)(void *))
{
	struct key_match k = { .second = second, .shift = shift, .key = key };

	return hmap_drop_if(m, key_matches, &k, free_fn);
}
#endif

void *hmap_del(struct hmap *m, __u64 k1, __u64 k2)
{
	struct hmap_slot *s = find(m, k1, k2);
	size_t mask, i, j;
	void *val;

	if (!s || !s->val)
		return NULL;
	val = s->val;
	mask = m->cap - 1;
	i = (size_t)(s - m->slots);
	/* Backward shift: move later members of the probe run into the hole. */
	for (j = (i + 1) & mask; m->slots[j].val; j = (j + 1) & mask) {
		size_t home = hash(m->slots[j].k1, m->slots[j].k2) & mask;

		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i].val = NULL;
	m->len--;
	return val;
}

void hmap_free_with(struct hmap *m, void (*fn)(void *))
{
	struct hmap_slot *s;

	hmap_for_each (m, s)
		(fn ? fn : free)(s->val);
	hmap_free(m);
}

void hmap_free(struct hmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}
