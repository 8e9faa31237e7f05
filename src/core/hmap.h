/* SPDX-License-Identifier: MIT */
/*
 * Open-addressing hash map from a pair of u64 keys to a non-NULL pointer. Linear probing
 * with backward-shift deletion, so there are no tombstones and lookups stay short.
 */
#ifndef GS_CORE_HMAP_H
#define GS_CORE_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

struct hmap_slot {
	__u64 k1, k2;
	void *val; /* NULL: empty */
};

struct hmap {
	struct hmap_slot *slots;
	size_t cap; /* power of two, or 0 */
	size_t len;
};

void *hmap_get(const struct hmap *m, __u64 k1, __u64 k2);
/* Insert or replace: 0, or -ENOMEM (nothing changed). *prev (if not NULL): the previous value
 * or NULL. */
int hmap_try_put(struct hmap *m, __u64 k1, __u64 k2, void *val, void **prev);
#ifndef GS_IN_TARGET
/* Insert or replace (gpuscope exits if out of memory); returns the previous value or NULL. */
void *hmap_put(struct hmap *m, __u64 k1, __u64 k2, void *val);
#endif
/* Remove; returns the removed value or NULL. */
void *hmap_del(struct hmap *m, __u64 k1, __u64 k2);
/* Free the table (not the values). */
void hmap_free(struct hmap *m);
/* Free every value with fn (NULL: free()), then the table. */
void hmap_free_with(struct hmap *m, void (*fn)(void *));
#ifndef GS_IN_TARGET
/* The value under (k1, k2), made (size bytes, zeroed) if there is none. */
void *hmap_get_or_new(struct hmap *m, __u64 k1, __u64 k2, size_t size);
/* Remove every entry pred says to, its value given to free_fn (if not NULL): how many. */
size_t hmap_drop_if(struct hmap *m, bool (*pred)(void *ctx, const struct hmap_slot *s), void *ctx,
		    void (*free_fn)(void *));
/* Remove the entries whose k1 (second: k2), shifted right by shift, is key (a process's
 * entries, by its pid), their values given to free_fn (if not NULL): how many. */
size_t hmap_drop_key(struct hmap *m, bool second, unsigned int shift, __u64 key,
		     void (*free_fn)(void *));
#endif

#define hmap_for_each(m, s)                                                      \
	for ((s) = (m)->slots; (m)->slots && (s) < (m)->slots + (m)->cap; (s)++) \
		if ((s)->val)

#endif
