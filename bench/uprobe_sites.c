// SPDX-License-Identifier: MIT
/*
 * What a uprobe costs by the instruction it sits on (bench/uprobe_sites.sh): functions whose
 * first instruction, or the one after a leading endbr64, is chosen, each called N times a
 * round; prints ns a call for each. Run once as is and once with a tracefs uprobe on each
 * probed instruction (the symbol's address + 4 for the endbr64 ones, printed by --sites).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__asm__(".text\n"
	".globl s_endbr\ns_endbr:\n endbr64\n push %rbp\n pop %rbp\n ret\n"
	".globl s_push\ns_push:\n endbr64\n push %rbp\n pop %rbp\n ret\n"
	".globl s_push_r15\ns_push_r15:\n endbr64\n push %r15\n pop %r15\n ret\n"
	".globl s_nop\ns_nop:\n endbr64\n .byte 0x66,0x0f,0x1f,0x44,0x00,0x00\n ret\n"
	".globl s_call\ns_call:\n endbr64\n call 1f\n ret\n1: ret\n"
	".globl s_sub\ns_sub:\n endbr64\n sub $8,%rsp\n add $8,%rsp\n ret\n"
	".globl s_test\ns_test:\n endbr64\n test %rdi,%rdi\n ret\n");
void s_endbr(void), s_push(void), s_push_r15(void), s_nop(void), s_call(void), s_sub(void),
	s_test(void);

static const struct {
	const char *name;
	void (*fn)(void);
	int at; /* where the probe goes: the symbol + this */
} sites[] = {
	{ "endbr64", s_endbr, 0 }, { "push %rbp", s_push, 4 }, { "push %r15", s_push_r15, 4 },
	{ "nopw", s_nop, 4 },	   { "call", s_call, 4 },      { "sub $8,%rsp", s_sub, 4 },
	{ "test", s_test, 4 },
};

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;

	if (argc > 1 && !strcmp(argv[1], "--sites")) {
		/* name, symbol, offset from the symbol */
		for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++)
			printf("%zu %d\n", i, sites[i].at);
		return 0;
	}
	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		double best = 1e18;

		for (int r = 0; r < 3; r++) {
			double t = now_ns();

			for (int k = 0; k < n; k++)
				sites[i].fn();
			t = (now_ns() - t) / n;
			best = t < best ? t : best;
		}
		printf("%-14s %8.0f ns\n", sites[i].name, best);
	}
	return 0;
}
