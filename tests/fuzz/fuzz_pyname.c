// SPDX-License-Identifier: MIT
/*
 * Python frames named from a process's memory (core/pyname.c), which the process writes:
 * the input is that memory (at MEM_BASE), its first byte the layout and its next eight the
 * instruction offset; the code object is at MEM_BASE + 16. Reads outside it fail, as
 * process_vm_readv's would.
 */
#include <stdint.h>
#include <string.h>

#include "core/pyname.h"

#define MEM_BASE 0x10000ULL

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
	char out[512];
	__u64 off;

	if (size < 16)
		return 0;
	r.l = &py_layouts[data[0] % (sizeof(py_layouts) / sizeof(py_layouts[0]))];
	memcpy(&off, data + 1, sizeof(off));
	if (py_frame_name(&r, MEM_BASE + 16, off % (1u << 19), out, sizeof(out)))
		out[sizeof(out) - 1] = 0;
	return 0;
}
