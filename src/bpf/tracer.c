// SPDX-License-Identifier: MIT
/* The tracer (tracer.h, parts in tracer_int.h): the BPF objects loaded and attached, the
 * ring buffer read, the end. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "bpf/cuda.skel.h"
#include "bpf/nccl.skel.h"
#include "bpf/os.skel.h"
#include "bpf/proc.skel.h"
#include "bpf/tracer_int.h"
#include "core/event.h"
#include "core/hmap.h"
#include "core/util.h"

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (gs_verbosity() < (level == LIBBPF_DEBUG ? 2 : 1))
		return 0;
	fputs("gpuscope: libbpf: ", stderr);
	return vfprintf(stderr, fmt, ap);
}

static int on_ring(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;
	const struct gs_hdr *h = data;
	const char *why;

	/* Name records are reserved at full size and cut short by their size field. */
	if (size < sizeof(*h) || h->size > size) {
		gs_debug("malformed record from the kernel (%zu bytes)", size);
		return 0;
	}
	if (gs_event_check(h, h->size, &why)) {
		gs_debug("bad record from the kernel: %s", why);
		return 0;
	}
	t->opts.on_event(t->opts.ctx, h);
	return 0;
}

/* Classic tracepoints (syscalls) need tracefs; mount it where it belongs if it is not. */
static bool have_tracefs(void)
{
	struct stat st;

	if (!stat("/sys/kernel/tracing/events/syscalls", &st) ||
	    !stat("/sys/kernel/debug/tracing/events/syscalls", &st))
		return true;
	if (mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0 &&
	    !stat("/sys/kernel/tracing/events/syscalls", &st))
		return true;
	return false;
}

/* Whether the running kernel has the BTF-typed tracepoint NAME (tp_btf programs need it). */
static bool kernel_has_tracepoint(const char *name)
{
	struct btf *vmlinux = btf__load_vmlinux_btf();
	char type[128];
	bool found;

	if (!vmlinux)
		return false;
	snprintf(type, sizeof(type), "btf_trace_%s", name);
	found = btf__find_by_name_kind(vmlinux, type, BTF_KIND_TYPEDEF) > 0;
	btf__free(vmlinux);
	return found;
}
/* A skeleton loaded with the first object's shared maps (common.bpf.h): the ring buffer, the
 * table of traced processes and its generation. */
static int load_sharing(struct bpf_object *first, struct bpf_object_skeleton *skel,
			const char *what, const char *hint)
{
	static const char *const shared[] = { "events", "tracked", "tracked_gen" };
	int err = 0;

	for (size_t i = 0; i < sizeof(shared) / sizeof(*shared) && !err; i++)
		err = bpf_map__reuse_fd(
			bpf_object__find_map_by_name(*skel->obj, shared[i]),
			bpf_map__fd(bpf_object__find_map_by_name(first, shared[i])));
	err = err ?: bpf_object__load_skeleton(skel);
	if (err)
		gs_err("cannot load %s into the kernel: %s%s", what, strerror(-err), hint);
	return err;
}

static int load_objects(struct tracer *t)
{
	int err;

	t->cuda = cuda_bpf__open();
	t->nccl = nccl_bpf__open();
	t->proc = proc_bpf__open();
	if (!t->cuda || !t->nccl || !t->proc) {
		err = -errno;
		gs_err("cannot open the BPF programs: %s", strerror(errno));
		return err ? err : -EINVAL;
	}
	t->prog[PG_CUDA_ENTER] = t->cuda->progs.call_enter;
	t->prog[PG_NCCL_ENTER] = t->nccl->progs.call_enter;
	t->prog[PG_LAUNCH] = t->cuda->progs.ret_launch;
	t->prog[PG_KNAME] = t->cuda->progs.ret_kname;
	t->prog[PG_MEM] = t->cuda->progs.ret_mem;
	t->prog[PG_COPY] = t->cuda->progs.ret_copy;
	t->prog[PG_SYNC] = t->cuda->progs.ret_sync;
	t->prog[PG_API] = t->cuda->progs.ret_api;
	t->prog[PG_NCCL] = t->nccl->progs.ret_nccl;
	t->prog[PG_LAUNCH_SESSION] = t->cuda->progs.launch_session;
	t->prog[PG_KFUNC_SESSION] = t->cuda->progs.kfunc_session;
	t->prog[PG_SET_SESSION] = t->cuda->progs.set_session;
	t->multi = tr_have_uprobe_multi() && !getenv("GPUSCOPE_NO_UPROBE_MULTI");
	t->session = t->multi && tr_have_uprobe_session() && !getenv("GPUSCOPE_NO_UPROBE_SESSION");
	for (int g = 0; g < PG_COUNT && t->multi; g++)
		bpf_program__set_expected_attach_type(
			t->prog[g],
			(enum bpf_attach_type)(tr_is_session(g) ? GS_TRACE_UPROBE_SESSION
								: GS_TRACE_UPROBE_MULTI));
	for (int g = 0; g < PG_COUNT && !t->session; g++)
		if (tr_is_session(g))
			bpf_program__set_autoload(t->prog[g], false);
	gs_debug("uprobes: %s%s", t->multi ? "multi-uprobe links" : "one perf event per function",
		 t->session ? ", launches, cuKernelGetFunction and asynchronous sets by uprobe "
			      "sessions"
			    : "");
	/* (Stacks off: results still read at every 64th launch.) */
	t->cuda->rodata->launch_return_every = t->opts.stack_every ?: 64;
	t->cuda->rodata->stack_every = t->opts.stack_every;
	t->cuda->rodata->driver_names = t->opts.driver_names;
	t->cuda->rodata->stack_rate = t->opts.stack_rate;
	t->nccl->rodata->stack_every = t->opts.stack_every;
	t->cuda->rodata->track_all = t->opts.all;
	t->nccl->rodata->track_all = t->opts.all;
	/* The reader is woken when a quarter of the ring waits, else finds the records at its
	 * poll (GPUSCOPE_RING_WAKEUPS: the ring's own wakeups, to compare). */
	t->wake_bytes = getenv("GPUSCOPE_RING_WAKEUPS") ? 0 : t->opts.ring_bytes / 4;
	t->cuda->rodata->wake_bytes = t->wake_bytes;
	t->nccl->rodata->wake_bytes = t->wake_bytes;
	err = bpf_map__set_max_entries(t->cuda->maps.events, (__u32)t->opts.ring_bytes);
	if (!err)
		err = cuda_bpf__load(t->cuda);
	if (err) {
		gs_err("cannot load the CUDA probes into the kernel: %s", strerror(-err));
		return err;
	}
	t->tracked_gen = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
			      MAP_SHARED, bpf_map__fd(t->cuda->maps.tracked_gen), 0);
	if (t->tracked_gen == MAP_FAILED) {
		err = -errno;
		t->tracked_gen = NULL;
		gs_err("cannot map the traced set's generation: %s", strerror(-err));
		return err;
	}
	err = bpf_map__reuse_fd(t->nccl->maps.py_cfg, bpf_map__fd(t->cuda->maps.py_cfg));
	err = err ?: load_sharing(t->cuda->obj, t->nccl->skeleton, "the NCCL probes", "");
	if (err)
		return err;
	t->proc->rodata->follow_children = t->opts.follow;
	t->proc->rodata->track_all = t->opts.all;
	t->watch_libs = have_tracefs();
	if (!t->watch_libs) {
		bpf_program__set_autoload(t->proc->progs.lib_open_enter, false);
		bpf_program__set_autoload(t->proc->progs.lib_open_exit, false);
	}
	err = load_sharing(t->cuda->obj, t->proc->skeleton, "the process tracepoints", "");
	if (err)
		return err;
	if (t->opts.no_os)
		return 0;
	t->os = os_bpf__open();
	if (!t->os) {
		err = -errno;
		gs_err("cannot open the OS tracepoints: %s", strerror(errno));
		return err ? err : -EINVAL;
	}
	t->os->rodata->min_ns = t->opts.os_min_ns;
	t->os->rodata->wake_bytes = t->wake_bytes;
	t->os->rodata->track_all = t->opts.all;
	/* A block request's owner: from block_io_start where the kernel has it, else from
	 * its insert (see os.bpf.c). */
	if (kernel_has_tracepoint("block_io_start"))
		bpf_program__set_autoload(t->os->progs.os_rq_insert, false);
	else
		bpf_program__set_autoload(t->os->progs.os_rq_start, false);
	return load_sharing(t->cuda->obj, t->os->skeleton, "the OS tracepoints",
			    " (--no-os goes without)");
}

int tracer__open(const struct tracer_opts *o, struct tracer **out)
{
	struct tracer *t = xcalloc(1, sizeof(*t));
	int err;

	t->opts = *o;
	libbpf_set_print(libbpf_print);
	err = load_objects(t);
	if (err)
		goto fail;
	err = proc_bpf__attach(t->proc);
	if (err) {
		gs_err("cannot attach the process tracepoints: %s", strerror(-err));
		goto fail;
	}
	err = t->os ? os_bpf__attach(t->os) : 0;
	if (err) {
		gs_err("cannot attach the OS tracepoints: %s (--no-os goes without)",
		       strerror(-err));
		goto fail;
	}
	t->rb = ring_buffer__new(bpf_map__fd(t->cuda->maps.events), on_ring, t, NULL);
	if (!t->rb) {
		err = -errno;
		gs_err("cannot map the event ring buffer: %s", strerror(errno));
		goto fail;
	}
	*out = t;
	return 0;
fail:
	tracer__close(t);
	return err ? err : -EINVAL;
}
void tracer__close(struct tracer *t)
{
	struct hmap_slot *s;

	struct linkset all = {};

	if (!t)
		return;
	/* Gather every link and detach them together. */
	hmap_for_each (&t->links, s) {
		struct linkset *ls = s->val;

		for (size_t i = 0; i < ls->n; i++) {
			if (all.n == all.cap) {
				all.cap = all.cap ? all.cap * 2 : 64;
				all.v = xrealloc(all.v, all.cap * sizeof(*all.v));
			}
			all.v[all.n++] = ls->v[i];
		}
		free(ls->v);
		free(ls);
	}
	tr_destroy_links(all.v, all.n);
	free(all.v);
	if (t->tracked_gen)
		munmap(t->tracked_gen, (size_t)sysconf(_SC_PAGESIZE));
	hmap_free(&t->links);
	hmap_free(&t->pids);
	ring_buffer__free(t->rb);
	os_bpf__destroy(t->os);
	proc_bpf__destroy(t->proc);
	nccl_bpf__destroy(t->nccl);
	cuda_bpf__destroy(t->cuda);
	free(t->files);
	free(t);
}
int tracer__poll(struct tracer *t, int timeout_ms)
{
	int n = ring_buffer__poll(t->rb, timeout_ms);

	/* Most records wake nobody (common.bpf.h's wake_bytes): what the timeout finds waiting
	 * is read too (a poll reads only rings that woke it). */
	if (n == 0 || n == -EINTR)
		n = ring_buffer__consume(t->rb);
	return n == -EINTR ? 0 : n;
}

int tracer__drain(struct tracer *t)
{
	int n = ring_buffer__consume(t->rb);

	return n == -EINTR ? 0 : n;
}

/*
 * Traced tasks' block requests still in the map at the end: issued, and no completion
 * seen (the kernel skipped the program; see os.bpf.c), or really still in flight. Each is
 * recorded as one whose end is unknown, so that its bytes count.
 */
static void flush_unseen_requests(struct tracer *t)
{
	int fd = bpf_map__fd(t->os->maps.requests);
	__u64 key, next;
	bool first = true;

	while (!bpf_map_get_next_key(fd, first ? NULL : &key, &next)) {
		struct gs_block_req r;
		struct gs_ev_block e = { .h = { .type = GS_EV_BLOCK,
						.source = GS_SRC_TRACEPOINT,
						.flags = GS_HDR_END_UNSEEN,
						.size = sizeof(e) } };

		first = false;
		key = next;
		if (bpf_map_lookup_elem(fd, &key, &r) || !r.ts || !r.pid_tgid)
			continue;
		e.h.ts = r.ts;
		e.h.pid = (__u32)(r.pid_tgid >> 32);
		e.h.tid = (__u32)r.pid_tgid;
		e.sector = r.sector;
		e.bytes = r.bytes;
		e.dev = r.dev;
		e.op = r.op;
		t->opts.on_event(t->opts.ctx, &e.h);
	}
}

int tracer__finish(struct tracer *t)
{
	int n = tracer__drain(t);

	if (t->os)
		flush_unseen_requests(t);
	return n;
}

void tracer__drops(const struct tracer *t, struct gs_ev_drops *d)
{
	for (int i = 0; i < GS_EV_MAX; i++)
		d->by_type[i] += t->cuda->bss->drop_count[i] + t->nccl->bss->drop_count[i] +
				 t->proc->bss->drop_count[i] +
				 (t->os ? t->os->bss->drop_count[i] : 0);
	d->lost_calls += t->cuda->bss->lost_calls + t->nccl->bss->lost_calls +
			 (t->os ? t->os->bss->lost_calls : 0);
}

__u64 tracer__stack_skips(struct tracer *t)
{
	return __atomic_exchange_n(&t->cuda->bss->stack_skips, 0, __ATOMIC_RELAXED);
}

void tracer__kfunc_counts(const struct tracer *t, __u64 *unread, __u64 *rechecks)
{
	*unread = __atomic_load_n(&t->cuda->bss->kfunc_unread, __ATOMIC_RELAXED);
	*rechecks = __atomic_load_n(&t->cuda->bss->kfunc_rechecks, __ATOMIC_RELAXED);
}

bool tracer__watches_libs(const struct tracer *t)
{
	return t->watch_libs;
}

int tracer__py_config(struct tracer *t, __u32 pid, const struct gs_py_cfg *c)
{
	return bpf_map_update_elem(bpf_map__fd(t->cuda->maps.py_cfg), &pid, c, BPF_ANY) ? -errno
											: 0;
}

void tracer__py_exc_counts(struct tracer *t, __u32 pid,
			   void (*fn)(void *ctx, const struct gs_pyexc_key *k, __u64 count),
			   void *ctx)
{
	int fd = bpf_map__fd(t->cuda->maps.py_exc_count);
	struct gs_pyexc_key k, next, *mine = NULL;
	size_t n = 0, cap = 0;
	__u64 count;
	void *prev = NULL;

	/* (Keys gathered first: deleting while walking would restart the walk.) */
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		if (k.tgid != pid)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			mine = xrealloc(mine, cap * sizeof(*mine));
		}
		mine[n++] = k;
	}
	for (size_t i = 0; i < n; i++) {
		if (bpf_map_lookup_elem(fd, &mine[i], &count))
			continue;
		bpf_map_delete_elem(fd, &mine[i]);
		fn(ctx, &mine[i], count);
	}
	free(mine);
}

void tracer__py_forget(struct tracer *t, __u32 pid)
{
	bpf_map_delete_elem(bpf_map__fd(t->cuda->maps.py_cfg), &pid);
}
