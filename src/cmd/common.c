// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/report.h"
#include "cmd/common.h"
#include "core/util.h"
#include "sink/sinks.h"
#include "sink/timeline.h"

int write_report(const struct model *m, const char *json_path, FILE *text_out, bool wide,
		 size_t top)
{
	struct report *r = report__build(m);
	struct text_opts to = { .wide = wide, .top = top };
	int ret = 0;

	if (json_path) {
		FILE *f = strcmp(json_path, "-") ? fopen(json_path, "w") : stdout;

		if (!f) {
			gs_err("cannot write the JSON report to '%s': %s", json_path,
			       strerror(errno));
			ret = GS_EXIT_RUNTIME;
		} else {
			report_json__write(f, r);
			if (ferror(f) || (f != stdout && fclose(f))) {
				gs_err("writing the JSON report to '%s' failed", json_path);
				ret = GS_EXIT_RUNTIME;
			}
		}
	} else {
		report_text__write(text_out, r, &to);
		if (ferror(text_out)) {
			gs_err("writing the report failed");
			ret = GS_EXIT_RUNTIME;
		}
	}
	report__free(r);
	return ret;
}

int parse_trace_opt(struct trace_opts *o, int opt, const char *arg)
{
	__u64 v;
	__u32 n;

	switch (opt) {
	case 'o':
		set_output(o, arg);
		return 1;
	case OPT_PERFETTO:
		o->perfetto_path = arg;
		return 1;
	case OPT_CHROME:
		o->chrome_path = arg;
		return 1;
	case 'q':
		o->quiet = true;
		return 1;
	case 'v':
		gs_set_verbosity(gs_verbosity() + 1);
		return 1;
	case OPT_JSON:
		o->json_path = arg ? arg : "-";
		return 1;
	case OPT_FORMAT:
		if (!strcmp(arg, "json")) {
			o->json_path = o->json_path ? o->json_path : "-";
		} else if (!strcmp(arg, "text")) {
			o->json_path = NULL;
		} else {
			gs_err("--format wants text or json, not '%s'", arg);
			return -1;
		}
		return 1;
	case OPT_NO_FOLLOW:
		o->follow = false;
		return 1;
	case OPT_NO_OS:
		o->no_os = true;
		return 1;
	case OPT_NO_NVML:
		o->no_nvml = true;
		return 1;
	case OPT_STACKS:
		if (!strcmp(arg, "off")) {
			o->stack_every = 0;
		} else if (parse_u32(arg, &n) || n == 0) {
			gs_err("--stacks wants a positive N (every Nth launch) or off, not '%s'",
			       arg);
			return -1;
		} else {
			o->stack_every = n;
		}
		return 1;
	case OPT_FOLDED:
		o->folded_path = arg;
		return 1;
	case OPT_MEMORY_MAP:
		o->memmap_path = arg;
		return 1;
	case OPT_OS_MIN:
		if (parse_u32(arg, &n) || n > 10000000) {
			gs_err("--os-min-us wants microseconds between 0 and 10000000, not '%s'",
			       arg);
			return -1;
		}
		o->os_min_ns = (__u64)n * 1000;
		return 1;
	case OPT_WIDE:
		o->wide = true;
		return 1;
	case OPT_ISOLATE:
		o->isolate = true;
		return 1;
	case OPT_TOP:
		if (parse_u32(arg, &n) || n == 0) {
			gs_err("--top wants a positive number of kernels, not '%s'", arg);
			return -1;
		}
		o->top = n;
		return 1;
	case OPT_BUFFER:
		/* The BPF ring buffer is a power of two of at least one page. */
		if (parse_size(arg, &v) || v < 4096 || v > (1ULL << 30) || (v & (v - 1))) {
			gs_err("--buffer-size wants a power of two between 4K and 1G, not '%s'",
			       arg);
			return -1;
		}
		o->ring_bytes = v;
		return 1;
	}
	return 0;
}

int write_folded(const struct model *m, const char *path)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "we") : stdout;
	int bad;

	if (!f) {
		gs_err("cannot write the folded stacks to '%s': %s", path, strerror(errno));
		return GS_EXIT_RUNTIME;
	}
	bad = folded__write(f, m);
	bad |= f == stdout ? fflush(f) : fclose(f);
	if (bad) {
		gs_err("writing the folded stacks to '%s' failed", path);
		return GS_EXIT_RUNTIME;
	}
	return GS_EXIT_OK;
}

int write_memory_map(const struct model *m, const char *path)
{
	FILE *f = fopen(path, "we");
	int bad;

	if (!f) {
		gs_err("cannot write the memory map to '%s': %s", path, strerror(errno));
		return GS_EXIT_RUNTIME;
	}
	bad = memmap__write(f, m);
	bad |= fclose(f);
	if (bad) {
		gs_err("writing the memory map to '%s' failed", path);
		return GS_EXIT_RUNTIME;
	}
	return GS_EXIT_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n > k && !strcmp(s + n - k, suffix);
}

void set_output(struct trace_opts *o, const char *path)
{
	if (ends_with(path, ".pftrace") || ends_with(path, ".perfetto-trace"))
		o->perfetto_path = path;
	else if (ends_with(path, ".json"))
		o->chrome_path = path;
	else
		o->record_path = path;
}

int timelines__open(struct timelines *ts, const struct trace_opts *o)
{
	const char *paths[2] = { o->perfetto_path, o->chrome_path };
	char err[512];

	memset(ts, 0, sizeof(*ts));
	if (paths[0] && paths[1] && !strcmp(paths[0], paths[1])) {
		gs_err("the Perfetto and the Chrome trace cannot both go to '%s'", paths[0]);
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		if (!paths[i])
			continue;
		ts->t[i] = i == 0 ? timeline__open_perfetto(paths[i], err, sizeof(err))
				  : timeline__open_chrome(paths[i], err, sizeof(err));
		if (!ts->t[i]) {
			gs_err("%s", err);
			timelines__close(ts);
			return -1;
		}
	}
	return 0;
}

void timelines__add(struct timelines *ts, const struct model *m, const struct gs_hdr *ev)
{
	for (int i = 0; i < 2; i++)
		if (ts->t[i])
			timeline__add(ts->t[i], m, ev);
}

int timelines__close(struct timelines *ts)
{
	char err[512];
	int code = GS_EXIT_OK;

	for (int i = 0; i < 2; i++) {
		if (ts->t[i] && timeline__close(ts->t[i], err, sizeof(err))) {
			gs_err("%s", err);
			code = GS_EXIT_RUNTIME;
		}
		ts->t[i] = NULL;
	}
	return code;
}

int bad_option(const char *cmd, int opt, char **argv)
{
	const char *arg = argv[optind - 1];

	if (opt == ':')
		gs_err("%s: option '%s' needs a value (see gpuscope %s --help)", cmd, arg, cmd);
	else if (optopt && strncmp(arg, "--", 2))
		gs_err("%s: unknown option '-%c' (see gpuscope %s --help)", cmd, optopt, cmd);
	else
		gs_err("%s: unknown option '%s' (see gpuscope %s --help)", cmd, arg, cmd);
	return GS_EXIT_USAGE;
}

/* Effective capabilities from /proc/self/status. */
static __u64 effective_caps(void)
{
	char line[256];
	unsigned long long caps = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return caps;
}

int check_privileges(void)
{
	enum {
		CAP_SYS_ADMIN_ = 21,
		CAP_PERFMON_ = 38,
		CAP_BPF_ = 39
	};
	__u64 caps = effective_caps();
	bool admin = caps & (1ULL << CAP_SYS_ADMIN_);
	bool bpf = admin || (caps & (1ULL << CAP_BPF_));
	bool perfmon = admin || (caps & (1ULL << CAP_PERFMON_));

	if (bpf && perfmon)
		return 0;
	gs_err("missing %s%s%s (to load eBPF programs and attach uprobes): run as root, or "
	       "grant them with setcap cap_bpf,cap_perfmon,cap_sys_ptrace,cap_dac_read_search+ep",
	       bpf ? "" : "CAP_BPF", !bpf && !perfmon ? " and " : "", perfmon ? "" : "CAP_PERFMON");
	return -EPERM;
}
