// SPDX-License-Identifier: MIT
/* ELF files as found in a process's mappings: symbol lookup must survive any bytes. */
#include "core/elfsym.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct elf_apis a;
	char err[256];

	elf_find_apis_mem(data, size, true, &a, err, sizeof(err));
	return 0;
}
