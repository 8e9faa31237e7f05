// SPDX-License-Identifier: MIT
/* Host facts as a source (see host.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/hmap.h"
#include "core/procfs.h"
#include "core/util.h"
#include "source/host.h"
#include "version.h"

struct host_source {
	struct stream *s;
	struct hmap procs; /* pid -> its facts as put in the stream (a record), or (void *)1 */
	struct hmap devs;  /* block device -> (void *)1: its name is */
	__u32 last_pid;	   /* (most records are of the process before) */
};

/* The rest of the first line of path that starts with key, separators after the key
 * skipped, the line end cut: true if found. */
static bool line_value(const char *path, const char *key, const char *skip, char *out, size_t n)
{
	char line[512];
	size_t k = strlen(key);
	bool found = false;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *v;

		if (strncmp(line, key, k))
			continue;
		v = line + k;
		v += strspn(v, skip);
		v[strcspn(v, "\n")] = 0;
		gs_strlcpy(out, v, n);
		found = true;
	}
	fclose(f);
	return found;
}

/* Control characters out: the facts end up in terminals. */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

void host_parse_driver_version(const char *line, char *out, size_t n)
{
	/* "NVRM version: NVIDIA UNIX [Open Kernel Module for ]x86_64  580.65.06  Release
	 * Build ...": the first word of digits and dots with a dot in it. */
	const char *p = strstr(line, "Kernel Module");

	out[0] = 0;
	for (p = p ? p : line; *p; p++) {
		size_t len = strspn(p, "0123456789.");

		if (len > 2 && memchr(p, '.', len) && (p == line || p[-1] == ' ')) {
			snprintf(out, n, "%.*s", (int)GS_MIN(len, n - 1), p);
			return;
		}
		if (len)
			p += len - 1;
	}
}

void host_facts(struct gs_ev_host *h)
{
	struct utsname u;
	char line[512], kb[64];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	memset(h, 0, sizeof(*h));
	if (uname(&u) == 0) {
		gs_strlcpy(h->hostname, u.nodename, sizeof(h->hostname));
		gs_strlcpy(h->kernel, u.release, sizeof(h->kernel));
		gs_strlcpy(h->arch, u.machine, sizeof(h->arch));
	}
	if (line_value("/etc/os-release", "PRETTY_NAME=", "\"", h->os, sizeof(h->os)))
		h->os[strcspn(h->os, "\"")] = 0;
	line_value("/proc/cpuinfo", "model name", " \t:", h->cpu, sizeof(h->cpu));
	h->cpus = cpus > 0 ? (__u32)cpus : 0;
	if (line_value("/proc/meminfo", "MemTotal:", " ", kb, sizeof(kb)))
		h->memory = strtoull(kb, NULL, 10) * 1024;
	if (line_value("/proc/driver/nvidia/version", "NVRM version:", " ", line, sizeof(line)))
		host_parse_driver_version(line, h->driver, sizeof(h->driver));
	line_value("/proc/sys/kernel/random/boot_id", "", "", h->boot_id, sizeof(h->boot_id));
	gs_strlcpy(h->gpuscope, GS_VERSION, sizeof(h->gpuscope));
	printable(h->hostname);
	printable(h->os);
	printable(h->cpu);
}

int host_proc_facts(__u32 pid, struct gs_ev_proc_info *i, __u32 *size)
{
	char path[64], ids[64];
	ssize_t n;
	int fd;

	memset(i, 0, sizeof(*i));
	snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, i->cmdline, sizeof(i->cmdline));
	if (n == (ssize_t)sizeof(i->cmdline)) {
		i->cmdline_truncated = 1;
		n--;
	}
	close(fd);
	if (n < 0)
		return -EIO;
	while (n > 0 && i->cmdline[n - 1] == 0)
		n--; /* (the last argument's NUL) */
	if (n == 0)
		return -ESRCH; /* (a zombie's is empty: it has exited) */
	i->cmdline[n] = 0;
	for (ssize_t k = 0; k < n; k++)
		if (i->cmdline[k] == 0)
			i->cmdline[k] = ' ';
	printable(i->cmdline);
	i->cmdline_len = (__u16)n;
	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	line_value(path, "0::", "", i->cgroup, sizeof(i->cgroup));
	printable(i->cgroup);
	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	if (line_value(path, "Uid:", " \t", ids, sizeof(ids)))
		i->uid = (__u32)strtoul(ids, NULL, 10);
	*size = (__u32)((offsetof(struct gs_ev_proc_info, cmdline) + (size_t)n + 1 + 7) & ~7UL);
	return 0;
}

static void forget(struct host_source *x, __u32 pid)
{
	void *v = hmap_del(&x->procs, pid, 0);

	if (v != (void *)1)
		free(v);
}

/* Put pid's facts in the stream and keep them (for its forked children): read from /proc,
 * or a forked child's from its parent (what /proc would say until it execs, and all there
 * is once a short-lived child is gone); exec: the file it executed if it is gone already. */
static void proc_facts(struct host_source *x, __u32 pid, __u32 parent, const char *exec)
{
	const struct gs_ev_proc_info *from = hmap_get(&x->procs, parent ? parent : pid, 0);
	struct gs_ev_proc_info i, *keep;
	__u32 size;

	if (from == (void *)1)
		from = NULL;
	if (parent && from) {
		size = from->h.size;
		memcpy(&i, from, size);
	} else if (host_proc_facts(pid, &i, &size)) {
		if (!exec || !exec[0]) {
			forget(x, pid);
			hmap_put(&x->procs, pid, 0, (void *)1); /* (gone: nothing to say) */
			return;
		}
		memset(&i, 0, sizeof(i));
		if (from) {
			i.uid = from->uid;
			memcpy(i.cgroup, from->cgroup, sizeof(i.cgroup));
		}
		gs_strlcpy(i.cmdline, exec, sizeof(i.cmdline));
		printable(i.cmdline);
		i.cmdline_len = (__u16)strlen(i.cmdline);
		size = (__u32)((offsetof(struct gs_ev_proc_info, cmdline) + i.cmdline_len + 1 + 7) &
			       ~7UL);
	}
	forget(x, pid);
	stream__emit(x->s, &i.h, GS_EV_PROC_INFO, size, pid);
	keep = xmalloc(size);
	memcpy(keep, &i, size);
	hmap_put(&x->procs, pid, 0, keep);
}

/* Before a process's first record, and after its exec, its facts. */
static const struct gs_hdr *procs_filter(void *ctx, const struct gs_hdr *ev)
{
	struct host_source *x = ctx;
	const struct gs_ev_proc *p = (const void *)ev;
	__u32 pid = ev->pid;

	if (ev->type == GS_EV_PROC && (p->kind == GS_PROC_EXEC || p->kind == GS_PROC_FORK)) {
		x->last_pid = pid;
		proc_facts(x, pid, p->kind == GS_PROC_FORK ? p->ppid : 0,
			   p->kind == GS_PROC_EXEC ? p->path : NULL);
		return ev;
	}
	if (!pid || pid == x->last_pid || ev->source == GS_SRC_GPUSCOPE)
		return ev;
	x->last_pid = pid;
	if (!hmap_get(&x->procs, pid, 0))
		proc_facts(x, pid, 0, NULL);
	return ev;
}

static const struct gs_hdr *blockdev_filter(void *ctx, const struct gs_hdr *ev)
{
	struct host_source *x = ctx;
	__u32 dev = ((const struct gs_ev_block *)ev)->dev;
	struct gs_ev_blockdev b = { .dev = dev };

	if (hmap_get(&x->devs, dev, 0))
		return ev;
	hmap_put(&x->devs, dev, 0, (void *)1);
	block_dev_name(dev, b.name, sizeof(b.name));
	printable(b.name);
	stream__emit(x->s, &b.h, GS_EV_BLOCKDEV, sizeof(b), 0);
	return ev;
}

#define MAX_GONE 65536

/* Its facts go, a mark stays: a record that comes after its exit (from the in-process
 * ring) finds a zombie or nothing to read. A fork or exec under the same pid says again. */
static void retire(void *ctx, __u32 pid)
{
	struct host_source *x = ctx;
	struct hmap_slot *sl;

	forget(x, pid);
	if (x->procs.len >= MAX_GONE) { /* (bounded: the marks of long gone ones go) */
		__u32 *gone = xmalloc(x->procs.len * sizeof(*gone));
		size_t n = 0;

		hmap_for_each (&x->procs, sl)
			if (sl->val == (void *)1)
				gone[n++] = (__u32)sl->k1;
		for (size_t i = 0; i < n; i++)
			hmap_del(&x->procs, gone[i], 0);
		free(gone);
	}
	hmap_put(&x->procs, pid, 0, (void *)1);
}

static void start_fn(void *obj)
{
	struct host_source *x = obj;
	struct gs_ev_host h;

	host_facts(&h);
	stream__emit(x->s, &h.h, GS_EV_HOST, sizeof(h), 0);
}

static void close_fn(void *obj)
{
	struct host_source *x = obj;
	struct hmap_slot *sl;

	hmap_for_each (&x->procs, sl)
		if (sl->val != (void *)1)
			free(sl->val);
	hmap_free(&x->procs);
	hmap_free(&x->devs);
	free(x);
}

static const struct source_ops ops = { .name = "host", .start = start_fn, .close = close_fn };

struct host_source *host_source__open(struct session *s, bool procs)
{
	struct host_source *x = xcalloc(1, sizeof(*x));

	x->s = s->stream;
	if (procs) {
		stream__filter(s->stream, STREAM_ALL, procs_filter, x);
		stream__on_retire(s->stream, retire, x);
	}
	stream__filter(s->stream, STREAM_TYPE(GS_EV_BLOCK), blockdev_filter, x);
	session__add_source(s, &ops, x);
	return x;
}
