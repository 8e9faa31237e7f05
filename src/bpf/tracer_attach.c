// SPDX-License-Identifier: MIT
/* Uprobes on a file's CUDA and NCCL functions (tracer_int.h): placed for every process or
 * for each tracked one, and detached many at once. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "bpf/cuda.skel.h"
#include "bpf/tracer_int.h"
#include "core/event.h"
#include "core/names.h"
#include "core/util.h"

/*
 * Multi-uprobe links (Linux 6.6) attach a program to many functions of a file with one link,
 * so detaching costs one RCU grace period per link instead of one per function (~0.1 s
 * each here). libbpf 1.1 predates them: the link is created with the raw syscall.
 */
union uprobe_multi_attr {
	struct {
		__u32 prog_fd, target_fd, attach_type, flags;
		__u64 path, offsets, ref_ctr_offsets, cookies;
		__u32 cnt, flags2, pid;
	} a;
	char pad[128];
};

static int uprobe_multi_create(int prog_fd, __u32 type, const char *path, const __u64 *offsets,
			       const __u64 *cookies, __u32 cnt, bool ret, int pid)
{
	union uprobe_multi_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.a.prog_fd = (__u32)prog_fd;
	attr.a.attach_type = type;
	attr.a.path = (__u64)(unsigned long)path;
	attr.a.offsets = (__u64)(unsigned long)offsets;
	attr.a.cookies = (__u64)(unsigned long)cookies;
	attr.a.cnt = cnt;
	attr.a.flags2 = ret ? GS_F_UPROBE_MULTI_RETURN : 0;
	attr.a.pid = (__u32)pid;
	return (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, 64);
}

/* A program of the attach type that returns 0; an fd, or -1. */
static int trivial_prog(__u32 type)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = (enum bpf_attach_type)type);

	return bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", insns, 2, &opts);
}

/* Whether links of the type are known: "/" is not a regular file, so EBADF proves it. */
static bool link_type_known(int prog, __u32 type)
{
	__u64 off = 0, cookie = 0;
	int fd = uprobe_multi_create(prog, type, "/", &off, &cookie, 1, false, 0), err = errno;

	if (fd >= 0)
		close(fd);
	return fd < 0 && err == EBADF;
}

bool tr_have_uprobe_multi(void)
{
	__u64 off = 0, cookie = 0;
	int prog = trivial_prog(GS_TRACE_UPROBE_MULTI), fd, err;

	if (prog < 0)
		return false;
	if (!link_type_known(prog, GS_TRACE_UPROBE_MULTI)) {
		close(prog);
		return false;
	}
	/* Kernels that filtered by thread rather than process accept pid -1 here. */
	fd = uprobe_multi_create(prog, GS_TRACE_UPROBE_MULTI, "/", &off, &cookie, 1, false, -1);
	err = errno;
	if (fd >= 0)
		close(fd);
	close(prog);
	return fd < 0 && err == EINVAL;
}

bool tr_have_uprobe_session(void)
{
	struct btf *vmlinux = btf__load_vmlinux_btf();
	const struct btf_type *fn, *proto;
	int prog, id;
	bool ok = false;

	/* bool bpf_session_is_return(void), as cuda.bpf.c declares it (a kernel whose
	 * prototype differs would refuse the whole object). */
	id = vmlinux ? btf__find_by_name_kind(vmlinux, "bpf_session_is_return", BTF_KIND_FUNC) : -1;
	fn = id > 0 ? btf__type_by_id(vmlinux, (__u32)id) : NULL;
	proto = fn ? btf__type_by_id(vmlinux, fn->type) : NULL;
	if (proto && btf_is_func_proto(proto) && btf_vlen(proto) == 0) {
		prog = trivial_prog(GS_TRACE_UPROBE_SESSION);
		ok = prog >= 0 && link_type_known(prog, GS_TRACE_UPROBE_SESSION);
		if (prog >= 0)
			close(prog);
	}
	btf__free(vmlinux);
	return ok;
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

void tr_destroy_links(struct plink *v, size_t n)
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
	tr_destroy_links(ls->v, ls->n);
	t->nlinks -= ls->n;
	free(ls->v);
	free(ls);
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

/* An asynchronous 1-D set (cuda.bpf.c's set_session). (Not copies: one from pageable
 * memory blocks its caller, and the steps analysis reads that call time.) */
static bool async_set(const struct gs_api_desc *d)
{
	return d->family == GS_FAM_COPY && (d->flags & GS_AF_ASYNC) && d->shape == GS_SH_C_SET1D;
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
		if (t->session &&
		    (d->family == GS_FAM_LAUNCH || d->shape == GS_SH_N_KFUNC || async_set(d))) {
			g = d->family == GS_FAM_LAUNCH	? PG_LAUNCH_SESSION
			    : d->shape == GS_SH_N_KFUNC ? PG_KFUNC_SESSION
							: PG_SET_SESSION;
			off[g][n[g]] = f->apis.offset[a];
			cookie[g][n[g]++] = (__u64)a;
			continue;
		}
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
		fd = uprobe_multi_create(
			bpf_program__fd(t->prog[g]),
			tr_is_session(g) ? GS_TRACE_UPROBE_SESSION : GS_TRACE_UPROBE_MULTI, f->path,
			off[g], cookie[g], n[g],
			g != PG_CUDA_ENTER && g != PG_NCCL_ENTER && !tr_is_session(g),
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

int tracer__py_exceptions(struct tracer *t, const char *path, __u64 raise_off, __u64 display_off,
			  bool display_file)
{
	struct bpf_program *prog = t->cuda->progs.py_exc;
	struct linkset *ls;
	struct stat st;
	int err = 0;

	if (stat(path, &st))
		return -errno;
	/* (Among the files' link sets: keyed by the file itself, bit 63 set.) */
	if (hmap_get(&t->links, (__u64)st.st_dev | 1ULL << 63, st.st_ino))
		return 0;
	ls = xcalloc(1, sizeof(*ls));
	hmap_put(&t->links, (__u64)st.st_dev | 1ULL << 63, st.st_ino, ls);
	/* (Past a leading endbr64 where that spares a trap: Ubuntu builds Python with one.) */
	if (raise_off)
		err = attach_classic(t, ls, prog, ALL_PIDS, path, elf_uprobe_site(path, raise_off),
				     1, false);
	if (!err && display_off)
		err = attach_classic(t, ls, prog, ALL_PIDS, path,
				     elf_uprobe_site(path, display_off), display_file ? 2 : 3,
				     false);
	if (err)
		gs_warn("cannot probe Python exceptions in %s: %s", path, strerror(-err));
	return err;
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
	if (t->tracked_gen)
		__atomic_add_fetch(t->tracked_gen, 1, __ATOMIC_RELEASE);
	for (size_t i = 0; i < t->nfiles && t->opts.isolate; i++) {
		struct linkset *ls = hmap_del(&t->links, i, pid);

		if (ls)
			destroy_linkset(t, ls);
	}
}

int tracer__add_file(struct tracer *t, const char *path, const char *display_path,
		     unsigned int kind, unsigned int flags, struct gs_ev_attach *rec)
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
	if (elf_find_apis(path, flags & TR_FILE_SYMTAB, &f.apis, err, sizeof(err))) {
		gs_debug("%s: %s", path, err);
		return 0;
	}
	if ((flags & TR_FILE_NO_KFUNC) && f.apis.offset[GS_API_CU_KERNEL_GET_FUNCTION]) {
		f.apis.offset[GS_API_CU_KERNEL_GET_FUNCTION] = 0;
		f.apis.nfound--;
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
		    !f.apis.offset[a] &&
		    !(a == GS_API_CU_KERNEL_GET_FUNCTION && (flags & TR_FILE_NO_KFUNC)))
			rec->nmissing++;
	rec->nmissing -= GS_MIN(rec->nmissing, (__u32)f.apis.naliases);
	rec->late = !!(flags & TR_FILE_LATE);
	gs_strlcpy(rec->path, display_path ? display_path : path, sizeof(rec->path));
	gs_debug("probing %s: %d functions, %u links in all", path, f.apis.nfound,
		 (unsigned)t->nlinks);
	return 1;
}
