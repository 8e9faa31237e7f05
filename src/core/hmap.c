// SPDX-License-Identifier: MIT
#include <stdlib.h>

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

static void grow(struct hmap *m)
{
	struct hmap old = *m;
	struct hmap_slot *s;

	m->cap = old.cap ? old.cap * 2 : 64;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
	m->len = 0;
	hmap_for_each (&old, s)
		hmap_put(m, s->k1, s->k2, s->val);
	free(old.slots);
}

void *hmap_put(struct hmap *m, __u64 k1, __u64 k2, void *val)
{
	struct hmap_slot *s;
	void *prev;

	if ((m->len + 1) * 4 > m->cap * 3)
		grow(m);
	s = find(m, k1, k2);
	prev = s->val;
	if (!prev)
		m->len++;
	s->k1 = k1;
	s->k2 = k2;
	s->val = val;
	return prev;
}

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

void hmap_free(struct hmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}
