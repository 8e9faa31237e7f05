// SPDX-License-Identifier: MIT
/* Allocation that can fail (see alloc.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

static unsigned long fail_at; /* (a test's: the countdown to the failing allocation) */

unsigned long gs_alloc_fail_at(unsigned long n)
{
	unsigned long left = fail_at;

	fail_at = n;
	return left;
}

static int injected(void)
{
	return fail_at && --fail_at == 0;
}

void *gs_malloc(size_t n)
{
	return injected() ? NULL : malloc(n ? n : 1);
}

void *gs_calloc(size_t nmemb, size_t size)
{
	return injected() ? NULL : calloc(nmemb ? nmemb : 1, size ? size : 1);
}

void *gs_realloc(void *p, size_t n)
{
	return injected() ? NULL : realloc(p, n ? n : 1);
}

char *gs_strndup(const char *s, size_t n)
{
	char *p = gs_malloc(n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

char *gs_strdup(const char *s)
{
	return gs_strndup(s ? s : "", s ? strlen(s) : 0);
}

int gs_grow(void *v, size_t *cap, size_t need, size_t size)
{
	void **pv = v, *p;
	size_t n = *cap ? *cap : 8;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	if (n > (size_t)-1 / size)
		return -ENOMEM;
	p = gs_realloc(*pv, n * size);
	if (!p)
		return -ENOMEM;
	*pv = p;
	*cap = n;
	return 0;
}
