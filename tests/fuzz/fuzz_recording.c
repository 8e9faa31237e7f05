// SPDX-License-Identifier: MIT
/* A recording of arbitrary bytes through the reader, the model, the report and both
 * renderers: whatever the file holds, no crash and no undefined behaviour. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "analysis/report.h"
#include "core/recording.h"
#include "sink/sinks.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char path[] = "/tmp/gs-fuzz-recXXXXXX", err[512];
	struct text_opts to = { .top = 20 };
	const struct gs_hdr *ev;
	struct recording *rec;
	struct report *r;
	struct model *m;
	FILE *devnull;
	int fd = mkstemp(path);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		unlink(path);
		return 0;
	}
	close(fd);
	rec = recording__open(path, err, sizeof(err));
	if (rec) {
		m = model__new();
		while (recording__next(rec, &ev, err, sizeof(err)) > 0)
			model__add(m, ev);
		recording__close(rec);
		r = report__build(m);
		devnull = fopen("/dev/null", "w");
		report_text__write(devnull, r, &to);
		report_json__write(devnull, r);
		fclose(devnull);
		report__free(r);
		model__free(m);
	}
	unlink(path);
	return 0;
}
