// SPDX-License-Identifier: MIT
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "bpf/cuda.skel.h"
#include "bpf/nccl.skel.h"
#include "bpf/os.skel.h"
#include "bpf/proc.skel.h"
#include "bpf/tracer.h"
#include "core/elfsym.h"
#include "core/event.h"
#include "core/hmap.h"
#include "core/names.h"
#include "core/util.h"

struct tfile {
	char path[PATH_MAX];
	__u64 dev, ino;
	struct elf_apis apis;
};

/* A multi-uprobe link (an fd) or a perf-event uprobe (a libbpf link). */
struct plink {
	int fd;
	struct bpf_link *link;
};

struct linkset {
	size_t n, cap;
	struct plink *v;
};

/* The programs a file's functions go to: entries, then returns by family. */
enum {
	PG_CUDA_ENTER,
	PG_NCCL_ENTER,
	PG_LAUNCH,
	PG_KNAME,
	PG_MEM,
	PG_COPY,
	PG_SYNC,
	PG_API,
	PG_NCCL,
	PG_COUNT
};

/* Key of the links of a file placed for every process. */
#define ALL_PIDS 0xffffffffU

struct tracer {
	struct tracer_opts opts;
	struct cuda_bpf *cuda;
	struct nccl_bpf *nccl;
	struct proc_bpf *proc;
	struct os_bpf *os; /* NULL: no OS plane */
	struct bpf_program *prog[PG_COUNT];
	struct ring_buffer *rb;
	struct tfile *files;
	size_t nfiles;
	struct hmap pids;  /* pid -> (void *)1 */
	struct hmap links; /* (file index, pid) -> struct linkset */
	__u64 nlinks;
	bool watch_libs;
	bool multi; /* the kernel has uprobe_multi links with process filtering */
};

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

/*
 * Multi-uprobe links (Linux 6.6) attach a program to many functions of a file with one link,
 * so detaching costs one RCU grace period per link instead of one per function (~0.1 s
 * each here). libbpf 1.1 predates them: the link is created with the raw syscall.
 */
#define GS_TRACE_UPROBE_MULTI	 48
#define GS_F_UPROBE_MULTI_RETURN 1U

union uprobe_multi_attr {
	struct {
		__u32 prog_fd, target_fd, attach_type, flags;
		__u64 path, offsets, ref_ctr_offsets, cookies;
		__u32 cnt, flags2, pid;
	} a;
	char pad[128];
};

static int uprobe_multi_create(int prog_fd, const char *path, const __u64 *offsets,
			       const __u64 *cookies, __u32 cnt, bool ret, int pid)
{
	union uprobe_multi_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.a.prog_fd = (__u32)prog_fd;
	attr.a.attach_type = GS_TRACE_UPROBE_MULTI;
	attr.a.path = (__u64)(unsigned long)path;
	attr.a.offsets = (__u64)(unsigned long)offsets;
	attr.a.cookies = (__u64)(unsigned long)cookies;
	attr.a.cnt = cnt;
	attr.a.flags2 = ret ? GS_F_UPROBE_MULTI_RETURN : 0;
	attr.a.pid = (__u32)pid;
	return (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, 64);
}

static bool have_uprobe_multi(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = (enum bpf_attach_type)GS_TRACE_UPROBE_MULTI);
	__u64 off = 0, cookie = 0;
	int prog, fd, err;

	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", insns, 2, &opts);
	if (prog < 0)
		return false;
	/* "/" is not a regular file: EBADF proves the link type is known. */
	fd = uprobe_multi_create(prog, "/", &off, &cookie, 1, false, 0);
	err = errno;
	if (fd >= 0 || err != EBADF) {
		if (fd >= 0)
			close(fd);
		close(prog);
		return false;
	}
	/* Kernels that filtered by thread rather than process accept pid -1 here. */
	fd = uprobe_multi_create(prog, "/", &off, &cookie, 1, false, -1);
	err = errno;
	if (fd >= 0)
		close(fd);
	close(prog);
	return fd < 0 && err == EINVAL;
}

/* A skeleton loaded with the first one's ring buffer and table of tracked processes. */
static int load_sharing(struct bpf_object_skeleton *skel, struct bpf_map *events,
			struct bpf_map *tracked, int events_fd, int tracked_fd, const char *what,
			const char *hint)
{
	int err = bpf_map__reuse_fd(events, events_fd);

	err = err ?: bpf_map__reuse_fd(tracked, tracked_fd);
	err = err ?: bpf_object__load_skeleton(skel);
	if (err)
		gs_err("cannot load %s into the kernel: %s%s", what, strerror(-err), hint);
	return err;
}

static int load_objects(struct tracer *t)
{
	int err, events_fd, tracked_fd;

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
	t->multi = have_uprobe_multi() && !getenv("GPUSCOPE_NO_UPROBE_MULTI");
	for (int g = 0; g < PG_COUNT && t->multi; g++)
		bpf_program__set_expected_attach_type(t->prog[g],
						      (enum bpf_attach_type)GS_TRACE_UPROBE_MULTI);
	gs_debug("uprobes: %s", t->multi ? "multi-uprobe links" : "one perf event per function");
	t->cuda->rodata->stack_every = t->opts.stack_every;
	t->nccl->rodata->stack_every = t->opts.stack_every;
	t->cuda->rodata->track_all = t->opts.all;
	t->nccl->rodata->track_all = t->opts.all;
	err = bpf_map__set_max_entries(t->cuda->maps.events, (__u32)t->opts.ring_bytes);
	if (!err)
		err = cuda_bpf__load(t->cuda);
	if (err) {
		gs_err("cannot load the CUDA probes into the kernel: %s", strerror(-err));
		return err;
	}
	events_fd = bpf_map__fd(t->cuda->maps.events);
	tracked_fd = bpf_map__fd(t->cuda->maps.tracked);
	err = load_sharing(t->nccl->skeleton, t->nccl->maps.events, t->nccl->maps.tracked,
			   events_fd, tracked_fd, "the NCCL probes", "");
	if (err)
		return err;
	t->proc->rodata->follow_children = t->opts.follow;
	t->proc->rodata->track_all = t->opts.all;
	t->watch_libs = have_tracefs();
	if (!t->watch_libs) {
		bpf_program__set_autoload(t->proc->progs.lib_open_enter, false);
		bpf_program__set_autoload(t->proc->progs.lib_open_exit, false);
	}
	err = load_sharing(t->proc->skeleton, t->proc->maps.events, t->proc->maps.tracked,
			   events_fd, tracked_fd, "the process tracepoints", "");
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
	t->os->rodata->track_all = t->opts.all;
	/* A block request's owner: from block_io_start where the kernel has it, else from
	 * its insert (see os.bpf.c). */
	if (kernel_has_tracepoint("block_io_start"))
		bpf_program__set_autoload(t->os->progs.os_rq_insert, false);
	else
		bpf_program__set_autoload(t->os->progs.os_rq_start, false);
	return load_sharing(t->os->skeleton, t->os->maps.events, t->os->maps.tracked, events_fd,
			    tracked_fd, "the OS tracepoints", " (--no-os goes without)");
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

static void plink_destroy(struct plink *l)
{
	if (l->link)
		bpf_link__destroy(l->link);
	else if (l->fd >= 0)
		close(l->fd);
}

/*
 * Detaching waits for an RCU grace period per link; grace periods of concurrent waiters
 * overlap, so many links are detached by many threads at once.
 */
struct reaper {
	struct plink *v;
	size_t n;
	size_t next; /* atomic */
};

static void *reap(void *arg)
{
	struct reaper *r = arg;
	size_t i;

	while ((i = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED)) < r->n)
		plink_destroy(&r->v[i]);
	return NULL;
}

static void destroy_links(struct plink *v, size_t n)
{
	struct reaper r = { .v = v, .n = n };
	pthread_t th[64];
	size_t nth = GS_MIN(n / 2, ARRAY_SIZE(th)), started = 0;

	for (size_t i = 0; i < nth; i++)
		if (pthread_create(&th[started], NULL, reap, &r) == 0)
			started++;
	reap(&r);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
}

static void destroy_linkset(struct tracer *t, struct linkset *ls)
{
	destroy_links(ls->v, ls->n);
	t->nlinks -= ls->n;
	free(ls->v);
	free(ls);
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
	destroy_links(all.v, all.n);
	free(all.v);
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

static void linkset_add(struct tracer *t, struct linkset *ls, int fd, struct bpf_link *link)
{
	if (ls->n == ls->cap) {
		ls->cap = ls->cap ? ls->cap * 2 : 16;
		ls->v = xrealloc(ls->v, ls->cap * sizeof(*ls->v));
	}
	ls->v[ls->n].fd = fd;
	ls->v[ls->n++].link = link;
	t->nlinks++;
}

/* Classic uprobes: one perf event per function and direction. */
static int attach_classic(struct tracer *t, struct linkset *ls, struct bpf_program *prog, __u32 pid,
			  const char *path, __u64 off, __u32 api, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = api, .retprobe = ret);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(
		prog, pid == ALL_PIDS ? -1 : (pid_t)pid, path, (size_t)off, &opts);

	if (!l)
		return -errno;
	linkset_add(t, ls, -1, l);
	return 0;
}

static int entry_group(const struct gs_api_desc *d)
{
	return d->family == GS_FAM_NCCL ? PG_NCCL_ENTER : PG_CUDA_ENTER;
}

static int return_group(const struct gs_api_desc *d)
{
	static const int by_family[] = {
		[GS_FAM_LAUNCH] = PG_LAUNCH, [GS_FAM_KNAME] = PG_KNAME, [GS_FAM_MEM] = PG_MEM,
		[GS_FAM_COPY] = PG_COPY,     [GS_FAM_SYNC] = PG_SYNC,	[GS_FAM_API] = PG_API,
		[GS_FAM_NCCL] = PG_NCCL,
	};

	return by_family[d->family];
}

static int attach_multi(struct tracer *t, struct linkset *ls, const struct tfile *f, __u32 pid)
{
	__u64 off[PG_COUNT][GS_API_MAX], cookie[PG_COUNT][GS_API_MAX];
	__u32 n[PG_COUNT] = {};
	int err = 0;

	for (int a = 1; a < GS_API_MAX; a++) {
		const struct gs_api_desc *d = api_desc(a);
		int g;

		if (!f->apis.offset[a])
			continue;
		g = entry_group(d);
		off[g][n[g]] = f->apis.offset[a];
		cookie[g][n[g]++] = (__u64)a;
		g = return_group(d);
		off[g][n[g]] = f->apis.offset[a];
		cookie[g][n[g]++] = (__u64)a;
	}
	for (int g = 0; g < PG_COUNT; g++) {
		int fd;

		if (!n[g])
			continue;
		fd = uprobe_multi_create(bpf_program__fd(t->prog[g]), f->path, off[g], cookie[g],
					 n[g], g != PG_CUDA_ENTER && g != PG_NCCL_ENTER,
					 pid == ALL_PIDS ? 0 : (int)pid);
		if (fd < 0) {
			err = -errno;
			if (err == -ESRCH)
				break;
			continue;
		}
		linkset_add(t, ls, fd, NULL);
	}
	return err;
}

static int attach_file_pid(struct tracer *t, size_t fi, __u32 pid)
{
	struct tfile *f = &t->files[fi];
	struct linkset *ls;
	int err = 0;

	if (hmap_get(&t->links, fi, pid))
		return 0;
	ls = xcalloc(1, sizeof(*ls));
	if (t->multi) {
		err = attach_multi(t, ls, f, pid);
	} else {
		for (int a = 1; a < GS_API_MAX && err != -ESRCH; a++) {
			const struct gs_api_desc *d = api_desc(a);
			int e;

			if (!f->apis.offset[a])
				continue;
			e = attach_classic(t, ls, t->prog[entry_group(d)], pid, f->path,
					   f->apis.offset[a], a, false);
			if (!e)
				e = attach_classic(t, ls, t->prog[return_group(d)], pid, f->path,
						   f->apis.offset[a], a, true);
			if (e)
				err = e;
		}
	}
	hmap_put(&t->links, fi, pid, ls);
	if (err == -ESRCH)
		return 0; /* the process is already gone */
	if (err && !ls->n) {
		gs_warn("cannot attach probes to %s: %s", f->path, strerror(-err));
		return err;
	}
	if (err)
		gs_warn("some probes on %s could not be attached: %s", f->path, strerror(-err));
	return 0;
}

int tracer__track(struct tracer *t, __u32 pid)
{
	__u32 one = 1;
	int err = 0;

	if (bpf_map_update_elem(bpf_map__fd(t->cuda->maps.tracked), &pid, &one, BPF_ANY)) {
		err = -errno;
		gs_err("cannot add pid %u to the traced set: %s", pid, strerror(errno));
		return err;
	}
	hmap_put(&t->pids, pid, 0, (void *)1);
	for (size_t i = 0; i < t->nfiles && t->opts.isolate; i++) {
		int e = attach_file_pid(t, i, pid);

		if (e && !err)
			err = e;
	}
	return err;
}

void tracer__untrack(struct tracer *t, __u32 pid)
{
	hmap_del(&t->pids, pid, 0);
	bpf_map_delete_elem(bpf_map__fd(t->cuda->maps.tracked), &pid);
	for (size_t i = 0; i < t->nfiles && t->opts.isolate; i++) {
		struct linkset *ls = hmap_del(&t->links, i, pid);

		if (ls)
			destroy_linkset(t, ls);
	}
}

int tracer__add_file(struct tracer *t, const char *path, const char *display_path,
		     unsigned int kind, bool use_symtab, bool late, struct gs_ev_attach *rec)
{
	struct tfile f = {};
	struct hmap_slot *s;
	struct stat st;
	char err[256];
	size_t fi;

	if (stat(path, &st))
		return -errno;
	for (size_t i = 0; i < t->nfiles; i++)
		if (t->files[i].dev == st.st_dev && t->files[i].ino == st.st_ino)
			return 0;
	if (elf_find_apis(path, use_symtab, &f.apis, err, sizeof(err))) {
		gs_debug("%s: %s", path, err);
		return 0;
	}
	if (!f.apis.nfound)
		return 0;
	gs_strlcpy(f.path, path, sizeof(f.path));
	f.dev = st.st_dev;
	f.ino = st.st_ino;
	t->files = xrealloc(t->files, (t->nfiles + 1) * sizeof(*t->files));
	fi = t->nfiles++;
	t->files[fi] = f;
	if (!t->opts.isolate)
		attach_file_pid(t, fi, ALL_PIDS);
	else
		hmap_for_each (&t->pids, s)
			attach_file_pid(t, fi, (__u32)s->k1);

	memset(rec, 0, sizeof(*rec));
	rec->dev = f.dev;
	rec->ino = f.ino;
	rec->kind = kind;
	rec->nprobes = (__u32)f.apis.nfound;
	for (int a = 1; a < GS_API_MAX; a++)
		if (api_desc(a)->lib == (kind == GS_LIB_EXE ? GS_LIB_CUDART : kind) &&
		    !f.apis.offset[a])
			rec->nmissing++;
	rec->nmissing -= GS_MIN(rec->nmissing, (__u32)f.apis.naliases);
	rec->late = late;
	gs_strlcpy(rec->path, display_path ? display_path : path, sizeof(rec->path));
	gs_debug("probing %s: %d functions, %u links in all", path, f.apis.nfound,
		 (unsigned)t->nlinks);
	return 1;
}

int tracer__poll(struct tracer *t, int timeout_ms)
{
	int n = ring_buffer__poll(t->rb, timeout_ms);

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
	d->lost_calls += t->cuda->bss->lost_calls + t->nccl->bss->lost_calls;
}

bool tracer__watches_libs(const struct tracer *t)
{
	return t->watch_libs;
}
