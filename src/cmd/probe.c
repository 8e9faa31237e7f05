// SPDX-License-Identifier: MIT
/*
 * `gpuscope probe TOOL|PROG.bpf.o -- CMD`: eBPF programs run inside the program's GPU
 * kernels. The object's programs are translated to PTX here (ptx/translate.c), handed to
 * the in-process plane in a bundle (ptx/bundle.h), which puts them into the kernels as they
 * are loaded and launched (inject/probe.c) and writes the maps out; what they hold is shown
 * at the end: by the tool's own view (sink/probe_views.c), or, for a user's object, map by
 * map.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "cmd/common.h"
#include "sink/probe_tools.h"
#include "core/util.h"
#include "ptx/bpfobj.h"
#include "ptx/bundle.h"
#include "ptx/rewrite.h"
#include "ptx/translate.h"

static const char usage[] =
	"usage: gpuscope probe [options] TOOL|PROG.bpf.o -- COMMAND [ARGS...]\n"
	"\n"
	"Run eBPF programs inside COMMAND's GPU kernels, and show what they found when it\n"
	"exits. The programs are translated to PTX and put into each kernel whose code has\n"
	"PTX, as it is loaded; launches then run the instrumented kernel. Kernels without PTX\n"
	"(SASS only), and any that cannot be instrumented, run as they were, and the output\n"
	"says which and why. Needs what `gpuscope run --inject` needs.\n"
	"\n"
	"tools:\n"
	"  kernelretsnoop  how long each GPU thread ran (entry to exit), per kernel\n"
	"  threadhist      work per GPU thread (its global memory accesses): imbalance\n"
	"  launchlate      from the launch call to the first thread starting, per launch\n"
	"  memtrace        global loads and stores per kernel, and how well they coalesce\n"
	"  smmap           blocks and warps per SM, and how evenly the SMs were loaded\n"
	"\n"
	"PROG.bpf.o: a clang -target bpf object whose sections say where each program goes:\n"
	"bpftime's kprobe/KERNEL (entry) and kretprobe/KERNEL (exit), or gpuscope's\n"
	"gpu/entry/KERNEL, gpu/exit/KERNEL, gpu/load/KERNEL, gpu/store/KERNEL, gpu/mem/KERNEL\n"
	"(KERNEL a mangled name, or * for all). Host programs in sections uprobe and\n"
	"uretprobe (bare, or on a ...LaunchKernel function) run in the program before or\n"
	"after each kernel launch call, sharing array maps with the device programs\n"
	"(bpf_ktime_get_ns there is the GPU's global timer); other host programs are named.\n"
	"Maps: bpftime's GPU_ARRAY_MAP (1503, 1513), GPU_KERNEL_SHARED_ARRAY_MAP (1504: in\n"
	"host memory), PERGPUTD_ARRAY_MAP (1502, 1512: one per GPU thread), GPU_HASH_MAP\n"
	"(1501) and GPU_RINGBUF_MAP (1527), or the kernel's arrays,\n"
	"per-CPU arrays (one per GPU thread), hash maps, ring buffers (RINGBUF,\n"
	"PERF_EVENT_ARRAY). Maps are printed at the end; rings are drained while the kernels\n"
	"run into the event stream (bpf_perf_event_output, bpf_ringbuf_output), their records\n"
	"printed at the end. The context (gpuscope's sections) is struct gs_probe_ctx\n"
	"(include/gpuscope/probe.h); bpftime's programs take none.\n"
	"\n"
	"options:\n"
	"  -k, --kernel NAME   a tool: only kernels of this mangled name\n"
	"      --threads N     per-thread arrays hold N threads (default 1048576): threads\n"
	"                      further into the grid are not counted\n"
	"  -o, --keep DIR      keep the bundle, the maps' snapshots and the run's recording\n"
	"                      (events.gsrec: gpuscope report reads it) in DIR\n"
	"      --records N     ring buffer records shown per ring (default 100; 0: all)\n"
	"      --replay DIR    show what a kept DIR holds, without running anything\n"
	"      --json FILE     also the maps at the end and the rings' records as JSON, for\n"
	"                      scripts (- for stdout): entries holding something, each\n"
	"                      per-thread key with every thread's value\n"
	"  -v, --verbose       also the instrumentation's times and each kernel's registers\n"
	"  -h, --help          this help\n"
	"\n"
	"examples:\n"
	"  sudo gpuscope probe kernelretsnoop -- ./vector_add\n"
	"  sudo gpuscope probe memtrace -k _Z6vecAddPKfS0_Pfi -- ./vector_add\n"
	"  sudo gpuscope probe ./count.bpf.o -- python infer.py\n";

#define DEFAULT_THREADS (1u << 20)

/* The tools' objects, built from src/probes/ and carried inside gpuscope. */
#ifndef GS_PROBES_DIR
#error "GS_PROBES_DIR names the built probe objects (set by the Makefile)"
#endif
#define TOOL_OBJ(n)                                                                            \
	__asm__(".section .rodata\n.balign 8\n.globl gs_tool_" #n "\n"                         \
		".hidden gs_tool_" #n "\ngs_tool_" #n ":\n.incbin \"" GS_PROBES_DIR "/" #n     \
		".bpf.o\"\n.globl gs_tool_" #n "_end\n.hidden gs_tool_" #n "_end\ngs_tool_" #n \
		"_end:\n.previous\n");                                                         \
	extern const unsigned char gs_tool_##n[], gs_tool_##n##_end[];
TOOL_OBJ(kernelretsnoop)
TOOL_OBJ(threadhist)
TOOL_OBJ(launchlate)
TOOL_OBJ(memtrace)
TOOL_OBJ(smmap)

static const struct tool {
	const char *name;
	const unsigned char *obj, *end;
	void (*render)(const struct probe_results *r, FILE *out);
} tools[] = {
#define T(n)                                                   \
	{                                                      \
#n, gs_tool_##n, gs_tool_##n##_end, render_##n \
	}
	T(kernelretsnoop), T(threadhist), T(launchlate), T(memtrace), T(smmap),
#undef T
};

static const struct tool *tool_named(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
		if (!strcmp(tools[i].name, name))
			return &tools[i];
	return NULL;
}

/* The bundle for an object: its probe programs translated, its maps laid out. */
static int make_bundle(const char *path, const char *only_kernel, __u32 threads, struct bundle *b,
		       char *err, size_t errlen)
{
	struct bpfobj o;
	struct strbuf funcs = { 0 };
	int rc = -1;

	memset(b, 0, sizeof(*b));
	if (bpfobj_open(path, &o, err, errlen))
		return -1;
	for (size_t i = 0; i < o.nmaps; i++) {
		const struct bpfobj_map *m = &o.maps[i];
		struct bundle_map *bm = &b->maps[i];

		if (!m->kind) {
			snprintf(err, errlen, "map %s is of type %u: %s", m->name, m->type,
				 BPFOBJ_GPU_MAPS);
			goto out;
		}
		if (m->kind == GS_MAP_RING && !bundle_ring_ok(m->max_entries)) {
			snprintf(
				err, errlen,
				"ring buffer %s has max_entries %u: its bytes, a power of two from "
				"%u to %u",
				m->name, m->max_entries, GS_RING_MIN, GS_RING_MAX);
			goto out;
		}
		snprintf(bm->name, sizeof(bm->name), "%s", m->name);
		bm->kind = m->kind;
		bm->key_size = m->key_size;
		bm->value_size = m->value_size;
		bm->max_entries = m->max_entries;
		bm->threads = m->kind == GS_MAP_PER_THREAD ? threads : 1;
		bm->shared = m->shared;
		if (!bundle_map_bytes(bm)) {
			snprintf(err, errlen,
				 "map %s would need more than 1 GiB of device memory%s", m->name,
				 m->kind == GS_MAP_PER_THREAD ? " (fewer --threads?)" : "");
			goto out;
		}
		b->nmaps++;
	}
	bpf_ptx_maps_decl(&funcs, (unsigned int)o.nmaps, o.rodata, o.rodata_len);
	for (size_t i = 0; i < o.nprogs; i++) {
		const struct bpfobj_prog *p = &o.progs[i];
		enum ptx_point point;
		const char *kernel;
		char fname[160];

		if (p->host && p->run) {
			struct bundle_host *h = &b->hosts[b->nhosts];

			if (p->err) {
				snprintf(err, errlen, "%s (section %s): %s", p->name, p->section,
					 p->err);
				goto out;
			}
			if (b->nhosts == BUNDLE_MAX_HOST || p->n > BUNDLE_HOST_INSNS) {
				snprintf(err, errlen,
					 "%s: more than %d host programs, or more than %d "
					 "instructions in one",
					 p->name, BUNDLE_MAX_HOST, BUNDLE_HOST_INSNS);
				goto out;
			}
			snprintf(h->name, sizeof(h->name), "%s", p->name);
			h->when = p->run;
			h->n = p->n;
			h->insns = xmalloc(p->n * sizeof(*h->insns));
			memcpy(h->insns, p->insns, p->n * sizeof(*h->insns));
			b->nhosts++;
			gs_info("probe: %s (section %s) is a host program: run in the program %s "
				"each kernel launch call",
				p->name, p->section,
				p->run == BPFOBJ_HOST_ENTRY ? "before" : "after");
			continue;
		}
		if (p->host) {
			gs_info("probe: %s (section %s) is a host program: not run (gpuscope runs "
				"uprobe and uretprobe programs on the launch only)",
				p->name, p->section);
			continue;
		}
		if (ptx_probe_section(p->section, &point, &kernel))
			continue; /* (not a probe: nothing calls it) */
		if (p->err) {
			snprintf(err, errlen, "%s: %s", p->name, p->err);
			goto out;
		}
		if (b->nprobes == BUNDLE_MAX_PROBES) {
			snprintf(err, errlen, "more than %d probes", BUNDLE_MAX_PROBES);
			goto out;
		}
		snprintf(fname, sizeof(fname), "gs_probe_%s", p->name);
		if (bpf_to_ptx(p->insns, p->n, fname, &funcs, err, errlen)) {
			char *msg = xstrdup(err);

			snprintf(err, errlen, "%s: %s", p->name, msg);
			free(msg);
			goto out;
		}
		sb_puts(&funcs, "\n");
		b->probes[b->nprobes].point = point;
		b->probes[b->nprobes].kernel =
			xstrdup(only_kernel && !strcmp(kernel, "*") ? only_kernel : kernel);
		b->probes[b->nprobes].func = xstrdup(fname);
		b->nprobes++;
	}
	if (b->nhosts && o.rodata_len) {
		b->rodata = xmalloc(o.rodata_len);
		memcpy(b->rodata, o.rodata, o.rodata_len);
		b->rodata_len = o.rodata_len;
	}
	if (!b->nprobes) {
		snprintf(err, errlen,
			 "%.300s has no program in a probe section (kprobe/KERNEL, "
			 "kretprobe/KERNEL, gpu/entry/KERNEL, gpu/exit/KERNEL, gpu/load/KERNEL, "
			 "gpu/store/KERNEL, gpu/mem/KERNEL)",
			 path);
		goto out;
	}
	sb_putc(&funcs, 0);
	b->funcs = funcs.buf;
	funcs.buf = NULL;
	rc = 0;
out:
	sb_free(&funcs);
	bpfobj_close(&o);
	if (rc)
		bundle_free(b);
	return rc;
}

static int read_file(const char *path, unsigned char **out, size_t *n)
{
	FILE *f = fopen(path, "re");
	struct strbuf sb = { 0 };
	char buf[65536];
	size_t r;

	if (!f)
		return -1;
	while ((r = fread(buf, 1, sizeof(buf), f)) > 0)
		sb_putn(&sb, buf, r);
	if (ferror(f)) {
		fclose(f);
		sb_free(&sb);
		return -1;
	}
	fclose(f);
	sb_putc(&sb, 0);
	*out = (unsigned char *)sb.buf;
	*n = sb.len - 1;
	return 0;
}

/* The snapshots in dir (probe.PID), parsed. 0, or -1 with a message. */
static int load_results(const char *dir, const struct bundle *b, struct probe_results *r)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[4400], err[256];

	r->b = b;
	if (!d) {
		gs_err("probe: cannot read %s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		unsigned char *buf;
		size_t n;
		struct snapshot s;

		if (strncmp(de->d_name, "probe.", 6) ||
		    strspn(de->d_name + 6, "0123456789") != strlen(de->d_name + 6))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (read_file(path, &buf, &n)) {
			gs_warn("probe: %s: %s", path, strerror(errno));
			continue;
		}
		if (snapshot_parse(buf, n, b->nmaps, &s, err, sizeof(err))) {
			gs_warn("probe: %s: %s", path, err);
		} else {
			r->s = xrealloc(r->s, (r->n + 1) * sizeof(*r->s));
			r->s[r->n++] = s;
		}
		free(buf);
	}
	closedir(d);
	return 0;
}

static void free_results(struct probe_results *r)
{
	for (size_t i = 0; i < r->n; i++)
		snapshot_free(&r->s[i]);
	free(r->s);
}

static void remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[4400];

	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static int show(const char *dir, const struct tool *t, bool verbose, size_t max_records,
		const char *json)
{
	struct probe_results r = { 0 };
	unsigned char *buf;
	size_t n;
	char path[4096], events[4096], err[256];
	struct bundle b;

	snprintf(path, sizeof(path), "%s/bundle", dir);
	if (read_file(path, &buf, &n)) {
		gs_err("probe: cannot read %s: %s", path, strerror(errno));
		return GS_EXIT_RUNTIME;
	}
	if (bundle_parse((char *)buf, n, &b, err, sizeof(err))) {
		gs_err("probe: %s: %s", path, err);
		free(buf);
		return GS_EXIT_RUNTIME;
	}
	free(buf);
	if (load_results(dir, &b, &r)) {
		bundle_free(&b);
		return GS_EXIT_RUNTIME;
	}
	r.verbose = verbose;
	r.max_records = max_records;
	snprintf(events, sizeof(events), "%s/events.gsrec", dir);
	if (access(events, F_OK) == 0)
		r.events = events;
	render_summary(&r, stdout);
	if (r.n) {
		if (t)
			t->render(&r, stdout);
		else
			render_maps(&r, stdout);
	}
	fflush(stdout);
	if (json) {
		FILE *f = strcmp(json, "-") ? fopen(json, "we") : stdout;

		if (!f) {
			gs_err("probe: cannot write %s: %s", json, strerror(errno));
			free_results(&r);
			bundle_free(&b);
			return GS_EXIT_RUNTIME;
		}
		render_maps_json(&r, f);
		if (f != stdout && fclose(f)) {
			gs_err("probe: cannot write %s: %s", json, strerror(errno));
			free_results(&r);
			bundle_free(&b);
			return GS_EXIT_RUNTIME;
		}
		fflush(stdout);
	}
	free_results(&r);
	bundle_free(&b);
	return GS_EXIT_OK;
}

struct popts {
	const char *kernel, *keep, *replay, *json;
	__u32 threads, records;
	bool verbose;
};

/* One option: -1 taken, else the exit code to return. */
static int take_opt(struct popts *o, int opt, char **argv)
{
	switch (opt) {
	case 'k':
		o->kernel = optarg;
		return -1;
	case 'T':
		if (parse_u32(optarg, &o->threads) || !o->threads) {
			gs_err("probe: --threads wants a positive number, not '%s'", optarg);
			return GS_EXIT_USAGE;
		}
		return -1;
	case 'o':
		o->keep = optarg;
		return -1;
	case 'N':
		if (parse_u32(optarg, &o->records)) {
			gs_err("probe: --records wants a number (0: all), not '%s'", optarg);
			return GS_EXIT_USAGE;
		}
		return -1;
	case 'R':
		o->replay = optarg;
		return -1;
	case 'J':
		o->json = optarg;
		return -1;
	case 'v':
		o->verbose = true;
		return -1;
	case 'h':
		fputs(usage, stdout);
		return GS_EXIT_OK;
	default:
		return bad_option("probe", opt, argv);
	}
}

int cmd_probe(int argc, char **argv)
{
	static const struct option opts[] = {
		OPT_ARG("kernel", 'k'), OPT_ARG("threads", 'T'), OPT_ARG("keep", 'o'),
		OPT_ARG("replay", 'R'), OPT_ARG("records", 'N'), OPT_FLAG("verbose", 'v'),
		OPT_ARG("json", 'J'),	OPT_FLAG("help", 'h'),	 {},
	};
	struct popts o = { .threads = DEFAULT_THREADS, .records = 100 };
	const char *what;
	const struct tool *t;
	char dir[4096], path[4200], events[4200], err[600], objpath[4200] = "";
	struct bundle b;
	FILE *f;
	int opt, code, r;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:k:o:vh", opts, NULL)) != -1)
		if ((r = take_opt(&o, opt, argv)) >= 0)
			return r;
	if (optind >= argc) {
		gs_err("probe: which tool or object? (gpuscope probe TOOL|PROG.bpf.o -- COMMAND)");
		return GS_EXIT_USAGE;
	}
	what = argv[optind++];
	/* Options may follow the tool too (gpuscope probe memtrace -k NAME -- ...). */
	while (optind < argc && strcmp(argv[optind], "--") &&
	       (opt = getopt_long(argc, argv, "+:k:o:vh", opts, NULL)) != -1)
		if ((r = take_opt(&o, opt, argv)) >= 0)
			return r;
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++;
	t = tool_named(what);
	if (!t && !strchr(what, '/') && !strstr(what, ".o")) {
		gs_err("probe: no tool named '%s' (kernelretsnoop, threadhist, launchlate, "
		       "memtrace, smmap; or a path to an eBPF object)",
		       what);
		return GS_EXIT_USAGE;
	}
	if (o.replay) {
		if (optind < argc) {
			gs_err("probe: --replay shows a kept directory; it runs no command");
			return GS_EXIT_USAGE;
		}
		return show(o.replay, t, o.verbose, o.records, o.json);
	}
	if (optind >= argc) {
		gs_err("probe: no command given (gpuscope probe %s -- COMMAND ...)", what);
		return GS_EXIT_USAGE;
	}
	if (o.keep) {
		if (mkdir(o.keep, 0755) && errno != EEXIST) {
			gs_err("probe: cannot make %s: %s", o.keep, strerror(errno));
			return GS_EXIT_RUNTIME;
		}
		snprintf(dir, sizeof(dir), "%s", o.keep);
	} else {
		snprintf(dir, sizeof(dir), "%s/gpuscope-probe-XXXXXX",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(dir)) {
			gs_err("probe: cannot make a directory in /tmp: %s", strerror(errno));
			return GS_EXIT_RUNTIME;
		}
	}
	/* The directory is the program's to write into (it may run as another user). */
	chmod(dir, 0777);
	if (t) {
		snprintf(objpath, sizeof(objpath), "%s/%s.bpf.o", dir, t->name);
		f = fopen(objpath, "we");
		if (!f ||
		    fwrite(t->obj, 1, (size_t)(t->end - t->obj), f) != (size_t)(t->end - t->obj)) {
			gs_err("probe: cannot write %s: %s", objpath, strerror(errno));
			if (f)
				fclose(f);
			code = GS_EXIT_RUNTIME;
			goto out;
		}
		fclose(f);
	} else if (o.kernel) {
		gs_err("probe: --kernel is for tools; a program's sections name its kernels");
		code = GS_EXIT_USAGE;
		goto out;
	}
	if (make_bundle(t ? objpath : what, o.kernel, o.threads, &b, err, sizeof(err))) {
		gs_err("probe: %s", err);
		code = GS_EXIT_RUNTIME;
		goto out;
	}
	snprintf(path, sizeof(path), "%s/bundle", dir);
	snprintf(events, sizeof(events), "%s/events.gsrec", dir);
	f = fopen(path, "we");
	if (!f || bundle_write(&b, f) || fclose(f)) {
		gs_err("probe: cannot write %s: %s", path, strerror(errno));
		bundle_free(&b);
		code = GS_EXIT_RUNTIME;
		goto out;
	}
	chmod(path, 0644);
	bundle_free(&b);
	{
		struct trace_opts to = { TRACE_OPTS_DEFAULTS, .mode = GS_MODE_RUN,
					 .quiet = true,	      .no_os = true,
					 .no_nvml = true,     .inject = true,
					 .gpu_time = 0,	      .probe_bundle = path,
					 .probe_out = dir,    .record_path = events,
					 .no_report = true,   .argv = argv + optind };

		code = trace_main(&to);
		r = show(dir, t, o.verbose, o.records, o.json);
		code = code ? code : r;
	}
out:
	if (!o.keep)
		remove_tree(dir);
	return code;
}
