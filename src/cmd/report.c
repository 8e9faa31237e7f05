// SPDX-License-Identifier: MIT
/* `gpuscope report FILE`: a session whose source is a recording, with the live session's
 * consumers: the same model, the same report. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis/analyses.h"
#include "cmd/cmds.h"
#include "cmd/common.h"
#include "core/session.h"
#include "core/util.h"
#include "sink/outputs.h"
#include "source/replay.h"

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
	"      --step FUNC    the loop's steps are the calls of the Python function FUNC\n"
	"      --top N        kernels in the text report (default 20)\n"
	"      --wide         full kernel names\n"
	"  -h, --help         this help\n"
	"\n"
	"examples:\n"
	"  gpuscope report train.gsrec\n"
	"  gpuscope report --json train.gsrec | jq '.kernels.list[0]'\n"
	"  gpuscope report train.gsrec --perfetto train.pftrace\n"
	"  gpuscope report train.gsrec --memory-map train-memory.svg\n";

static void analyses_free(void *obj)
{
	analyses__free(obj);
}

/* Options: 0, -1 (help shown), or an exit code (a message printed). chrome, folded: the
 * trace or the stacks go to stdout. */
static int parse(int argc, char **argv, struct trace_opts *o, bool *chrome, bool *folded)
{
	static const struct option longopts[] = {
		OPT_MAYBE("json", OPT_JSON),
		OPT_ARG("format", OPT_FORMAT),
		OPT_ARG("perfetto", OPT_PERFETTO),
		OPT_ARG("chrome", OPT_CHROME),
		OPT_ARG("folded", OPT_FOLDED),
		OPT_ARG("step", OPT_STEP),
		OPT_ARG("memory-map", OPT_MEMORY_MAP),
		OPT_ARG("top", OPT_TOP),
		OPT_FLAG("wide", OPT_WIDE),
		OPT_FLAG("help", 'h'),
		{},
	};
	int opt, r;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
		if (opt == 'h') {
			fputs(usage, stdout);
			return -1;
		}
		if (opt == '?' || opt == ':')
			return bad_option("report", opt, argv);
		if (opt == OPT_FORMAT && !strcmp(optarg, "chrome")) {
			*chrome = true;
			continue;
		}
		if (opt == OPT_FORMAT && !strcmp(optarg, "folded")) {
			*folded = true;
			continue;
		}
		if (opt == 'o') {
			gs_err("report: -o is for run and attach; here --perfetto OUT or --chrome "
			       "OUT");
			return GS_EXIT_USAGE;
		}
		r = parse_trace_opt(o, opt, optarg);
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
	if (*chrome) {
		if (o->chrome_path || o->json_path) {
			gs_err("report: --format chrome writes the trace on stdout: not with "
			       "--chrome "
			       "or --json");
			return GS_EXIT_USAGE;
		}
		o->chrome_path = "-";
	}
	if (*folded)
		o->folded_path = "-";
	if (o->perfetto_path && !strcmp(o->perfetto_path, "-") && isatty(STDOUT_FILENO)) {
		gs_err("report: a Perfetto trace is binary: give a file, or redirect stdout");
		return GS_EXIT_USAGE;
	}
	return 0;
}

int cmd_report(int argc, char **argv)
{
	struct trace_opts o = { .top = DEFAULT_TOP };
	bool chrome_stdout = false, folded_stdout = false, bad;
	struct output_paths paths;
	struct outputs out;
	struct session s;
	struct replay *rp;
	struct analyses an;
	const char *why;
	char err[512];
	int r, code = GS_EXIT_OK;

	r = parse(argc, argv, &o, &chrome_stdout, &folded_stdout);
	if (r)
		return r < 0 ? GS_EXIT_OK : r;
	session__init(&s);
	rp = replay__open(&s, argv[optind], err, sizeof(err));
	if (!rp) {
		gs_err("%s", err);
		session__close(&s);
		return GS_EXIT_RUNTIME;
	}
	paths = (struct output_paths){ .json = o.json_path,
				       .perfetto = o.perfetto_path,
				       .chrome = o.chrome_path,
				       .folded = o.folded_path,
				       .memmap = o.memmap_path };
	if (outputs__open(&out, &paths)) {
		session__close(&s);
		return GS_EXIT_RUNTIME;
	}
	{
		struct analyses_opts ao = { .findings = true,
					    .retire = true,
					    .step_func = o.step_func,
					    .keep_history = o.memmap_path != NULL };

		analyses__attach(&an, s.stream, &ao);
	}
	session__own(&s, analyses_free, &an);
	outputs__subscribe(&out, s.stream, &an);
	session__finish(&s);
	replay__done(rp, &bad, &why);
	if (bad) {
		gs_warn("%s: %s; the report covers the %llu records before it", argv[optind], why,
			(unsigned long long)stream__records(s.stream));
		code = GS_EXIT_RUNTIME;
	}
	if (!model__ended(an.model))
		findings__settle(an.findings); /* (the end record would have) */
	if (!bad && !model__ended(an.model)) {
		gs_warn("%s: the recording ends without its end record (gpuscope was stopped "
			"abruptly, or the file was cut); the report covers what was recorded",
			argv[optind]);
		code = GS_EXIT_RUNTIME;
	}
	{
		/* A trace or stacks on stdout is all that goes there. */
		bool stdout_taken = chrome_stdout || folded_stdout ||
				    (o.perfetto_path && !strcmp(o.perfetto_path, "-"));
		struct outputs_end e = { .analyses = true,
					 .text = stdout_taken ? NULL : stdout,
					 .wide = o.wide,
					 .top = o.top };

		r = outputs__close(&out, &e);
	}
	session__close(&s);
	return r ? r : code;
}
