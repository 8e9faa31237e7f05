/* SPDX-License-Identifier: MIT */
/* What run, attach and report share: their options, and the live session's entry. */
#ifndef GS_CMD_COMMON_H
#define GS_CMD_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "core/spawn.h"
#include "gpuscope/event.h"

#define DEFAULT_RING_BYTES (16ULL << 20)
#define DEFAULT_TOP	   20

struct trace_opts {
	__u32 mode;		/* GS_MODE_RUN or GS_MODE_ATTACH */
	char **argv;		/* run: the command */
	struct spawn_user user; /* run -u: whom it runs as */
	pid_t pid;		/* attach: the process */
	double duration_s;	/* attach: 0 until the process exits or SIGINT */
	bool follow, quiet, wide;
	bool isolate;	       /* per-process uprobes (see bpf/tracer.h) */
	bool no_os;	       /* without the OS plane */
	bool no_nvml;	       /* without NVML's device metrics in the stream */
	__u32 stack_every;     /* call stacks (bpf/tracer.h); 0 none */
	__u32 stack_rate;      /* launches': at most this many a second a thread; 0 no limit */
	const char *step_func; /* --step=FUNC: the steps are its calls (analysis/steps.h) */
	bool py_raises;	       /* --py-exceptions: every Python raise counted */
	__u64 os_min_ns; /* OS plane: shorter off-CPU intervals and system calls not reported */
	bool inject;	 /* run: driver calls from the in-process plane (src/inject) */
	__u32 gpu_time;	 /* with inject: 0 off, 1 every launch, N every Nth launch of a kernel */
	bool gpu_chains; /* every launch, consecutive ones chained (src/inject/gputime_chain.c) */
	bool gpu_cupti;	 /* every kernel, by CUPTI (src/inject/gputime_cupti.c) */
	bool gpu_cupti_graphs; /* ... graphs' by CUPTI too, at every run (--gpu-time=cupti) */
	bool device_code;      /* with inject: read the device code modules are loaded from */
	const char *probe_bundle, *probe_out; /* with inject: device-side probes (cmd/probe.c) */
	bool no_report;			      /* (probe: its own output instead) */
	size_t top;
	__u64 ring_bytes;
	const char *record_path;
	const char *json_path; /* NULL: text report on stderr; "-": JSON on stdout */
	const char *perfetto_path, *chrome_path; /* timelines (sink/timeline.h); "-": stdout */
	const char *folded_path;		 /* folded stacks at the end; "-": stdout */
	const char *memmap_path;		 /* the memory map (SVG) at the end */
};

/* -o FILE: a recording, or by its extension a Perfetto (.pftrace, .perfetto-trace) or
 * Chrome (.json) trace. */
void set_output(struct trace_opts *o, const char *path);

/* The live session of run and attach (cmd/trace.c): returns the exit code. */
int trace_main(const struct trace_opts *o);

/* Options shared by run and attach: returns 1 if handled, 0 if not ours, -1 on a bad value
 * (message printed). */
int parse_trace_opt(struct trace_opts *o, int opt, const char *arg);
/* parse_trace_opt, saying so for an option `gpuscope CMD` does not know: 0, or
 * GS_EXIT_USAGE. */
int trace_opt(struct trace_opts *o, int opt, const char *arg, const char *cmd);

/* What run, attach and probe start from (probe takes no stacks). */
#define TRACE_OPTS_DEFAULTS                                                   \
	.follow = true, .top = DEFAULT_TOP, .ring_bytes = DEFAULT_RING_BYTES, \
	.os_min_ns = DEFAULT_OS_MIN_NS

/* The one-line message for getopt's '?' or ':' (opterr must be 0); returns GS_EXIT_USAGE. */
int bad_option(const char *cmd, int opt, char **argv);

/* Root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN): 0, or a message and -EPERM. */
int check_privileges(void);

enum {
	OPT_JSON = 1000,
	OPT_BUFFER,
	OPT_NO_FOLLOW,
	OPT_TOP,
	OPT_WIDE,
	OPT_ISOLATE,
	OPT_FORMAT,
	OPT_INJECT,
	OPT_GPU_TIME,
	OPT_DEVICE_CODE,
	OPT_PERFETTO,
	OPT_CHROME,
	OPT_NO_OS,
	OPT_NO_NVML,
	OPT_OS_MIN,
	OPT_STACKS,
	OPT_FOLDED,
	OPT_MEMORY_MAP,
	OPT_STEP,
	OPT_PY_EXCEPTIONS
};

#define DEFAULT_STACK_EVERY 64
/* With --inject and no --stacks: at most this many launches' stacks a second a thread
 * (inject/stacks.c). A stack of PyTorch's costs its thread 60-68 us on an H200 (8-10 us
 * unwinding by the kept rules, 21-30 us walking the Python frames, 11-17 of them the one
 * process_vm_readv a walk makes, cold at 50 ms from the last; the rest the launches' checks
 * and the parts' readings: bench/results/hot-2026-11-29.md; 100-155 us before
 * unwind-2026-11-29.md, unwinding by backtrace()): at 20 a second a thread, a training step
 * launching from two threads (PyTorch's main and autograd threads) gives them ~0.3% of its
 * time (by the parts, 105-160 ns a launch, 0.4-0.5% of a ResNet-50 or GPT-2 step). */
#define DEFAULT_STACK_RATE 20

#define DEFAULT_OS_MIN_NS 10000ULL

/* The options run and attach share: getopt_long entries, and their lines of --help. */
/* getopt_long entries: an option with an argument, without one, with an optional one. */
/* clang-format off */
#define OPT_ARG(name, val)   { name, required_argument, NULL, val }
#define OPT_FLAG(name, val)  { name, no_argument, NULL, val }
#define OPT_MAYBE(name, val) { name, optional_argument, NULL, val }
/* clang-format on */

#define TRACE_LONGOPTS                                                                          \
	OPT_ARG("output", 'o'), OPT_MAYBE("json", OPT_JSON), OPT_ARG("format", OPT_FORMAT),     \
		OPT_ARG("perfetto", OPT_PERFETTO), OPT_ARG("chrome", OPT_CHROME),               \
		OPT_FLAG("no-os", OPT_NO_OS), OPT_FLAG("no-nvml", OPT_NO_NVML),                 \
		OPT_ARG("os-min-us", OPT_OS_MIN), OPT_ARG("stacks", OPT_STACKS),                \
		OPT_ARG("folded", OPT_FOLDED), OPT_ARG("memory-map", OPT_MEMORY_MAP),           \
		OPT_ARG("step", OPT_STEP), OPT_FLAG("no-follow", OPT_NO_FOLLOW),                \
		OPT_FLAG("py-exceptions", OPT_PY_EXCEPTIONS), OPT_FLAG("isolate", OPT_ISOLATE), \
		OPT_ARG("buffer-size", OPT_BUFFER), OPT_ARG("top", OPT_TOP),                    \
		OPT_FLAG("wide", OPT_WIDE), OPT_FLAG("quiet", 'q'), OPT_FLAG("verbose", 'v'),   \
	{                                                                                       \
		"help", no_argument, NULL, 'h'                                                  \
	}

#define TRACE_OPTIONS_HELP                                                                        \
	"  -o, --output FILE      record the event stream to FILE (replay: gpuscope report "      \
	"FILE);\n"                                                                                \
	"                         FILE.pftrace: a Perfetto trace instead, FILE.json: a Chrome\n"  \
	"                         trace (JSON)\n"                                                 \
	"      --perfetto FILE    also write a Perfetto trace (open it in ui.perfetto.dev)\n"     \
	"      --chrome FILE      also write a Chrome/PyTorch-profiler style JSON trace\n"        \
	"      --json[=FILE]      write the report as JSON to FILE, or to stdout\n"               \
	"      --no-follow        do not trace children\n"                                        \
	"      --no-os            without the OS plane (off-CPU time, page faults, block I/O,\n"  \
	"                         socket bytes, system calls of the traced processes)\n"          \
	"      --no-nvml          without the GPUs' device metrics (NVML, once a second)\n"       \
	"      --os-min-us N      off-CPU intervals and system calls shorter than N us are not\n" \
	"                         reported one by one (default 10)\n"                             \
	"      --stacks N|off     user call stacks of every Nth launch (default 64, and unless\n" \
	"                         given at most 20 a second a thread), of\n"                      \
	"                         every allocation and failed call; off: none\n"                  \
	"      --py-exceptions    count every Python raise by type and line, and find caught\n"   \
	"                         CUDA errors (costs ~1.5 us a raise; uncaught ones are found\n"  \
	"                         without it)\n"                                                  \
	"      --step FUNC        the steps of the loop are the calls of the Python function\n"   \
	"                         FUNC (NAME or CLASS.NAME; default: found from the launches)\n"  \
	"      --folded FILE      the stacks as folded stacks (flamegraph.pl, speedscope)\n"      \
	"      --memory-map FILE  an SVG picture of the device allocations over time\n"           \
	"      --isolate          probe only the traced processes, not every process using the\n" \
	"                         CUDA libraries (shared nodes; a forked child's first calls,\n"  \
	"                         before its probes are attached, are missed)\n"                  \
	"      --buffer-size SIZE ring buffer size, a power of two (default 16M)\n"               \
	"      --top N            kernels in the text report (default 20)\n"                      \
	"      --wide             full kernel names in the text report\n"                         \
	"  -q, --quiet            no live status line\n"                                          \
	"  -v, --verbose          more messages (twice: libbpf's too)\n"                          \
	"  -h, --help             this help\n"

#endif
