// SPDX-License-Identifier: MIT
/* `gpuscope report FILE`: replay a recording through the same model and report. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "cmd/common.h"
#include "core/recording.h"
#include "core/util.h"

static const char usage[] =
	"usage: gpuscope report [options] FILE\n"
	"\n"
	"The report of a recording made with gpuscope run/attach -o FILE ('-' reads stdin).\n"
	"A recording cut short (gpuscope killed, disk full) or damaged is reported up to where\n"
	"it ends, with a warning and exit status 2.\n"
	"\n"
	"options:\n"
	"      --json[=FILE]  the report as JSON, to FILE or stdout\n"
	"      --format FMT   text (default), json, or chrome (a Chrome JSON trace on stdout,\n"
	"                     instead of the report)\n"
	"      --perfetto OUT write the recording as a Perfetto trace (ui.perfetto.dev)\n"
	"      --chrome OUT   write it as a Chrome/PyTorch-profiler style JSON trace\n"
	"      --folded OUT   its call stacks as folded stacks (flamegraph.pl, speedscope);\n"
	"                     --format folded: on stdout, instead of the report\n"
	"      --memory-map OUT  an SVG picture of the device allocations over time, by\n"
	"                     address (failures in red), with fragmentation under it\n"
	"      --top N        kernels in the text report (default 20)\n"
	"      --wide         full kernel names\n"
	"  -h, --help         this help\n"
	"\n"
	"examples:\n"
	"  gpuscope report train.gsrec\n"
	"  gpuscope report --json train.gsrec | jq '.kernels.list[0]'\n"
	"  gpuscope report train.gsrec --perfetto train.pftrace\n"
	"  gpuscope report train.gsrec --memory-map train-memory.svg\n";

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", optional_argument, NULL, OPT_JSON },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "perfetto", required_argument, NULL, OPT_PERFETTO },
		{ "chrome", required_argument, NULL, OPT_CHROME },
		{ "folded", required_argument, NULL, OPT_FOLDED },
		{ "memory-map", required_argument, NULL, OPT_MEMORY_MAP },
		{ "top", required_argument, NULL, OPT_TOP },
		{ "wide", no_argument, NULL, OPT_WIDE },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct trace_opts o = { .top = DEFAULT_TOP };
	struct timelines tls;
	bool chrome_stdout = false, folded_stdout = false;
	const struct gs_hdr *ev;
	struct recording *rec;
	struct model *m;
	char err[512];
	int opt, r, code = GS_EXIT_OK;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
		if (opt == 'h') {
			fputs(usage, stdout);
			return GS_EXIT_OK;
		}
		if (opt == '?' || opt == ':')
			return bad_option("report", opt, argv);
		if (opt == OPT_FORMAT && !strcmp(optarg, "chrome")) {
			chrome_stdout = true;
			continue;
		}
		if (opt == OPT_FORMAT && !strcmp(optarg, "folded")) {
			folded_stdout = true;
			continue;
		}
		if (opt == 'o') {
			gs_err("report: -o is for run and attach; here --perfetto OUT or --chrome "
			       "OUT");
			return GS_EXIT_USAGE;
		}
		r = parse_trace_opt(&o, opt, optarg);
		if (r <= 0) {
			if (r == 0)
				gs_err("report: unknown option (see gpuscope report --help)");
			return GS_EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		gs_err("report: %s (gpuscope report FILE)",
		       optind >= argc ? "which recording?" : "one recording at a time");
		return GS_EXIT_USAGE;
	}
	if (chrome_stdout) {
		if (o.chrome_path || o.json_path) {
			gs_err("report: --format chrome writes the trace on stdout: not with "
			       "--chrome "
			       "or --json");
			return GS_EXIT_USAGE;
		}
		o.chrome_path = "-";
	}
	if (o.perfetto_path && !strcmp(o.perfetto_path, "-") && isatty(STDOUT_FILENO)) {
		gs_err("report: a Perfetto trace is binary: give a file, or redirect stdout");
		return GS_EXIT_USAGE;
	}
	rec = recording__open(argv[optind], err, sizeof(err));
	if (!rec) {
		gs_err("%s", err);
		return GS_EXIT_RUNTIME;
	}
	if (timelines__open(&tls, &o)) {
		recording__close(rec);
		return GS_EXIT_RUNTIME;
	}
	m = model__new();
	m->keep_history = o.memmap_path != NULL;
	while ((r = recording__next(rec, &ev, err, sizeof(err))) > 0) {
		model__add(m, ev);
		timelines__add(&tls, m, ev);
	}
	if (r < 0) {
		gs_warn("%s: %s; the report covers the %llu records before it", argv[optind], err,
			(unsigned long long)m->events);
		code = GS_EXIT_RUNTIME;
	}
	if (!m->have_end)
		model__findings_settle(m, true); /* (the end record would have) */
	if (r >= 0 && !m->have_end) {
		gs_warn("%s: the recording ends without its end record (gpuscope was stopped "
			"abruptly, or the file was cut); the report covers what was recorded",
			argv[optind]);
		code = GS_EXIT_RUNTIME;
	}
	recording__close(rec);
	r = timelines__close(&tls);
	code = code ? code : r;
	if (folded_stdout)
		o.folded_path = "-";
	if (o.folded_path) {
		r = write_folded(m, o.folded_path);
		code = code ? code : r;
	}
	if (o.memmap_path) {
		r = write_memory_map(m, o.memmap_path);
		code = code ? code : r;
	}
	/* A trace or stacks on stdout is all that goes there. */
	r = chrome_stdout || folded_stdout || (o.perfetto_path && !strcmp(o.perfetto_path, "-"))
		    ? 0
		    : write_report(m, o.json_path, stdout, o.wide, o.top);
	model__free(m);
	return r ? r : code;
}
