// SPDX-License-Identifier: MIT
/*
 * The in-process plane's unwinder: a stack's return addresses from the call frame
 * information every library carries (.eh_frame), as glibc's backtrace() finds them, each
 * return address's rule kept once it is worked out. backtrace() goes through libgcc, which
 * for every frame of every stack finds the function's FDE and runs its CFA program from the
 * function's start up to the return address: 40-200 us a PyTorch stack of 72 frames on an
 * H200 guest (the phases' "unwind", bench/results/unwind-2026-11-29.md), for the same few
 * hundred return addresses again and again. Here one seen before costs a lookup in a table
 * and two reads of the stack.
 *
 * Only x86-64's usual rules are kept (core/cfi.h): the CFA at rsp or rbp plus an offset, or
 * read from there (GCC's realigned frames), the return address saved at an offset from it,
 * rbp saved or unchanged. Anything else (a signal's frame, another expression, a CFA in
 * another register, an instruction the parser does not know) gives the whole stack to
 * backtrace(), as before; a return address with no FDE (code a JIT made) ends the stack, as
 * it ends libgcc's. The stack is read only between the stack pointer and this thread's
 * stack's top (gs_own_stack); on another stack (a signal's own) backtrace() takes it.
 * A library unloaded (dlclose: glibc's count of unloads, checked at each stack) empties the
 * table: its addresses may hold another's code.
 *
 * Stacks come tens of milliseconds apart (a rate a thread), and the program's work between
 * evicts the table: a lookup each frame, each in a line and a page of their own, made an
 * unwinding of a PyTorch stack 5-11 us on an H200 guest where the same back to back took
 * 1.3. Each thread keeps its stacks' return addresses and their rules in a row by depth
 * (its memo, MEMO frames, made at its first stack, freed as it ends): a frame whose return
 * address is the memo's at the same depth takes the rule from there, and training steps
 * repeat their stacks. Not across an emptying of the table.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cfi.h"
#include "inject/inject.h"

#define BITS	   13 /* the table: 8,192 return addresses */
#define PROBES	   8
#define LIBGCC_MAX 260
#define UNKEPT	   6
#define MEMO	   128
struct slot {
	__u64 key; /* the return address (0 empty, 1 being written) */
	struct cfi_rule r;
};

/* A thread's last stack: each step's address and its rule, in order (n: up to the deepest
 * written since the table was last emptied). */
struct memo {
	__u64 subs; /* the table's (subs_seen) when they were taken */
	int n;
	__u64 ra[MEMO];
	struct cfi_rule r[MEMO];
};

struct dwarf_eh_bases {
	void *tbase, *dbase, *func;
};

static const void *(*find_fde)(void *pc, struct dwarf_eh_bases *bases);
static struct slot *table;
static __u64 subs_seen; /* glibc's count of unloaded objects when table was last emptied */
static pthread_mutex_t clear_lock = PTHREAD_MUTEX_INITIALIZER;
bool gs_unwind_libgcc GS_HIDDEN; /* (ab.c's "+libgcc": every stack by backtrace()) */
static __u64 by_rules, by_libgcc, worked_out, differed, unkept[UNKEPT], memo_frames;
static bool verifying;	    /* (GPUSCOPE_UNWIND_VERIFY) */
bool gs_memo_off GS_HIDDEN; /* (ab.c's "+nomemo") */
static __thread struct memo *tl_memo __attribute__((tls_model("initial-exec")));
static pthread_key_t memo_key; /* (its destructor frees a thread's memo as it ends) */
static bool memo_key_ok;

/* This thread's stack, [lo, hi) (hi 0: not asked yet; ~0: not known). */
static __thread __u64 tl_stack_lo __attribute__((tls_model("initial-exec")));
static __thread __u64 tl_stack_hi __attribute__((tls_model("initial-exec")));

/* This thread's stack's top (0: not known). */
static __u64 stack_top(__u64 sp)
{
	if (!tl_stack_hi) {
		pthread_attr_t a;
		void *lo;
		size_t size;

		tl_stack_hi = ~0ULL;
		if (!pthread_getattr_np(pthread_self(), &a)) {
			if (!pthread_attr_getstack(&a, &lo, &size) && size) {
				tl_stack_lo = (__u64)(uintptr_t)lo;
				tl_stack_hi = tl_stack_lo + size;
			}
			pthread_attr_destroy(&a);
		}
	}
	return tl_stack_hi != ~0ULL && sp >= tl_stack_lo && sp < tl_stack_hi ? tl_stack_hi : 0;
}

bool gs_own_stack(__u64 sp, __u64 addr, size_t n)
{
	__u64 top = stack_top(sp);

	return top && addr >= sp && addr + n > addr && addr + n <= top;
}

/* GPUSCOPE_INJECT_DEBUG, at exit: how the stacks were unwound. */
static void debug_counts(void)
{
	fprintf(stderr,
		"gpuscope-inject: stacks: %llu by the kept rules (%llu rules worked out, "
		"%llu frames' from the threads' memos), %llu by backtrace()%s\n",
		(unsigned long long)by_rules, (unsigned long long)worked_out,
		(unsigned long long)memo_frames, (unsigned long long)by_libgcc,
		verifying ? "" : " (not verified)");
	if (verifying)
		fprintf(stderr,
			"gpuscope-inject: unwind: %llu of those by the rules not as by "
			"backtrace()\n",
			(unsigned long long)differed);
	for (int i = 0; i < UNKEPT && unkept[i]; i++) {
		Dl_info a = { 0 };

		dladdr((void *)(uintptr_t)unkept[i], &a);
		fprintf(stderr, "gpuscope-inject: unwind: a rule not kept: %s+%#llx (%s)\n",
			a.dli_fname ? a.dli_fname : "?",
			(unsigned long long)(unkept[i] - (__u64)(uintptr_t)a.dli_fbase),
			a.dli_sname ? a.dli_sname : "?");
	}
}

static void memo_free(void *m)
{
	free(m);
	tl_memo = NULL;
}

/* This thread's memo, made at its first stack, valid for the table as it is now (subs); NULL
 * without memory or when not wanted. */
static struct memo *memo_here(__u64 subs)
{
	struct memo *m = tl_memo;

	if (__atomic_load_n(&gs_memo_off, __ATOMIC_RELAXED))
		return NULL;
	if (!m) {
		if (!memo_key_ok || !(m = calloc(1, sizeof(*m))))
			return NULL;
		if (pthread_setspecific(memo_key, m)) {
			free(m);
			return NULL;
		}
		tl_memo = m;
	}
	if (m->subs != subs) {
		m->subs = subs;
		m->n = 0;
	}
	return m;
}

static void init_once(void)
{
	void *warm[4], *gcc;

	backtrace(warm, 4); /* (loads libgcc_s, now and not in a signal handler) */
	gcc = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (gcc)
		find_fde = (const void *(*)(void *, struct dwarf_eh_bases *))gs_real_sym(
			gcc, "_Unwind_Find_FDE");
	if (find_fde)
		__atomic_store_n(&table, calloc(1u << BITS, sizeof(struct slot)), __ATOMIC_RELEASE);
	verifying = getenv("GPUSCOPE_UNWIND_VERIFY") != NULL;
	memo_key_ok = pthread_key_create(&memo_key, memo_free) == 0;
	if (getenv("GPUSCOPE_INJECT_DEBUG") || verifying)
		atexit(debug_counts);
}

void gs_unwind_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, init_once);
}

/* The rule of the frame that returns to ra (its call's state: ra - 1's). 0 it has one, 1 no
 * FDE (the stack ends), -1 a rule this unwinder does not keep. */
static int work_out(__u64 ra, struct cfi_rule *r)
{
	struct dwarf_eh_bases b;
	const __u8 *fde = find_fde((void *)(uintptr_t)(ra - 1), &b);

	if (!fde)
		return 1;
	return cfi_rule(fde, 0, UINTPTR_MAX, (__u64)(uintptr_t)b.func, ra, r);
}

/* ---- the table ------------------------------------------------------------------------ */

static struct slot *slot_of(__u64 ra, int i)
{
	return &table[(((ra * 0x9E3779B97F4A7C15ULL) >> (64 - BITS)) + (__u64)i) &
		      ((1u << BITS) - 1)];
}

static int rule_of(__u64 ra, struct cfi_rule *r)
{
	int got;

	for (int i = 0; i < PROBES; i++) {
		struct slot *s = slot_of(ra, i);
		__u64 k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);

		if (k == ra) {
			*r = s->r;
			return 0;
		}
		if (!k)
			break;
	}
	got = work_out(ra, r);
	if (got)
		return got;
	__atomic_fetch_add(&worked_out, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < PROBES; i++) {
		struct slot *s = slot_of(ra, i);
		__u64 none = 0;

		if (__atomic_compare_exchange_n(&s->key, &none, 1, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			s->r = *r;
			__atomic_store_n(&s->key, ra, __ATOMIC_RELEASE);
			break;
		}
		if (none == ra)
			break;
	}
	return 0;
}

/* glibc's count of objects unloaded: the first object's report has it. */
static int subs_cb(struct dl_phdr_info *info, size_t size, void *out)
{
	if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
		return -1;
	*(__u64 *)out = info->dlpi_subs;
	return 1;
}

/* A library unloaded since the table was filled: emptied (false: it could not tell); *now:
 * the count it is for. */
static bool table_current(__u64 *now)
{
	__u64 subs = 0;

	if (dl_iterate_phdr(subs_cb, &subs) != 1)
		return false;
	*now = subs;
	if (subs == __atomic_load_n(&subs_seen, __ATOMIC_ACQUIRE))
		return true;
	/* (Another thread may be reading or writing it meanwhile: a rule it reads half cleared
	 * reads the stack within its bounds still, and the next stack is right.) */
	pthread_mutex_lock(&clear_lock);
	if (subs != subs_seen) {
		for (unsigned int i = 0; i < 1u << BITS; i++)
			__atomic_store_n(&table[i].key, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&subs_seen, subs, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&clear_lock);
	return true;
}

/* (GPUSCOPE_INJECT_DEBUG) The first few return addresses whose rules are not kept. */
static void unkept_at(__u64 ra)
{
	for (int i = 0; i < UNKEPT; i++) {
		__u64 none = 0;

		if (__atomic_compare_exchange_n(&unkept[i], &none, ra, false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED) ||
		    none == ra)
			return;
	}
}

/* The frames by the rules (-1: one this unwinder does not keep, or the stack is not this
 * thread's own). */
static int by_the_rules(__u64 ip, __u64 sp, __u64 rbp, void **out, int max, struct memo *m)
{
	__u64 top = stack_top(sp);
	int n = 0, step = 0, was = m ? m->n : 0, hits = 0;

	if (!top)
		return -1;
	while (n < max) {
		struct cfi_rule r;
		__u64 cfa, ra, at_ra, at_rbp;
		int got;

		if (step < was && m->ra[step] == ip) {
			r = m->r[step];
			got = 0;
			hits++;
		} else {
			got = rule_of(ip, &r);
		}
		if (m && step < MEMO && !got) {
			m->ra[step] = ip;
			m->r[step] = r;
		}
		step++;

		if (got > 0 || (!got && r.end))
			break;
		if (got < 0) {
			unkept_at(ip);
			return -1;
		}
		cfa = (r.cfa_rbp ? rbp : sp) + (__u64)(__s64)r.cfa_off;
		/* (Anything outside the stack: its end, as far as it can be read.) */
		if (r.cfa_deref && (cfa < sp || cfa > top - 8))
			break;
		if (r.cfa_deref)
			memcpy(&cfa, (const void *)(uintptr_t)cfa, 8);
		at_ra = cfa + (__u64)(__s64)r.ra_off;
		at_rbp = r.rbp_saved == CFI_AT_CFA   ? cfa + (__u64)(__s64)r.rbp_off
			 : r.rbp_saved == CFI_AT_RBP ? rbp + (__u64)(__s64)r.rbp_off
						     : at_ra;
		if (cfa <= sp || cfa > top || at_ra < sp || at_ra > top - 8 || at_rbp < sp ||
		    at_rbp > top - 8)
			break;
		memcpy(&ra, (const void *)(uintptr_t)at_ra, 8);
		if (r.rbp_saved != CFI_SAME)
			memcpy(&rbp, (const void *)(uintptr_t)at_rbp, 8);
		if (!ra)
			break;
		out[n++] = (void *)(uintptr_t)ra;
		ip = ra;
		sp = cfa;
	}
	/* (Every entry up to the highest written holds an address and its rule, of this stack
	 * or an earlier one: either is right.) */
	if (m && step > was)
		m->n = step < MEMO ? step : MEMO;
	if (hits)
		__atomic_fetch_add(&memo_frames, (__u64)hits, __ATOMIC_RELAXED);
	return n;
}

/* The frames by backtrace(), from the one that returns to ret (this library's unwinding
 * caller's return address) on. */
__attribute__((noinline)) static int by_libgcc_of(void **out, int max, void *ret)
{
	void *all[LIBGCC_MAX];
	int n = backtrace(all, max < LIBGCC_MAX - 3 ? max + 3 : LIBGCC_MAX), skip = 0;

	/* (Before it: this function's and gs_unwind's returns, and under ASan its
	 * interceptor's.) */
	while (skip < 4 && skip < n && all[skip] != ret)
		skip++;
	if (skip == 4 || skip == n)
		skip = 2;
	n = n - skip < max ? n - skip : max;
	if (n <= 0)
		return 0;
	memcpy(out, all + skip, (size_t)n * sizeof(*out));
	return n;
}

/* GPUSCOPE_UNWIND_VERIFY: a stack by the rules against backtrace()'s (counted; the first
 * few that differ said, frame by frame). */
static void verify(void *const *out, int n, int max, void *ret)
{
	void *ref[LIBGCC_MAX];
	int m = by_libgcc_of(ref, max, ret), k = 0;
	__u64 nth;

	while (k < n && k < m && out[k] == ref[k])
		k++;
	if (k == n && n == m)
		return;
	nth = __atomic_add_fetch(&differed, 1, __ATOMIC_RELAXED);
	if (nth > 3)
		return;
	fprintf(stderr, "gpuscope-inject: unwind: %d frames, backtrace() %d; first apart: %d\n", n,
		m, k);
	for (int i = k; i < k + 4 && (i < n || i < m); i++) {
		Dl_info a = { 0 }, b = { 0 };

		if (i < n)
			dladdr(out[i], &a);
		if (i < m)
			dladdr(ref[i], &b);
		fprintf(stderr, "  %d: %p %s | %p %s\n", i, i < n ? out[i] : NULL,
			a.dli_sname ? a.dli_sname : "?", i < m ? ref[i] : NULL,
			b.dli_sname ? b.dli_sname : "?");
	}
}

__attribute__((noinline)) int gs_unwind(void **out, int max)
{
	__u64 ip, sp, rbp, subs = 0;
	int n = -1;

	/* (This function's own state here: its rule is looked up as a return address's, at the
	 * next instruction, its row the same as this one's.) */
	__asm__ volatile("lea 1f(%%rip), %0\n\t"
			 "mov %%rsp, %1\n\t"
			 "mov %%rbp, %2\n"
			 "1:"
			 : "=r"(ip), "=r"(sp), "=r"(rbp));
	if (table && !__atomic_load_n(&gs_unwind_libgcc, __ATOMIC_RELAXED) && max > 0 &&
	    table_current(&subs))
		n = by_the_rules(ip, sp, rbp, out, max, memo_here(subs));
	if (n >= 0) {
		__atomic_fetch_add(&by_rules, 1, __ATOMIC_RELAXED);
		if (verifying)
			verify(out, n, max, __builtin_return_address(0));
		return n;
	}
	__atomic_fetch_add(&by_libgcc, 1, __ATOMIC_RELAXED);
	return by_libgcc_of(out, max, __builtin_return_address(0));
}

void gs_unwind_counts(__u64 *rules, __u64 *libgcc, __u64 *rules_worked_out, __u64 *from_memo)
{
	*from_memo = __atomic_load_n(&memo_frames, __ATOMIC_RELAXED);
	*rules = __atomic_load_n(&by_rules, __ATOMIC_RELAXED);
	*libgcc = __atomic_load_n(&by_libgcc, __ATOMIC_RELAXED);
	*rules_worked_out = __atomic_load_n(&worked_out, __ATOMIC_RELAXED);
}
