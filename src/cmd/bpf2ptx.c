// SPDX-License-Identifier: MIT
/*
 * `gpuscope bpf2ptx FILE.bpf.o`: the PTX that device-side probes would run, for each program
 * of a clang-compiled eBPF object (read with libbpf), and with --run, what the reference
 * interpreter returns for it on a given context: for checking the translator.
 */
#include <errno.h>
#include <gelf.h>
#include <getopt.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cmd/cmds.h"
#include "cmd/common.h"
#include "core/util.h"
#include "ptx/rewrite.h"
#include "ptx/translate.h"

static const char usage[] =
	"usage: gpuscope bpf2ptx [options] FILE.bpf.o\n"
	"\n"
	"Translate the programs of an eBPF object (clang -target bpf) to PTX, as device-side\n"
	"probes run them, and write the PTX module to stdout. What cannot be translated is\n"
	"refused with the instruction, its opcode and why.\n"
	"\n"
	"options:\n"
	"  -p, --program NAME  only this program (default: all)\n"
	"      --sm N          the module's target (default 90)\n"
	"      --into FILE     instrument the PTX module FILE instead: each program whose section\n"
	"                      names a probe point (gpu/entry/KERNEL, gpu/exit/KERNEL, or\n"
	"                      bpftime's kprobe/KERNEL and kretprobe/KERNEL; KERNEL * for\n"
	"                      all) is called there; the module is written to stdout\n"
	"      --run HEX       run the program on the reference interpreter instead, with its\n"
	"                      context the bytes HEX, and print r0 and the context after (the\n"
	"                      GPU helpers answer as thread (5,1,0) of block (2,0,0), grid\n"
	"                      4x1x1, blocks 32x2x1, SM 7, warp 3, lane 5, timer 1 s)\n"
	"  -h, --help          this help\n";

/* Relocations in the program's section: map and global references the translator cannot
 * resolve yet. The first one's instruction and symbol, or -1. */
static long first_relocation(const char *path, const char *section, char *sym, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e;
	Elf_Scn *scn = NULL, *target = NULL;
	size_t shstr, target_ndx = 0;
	long found = -1;

	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_getshdrstrndx(e, &shstr)) {
		if (e)
			elf_end(e);
		close(fd);
		return -1;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (gelf_getshdr(scn, &sh) && (name = elf_strptr(e, shstr, sh.sh_name)) &&
		    !strcmp(name, section)) {
			target = scn;
			target_ndx = elf_ndxscn(scn);
		}
	}
	scn = NULL;
	while (target && found < 0 && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh, symsh;
		Elf_Data *d, *syms;
		GElf_Rel rel;
		GElf_Sym s;
		Elf_Scn *symscn;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_REL || sh.sh_info != target_ndx)
			continue;
		d = elf_getdata(scn, NULL);
		symscn = elf_getscn(e, sh.sh_link);
		syms = symscn ? elf_getdata(symscn, NULL) : NULL;
		if (!d || !d->d_size || !symscn || !gelf_getshdr(symscn, &symsh))
			continue;
		if (!gelf_getrel(d, 0, &rel))
			continue;
		found = (long)(rel.r_offset / sizeof(struct bpf_insn));
		snprintf(sym, n, "?");
		if (syms && gelf_getsym(syms, (int)GELF_R_SYM(rel.r_info), &s)) {
			const char *nm = elf_strptr(e, symsh.sh_link, s.st_name);

			if (nm && *nm)
				snprintf(sym, n, "%s", nm);
		}
	}
	elf_end(e);
	close(fd);
	return found;
}

static int read_whole(FILE *f, char **out, size_t *n)
{
	struct strbuf sb = { 0 };
	char buf[65536];
	size_t r;

	while ((r = fread(buf, 1, sizeof(buf), f)) > 0)
		sb_putn(&sb, buf, r);
	if (ferror(f)) {
		sb_free(&sb);
		return -1;
	}
	sb_putc(&sb, 0);
	*out = sb.buf;
	*n = sb.len - 1;
	return 0;
}

static int parse_hex(const char *s, unsigned char **out, size_t *n)
{
	size_t len = strlen(s);

	if (len % 2 || len > 2 * 4096)
		return -1;
	*out = xcalloc(len / 2 + 8, 1);
	for (size_t i = 0; i < len / 2; i++) {
		unsigned int v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1) {
			free(*out);
			return -1;
		}
		(*out)[i] = (unsigned char)v;
	}
	*n = len / 2;
	return 0;
}

int cmd_bpf2ptx(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "program", required_argument, NULL, 'p' },
		{ "sm", required_argument, NULL, 's' },
		{ "run", required_argument, NULL, 'r' },
		{ "into", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	const char *only = NULL, *run_hex = NULL, *into = NULL;
	struct ptx_probe probes[64];
	char probe_names[64][160];
	size_t nprobes = 0;
	/* The thread --run plays: thread (5,1,0) of block (2,0,0) in a 4x1x1 grid of 32x2x1
	 * blocks, on SM 7, warp 3 lane 5, all lanes active, at 1 s. */
	struct bpf_gpu_env env = { .tid = { 5, 1, 0 },
				   .ntid = { 32, 2, 1 },
				   .ctaid = { 2, 0, 0 },
				   .nctaid = { 4, 1, 1 },
				   .smid = 7,
				   .warpid = 3,
				   .laneid = 5,
				   .activemask = 0xffffffffu,
				   .globaltimer = 1000000000ULL };
	unsigned char *ctx = NULL;
	size_t ctx_n = 0;
	__u32 sm = 90;
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct strbuf out = { 0 };
	char err[512];
	int opt, code = GS_EXIT_OK, done = 0;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":p:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			only = optarg;
			break;
		case 's':
			if (parse_u32(optarg, &sm) || sm < 50 || sm > 1000) {
				gs_err("bpf2ptx: --sm wants a compute capability such as 90, not "
				       "'%s'",
				       optarg);
				return GS_EXIT_USAGE;
			}
			break;
		case 'r':
			run_hex = optarg;
			break;
		case 'i':
			into = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return GS_EXIT_OK;
		default:
			return bad_option("bpf2ptx", opt, argv);
		}
	}
	if (optind + 1 != argc) {
		gs_err("bpf2ptx: %s (gpuscope bpf2ptx FILE.bpf.o)",
		       optind >= argc ? "which object?" : "one object at a time");
		return GS_EXIT_USAGE;
	}
	if (run_hex && into) {
		gs_err("bpf2ptx: --run or --into, not both");
		return GS_EXIT_USAGE;
	}
	if (run_hex && parse_hex(run_hex, &ctx, &ctx_n)) {
		gs_err("bpf2ptx: --run wants an even number of hex digits (at most 4096 bytes)");
		return GS_EXIT_USAGE;
	}
	libbpf_set_print(NULL);
	obj = bpf_object__open_file(argv[optind], NULL);
	if (!obj) {
		gs_err("bpf2ptx: %s is not an eBPF object libbpf can open: %s", argv[optind],
		       strerror(errno));
		free(ctx);
		return GS_EXIT_RUNTIME;
	}
	if (!run_hex && !into)
		sb_printf(&out, ".version 8.0\n.target sm_%u\n.address_size 64\n\n", sm);
	bpf_object__for_each_program(prog, obj)
	{
		const char *name = bpf_program__name(prog);
		const struct bpf_insn *insns = bpf_program__insns(prog);
		size_t n = bpf_program__insn_cnt(prog);
		char sym[128];
		long rel;

		if (only && strcmp(only, name))
			continue;
		done++;
		rel = first_relocation(argv[optind], bpf_program__section_name(prog), sym,
				       sizeof(sym));
		if (rel >= 0) {
			gs_err("bpf2ptx: %s: instruction %ld refers to %s: maps, globals and calls "
			       "to other functions are not supported yet",
			       name, rel, sym);
			code = GS_EXIT_RUNTIME;
			break;
		}
		if (run_hex) {
			unsigned long long r0;

			if (bpf_interp(insns, n, ctx, ctx_n, &env, 1000000, &r0, err,
				       sizeof(err))) {
				gs_err("bpf2ptx: %s: %s", name, err);
				code = GS_EXIT_RUNTIME;
				break;
			}
			printf("%s r0=%llu ctx=", name, r0);
			for (size_t i = 0; i < ctx_n; i++)
				printf("%02x", ctx[i]);
			printf("\n");
			continue;
		}
		if (into) {
			enum ptx_point point;
			const char *kernel;

			if (ptx_probe_section(bpf_program__section_name(prog), &point, &kernel))
				continue; /* (not a probe: a helper program, say) */
			if (nprobes == 64) {
				gs_err("bpf2ptx: more than 64 probes");
				code = GS_EXIT_RUNTIME;
				break;
			}
			snprintf(probe_names[nprobes], sizeof(probe_names[0]), "gs_probe_%s", name);
			probes[nprobes] = (struct ptx_probe){ .kernel = kernel,
							      .point = point,
							      .func = probe_names[nprobes] };
			name = probe_names[nprobes++];
		}
		if (bpf_to_ptx(insns, n, name, &out, err, sizeof(err))) {
			gs_err("bpf2ptx: %s: %s", name, err);
			code = GS_EXIT_RUNTIME;
			break;
		}
		sb_puts(&out, "\n");
	}
	if (!code && into) {
		struct strbuf mod = { 0 };
		struct ptx_rewrite_stats st;
		char *text = NULL;
		size_t len = 0;
		FILE *f = fopen(into, "re");

		if (!f || read_whole(f, &text, &len)) {
			gs_err("bpf2ptx: cannot read %s: %s", into, strerror(errno));
			code = GS_EXIT_RUNTIME;
		} else if (!nprobes) {
			gs_err("bpf2ptx: %s has no program in a probe section (gpu/entry/KERNEL, "
			       "gpu/exit/KERNEL)",
			       argv[optind]);
			code = GS_EXIT_RUNTIME;
		} else if (ptx_rewrite(text, len, out.buf, probes, nprobes, &mod, &st, err,
				       sizeof(err))) {
			gs_err("bpf2ptx: %s: %s", into, err);
			code = GS_EXIT_RUNTIME;
		} else {
			gs_info("bpf2ptx: %u of %u kernels instrumented: %u entry and %u exit "
				"calls",
				st.instrumented, st.kernels, st.entry_calls, st.exit_calls);
			sb_free(&out);
			out = mod;
		}
		if (f)
			fclose(f);
		free(text);
	}
	if (!code && !done) {
		gs_err("bpf2ptx: %s has %s", argv[optind],
		       only ? "no program of that name" : "no programs");
		code = GS_EXIT_RUNTIME;
	}
	if (!code && !run_hex)
		fwrite(out.buf, 1, out.len, stdout);
	sb_free(&out);
	bpf_object__close(obj);
	free(ctx);
	return code;
}
