// SPDX-License-Identifier: MIT
/*
 * Python frames in the in-process plane: when a stack is taken on a thread that runs
 * Python, the interpreter's frames of that thread are read and put in place of the
 * interpreter's own native frames (_PyEval_EvalFrameDefault), as (code object, instruction
 * offset) pseudo-addresses (GS_PYFRAME, event.h). Each new one is named here, once per
 * process, from the code object (qualified name, file, the line of that instruction from
 * the location table) in a symbol record, so that a recording needs no process to name it.
 *
 * Never in the way: every read of the interpreter's memory goes through process_vm_readv,
 * so a wrong layout or a torn frame reads an error, never a fault (but for frames in the
 * calling thread's own stack, between its stack pointer and the stack's top, all mapped:
 * read in place, see own_stack); a version with no known
 * layout is said once (GS_EV_PYTHON) and its stacks stay native. The thread's state comes
 * from PyGILState_GetThisThreadState (thread-specific data, no lock, no GIL needed). Only
 * the calling thread's own frames are read: they cannot change under it.
 *
 * Layouts: core/pylayout.h (3.13 and later: read from the process's _Py_DebugOffsets,
 * core/pylayout.c); names: core/pyname.c (shared with gpuscope).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "inject/inject.h"
#include "core/pyname.h"

#define MAX_PY	  64	 /* Python frames read, at most */
#define NAMED_CAP 65536u /* pseudo-addresses named per process, at most */

static struct {
	int state; /* 0 not looked, 1 on, -1 off (no Python, no layout, reads refused) */
	const struct py_layout *l;
	struct py_layout read; /* 3.13 and later: the process's own (_Py_DebugOffsets) */
	void *(*this_thread)(void);
	__u64 runtime;	 /* _PyRuntime, where the thread list starts (0: unknown) */
	__u32 last_tid;	 /* the thread whose launch showed its own frames last (atomic) */
	__u32 found_tid; /* state_of's last: the thread, its state (atomic) */
	__u64 found_ts;
	__u64 eval_lo, eval_hi; /* _PyEval_EvalFrameDefault's code, if known */
	__u64 *named;		/* pseudo-addresses named (open addressing, 0 empty) */
	pid_t pid;
} Y;

static __u64 reads_by_call;
bool gs_py_uncached GS_HIDDEN; /* (ab.c's "+pylist") */

static bool rd(void *dst, __u64 addr, size_t n)
{
	__atomic_fetch_add(&reads_by_call, 1, __ATOMIC_RELAXED);
	return py_read_pid((void *)(uintptr_t)Y.pid, dst, addr, n);
}

static bool rd64(__u64 addr, __u64 *v)
{
	return rd(v, addr, 8);
}

/* "3.11.2 (main, ...)" from Py_GetVersion, or Py_Version where there is one. */
static unsigned int version_hex(void)
{
	const unsigned long *v = gs_real_sym(RTLD_DEFAULT, "Py_Version");
	const char *(*get)(void) =
		(const char *(*)(void))gs_real_sym(RTLD_DEFAULT, "Py_GetVersion");
	unsigned long hex = 0;
	const char *s;
	char *end;
	long major, minor, micro = 0;

	if (v && rd(&hex, (__u64)(unsigned long)v, sizeof(hex)))
		return (unsigned int)hex;
	if (!get || !(s = get()))
		return 0;
	major = strtol(s, &end, 10);
	if (*end != '.')
		return 0;
	minor = strtol(end + 1, &end, 10);
	if (*end == '.')
		micro = strtol(end + 1, &end, 10);
	if (major < 0 || major > 255 || minor < 0 || minor > 255 || micro < 0 || micro > 255)
		return 0;
	return (unsigned int)(major << 24 | minor << 16 | micro << 8);
}

static void announce(unsigned int version, int status)
{
	struct gs_ev_python *e = gs_emit_reserve(sizeof(*e), GS_EV_PYTHON);

	if (!e)
		return;
	gs_fill_hdr(&e->h, GS_EV_PYTHON, sizeof(*e), gs_clock());
	e->version = version;
	e->status = (__u16)status;
	e->mixed = Y.eval_hi != 0;
	e->pad = 0;
	gs_emit_commit(e);
}

static void look(void)
{
	unsigned int version;
	void *eval;
	Dl_info info;
	const ElfW(Sym) *sym = NULL;

	Y.state = -1;
	Y.pid = getpid();
	if (getenv("GPUSCOPE_NO_PYFRAMES")) /* (to measure what the frames cost) */
		return;
	Y.this_thread = (void *(*)(void))gs_real_sym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	if (!Y.this_thread || !(version = version_hex()))
		return; /* no Python here */
	Y.runtime = (__u64)(uintptr_t)gs_real_sym(RTLD_DEFAULT, "_PyRuntime");
	if (version >> 24 == 3 && !(Y.l = py_layout_static((version >> 16) & 0xff)) &&
	    py_layout_debug(py_read_pid, (void *)(uintptr_t)Y.pid, Y.runtime,
			    (version >> 16) & 0xff, &Y.read))
		Y.l = &Y.read;
	eval = gs_real_sym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
	if (eval && dladdr1(eval, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
		Y.eval_lo = (__u64)(unsigned long)eval;
		Y.eval_hi = Y.eval_lo + sym->st_size;
	}
	if (!Y.l) {
		announce(version, GS_PY_UNSUPPORTED);
		return;
	}
	Y.named = calloc(NAMED_CAP, sizeof(*Y.named));
	if (!Y.named) {
		announce(version, GS_PY_NO_STATE);
		return;
	}
	Y.state = 1;
	announce(version, GS_PY_FRAMES);
}

/* A pseudo-address's symbol record. */
static void name_text(__u64 pseudo, const char *text)
{
	struct gs_ev_symbol *e;
	size_t len;
	__u32 size;

	len = strlen(text);
	size = (__u32)(offsetof(struct gs_ev_symbol, name) + len + 1);
	e = gs_emit_reserve(size, GS_EV_SYMBOL);
	if (!e)
		return;
	gs_fill_hdr(&e->h, GS_EV_SYMBOL, size, gs_clock());
	e->addr = pseudo;
	e->len = (__u16)len;
	memset(e->pad, 0, sizeof(e->pad));
	memcpy(e->name, text, len + 1);
	gs_emit_commit(e);
}

/* The symbol record of a Python frame: "QUALNAME (FILE:LINE)". */
static void name_frame(__u64 pseudo, __u64 code, __u64 off)
{
	struct py_reader r = { Y.l, py_read_pid, (void *)(uintptr_t)Y.pid };
	char text[GS_SYM_MAX];

	if (py_frame_name(&r, code, off, text, sizeof(text)))
		name_text(pseudo, text);
}

/* Whether this pseudo-address is new to the process (then it is named). */
static bool first_seen(__u64 pseudo)
{
	__u64 h = (pseudo * 0x9e3779b97f4a7c15ULL) >> 40;

	for (unsigned int probe = 0; probe < 64; probe++) {
		__u64 *slot = &Y.named[(h + probe) & (NAMED_CAP - 1)], empty = 0;

		if (__atomic_load_n(slot, __ATOMIC_RELAXED) == pseudo)
			return false;
		if (__atomic_compare_exchange_n(slot, &empty, pseudo, false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return true;
		if (empty == pseudo)
			return false;
	}
	return false; /* (full: left unnamed) */
}

/* ---- the walk --------------------------------------------------------------------------- */

/*
 * What a walk reads, a window at a time: the pages at and below a frame, read by one call
 * in descending order (the call stops at the first page it cannot read, keeping those
 * before it). 3.11 and later keep a thread's frames in its data stack, a caller below its
 * callee: a window of a few pages holds dozens of frames, where a read per frame cost
 * ~0.9 us each (measured on an H200, GPT-2's 40-deep stacks: 34 us a walk). Two windows,
 * the one used least lately refilled: 3.12 puts each evaluation's entry frame on the C
 * stack, between its callers' frames in the data stack. Per thread, allocated at its
 * first walk.
 */
#define WIN_PAGES 4
#define PAGE	  4096ULL

struct window {
	__u64 lo, hi; /* what buf holds: [lo, hi), at its end */
	unsigned char buf[WIN_PAGES * PAGE];
};

static __thread struct window *tl_win __attribute__((tls_model("initial-exec")));
static __thread unsigned int tl_recent __attribute__((tls_model("initial-exec")));

static __u64 reads_in_place; /* (GPUSCOPE_INJECT_DEBUG; by a call: reads_by_call) */

/* Whether [addr, addr + n) lies in this thread's stack between here and its top: its
 * callers' frames, mapped whatever they hold, so read in place. 3.12 and later keep each
 * evaluation's entry frame on the C stack, among the callers of the launch, and a walk's
 * windows went back and forth between it and the data stack (on an H200 a PyTorch stack's
 * walk took 30-40 us; on this project's CPU machine, 3.11, process_vm_readv was ~40% of a
 * loop taking a stack at every launch). Not on a signal's own stack. */
static bool own_stack(__u64 addr, size_t n)
{
	volatile char here = 0;
	__u64 sp = (__u64)(uintptr_t)&here;

	return addr > sp && gs_own_stack(sp, addr, n);
}

/* A read of this thread's callers' frames, in place (false: not there). */
static bool in_place(void *dst, __u64 addr, size_t n)
{
	if (!own_stack(addr, n))
		return false;
	memcpy(dst, (const void *)(uintptr_t)addr, n);
	__atomic_fetch_add(&reads_in_place, 1, __ATOMIC_RELAXED);
	return true;
}

static bool win_read(struct window *ws, void *dst, __u64 addr, size_t n)
{
	struct iovec local[WIN_PAGES], remote[WIN_PAGES];
	__u64 top = (addr + n + PAGE - 1) & ~(PAGE - 1);
	struct window *w;
	ssize_t got;

	if (in_place(dst, addr, n))
		return true;
	for (unsigned int k = 0; k < 2; k++) {
		w = &ws[k];
		if (addr >= w->lo && addr + n <= w->hi && addr + n > addr) {
			memcpy(dst, w->buf + sizeof(w->buf) - (w->hi - addr), n);
			tl_recent = k;
			return true;
		}
	}
	tl_recent ^= 1;
	w = &ws[tl_recent];
	if (n > PAGE || top < PAGE * WIN_PAGES)
		return rd(dst, addr, n);
	/* Pages top-1, top-2, ... into the buffer's end, start, in that order. */
	for (int i = 0; i < WIN_PAGES; i++) {
		local[i].iov_base = w->buf + (WIN_PAGES - 1 - i) * PAGE;
		local[i].iov_len = PAGE;
		remote[i].iov_base = (void *)(unsigned long)(top - (__u64)(i + 1) * PAGE);
		remote[i].iov_len = PAGE;
	}
	__atomic_fetch_add(&reads_by_call, 1, __ATOMIC_RELAXED);
	got = process_vm_readv(Y.pid, local, WIN_PAGES, remote, WIN_PAGES, 0);
	if (got <= 0 || got % PAGE) {
		w->lo = w->hi = 0;
		return rd(dst, addr, n);
	}
	w->hi = top;
	w->lo = top - (__u64)got;
	if (addr < w->lo)
		return rd(dst, addr, n);
	memcpy(dst, w->buf + sizeof(w->buf) - (w->hi - addr), n);
	return true;
}

/* The state of thread tid, from the interpreter's thread list (its first 64); 0 if not
 * there, or the list's offsets are not known (3.10). The last one found is kept, and taken
 * again while it still says it is tid's: an autograd thread borrows the main thread's frames
 * at each of its stacks, and the list's walk cost two reads a thread before it. */
static __u64 state_of(__u32 tid)
{
	const struct py_layout *l = Y.l;
	__u64 ts = __atomic_load_n(&Y.found_ts, __ATOMIC_RELAXED);
	__s32 id;

	if (!tid || !Y.runtime || l->rt_interp_head < 0)
		return 0;
	if (ts && !gs_py_uncached && __atomic_load_n(&Y.found_tid, __ATOMIC_RELAXED) == tid &&
	    rd(&id, ts + (__u64)l->ts_tid, sizeof(id)) && (__u32)id == tid)
		return ts;
	if (!rd64(Y.runtime + (__u64)l->rt_interp_head, &ts) ||
	    !rd64(ts + (__u64)l->interp_threads, &ts))
		return 0;
	for (int i = 0; i < 64 && ts; i++) {
		if (!rd(&id, ts + (__u64)l->ts_tid, sizeof(id)))
			return 0;
		if ((__u32)id == tid) {
			__atomic_store_n(&Y.found_tid, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&Y.found_ts, ts, __ATOMIC_RELAXED);
			__atomic_store_n(&Y.found_tid, tid, __ATOMIC_RELAXED);
			return ts;
		}
		if (!rd64(ts + (__u64)l->ts_next, &ts))
			return 0;
	}
	return 0;
}

/* The current frame of thread state ts (0: none, or unreadable). */
static __u64 current(__u64 ts)
{
	const struct py_layout *l = Y.l;
	__u64 f;

	if (!ts || !rd64(ts + (__u64)l->ts_frame, &f))
		return 0;
	/* (3.11 and 3.12: the state's C frame, in its thread's stack.) */
	if (f && l->cframe_cur >= 0) {
		__u64 at = f + (__u64)l->cframe_cur;

		if ((gs_py_uncached || !in_place(&f, at, 8)) && !rd64(at, &f))
			return 0;
	}
	return f;
}

/* This thread's Python frames, innermost first, as pseudo-addresses; entry[i]: frame i is
 * the outermost of one evaluation (the native frame of the interpreter that ran it). A
 * thread running no Python (no state, or one with no frame: PyTorch's autograd engine
 * threads keep a state they made once) takes those of the thread whose launch showed its
 * own last, or if that one is gone of the main thread (*borrowed; read as they are now:
 * that thread waits, in loss.backward(), for the work this one does). */
static int walk(__u64 *out, bool *entry, bool launch, bool *borrowed)
{
	const struct py_layout *l = Y.l;
	__u64 f = current((__u64)(unsigned long)Y.this_thread());
	__u32 self = gs_self_tid(), last = __atomic_load_n(&Y.last_tid, __ATOMIC_RELAXED);
	int n = 0;

	*borrowed = false;
	if (f && launch && last != self)
		__atomic_store_n(&Y.last_tid, self, __ATOMIC_RELAXED);
	/* (That thread gone: the process's main thread.) */
	if (!f && ((last != self && (f = current(state_of(last)))) ||
		   (self != (__u32)Y.pid && (f = current(state_of((__u32)Y.pid))))))
		*borrowed = true;
	if (!f)
		return 0;
	if (!tl_win && !(tl_win = calloc(2, sizeof(*tl_win))))
		return 0;
	/* (The program ran since the last walk: nothing read then holds.) */
	tl_win[0].lo = tl_win[0].hi = tl_win[1].lo = tl_win[1].hi = 0;
	for (int steps = 0; f && n < MAX_PY && steps < 4 * MAX_PY; steps++) {
		unsigned char fr[PY_FRAME_MAX];
		__u64 code, prev, instr, off;

		if (!win_read(tl_win, fr, f, py_frame_bytes(l)))
			break;
		memcpy(&code, fr + l->f_code, 8);
		memcpy(&prev, fr + l->f_prev, 8);
		code = PY_CODE_OF(code);
		if (l->f_owner >= 0 && fr[l->f_owner] >= PY_OWNED_BY_EVAL) {
			/* 3.12 and later: the previous frame ends its evaluation. */
			if (n)
				entry[n - 1] = true;
			f = prev;
			continue;
		}
		if (l->lasti_int) {
			int lasti;

			memcpy(&lasti, fr + l->f_instr, 4);
			off = lasti < 0 ? 0 : (__u64)lasti * 2;
		} else {
			memcpy(&instr, fr + l->f_instr, 8);
			off = instr >= code + (__u64)l->co_code ? instr - code - (__u64)l->co_code
								: 0;
		}
		if (!code)
			break;
		out[n] = GS_PYFRAME(code, off);
		entry[n] = l->minor == 10 || (l->f_entry >= 0 && fr[l->f_entry]);
		if (first_seen(out[n]))
			name_frame(out[n], code, off);
		n++;
		f = prev;
	}
	if (n)
		entry[n - 1] = true;
	return n;
}

/* GPUSCOPE_INJECT_DEBUG: at the 1st, 2nd, 4th, ... walk, how the interpreter's memory was
 * read so far. */
static void debug_reads(void)
{
	static int on = -1;
	static __u64 walks;
	__u64 k;

	if (on < 0)
		on = getenv("GPUSCOPE_INJECT_DEBUG") != NULL;
	k = on ? __atomic_add_fetch(&walks, 1, __ATOMIC_RELAXED) : 0;
	if (k && !(k & (k - 1)))
		fprintf(stderr,
			"gpuscope python: %llu walks: %llu reads in place, %llu by a call\n",
			(unsigned long long)k,
			(unsigned long long)__atomic_load_n(&reads_in_place, __ATOMIC_RELAXED),
			(unsigned long long)__atomic_load_n(&reads_by_call, __ATOMIC_RELAXED));
}

int gs_py_stack(void *const *native, int n, bool launch, __u64 *out, int max)
{
	__u64 py[MAX_PY], ips[GS_STACK_MAX + 8];
	bool entry[MAX_PY], borrowed = false;
	int np = 0;

	if (!Y.state)
		look();
	if (Y.state > 0)
		np = walk(py, entry, launch, &borrowed);
	debug_reads();
	n = n < (int)(sizeof(ips) / sizeof(ips[0])) ? n : (int)(sizeof(ips) / sizeof(ips[0]));
	for (int i = 0; i < n; i++)
		ips[i] = (__u64)(unsigned long)native[i];
	if (borrowed && first_seen(GS_PYFRAME_BORROWED))
		name_text(GS_PYFRAME_BORROWED, PY_BORROWED_NAME);
	return py_mix(ips, n, py, entry, np, borrowed, Y.eval_lo, Y.eval_hi, out, max);
}

void gs_py_after_fork(void)
{
	/* A new process: said again, its frames named again (in its own records). */
	free(Y.named);
	Y.named = NULL;
	Y.l = NULL;
	Y.last_tid = Y.found_tid = 0;
	Y.found_ts = 0;
	Y.eval_lo = Y.eval_hi = 0;
	Y.state = 0;
}
