// SPDX-License-Identifier: MIT
/*
 * `gpuscope bpf2ptx FILE.bpf.o`: the PTX that device-side probes would run, for each program
 * of a clang-compiled eBPF object (read with libbpf), and with --run, what the reference
 * interpreter returns for it on a given context: for checking the translator.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "cmd/common.h"
#include "core/util.h"
#include "ptx/bpfobj.h"
#include "ptx/bundle.h"
#include "ptx/gpuring.h"
#include "ptx/rewrite.h"
#include "ptx/translate.h"

static const char usage[] =
	"usage: gpuscope bpf2ptx [options] FILE.bpf.o\n"
	"\n"
	"Translate the device programs of an eBPF object (clang -target bpf) to PTX, as\n"
	"device-side probes run them, and write the PTX module to stdout. What cannot be\n"
	"translated is refused with the instruction, its opcode and why. Host programs\n"
	"(sections uprobe, uretprobe, tracepoint/..., perf_event...: bpftime's objects have\n"
	"them beside their kprobe/KERNEL device programs) are named and left to the host.\n"
	"\n"
	"options:\n"
	"  -p, --program NAME  only this program (default: all)\n"
	"      --sm N          the module's target (default 90)\n"
	"      --into FILE     instrument the PTX module FILE instead: each program whose section\n"
	"                      names a probe point (gpu/entry/KERNEL, gpu/exit/KERNEL, or\n"
	"                      bpftime's kprobe/KERNEL and kretprobe/KERNEL; KERNEL * for\n"
	"                      all) is called there; the module is written to stdout\n"
	"      --launch-param  with --into: append the __gs_launch parameter to instrumented\n"
	"                      kernels, as `gpuscope probe` does (then launches must pass it)\n"
	"      --kernel NAME   with --into: only this kernel; the module's others are left out,\n"
	"                      as `gpuscope probe` compiles each kernel it launches\n"
	"      --run HEX       run the program on the reference interpreter instead, with its\n"
	"                      context the bytes HEX, and print r0 and the context after (the\n"
	"                      GPU helpers answer as thread (5,1,0) of block (2,0,0), grid\n"
	"                      4x1x1, blocks 32x2x1, SM 7, warp 3, lane 5, timer 1 s, device\n"
	"                      1, process 4242)\n"
	"  -h, --help          this help\n";

#define RUN_THREADS	 256u /* the launch --run plays a thread of: 4 blocks of 64 */
#define RUN_THREAD_INDEX 165  /* its thread: block 2 * 64 + (1 * 32 + 5) */

/* The bytes of a map's memory for --run. */
static size_t map_bytes(const struct bpfobj_map *o, const struct bpf_map_mem *m)
{
	if (m->kind == GS_MAP_HASH)
		return bpf_hash_slot(o->key_size, o->value_size) * o->max_entries;
	return (size_t)o->value_size * o->max_entries * m->extra;
}

static void print_record(void *arg, unsigned long long gpu_ns, const unsigned char *data,
			 unsigned int len)
{
	(void)arg;
	printf("%u@%llu:", len, gpu_ns);
	for (unsigned int i = 0; i < len; i++)
		printf("%02x", data[i]);
	printf(";");
}

/* --run: what a ring holds, drained as the host drains it: NAME=LEN@GPU_NS:HEX;... and its
 * drops. */
static void print_ring(const char *name, const struct bpf_map_mem *m)
{
	unsigned long long ctl[2];

	if (!m->data)
		return;
	printf(" %s=", name);
	if (gpuring_drain(m->ring, m->extra, m->tail, 1u << 20, print_record, NULL) < 0)
		printf("corrupt;");
	memcpy(ctl, m->data, sizeof(ctl));
	printf(" %s.drops=%llu", name, ctl[1]);
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

static bool has_kernel(const struct ptx_rewrite_stats *st, const char *name)
{
	for (unsigned int k = 0; k < st->kernels; k++)
		if (!strcmp(st->k[k].name, name))
			return true;
	return false;
}

int cmd_bpf2ptx(int argc, char **argv)
{
	static const struct option opts[] = {
		OPT_ARG("program", 'p'),       OPT_ARG("sm", 's'),
		OPT_ARG("run", 'r'),	       OPT_ARG("into", 'i'),
		OPT_FLAG("launch-param", 'L'), OPT_ARG("kernel", 'k'),
		OPT_FLAG("help", 'h'),	       {},
	};
	const char *only = NULL, *run_hex = NULL, *into = NULL, *kernel = NULL;
	bool launch_param = false;
	struct bpf_map_mem mem[BPFOBJ_MAX_MAPS] = { { 0 } };
	struct bpfobj obj;
	const struct bpfobj_map *maps = obj.maps;
	size_t nmaps;
	struct ptx_probe probes[64];
	char probe_names[64][160];
	size_t nprobes = 0;
	/* The thread --run plays: thread (5,1,0) of block (2,0,0) in a 4x1x1 grid of 32x2x1
	 * blocks (RUN_THREADS threads; it is RUN_THREAD_INDEX), on SM 7, warp 3 lane 5, all
	 * lanes active, at 1 s, on device 1 of process 4242. */
	struct bpf_gpu_env env = { .tid = { 5, 1, 0 },
				   .ntid = { 32, 2, 1 },
				   .ctaid = { 2, 0, 0 },
				   .nctaid = { 4, 1, 1 },
				   .smid = 7,
				   .warpid = 3,
				   .laneid = 5,
				   .activemask = 0xffffffffu,
				   .globaltimer = 1000000000ULL,
				   .pid_tgid = 4242ULL << 32 | 4242,
				   .device = 1 };
	unsigned char *ctx = NULL;
	size_t ctx_n = 0;
	__u32 sm = 90;
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
		case 'L':
			launch_param = true;
			break;
		case 'k':
			kernel = optarg;
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
	if (kernel && !into) {
		gs_err("bpf2ptx: --kernel goes with --into");
		return GS_EXIT_USAGE;
	}
	if (run_hex && parse_hex(run_hex, &ctx, &ctx_n)) {
		gs_err("bpf2ptx: --run wants an even number of hex digits (at most 4096 bytes)");
		return GS_EXIT_USAGE;
	}
	if (bpfobj_open(argv[optind], &obj, err, sizeof(err))) {
		gs_err("bpf2ptx: %s", err);
		free(ctx);
		return GS_EXIT_RUNTIME;
	}
	nmaps = obj.nmaps;
	env.rodata = obj.rodata;
	env.rodata_len = obj.rodata_len;
	for (size_t m = 0; m < nmaps; m++) {
		/* (--run: a per-thread array has one for every thread of the launch --run
		 * plays a thread of) */
		mem[m].kind = maps[m].kind;
		mem[m].extra = mem[m].kind == GS_MAP_PER_THREAD ? RUN_THREADS
			       : mem[m].kind == GS_MAP_HASH	? maps[m].key_size
								: 1;
		if (mem[m].kind == GS_MAP_RING) {
			/* (a ring the size asked, up to 64 MiB; else none: the helper then
			 * touches memory it may not) */
			if (bundle_ring_ok(maps[m].max_entries) &&
			    maps[m].max_entries <= (64u << 20)) {
				mem[m].extra = maps[m].max_entries;
				mem[m].data = xcalloc(1, GS_RING_CTL);
				mem[m].ring = xcalloc(1, mem[m].extra);
				mem[m].tail = xcalloc(1, sizeof(*mem[m].tail));
			}
			continue;
		}
		if (mem[m].kind && maps[m].value_size &&
		    map_bytes(&maps[m], &mem[m]) <= (64u << 20))
			mem[m].data = xcalloc(1, map_bytes(&maps[m], &mem[m]));
		mem[m].value_size = maps[m].value_size;
		mem[m].max_entries = mem[m].data ? maps[m].max_entries : 0;
	}
	if (!run_hex && !into)
		sb_printf(&out, ".version 8.0\n.target sm_%u\n.address_size 64\n\n", sm);
	if (!run_hex) {
		/* The table's layout, for whoever fills it (kind: enum bpf_map_kind, 0 none) */
		for (size_t m = 0; m < nmaps; m++)
			sb_printf(&out, "// gs_maps[%zu] %s kind %u key %u value %u entries %u\n",
				  m, maps[m].name, mem[m].kind, maps[m].key_size,
				  maps[m].value_size, maps[m].max_entries);
		bpf_ptx_maps_decl(&out, (unsigned int)nmaps, obj.rodata, obj.rodata_len);
	}
	for (size_t pi = 0; pi < obj.nprogs; pi++) {
		const struct bpfobj_prog *pr = &obj.progs[pi];
		const char *name = pr->name;
		const struct bpf_insn *insns = pr->insns;
		size_t n = pr->n;

		if (only && strcmp(only, name))
			continue;
		done++;
		if (pr->host && (only || run_hex)) {
			gs_err("bpf2ptx: %s is a host program (section %s): not translated for the "
			       "GPU",
			       name, pr->section);
			code = GS_EXIT_RUNTIME;
			break;
		}
		if (pr->host) {
			const char *how = !pr->run ? ""
					  : pr->run == BPFOBJ_HOST_ENTRY
						  ? " (`gpuscope probe` runs it in the program "
						    "before each kernel launch call)"
						  : " (`gpuscope probe` runs it in the program "
						    "after each kernel launch call)";

			gs_info("bpf2ptx: %s: a host program (section %s): left to the host%s",
				name, pr->section, how);
			sb_printf(&out,
				  "// %s: a host program (section %s), left to the host%s\n\n",
				  name, pr->section, how);
			continue;
		}
		if (pr->err) {
			gs_err("bpf2ptx: %s: %s", name, pr->err);
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
				/* (per-thread: the elements of the thread --run plays, each key's
				 * at key * RUN_THREADS + RUN_THREAD_INDEX) */
				bool mine = mem[m].kind == GS_MAP_PER_THREAD;
				size_t vs = mem[m].value_size ? mem[m].value_size : 1;

				if (mem[m].kind == GS_MAP_RING) {
					print_ring(maps[m].name, &mem[m]);
					continue;
				}
				if (!mem[m].data || bytes > 4096)
					continue;
				printf(" %s=", maps[m].name);
				for (size_t i = 0; i < bytes; i++)
					printf("%02x", mem[m].data[mine ? ((i / vs) * RUN_THREADS +
									   RUN_THREAD_INDEX) *
											   vs +
										   i % vs
									: i]);
			}
			printf("\n");
			continue;
		}
		if (into) {
			enum ptx_point point;
			const char *kernel;

			if (ptx_probe_section(pr->section, &point, &kernel))
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
		const struct ptx_rewrite_opts ropts = { .kernel_base = 0,
							.launch_param = launch_param,
							.only = kernel };
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
		} else if (ptx_rewrite(text, len, out.buf, probes, nprobes, &ropts, &mod, &st, err,
				       sizeof(err))) {
			gs_err("bpf2ptx: %s: %s", into, err);
			code = GS_EXIT_RUNTIME;
		} else if (kernel && !has_kernel(&st, kernel)) {
			gs_err("bpf2ptx: %s has no kernel named %s", into, kernel);
			ptx_rewrite_stats_free(&st);
			sb_free(&mod);
			code = GS_EXIT_RUNTIME;
		} else {
			gs_info("bpf2ptx: %u of %u kernels instrumented: %u entry, %u exit, %u "
				"load and %u store calls",
				st.instrumented, st.kernels, st.entry_calls, st.exit_calls,
				st.load_calls, st.store_calls);
			if (st.nvars)
				gs_info("bpf2ptx: the module's %u variables are read through "
					"__gs_vars (set to the program's by gpuscope's loader; "
					"as they are, this module's own)",
					st.nvars);
			for (unsigned int k = 0; k < st.kernels; k++)
				if (st.k[k].variable)
					gs_info("bpf2ptx: kernel %u %s: left alone, it uses the "
						"module's texture, sampler or surface reference %s",
						st.k[k].id, st.k[k].name, st.k[k].variable);
				else if (st.k[k].instrumented)
					gs_info("bpf2ptx: kernel %u %s: %u parameters, __gs_launch "
						"at %u",
						st.k[k].id, st.k[k].name, st.k[k].nparams,
						st.k[k].launch_off);
			ptx_rewrite_stats_free(&st);
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
	bpfobj_close(&obj);
	free(ctx);
	for (size_t m = 0; m < nmaps; m++) {
		free(mem[m].data);
		free(mem[m].ring);
		free(mem[m].tail);
	}
	return code;
}
