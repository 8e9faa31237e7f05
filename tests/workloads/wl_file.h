/* SPDX-License-Identifier: MIT */
/* A workload's input file, whole and NUL-terminated; exits 2 if it cannot be read. */
#ifndef WL_FILE_H
#define WL_FILE_H

#include <stdio.h>
#include <stdlib.h>

static void *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	long n;
	char *b;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(2);
	}
	b = (char *)calloc(1, (size_t)n + 1); /* (C++ too: bench/bench.cuh) */
	if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(2);
	}
	fclose(f);
	return b;
}

#endif
