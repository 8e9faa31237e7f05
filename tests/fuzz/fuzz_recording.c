// SPDX-License-Identifier: MIT
/* A recording of arbitrary bytes through the reader, the stream, the model and its analyses, the report and both
 * renderers: whatever the file holds, no crash and no undefined behaviour. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "analysis/analyses.h"
#include "core/recording.h"
#include "sink/sinks.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char path[] = "/tmp/gs-fuzz-recXXXXXX", err[512];
	struct text_opts to = { .top = 20 };
	const struct gs_hdr *ev;
	struct recording *rec;
	struct analyses A;
	struct report *r;
	struct stream *s;
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
		s = stream__new();
		analyses__attach(&A, s,
				 &(struct analyses_opts){ .findings = true, .retire = true });
		while (recording__next(rec, &ev, err, sizeof(err)) > 0)
			stream__push(s, ev);
		recording__close(rec);
		r = analyses__report(&A);
		devnull = fopen("/dev/null", "w");
		report_text__write(devnull, r, &to);
		report_json__write(devnull, r);
		fclose(devnull);
		report__free(r);
		analyses__free(&A);
		stream__free(s);
	}
	unlink(path);
	return 0;
}
