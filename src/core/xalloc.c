// SPDX-License-Identifier: MIT
/* gpuscope's own allocation: out of memory ends it with a message (see core/alloc.h for the
 * code linked into traced programs, which must not). Not built into the library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

void gs_out_of_memory(size_t n)
{
	fprintf(stderr, "gpuscope: out of memory (allocating %zu bytes)\n", n);
	exit(GS_EXIT_RUNTIME);
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		gs_out_of_memory(n);
	return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

	if (!p)
		gs_out_of_memory(nmemb * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		gs_out_of_memory(n);
	return q;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");

	if (!p)
		gs_out_of_memory(strlen(s));
	return p;
}
