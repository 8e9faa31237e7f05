// SPDX-License-Identifier: MIT
/*
 * The call frame information's parser (core/cfi.c): the input is 4 bytes of the FDE's
 * offset in the rest (taken modulo its size), 4 of the target's distance from the
 * function's start, then an .eh_frame's bytes, the only ones it may read
 * (tests/fuzz/make-cfi-seeds.py makes seeds from a built program's).
 */
#include <stdint.h>
#include <string.h>

#include "core/cfi.h"

#define FUNC 0x401000ULL

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct cfi_rule r;
	__u32 off, dist;
	const __u8 *eh;
	size_t n;

	if (size < 9)
		return 0;
	memcpy(&off, data, 4);
	memcpy(&dist, data + 4, 4);
	eh = data + 8;
	n = size - 8;
	if (!cfi_rule(eh + off % n, (uintptr_t)eh, (uintptr_t)eh + n, FUNC, FUNC + dist, &r) &&
	    r.cfa_rbp > 1)
		__builtin_trap(); /* (what it keeps is a flag) */
	return 0;
}
