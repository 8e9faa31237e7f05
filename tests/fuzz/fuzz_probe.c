// SPDX-License-Identifier: MIT
/* What gpuscope probe and the in-process plane hand each other (ptx/bundle.h): the bundle
 * (read by the plane inside the program) and the maps' snapshots (read by gpuscope, written
 * by a program it does not trust), and a printing ring's records (ptx/gpuprint.h). First
 * byte: 0 a bundle, 0xff a printing record, else a snapshot of that many maps (mod 8). */
#include <stdlib.h>
#include <string.h>

#include "ptx/bundle.h"
#include "ptx/gpuprint.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char err[256];

	if (!size)
		return 0;
	if (data[0] == 0xff) {
		char line[300];

		gpu_print_format(data + 1, size - 1, line, sizeof(line));
	} else if (data[0] == 0) {
		struct bundle b;

		if (!bundle_parse((const char *)data + 1, size - 1, &b, err, sizeof(err))) {
			for (size_t i = 0; i < b.nmaps; i++)
				bundle_map_bytes(&b.maps[i]);
			bundle_free(&b);
		}
	} else {
		struct snapshot s;

		if (!snapshot_parse(data + 1, size - 1, data[0] % 8, &s, err, sizeof(err))) {
			for (size_t i = 0; i < s.nk; i++)
				snapshot_kernel_name(&s, s.k[i].id);
			snapshot_free(&s);
		}
	}
	return 0;
}
