// SPDX-License-Identifier: MIT
/* Records straight into the stream, the model and its analyses, as the ring buffer hands them over: the input is a
 * sequence of records, each checked first, then fed to the model and to both timeline
 * writers; the report is built at the end. */
#include <string.h>

#include "analysis/analyses.h"
#include "core/event.h"
#include "sink/timeline.h"

static struct analyses A;

/* As the outputs do: each timeline a consumer after the analyses. */
static void to_timeline(void *ctx, const struct gs_hdr *ev)
{
	timeline__add(ctx, &A, ev);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static union {
		struct gs_hdr h;
		unsigned char b[GS_EVENT_MAX_SIZE];
	} buf;
	struct stream *s = stream__new();
	char err[256];
	struct timeline *tl[2] = { timeline__open_perfetto("/dev/null", err, sizeof(err)),
				   timeline__open_chrome("/dev/null", err, sizeof(err)) };
	const char *why;

	analyses__attach(&A, s, &(struct analyses_opts){ .findings = true, .retire = true });
	for (int i = 0; i < 2; i++)
		if (tl[i])
			stream__subscribe(s, STREAM_ALL, to_timeline, tl[i]);

	while (size >= sizeof(struct gs_hdr)) {
		struct gs_hdr h;
		size_t n;

		memcpy(&h, data, sizeof(h));
		n = h.size;
		if (n < sizeof(h) || n > sizeof(buf) || n > size)
			break;
		memcpy(&buf, data, n);
		if (gs_event_check(&buf, n, &why) == 0) {
			stream__push(s, &buf.h);
		}
		data += n;
		size -= n;
	}
	for (int i = 0; i < 2; i++)
		if (tl[i])
			timeline__close(tl[i], err, sizeof(err));
	report__free(analyses__report(&A));
	analyses__free(&A);
	stream__free(s);
	return 0;
}
