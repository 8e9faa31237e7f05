// SPDX-License-Identifier: MIT
/*
 * What the CPU's primitives cost on this machine (issue 22): the in-process plane's launch
 * path read 4-5 times slower on the GPU guests' CPU than on the CPU machine with the same
 * test double (hot-2026-11-29.md, h4), and its parts are made of these. Per primitive, ns an
 * operation, best of 7 runs:
 *   rdtsc, rdtscp, clock_gettime(CLOCK_MONOTONIC), a locked add, a thread-local read and
 *   write, an indirect call;
 *   a dependent load chain through lines spread over SPAN bytes, one line a 4 KiB page or all
 *   packed into as few pages as they fill, with base pages or with transparent huge pages
 *   asked for (madvise): what a cache miss costs, and what a TLB miss adds to it.
 * Prints one JSON object.
 *   gcc -O2 bench/guest_cpu.c -o guest_cpu && ./guest_cpu
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define RUNS 7

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t rdtscp(void)
{
	uint32_t lo, hi, aux;

	__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	return ((uint64_t)hi << 32) | lo;
}

static __thread uint64_t tl_word __attribute__((tls_model("initial-exec")));
static uint64_t shared_word;
static volatile uint64_t sink;

static __attribute__((noinline)) uint64_t bump(uint64_t x)
{
	return x + 1;
}

static uint64_t (*volatile indirect)(uint64_t) = bump;

enum prim {
	P_EMPTY,
	P_RDTSC,
	P_RDTSCP,
	P_CLOCK,
	P_LOCK,
	P_TLS,
	P_CALL,
	P_N
};
static const char *const prim_names[P_N] = { "empty",	      "rdtsc",	    "rdtscp",
					     "clock_gettime", "locked_add", "tls_rw",
					     "indirect_call" };

/* ns an operation of p over n operations */
static double run_prim(enum prim p, long n)
{
	uint64_t t0 = now_ns(), acc = 0;

	for (long i = 0; i < n; i++) {
		switch (p) {
		case P_EMPTY:
			__asm__ volatile("" ::: "memory");
			break;
		case P_RDTSC:
			acc += rdtsc();
			break;
		case P_RDTSCP:
			acc += rdtscp();
			break;
		case P_CLOCK:
			acc += now_ns();
			break;
		case P_LOCK:
			__atomic_add_fetch(&shared_word, 1, __ATOMIC_RELAXED);
			break;
		case P_TLS:
			tl_word = tl_word * 3 + 1;
			__asm__ volatile("" ::: "memory");
			break;
		case P_CALL:
			acc = indirect(acc);
			break;
		default:
			break;
		}
	}
	sink = acc + tl_word;
	return (double)(now_ns() - t0) / (double)n;
}

/*
 * A chain of `lines` cache lines in random order over buf (span bytes): each line holds the
 * next one's address. paged: one line a 4 KiB page (each hop a new page); otherwise lines
 * packed one after another (lines / 64 pages). ns a hop.
 */
static double chase(char *buf, size_t span, size_t lines, int paged, long hops)
{
	size_t *order = malloc(lines * sizeof(*order)), stride = paged ? 4096 : 64;
	void **p;
	uint64_t t0;

	if (!order || lines * stride > span) {
		free(order);
		return -1;
	}
	for (size_t i = 0; i < lines; i++)
		order[i] = i;
	srand(7);
	for (size_t i = lines - 1; i > 0; i--) {
		size_t j = (size_t)rand() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < lines; i++) {
		/* (the line's place in its page turned too, so the lines do not share cache sets) */
		size_t at = order[i] * stride + (paged ? (order[i] % 64) * 64 : 0);
		size_t next = order[(i + 1) % lines] * stride +
			      (paged ? (order[(i + 1) % lines] % 64) * 64 : 0);

		*(void **)(buf + at) = buf + next;
	}
	p = (void **)(buf + order[0] * stride + (paged ? (order[0] % 64) * 64 : 0));
	for (long i = 0; i < (long)lines; i++) /* (once round: the pages faulted in) */
		p = (void **)*p;
	t0 = now_ns();
	for (long i = 0; i < hops; i++)
		p = (void **)*p;
	sink = (uint64_t)(uintptr_t)p;
	free(order);
	return (double)(now_ns() - t0) / (double)hops;
}

static double best(double *v)
{
	double b = v[0];

	for (int i = 1; i < RUNS; i++)
		if (v[i] >= 0 && (b < 0 || v[i] < b))
			b = v[i];
	return b;
}

int main(void)
{
	static const size_t line_counts[] = { 64, 512, 4096, 32768 };
	const size_t span = 32768UL * 4096;
	double v[RUNS];
	char *base, *huge;

	base = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	huge = mmap(NULL, span + (2UL << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	if (base == MAP_FAILED || huge == MAP_FAILED) {
		fprintf(stderr, "guest_cpu: mmap failed\n");
		return 1;
	}
	madvise(base, span, MADV_NOHUGEPAGE);
	huge = (char *)(((uintptr_t)huge + (2UL << 20) - 1) & ~((2UL << 20) - 1));
	madvise(huge, span, MADV_HUGEPAGE);
	memset(base, 1, span);
	memset(huge, 1, span);
	printf("{\"ns_an_op\": {");
	for (int p = 0; p < P_N; p++) {
		for (int r = 0; r < RUNS; r++)
			v[r] = run_prim((enum prim)p, 2000000);
		printf("%s\"%s\": %.2f", p ? ", " : "", prim_names[p], best(v));
	}
	printf("}, \"ns_a_hop\": [");
	for (size_t k = 0; k < sizeof(line_counts) / sizeof(line_counts[0]); k++) {
		static const char *const kinds[] = { "packed", "a_page_each_4k",
						     "a_page_each_thp" };
		size_t n = line_counts[k];

		printf("%s{\"lines\": %zu", k ? ", " : "", n);
		for (int kind = 0; kind < 3; kind++) {
			for (int r = 0; r < RUNS; r++)
				v[r] = chase(kind == 2 ? huge : base, span, n, kind > 0, 2000000);
			printf(", \"%s\": %.2f", kinds[kind], best(v));
		}
		printf("}");
	}
	printf("], \"thp\": \"");
	{
		FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
		char buf[128] = "";

		if (f && fgets(buf, sizeof(buf), f))
			buf[strcspn(buf, "\n")] = 0;
		if (f)
			fclose(f);
		printf("%s\"}\n", buf);
	}
	return 0;
}
