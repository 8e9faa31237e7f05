// SPDX-License-Identifier: MIT
/*
 * Code addresses of a live process to names, with elfutils' libdwfl: the process's
 * modules from /proc/PID/maps, their symbol tables (.symtab, else .dynsym), and separate
 * debuginfo where installed (build-id or .gnu_debuglink under /usr/lib/debug). Modules
 * loaded after the first lookup are found by reporting the maps again when an address
 * falls outside every known module. Code a JIT made (CPython's perf trampolines with
 * `python -X perf`, V8, LuaJIT ...) is named from /tmp/perf-PID.map where the JIT writes
 * one.
 */
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hmap.h"
#include "core/symbolize.h"
#include "core/util.h"

struct jit_sym {
	__u64 start, size;
	char *name;
};

struct proc_dwfl {
	Dwfl *dwfl;
	__u64 reports;	     /* how often the maps were read */
	bool dead;	     /* its maps could not be read: gone */
	struct jit_sym *jit; /* /tmp/perf-PID.map, sorted by start */
	size_t njit;
	long jit_read_at; /* its size when last read */
};

struct symbolizer {
	struct hmap procs; /* pid -> struct proc_dwfl */
};

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.debuginfo_path = &debuginfo_path,
};

struct symbolizer *symbolizer__new(void)
{
	return xcalloc(1, sizeof(struct symbolizer));
}

static void jit_free(struct proc_dwfl *p)
{
	for (size_t i = 0; i < p->njit; i++)
		free(p->jit[i].name);
	free(p->jit);
	p->jit = NULL;
	p->njit = 0;
}

static void proc_free(void *v)
{
	struct proc_dwfl *p = v;

	if (p->dwfl)
		dwfl_end(p->dwfl);
	jit_free(p);
	free(p);
}

static int by_start(const void *a, const void *b)
{
	const struct jit_sym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* (Re)read the perf map if it grew since the last time. */
static void jit_read(struct proc_dwfl *p, __u32 pid)
{
	char path[64], line[1024], name[900];
	unsigned long long start, size;
	size_t cap = 0;
	long at;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/perf-%u.map", pid);
	f = fopen(path, "re");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	at = ftell(f);
	if (at == p->jit_read_at) {
		fclose(f);
		return;
	}
	rewind(f);
	jit_free(p);
	p->jit_read_at = at;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %llx %899[^\n]", &start, &size, name) == 3) {
			if (p->njit == cap) {
				cap = cap ? 2 * cap : 256;
				p->jit = xrealloc(p->jit, cap * sizeof(*p->jit));
			}
			p->jit[p->njit++] = (struct jit_sym){ start, size, xstrdup(name) };
		}
	fclose(f);
	qsort(p->jit, p->njit, sizeof(*p->jit), by_start);
}

static const char *jit_name(struct proc_dwfl *p, __u32 pid, __u64 at)
{
	size_t lo = 0, hi;

	jit_read(p, pid);
	hi = p->njit;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->jit[mid].start <= at)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && at < p->jit[lo - 1].start + p->jit[lo - 1].size)
		return p->jit[lo - 1].name;
	return NULL;
}

void symbolizer__forget(struct symbolizer *s, __u32 pid)
{
	struct proc_dwfl *p = hmap_del(&s->procs, pid, 0);

	if (p)
		proc_free(p);
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	hmap_free_with(&s->procs, proc_free);
	free(s);
}

static bool report(struct proc_dwfl *p, __u32 pid)
{
	dwfl_report_begin(p->dwfl);
	p->reports++;
	if (dwfl_linux_proc_report(p->dwfl, (pid_t)pid)) {
		dwfl_report_end(p->dwfl, NULL, NULL);
		p->dead = true;
		return false;
	}
	return dwfl_report_end(p->dwfl, NULL, NULL) == 0;
}

int symbolizer__name(struct symbolizer *s, __u32 pid, __u64 addr, char *buf, size_t n)
{
	struct proc_dwfl *p = hmap_get(&s->procs, pid, 0);
	/* A return address: the call before it is what ran (and may end its function). */
	Dwarf_Addr at = addr ? addr - 1 : 0, start = 0, end = 0;
	Dwfl_Module *mod;
	const char *name, *file;
	GElf_Off off;
	GElf_Sym sym;

	if (!p) {
		p = xcalloc(1, sizeof(*p));
		hmap_put(&s->procs, pid, 0, p);
		p->dwfl = dwfl_begin(&callbacks);
		if (!p->dwfl || !report(p, pid))
			p->dead = true;
	}
	if (p->dead || !p->dwfl)
		return -1;
	mod = dwfl_addrmodule(p->dwfl, at);
	/* Loaded since the maps were read (a few times at most: dlopen'ed libraries). */
	if (!mod && p->reports < 64 && report(p, pid))
		mod = dwfl_addrmodule(p->dwfl, at);
	if (!mod) {
		name = jit_name(p, pid, at);
		if (!name)
			return -1; /* (a frame pointer chain that ran into code without them) */
		snprintf(buf, n, "%s", name);
		return 0;
	}
	if (!dwfl_module_info(mod, NULL, &start, &end, NULL, NULL, NULL, NULL) || at < start ||
	    at >= end)
		return -1;
	name = dwfl_module_addrinfo(mod, at, &off, &sym, NULL, NULL, NULL);
	if (name && *name) {
		/* A data symbol: a frame-pointer chain that went astray (a return address is
		 * always in code). */
		if (GELF_ST_TYPE(sym.st_info) != STT_FUNC &&
		    GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC)
			return -1;
		snprintf(buf, n, "%s", name);
		return 0;
	}
	file = dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
	if (!file)
		return -1;
	snprintf(buf, n, "%s+0x%llx", strrchr(file, '/') ? strrchr(file, '/') + 1 : file,
		 (unsigned long long)(addr - start));
	return 0;
}
