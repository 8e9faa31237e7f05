// SPDX-License-Identifier: MIT
/*
 * How a walk of Python frames (pyframes.c) reads the interpreter's memory: never in place
 * but for this thread's own callers' frames (between its stack pointer and its stack's top:
 * mapped, whatever they hold); elsewhere by process_vm_readv, so that a wrong address reads
 * an error, never a fault.
 *
 * A walk reads a window at a time: the pages at and below an address, by one call in
 * descending order (the call stops at the first page it cannot read, keeping those before
 * it). 3.11 and later keep a thread's frames in its data stack, a caller below its callee: a
 * window of a few pages holds dozens of frames, where a read per frame cost ~0.9 us each
 * (an H200, GPT-2's 40-deep stacks: 34 us a walk). 3.12 puts each evaluation's entry frame
 * on the C stack, between its callers' frames in the data stack, and an autograd thread
 * walks the main thread's frames (borrowed: nothing of them in its own stack): 4.7-5.9
 * calls a walk on PyTorch's training steps, ~6 us each on an H200 guest, most of a walk's
 * 29-45 us (bench/results/unwind-2026-11-29.md). So each walking thread keeps which
 * windows its last walk read, and its next walk reads them again, first, by one call: the
 * same thread walks the same frames again (the main thread's, blocked in backward(); its
 * own, a few lines on). What is read is read then; only where to read comes from the last
 * walk. Per thread, allocated at its first walk (96 KiB), freed as the thread ends.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/pyname.h"
#include "inject/inject.h"
#include "inject/pyframes_int.h"

#define WIN_PAGES 4
#define WINS	  6
#define PAGE	  4096ULL

struct window {
	__u64 lo, hi; /* what buf holds: [lo, hi), at its end */
	unsigned char buf[WIN_PAGES * PAGE];
};

struct reads {
	struct window win[WINS];
	unsigned int used;	  /* windows read from in this walk (bits) */
	unsigned int order[WINS]; /* in the order first read from */
	unsigned int nused, next;
	__u64 plan_lo[WINS], plan_hi[WINS]; /* the last walk's windows, in that order */
	unsigned int nplan;
};

bool gs_py_uncached GS_HIDDEN; /* (ab.c's "+pylist") */
static pid_t pid;
static __u64 reads_by_call, reads_in_place, replayed;
static __thread struct reads *tl_r __attribute__((tls_model("initial-exec")));
static pthread_key_t free_key; /* (its destructor frees a thread's windows as it ends) */
static pthread_once_t free_once = PTHREAD_ONCE_INIT;
static bool free_key_ok;

static void thread_ends(void *r)
{
	free(r);
	tl_r = NULL;
}

static void free_init(void)
{
	free_key_ok = pthread_key_create(&free_key, thread_ends) == 0;
}

/* This thread's windows, made at its first walk (NULL: no memory). */
static struct reads *reads_here(void)
{
	struct reads *r;

	if (tl_r)
		return tl_r;
	pthread_once(&free_once, free_init);
	if (!free_key_ok || !(r = calloc(1, sizeof(*r))))
		return NULL;
	if (pthread_setspecific(free_key, r)) {
		free(r);
		return NULL;
	}
	return tl_r = r;
}

void py_reads_init(pid_t p)
{
	pid = p;
}

bool py_rd(void *dst, __u64 addr, size_t n)
{
	__atomic_fetch_add(&reads_by_call, 1, __ATOMIC_RELAXED);
	return py_read_pid((void *)(uintptr_t)pid, dst, addr, n);
}

/* Whether [addr, addr + n) lies in this thread's stack between here and its top: its
 * callers' frames. Not on a signal's own stack. */
static bool own_stack(__u64 addr, size_t n)
{
	volatile char here = 0;
	__u64 sp = (__u64)(uintptr_t)&here;

	return addr > sp && gs_own_stack(sp, addr, n);
}

bool py_in_place(void *dst, __u64 addr, size_t n)
{
	if (!own_stack(addr, n))
		return false;
	memcpy(dst, (const void *)(uintptr_t)addr, n);
	__atomic_fetch_add(&reads_in_place, 1, __ATOMIC_RELAXED);
	return true;
}

/* Window k read from in this walk. */
static void use(struct reads *r, unsigned int k)
{
	if (r->used & (1u << k))
		return;
	r->used |= 1u << k;
	r->order[r->nused++] = k;
}

/* [lo, hi) (whole pages, at most a window) read into window k by one call, pages from the
 * top down; false if not one could be. */
static bool fill(struct window *w, __u64 lo, __u64 hi)
{
	struct iovec local[WIN_PAGES], remote[WIN_PAGES];
	int np = (int)((hi - lo) / PAGE);
	ssize_t got;

	for (int i = 0; i < np; i++) {
		local[i].iov_base = w->buf + (WIN_PAGES - 1 - i) * PAGE;
		local[i].iov_len = PAGE;
		remote[i].iov_base = (void *)(unsigned long)(hi - (__u64)(i + 1) * PAGE);
		remote[i].iov_len = PAGE;
	}
	__atomic_fetch_add(&reads_by_call, 1, __ATOMIC_RELAXED);
	got = process_vm_readv(pid, local, (unsigned long)np, remote, (unsigned long)np, 0);
	w->lo = w->hi = 0;
	if (got <= 0 || got % PAGE)
		return false;
	w->hi = hi;
	w->lo = hi - (__u64)got;
	return true;
}

bool py_walk_begin(void)
{
	struct iovec local[WINS * WIN_PAGES], remote[WINS * WIN_PAGES];
	struct reads *r = reads_here();
	unsigned int n = 0;
	ssize_t got;

	if (!r)
		return false;
	/* (The program ran since the last walk: nothing read then holds.) */
	for (unsigned int k = 0; k < WINS; k++)
		r->win[k].lo = r->win[k].hi = 0;
	r->used = r->nused = r->next = 0;
	if (!r->nplan || __atomic_load_n(&gs_py_uncached, __ATOMIC_RELAXED))
		return true;
	/* The last walk's windows again, by one call: window k's pages from its top down. */
	for (unsigned int k = 0; k < r->nplan; k++)
		for (__u64 p = r->plan_hi[k]; p > r->plan_lo[k]; p -= PAGE, n++) {
			local[n].iov_base = r->win[k].buf + sizeof(r->win[k].buf) -
					    (size_t)(r->plan_hi[k] - p) - PAGE;
			local[n].iov_len = PAGE;
			remote[n].iov_base = (void *)(unsigned long)(p - PAGE);
			remote[n].iov_len = PAGE;
		}
	__atomic_fetch_add(&reads_by_call, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&replayed, 1, __ATOMIC_RELAXED);
	got = process_vm_readv(pid, local, n, remote, n, 0);
	/* (What came: whole windows, then maybe the top pages of one.) */
	for (unsigned int k = 0; k < r->nplan && got >= (ssize_t)PAGE; k++) {
		__u64 size = r->plan_hi[k] - r->plan_lo[k];
		__u64 have = (__u64)got < size ? (__u64)got / PAGE * PAGE : size;

		r->win[k].hi = r->plan_hi[k];
		r->win[k].lo = r->plan_hi[k] - have;
		got -= (ssize_t)have;
	}
	return true;
}

bool py_walk_read(void *dst, __u64 addr, size_t n)
{
	struct reads *r = tl_r;
	__u64 top = (addr + n + PAGE - 1) & ~(PAGE - 1);
	struct window *w;
	unsigned int k;

	if (py_in_place(dst, addr, n))
		return true;
	if (!r)
		return py_rd(dst, addr, n);
	for (k = 0; k < WINS; k++) {
		w = &r->win[k];
		if (addr >= w->lo && addr + n <= w->hi && addr + n > addr) {
			memcpy(dst, w->buf + sizeof(w->buf) - (w->hi - addr), n);
			use(r, k);
			return true;
		}
	}
	if (n > PAGE || top < PAGE * WIN_PAGES)
		return py_rd(dst, addr, n);
	/* An empty window, else one not read from yet in this walk, else the next in turn. */
	for (k = 0; k < WINS && r->win[k].hi > r->win[k].lo; k++)
		;
	for (unsigned int j = 0; k == WINS && j < WINS; j++)
		if (!(r->used & (1u << j)))
			k = j;
	if (k == WINS)
		k = r->next++ % WINS;
	w = &r->win[k];
	if (!fill(w, top - WIN_PAGES * PAGE, top) || addr < w->lo)
		return py_rd(dst, addr, n);
	use(r, k);
	memcpy(dst, w->buf + sizeof(w->buf) - (w->hi - addr), n);
	return true;
}

void py_walk_end(void)
{
	struct reads *r = tl_r;

	if (!r)
		return;
	r->nplan = 0;
	for (unsigned int i = 0; i < r->nused; i++) {
		const struct window *w = &r->win[r->order[i]];

		if (w->hi > w->lo) {
			r->plan_lo[r->nplan] = w->lo;
			r->plan_hi[r->nplan++] = w->hi;
		}
	}
}

void py_reads_counts(__u64 *in_place, __u64 *by_call, __u64 *walks_replayed)
{
	*in_place = __atomic_load_n(&reads_in_place, __ATOMIC_RELAXED);
	*by_call = __atomic_load_n(&reads_by_call, __ATOMIC_RELAXED);
	*walks_replayed = __atomic_load_n(&replayed, __ATOMIC_RELAXED);
}
