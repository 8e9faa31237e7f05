// SPDX-License-Identifier: MIT
/*
 * Python frames in the kernel-probe plane (see kernel_py.h). A process is looked at when it
 * opens a CUDA library (before its first call), or at its first stack (a process attached
 * to): is it a Python interpreter (a libpython3.X or
 * python3.X file mapped executable, with _PyRuntime in its symbols), of which version
 * (Py_Version in its memory, else the file's name), with a known layout (written, or for
 * 3.13 and later read from its _Py_DebugOffsets: core/pylayout.c)? If so, the
 * kernel's walker is told where its runtime is and how to read it (tracer__py_config),
 * and from then on each of its stacks comes after a record of its Python frames
 * (GS_EV_PYSTACK), which this filter puts into the stack in place of the interpreter's
 * evaluation frames and drops. New frames are named here, from the process's memory
 * (process_vm_readv), in symbol records: a recording needs no process. Stacks taken
 * before a process was looked at (gpuscope reads the kernel's records moments later) have
 * no Python frames. Its exceptions are probed from then on (the interpreter file's raise and
 * uncaught-print functions, once a file): their records' frames are named here too.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/elfsym.h"
#include "core/hmap.h"
#include "core/procfs.h"
#include "core/pyname.h"
#include "core/util.h"
#include "source/kernel_py.h"

#define NAMED_MAX  65536 /* Python frames named per process, at most */
#define NAME_TRIES 3	 /* reads of a frame's names that failed before it is given up */
#define NAMED	   ((uintptr_t)-1)

struct pyproc {
	const struct py_layout *l; /* NULL: not Python, or not walked */
	struct py_layout read;	   /* 3.13 and later: the process's own (_Py_DebugOffsets) */
	bool decided;		   /* a Python interpreter was found (walked or not) */
	__u64 eval_lo, eval_hi;
	struct hmap named; /* pseudo-address -> NAMED, or the failed tries */
	struct hmap codes; /* code object -> "QUALNAME (FILE" of a frame of it named */
};

struct pending {
	__u64 ts, entry;
	__u16 n;
	bool borrowed; /* another thread's frames (gs_ev_pystack) */
	__u64 frames[GS_PYSTACK_MAX];
};

struct kernel_py {
	struct stream *s;
	struct tracer *t;
	struct hmap procs;   /* pid -> struct pyproc */
	struct hmap pending; /* (pid, tid) -> struct pending: its latest Python frames */
	bool raises;	     /* every raise probed, not only uncaught exceptions' print */
	union {
		struct gs_ev_stack st;
		unsigned char b[sizeof(struct gs_ev_stack)];
	} out; /* the stack passed on */
};

/* Where a symbol of a file pid maps is in the process; 0 if not there. (The file is opened
 * through /proc/PID/root: a process in a container maps its own.) */
static __u64 symbol_at(__u32 pid, const struct map_entry *m, const char *name, __u64 *size)
{
	char path[PATH_MAX + 64];
	__u64 value, sz;
	bool pie;

	proc_root_path((pid_t)pid, m->path, path, sizeof(path));
	if (elf_find_symbol(path, name, &value, &sz, &pie))
		return 0;
	if (size)
		*size = sz;
	return pie ? value + m->start - m->offset : value;
}

/* "3.11" in a file name: its minor version, or -1. */
static int minor_of_name(const char *path)
{
	const char *b = strrchr(path, '/'), *p;

	b = b ? b + 1 : path;
	p = strstr(b, "python3.");
	return p ? atoi(p + 8) : -1;
}

/* A file offset of an address in the mapping m (its executable one); 0 if not in it. */
static __u64 file_offset(const struct map_entry *m, __u64 addr)
{
	return addr && addr >= m->start && addr < m->end ? addr - m->start + m->offset : 0;
}

/* Python exceptions: the interpreter's raise and uncaught-print functions probed (once a
 * file). */
static void probe_exceptions(struct kernel_py *k, __u32 pid, const struct map_entry *py)
{
	char path[PATH_MAX + 64];
	__u64 raise = symbol_at(pid, py, "_PyErr_SetObject", NULL),
	      display = symbol_at(pid, py, "_PyErr_Display", NULL);
	bool with_file = display != 0;

	if (!display)
		display = symbol_at(pid, py, "PyErr_Display", NULL);
	proc_root_path((pid_t)pid, py->path, path, sizeof(path));
	tracer__py_exceptions(k->t, path, k->raises ? file_offset(py, raise) : 0,
			      file_offset(py, display), with_file);
}

static void announce(struct kernel_py *k, __u32 pid, unsigned int version, int status, bool mixed)
{
	struct gs_ev_python e = { .version = version, .status = (__u16)status, .mixed = mixed };

	stream__emit(k->s, &e.h, GS_EV_PYTHON, sizeof(e), pid);
}

/* Is pid a Python interpreter the walker can read? Configure the walker if so. */
static void look(struct kernel_py *k, __u32 pid, struct pyproc *pp)
{
	struct map_entry *maps = NULL;
	size_t nmaps = 0;
	const struct map_entry *py = NULL;
	__u64 runtime = 0, vaddr, size = 0;
	unsigned long hex = 0;
	int minor = -1;

	if (proc_exec_files((pid_t)pid, &maps, &nmaps))
		return;
	/* libpython first: an interpreter linked to it has its runtime there. */
	for (int pass = 0; pass < 2 && !runtime; pass++)
		for (size_t i = 0; i < nmaps && !runtime; i++) {
			const char *b = strrchr(maps[i].path, '/');

			b = b ? b + 1 : maps[i].path;
			if (strncmp(b, pass ? "python3" : "libpython3", pass ? 7 : 10))
				continue;
			runtime = symbol_at(pid, &maps[i], "_PyRuntime", NULL);
			py = runtime ? &maps[i] : NULL;
		}
	if (!py)
		goto out;
	vaddr = symbol_at(pid, py, "Py_Version", NULL);
	if (vaddr && py_read_pid((void *)(uintptr_t)pid, &hex, vaddr, sizeof(hex)) &&
	    hex >> 24 == 3)
		minor = (int)((hex >> 16) & 0xff);
	else if ((minor = minor_of_name(py->path)) >= 0)
		hex = 0x03000000UL | (unsigned long)minor << 16;
	if (minor >= 0 && !(pp->l = py_layout_static((unsigned int)minor)) &&
	    py_layout_debug(py_read_pid, (void *)(uintptr_t)pid, runtime, (unsigned int)minor,
			    &pp->read))
		pp->l = &pp->read;
	if (pp->l && pp->l->rt_interp_head < 0)
		pp->l = NULL; /* (3.10: not walked by the kernel's walker) */
	if (pp->l) {
		const struct py_layout *l = pp->l;
		struct gs_py_cfg c = { .runtime = runtime,
				       .rt_interp_head = (__s16)l->rt_interp_head,
				       .interp_threads = (__s16)l->interp_threads,
				       .ts_next = (__s16)l->ts_next,
				       .ts_tid = (__s16)l->ts_tid,
				       .ts_frame = (__s16)l->ts_frame,
				       .cframe_cur = (__s16)l->cframe_cur,
				       .f_code = (__s16)l->f_code,
				       .f_prev = (__s16)l->f_prev,
				       .f_instr = (__s16)l->f_instr,
				       .f_entry = (__s16)l->f_entry,
				       .f_owner = (__s16)l->f_owner,
				       .co_code = (__s16)l->co_code,
				       .lasti_int = l->lasti_int,
				       .str_ascii = (__u8)l->str_ascii,
				       .frame_bytes = (__u8)py_frame_bytes(l) };

		pp->eval_lo = symbol_at(pid, py, "_PyEval_EvalFrameDefault", &size);
		pp->eval_hi = pp->eval_lo ? pp->eval_lo + size : 0;
		if (!k->t || tracer__py_config(k->t, pid, &c))
			pp->l = NULL;
		else if (!getenv("GPUSCOPE_NO_PYEXC"))
			probe_exceptions(k, pid, py);
	}
	pp->decided = true;
	announce(k, pid, (unsigned int)hex, pp->l ? GS_PY_FRAMES : GS_PY_UNSUPPORTED,
		 pp->l && pp->eval_hi);
out:
	free(maps);
}

/* A frame's name; if its code cannot be read now (the process exiting: an uncaught
 * exception's frames), its code's name from an earlier frame of it, without a line. */
static bool name_frame(const struct py_reader *r, struct pyproc *pp, __u64 code, __u64 off,
		       char *out, size_t n)
{
	const char *known = hmap_get(&pp->codes, code, 0);
	char *colon;

	if (py_frame_name(r, code, off, out, n)) {
		colon = strrchr(out, ':');
		if (!known && colon && pp->codes.len < NAMED_MAX) {
			char *prefix = xstrdup(out);

			prefix[colon - out] = 0;
			hmap_put(&pp->codes, code, 0, prefix);
		}
		return true;
	}
	if (!known)
		return false;
	snprintf(out, n, "%s:?)", known);
	return true;
}

/* The process's Python frames named that are new (in symbol records). */
static void name_new(struct kernel_py *k, __u32 pid, struct pyproc *pp, const __u64 *ip,
		     unsigned int n)
{
	struct py_reader r = { pp->l, py_read_pid, (void *)(uintptr_t)pid };
	struct gs_ev_symbol y;

	for (unsigned int i = 0; i < n; i++) {
		__u64 code = ((ip[i] & ~GS_PYFRAME_BIT) >> 19) << 3, off = ip[i] & GS_PYFRAME_OFF;
		uintptr_t tries = (uintptr_t)hmap_get(&pp->named, ip[i], 0);

		/* (Named, or tried NAME_TRIES times: a read may fail once, a garbage frame
		 * always.) */
		if (!GS_IS_PYFRAME(ip[i]) || tries == NAMED || tries >= NAME_TRIES ||
		    pp->named.len >= NAMED_MAX)
			continue;
		if (ip[i] == GS_PYFRAME_BORROWED)
			snprintf(y.name, sizeof(y.name), "%s", PY_BORROWED_NAME);
		else if (!name_frame(&r, pp, code, off, y.name, sizeof(y.name))) {
			hmap_put(&pp->named, ip[i], 0, (void *)(tries + 1));
			continue;
		}
		hmap_put(&pp->named, ip[i], 0, (void *)NAMED);
		y.addr = ip[i];
		y.len = (__u16)strlen(y.name);
		memset(y.pad, 0, sizeof(y.pad));
		stream__emit(k->s, &y.h, GS_EV_SYMBOL,
			     (__u32)(offsetof(struct gs_ev_symbol, name) + y.len + 1), pid);
	}
}

static const struct gs_hdr *filter(void *ctx, const struct gs_hdr *ev)
{
	struct kernel_py *k = ctx;
	const struct gs_ev_stack *st = (const void *)ev;
	struct pyproc *pp;
	struct pending *p;
	bool entry[GS_PYSTACK_MAX];
	unsigned int native;
	int n;

	if (ev->type == GS_EV_LIB) {
		/* A CUDA library opened: before the process's first call, look (again: its
		 * interpreter may be in a library mapped since). */
		pp = hmap_get_or_new(&k->procs, ev->pid, 0, sizeof(*pp));
		if (!pp->decided)
			look(k, ev->pid, pp);
		return ev;
	}
	if (ev->source != GS_SRC_UPROBE)
		return ev;
	if (ev->type == GS_EV_PYEXC) {
		const struct gs_ev_pyexc *x = (const void *)ev;

		pp = hmap_get(&k->procs, ev->pid, 0);
		if (pp && pp->l)
			name_new(k, ev->pid, pp, x->frames, x->nframes);
		return ev;
	}
	if (ev->type == GS_EV_PYSTACK) {
		const struct gs_ev_pystack *y = (const void *)ev;

		p = hmap_get_or_new(&k->pending, ev->pid, ev->tid, sizeof(*p));
		p->ts = ev->ts;
		p->entry = y->entry;
		p->n = y->nframes;
		p->borrowed = y->borrowed != 0;
		memcpy(p->frames, y->frames, (size_t)y->nframes * 8);
		return NULL; /* (into the stack it precedes) */
	}
	pp = hmap_get(&k->procs, ev->pid, 0);
	if (!pp) {
		pp = hmap_get_or_new(&k->procs, ev->pid, 0, sizeof(*pp));
		look(k, ev->pid, pp); /* (a process attached to: its libraries were open) */
	}
	/* A frame-pointer chain that ran into other data ends at the first address no user
	 * code has: past it, nothing is a frame (and it must not read as a Python one). */
	for (native = 0; native < st->nframes && !GS_IS_PYFRAME(st->ip[native]); native++)
		;
	p = hmap_get(&k->pending, ev->pid, ev->tid);
	if ((!pp->l || !p || p->ts != ev->ts) && native == st->nframes)
		return ev;
	memcpy(&k->out.st, st, offsetof(struct gs_ev_stack, ip));
	if (pp->l && p && p->ts == ev->ts) {
		for (unsigned int i = 0; i < p->n; i++)
			entry[i] = (p->entry >> i) & 1;
		n = py_mix(st->ip, (int)native, p->frames, entry, p->n, p->borrowed, pp->eval_lo,
			   pp->eval_hi, k->out.st.ip, GS_STACK_MAX);
		p->ts = 0;
	} else {
		n = (int)native;
		memcpy(k->out.st.ip, st->ip, native * 8);
	}
	k->out.st.nframes = (__u16)n;
	k->out.st.h.size = (__u32)(offsetof(struct gs_ev_stack, ip) + (size_t)n * 8);
	name_new(k, ev->pid, pp, k->out.st.ip, (unsigned int)n);
	return &k->out.st.h;
}

static void count_out(void *ctx, const struct gs_pyexc_key *key, __u64 count)
{
	struct kernel_py *k = ctx;
	struct gs_ev_pyexc x;

	memset(&x, 0, offsetof(struct gs_ev_pyexc, frames));
	x.kind = GS_PYEXC_COUNT;
	x.type_addr = key->type_addr;
	x.site = key->site;
	x.count = count;
	stream__emit(k->s, &x.h, GS_EV_PYEXC, offsetof(struct gs_ev_pyexc, frames), key->tgid);
}

/* The kernel's counts of a Python process's raises, as records. */
static void take_counts(struct kernel_py *k, __u32 pid)
{
	struct pyproc *pp = hmap_get(&k->procs, pid, 0);

	if (k->t && pp && pp->l)
		tracer__py_exc_counts(k->t, pid, count_out, k);
}

void kernel_py__take_counts(struct kernel_py *k)
{
	struct hmap_slot *sl;

	hmap_for_each (&k->procs, sl)
		take_counts(k, (__u32)sl->k1);
}

static void forget(struct kernel_py *k, __u32 pid)
{
	struct pyproc *pp = hmap_del(&k->procs, pid, 0);

	if (pp) {
		if (pp->l && k->t)
			tracer__py_forget(k->t, pid);
		hmap_free(&pp->named);
		hmap_free_with(&pp->codes, NULL);
		free(pp);
	}
	hmap_drop_key(&k->pending, false, 0, pid, free);
}

static void retire(void *ctx, __u32 pid)
{
	forget(ctx, pid);
}

/* Its end, or a new image (looked at again): first, its raises' counts. */
static const struct gs_hdr *on_exec(void *ctx, const struct gs_hdr *ev)
{
	__u32 kind = ((const struct gs_ev_proc *)ev)->kind;

	if (kind == GS_PROC_EXIT || kind == GS_PROC_EXEC)
		take_counts(ctx, ev->pid);
	if (kind == GS_PROC_EXEC)
		forget(ctx, ev->pid);
	return ev;
}

void kernel_py__look(struct kernel_py *k, __u32 pid)
{
	struct pyproc *pp = hmap_get_or_new(&k->procs, pid, 0, sizeof(*pp));

	if (!pp->decided)
		look(k, pid, pp);
}

struct kernel_py *kernel_py__attach(struct stream *s, struct tracer *t, bool raises)
{
	struct kernel_py *k = xcalloc(1, sizeof(*k));

	k->raises = raises;
	k->s = s;
	k->t = t;
	stream__filter(s,
		       STREAM_TYPE(GS_EV_PYSTACK) | STREAM_TYPE(GS_EV_STACK) |
			       STREAM_TYPE(GS_EV_LIB) | STREAM_TYPE(GS_EV_PYEXC),
		       filter, k);
	stream__filter(s, STREAM_TYPE(GS_EV_PROC), on_exec, k);
	stream__on_retire(s, retire, k);
	return k;
}

void kernel_py__detach(struct kernel_py *k)
{
	k->t = NULL;
}

void kernel_py__free(struct kernel_py *k)
{
	struct hmap_slot *sl;

	if (!k)
		return;
	hmap_for_each (&k->procs, sl) {
		hmap_free(&((struct pyproc *)sl->val)->named);
		hmap_free_with(&((struct pyproc *)sl->val)->codes, NULL);
		free(sl->val);
	}
	hmap_free(&k->procs);
	hmap_free_with(&k->pending, NULL);
	free(k);
}
