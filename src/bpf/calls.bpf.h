/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Entry/return pairing for traced library calls.
 *
 * One entry program serves every traced function: it saves the timestamp, the return
 * address and the first eleven integer arguments (six registers, five stack slots on
 * x86-64) with the stack pointer at entry, in a slot of the thread's storage. The attach
 * cookie says which API was entered. Return programs, one per family, find that state again
 * by the stack pointer - 8 (`ret` has popped the return address) and decode it.
 *
 * Keying by the stack pointer makes nested calls distinct and makes a tail call from one
 * traced entry point into another (a jmp: same stack pointer, nanoseconds later unless the
 * thread was descheduled in between) count once: the second
 * entry sees a fresh state at its stack pointer and leaves it alone, and of the two chained
 * return probes only the first finds the state.
 */
#ifndef GPUSCOPE_CALLS_BPF_H
#define GPUSCOPE_CALLS_BPF_H

#include "common.bpf.h"
#include "gpuscope/api.h"

/* The shared decoder reads the process's memory with bpf_probe_read_user. */
#define GS_INLINE		 __always_inline
#define GS_READ(dst, size, addr) bpf_probe_read_user((dst), (size), (const void *)(addr))
#include "gpuscope/decode.h"

/* libbpf 1.1 stops at PT_REGS_PARM5; the sixth integer argument of the SysV ABI is r9. */
#if defined(__TARGET_ARCH_x86)
#define GS_PARM6(x) ((x)->r9)
#else
#error "gpuscope's uprobes decode x86-64 arguments only"
#endif

#define GS_NARGS	   11
#define GS_NREGARGS	   6
#define GS_ALIAS_WINDOW_NS 20000000ULL

struct call_state {
	__u64 ts;
	__u64 caller;
	__u64 args[GS_NARGS];
	__u64 sp; /* the stack pointer at entry; 0: a free slot */
	__u32 api;
	__u32 flags; /* GS_CS_* */
};

/* A launch whose return was asked for as one of every launch_return_every, and whose stack
 * is taken then (its thread within the stacks' rate), not only to read its result
 * (cuda.bpf.c). */
#define GS_CS_STACK 1U

#define GS_CALL_SLOTS 4

/*
 * Per thread: its calls in flight (entered, their return not yet seen): the outer one and
 * those it calls (nested, or tail-called within GS_ALIAS_WINDOW_NS). A state whose return
 * never came (a longjmp out of a call) is taken back when all slots are in use, the oldest
 * first. And whether its process is traced (gs_tracked_gen's when last found). In the
 * thread's storage, not in a hash table by (thread, stack pointer): an entry and its return
 * make one helper call each to find it, where the table took a lookup, an update, and a
 * lookup and a delete (each a helper call, tens of ns with the kernel's mitigations).
 */
struct calls_thread {
	struct call_state call[GS_CALL_SLOTS];
	__u64 tracked;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct calls_thread);
} calls_thread SEC(".maps");

/* task's storage; NULL if none. */
static __always_inline struct calls_thread *gs_calls_of(struct task_struct *task)
{
	return GS_STORAGE_OF(&calls_thread, task);
}

/* The calling thread's storage if its process is traced (NULL: not, or no room). */
static __always_inline struct calls_thread *gs_calls_traced(struct task_struct *task)
{
	return GS_TRACED_STORAGE(&calls_thread, task, gs_calls_of(task), (void)0);
}

/* The slot of the call in flight entered at stack pointer sp (0: a free slot); NULL if
 * none. */
static __always_inline struct call_state *gs_slot_at(struct calls_thread *c, __u64 sp)
{
	for (int i = 0; i < GS_CALL_SLOTS; i++)
		if (c->call[i].sp == sp)
			return &c->call[i];
	return NULL;
}

/* A slot for a call entered at sp: its own (a stale state there), a free one, or the
 * oldest. */
static __always_inline struct call_state *gs_slot_new(struct calls_thread *c, __u64 sp)
{
	struct call_state *s = gs_slot_at(c, sp);

	if (!s)
		s = gs_slot_at(c, 0);
	if (s)
		return s;
	s = &c->call[0];
	for (int i = 1; i < GS_CALL_SLOTS; i++)
		if (c->call[i].ts < s->ts)
			s = &c->call[i];
	return s;
}

/* Keep the state of a call whose return is wanted (st->sp set); false if there is no
 * room (counted). */
static __always_inline bool gs_call_keep(const struct call_state *st)
{
	struct calls_thread *c = bpf_task_storage_get(&calls_thread, bpf_get_current_task_btf(), 0,
						      BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!c) {
		__sync_fetch_and_add(&lost_calls, 1);
		return false;
	}
	__builtin_memcpy(gs_slot_new(c, st->sp), st, sizeof(*st));
	return true;
}

static const struct gs_api_desc api_desc[GS_API_MAX] = { GS_API_LIST(GS_API_DESC) };

static __always_inline const struct gs_api_desc *gs_desc(__u32 api)
{
	if (api >= GS_API_MAX)
		return NULL;
	return &api_desc[api];
}

#ifdef GS_OUTERMOST_ONLY
/*
 * An object whose entry points call each other (NCCL: ncclBcast calls ncclBroadcast, as a
 * call with an NVTX range around it; ncclCommInitAll calls ncclGroupStart and End) counts
 * the outermost call only: an entry while a call of the same thread entered at a higher
 * stack pointer is still in flight is that call's own work.
 */
static __always_inline bool gs_nested(struct calls_thread *c, __u64 sp)
{
	for (int i = 0; i < GS_CALL_SLOTS; i++)
		if (c->call[i].sp > sp)
			return true;
	return false;
}
#endif

/* The state of a call entered now: its registers and the stack words above its return
 * address (its caller, the arguments past the sixth). */
static __always_inline void gs_call_state(struct pt_regs *ctx, struct call_state *st, __u64 sp,
					  __u64 ts)
{
	__u64 stack[1 + GS_NARGS - GS_NREGARGS];

	if (bpf_probe_read_user(stack, sizeof(stack), (void *)sp))
		__builtin_memset(stack, 0, sizeof(stack));
	st->ts = ts;
	st->sp = sp;
	st->api = (__u32)bpf_get_attach_cookie(ctx);
	st->flags = 0;
	st->args[0] = PT_REGS_PARM1(ctx);
	st->args[1] = PT_REGS_PARM2(ctx);
	st->args[2] = PT_REGS_PARM3(ctx);
	st->args[3] = PT_REGS_PARM4(ctx);
	st->args[4] = PT_REGS_PARM5(ctx);
	st->args[5] = GS_PARM6(ctx);
	st->caller = stack[0];
	st->args[6] = stack[1];
	st->args[7] = stack[2];
	st->args[8] = stack[3];
	st->args[9] = stack[4];
	st->args[10] = stack[5];
}

/* A tail call: a state at this stack pointer, made moments ago. (Moments: the thread may be
 * descheduled between the two entries, so 20 ms. The return address cannot tell: the first
 * entry's return probe has already replaced it with its trampoline. A state is only ever
 * left behind by a return never seen, which a longjmp out of a driver call would do.) */
static __always_inline bool gs_fresh(const struct call_state *s, __u64 now)
{
	return s && now - s->ts < GS_ALIAS_WINDOW_NS;
}

static __always_inline bool gs_tail_called(__u64 sp, __u64 now)
{
	struct calls_thread *c = gs_calls_of(bpf_get_current_task_btf());

	return c && gs_fresh(gs_slot_at(c, sp), now);
}

static __always_inline int gs_call_enter(struct pt_regs *ctx)
{
	__u64 sp = PT_REGS_SP(ctx), now;
	struct call_state *s;
	struct calls_thread *c;

	barrier_var(sp); /* (read first: the verifier refuses a context pointer moved) */
	c = gs_calls_traced(bpf_get_current_task_btf());
	if (!c)
		return 0;
	now = bpf_ktime_get_ns();
	s = gs_slot_at(c, sp);
	if (gs_fresh(s, now))
		return 0;
#ifdef GS_OUTERMOST_ONLY
	if (gs_nested(c, sp))
		return 0;
#endif
	gs_call_state(ctx, s ?: gs_slot_new(c, sp), sp, now);
	return 0;
}

/* Copy the state of the call returning now into *st and forget it; false if none. */
static __always_inline bool gs_call_return(struct pt_regs *ctx, struct call_state *st)
{
	struct calls_thread *c = gs_calls_of(bpf_get_current_task_btf());
	struct call_state *s = c ? gs_slot_at(c, PT_REGS_SP(ctx) - 8) : NULL;

	if (!s)
		return false;
	__builtin_memcpy(st, s, sizeof(*st));
	s->sp = 0;
	return true;
}

static __always_inline void gs_fill_call(struct gs_call *c, const struct call_state *st, __u64 now,
					 __s32 result)
{
	c->dur_ns = now - st->ts;
	c->caller = st->caller;
	c->api = (__u16)st->api;
	c->pad = 0;
	c->result = result;
}

/* The call returning now: its saved state and table entry, and the time; NULL if none. */
static __always_inline const struct gs_api_desc *gs_returning(struct pt_regs *ctx,
							      struct call_state *st, __u64 *now)
{
	const struct gs_api_desc *d;

	if (!gs_call_return(ctx, st))
		return NULL;
	d = gs_desc(st->api);
	*now = bpf_ktime_get_ns();
	return d;
}

/* Reserve a record describing the call `st`, header and call part filled in. */
static __always_inline void *gs_reserve_call(__u32 size, __u16 type, const struct call_state *st,
					     __u64 now, __s32 result)
{
	struct gs_hdr *h =
		gs_reserve(size, type, GS_SRC_UPROBE, st->ts, bpf_get_current_pid_tgid());

	if (h)
		gs_fill_call((struct gs_call *)(h + 1), st, now, result);
	return h;
}

/* Stacks: 0 none; else every Nth launch (per CPU), every allocation, every failure. */
const volatile __u32 stack_every = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} stack_count SEC(".maps");

/* Processes whose Python frames are walked (gpuscope fills it: src/source/kernel_py.c). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct gs_py_cfg);
} py_cfg SEC(".maps");

/* A walk's frames, in the record they go out in (only its used part is copied out). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gs_ev_pystack);
} py_scratch SEC(".maps");

static __always_inline __u64 *gs_py_frames(void)
{
	__u32 zero = 0;
	struct gs_ev_pystack *s = bpf_map_lookup_elem(&py_scratch, &zero);

	return s ? s->frames : NULL;
}

/* A frame, read whole (at most 127 bytes; 8 more so that a field at any offset below 128
 * reads inside it). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[128 + 8]);
} py_frame SEC(".maps");

static __always_inline __u64 gs_read64(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)addr);
	return v;
}

/* A walk's state, for bpf_loop's callbacks (each verified once, whatever the count). */
struct py_walk {
	struct gs_py_cfg c;
	__u64 t, f, entry;
	__u32 n, tid;
	bool found;
};

/* One thread state of the list: 1 (stop) at this thread's (found), or at the end. */
static long gs_py_thread(__u32 i, void *ctx)
{
	struct py_walk *w = ctx;
	__s32 id = 0;

	if (!w->t)
		return 1;
	bpf_probe_read_user(&id, sizeof(id), (const void *)(w->t + w->c.ts_tid));
	if ((__u32)id == w->tid) {
		w->found = true;
		return 1;
	}
	w->t = gs_read64(w->t + w->c.ts_next);
	return 0;
}

/* The thread state of thread w->tid, from the interpreter's list (at most 64 long): w->t,
 * 0 if not there. */
static __always_inline void gs_py_find(struct py_walk *w)
{
	w->found = false;
	w->t = gs_read64(gs_read64(w->c.runtime + w->c.rt_interp_head) + w->c.interp_threads);
	bpf_loop(64, gs_py_thread, w, 0);
	if (!w->found)
		w->t = 0; /* (not in the first 64: another thread's state is no answer) */
}

/* The current frame of thread state t (0: none). */
static __always_inline __u64 gs_py_frame_of(const struct gs_py_cfg *c, __u64 t)
{
	__u64 f = gs_read64(t + c->ts_frame);

	return f && c->cframe_cur >= 0 ? gs_read64(f + c->cframe_cur) : f;
}

/* w->tid's thread state (w->t) and its current frame (w->f; 0: none, as for a thread running
 * no Python: PyTorch's autograd engine threads keep a state with no frame). */
static __always_inline void gs_py_current(struct py_walk *w)
{
	gs_py_find(w);
	w->f = w->t ? gs_py_frame_of(&w->c, w->t) : 0;
}

/* A field of the frame read (b: py_frame's value), at offset at (below 128). */
#define PY_FIELD(b, type, at) (*(type *)((b) + ((at)&127)))

/* One frame: its pseudo-address into the scratch frames; 1 (stop) at the end. The frame is
 * read at once (one read, not one per field: a read costs ~0.1 us). */
static long gs_py_frame(__u32 i, void *ctx)
{
	struct py_walk *w = ctx;
	__u32 zero = 0;
	__u64 *frames = gs_py_frames(), code, prev, off = 0;
	__u8 *b = bpf_map_lookup_elem(&py_frame, &zero), owner = 0, is_entry = 0;

	if (!frames || !b || !w->f || w->n >= GS_PYSTACK_MAX ||
	    bpf_probe_read_user(b, w->c.frame_bytes & 127, (const void *)w->f))
		return 1;
	/* (3.14 tags the code's reference in its low bits: PY_CODE_OF, core/pylayout.h) */
	code = PY_FIELD(b, __u64, w->c.f_code) & ~7ULL;
	prev = PY_FIELD(b, __u64, w->c.f_prev);
	if (w->c.f_owner >= 0)
		owner = PY_FIELD(b, __u8, w->c.f_owner);
	if (owner >= 3) { /* 3.12 and later: the entry frame an evaluation pushes first */
		if (w->n)
			w->entry |= 1ULL << ((w->n - 1) & 63);
		w->f = prev;
		return 0;
	}
	if (!code)
		return 1;
	if (w->c.lasti_int) {
		__s32 lasti = PY_FIELD(b, __s32, w->c.f_instr);

		off = lasti > 0 ? (__u64)lasti * 2 : 0;
	} else {
		__u64 instr = PY_FIELD(b, __u64, w->c.f_instr), base = code + w->c.co_code;

		off = instr >= base ? instr - base : 0;
	}
	if (w->c.f_entry >= 0)
		is_entry = PY_FIELD(b, __u8, w->c.f_entry);
	if (is_entry || w->c.lasti_int)
		w->entry |= 1ULL << (w->n & 63);
	frames[w->n & (GS_PYSTACK_MAX - 1)] = GS_PYFRAME(code, off);
	w->n++;
	w->f = prev;
	return 0;
}

/* This thread's Python frames into the scratch frames, innermost first: their number (0:
 * none), and which are an evaluation's outermost (*entry). Its thread state is tstate, or
 * (0) is found in the interpreter's list by its thread id; the frames are walked from the
 * current one (at most loops steps), each read with bpf_probe_read_user (a bad address
 * reads 0). how: PY_BORROW, a thread with no Python state takes the frames of the thread
 * c->last_tid, or if that one is gone of the process's main thread (*borrowed: an autograd
 * engine thread, which runs the backward pass while the Python thread waits in
 * loss.backward()); PY_LAUNCH, also a launch's stack, whose thread, if it runs Python, is
 * the one borrowed from from now on. */
#define PY_BORROW 1
#define PY_LAUNCH 3
static __always_inline __u32 gs_py_walk(struct gs_py_cfg *c, __u64 pid_tgid, __u64 tstate,
					__u32 loops, __u64 *entry, __u32 how, bool *borrowed)
{
	struct py_walk w = { .c = *c, .tid = (__u32)pid_tgid, .t = tstate };

	*borrowed = false;
	if (!w.t) {
		gs_py_current(&w);
		if (w.f && how == PY_LAUNCH)
			c->last_tid = w.tid;
		if (!w.f && (how & PY_BORROW) && c->last_tid && c->last_tid != w.tid) {
			w.tid = c->last_tid;
			gs_py_current(&w);
		}
		/* (That thread gone: the process's main thread.) */
		if (!w.f && (how & PY_BORROW) && (__u32)pid_tgid != pid_tgid >> 32) {
			w.tid = pid_tgid >> 32;
			gs_py_current(&w);
		}
		*borrowed = w.f && w.tid != (__u32)pid_tgid;
	} else {
		w.f = gs_py_frame_of(&w.c, w.t);
	}
	if (!w.f)
		return 0;
	bpf_loop(loops, gs_py_frame, &w, 0);
	*entry = w.n ? w.entry | 1ULL << ((w.n - 1) & 63) : 0;
	return w.n;
}

/* This thread's Python frames, as a record just before its stack's (see gs_ev_pystack):
 * written in the scratch record as walked, and only its used part copied out (reserving a
 * whole record and copying all of its frames cost 3 to 9 us a stack on the CPU machine). */
static __always_inline void gs_emit_pystack(struct gs_py_cfg *c, __u64 ts, __u64 pid_tgid,
					    bool launch)
{
	struct gs_ev_pystack *e;
	__u32 zero = 0, n, size;
	__u64 entry = 0;
	bool borrowed;

	n = gs_py_walk(c, pid_tgid, 0, 2 * GS_PYSTACK_MAX, &entry, launch ? PY_LAUNCH : PY_BORROW,
		       &borrowed);
	e = bpf_map_lookup_elem(&py_scratch, &zero);
	size = offsetof(struct gs_ev_pystack, frames) + (n & (2 * GS_PYSTACK_MAX - 1)) * 8;
	if (!n || !e || size > sizeof(*e))
		return;
	gs_fill(&e->h, size, GS_EV_PYSTACK, GS_SRC_UPROBE, ts, pid_tgid);
	e->entry = entry;
	e->nframes = (__u16)n;
	e->borrowed = borrowed;
	e->pad[0] = e->pad[1] = 0;
	if (bpf_ringbuf_output(&events, e, size, gs_wake_flags()))
		gs_count_drop(GS_EV_PYSTACK);
}

/* The returning call's user stack, as a record just before the call's own (same ts), and
 * the thread's Python frames before it if its process has them walked (launch: the stack is
 * a launch's). */
static __always_inline void gs_emit_stack_now(struct pt_regs *ctx, const struct call_state *st,
					      __u64 arg, bool launch)
{
	struct gs_ev_stack *e;
	struct gs_py_cfg *py;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	long n;

	if (!stack_every)
		return;
	py = bpf_map_lookup_elem(&py_cfg, &tgid);
	if (py)
		gs_emit_pystack(py, st->ts, pid_tgid, launch);
	e = gs_reserve(sizeof(*e), GS_EV_STACK, GS_SRC_UPROBE, st->ts, pid_tgid);
	if (!e)
		return;
	n = bpf_get_stack(ctx, e->ip, sizeof(e->ip), BPF_F_USER_STACK);
	if (n <= 0) {
		bpf_ringbuf_discard(e, 0);
		return;
	}
	e->arg = arg;
	e->api = (__u16)st->api;
	e->nframes = (__u16)(n / 8);
	e->skipped = 0;
	e->h.size = offsetof(struct gs_ev_stack, ip) + (__u32)(n / 8) * 8;
	gs_submit(e);
}

/* Whether this call is the stack_every-th of its kind on this CPU (its stack due). */
static __always_inline bool gs_stack_due(void)
{
	__u32 zero = 0;
	__u64 *count;

	if (!stack_every)
		return false;
	count = bpf_map_lookup_elem(&stack_count, &zero);
	return count && (*count)++ % stack_every == 0;
}

/* The same, sampled: only every stack_every-th such call (per CPU). */
static __always_inline void gs_emit_stack(struct pt_regs *ctx, const struct call_state *st,
					  __u64 arg, bool sampled)
{
	if (!sampled || gs_stack_due())
		gs_emit_stack_now(ctx, st, arg, sampled);
}

/* A failure worth a stack: not a status (CUDA_ERROR_NOT_READY from a poll). */
static __always_inline bool gs_failed(long rc)
{
	return (__s32)rc != 0 && (__s32)rc != 600;
}

/* The entry program every traced function of the object shares. */
SEC("uprobe")
int BPF_KPROBE(call_enter)
{
	return gs_call_enter(ctx);
}

/* A failed call of a family whose record has no room for the result: report it as an API
 * record, so every non-zero result is an event. */
static __always_inline void gs_emit_failure(const struct call_state *st, __u64 now, __s32 rc)
{
	struct gs_ev_api *e = gs_reserve_call(sizeof(*e), GS_EV_API, st, now, rc);

	if (!e)
		return;
	e->arg0 = st->args[0];
	e->arg1 = st->args[1];
	e->out = 0;
	gs_submit(e);
}

#endif /* GPUSCOPE_CALLS_BPF_H */
