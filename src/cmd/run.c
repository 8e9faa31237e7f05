// SPDX-License-Identifier: MIT
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
	"      --inject           take the CUDA driver calls from an in-process library\n"
	"                         (LD_PRELOAD) instead of uprobes on libcuda: cheaper per\n"
	"                         call, and GPU start/end times of launches and copies\n"
	"      --gpu-time=MODE    with --inject: all (default: every kernel by the driver's\n"
	"                         own timestamps, CUPTI's, found beside the program's CUDA\n"
	"                         libraries; graphs' kernels at sampled launches, copies,\n"
	"                         and kernels where CUPTI is missing or the program's\n"
	"                         profiler takes it, by CUDA events), cupti (the same, but\n"
	"                         graphs' kernels by CUPTI at every run: costs a graph\n"
	"                         launch 1.3-1.9 us a kernel, as the PyTorch profiler),\n"
	"                         pairs (every launch by CUDA events: about 3x the host\n"
	"                         cost of all), off, N (every Nth launch\n"
	"                         of each kernel by events, at most 1000 a second a thread,\n"
	"                         costing 0.25% of the process's time: GPUSCOPE_TIME_RATE,\n"
	"                         GPUSCOPE_TIME_BUDGET), or chained: pairs, consecutive\n"
	"                         launches held behind one gate and timed from the end\n"
	"                         before them (less exact for short kernels: README)\n"
	"      --device-code      with --inject: read the device code the program loads: which\n"
	"                         modules and kernels have PTX (what device-side probes can be\n"
	"                         put in) and which SASS only\n"
	"  -u, --user USER        run COMMAND as USER (a name or uid: its uid, group and\n"
	"                         groups), gpuscope staying root\n" TRACE_OPTIONS_HELP "\n"
	"examples:\n"
	"  sudo gpuscope run -- python train.py\n"
	"  sudo gpuscope run -o train.gsrec -- torchrun --nproc-per-node 8 train.py\n"
	"  sudo gpuscope run --json=report.json -q -- ./vector_add\n"
	"  sudo gpuscope run --inject -- python train.py\n"
	"  sudo gpuscope run -u $USER -o train.gsrec -- python train.py\n"
	"  sudo gpuscope run --inject -o train.pftrace -- python train.py   # ui.perfetto.dev\n"
	"  sudo gpuscope run --folded train.folded -q -- python train.py\n";

static int parse_gpu_time(const char *arg, __u32 *out, bool *chains, bool *cupti, bool *graphs)
{
	__u32 n;

	*chains = *cupti = *graphs = false;
	if (!strcmp(arg, "all") || !strcmp(arg, "cupti")) {
		*out = 1;
		*cupti = true;
		*graphs = !strcmp(arg, "cupti");
	} else if (!strcmp(arg, "pairs")) {
		*out = 1;
	} else if (!strcmp(arg, "chained")) {
		*out = 1;
		*chains = true;
	} else if (!strcmp(arg, "off")) {
		*out = 0;
	} else if (parse_u32(arg, &n) == 0 && n > 0) {
		*out = n;
	} else {
		gs_err("--gpu-time wants all, cupti, pairs, chained, off or a positive N (every "
		       "Nth "
		       "launch), not '%s'",
		       arg);
		return -1;
	}
	return 0;
}

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		TRACE_LONGOPTS,
		OPT_FLAG("inject", OPT_INJECT),
		OPT_ARG("gpu-time", OPT_GPU_TIME),
		OPT_FLAG("device-code", OPT_DEVICE_CODE),
		OPT_ARG("user", 'u'),
		{},
	};
	struct trace_opts o = { TRACE_OPTS_DEFAULTS,
				.mode = GS_MODE_RUN,
				.gpu_time = 1,
				.gpu_cupti = true,
				.stack_every = DEFAULT_STACK_EVERY,
				.stack_rate = DEFAULT_STACK_RATE };
	bool gpu_time_set = false;
	int opt, r;

	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option, which begins the command. */
	while ((opt = getopt_long(argc, argv, "+:o:u:qvh", longopts, NULL)) != -1) {
		if (opt == 'h') {
			fputs(usage, stdout);
			return GS_EXIT_OK;
		}
		if (opt == '?' || opt == ':')
			return bad_option("run", opt, argv);
		if (opt == OPT_INJECT) {
			o.inject = true;
			continue;
		}
		if (opt == OPT_DEVICE_CODE) {
			o.device_code = true;
			continue;
		}
		if (opt == 'u') {
			char err[256];

			if (spawn_user_lookup(optarg, &o.user, err, sizeof(err))) {
				gs_err("run: --user: %s", err);
				return GS_EXIT_USAGE;
			}
			if (geteuid() != 0) {
				gs_err("run: --user needs gpuscope to run as root");
				return GS_EXIT_USAGE;
			}
			continue;
		}
		if (opt == OPT_GPU_TIME) {
			if (parse_gpu_time(optarg, &o.gpu_time, &o.gpu_chains, &o.gpu_cupti,
					   &o.gpu_cupti_graphs))
				return GS_EXIT_USAGE;
			gpu_time_set = true;
			continue;
		}
		r = trace_opt(&o, opt, optarg, "run");
		if (r)
			return r;
	}
	if (gpu_time_set && !o.inject) {
		gs_err("run: --gpu-time needs --inject (GPU times come from the in-process plane)");
		return GS_EXIT_USAGE;
	}
	if (o.device_code && !o.inject) {
		gs_err("run: --device-code needs --inject (device code is read in-process)");
		return GS_EXIT_USAGE;
	}
	if (optind >= argc) {
		gs_err("run: no command given (gpuscope run [options] -- COMMAND ...)");
		return GS_EXIT_USAGE;
	}
	o.argv = argv + optind;
	return trace_main(&o);
}
