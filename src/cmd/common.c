// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/common.h"
#include "core/util.h"

/* A Python (qualified) name: letters, digits, _ and dots, and <> (<module>, <lambda>). */
static bool valid_step_func(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 100 || s[0] == '.' || s[n - 1] == '.')
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_.<>", *s))
			return false;
	return true;
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
		o->stack_rate = 0; /* (asked for: every Nth, exactly) */
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
	case OPT_PY_EXCEPTIONS:
		o->py_raises = true;
		return 1;
	case OPT_STEP:
		if (!valid_step_func(arg)) {
			gs_err("--step wants a Python function's name (NAME or CLASS.NAME), not "
			       "'%.80s'",
			       arg);
			return -1;
		}
		o->step_func = arg;
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

int trace_opt(struct trace_opts *o, int opt, const char *arg, const char *cmd)
{
	int r = parse_trace_opt(o, opt, arg);

	if (r == 0)
		gs_err("%s: unknown option (see gpuscope %s --help)", cmd, cmd);
	return r > 0 ? 0 : GS_EXIT_USAGE;
}
