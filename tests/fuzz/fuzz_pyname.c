// SPDX-License-Identifier: MIT
/*
 * Python frames named from a process's memory (core/pyname.c), which the process writes:
 * the input is that memory (at MEM_BASE), its first byte the layout and its next eight the
 * instruction offset; the code object is at MEM_BASE + 16. Reads outside it fail, as
 * process_vm_readv's would. A first byte past the written layouts reads the layout from the
 * memory instead, as a 3.13 or 3.14 process's _Py_DebugOffsets at MEM_BASE + 16
 * (core/pylayout.c), and names with it where it is taken (the code object then
 * DEBUG_SPAN bytes further).
 */
#include <stdint.h>
#include <string.h>

#include "core/pyname.h"

#define MEM_BASE   0x10000ULL
#define DEBUG_SPAN 1024 /* a _Py_DebugOffsets, then the code object */

struct image {
	const unsigned char *p;
	size_t n;
};

static bool image_read(void *ctx, void *dst, __u64 addr, size_t n)
{
	const struct image *m = ctx;

	if (addr < MEM_BASE || addr - MEM_BASE > m->n || n > m->n - (addr - MEM_BASE))
		return false;
	memcpy(dst, m->p + (addr - MEM_BASE), n);
	return true;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct image m = { data, size };
	struct py_reader r = { NULL, image_read, &m };
	struct py_layout read;
	size_t nl = sizeof(py_layouts) / sizeof(py_layouts[0]), pick;
	__u64 off, code = MEM_BASE + 16;
	char out[512];

	if (size < 16)
		return 0;
	pick = data[0] % (nl + 2);
	if (pick < nl) {
		r.l = &py_layouts[pick];
	} else {
		if (!py_layout_debug(image_read, &m, MEM_BASE + 16, (unsigned int)(13 + pick - nl),
				     &read))
			return 0;
		r.l = &read;
		code += DEBUG_SPAN;
	}
	memcpy(&off, data + 1, sizeof(off));
	if (py_frame_name(&r, code, off % (1u << 19), out, sizeof(out)))
		out[sizeof(out) - 1] = 0;
	return 0;
}
