// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The traced process tree: children of traced processes become traced (unless following is
 * off), and fork, exec and exit are reported. Opening a CUDA or NCCL library is reported so
 * user space can attach to libraries loaded after the start (libcuda is dlopen'ed).
 */
#include "common.bpf.h"

const volatile bool follow_children = true;

static __always_inline void emit_proc(struct task_struct *p, __u32 kind, __u32 ppid,
				      __s32 exit_code, const char *path)
{
	struct gs_ev_proc *e;
	__u64 pid_tgid = (__u64)BPF_CORE_READ(p, tgid) << 32 | (__u32)BPF_CORE_READ(p, pid);

	e = gs_reserve(sizeof(*e), GS_EV_PROC, GS_SRC_TRACEPOINT, bpf_ktime_get_ns(), pid_tgid);
	if (!e)
		return;
	e->kind = kind;
	e->ppid = ppid;
	e->exit_code = exit_code;
	e->pad = 0;
	BPF_CORE_READ_STR_INTO(&e->comm, p, comm);
	e->path[0] = 0;
	if (path)
		bpf_probe_read_kernel_str(e->path, sizeof(e->path), path);
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP); /* (rare, and wanted at once) */
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	__u32 one = 1;

	/* (Tracing every process, there is nothing to add, and forks are not news.) */
	if (ctgid == ptgid || !follow_children || track_all || !gs_tracked(ptgid))
		return 0;
	bpf_map_update_elem(&tracked, &ctgid, &one, BPF_ANY);
	emit_proc(child, GS_PROC_FORK, ptgid, 0, NULL);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(proc_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	/* (Tracing every process, execs are not news: the exporter names processes itself.) */
	if (track_all || !gs_tracked(BPF_CORE_READ(p, tgid)))
		return 0;
	emit_proc(p, GS_PROC_EXEC, BPF_CORE_READ(p, real_parent, tgid), 0,
		  BPF_CORE_READ(bprm, filename));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(proc_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	if (!gs_tracked(tgid))
		return 0;
	/* Only the last thread of the group ends the process. */
	if (BPF_CORE_READ(p, signal, live.counter) != 0) {
		if (track_all)
			return 0;
		emit_proc(p, GS_PROC_THREAD_EXIT, BPF_CORE_READ(p, real_parent, tgid),
			  (__s32)BPF_CORE_READ(p, exit_code), NULL);
		return 0;
	}
	emit_proc(p, GS_PROC_EXIT, BPF_CORE_READ(p, real_parent, tgid),
		  (__s32)BPF_CORE_READ(p, exit_code), NULL);
	bpf_map_delete_elem(&tracked, &tgid);
	gs_tracked_gone();
	return 0;
}

/* openat(2) of a traced process: remember the file name pointer until the call returns. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} open_names SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_openat")
int lib_open_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 name = ctx->args[1];

	if (!gs_tracked(id >> 32))
		return 0;
	bpf_map_update_elem(&open_names, &tid, &name, BPF_ANY);
	return 0;
}

static __always_inline bool has_prefix(const char *s, const char *prefix, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i] != prefix[i])
			return false;
	return true;
}

/* Room past the path so that prefix checks at any base-name offset stay in bounds. */
struct path_buf {
	char path[GS_PATH_MAX + 16];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct path_buf);
} scratch SEC(".maps");

/* Classify by the file's base name: what dlopen and the loader open. Each position is
 * tested on its own (no state carried between iterations) to keep verification linear. */
static __always_inline __u32 lib_kind(const char *path, int len)
{
	for (int i = 0; i < GS_PATH_MAX; i++) {
		const char *p = path + i;

		if (i >= len || !p[0])
			break;
		if (i > 0 && path[i - 1] != '/')
			continue;
		if (p[0] != 'l' || p[1] != 'i' || p[2] != 'b')
			continue;
		if (has_prefix(p, "libcudart", 9))
			return GS_LIB_CUDART;
		if (has_prefix(p, "libcuda.so", 10))
			return GS_LIB_CUDA;
		if (has_prefix(p, "libnccl", 7))
			return GS_LIB_NCCL;
	}
	return GS_LIB_NONE;
}

SEC("tracepoint/syscalls/sys_exit_openat")
int lib_open_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, zero = 0, kind;
	struct path_buf *buf;
	struct gs_ev_lib *e;
	__u64 *name;
	int len;

	name = bpf_map_lookup_elem(&open_names, &tid);
	if (!name)
		return 0;
	buf = bpf_map_lookup_elem(&scratch, &zero);
	if (ctx->ret < 0 || !buf)
		goto out;
	len = bpf_probe_read_user_str(buf->path, GS_PATH_MAX, (void *)*name);
	if (len <= 0)
		goto out;
	kind = lib_kind(buf->path, len);
	if (kind == GS_LIB_NONE)
		goto out;
	e = gs_reserve(sizeof(*e), GS_EV_LIB, GS_SRC_TRACEPOINT, bpf_ktime_get_ns(), id);
	if (!e)
		goto out;
	e->kind = kind;
	e->pad = 0;
	bpf_probe_read_kernel(e->path, sizeof(e->path), buf->path);
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP); /* (a library to probe: at once) */
out:
	bpf_map_delete_elem(&open_names, &tid);
	return 0;
}
