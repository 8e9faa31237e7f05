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

#define MAX_MAPS	 64
#define RUN_THREADS	 256u /* the launch --run plays a thread of: 4 blocks of 64 */
#define RUN_THREAD_INDEX 165  /* its thread: block 2 * 64 + (1 * 32 + 5) */

struct objmap {
	char name[64];
	unsigned int type, key_size, value_size, max_entries;
};

/* The GPU's kind of a map type, 0 if it has none. */
static unsigned int map_kind(unsigned int type)
{
	return type == BPF_MAP_TYPE_ARRAY	   ? GS_MAP_ARRAY
	       : type == BPF_MAP_TYPE_PERCPU_ARRAY ? GS_MAP_PER_THREAD
	       : type == BPF_MAP_TYPE_HASH	   ? GS_MAP_HASH
						   : 0;
}

/* The bytes of a map's memory for --run. */
static size_t map_bytes(const struct objmap *o, const struct bpf_map_mem *m)
{
	if (m->kind == GS_MAP_HASH)
		return bpf_hash_slot(o->key_size, o->value_size) * o->max_entries;
	return (size_t)o->value_size * o->max_entries * m->extra;
}

/*
 * Resolve the program's relocations (found in the ELF file: libbpf does not give them out
 * before loading): references to array maps become BPF_PSEUDO_MAP_IDX immediates in insns;
 * anything else is refused (msg). 0, or -1.
 */
static int resolve(const char *path, const char *section, const char *prog, struct bpf_insn *insns,
		   size_t n, const struct objmap *maps, size_t nmaps, char *msg, size_t msglen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	Elf *e;
	Elf_Scn *scn = NULL;
	size_t shstr, target_ndx = 0;
	__u64 prog_off = 0;

	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_getshdrstrndx(e, &shstr)) {
		if (e)
			elf_end(e);
		close(fd);
		return 0;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (gelf_getshdr(scn, &sh) && (name = elf_strptr(e, shstr, sh.sh_name)) &&
		    !strcmp(name, section))
			target_ndx = elf_ndxscn(scn);
	}
	/* Where the program starts in its section: its function symbol's value. */
	scn = NULL;
	while (target_ndx && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Sym sym;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (int i = 0; gelf_getsym(d, i, &sym); i++) {
			const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);

			if (nm && !strcmp(nm, prog) && sym.st_shndx == target_ndx)
				prog_off = sym.st_value;
		}
	}
	scn = NULL;
	while (target_ndx && !rc && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh, symsh;
		Elf_Data *d, *syms;
		Elf_Scn *symscn;
		GElf_Rel rel;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_REL || sh.sh_info != target_ndx)
			continue;
		d = elf_getdata(scn, NULL);
		symscn = elf_getscn(e, sh.sh_link);
		syms = symscn ? elf_getdata(symscn, NULL) : NULL;
		if (!d || !syms || !gelf_getshdr(symscn, &symsh))
			continue;
		for (int i = 0; !rc && gelf_getrel(d, i, &rel); i++) {
			GElf_Sym sym;
			const char *nm = "?";
			size_t at, m;

			if (rel.r_offset < prog_off ||
			    (rel.r_offset - prog_off) / sizeof(struct bpf_insn) >= n)
				continue; /* (another program's) */
			at = (rel.r_offset - prog_off) / sizeof(struct bpf_insn);
			if (gelf_getsym(syms, (int)GELF_R_SYM(rel.r_info), &sym)) {
				const char *x = elf_strptr(e, symsh.sh_link, sym.st_name);

				if (x && *x)
					nm = x;
			}
			for (m = 0; m < nmaps && strcmp(maps[m].name, nm); m++)
				;
			if (m == nmaps || insns[at].code != (BPF_LD | BPF_IMM | BPF_DW)) {
				snprintf(msg, msglen,
					 "instruction %zu refers to %s: globals and calls to other "
					 "functions are not supported yet",
					 at, nm);
				rc = -1;
			} else if (!map_kind(maps[m].type) ||
				   (map_kind(maps[m].type) != GS_MAP_HASH &&
				    maps[m].key_size != 4) ||
				   !maps[m].key_size || maps[m].key_size > 256) {
				snprintf(
					msg, msglen,
					"instruction %zu refers to map %s of type %u, key size %u: "
					"only arrays (type %d) and per-thread arrays (percpu "
					"arrays, "
					"type %d) with 4-byte keys, and hash maps (type %d) with "
					"keys "
					"of up to 256 bytes, run on the GPU",
					at, nm, maps[m].type, maps[m].key_size, BPF_MAP_TYPE_ARRAY,
					BPF_MAP_TYPE_PERCPU_ARRAY, BPF_MAP_TYPE_HASH);
				rc = -1;
			} else {
				insns[at].src_reg = BPF_PSEUDO_MAP_IDX;
				insns[at].imm = (__s32)m;
			}
		}
	}
	elf_end(e);
	close(fd);
	return rc;
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
	struct objmap maps[MAX_MAPS];
	struct bpf_map_mem mem[MAX_MAPS] = { { 0 } };
	struct bpf_insn *owned = NULL;
	struct bpf_map *map;
	size_t nmaps = 0;
	struct ptx_probe probes[64];
	char probe_names[64][160];
	size_t nprobes = 0;
	/* The thread --run plays: thread (5,1,0) of block (2,0,0) in a 4x1x1 grid of 32x2x1
	 * blocks (RUN_THREADS threads; it is RUN_THREAD_INDEX), on SM 7, warp 3 lane 5, all
	 * lanes active, at 1 s. */
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
	bpf_object__for_each_map(map, obj)
	{
		if (nmaps == MAX_MAPS)
			break;
		snprintf(maps[nmaps].name, sizeof(maps[0].name), "%s", bpf_map__name(map));
		maps[nmaps].type = bpf_map__type(map);
		maps[nmaps].key_size = bpf_map__key_size(map);
		maps[nmaps].value_size = bpf_map__value_size(map);
		maps[nmaps].max_entries = bpf_map__max_entries(map);
		/* (--run: a per-thread array has one for every thread of the launch --run
		 * plays a thread of) */
		mem[nmaps].kind = map_kind(maps[nmaps].type);
		mem[nmaps].extra = mem[nmaps].kind == GS_MAP_PER_THREAD ? RUN_THREADS
				   : mem[nmaps].kind == GS_MAP_HASH	? maps[nmaps].key_size
									: 1;
		if (mem[nmaps].kind && maps[nmaps].value_size &&
		    map_bytes(&maps[nmaps], &mem[nmaps]) <= (64u << 20))
			mem[nmaps].data = xcalloc(1, map_bytes(&maps[nmaps], &mem[nmaps]));
		mem[nmaps].value_size = maps[nmaps].value_size;
		mem[nmaps].max_entries = mem[nmaps].data ? maps[nmaps].max_entries : 0;
		nmaps++;
	}
	if (!run_hex && !into)
		sb_printf(&out, ".version 8.0\n.target sm_%u\n.address_size 64\n\n", sm);
	if (!run_hex) {
		/* The table's layout, for whoever fills it (kind: enum bpf_map_kind, 0 none) */
		for (size_t m = 0; m < nmaps; m++)
			sb_printf(&out, "// gs_maps[%zu] %s kind %u key %u value %u entries %u\n",
				  m, maps[m].name, mem[m].kind, maps[m].key_size,
				  maps[m].value_size, maps[m].max_entries);
		bpf_ptx_maps_decl(&out, (unsigned int)nmaps);
	}
	bpf_object__for_each_program(prog, obj)
	{
		const char *name = bpf_program__name(prog);
		size_t n = bpf_program__insn_cnt(prog);
		struct bpf_insn *insns;

		if (only && strcmp(only, name))
			continue;
		done++;
		insns = xmalloc((n + 1) * sizeof(*insns));
		memcpy(insns, bpf_program__insns(prog), n * sizeof(*insns));
		free(owned);
		owned = insns;
		if (resolve(argv[optind], bpf_program__section_name(prog), name, insns, n, maps,
			    nmaps, err, sizeof(err))) {
			gs_err("bpf2ptx: %s: %s", name, err);
			code = GS_EXIT_RUNTIME;
			break;
		}
		if (run_hex) {
			unsigned long long r0;

			if (bpf_interp(insns, n, ctx, ctx_n, &env, mem, nmaps, 1000000, &r0, err,
				       sizeof(err))) {
				gs_err("bpf2ptx: %s: %s", name, err);
				code = GS_EXIT_RUNTIME;
				break;
			}
			printf("%s r0=%llu ctx=", name, r0);
			for (size_t i = 0; i < ctx_n; i++)
				printf("%02x", ctx[i]);
			for (size_t m = 0; m < nmaps; m++) {
				size_t bytes =
					mem[m].kind == GS_MAP_HASH
						? map_bytes(&maps[m], &mem[m])
						: (size_t)mem[m].value_size * mem[m].max_entries;
				/* (per-thread: the array of the thread --run plays) */
				const unsigned char *d =
					mem[m].data + (mem[m].kind == GS_MAP_PER_THREAD
							       ? RUN_THREAD_INDEX * bytes
							       : 0);

				if (!mem[m].data || bytes > 4096)
					continue;
				printf(" %s=", maps[m].name);
				for (size_t i = 0; i < bytes; i++)
					printf("%02x", d[i]);
			}
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
	free(owned);
	for (size_t m = 0; m < nmaps; m++)
		free(mem[m].data);
	return code;
}
