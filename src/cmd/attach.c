// SPDX-License-Identifier: MIT
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmds.h"
#include "cmd/common.h"
#include "core/util.h"

static const char usage[] =
	"usage: gpuscope attach -p PID [options]\n"
	"\n"
	"Trace a running process's CUDA and NCCL calls with eBPF, without restarting it, until\n"
	"it exits, -d SECONDS pass, or Ctrl-C. Kernels whose names were looked up before the\n"
	"attach are named from what the driver keeps in the kernel's object (where driver 580\n"
	"keeps it; GPUSCOPE_NO_DRIVER_NAMES=1: not read); where that is not a symbol's name,\n"
	"they are reported as unknown, with their handle.\n"
	"New children of the process are followed.\n"
	"\n"
	"options:\n"
	"  -p, --pid PID          the process to trace\n"
	"  -d, --duration SECS    stop after SECS seconds\n" TRACE_OPTIONS_HELP "\n"
	"examples:\n"
	"  sudo gpuscope attach -p 4242 -d 30\n"
	"  sudo gpuscope attach -p $(pgrep -f train.py) -o late.gsrec\n";

int cmd_attach(int argc, char **argv)
{
	static const struct option longopts[] = {
		OPT_ARG("pid", 'p'),
		OPT_ARG("duration", 'd'),
		TRACE_LONGOPTS,
		{},
	};
	struct trace_opts o = { TRACE_OPTS_DEFAULTS, .mode = GS_MODE_ATTACH,
				.stack_every = DEFAULT_STACK_EVERY,
				.stack_rate = DEFAULT_STACK_RATE };
	__u32 pid = 0;
	int opt, r;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":p:d:o:qvh", longopts, NULL)) != -1) {
		switch (opt) {
		case '?':
		case ':':
			return bad_option("attach", opt, argv);
		case 'h':
			fputs(usage, stdout);
			return GS_EXIT_OK;
		case 'p':
			if (parse_u32(optarg, &pid) || pid == 0 || pid > 0x3fffffff) {
				gs_err("attach: -p wants a process ID, not '%s'", optarg);
				return GS_EXIT_USAGE;
			}
			continue;
		case 'd':
			if (parse_seconds(optarg, &o.duration_s)) {
				gs_err("attach: -d wants a positive number of seconds, not '%s'",
				       optarg);
				return GS_EXIT_USAGE;
			}
			continue;
		}
		r = trace_opt(&o, opt, optarg, "attach");
		if (r)
			return r;
	}
	if (optind < argc) {
		gs_err("attach: unexpected argument '%s'", argv[optind]);
		return GS_EXIT_USAGE;
	}
	if (!pid) {
		gs_err("attach: which process? (gpuscope attach -p PID)");
		return GS_EXIT_USAGE;
	}
	o.pid = (pid_t)pid;
	return trace_main(&o);
}
