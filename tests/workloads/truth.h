/* SPDX-License-Identifier: MIT */
/*
 * Ground truth kept by a workload as it runs: flat "key" -> integer counters, written as a
 * JSON object to the file named by $GS_TRUTH at exit. Keys:
 *   launch:<mangled name>, launch_api:<driver function>, launches
 *   copy:<direction>:count|bytes        (HtoD DtoH DtoD HtoH peer memset)
 *   alloc:<driver function>             successful allocation calls
 *   outstanding:<device|managed|host>   bytes still allocated at exit
 *   peak:device                         most device bytes in use at once
 *   sync:<driver function>              calls
 *   error:<function>:<result>           failed calls
 *   nccl:<op>:count|bytes
 */
#ifndef WL_TRUTH_H
#define WL_TRUTH_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
	char key[160];
	long long v;
} truth_tab[512];
static int truth_n;

static void truth_add(long long v, const char *fmt, ...)
{
	char key[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(key, sizeof(key), fmt, ap);
	va_end(ap);
	for (int i = 0; i < truth_n; i++)
		if (!strcmp(truth_tab[i].key, key)) {
			truth_tab[i].v += v;
			return;
		}
	if (truth_n == (int)(sizeof(truth_tab) / sizeof(truth_tab[0]))) {
		fprintf(stderr, "workload: truth table full\n");
		exit(99);
	}
	snprintf(truth_tab[truth_n].key, sizeof(truth_tab[0].key), "%s", key);
	truth_tab[truth_n++].v = v;
}

static __attribute__((unused)) void truth_set_max(long long v, const char *key)
{
	for (int i = 0; i < truth_n; i++)
		if (!strcmp(truth_tab[i].key, key)) {
			if (v > truth_tab[i].v)
				truth_tab[i].v = v;
			return;
		}
	truth_add(v, "%s", key);
}

static __attribute__((unused)) void truth_write(void)
{
	const char *path = getenv("GS_TRUTH");
	FILE *f;

	if (!path || !*path)
		return;
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(99);
	}
	fprintf(f, "{\n");
	for (int i = 0; i < truth_n; i++)
		fprintf(f, "  \"%s\": %lld%s\n", truth_tab[i].key, truth_tab[i].v,
			i + 1 < truth_n ? "," : "");
	fprintf(f, "}\n");
	fclose(f);
}

/* Die on an unexpected result: the workload itself must be right for the truth to be. */
#define CHECK(call, expect)                                                               \
	do {                                                                              \
		int r_ = (int)(call);                                                     \
		if (r_ != (expect)) {                                                     \
			fprintf(stderr, "workload: %s:%d: %s returned %d, expected %d\n", \
				__FILE__, __LINE__, #call, r_, (int)(expect));            \
			exit(98);                                                         \
		}                                                                         \
	} while (0)

#endif
