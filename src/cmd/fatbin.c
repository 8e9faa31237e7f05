// SPDX-License-Identifier: MIT
/*
 * `gpuscope fatbin FILE`: the device code in a fatbin, or in a program, library or object
 * file's .nv_fatbin section (as cuobjdump lists it): each entry's kind, architecture,
 * version and compression; --ptx-for SM writes the PTX gpuscope would instrument for a
 * device of that compute capability, --extract N any entry's payload, decompressed.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <getopt.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "cmd/common.h"
#include "core/util.h"
#include "ptx/fatbin.h"

static const char usage[] =
	"usage: gpuscope fatbin [options] FILE\n"
	"\n"
	"The device code in FILE: a fatbin (nvcc -fatbin), or a program, library or object\n"
	"whose .nv_fatbin section holds it. Lists each entry: PTX or ELF (a cubin), its\n"
	"architecture, version and compression (zstd, lz or none).\n"
	"\n"
	"options:\n"
	"      --ptx-for SM   write the PTX that would be instrumented on a device of compute\n"
	"                     capability SM (e.g. 90): the highest architecture not above it\n"
	"      --extract N    write entry N's payload, decompressed\n"
	"  -h, --help         this help\n"
	"\n"
	"examples:\n"
	"  gpuscope fatbin ./vector_add\n"
	"  gpuscope fatbin kernels.fatbin --ptx-for 90 > kernels.ptx\n";

/* The .nv_fatbin section of an ELF file, or NULL (then the file is taken as a fatbin). */
static const unsigned char *elf_fatbin(const unsigned char *map, size_t len, size_t *n,
				       bool *is_elf)
{
	Elf *e;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstr;
	const unsigned char *found = NULL;

	*is_elf = len >= 4 && !memcmp(map, "\177ELF", 4);
	if (!*is_elf)
		return NULL;
	elf_version(EV_CURRENT);
	e = elf_memory((char *)map, len);
	if (!e)
		return NULL;
	if (elf_getshdrstrndx(e, &shstr) == 0)
		while ((scn = elf_nextscn(e, scn))) {
			const char *name;

			if (!gelf_getshdr(scn, &sh))
				break;
			name = elf_strptr(e, shstr, sh.sh_name);
			if (name && !strcmp(name, ".nv_fatbin") && sh.sh_type != SHT_NOBITS &&
			    sh.sh_offset <= len && sh.sh_size <= len - sh.sh_offset) {
				found = map + sh.sh_offset;
				*n = sh.sh_size;
				break;
			}
		}
	elf_end(e);
	return found;
}

static int write_all(const unsigned char *p, size_t n)
{
	return gs_io_full(STDOUT_FILENO, (void *)p, n, true);
}

int cmd_fatbin(int argc, char **argv)
{
	static const struct option opts[] = {
		OPT_ARG("ptx-for", 'p'),
		OPT_ARG("extract", 'x'),
		OPT_FLAG("help", 'h'),
		{},
	};
	__u32 sm = 0, index = 0;
	bool want_ptx = false, want_entry = false, is_elf;
	const unsigned char *map, *fb_bytes;
	struct fatbin fb;
	struct stat st;
	char err[256];
	size_t len;
	int opt, fd, code = GS_EXIT_OK;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (parse_u32(optarg, &sm) || sm < 10 || sm > 1000) {
				gs_err("fatbin: --ptx-for wants a compute capability such as 90, "
				       "not "
				       "'%s'",
				       optarg);
				return GS_EXIT_USAGE;
			}
			want_ptx = true;
			break;
		case 'x':
			if (parse_u32(optarg, &index)) {
				gs_err("fatbin: --extract wants an entry number, not '%s'", optarg);
				return GS_EXIT_USAGE;
			}
			want_entry = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return GS_EXIT_OK;
		default:
			return bad_option("fatbin", opt, argv);
		}
	}
	if (optind + 1 != argc) {
		gs_err("fatbin: %s (gpuscope fatbin FILE)",
		       optind >= argc ? "which file?" : "one file at a time");
		return GS_EXIT_USAGE;
	}
	if (want_ptx && want_entry) {
		gs_err("fatbin: --ptx-for or --extract, not both");
		return GS_EXIT_USAGE;
	}
	fd = open(argv[optind], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		gs_err("fatbin: cannot open %s: %s", argv[optind], strerror(errno));
		if (fd >= 0)
			close(fd);
		return GS_EXIT_RUNTIME;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0) {
		gs_err("fatbin: %s is not a regular, non-empty file", argv[optind]);
		close(fd);
		return GS_EXIT_RUNTIME;
	}
	len = (size_t)st.st_size;
	map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		gs_err("fatbin: cannot map %s: %s", argv[optind], strerror(errno));
		return GS_EXIT_RUNTIME;
	}
	fb_bytes = elf_fatbin(map, len, &len, &is_elf);
	if (!fb_bytes && is_elf) {
		gs_err("fatbin: %s has no .nv_fatbin section (no device code, or code loaded at "
		       "run time)",
		       argv[optind]);
		munmap((void *)map, (size_t)st.st_size);
		return GS_EXIT_RUNTIME;
	}
	if (!fb_bytes)
		fb_bytes = map;
	if (fatbin_parse(fb_bytes, len, &fb, err, sizeof(err))) {
		gs_err("fatbin: %s: %s", argv[optind], err);
		munmap((void *)map, (size_t)st.st_size);
		return GS_EXIT_RUNTIME;
	}
	if (want_ptx || want_entry) {
		const struct fatbin_entry *e = want_ptx	      ? fatbin_pick_ptx(&fb, sm)
					       : index < fb.n ? &fb.e[index]
							      : NULL;
		unsigned char *payload;
		size_t n;

		if (!e) {
			if (want_ptx)
				gs_err("fatbin: %s has no PTX for sm_%u or below", argv[optind],
				       sm);
			else
				gs_err("fatbin: %s has %zu entries, no entry %u", argv[optind],
				       fb.n, index);
			code = GS_EXIT_RUNTIME;
		} else if (fatbin_payload(e, &payload, &n, err, sizeof(err))) {
			gs_err("fatbin: %s: %s", argv[optind], err);
			code = GS_EXIT_RUNTIME;
		} else {
			if (write_all(payload, n)) {
				gs_err("fatbin: writing to stdout failed: %s", strerror(errno));
				code = GS_EXIT_RUNTIME;
			}
			free(payload);
		}
	} else {
		printf("%s: %zu entr%s in %zu bytes\n", argv[optind], fb.n, fb.n == 1 ? "y" : "ies",
		       fb.bytes);
		printf("  %3s %-4s %7s %8s %-5s %10s %10s %9s\n", "#", "kind", "arch", "version",
		       "comp", "stored", "size", "container");
		for (size_t i = 0; i < fb.n; i++) {
			const struct fatbin_entry *e = &fb.e[i];
			char ver[16];

			snprintf(ver, sizeof(ver), "%u.%u", e->major, e->minor);
			printf("  %3zu %-4s %4s%-3u %8s %-5s %10zu %10zu %9u\n", i,
			       fatbin_kind_name(e->kind), "sm_", e->arch, ver,
			       fatbin_compression_name(e->compression), e->stored, e->size,
			       e->container);
		}
	}
	fatbin_free(&fb);
	munmap((void *)map, (size_t)st.st_size);
	return code;
}
