// SPDX-License-Identifier: MIT
/*
 * Code addresses of a live process to names, with elfutils' libdwfl: the process's
 * modules from /proc/PID/maps, their symbol tables (.symtab, else .dynsym), and separate
 * debuginfo where installed (build-id or .gnu_debuglink under /usr/lib/debug). Modules
 * loaded after the first lookup are found by reporting the maps again when an address
 * falls outside every known module.
 */
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hmap.h"
#include "core/symbolize.h"
#include "core/util.h"

struct proc_dwfl {
	Dwfl *dwfl;
	__u64 reports; /* how often the maps were read */
	bool dead;     /* its maps could not be read: gone */
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

static void proc_free(struct proc_dwfl *p)
{
	if (p->dwfl)
		dwfl_end(p->dwfl);
	free(p);
}

void symbolizer__forget(struct symbolizer *s, __u32 pid)
{
	struct proc_dwfl *p = hmap_del(&s->procs, pid, 0);

	if (p)
		proc_free(p);
}

void symbolizer__free(struct symbolizer *s)
{
	struct hmap_slot *slot;

	if (!s)
		return;
	hmap_for_each (&s->procs, slot)
		proc_free(slot->val);
	hmap_free(&s->procs);
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
	if (!mod || !dwfl_module_info(mod, NULL, &start, &end, NULL, NULL, NULL, NULL) ||
	    at < start || at >= end)
		return -1; /* (a frame pointer chain that ran into code built without them) */
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
