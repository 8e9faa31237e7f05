// SPDX-License-Identifier: MIT
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmds.h"
#include "cmd/common.h"
#include "core/util.h"

static const char usage[] =
	"usage: gpuscope run [options] -- COMMAND [ARGS...]\n"
	"\n"
	"Start COMMAND and trace its CUDA and NCCL calls with eBPF from its first instruction:\n"
	"kernel launches with names and shapes, allocations, copies, synchronisation, NCCL,\n"
	"every failed call. Children are followed. A live status goes to stderr once a second;\n"
	"the report goes to stderr at the end. Exits with COMMAND's exit status.\n"
	"\n"
	"options:\n"
	"  -o, --output FILE      record the event stream to FILE (replay: gpuscope report FILE)\n"
	"      --json[=FILE]      write the report as JSON to FILE, or to stdout\n"
	"      --no-follow        do not trace the command's children\n"
	"      --isolate          probe only the traced processes, not every process using the\n"
	"                         CUDA libraries (shared nodes; a forked child's first calls,\n"
	"                         before its probes are attached, are missed)\n"
	"      --buffer-size SIZE ring buffer size, a power of two (default 16M)\n"
	"      --top N            kernels in the text report (default 20)\n"
	"      --wide             full kernel names in the text report\n"
	"  -q, --quiet            no live status line\n"
	"  -v, --verbose          more messages (twice: libbpf's too)\n"
	"  -h, --help             this help\n"
	"\n"
	"examples:\n"
	"  sudo gpuscope run -- python train.py\n"
	"  sudo gpuscope run -o train.gsrec -- torchrun --nproc-per-node 8 train.py\n"
	"  sudo gpuscope run --json=report.json -q -- ./vector_add\n";

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "json", optional_argument, NULL, OPT_JSON },
		{ "no-follow", no_argument, NULL, OPT_NO_FOLLOW },
		{ "isolate", no_argument, NULL, OPT_ISOLATE },
		{ "buffer-size", required_argument, NULL, OPT_BUFFER },
		{ "top", required_argument, NULL, OPT_TOP },
		{ "wide", no_argument, NULL, OPT_WIDE },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct trace_opts o = { .mode = GS_MODE_RUN,
				.follow = true,
				.top = DEFAULT_TOP,
				.ring_bytes = DEFAULT_RING_BYTES };
	int opt, r;

	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option, which begins the command. */
	while ((opt = getopt_long(argc, argv, "+:o:qvh", longopts, NULL)) != -1) {
		if (opt == 'h') {
			fputs(usage, stdout);
			return GS_EXIT_OK;
		}
		if (opt == '?' || opt == ':')
			return bad_option("run", opt, argv);
		r = parse_trace_opt(&o, opt, optarg);
		if (r < 0)
			return GS_EXIT_USAGE;
		if (r == 0) {
			gs_err("run: unknown option (see gpuscope run --help)");
			return GS_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		gs_err("run: no command given (gpuscope run [options] -- COMMAND ...)");
		return GS_EXIT_USAGE;
	}
	o.argv = argv + optind;
	return trace_main(&o);
}
