// SPDX-License-Identifier: MIT
/* Text from other processes: /proc maps lines, ld.so.cache, kernel names (demangling,
 * shortening, JSON escaping). The first byte selects the parser. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/demangle.h"
#include "core/json.h"
#include "core/libfind.h"
#include "core/procfs.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char *s, buf[512];
	struct map_entry e;
	FILE *devnull;

	if (size < 1)
		return 0;
	s = malloc(size);
	memcpy(s, data + 1, size - 1);
	s[size - 1] = 0;
	switch (data[0] % 3) {
	case 0:
		maps_parse_line(s, &e);
		break;
	case 1:
		ldcache_lookup(data + 1, size - 1, "libcuda.so.1", NULL, NULL);
		break;
	default: {
		char *d = demangle(s);

		shorten_name(d, 40, buf, sizeof(buf));
		devnull = fopen("/dev/null", "w");
		json_write_string(devnull, d);
		json_write_string(devnull, s);
		fclose(devnull);
		free(d);
	}
	}
	free(s);
	return 0;
}
