/* SPDX-License-Identifier: MIT */
/* Shared by the unit tests: cmocka, and helpers to build event records. */
#ifndef GS_TEST_UNIT_H
#define GS_TEST_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gpuscope/api.h"
#include "gpuscope/event.h"

static inline void hdr(void *p, __u16 type, __u32 size, __u32 pid, __u64 ts)
{
	struct gs_hdr *h = p;

	memset(p, 0, size);
	h->type = type;
	h->source = GS_SRC_UPROBE;
	h->size = size;
	h->pid = pid;
	h->tid = pid;
	h->ts = ts;
}

/* Run the tests named on the command line (a cmocka filter pattern) or all. */
#define UNIT_MAIN(tests)                                          \
	int main(int argc, char **argv)                           \
	{                                                         \
		if (argc > 1)                                     \
			cmocka_set_test_filter(argv[1]);          \
		return cmocka_run_group_tests(tests, NULL, NULL); \
	}

#endif
