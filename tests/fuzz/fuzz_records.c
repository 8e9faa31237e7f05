// SPDX-License-Identifier: MIT
/* Records straight into the model, as the ring buffer hands them over: the input is a
 * sequence of records, each checked first, then fed; the report is built at the end. */
#include <string.h>

#include "analysis/report.h"
#include "core/event.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static union {
		struct gs_hdr h;
		unsigned char b[GS_EVENT_MAX_SIZE];
	} buf;
	struct model *m = model__new();
	const char *why;

	while (size >= sizeof(struct gs_hdr)) {
		struct gs_hdr h;
		size_t n;

		memcpy(&h, data, sizeof(h));
		n = h.size;
		if (n < sizeof(h) || n > sizeof(buf) || n > size)
			break;
		memcpy(&buf, data, n);
		if (gs_event_check(&buf, n, &why) == 0)
			model__add(m, &buf.h);
		data += n;
		size -= n;
	}
	report__free(report__build(m));
	model__free(m);
	return 0;
}
