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
 * so a wrong layout or a torn frame reads an error, never a fault; a version with no known
 * layout is said once (GS_EV_PYTHON) and its stacks stay native. The thread's state comes
 * from PyGILState_GetThisThreadState (thread-specific data, no lock, no GIL needed). Only
 * the calling thread's own frames are read: they cannot change under it.
 *
 * Layouts: pylayout.h.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "inject/inject.h"
#include "inject/pylayout.h"

#define MAX_PY	  64	 /* Python frames read, at most */
#define NAMED_CAP 65536u /* pseudo-addresses named per process, at most */
#define TEXT_MAX  200	 /* bytes of a name or a file name kept */

#define OWNED_BY_CSTACK 3 /* 3.12: the entry frame an evaluation pushes first */

static struct {
	int state; /* 0 not looked, 1 on, -1 off (no Python, no layout, reads refused) */
	const struct py_layout *l;
	void *(*this_thread)(void);
	__u64 eval_lo, eval_hi; /* _PyEval_EvalFrameDefault's code, if known */
	__u64 *named;		/* pseudo-addresses named (open addressing, 0 empty) */
	pid_t pid;
} Y;

static bool rd(void *dst, __u64 addr, size_t n)
{
	struct iovec local = { dst, n }, remote = { (void *)(unsigned long)addr, n };

	return addr && process_vm_readv(Y.pid, &local, 1, &remote, 1, 0) == (ssize_t)n;
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
	for (size_t i = 0; i < sizeof(py_layouts) / sizeof(py_layouts[0]); i++)
		if (version >> 24 == 3 && ((version >> 16) & 0xff) == py_layouts[i].minor)
			Y.l = &py_layouts[i];
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

/* ---- names ------------------------------------------------------------------------------ */

/* A str object's text as UTF-8 (cut to TEXT_MAX bytes); "?" if it cannot be read. */
static void read_str(__u64 obj, char *out)
{
	unsigned char hdr[72];
	__u64 len;
	__u32 state, kind;
	size_t k = 0;

	strcpy(out, "?");
	if (!rd(hdr, obj, (size_t)Y.l->str_ascii))
		return;
	memcpy(&len, hdr + 16, 8);
	memcpy(&state, hdr + 32, 4);
	kind = (state >> 2) & 7;
	if (!(state & (1u << 5)) || (kind != 1 && kind != 2 && kind != 4))
		return;		 /* (not compact: not a code object's string) */
	if (state & (1u << 6)) { /* ASCII */
		len = len < TEXT_MAX ? len : TEXT_MAX;
		if (rd(out, obj + (__u64)Y.l->str_ascii, len))
			out[len] = 0;
		return;
	}
	for (__u64 i = 0; i < len && k + 4 < TEXT_MAX; i++) {
		__u32 c = 0;

		if (!rd(&c, obj + (__u64)Y.l->str_compact + i * kind, kind))
			break;
		if (c < 0x80) {
			out[k++] = (char)c;
		} else if (c < 0x800) {
			out[k++] = (char)(0xc0 | c >> 6);
			out[k++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			out[k++] = (char)(0xe0 | c >> 12);
			out[k++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[k++] = (char)(0x80 | (c & 0x3f));
		} else {
			out[k++] = (char)(0xf0 | c >> 18);
			out[k++] = (char)(0x80 | ((c >> 12) & 0x3f));
			out[k++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[k++] = (char)(0x80 | (c & 0x3f));
		}
	}
	out[k] = 0;
}

/* A bytes object's contents, read in pieces. */
struct bytes_rd {
	__u64 at, left;
	unsigned char buf[256];
	unsigned int n, i;
};

static int next_byte(struct bytes_rd *b)
{
	if (b->i == b->n) {
		b->n = (unsigned int)(b->left < sizeof(b->buf) ? b->left : sizeof(b->buf));
		if (!b->n || !rd(b->buf, b->at, b->n))
			return -1;
		b->at += b->n;
		b->left -= b->n;
		b->i = 0;
	}
	return b->buf[b->i++];
}

static int varint(struct bytes_rd *b)
{
	int v = 0, shift = 0, c;

	do {
		if ((c = next_byte(b)) < 0 || shift > 24)
			return 0;
		v |= (c & 63) << shift;
		shift += 6;
	} while (c & 64);
	return v;
}

static int svarint(struct bytes_rd *b)
{
	int v = varint(b);

	return v & 1 ? -(v >> 1) : v >> 1;
}

/* 3.11 and later (Objects/locations.md): the line of code unit `unit`; 0 if none. */
static int line_311(struct bytes_rd *b, int line, __u64 unit)
{
	__u64 at = 0;
	int c;

	while ((c = next_byte(b)) >= 0) {
		int code = (c >> 3) & 15, delta = 0;
		__u64 len = (__u64)(c & 7) + 1;

		if (!(c & 128))
			return 0; /* (out of step: not a location table) */
		if (code == 14) {
			delta = svarint(b);
			varint(b), varint(b), varint(b);
		} else if (code == 13) {
			delta = svarint(b);
		} else if (code >= 10 && code <= 12) {
			delta = code - 10;
			next_byte(b), next_byte(b);
		} else if (code < 10) {
			next_byte(b);
		}
		line += delta;
		if (unit < at + len)
			return code == 15 ? 0 : line;
		at += len;
	}
	return 0;
}

/* 3.10 (Objects/lnotab_notes.txt): pairs of (bytes, line delta); -128 no line. */
static int line_310(struct bytes_rd *b, int line, __u64 byte)
{
	__u64 end = 0;
	int sd, ld;

	while ((sd = next_byte(b)) >= 0 && (ld = next_byte(b)) >= 0) {
		bool none = ld == 128;

		if (!none)
			line += (signed char)ld;
		end += (__u64)sd;
		if (byte < end)
			return none ? 0 : line;
	}
	return 0;
}

/* The symbol record of a Python frame: "QUALNAME (FILE:LINE)". */
static void name_frame(__u64 pseudo, __u64 code, __u64 off)
{
	const struct py_layout *l = Y.l;
	struct gs_ev_symbol *e;
	char name[TEXT_MAX + 1], file[TEXT_MAX + 1], text[GS_SYM_MAX];
	struct bytes_rd b = { 0 };
	__u64 name_obj, file_obj, table;
	int first = 0, line = 0;
	size_t len;
	__u32 size;

	if (!rd64(code + (__u64)l->co_name, &name_obj) ||
	    !rd64(code + (__u64)l->co_filename, &file_obj) ||
	    !rd(&first, code + (__u64)l->co_firstlineno, 4) ||
	    !rd64(code + (__u64)l->co_linetable, &table))
		return;
	read_str(name_obj, name);
	read_str(file_obj, file);
	if (rd64(table + 16, &b.left)) {
		b.at = table + 32;
		b.left = b.left < (1u << 20) ? b.left : 0;
		line = l->table311 ? line_311(&b, first, off / 2) : line_310(&b, first, off);
	}
	if (line > 0)
		snprintf(text, sizeof(text), "%s (%s:%d)", name, file, line);
	else
		snprintf(text, sizeof(text), "%s (%s)", name, file);
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

static bool win_read(struct window *ws, void *dst, __u64 addr, size_t n)
{
	struct iovec local[WIN_PAGES], remote[WIN_PAGES];
	__u64 top = (addr + n + PAGE - 1) & ~(PAGE - 1);
	struct window *w;
	ssize_t got;

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

/* This thread's Python frames, innermost first, as pseudo-addresses; entry[i]: frame i is
 * the outermost of one evaluation (the native frame of the interpreter that ran it). */
static int walk(__u64 *out, bool *entry)
{
	const struct py_layout *l = Y.l;
	__u64 ts = (__u64)(unsigned long)Y.this_thread(), f;
	int n = 0;

	if (!ts || !rd64(ts + (__u64)l->ts_frame, &f))
		return 0;
	if (l->cframe_cur >= 0 && !rd64(f + (__u64)l->cframe_cur, &f))
		return 0;
	if (!tl_win && !(tl_win = calloc(2, sizeof(*tl_win))))
		return 0;
	/* (The program ran since the last walk: nothing read then holds.) */
	tl_win[0].lo = tl_win[0].hi = tl_win[1].lo = tl_win[1].hi = 0;
	for (int steps = 0; f && n < MAX_PY && steps < 4 * MAX_PY; steps++) {
		unsigned char fr[104];
		__u64 code, prev, instr, off;
		int size = l->lasti_int ? l->f_instr + 4 : 72;

		if (!win_read(tl_win, fr, f, (size_t)size))
			break;
		memcpy(&code, fr + l->f_code, 8);
		memcpy(&prev, fr + l->f_prev, 8);
		if (l->f_owner >= 0 && fr[l->f_owner] == OWNED_BY_CSTACK) {
			/* 3.12: the previous frame ends its evaluation. */
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

int gs_py_stack(void *const *native, int n, __u64 *out, int max)
{
	__u64 py[MAX_PY];
	bool entry[MAX_PY];
	int np = 0, k = 0, p = 0;

	if (!Y.state)
		look();
	if (Y.state > 0)
		np = walk(py, entry);
	for (int i = 0; i < n && k < max; i++) {
		__u64 ip = (__u64)(unsigned long)native[i];

		if (p < np && Y.eval_hi && ip - 1 >= Y.eval_lo && ip - 1 < Y.eval_hi) {
			/* This evaluation's frames in place of the interpreter's. */
			while (p < np && k < max) {
				bool last = entry[p];

				out[k++] = py[p++];
				if (last)
					break;
			}
			continue;
		}
		out[k++] = ip;
	}
	/* Evaluations whose native frames were not found (the unwinder stopped): outermost. */
	while (p < np && k < max)
		out[k++] = py[p++];
	return k;
}

void gs_py_after_fork(void)
{
	/* A new process: said again, its frames named again (in its own records). */
	free(Y.named);
	Y.named = NULL;
	Y.l = NULL;
	Y.eval_lo = Y.eval_hi = 0;
	Y.state = 0;
}
