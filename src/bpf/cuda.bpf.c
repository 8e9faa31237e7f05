// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Uprobes on the CUDA driver (libcuda.so.1) and the runtime's registration entry points
 * (libcudart, or an executable that links it statically). Arguments are saved at entry by
 * the shared entry program (calls.bpf.h); each return program below decodes one family of
 * the table in gpuscope/api.h into one record of gpuscope/event.h.
 */
#include "calls.bpf.h"

/*
 * Launches through uprobe sessions (Linux 6.13; tracer.c chooses): one program at a
 * launch's entry and, only where it asks, at its return. A return costs as much as the
 * entry (a second trap and a return instance), and a launch's result is nearly always
 * success, so most launches are recorded at entry, with no result and no call time
 * (GS_LAUNCH_NO_RETURN). The return is asked for at one launch in launch_return_every per
 * CPU (those take the stack, within its rate, and give the call times the report scales
 * from), and at each kernel's launches until one has returned success on this CPU (a kernel
 * that cannot launch fails at its first launches: its failures are seen). Failures of a
 * kernel that launched before, and not sampled, are not seen: --stacks 1 reads every
 * result.
 */
#define LAUNCH_OK_SETS 256
#define LAUNCH_OK_WAYS 8
#define STACK_BURST    10

const volatile __u32 launch_return_every = 64;
/* Names read from the driver's objects (source/kernel_names.h): at a handle's first launch
 * returned on a CPU, the name whose address the handle's object holds DRIVER_NAME_AT bytes
 * in (driver 580) goes out as a name record of no lookup (GS_API_NONE), before the launch's;
 * user space takes it or not. */
const volatile bool driver_names = false;
#define DRIVER_NAME_AT 8
/* Launches' stacks: at most stack_rate a second a thread (0: every one due), STACK_BURST at
 * once, as the in-process plane's (inject/stacks.c); each due one skipped is counted here
 * (read at the end: tracer__stack_skips). A stack with the thread's Python frames costs it
 * tens of us: 1 in 64 launches of a training step was 1-2% of its time. */
const volatile __u32 stack_rate = 0;
__u64 stack_skips = 0;

extern bool bpf_session_is_return(void) __ksym __weak;

/* Per CPU: a launch count, and kernels whose launch returned success here (by handle and
 * process), eight to a set, the latest first. (A table of one to a slot, by a hash of the
 * handle's low bits: a ResNet-50 step's 78 kernels left 23 sharing a slot with another on an
 * H200, a quarter of its launches, each launch of two such kernels taking turns asking for its
 * return: kfunc-2026-11-30.md. Four to a set: kernels launched in turn, five in one set, each
 * asked at every launch; with 200 kernels, some set of 256 holds five in a quarter of the
 * processes. Eight: one in 30,000.) */
struct launch_cpu {
	__u64 count;
	__u64 ok[LAUNCH_OK_SETS][LAUNCH_OK_WAYS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct launch_cpu);
} launch_cpu SEC(".maps");

/*
 * Per thread: its latest launch recorded, and its latest asynchronous set. A tail call from
 * one entry point into another of its family (a wrapper's jmp) enters with the same stack
 * pointer, caller and kernel (or destination) at another entry point; the thread's next call
 * from the same place enters the same entry point. (Not by time: a descheduled thread may
 * take any time between the two entries.) When the first entry asked for its return, the
 * return probe has put its trampoline where the caller was: then the call's state still in
 * flight at that stack pointer tells (gs_tail_called).
 */
struct last_entry {
	__u64 sp, caller, arg; /* arg: the launch's function, the set's destination */
	__u32 api, asked;      /* asked: its return was asked for */
};

struct launch_thread {
	struct last_entry launch, set;
	__u64 stack_tat; /* when its next stack is due by the rate (gs_rate_allows's scheme) */
	__u64 tracked;	 /* gs_tracked_gen() when its process was last found traced */
	/* A cuKernelGetFunction whose return was not asked for: where its result went, the
	 * function expected there, its kernel and its place in kfunc_thread (kfunc_check). */
	__u64 kf_out, kf_func, kf_kernel;
	__u32 kf_slot, pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct launch_thread);
} launch_thread SEC(".maps");

/* The launching thread's storage if its process is traced (NULL: not traced, or no room). */
static __always_inline struct launch_thread *launch_thread_traced(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct launch_thread *t = GS_STORAGE_OF(&launch_thread, task);

	return GS_TRACED_STORAGE(&launch_thread, task, t, (void)0);
}

/* A launch's or a set's entry: the CPU's table, the thread's storage (its process traced),
 * the call's state and its description (NULL: nothing to record). */
static __always_inline const struct gs_api_desc *entry_state(struct pt_regs *ctx, __u64 sp,
							     struct call_state *st,
							     struct launch_cpu **c,
							     struct launch_thread **t)
{
	__u32 zero = 0;

	*c = bpf_map_lookup_elem(&launch_cpu, &zero);
	if (!*c || !(*t = launch_thread_traced()))
		return NULL;
	gs_call_state(ctx, st, sp, bpf_ktime_get_ns());
	return gs_desc(st->api);
}

/* Whether the call entering (st, with arg) is a tail call from the last entry of its family
 * (see launch_thread); if not, it becomes that entry. */
static __always_inline bool tail_called(struct last_entry *e, const struct call_state *st,
					__u64 arg)
{
	if (e->sp == st->sp && e->arg == arg && e->api != st->api &&
	    (e->caller == st->caller || (e->asked && gs_tail_called(st->sp, st->ts))))
		return true;
	e->sp = st->sp;
	e->caller = st->caller;
	e->arg = arg;
	e->api = st->api;
	e->asked = 0;
	return false;
}

/*
 * cuKernelGetFunction(CUfunction *out, CUkernel kernel): a ResNet-50 training step calls it
 * 131 times (cuDNN's launches, budget-2026-11-29.md), each an entry and a return probe. Its
 * result is the kernel's function in the current context, which its arguments do not tell.
 * Where the thread's last two calls for the kernel returned the same function, its return
 * is asked for only at one call in launch_return_every of the thread's; the others are
 * taken as returning that function again (their failures are not seen, as a launch's).
 * The thread's next launch checks the result where it went: a launch of neither that
 * function nor the kernel itself, and that place not holding the function, has the kernel's
 * next calls read in full: two where the place holds the function launched (another context
 * current), one where it holds anything else (the place reused since, or the call failed).
 */
__u64 kfunc_unread = 0;	  /* calls whose return was not asked for (tracer__kfunc_counts) */
__u64 kfunc_rechecks = 0; /* of those, checked at a launch and found wanting */
__u64 kfunc_unloads = 0;  /* cuModuleUnload and cuLibraryUnload calls returned */

/*
 * Per thread that calls it: the functions its calls returned, by kernel, eight kernels to a
 * set, kept as long as no module or library was unloaded (a kernel's handle may then be
 * given to another). Four to a set: 60 kernels asked for in turn left five in one set, each
 * then read at every call, in a fifth of the runs on the test double (the heap's place, so
 * the handles, differ from run to run). Apart from launch_thread, whose storage every
 * launching thread takes at its first launch: 12 KiB there would make its creation an
 * allocation of several pages in a probe.
 */
#define KFUNC_SETS 64
#define KFUNC_WAYS 8

struct kfunc_seen {
	__u64 kernel, func;
	__u32 seen;    /* returns in a row that gave func */
	__u32 unloads; /* kfunc_unloads then */
};

struct kfunc_thread {
	__u32 count; /* calls that could have gone unread (one in launch_return_every is read) */
	__u32 pad;
	struct kfunc_seen kf[KFUNC_SETS * KFUNC_WAYS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct kfunc_thread);
} kfunc_thread SEC(".maps");

/* The calling thread's table (NULL: none, or no room: its calls then read in full). */
static __always_inline struct kfunc_thread *kfunc_thread_of(__u64 flags)
{
	return bpf_task_storage_get(&kfunc_thread, bpf_get_current_task_btf(), 0, flags);
}

/* kernel's set: its first place in kf */
static __always_inline __u32 kfunc_set(__u64 kernel)
{
	return (__u32)(gs_mix64(kernel) >> 58) * KFUNC_WAYS;
}

/* kernel's place in kf, or -1 */
static __always_inline int kfunc_find(const struct kfunc_thread *k, __u64 kernel)
{
	__u32 set = kfunc_set(kernel);

	for (int i = 0; i < KFUNC_WAYS; i++)
		if (k->kf[set + i].kernel == kernel)
			return (int)(set + i);
	return -1;
}

/* The thread's next launch after a call not read (see kfunc_unread): func launched. */
static __always_inline void kfunc_check(struct launch_thread *t, __u64 func)
{
	__u64 out = t->kf_out, got;
	struct kfunc_thread *k;
	struct kfunc_seen *s;

	t->kf_out = 0;
	if (func == t->kf_func || func == t->kf_kernel || (got = gs_load_u64(out)) == t->kf_func ||
	    !(k = kfunc_thread_of(0)))
		return;
	s = &k->kf[t->kf_slot & (KFUNC_SETS * KFUNC_WAYS - 1)];
	if (s->kernel != t->kf_kernel || s->func != t->kf_func)
		return;
	/* (The function launched there: another context's, learnt from the next two calls.
	 * Anything else there: the place reused, likely; the next call read to make sure.) */
	s->seen = got == func ? 0 : 1;
	__sync_fetch_and_add(&kfunc_rechecks, 1);
}

/* (After an unload a handle may be another function's: it is new on every CPU again.) */
static __always_inline __u64 launch_ok_key(__u64 func, __u64 pid_tgid)
{
	return func ^ (pid_tgid >> 32 << 44) ^ ((__u64)(__u32)kfunc_unloads << 32);
}

/* key's set */
static __always_inline __u64 *launch_ok_set(struct launch_cpu *c, __u64 key)
{
	return c->ok[gs_mix64(key) >> 56];
}

static __always_inline bool launch_ok_has(const __u64 *set, __u64 key)
{
	for (int i = 0; i < LAUNCH_OK_WAYS; i++)
		if (set[i] == key)
			return true;
	return false;
}

/* (key not in set) */
static __always_inline void launch_ok_put(__u64 *set, __u64 key)
{
	for (int i = LAUNCH_OK_WAYS - 1; i > 0; i--)
		set[i] = set[i - 1];
	set[0] = key;
}

/* A launch's stack is due (every Nth): whether its thread keeps to the rate (counted when
 * not). */
static __always_inline bool stack_allowed(struct launch_thread *t, __u64 now)
{
	__u64 gap;

	if (!stack_rate)
		return true;
	gap = 1000000000ULL / stack_rate;
	if (!t || t->stack_tat > now + (STACK_BURST - 1) * gap) {
		__sync_fetch_and_add(&stack_skips, 1);
		return false;
	}
	t->stack_tat = (t->stack_tat > now ? t->stack_tat : now) + gap;
	return true;
}

static __always_inline void emit_kname(const struct call_state *st, __u64 handle, __u64 scope,
				       __u64 name_addr, __u8 ns, __u16 api)
{
	struct gs_ev_kname *e;
	long n;

	e = gs_reserve(sizeof(*e), GS_EV_KNAME, GS_SRC_UPROBE, st->ts, bpf_get_current_pid_tgid());
	if (!e)
		return;
	e->handle = handle;
	e->scope = scope;
	e->name_addr = name_addr;
	e->api = api;
	e->ns = ns;
	e->truncated = 0;
	e->pad = 0;
	n = bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)name_addr);
	if (n <= 0) {
		e->name[0] = 0;
		n = 1;
	}
	if (n >= (long)sizeof(e->name))
		e->truncated = 1;
	e->len = (__u16)(n - 1);
	/* The record ends after the name, rounded up to 8 bytes; consumers use h.size. */
	e->h.size = (offsetof(struct gs_ev_kname, name) + n + 7) & ~7u;
	gs_submit(e);
}

/* The name func's object holds (see driver_names), as a name record of no lookup. */
static __always_inline void emit_driver_name(const struct call_state *st, __u64 func)
{
	__u64 at = 0;

	if (!func || (func & 7) ||
	    bpf_probe_read_user(&at, sizeof(at), (const void *)(func + DRIVER_NAME_AT)) || !at)
		return;
	emit_kname(st, func, 0, at, GS_NS_DRIVER, GS_API_NONE);
}

/* A launch returned (classic: every launch; session: those asked for). */
static __always_inline int launch_returned(struct pt_regs *ctx, long rc, bool session)
{
	const struct gs_api_desc *d;
	struct call_state st;
	struct gs_ev_launch *e;
	struct launch_cpu *c;
	__u32 zero = 0;
	__u64 now, func;

	d = gs_returning(ctx, &st, &now);
	if (!d)
		return 0;
	func = st.args[d->shape == GS_SH_L_EX ? 1 : 0];
	if (gs_failed(rc) || (session && (st.flags & GS_CS_STACK)) ||
	    (!session && gs_stack_due() &&
	     stack_allowed(bpf_task_storage_get(&launch_thread, bpf_get_current_task_btf(), 0,
						BPF_LOCAL_STORAGE_GET_F_CREATE),
			   now)))
		gs_emit_stack_now(ctx, &st, func, !gs_failed(rc));
	if ((session || driver_names) && (__s32)rc == 0 &&
	    (c = bpf_map_lookup_elem(&launch_cpu, &zero))) {
		__u64 key = launch_ok_key(func, bpf_get_current_pid_tgid());
		__u64 *set = launch_ok_set(c, key);

		if (!launch_ok_has(set, key)) {
			if (driver_names)
				emit_driver_name(&st, func);
			launch_ok_put(set, key);
		}
	}
	e = gs_reserve_call(sizeof(*e), GS_EV_LAUNCH, &st, now, (__s32)rc);
	if (!e)
		return 0;
	gs_decode_launch(d, st.args, e);
	gs_submit(e);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ret_launch, long rc)
{
	return launch_returned(ctx, rc, false);
}

/* A launch entered: its return asked for (0), or its record now and no return (1). The
 * record is made on the stack and copied out (one helper call, not a reserve and a submit);
 * the ring's fill is asked at one record in 16 per CPU (gs_wake_flags). */
static __always_inline int launch_entered(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now, key, func, flags;
	__u64 sp = PT_REGS_SP(ctx);
	const struct gs_api_desc *d;
	struct call_state st = {};
	struct launch_thread *t;
	struct gs_ev_launch e;
	struct launch_cpu *c;
	bool sampled;

	d = entry_state(ctx, sp, &st, &c, &t);
	if (!d)
		return 1;
	now = st.ts;
	func = st.args[d->shape == GS_SH_L_EX ? 1 : 0];
	if (t->kf_out)
		kfunc_check(t, func);
	if (tail_called(&t->launch, &st, func))
		return 1;
	key = launch_ok_key(func, id);
	sampled = c->count++ % (launch_return_every ?: 1) == 0;
	if (sampled || !launch_ok_has(launch_ok_set(c, key), key)) {
		st.flags = sampled && stack_every && stack_allowed(t, now) ? GS_CS_STACK : 0;
		if (gs_call_keep(&st)) {
			t->launch.asked = 1;
			return 0;
		}
		/* (No room to keep it: recorded now, without its result.) */
	}
	gs_fill(&e.h, sizeof(e), GS_EV_LAUNCH, GS_SRC_UPROBE, now, id);
	gs_fill_call(&e.c, &st, now, 0);
	gs_decode_launch(d, st.args, &e);
	e.flags |= GS_LAUNCH_NO_RETURN;
	flags = wake_bytes && c->count & 15 ? BPF_RB_NO_WAKEUP : gs_wake_flags();
	if (bpf_ringbuf_output(&events, &e, sizeof(e), flags))
		gs_count_drop(GS_EV_LAUNCH);
	return 1;
}

/*
 * Asynchronous 1-D sets (cuMemsetD32Async...: 33 a ResNet-50 step, 107 a GPT-2 one) as
 * uprobe sessions too: their return says only the result (their call time is the
 * enqueue's), so it is asked for as a launch's, until a call of that function has succeeded
 * on the CPU and then at one call in launch_return_every; the others are recorded at entry,
 * their failures unseen. (Each was an entry and a return probe.) Asynchronous copies keep
 * both: one from pageable memory blocks its caller, and the steps analysis reads that time.
 */
static __always_inline __u64 set_ok_key(__u32 api, __u64 pid_tgid)
{
	return (1ULL << 63 | api) ^ (pid_tgid >> 32 << 44);
}

static __always_inline int set_entered(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now, key;
	__u64 sp = PT_REGS_SP(ctx);
	const struct gs_api_desc *d;
	struct call_state st = {};
	struct launch_thread *t;
	struct gs_ev_copy e;
	struct launch_cpu *c;

	barrier_var(sp); /* (read first: the verifier refuses a context pointer moved) */
	d = entry_state(ctx, sp, &st, &c, &t);
	if (!d)
		return 1;
	now = st.ts;
	if (tail_called(&t->set, &st, st.args[0]))
		return 1;
	key = set_ok_key(st.api, id);
	if (c->count++ % (launch_return_every ?: 1) == 0 ||
	    !launch_ok_has(launch_ok_set(c, key), key)) {
		if (gs_call_keep(&st)) {
			t->set.asked = 1;
			return 0;
		}
	}
	gs_fill(&e.h, sizeof(e), GS_EV_COPY, GS_SRC_UPROBE, now, id);
	gs_fill_call(&e.c, &st, now, 0);
	gs_decode_copy(d, st.args, &e);
	e.flags |= GS_COPY_NO_RETURN;
	if (bpf_ringbuf_output(&events, &e, sizeof(e), gs_wake_flags()))
		gs_count_drop(GS_EV_COPY);
	return 1;
}

/* Loaded as a uprobe session program (BPF_TRACE_UPROBE_SESSION) when tracer.c uses it. */
SEC("uprobe")
int BPF_KPROBE(launch_session)
{
	if (bpf_session_is_return())
		return launch_returned(ctx, PT_REGS_RC(ctx), true);
	return launch_entered(ctx);
}

static __always_inline void emit_kalias(const struct call_state *st, __u64 handle, __u64 target,
					__u8 target_ns)
{
	struct gs_ev_kalias *e;

	e = gs_reserve(sizeof(*e), GS_EV_KALIAS, GS_SRC_UPROBE, st->ts, bpf_get_current_pid_tgid());
	if (!e)
		return;
	e->handle = handle;
	e->target = target;
	e->api = (__u16)st->api;
	e->target_ns = target_ns;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	gs_submit(e);
}

/* A cuKernelGetFunction call of this thread returned kernel's function func (0: failed). */
static __always_inline void kfunc_returned(__u64 kernel, __u64 func)
{
	struct kfunc_thread *k = kfunc_thread_of(BPF_LOCAL_STORAGE_GET_F_CREATE);
	struct kfunc_seen *s;
	__u32 set;
	int at;

	if (!k)
		return;
	at = kfunc_find(k, kernel);
	if (at >= 0) {
		s = &k->kf[at & (KFUNC_SETS * KFUNC_WAYS - 1)];
		if (s->func == func && s->unloads == (__u32)kfunc_unloads) {
			s->seen += s->seen < 2;
			return;
		}
	} else {
		/* (a new one first in its set, the oldest let go) */
		set = kfunc_set(kernel);
		for (int i = KFUNC_WAYS - 1; i > 0; i--)
			k->kf[set + i] = k->kf[set + i - 1];
		s = &k->kf[set];
	}
	s->kernel = kernel;
	s->func = func;
	s->seen = 1;
	s->unloads = (__u32)kfunc_unloads;
}

/* A name lookup returned. */
static __always_inline int kname_returned(struct pt_regs *ctx, long rc)
{
	const struct gs_api_desc *d;
	struct call_state st;
	__u64 now, func;

	d = gs_returning(ctx, &st, &now);
	if (!d)
		return 0;
	if (d->shape == GS_SH_N_REGISTER) {
		/* void __cudaRegisterFunction(void **fatbin, const char *hostFun,
		 *                              char *deviceFun, ...): read at return, when the
		 * runtime has touched the name and its page is resident. */
		emit_kname(&st, st.args[1], st.args[0], st.args[2], GS_NS_HOSTFN, (__u16)st.api);
		return 0;
	}
	if ((__s32)rc != 0) {
		if (d->shape == GS_SH_N_KFUNC)
			kfunc_returned(st.args[1], 0);
		gs_emit_stack(ctx, &st, 0, false);
		gs_emit_failure(&st, now, (__s32)rc);
		return 0;
	}
	switch (d->shape) {
	case GS_SH_N_GET:
		func = gs_load_u64(st.args[0]);
		emit_kname(&st, func, st.args[1], st.args[2], GS_NS_DRIVER, (__u16)st.api);
		/* (What the handle's object says, for user space to check against the lookup.) */
		if (driver_names)
			emit_driver_name(&st, func);
		break;
	case GS_SH_N_KFUNC:
		func = gs_load_u64(st.args[0]);
		emit_kalias(&st, func, st.args[1], GS_NS_DRIVER);
		kfunc_returned(st.args[1], func);
		break;
	case GS_SH_N_GETKERNEL:
		emit_kalias(&st, gs_load_u64(st.args[0]), st.args[1], GS_NS_HOSTFN);
		break;
	}
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ret_kname, long rc)
{
	return kname_returned(ctx, rc);
}

/* cuKernelGetFunction entered (see kfunc_unread): its return asked for (0), or not (1). */
static __always_inline int kfunc_entered(struct pt_regs *ctx)
{
	__u64 sp = PT_REGS_SP(ctx), out = PT_REGS_PARM1(ctx), kernel = PT_REGS_PARM2(ctx);
	struct kfunc_seen *s = NULL;
	struct launch_thread *t;
	struct kfunc_thread *k;
	struct call_state st;
	int at = -1;

	barrier_var(sp); /* (read first: the verifier refuses a context pointer moved) */
	t = launch_thread_traced();
	if (!t)
		return 1;
	k = kfunc_thread_of(0);
	if (k && (at = kfunc_find(k, kernel)) >= 0)
		s = &k->kf[at & (KFUNC_SETS * KFUNC_WAYS - 1)];
	if (s && s->func && s->seen >= 2 && s->unloads == (__u32)kfunc_unloads &&
	    k->count++ % (launch_return_every ?: 1)) {
		t->kf_out = out;
		t->kf_func = s->func;
		t->kf_kernel = kernel;
		t->kf_slot = (__u32)at;
		__sync_fetch_and_add(&kfunc_unread, 1);
		return 1;
	}
	gs_call_state(ctx, &st, sp, bpf_ktime_get_ns());
	return gs_call_keep(&st) ? 0 : 1;
}

/* Loaded as a uprobe session program, as launch_session. */
SEC("uprobe")
int BPF_KPROBE(kfunc_session)
{
	if (bpf_session_is_return())
		return kname_returned(ctx, PT_REGS_RC(ctx));
	return kfunc_entered(ctx);
}

/* A call of one family returned: a stack if it failed (and for every allocation, where
 * leaks come from), then its record. Inlined with constant arguments per family. */
static __always_inline int returned(struct pt_regs *ctx, long rc, __u16 type, __u32 size)
{
	const struct gs_api_desc *d;
	struct call_state st;
	void *e;
	__u64 now;

	d = gs_returning(ctx, &st, &now);
	if (!d)
		return 0;
	if (type == GS_EV_API &&
	    (st.api == GS_API_CU_MODULE_UNLOAD || st.api == GS_API_CU_LIBRARY_UNLOAD))
		__sync_fetch_and_add(&kfunc_unloads, 1); /* (see kfunc_unread) */
	/* (Other calls: only failures, and those always recorded.) */
	if (type == GS_EV_API && (__s32)rc == 0 && !(d->flags & GS_AF_ALWAYS))
		return 0;
	if (gs_failed(rc) ||
	    (type == GS_EV_MEM &&
	     (d->shape == GS_SH_M_ALLOC || d->shape == GS_SH_M_PITCH || d->shape == GS_SH_M_ASYNC ||
	      d->shape == GS_SH_M_POOL || d->shape == GS_SH_M_CREATE)))
		gs_emit_stack(ctx, &st, 0, false);
	e = gs_reserve_call(size, type, &st, now, (__s32)rc);
	if (!e)
		return 0;
	if (type == GS_EV_MEM)
		gs_decode_mem(d, st.args, (__s32)rc == 0, e);
	else if (type == GS_EV_COPY)
		gs_decode_copy(d, st.args, e);
	else if (type == GS_EV_SYNC)
		gs_decode_sync(d, st.args, e);
	else
		gs_decode_api(d, st.args, (__s32)rc == 0, e);
	gs_submit(e);
	return 0;
}

/* clang-format off */
#define RETURNED(prog, type, ev)						\
	SEC("uretprobe") int BPF_KRETPROBE(prog, long rc)			\
	{									\
		return returned(ctx, rc, type, sizeof(struct ev));		\
	}
RETURNED(ret_mem, GS_EV_MEM, gs_ev_mem)
RETURNED(ret_copy, GS_EV_COPY, gs_ev_copy)
RETURNED(ret_sync, GS_EV_SYNC, gs_ev_sync)
RETURNED(ret_api, GS_EV_API, gs_ev_api)
/* clang-format on */

/* Loaded as a uprobe session program, as launch_session: a successful return marks its
 * function as having succeeded on the CPU (set_entered). */
SEC("uprobe")
int BPF_KPROBE(set_session)
{
	struct launch_cpu *c;
	__u32 zero = 0;
	long rc;

	if (!bpf_session_is_return())
		return set_entered(ctx);
	rc = PT_REGS_RC(ctx);
	if ((__s32)rc == 0 && (c = bpf_map_lookup_elem(&launch_cpu, &zero))) {
		__u64 key =
			set_ok_key((__u32)bpf_get_attach_cookie(ctx), bpf_get_current_pid_tgid());
		__u64 *set = launch_ok_set(c, key);

		if (!launch_ok_has(set, key))
			launch_ok_put(set, key);
	}
	return returned(ctx, rc, GS_EV_COPY, sizeof(struct gs_ev_copy));
}

/* Python exceptions: how a probe's cookie says where the exception is. */
enum {
	PYEXC_RAISE = 1,
	PYEXC_DISPLAY_FILE = 2,
	PYEXC_DISPLAY = 3
};

/* The first 4 bytes of obj's type's name, as a little-endian number (PY_STR: "str" and its
 * NUL; PY_TUPLE: "tupl"). */
#define PY_STR	 0x00727473U
#define PY_TUPLE 0x6c707574U

static __always_inline __u32 py_type4(__u64 obj)
{
	__u32 name = 0;

	bpf_probe_read_user(&name, sizeof(name), (const void *)gs_read64(gs_read64(obj + 8) + 24));
	return name;
}

/* Raises counted by (process, type, site); their first GS_PYEXC_FULL come as records
 * (gpuscope takes the counts when a process exits: src/source/kernel_py.c). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct gs_pyexc_key);
	__type(value, __u64);
} py_exc_count SEC(".maps");

/* A traceback's walk, for bpf_loop: its frames into the scratch frames, outermost first. */
struct tb_walk {
	__u64 tb;
	__u32 n;
	__s16 f_code;
	bool frame_obj; /* 3.11 and later: a frame object holds its interpreter frame at 24 */
};

/* One traceback entry (tb_next at 16, tb_frame at 24, tb_lasti at 32, in bytes); 1 (stop)
 * at the end. */
static long py_tb(__u32 i, void *ctx)
{
	struct tb_walk *w = ctx;
	__u64 *frames = gs_py_frames(), f, code;
	__s32 lasti = 0;

	if (!frames || !w->tb || w->n >= GS_PYSTACK_MAX)
		return 1;
	f = gs_read64(w->tb + 24);
	if (w->frame_obj)
		f = gs_read64(f + 24);
	code = gs_read64(f + w->f_code) & ~7ULL;
	bpf_probe_read_user(&lasti, sizeof(lasti), (const void *)(w->tb + 32));
	if (code)
		frames[w->n++ & (GS_PYSTACK_MAX - 1)] = GS_PYFRAME(code, lasti > 0 ? lasti : 0);
	w->tb = gs_read64(w->tb + 16);
	return 0;
}

/* Whether a raise at (type, its innermost frame) is one of its site's first: counted. */
static __always_inline bool py_exc_first(struct gs_py_cfg *c, __u64 pid_tgid, __u64 tstate,
					 __u64 type, __u64 *site)
{
	struct gs_pyexc_key k = { .tgid = pid_tgid >> 32, .type_addr = type };
	__u64 entry, one = 1, *count, *frames;
	bool borrowed;

	frames = gs_py_frames();
	if (frames && gs_py_walk(c, pid_tgid, tstate, 3, &entry, 0, &borrowed))
		k.site = frames[0];
	*site = k.site;
	count = bpf_map_lookup_elem(&py_exc_count, &k);
	if (!count) {
		bpf_map_update_elem(&py_exc_count, &k, &one, BPF_ANY);
		return true;
	}
	return __sync_fetch_and_add(count, 1) < GS_PYEXC_FULL;
}

/*
 * An exception raised (_PyErr_SetObject(tstate, type, value): counted, and one of its
 * site's first) or printed as uncaught (_PyErr_Display(file, type, value, tb);
 * PyErr_Display(type, value, tb)), in a process whose Python frames are walked: its type's name (tp_name), its text (the value if a str;
 * else its first item if a str, of the value if a tuple (KeyError's), else of its args,
 * a tuple at 24; a tuple's first item is at 24) and the thread's Python frames.
 */
SEC("uprobe")
int BPF_KPROBE(py_exc)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), cookie = bpf_get_attach_cookie(ctx);
	__u32 tgid = pid_tgid >> 32, n;
	struct gs_py_cfg *c = bpf_map_lookup_elem(&py_cfg, &tgid);
	/* (Both read first: a context offset chosen at run time is refused.) */
	__u64 arg1 = PT_REGS_PARM1(ctx), arg2 = PT_REGS_PARM2(ctx), arg3 = PT_REGS_PARM3(ctx),
	      arg4 = PT_REGS_PARM4(ctx);
	struct tb_walk tw = { .f_code = c ? c->f_code : 0, .frame_obj = c && !c->lasti_int };
	__u64 type, value, text, args, entry = 0, *frames, site = 0, tstate = 0;
	struct gs_ev_pyexc *e;
	__u32 state = 0;
	bool borrowed;

	if (!c)
		return 0;
	barrier_var(arg1);
	barrier_var(arg2);
	barrier_var(arg3);
	barrier_var(arg4);
	if (cookie == PYEXC_RAISE) {
		tstate = arg1;
		type = arg2;
		value = arg3;
		if (!py_exc_first(c, pid_tgid, tstate, type, &site))
			return 0;
	} else {
		value = cookie == PYEXC_DISPLAY_FILE ? arg3 : arg2;
		type = gs_read64(value + 8);
	}
	if (cookie != PYEXC_RAISE) {
		/* Uncaught: the frames of its traceback (those it went through are gone). */
		tw.tb = cookie == PYEXC_DISPLAY_FILE ? arg4 : arg3;
		bpf_loop(GS_PYSTACK_MAX, py_tb, &tw, 0);
	}
	n = tw.n ?: gs_py_walk(c, pid_tgid, tstate, 2 * GS_PYSTACK_MAX, &entry, 0, &borrowed);
	frames = gs_py_frames();
	if (!frames)
		return 0;
	if (cookie != PYEXC_RAISE)
		site = n ? frames[tw.n ? (n - 1) & (GS_PYSTACK_MAX - 1) : 0] : 0;
	e = gs_reserve(sizeof(*e), GS_EV_PYEXC, GS_SRC_UPROBE, bpf_ktime_get_ns(), pid_tgid);
	if (!e)
		return 0;
	e->kind = cookie == PYEXC_RAISE ? GS_PYEXC_RAISED : GS_PYEXC_UNCAUGHT;
	e->outer_first = tw.n > 0;
	e->pad2 = 0;
	e->nframes = (__u16)n;
	e->type_addr = type;
	e->site = site;
	e->count = 1;
	if (bpf_probe_read_user_str(e->type, sizeof(e->type), (const void *)gs_read64(type + 24)) <=
	    0)
		e->type[0] = 0;
	/* The str: the value, or the first item of it (a tuple) or of its args. */
	text = value;
	if (value && py_type4(value) != PY_STR) {
		args = py_type4(value) == PY_TUPLE ? value : gs_read64(value + 24);
		text = args && gs_read64(args + 16) >= 1 ? gs_read64(args + 24) : 0;
	}
	if (text) {
		bpf_probe_read_user(&state, sizeof(state), (const void *)(text + 32));
		/* (compact and ascii: its characters follow its header) */
		text = py_type4(text) == PY_STR && (state & 0x60) == 0x60 ? text + c->str_ascii : 0;
	}
	if (!text || bpf_probe_read_user_str(e->text, sizeof(e->text), (const void *)text) <= 0)
		e->text[0] = 0;
	__builtin_memcpy(e->frames, frames, sizeof(e->frames));
	e->h.size = offsetof(struct gs_ev_pyexc, frames) +
		    (n < GS_PYSTACK_MAX ? n : GS_PYSTACK_MAX) * 8;
	gs_submit(e);
	return 0;
}
