// SPDX-License-Identifier: MIT
/*
 * The in-process plane's clock: CLOCK_MONOTONIC (the clock of bpf_ktime_get_ns and of
 * every other gpuscope event), read twice per wrapped call.
 *
 * clock_gettime costs about 21 ns on the GPU machines; the time stamp counter it is
 * computed from costs half that. Where the kernel itself keeps CLOCK_MONOTONIC on the TSC
 * (clocksource "tsc": the kernel has checked it is invariant and synchronised across CPUs),
 * each thread extrapolates from an anchor pair {tsc, monotonic ns} taken at most
 * GS_CLOCK_WINDOW_NS ago, at a rate measured against clock_gettime over the life of the
 * process; a new anchor is taken when the window is over. The error stays within tens of
 * nanoseconds of clock_gettime (the anchors' own precision plus the rate error over one
 * window; NTP slewing of 500 ppm at most adds at most 5 us per window, in practice far
 * less). Readings of one thread never go backwards. Anywhere else, or with
 * GPUSCOPE_INJECT_CLOCK=mono, gs_clock is clock_gettime.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inject/inject.h"

#define GS_CLOCK_WINDOW_NS 10000000ULL /* re-anchor every 10 ms */
#define GS_CLOCK_RATE_MIN  20000000ULL /* the rate needs 20 ms of history */

static struct {
	bool tsc;	  /* the TSC path is allowed */
	__u64 tsc0, ns0;  /* the first anchor of the process */
	__u64 mult;	  /* ns per cycle << 32; 0 until measured (atomic) */
	__u64 max_cycles; /* anchors older than this many cycles are renewed */
} C GS_HOT;

static __thread struct {
	__u64 tsc, ns, last;
} tl_anchor __attribute__((tls_model("initial-exec")));

static inline __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

#if defined(__x86_64__)
static inline __u64 rdtsc(void)
{
	__u32 lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((__u64)hi << 32) | lo;
}

/*
 * One {tsc, ns} pair: the TSC read on both sides of clock_gettime, the midpoint kept, of the
 * tightest of a few tries (a virtual CPU can be descheduled between the reads).
 */
static void pair(__u64 *tsc, __u64 *ns)
{
	__u64 best = ~0ULL;

	for (int i = 0; i < 4; i++) {
		__u64 a = rdtsc(), n = mono_ns(), b = rdtsc();

		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = n;
		}
	}
}

static bool tsc_is_clocksource(void)
{
	char buf[32] = "";
	FILE *f;

	f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return strcmp(buf, "tsc\n") == 0;
}
#endif

void gs_clock_init(void)
{
#if defined(__x86_64__)
	const char *mode = getenv("GPUSCOPE_INJECT_CLOCK");

	if ((mode && strcmp(mode, "tsc") != 0) || !tsc_is_clocksource())
		return;
	pair(&C.tsc0, &C.ns0);
	C.tsc = true;
#endif
}

#if defined(__x86_64__)
static __attribute__((noinline)) __u64 reanchor(void)
{
	__u64 tsc, ns, mult;

	pair(&tsc, &ns);
	tl_anchor.tsc = tsc;
	tl_anchor.ns = ns;
	/* The rate over the whole life of the process: its error shrinks as it grows. */
	if (ns - C.ns0 >= GS_CLOCK_RATE_MIN && tsc > C.tsc0) {
		mult = (__u64)(((unsigned __int128)(ns - C.ns0) << 32) / (tsc - C.tsc0));
		if (mult) {
			__atomic_store_n(&C.mult, mult, __ATOMIC_RELAXED);
			/* The window in cycles, kept small enough that cycles * mult fits. */
			__atomic_store_n(
				&C.max_cycles,
				(__u64)(((unsigned __int128)GS_CLOCK_WINDOW_NS << 32) / mult),
				__ATOMIC_RELAXED);
		}
	}
	return ns;
}
#endif

GS_HOT_FN __u64 gs_clock(void)
{
	__u64 ns;

#if defined(__x86_64__)
	if (C.tsc) {
		__u64 c = rdtsc(), mult = __atomic_load_n(&C.mult, __ATOMIC_RELAXED),
		      d = c - tl_anchor.tsc;

		if (mult && tl_anchor.tsc && c >= tl_anchor.tsc &&
		    d < __atomic_load_n(&C.max_cycles, __ATOMIC_RELAXED))
			ns = tl_anchor.ns + (__u64)(((unsigned __int128)d * mult) >> 32);
		else
			ns = reanchor();
		if (ns < tl_anchor.last)
			ns = tl_anchor.last;
		tl_anchor.last = ns;
		return ns;
	}
#endif
	ns = mono_ns();
	return ns;
}

bool gs_gap_allows(__u64 *tat, __u64 now, __u64 gap, __u32 burst)
{
	if (*tat > now + (burst - 1) * gap)
		return false;
	*tat = (*tat > now ? *tat : now) + gap;
	return true;
}

bool gs_rate_allows(__u64 *tat, __u64 now, __u32 per_s, __u32 burst)
{
	return gs_gap_allows(tat, now, 1000000000ULL / per_s, burst);
}

/* ---- measurements (GPUSCOPE_AB_PHASES, ab.c): the parts of the calls, summed ---------- */

bool gs_phases_on GS_HOT;
static __u64 phase_n[GS_PH_N], phase_ns[GS_PH_N];

void gs_phase_sum(enum gs_phase ph, __u64 t0)
{
	__atomic_add_fetch(&phase_n[ph], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&phase_ns[ph], gs_clock() - t0, __ATOMIC_RELAXED);
}

void gs_phase_take(enum gs_phase ph, __u64 *n, __u64 *ns)
{
	*n = __atomic_exchange_n(&phase_n[ph], 0, __ATOMIC_RELAXED);
	*ns = __atomic_exchange_n(&phase_ns[ph], 0, __ATOMIC_RELAXED);
}
