// SPDX-License-Identifier: MIT
/* Python frames named, and put in a native stack (see pyname.h). */
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "core/pyname.h"
#include "gpuscope/event.h"

#define TEXT_MAX 200 /* bytes of a name or a file name kept */

bool py_read_pid(void *ctx, void *dst, __u64 addr, size_t n)
{
	struct iovec local = { dst, n }, remote = { (void *)(unsigned long)addr, n };

	return addr &&
	       process_vm_readv((pid_t)(uintptr_t)ctx, &local, 1, &remote, 1, 0) == (ssize_t)n;
}

static bool rd64(const struct py_reader *r, __u64 addr, __u64 *v)
{
	return r->read(r->ctx, v, addr, 8);
}

/* A str object's text as UTF-8 (cut to TEXT_MAX bytes); "?" if it cannot be read. */
static void read_str(const struct py_reader *r, __u64 obj, char *out)
{
	unsigned char hdr[72];
	__u64 len;
	__u32 state, kind;
	size_t k = 0;

	strcpy(out, "?");
	if (!r->read(r->ctx, hdr, obj, (size_t)r->l->str_ascii))
		return;
	memcpy(&len, hdr + 16, 8);
	memcpy(&state, hdr + 32, 4);
	kind = (state >> 2) & 7;
	if (!(state & (1u << 5)) || (kind != 1 && kind != 2 && kind != 4))
		return;		 /* (not compact: not a code object's string) */
	if (state & (1u << 6)) { /* ASCII */
		len = len < TEXT_MAX ? len : TEXT_MAX;
		if (r->read(r->ctx, out, obj + (__u64)r->l->str_ascii, len))
			out[len] = 0;
		return;
	}
	for (__u64 i = 0; i < len && k + 4 < TEXT_MAX; i++) {
		__u32 c = 0;

		if (!r->read(r->ctx, &c, obj + (__u64)r->l->str_compact + i * kind, kind))
			break;
		if (c < 0x80) {
			out[k++] = (char)c;
		} else if (c < 0x800) {
			out[k++] = (char)(0xc0 | c >> 6);
			out[k++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			out[k++] = (char)(0xe0 | c >> 12);
			out[k++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[k++] = (char)(0x80 | (c & 0x3f));
		} else {
			out[k++] = (char)(0xf0 | c >> 18);
			out[k++] = (char)(0x80 | ((c >> 12) & 0x3f));
			out[k++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[k++] = (char)(0x80 | (c & 0x3f));
		}
	}
	out[k] = 0;
}

/* A bytes object's contents, read in pieces. */
struct bytes_rd {
	const struct py_reader *r;
	__u64 at, left;
	unsigned char buf[256];
	unsigned int n, i;
};

static int next_byte(struct bytes_rd *b)
{
	if (b->i == b->n) {
		b->n = (unsigned int)(b->left < sizeof(b->buf) ? b->left : sizeof(b->buf));
		b->i = 0;
		if (!b->n || !b->r->read(b->r->ctx, b->buf, b->at, b->n)) {
			b->n = 0;
			b->left = 0; /* (unreadable: the table ends here) */
			return -1;
		}
		b->at += b->n;
		b->left -= b->n;
	}
	return b->buf[b->i++];
}

static int varint(struct bytes_rd *b)
{
	int v = 0, shift = 0, c;

	do {
		if ((c = next_byte(b)) < 0 || shift > 24)
			return 0;
		v |= (c & 63) << shift;
		shift += 6;
	} while (c & 64);
	return v;
}

static int svarint(struct bytes_rd *b)
{
	int v = varint(b);

	return v & 1 ? -(v >> 1) : v >> 1;
}

/* 3.11 and later (Objects/locations.md): the line of code unit `unit`; 0 if none. */
static int line_311(struct bytes_rd *b, int line, __u64 unit)
{
	__u64 at = 0;
	int c;

	while ((c = next_byte(b)) >= 0) {
		int code = (c >> 3) & 15, delta = 0;
		__u64 len = (__u64)(c & 7) + 1;

		if (!(c & 128))
			return 0; /* (out of step: not a location table) */
		if (code == 14) {
			delta = svarint(b);
			varint(b), varint(b), varint(b);
		} else if (code == 13) {
			delta = svarint(b);
		} else if (code >= 10 && code <= 12) {
			delta = code - 10;
			next_byte(b), next_byte(b);
		} else if (code < 10) {
			next_byte(b);
		}
		line = (int)((unsigned int)line +
			     (unsigned int)delta); /* (the bytes' arithmetic) */
		if (unit < at + len)
			return code == 15 ? 0 : line;
		at += len;
	}
	return 0;
}

/* 3.10 (Objects/lnotab_notes.txt): pairs of (bytes, line delta); -128 no line. */
static int line_310(struct bytes_rd *b, int line, __u64 byte)
{
	__u64 end = 0;
	int sd, ld;

	while ((sd = next_byte(b)) >= 0 && (ld = next_byte(b)) >= 0) {
		bool none = ld == 128;

		if (!none)
			line = (int)((unsigned int)line + (unsigned int)(int)(signed char)ld);
		end += (__u64)sd;
		if (byte < end)
			return none ? 0 : line;
	}
	return 0;
}

bool py_frame_name(const struct py_reader *r, __u64 code, __u64 off, char *out, size_t n)
{
	const struct py_layout *l = r->l;
	char name[TEXT_MAX + 1], file[TEXT_MAX + 1];
	struct bytes_rd b = { .r = r };
	__u64 name_obj, file_obj, table;
	int first = 0, line = 0;

	if (!rd64(r, code + (__u64)l->co_name, &name_obj) ||
	    !rd64(r, code + (__u64)l->co_filename, &file_obj) ||
	    !r->read(r->ctx, &first, code + (__u64)l->co_firstlineno, 4) ||
	    !rd64(r, code + (__u64)l->co_linetable, &table))
		return false;
	read_str(r, name_obj, name);
	read_str(r, file_obj, file);
	if (rd64(r, table + 16, &b.left)) {
		b.at = table + 32;
		/* (At most 64 KiB of it: its reads are bounded whatever the bytes.) */
		b.left = b.left < (1u << 16) ? b.left : (1u << 16);
		line = l->table311 ? line_311(&b, first, off / 2) : line_310(&b, first, off);
	}
	if (line > 0)
		snprintf(out, n, "%s (%s:%d)", name, file, line);
	else
		snprintf(out, n, "%s (%s)", name, file);
	return true;
}

int py_mix(const __u64 *native, int n, const __u64 *py, const bool *entry, int np, bool borrowed,
	   __u64 eval_lo, __u64 eval_hi, __u64 *out, int max)
{
	int k = 0, p = 0;

	for (int i = 0; i < n && k < max; i++) {
		__u64 ip = native[i];

		if (!borrowed && p < np && eval_hi && ip - 1 >= eval_lo && ip - 1 < eval_hi) {
			/* This evaluation's frames in place of the interpreter's. */
			while (p < np && k < max) {
				bool last = entry[p];

				out[k++] = py[p++];
				if (last)
					break;
			}
			continue;
		}
		out[k++] = ip;
	}
	/* Evaluations whose native frames were not found (the unwinder stopped), or another
	 * thread's: outermost. */
	if (borrowed && np && k < max)
		out[k++] = GS_PYFRAME_BORROWED;
	while (p < np && k < max)
		out[k++] = py[p++];
	return k;
}
