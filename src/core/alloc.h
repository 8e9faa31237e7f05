/* SPDX-License-Identifier: MIT */
/*
 * Allocation that can fail. Code that is linked into the traced program (the in-process
 * library: src/inject/, and what it shares of core/ and ptx/) uses only these: a failure is
 * NULL (or -ENOMEM), the feature that needed the memory is given up, and the program's call
 * goes on. gpuscope's own code may use xmalloc and friends (core/util.h), which end
 * gpuscope with a message instead; they are not built into the library, so a use of them
 * there fails its link.
 *
 * A test makes the Nth allocation from here on fail (gs_alloc_fail_at(N); 0: none), to walk
 * every failure path of a parser; it returns what was left of the previous countdown (0: the
 * failure was made, or none was asked for).
 */
#ifndef GS_CORE_ALLOC_H
#define GS_CORE_ALLOC_H

#include <stddef.h>

void *gs_malloc(size_t n);
void *gs_calloc(size_t nmemb, size_t size);
void *gs_realloc(void *p, size_t n);
char *gs_strdup(const char *s);
/* n bytes of s, NUL-terminated. */
char *gs_strndup(const char *s, size_t n);
/* Make room for `need` elements of `size` bytes in *v (holding *cap now): 0 or -ENOMEM
 * (then *v and *cap are as they were). */
int gs_grow(void *v, size_t *cap, size_t need, size_t size);
unsigned long gs_alloc_fail_at(unsigned long n);

#endif
