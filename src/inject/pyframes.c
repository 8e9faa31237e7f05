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
 * read in place; pyframes_read.c); a version with no known
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
#include "inject/pyframes_int.h"

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

/* A walk's read of 8 bytes (pyframes_read.c's windows). */
static bool rd64(__u64 addr, __u64 *v)
{
	return py_walk_read(v, addr, 8);
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

	if (v && py_rd(&hex, (__u64)(unsigned long)v, sizeof(hex)))
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
	py_reads_init(Y.pid);
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
	    py_walk_read(&id, ts + (__u64)l->ts_tid, sizeof(id)) && (__u32)id == tid)
		return ts;
	if (!rd64(Y.runtime + (__u64)l->rt_interp_head, &ts) ||
	    !rd64(ts + (__u64)l->interp_threads, &ts))
		return 0;
	for (int i = 0; i < 64 && ts; i++) {
		if (!py_walk_read(&id, ts + (__u64)l->ts_tid, sizeof(id)))
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

		if ((gs_py_uncached || !py_in_place(&f, at, 8)) && !rd64(at, &f))
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
	__u64 f = current((__u64)(unsigned long)Y.this_thread()), *seen = py_walk_seen();
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
	for (int steps = 0; f && n < MAX_PY && steps < 4 * MAX_PY; steps++) {
		unsigned char fr[PY_FRAME_MAX];
		__u64 code, prev, instr, off;

		if (!py_walk_read(fr, f, py_frame_bytes(l)))
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
		if (!(seen && n < PY_SEEN && seen[n] == out[n]) && first_seen(out[n]))
			name_frame(out[n], code, off);
		if (seen && n < PY_SEEN)
			seen[n] = out[n];
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
	__u64 k, here, calls, pages, replayed;

	if (on < 0)
		on = getenv("GPUSCOPE_INJECT_DEBUG") != NULL;
	k = on ? __atomic_add_fetch(&walks, 1, __ATOMIC_RELAXED) : 0;
	if (!k || (k & (k - 1)))
		return;
	py_reads_counts(&here, &calls, &pages, &replayed);
	fprintf(stderr,
		"gpuscope python: %llu walks: %llu reads in place, %llu by a call (%llu pages in "
		"windows; %llu walks begun by the last one's)\n",
		(unsigned long long)k, (unsigned long long)here, (unsigned long long)calls,
		(unsigned long long)pages, (unsigned long long)replayed);
}

int gs_py_stack(void *const *native, int n, bool launch, __u64 *out, int max)
{
	__u64 py[MAX_PY], ips[GS_STACK_MAX + 8], ph;
	bool entry[MAX_PY], borrowed = false, begun;
	int np = 0;

	if (!Y.state)
		look();
	ph = gs_phase_t0();
	begun = Y.state > 0 && py_walk_begin();
	gs_phase_add(GS_PH_PYBEGIN, ph);
	if (begun) {
		np = walk(py, entry, launch, &borrowed);
		py_walk_end();
	}
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
