// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The OS under the traced processes, on the event clock: when their threads were off the
 * CPU and why, page faults, block I/O they issued, socket bytes, and selected system calls.
 * Everything is filtered in the kernel to the traced process tree, and what is frequent is
 * shaped here rather than streamed raw:
 *   - off-CPU intervals and system calls shorter than min_ns are not reported;
 *   - page faults are batched per thread: one record per thread per millisecond at most,
 *     flushed when the thread leaves the CPU (major faults from the thread's own counter).
 * Only tracepoints (tp_btf): kprobes and fentry are not available on our kernels.
 */
#include "common.bpf.h"

#define TASK_INTERRUPTIBLE   0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define FAULT_BATCH_NS	     1000000ULL
#define REQ_OP_MASK	     0xff

/* Shorter off-CPU intervals and system calls are not reported (set by the loader). */
const volatile __u64 min_ns = 10000;

struct switched_out {
	__u64 ts;    /* 0: on the CPU, or not traced when it left it */
	__u64 woken; /* when it became runnable again (0: not yet) */
	__u64 maj_flt;
	__s32 syscall;
	__u32 reason;
	__u32 cpu;
};

struct in_syscall {
	__u64 ts;
	__u64 arg0, arg1;
	__s32 nr;    /* -1: in none */
	bool report; /* one of the selected calls */
};

struct fault_batch {
	__u64 first, last, addr, ip, maj_flt;
	__u32 count, error_code; /* count 0: no batch */
};

/*
 * Per thread of a traced process: when it left the CPU, the system call it is in, its
 * batch of page faults, and whether its process is traced (gs_tracked_gen's when last
 * found). In the thread's own storage, not in hash tables by thread id: each program then
 * finds it with one helper call, where the tables took lookups, updates and deletes (a
 * system call's two programs 490 against 230 ns a call on the CPU machine). An untraced
 * thread has none, so the switches and system calls of other programs cost a failed lookup;
 * and the storage goes with the thread.
 */
struct os_thread {
	struct switched_out out;
	struct in_syscall sc;
	struct fault_batch fb;
	__u64 tracked;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct os_thread);
} os_thread SEC(".maps");

/*
 * In-flight requests. Not an LRU map: under a burst (a read of a thousand small requests)
 * an LRU map evicts entries well before it is full, and those requests were lost. Stale
 * entries (a request merged into another, never issued) cannot pile up: blk-mq's requests
 * are preallocated per tag, so their addresses come back, and the entry is replaced.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct request * */
	__type(value, struct gs_block_req);
} requests SEC(".maps");

static __always_inline __u64 pid_tgid_of(struct task_struct *t)
{
	return (__u64)t->tgid << 32 | (__u32)t->pid;
}

/* The system calls reported one by one (x86-64 numbers). */
static __always_inline bool selected(long nr)
{
	switch (nr) {
	case 0:	  /* read */
	case 1:	  /* write */
	case 7:	  /* poll */
	case 9:	  /* mmap */
	case 11:  /* munmap */
	case 16:  /* ioctl */
	case 17:  /* pread64 */
	case 18:  /* pwrite64 */
	case 19:  /* readv */
	case 20:  /* writev */
	case 35:  /* nanosleep */
	case 74:  /* fsync */
	case 202: /* futex */
	case 230: /* clock_nanosleep */
	case 232: /* epoll_wait */
	case 271: /* ppoll */
	case 281: /* epoll_pwait */
		return true;
	default:
		return false;
	}
}

static __always_inline void flush_faults(__u64 pid_tgid, struct fault_batch *b, __u64 maj_now)
{
	struct gs_ev_faults *e =
		gs_reserve(sizeof(*e), GS_EV_FAULTS, GS_SRC_TRACEPOINT, b->first, pid_tgid);

	if (e) {
		e->last_ts = b->last;
		e->addr = b->addr;
		e->ip = b->ip;
		e->count = b->count;
		e->major = maj_now > b->maj_flt ? (__u32)(maj_now - b->maj_flt) : 0;
		if (e->major > e->count)
			e->major = e->count;
		e->error_code = b->error_code;
		e->pad = 0;
		gs_submit(e);
	}
	b->count = 0;
}

/* One of the in-process plane's own threads (named GS_THREAD_PREFIX...): what they do is
 * not the program's, and a finding must not blame them. */
static __always_inline bool own_thread(const char *comm)
{
	const char prefix[] = GS_THREAD_PREFIX;

	for (int i = 0; i < (int)sizeof(prefix) - 1; i++)
		if (comm[i] != prefix[i])
			return false;
	return true;
}

static __always_inline struct os_thread *os_thread_of(struct task_struct *task)
{
	return GS_STORAGE_OF(&os_thread, task);
}

/* task's storage (th: what os_thread_of found) if its process is traced; NULL if not, or
 * if there is no room. (A new one is in no system call.) */
static __always_inline struct os_thread *os_thread_traced(struct task_struct *task,
							  struct os_thread *th)
{
	return GS_TRACED_STORAGE(&os_thread, task, th, s_->sc.nr = -1);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(os_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	struct os_thread *th = prev->pid ? os_thread_of(prev) : NULL;
	struct switched_out *o;

	/* (Before the traced check: a thread's last switch comes after its process left
	 * the traced set.) */
	if (th && th->fb.count)
		flush_faults(pid_tgid_of(prev), &th->fb, prev->maj_flt);
	if (prev->pid && !own_thread(prev->comm) && (th = os_thread_traced(prev, th))) {
		o = &th->out;
		o->ts = now;
		o->woken = 0;
		o->maj_flt = prev->maj_flt;
		o->syscall = th->sc.nr;
		o->cpu = bpf_get_smp_processor_id();
		if (preempt || prev_state == 0) {
			o->reason = GS_OFFCPU_PREEMPTED;
			o->woken = now;
		} else if (prev_state & TASK_UNINTERRUPTIBLE) {
			o->reason = GS_OFFCPU_DISK;
		} else if (prev_state & TASK_INTERRUPTIBLE) {
			o->reason = GS_OFFCPU_SLEEP;
		} else {
			o->reason = GS_OFFCPU_OTHER;
		}
	}
	th = os_thread_of(next);
	if (!th || !th->out.ts)
		return 0;
	o = &th->out;
	if (now - o->ts >= min_ns) {
		struct gs_ev_offcpu *e = gs_reserve(sizeof(*e), GS_EV_OFFCPU, GS_SRC_TRACEPOINT,
						    o->ts, pid_tgid_of(next));
		__u64 maj = next->maj_flt;

		if (e) {
			e->dur_ns = now - o->ts;
			e->runq_ns = o->woken && o->woken <= now ? now - o->woken : 0;
			e->syscall = o->syscall;
			e->reason = o->reason;
			e->major_faults = maj > o->maj_flt ? (__u32)(maj - o->maj_flt) : 0;
			e->cpu = o->cpu;
			gs_submit(e);
		}
	}
	o->ts = 0;
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(os_wakeup, struct task_struct *p)
{
	struct os_thread *th = os_thread_of(p);

	if (th && th->out.ts && !th->out.woken)
		th->out.woken = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(os_sys_enter, struct pt_regs *regs, long id)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct os_thread *th = os_thread_traced(task, os_thread_of(task));

	if (!th)
		return 0;
	th->sc.nr = (__s32)id;
	th->sc.report = false;
	if (!selected(id) || own_thread(task->comm))
		return 0;
	th->sc.report = true;
	th->sc.ts = bpf_ktime_get_ns();
	/* (Read in place, as the trusted pointers they are: no helper call.) */
	th->sc.arg0 = regs->di;
	/* ioctl's request, futex's op, mmap's length; else the byte count */
	th->sc.arg1 = id == 16 || id == 202 || id == 9 ? regs->si : regs->dx;
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(os_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct os_thread *th = os_thread_of(task);
	struct in_syscall *sc;
	struct gs_ev_syscall *e;
	__u64 now;

	if (!th || th->sc.nr < 0)
		return 0;
	sc = &th->sc;
	now = bpf_ktime_get_ns();
	if (sc->report && now - sc->ts >= min_ns) {
		e = gs_reserve(sizeof(*e), GS_EV_SYSCALL, GS_SRC_TRACEPOINT, sc->ts,
			       pid_tgid_of(task));
		if (e) {
			e->dur_ns = now - sc->ts;
			e->ret = ret;
			e->arg0 = sc->arg0;
			e->arg1 = sc->arg1;
			e->nr = (__u32)sc->nr;
			e->pad = 0;
			gs_submit(e);
		}
	}
	sc->nr = -1;
	sc->report = false;
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(os_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct os_thread *th = os_thread_traced(t, os_thread_of(t));
	struct fault_batch *b;
	__u64 now;

	if (!th)
		return 0;
	now = bpf_ktime_get_ns();
	b = &th->fb;
	if (b->count && now - b->first >= FAULT_BATCH_NS)
		flush_faults(pid_tgid_of(t), b, t->maj_flt);
	if (b->count) {
		b->count++;
		b->last = now;
		return 0;
	}
	b->first = b->last = now;
	b->addr = address;
	b->ip = regs->ip;
	b->maj_flt = t->maj_flt;
	b->count = 1;
	b->error_code = (__u32)error_code;
	return 0;
}

static __always_inline void emit_block(const struct gs_block_req *io, __u64 dur_ns, __s32 error,
				       __u8 flags)
{
	struct gs_ev_block *e =
		gs_reserve(sizeof(*e), GS_EV_BLOCK, GS_SRC_TRACEPOINT, io->ts, io->pid_tgid);

	if (!e)
		return;
	e->h.flags = flags;
	e->dur_ns = dur_ns;
	e->sector = io->sector;
	e->bytes = io->bytes;
	e->dev = io->dev;
	e->op = io->op;
	e->error = error;
	gs_submit(e);
}

/*
 * Who a request is for: the task that makes it. Under load a request waits in the
 * scheduler's queue, or is sent back by a full device and waits again, and whoever runs
 * the queue issues it later: a kernel worker, or another task that submits or completes
 * I/O, a traced one among them. So the owner is taken when the request is made (always in
 * the submitting task), the time when it is issued to the device, the owner of every
 * request noted (an untraced task's as 0) until it completes. Else a request of another
 * program issued while a traced thread ran the queue was counted as the traced thread's
 * (seen: a loader's 64 MiB read counted as 65 with a writer beside it).
 * Where the kernel has it (6.5 and later), block_io_start is taken: it comes in the
 * submitting task for every request made from its I/O, those that skip the scheduler's
 * queue included, which have no insert and were lost (4 MiB of 64 beside a writer); else
 * the insert. A request issued with neither went straight to the device from its
 * submitter.
 *
 * A request's address is taken again only once it is freed. An entry still in flight
 * then is a completion this program never ran for: the kernel skips BPF programs at times
 * and counts no miss (seen on 6.18 beside a busy writer: a completion in tracefs, none
 * here, one request of a few thousand). Its record goes out now, its end unknown, so that
 * its bytes count (they were 1 to 27 MiB short of 2.5 GiB read).
 */
static __always_inline void own_request(struct request *rq)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), key = (__u64)rq;
	struct gs_block_req io = { .pid_tgid = gs_tracked(pid_tgid >> 32) ? pid_tgid : 0 };
	struct gs_block_req *old = bpf_map_lookup_elem(&requests, &key);

	if (old && old->ts && old->pid_tgid)
		emit_block(old, 0, 0, GS_HDR_END_UNSEEN);
	bpf_map_update_elem(&requests, &key, &io, BPF_ANY);
}

SEC("tp_btf/block_io_start")
int BPF_PROG(os_rq_start, struct request *rq)
{
	own_request(rq);
	return 0;
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(os_rq_insert, struct request *rq)
{
	own_request(rq);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(os_rq_issue, struct request *rq)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), key = (__u64)rq;
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);
	struct gs_block_req *queued = bpf_map_lookup_elem(&requests, &key);
	struct gs_block_req io = {};
	__u32 op;

	if (queued && !queued->pid_tgid)
		return 0; /* made by an untraced task */
	if (queued)
		pid_tgid = queued->pid_tgid; /* made by a traced task, issued by anyone */
	else if (!gs_tracked(pid_tgid >> 32))
		return 0;
	io.ts = bpf_ktime_get_ns();
	io.pid_tgid = pid_tgid;
	io.sector = BPF_CORE_READ(rq, __sector);
	io.bytes = BPF_CORE_READ(rq, __data_len);
	if (disk)
		io.dev = (__u32)BPF_CORE_READ(disk, major) << 20 |
			 (__u32)BPF_CORE_READ(disk, first_minor);
	op = BPF_CORE_READ(rq, cmd_flags) & REQ_OP_MASK;
	io.op = op == 0	  ? GS_BLOCK_READ
		: op == 1 ? GS_BLOCK_WRITE
		: op == 2 ? GS_BLOCK_FLUSH
		: op == 3 ? GS_BLOCK_DISCARD
			  : GS_BLOCK_OTHER;
	bpf_map_update_elem(&requests, &key, &io, BPF_ANY);
	return 0;
}

static __always_inline void complete_request(struct request *rq, __s32 error)
{
	__u64 key = (__u64)rq;
	struct gs_block_req *io = bpf_map_lookup_elem(&requests, &key);

	if (!io)
		return;
	if (io->ts && io->pid_tgid) /* (a traced task's, issued) */
		emit_block(io, bpf_ktime_get_ns() - io->ts, error, 0);
	bpf_map_delete_elem(&requests, &key);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(os_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	complete_request(rq, (__s32)error);
	return 0;
}

static __always_inline void net(struct sock *sk, int ret, __u32 dir)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct gs_ev_net *e;

	if (ret <= 0 || !gs_tracked(pid_tgid >> 32))
		return;
	e = gs_reserve(sizeof(*e), GS_EV_NET, GS_SRC_TRACEPOINT, bpf_ktime_get_ns(), pid_tgid);
	if (!e)
		return;
	e->bytes = (__u64)ret;
	e->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	e->protocol = BPF_CORE_READ(sk, sk_protocol);
	e->dir = dir;
	gs_submit(e);
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(os_send, struct sock *sk, int ret, int flags)
{
	net(sk, ret, GS_NET_SEND);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(os_recv, struct sock *sk, int ret, int flags)
{
	net(sk, ret, GS_NET_RECV);
	return 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(os_oom, struct task_struct *task, uid_t uid)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct gs_ev_proc *e;

	if (!gs_tracked(tgid))
		return 0;
	e = gs_reserve(sizeof(*e), GS_EV_PROC, GS_SRC_TRACEPOINT, bpf_ktime_get_ns(),
		       pid_tgid_of(task));
	if (!e)
		return 0;
	e->kind = GS_PROC_OOM_KILL;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->exit_code = 0;
	e->pad = 0;
	BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
	e->path[0] = 0;
	gs_submit(e);
	return 0;
}
