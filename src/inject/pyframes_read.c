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
 * walk, only the pages it read from: what a call costs grows with its pages (on this
 * project's CPU machine 2 us a call and 0.4 us a page). Per thread, allocated at its first
 * walk (96 KiB), freed as the thread ends.
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
	__u64 base;	    /* its first page's address */
	unsigned int valid; /* pages read into buf (bit i: base + i pages, at buf + i pages) */
	unsigned int used;  /* pages read from in this walk */
	unsigned char buf[WIN_PAGES * PAGE];
};

struct reads {
	struct window win[WINS];
	unsigned int order[WINS]; /* windows in the order first read from in this walk */
	unsigned int listed;	  /* (bits: those in order) */
	unsigned int nused, next;
	__u64 plan_base[WINS]; /* the last walk's windows, in that order: their pages read from */
	unsigned int plan_pages[WINS], nplan;
	__u64 seen[PY_SEEN]; /* py_walk_seen's */
	pid_t seen_pid;
};

bool gs_py_uncached GS_HIDDEN; /* (ab.c's "+pylist") */
static pid_t pid;
static __u64 reads_by_call, reads_in_place, replayed, pages_read;
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

__u64 *py_walk_seen(void)
{
	struct reads *r = tl_r;

	if (!r || __atomic_load_n(&gs_memo_off, __ATOMIC_RELAXED))
		return NULL;
	if (r->seen_pid != pid) { /* (a forked child names its frames again) */
		memset(r->seen, 0, sizeof(r->seen));
		r->seen_pid = pid;
	}
	return r->seen;
}

/* Pages [i0, i1] of window k read from in this walk. */
static void use(struct reads *r, unsigned int k, unsigned int i0, unsigned int i1)
{
	if (!(r->listed & (1u << k))) {
		r->listed |= 1u << k;
		r->order[r->nused++] = k;
	}
	for (unsigned int i = i0; i <= i1; i++)
		r->win[k].used |= 1u << i;
}

/* The iovecs (from local[0], remote[0] on) that read the pages of window w that pages says
 * (bits), from the top down, into its buffer; their count. */
static unsigned int iov_pages(struct window *w, unsigned int pages, struct iovec *local,
			      struct iovec *remote)
{
	unsigned int n = 0;

	for (int i = WIN_PAGES - 1; i >= 0; i--)
		if (pages & (1u << i)) {
			local[n].iov_base = w->buf + (size_t)i * PAGE;
			local[n].iov_len = PAGE;
			remote[n].iov_base = (void *)(unsigned long)(w->base + (__u64)i * PAGE);
			remote[n++].iov_len = PAGE;
		}
	return n;
}

/* What a call that read got bytes of the iovecs of windows ws[0..nw) (each's pages[] from
 * the top down) made valid. */
static void took(struct window *const *ws, const unsigned int *pages, unsigned int nw, ssize_t got)
{
	for (unsigned int k = 0; k < nw; k++)
		for (int i = WIN_PAGES - 1; i >= 0 && got >= (ssize_t)PAGE; i--)
			if (pages[k] & (1u << i)) {
				ws[k]->valid |= 1u << i;
				got -= (ssize_t)PAGE;
			}
}

static ssize_t readv_pages(struct iovec *local, struct iovec *remote, unsigned int n)
{
	__atomic_fetch_add(&reads_by_call, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pages_read, n, __ATOMIC_RELAXED);
	return process_vm_readv(pid, local, n, remote, n, 0);
}

bool py_walk_begin(void)
{
	struct iovec local[WINS * WIN_PAGES], remote[WINS * WIN_PAGES];
	struct window *ws[WINS];
	struct reads *r = reads_here();
	unsigned int n = 0;

	if (!r)
		return false;
	/* (The program ran since the last walk: nothing read then holds.) */
	for (unsigned int k = 0; k < WINS; k++)
		r->win[k].valid = r->win[k].used = 0;
	r->nused = r->next = r->listed = 0;
	if (!r->nplan || __atomic_load_n(&gs_py_uncached, __ATOMIC_RELAXED))
		return true;
	/* The pages the last walk read from, again, by one call. */
	for (unsigned int k = 0; k < r->nplan; k++) {
		ws[k] = &r->win[k];
		ws[k]->base = r->plan_base[k];
		n += iov_pages(ws[k], r->plan_pages[k], local + n, remote + n);
	}
	__atomic_fetch_add(&replayed, 1, __ATOMIC_RELAXED);
	took(ws, r->plan_pages, r->nplan, readv_pages(local, remote, n));
	return true;
}

/* Where window w has [addr, addr + n) read: its pages i0..i1 (false: not all of them). */
static bool has(const struct window *w, __u64 addr, size_t n, unsigned int *i0, unsigned int *i1)
{
	if (!w->valid || addr < w->base || addr + n <= addr ||
	    addr + n > w->base + WIN_PAGES * PAGE)
		return false;
	*i0 = (unsigned int)((addr - w->base) / PAGE);
	*i1 = (unsigned int)((addr + n - 1 - w->base) / PAGE);
	for (unsigned int i = *i0; i <= *i1; i++)
		if (!(w->valid & (1u << i)))
			return false;
	return true;
}

bool py_walk_read(void *dst, __u64 addr, size_t n)
{
	struct iovec local[WIN_PAGES], remote[WIN_PAGES];
	struct reads *r = tl_r;
	__u64 top = (addr + n + PAGE - 1) & ~(PAGE - 1);
	unsigned int k, i0, i1, all = (1u << WIN_PAGES) - 1;
	struct window *w;

	if (py_in_place(dst, addr, n))
		return true;
	if (!r)
		return py_rd(dst, addr, n);
	for (k = 0; k < WINS; k++)
		if (has(&r->win[k], addr, n, &i0, &i1))
			goto found;
	if (n > PAGE || top < PAGE * WIN_PAGES)
		return py_rd(dst, addr, n);
	/* An empty window, else one not read from yet in this walk, else the next in turn:
	 * the pages at and below addr. */
	for (k = 0; k < WINS && r->win[k].valid; k++)
		;
	for (unsigned int j = 0; k == WINS && j < WINS; j++)
		if (!r->win[j].used)
			k = j;
	if (k == WINS)
		k = r->next++ % WINS;
	w = &r->win[k];
	w->used = 0; /* (a window taken again in this walk: its pages no longer read from) */
	w->base = top - WIN_PAGES * PAGE;
	w->valid = 0;
	took(&w, &all, 1, readv_pages(local, remote, iov_pages(w, all, local, remote)));
	if (!has(w, addr, n, &i0, &i1))
		return py_rd(dst, addr, n);
found:
	w = &r->win[k];
	memcpy(dst, w->buf + (addr - w->base), n);
	use(r, k, i0, i1);
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

		if (w->used) {
			r->plan_base[r->nplan] = w->base;
			r->plan_pages[r->nplan++] = w->used;
		}
	}
}

void py_reads_counts(__u64 *in_place, __u64 *by_call, __u64 *pages, __u64 *walks_replayed)
{
	*pages = __atomic_load_n(&pages_read, __ATOMIC_RELAXED);
	*in_place = __atomic_load_n(&reads_in_place, __ATOMIC_RELAXED);
	*by_call = __atomic_load_n(&reads_by_call, __ATOMIC_RELAXED);
	*walks_replayed = __atomic_load_n(&replayed, __ATOMIC_RELAXED);
}
