// SPDX-License-Identifier: MIT
/*
 * Call stacks in the in-process plane: the unwinder (unwind.c: the DWARF call frame
 * information every library carries, as glibc's backtrace follows it, so code built without
 * frame pointers unwinds too) at the same calls as the kernel probes: every Nth launch of a
 * thread, every allocation, every failed call. The frames of this library are left out:
 * the stack starts where the program called the driver.
 *
 * A stack costs more than its unwinding: measured on an H200 in one process, taking the
 * stack of every 64th launch added 0.14-0.37 us to each launch of a loop of tiny ops (9-23
 * us a stack), where the unwinding and the Python frames themselves took about 2.5 us
 * (bench/results/ab-2026-11-27.md): the rest is spent outside the unwinding (where,
 * not found; measured while gpuscope's own loop spun a CPU beside the program, fixed
 * since, and not measured again). So the in-process plane limits how many it takes, not
 * their measured time:
 * with GPUSCOPE_STACK_RATE (which gpuscope sets unless --stacks was given), a launch whose
 * stack is due is skipped while its thread has taken that many stacks a second
 * (gs_rate_allows, the rate --gpu-time=N's timed launches keep to too: BURST at most at
 * once); its next stack record carries how many were skipped, or,
 * when the thread ends with skips since its last one, a record of no frames that only
 * carries them. At exit, the thread that ends the process writes such a record for every
 * thread with skips still unrecorded (ACCTS of them at most: beyond, a thread still running
 * then keeps its last skips uncounted), a Python thread just join()ed among them, whose
 * join returns before the thread has ended. Allocations' and failed calls' stacks are
 * always taken.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gpuscope/api.h"
#include "inject/inject.h"

#define BURST	 10
#define RATE_MAX 1000000U
#define ACCTS	 256

struct acct {
	__u64 tat;     /* its rate's (gs_rate_allows) */
	__u32 skipped; /* launches' stacks skipped since the thread's last stack record (atomic:
			* the thread ending the process may take them) */
	__u16 api;     /* the last one's call */
	__u32 tid;
	int slot; /* 1 + its place in accts, 0 none, -1 never (the thread is ending) */
};

static __u32 every GS_HOT;
static __u64 gap GS_HOT; /* ns between stacks at the rate, 0: no rate (so no division at each
			  * launch) */
/* Launches till this thread's next due (0: the next is; no division at each launch). */
static __thread __u32 tl_until __attribute__((tls_model("initial-exec")));
static __thread struct acct tl_acct __attribute__((tls_model("initial-exec")));
/* The threads that have skipped a stack, till they end (lock-free: fork-safe). */
static struct acct *accts[ACCTS];
static pthread_key_t tally_key; /* set in a thread with skips not yet recorded */
static pthread_once_t tally_once = PTHREAD_ONCE_INIT;
static bool tally_key_ok;
struct gs_stacks_start gs_stacks_start GS_HIDDEN;

void gs_stacks_set(__u32 n, __u32 per_s)
{
	if (n)
		gs_unwind_init();
	__atomic_store_n(&every, n, __ATOMIC_RELAXED);
	__atomic_store_n(&gap, per_s && per_s <= RATE_MAX ? 1000000000ULL / per_s : 0,
			 __ATOMIC_RELAXED);
}

void gs_stacks_init(const char *e, const char *per_s)
{
	__u32 rate = per_s ? (__u32)strtoul(per_s, NULL, 10) : 0;

	every = e ? (__u32)strtoul(e, NULL, 10) : 0;
	if (rate > RATE_MAX)
		rate = 0;
	gap = rate ? 1000000000ULL / rate : 0;
	gs_stacks_start.every = every;
	gs_stacks_start.rate = rate;
	/* The unwinder loads itself at its first use: now, not inside a signal handler. */
	if (every)
		gs_unwind_init();
}

/* A thread's skips since its last stack record, in a record of no frames (its own). */
static void tally(struct acct *a)
{
	const __u32 size = (__u32)offsetof(struct gs_ev_stack, ip);
	struct gs_ev_stack *e;
	__u32 n = __atomic_exchange_n(&a->skipped, 0, __ATOMIC_RELAXED);

	if (!n)
		return;
	if (!(e = gs_emit_reserve(size, GS_EV_STACK))) {
		__atomic_fetch_add(&a->skipped, n, __ATOMIC_RELAXED); /* (the ring's drop) */
		return;
	}
	gs_fill_hdr(&e->h, GS_EV_STACK, size, gs_clock());
	e->h.tid = a->tid;
	e->arg = 0;
	e->api = a->api;
	e->nframes = 0;
	e->skipped = n;
	gs_emit_commit(e);
}

static void thread_ends(void *set)
{
	(void)set;
	tally(&tl_acct);
	if (tl_acct.slot > 0)
		__atomic_store_n(&accts[tl_acct.slot - 1], NULL, __ATOMIC_RELEASE);
	/* (Not again: its memory goes with the thread, and no destructor may be left to
	 * take it out of the table.) */
	tl_acct.slot = -1;
}

/* At exit (in the thread that ends the process): every thread's skips not recorded. */
static void tally_all(void)
{
	for (int i = 0; i < ACCTS; i++) {
		struct acct *a = __atomic_load_n(&accts[i], __ATOMIC_ACQUIRE);

		if (a)
			tally(a);
	}
	tally(&tl_acct);
}

static void tally_init(void)
{
	tally_key_ok = pthread_key_create(&tally_key, thread_ends) == 0;
	atexit(tally_all);
}

/* A launch's stack skipped (inside a wrapper: never in a signal handler that interrupted
 * this thread outside one, which would make its calls nested, and stackless). */
static void count_skip(unsigned int api)
{
	tl_acct.api = (__u16)api;
	if (__atomic_fetch_add(&tl_acct.skipped, 1, __ATOMIC_RELAXED) || tl_acct.slot)
		return;
	tl_acct.tid = gs_self_tid();
	pthread_once(&tally_once, tally_init);
	/* (In the table only with the destructor that takes it out.) */
	if (!tally_key_ok || pthread_setspecific(tally_key, (void *)1))
		return;
	for (int i = 0; i < ACCTS && !tl_acct.slot; i++) {
		struct acct *none = NULL;

		if (__atomic_compare_exchange_n(&accts[i], &none, &tl_acct, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			tl_acct.slot = i + 1;
	}
}

void gs_stacks_after_fork(void)
{
	/* (The parent's threads and skips are the parent's.) */
	memset(&tl_acct, 0, sizeof(tl_acct));
	memset(accts, 0, sizeof(accts));
	tl_until = 0;
}

/* The stack of the call being made (api, at ts), recorded. */
static void take(unsigned int api, __u64 ts, __u64 arg, bool launch)
{
	void *frames[GS_STACK_MAX + 8];
	__u64 ips[GS_STACK_MAX];
	struct gs_ev_stack *e;
	__u64 ph = gs_phase_t0();
	int n = gs_unwind(frames, (int)(sizeof(frames) / sizeof(frames[0]))), skip = 0;

	gs_phase_add(GS_PH_UNWIND, ph);
	while (skip < n && gs_called_from_self(frames[skip]))
		skip++;
	n -= skip;
	if (n <= 0)
		return;
	ph = gs_phase_t0();
	n = gs_py_stack(frames + skip, n, launch, ips, GS_STACK_MAX);
	gs_phase_add(GS_PH_PYWALK, ph);
	ph = gs_phase_t0();
	e = gs_emit_reserve((__u32)(offsetof(struct gs_ev_stack, ip) + (size_t)n * 8), GS_EV_STACK);
	if (!e) {
		gs_phase_add(GS_PH_STACKREC, ph);
		return;
	}
	gs_fill_hdr(&e->h, GS_EV_STACK, (__u32)(offsetof(struct gs_ev_stack, ip) + (size_t)n * 8),
		    ts);
	e->arg = arg;
	e->api = (__u16)api;
	e->nframes = (__u16)n;
	e->skipped = __atomic_exchange_n(&tl_acct.skipped, 0, __ATOMIC_RELAXED);
	memcpy(e->ip, ips, (size_t)n * 8);
	gs_emit_commit(e);
	gs_phase_add(GS_PH_STACKREC, ph);
}

GS_HOT_FN void gs_stack_maybe(unsigned int api, __u64 ts, int result, __u64 arg)
{
	const struct gs_api_desc *d = api < GS_API_MAX ? &gs_descs[api] : NULL;
	bool failed = result != 0 && result != 600 /* CUDA_ERROR_NOT_READY: a status */;
	/* (Each read once: ab.c may change them meanwhile.) */
	__u32 n = __atomic_load_n(&every, __ATOMIC_RELAXED);
	__u64 g = __atomic_load_n(&gap, __ATOMIC_RELAXED);
	bool alloc;

	if (!n || !d)
		return;
	alloc = d->family == GS_FAM_MEM &&
		(d->shape == GS_SH_M_ALLOC || d->shape == GS_SH_M_PITCH ||
		 d->shape == GS_SH_M_ASYNC || d->shape == GS_SH_M_POOL ||
		 d->shape == GS_SH_M_CREATE);
	/* (Allocations' and failed calls' stacks always; a launch's when due and the rate
	 * allows.) */
	if (!failed && !alloc) {
		if (d->family != GS_FAM_LAUNCH)
			return;
		/* Every nth launch due, the first of all among them (n changed by ab.c: the next
		 * due). */
		if (n > 1) {
			if (tl_until && tl_until < n) {
				tl_until--;
				return;
			}
			tl_until = n - 1;
		}
		if (g && !gs_gap_allows(&tl_acct.tat, ts, g, BURST)) {
			count_skip(api);
			return;
		}
	}
	take(api, ts, arg, d->family == GS_FAM_LAUNCH && !failed);
}
