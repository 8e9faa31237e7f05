// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/elfsym.h"
#include "core/names.h"
#include "core/util.h"

#if defined(__x86_64__)
#define GS_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define GS_ELF_MACHINE EM_AARCH64
#endif

struct loadseg {
	__u64 vaddr, filesz, offset;
};

static int vaddr_to_offset(const struct loadseg *segs, size_t n, __u64 v, __u64 *off)
{
	for (size_t i = 0; i < n; i++)
		if (v >= segs[i].vaddr && v < segs[i].vaddr + segs[i].filesz) {
			*off = v - segs[i].vaddr + segs[i].offset;
			return 0;
		}
	return -1;
}

/* The string of the first dynamic entry with `tag`, copied into out. */
static void read_dyn_string(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, __s64 tag, char *out,
			    size_t n)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	GElf_Dyn dyn;

	if (!d || !sh->sh_entsize)
		return;
	for (size_t i = 0; i < sh->sh_size / sh->sh_entsize; i++) {
		const char *s;

		if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag != tag)
			continue;
		s = elf_strptr(e, sh->sh_link, dyn.d_un.d_val);
		if (s)
			gs_strlcpy(out, s, n);
		return;
	}
}

static void scan_symbols(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, const struct loadseg *segs,
			 size_t nsegs, __u64 *found)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n;
	GElf_Sym sym;

	if (!d || !sh->sh_entsize)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < n; i++) {
		const char *name;
		__u64 off;
		int api;

		if (!gelf_getsym(d, (int)i, &sym))
			break;
		if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
		    !sym.st_value)
			continue;
		name = elf_strptr(e, sh->sh_link, sym.st_name);
		if (!name || (name[0] != 'c' && name[0] != 'n' && name[0] != '_'))
			continue;
		api = api_lookup(name);
		if (api <= 0 || found[api])
			continue;
		if (vaddr_to_offset(segs, nsegs, sym.st_value, &off) == 0 && off)
			found[api] = off;
	}
}

unsigned int elf_uprobe_skip(const unsigned char *code, size_t n)
{
#if defined(__x86_64__)
	static const unsigned char endbr64[] = { 0xf3, 0x0f, 0x1e, 0xfa };
	const unsigned char *c = code + 4;

	if (n < 8 || memcmp(code, endbr64, 4))
		return 0;
	if (c[0] == 0x66) /* (an operand-size prefix: nops only) */
		return c[1] == 0x90 || (c[1] == 0x0f && c[2] == 0x1f) ? 4 : 0;
	if ((c[0] >= 0x50 && c[0] <= 0x57) || (c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57))
		return 4; /* push %reg */
	if (c[0] == 0x90 || (c[0] == 0x0f && c[1] == 0x1f))
		return 4; /* nop */
	if (c[0] == 0xe8 || c[0] == 0xe9 || c[0] == 0xeb)
		return 4; /* call, jmp */
#else
	(void)code;
	(void)n;
#endif
	return 0;
}

__u64 elf_uprobe_site(const char *path, __u64 off)
{
	unsigned char code[8];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return off;
	got = pread(fd, code, sizeof(code), (off_t)off);
	close(fd);
	return got == (ssize_t)sizeof(code) ? off + elf_uprobe_skip(code, sizeof(code)) : off;
}

static int find_in_elf(Elf *e, bool use_symtab, struct elf_apis *out, char *err, size_t errlen)
{
	struct loadseg *segs = NULL;
	size_t nphdr, nsegs = 0, rawlen = 0;
	const unsigned char *raw;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) {
		snprintf(err, errlen, "not an ELF file");
		return -1;
	}
	if (gelf_getclass(e) != ELFCLASS64 || eh.e_machine != GS_ELF_MACHINE) {
		snprintf(err, errlen, "ELF file for another machine");
		return -1;
	}
	if (elf_getphdrnum(e, &nphdr) || nphdr > 4096) {
		snprintf(err, errlen, "malformed ELF program headers");
		return -1;
	}
	segs = xcalloc(nphdr ? nphdr : 1, sizeof(*segs));
	for (size_t i = 0; i < nphdr; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		segs[nsegs++] = (struct loadseg){ ph.p_vaddr, ph.p_filesz, ph.p_offset };
	}
	if (!nsegs) {
		snprintf(err, errlen, "ELF file has nothing to load");
		goto out;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM || (use_symtab && sh.sh_type == SHT_SYMTAB))
			scan_symbols(e, scn, &sh, segs, nsegs, out->offset);
		else if (sh.sh_type == SHT_DYNAMIC)
			read_dyn_string(e, scn, &sh, DT_SONAME, out->soname, sizeof(out->soname));
	}
	/* One probe per address: aliases keep the first name of the table. Each past a
	 * leading endbr64 where that spares a trap (elf_uprobe_skip). */
	raw = (const unsigned char *)elf_rawfile(e, &rawlen);
	for (int a = 1; a < GS_API_MAX; a++) {
		if (!out->offset[a])
			continue;
		for (int b = 1; b < a; b++)
			if (out->offset[b] == out->offset[a]) {
				out->offset[a] = 0;
				out->naliases++;
				break;
			}
		if (out->offset[a])
			out->nfound++;
	}
	for (int a = 1; raw && a < GS_API_MAX; a++)
		if (out->offset[a] && out->offset[a] < rawlen)
			out->offset[a] +=
				elf_uprobe_skip(raw + out->offset[a], rawlen - out->offset[a]);
	ret = 0;
out:
	free(segs);
	return ret;
}

int elf_find_apis_mem(const void *buf, size_t len, bool use_symtab, struct elf_apis *out, char *err,
		      size_t errlen)
{
	Elf *e;
	int ret;

	elf_version(EV_CURRENT);
	e = elf_memory((char *)buf, len);
	if (!e) {
		snprintf(err, errlen, "not an ELF file (%s)", elf_errmsg(-1));
		return -1;
	}
	ret = find_in_elf(e, use_symtab, out, err, errlen);
	elf_end(e);
	return ret;
}

int elf_find_apis(const char *path, bool use_symtab, struct elf_apis *out, char *err, size_t errlen)
{
	int fd, ret;
	Elf *e;

	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e) {
		snprintf(err, errlen, "not an ELF file (%s)", elf_errmsg(-1));
		close(fd);
		return -1;
	}
	ret = find_in_elf(e, use_symtab, out, err, errlen);
	elf_end(e);
	close(fd);
	return ret;
}

int elf_search_paths(const char *path, char *rpath, size_t rlen, char *runpath, size_t runlen)
{
	Elf_Scn *scn = NULL;
	int fd;
	Elf *e;

	rpath[0] = runpath[0] = 0;
	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		close(fd);
		return -1;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNAMIC) {
			read_dyn_string(e, scn, &sh, DT_RPATH, rpath, rlen);
			read_dyn_string(e, scn, &sh, DT_RUNPATH, runpath, runlen);
		}
	}
	elf_end(e);
	close(fd);
	return 0;
}

/* A symbol's value and size in one symbol table section; 0 if found. */
static int find_symbol_in(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, const char *name, __u64 *value,
			  __u64 *size)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	for (size_t i = 0; d && i < n; i++) {
		GElf_Sym s;
		const char *nm;

		if (!gelf_getsym(d, (int)i, &s) || !s.st_value)
			continue;
		nm = elf_strptr(e, sh->sh_link, s.st_name);
		if (nm && !strcmp(nm, name)) {
			*value = s.st_value;
			*size = s.st_size;
			return 0;
		}
	}
	return -1;
}

int elf_find_symbol(const char *path, const char *name, __u64 *value, __u64 *size, bool *pie)
{
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	int fd, ret = -1;
	Elf *e;

	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh))
		goto out;
	*pie = eh.e_type == ET_DYN;
	/* The dynamic symbols first (always there), then the full table where it is kept. */
	for (int pass = 0; pass < 2 && ret; pass++) {
		scn = NULL;
		while (ret && (scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;

			if (gelf_getshdr(scn, &sh) &&
			    sh.sh_type == (pass ? SHT_SYMTAB : SHT_DYNSYM))
				ret = find_symbol_in(e, scn, &sh, name, value, size);
		}
	}
out:
	if (e)
		elf_end(e);
	close(fd);
	return ret;
}
