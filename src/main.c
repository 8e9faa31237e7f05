// SPDX-License-Identifier: MIT
/* gpuscope: command dispatch only. */
#include <stdio.h>
#include <string.h>

#include "cmd/cmds.h"
#include "version.h"
#include "core/util.h"

static const struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "run", cmd_run, "start a command and trace its CUDA and NCCL calls" },
	{ "attach", cmd_attach, "trace a running process" },
	{ "report", cmd_report, "the report of a recording" },
	{ "top", cmd_top, "a live view of this node's GPUs and CUDA processes" },
	{ "exporter", cmd_exporter, "serve Prometheus metrics of this node's GPUs" },
	{ "fatbin", cmd_fatbin,
	  "the device code in a fatbin or a program (as cuobjdump lists it)" },
	{ "probe", cmd_probe,
	  "run eBPF programs inside a command's GPU kernels (tools or your own)" },
	{ "bpf2ptx", cmd_bpf2ptx,
	  "translate an eBPF object's programs to PTX (device-side probes)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: gpuscope COMMAND [options]\n\n"
		   "eBPF tracer for CUDA workloads: kernels, memory, copies, synchronisation, "
		   "NCCL.\n\ncommands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'gpuscope COMMAND --help' for a command's options and examples.\n"
		   "exit status: 0 ok, 1 usage error, 2 runtime error; run: the command's.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return GS_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return GS_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("gpuscope %s\n", GS_VERSION);
		return GS_EXIT_OK;
	}
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	gs_err("unknown command '%s' (gpuscope --help lists them)", argv[1]);
	return GS_EXIT_USAGE;
}
