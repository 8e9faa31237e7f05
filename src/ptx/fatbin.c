// SPDX-License-Identifier: MIT
/* Fatbin containers and entries (see fatbin.h). */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <lz4.h>
#include <zstd.h>

#include "core/alloc.h"
#include "core/util.h"
#include "ptx/fatbin.h"

#define CONTAINER_HDR 16
#define ENTRY_HDR     64
#define MAX_ENTRIES   65536

#define FLAG_LZ	  0x2000ULL
#define FLAG_ZSTD 0x8000ULL

static __u16 rd16(const unsigned char *p)
{
	return (__u16)(p[0] | p[1] << 8);
}

static __u32 rd32(const unsigned char *p)
{
	return (__u32)p[0] | (__u32)p[1] << 8 | (__u32)p[2] << 16 | (__u32)p[3] << 24;
}

static __u64 rd64(const unsigned char *p)
{
	return (__u64)rd32(p) | (__u64)rd32(p + 4) << 32;
}

const char *fatbin_kind_name(unsigned int kind)
{
	return kind == FATBIN_PTX ? "ptx" : kind == FATBIN_ELF ? "elf" : "other";
}

const char *fatbin_compression_name(unsigned int c)
{
	return c == FATBIN_ZSTD ? "zstd" : c == FATBIN_LZ ? "lz" : "none";
}

/* One container's entries, appended to out. */
static int parse_container(const unsigned char *b, size_t at, size_t end, unsigned int index,
			   struct fatbin *out, size_t *cap, char *err, size_t errlen)
{
	size_t off = at;

	while (off < end) {
		struct fatbin_entry e = { .container = index, .offset = off };
		__u32 hdr, csize;
		__u64 size, dsize;

		if (end - off < ENTRY_HDR) {
			snprintf(err, errlen, "entry at %zu: header cut short (%zu bytes left)",
				 off, end - off);
			return -1;
		}
		hdr = rd32(b + off + 4);
		size = rd64(b + off + 8);
		if (hdr < ENTRY_HDR || hdr > end - off || size > end - off - hdr) {
			snprintf(err, errlen,
				 "entry at %zu: header of %u and payload of %llu bytes do not fit "
				 "the container",
				 off, hdr, (unsigned long long)size);
			return -1;
		}
		if (out->n == MAX_ENTRIES) {
			snprintf(err, errlen, "more than %d entries", MAX_ENTRIES);
			return -1;
		}
		e.kind = rd16(b + off);
		csize = rd32(b + off + 16);
		e.minor = rd16(b + off + 24);
		e.major = rd16(b + off + 26);
		e.arch = rd32(b + off + 28);
		e.flags = rd64(b + off + 40);
		dsize = rd64(b + off + 56);
		e.data = b + off + hdr;
		e.stored = (size_t)size;
		e.size = (size_t)size;
		if (e.flags & (FLAG_ZSTD | FLAG_LZ)) {
			e.compression = e.flags & FLAG_ZSTD ? FATBIN_ZSTD : FATBIN_LZ;
			/* The payload is the compressed bytes, padded to 8. */
			if (csize && csize <= size)
				e.stored = csize;
			if (dsize > FATBIN_MAX_PAYLOAD) {
				snprintf(err, errlen,
					 "entry at %zu: decompresses to %llu bytes (more than %u)",
					 off, (unsigned long long)dsize, FATBIN_MAX_PAYLOAD);
				return -1;
			}
			e.size = (size_t)dsize;
		}
		if (gs_grow(&out->e, cap, out->n + 1, sizeof(*out->e))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		out->e[out->n++] = e;
		off += hdr + (size_t)size;
	}
	return 0;
}

int fatbin_parse(const void *buf, size_t len, struct fatbin *out, char *err, size_t errlen)
{
	const unsigned char *b = buf;
	size_t off = 0, cap = 0;
	unsigned int containers = 0;

	memset(out, 0, sizeof(*out));
	while (len - off >= CONTAINER_HDR && rd32(b + off) == FATBIN_CONTAINER_MAGIC) {
		__u16 hdr = rd16(b + off + 6);
		__u64 size = rd64(b + off + 8);

		if (hdr < CONTAINER_HDR || hdr > len - off || size > len - off - hdr) {
			snprintf(err, errlen,
				 "container at %zu: header of %u and %llu bytes of entries do not "
				 "fit "
				 "in %zu bytes",
				 off, hdr, (unsigned long long)size, len - off);
			fatbin_free(out);
			return -1;
		}
		if (parse_container(b, off + hdr, off + hdr + (size_t)size, containers, out, &cap,
				    err, errlen)) {
			fatbin_free(out);
			return -1;
		}
		containers++;
		off += hdr + (size_t)size;
	}
	if (!containers) {
		snprintf(err, errlen, "not a fatbin (no container magic 0x%08x at the start)",
			 FATBIN_CONTAINER_MAGIC);
		return -1;
	}
	out->bytes = off;
	return 0;
}

void fatbin_free(struct fatbin *fb)
{
	free(fb->e);
	memset(fb, 0, sizeof(*fb));
}

long fatbin_lz_decode(const unsigned char *in, size_t n, unsigned char *out, size_t cap)
{
	int got;

	/* (The "LZ" entries of nvcc --compress-mode=speed are LZ4 blocks.) */
	if (n > INT_MAX || cap > INT_MAX)
		return -1;
	got = LZ4_decompress_safe((const char *)in, (char *)out, (int)n, (int)cap);
	return got < 0 ? -1 : got;
}

int fatbin_payload(const struct fatbin_entry *e, unsigned char **out, size_t *n, char *err,
		   size_t errlen)
{
	unsigned char *buf;
	long got;

	*out = NULL;
	*n = 0;
	if (e->size > FATBIN_MAX_PAYLOAD) {
		snprintf(err, errlen, "entry at %zu: %zu bytes is too large", e->offset, e->size);
		return -1;
	}
	buf = gs_malloc(e->size + 1);
	if (!buf) {
		snprintf(err, errlen, "entry at %zu: out of memory for its %zu bytes", e->offset,
			 e->size);
		return -1;
	}
	switch (e->compression) {
	case FATBIN_ZSTD: {
		unsigned long long want = ZSTD_getFrameContentSize(e->data, e->stored);
		size_t r;

		if (want != ZSTD_CONTENTSIZE_UNKNOWN && want != e->size) {
			snprintf(err, errlen,
				 "entry at %zu: zstd frame says %llu bytes, the header %zu",
				 e->offset, want, e->size);
			free(buf);
			return -1;
		}
		r = ZSTD_decompress(buf, e->size, e->data, e->stored);
		if (ZSTD_isError(r) || r != e->size) {
			snprintf(err, errlen, "entry at %zu: zstd: %s", e->offset,
				 ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short output");
			free(buf);
			return -1;
		}
		break;
	}
	case FATBIN_LZ:
		got = fatbin_lz_decode(e->data, e->stored, buf, e->size);
		if (got < 0 || (size_t)got != e->size) {
			snprintf(err, errlen, "entry at %zu: corrupt LZ-compressed payload",
				 e->offset);
			free(buf);
			return -1;
		}
		break;
	default:
		memcpy(buf, e->data, e->size);
		break;
	}
	buf[e->size] = 0;
	*out = buf;
	*n = e->size;
	/* PTX is text: without the NULs that pad it to 8 bytes. */
	if (e->kind == FATBIN_PTX)
		*n = strnlen((const char *)buf, e->size);
	return 0;
}

const struct fatbin_entry *fatbin_pick_ptx(const struct fatbin *fb, unsigned int sm)
{
	const struct fatbin_entry *best = NULL;

	for (size_t i = 0; i < fb->n; i++) {
		const struct fatbin_entry *e = &fb->e[i];

		if (e->kind != FATBIN_PTX || e->arch > sm)
			continue;
		if (!best || e->arch > best->arch ||
		    (e->arch == best->arch && (e->major > best->major || (e->major == best->major &&
									  e->minor > best->minor))))
			best = e;
	}
	return best;
}

bool fatbin_has_elf(const struct fatbin *fb, unsigned int sm)
{
	for (size_t i = 0; i < fb->n; i++)
		if (fb->e[i].kind == FATBIN_ELF && fb->e[i].arch == sm)
			return true;
	return false;
}

const void *fatbin_wrapper_data(const void *wrapper, unsigned int *version)
{
	const unsigned char *w = wrapper;
	const void *data;

	if (!w || rd32(w) != FATBIN_WRAPPER_MAGIC)
		return NULL;
	if (version)
		*version = rd32(w + 4);
	memcpy(&data, w + 8, sizeof(data));
	return data;
}

/* ---- kernel names ------------------------------------------------------------------------ */

#define CUDA_ENTRY 0x10 /* st_other of a kernel's symbol in a cubin */

void ptx_kernel_names(char *ptx, void (*cb)(void *ctx, const char *name), void *ctx)
{
	char *p = ptx;

	while ((p = strstr(p, ".entry"))) {
		char *name = p + 6, *end;

		if (*name != ' ' && *name != '\t') {
			p = name;
			continue;
		}
		name += strspn(name, " \t");
		end = name + strcspn(name, "( \t\r\n");
		p = *end ? end + 1 : end;
		if (end == name)
			continue;
		*end = 0;
		cb(ctx, name);
	}
}

unsigned int ptx_target_arch(const char *ptx)
{
	const char *t = strstr(ptx, ".target");

	if (!t)
		return 0;
	t += 7 + strspn(t + 7, " \t");
	return strncmp(t, "sm_", 3) ? 0 : (unsigned int)strtoul(t + 3, NULL, 10) % 10000;
}

bool ptx_retarget(char *ptx, unsigned int sm)
{
	char *t = strstr(ptx, ".target"), want[16];
	size_t have, n;

	if (!t)
		return false;
	t += 7 + strspn(t + 7, " \t");
	if (strncmp(t, "sm_", 3))
		return false;
	have = 3 + strspn(t + 3, "0123456789abcdefghijklmnopqrstuvwxyz");
	n = (size_t)snprintf(want, sizeof(want), "sm_%u", sm);
	if (n > have)
		return false;
	memcpy(t, want, n);
	memset(t + n, ' ', have - n);
	return true;
}

unsigned int cubin_arch(const unsigned char *b, size_t n)
{
	const Elf64_Ehdr *eh = (const void *)b;

	if (n < sizeof(*eh) || memcmp(b, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64)
		return 0;
	/* CUDA's ELF ABI 8 (CUDA 13's nvcc) keeps the SM in bits 8-15 of the flags; older
	 * cubins (libraries built with earlier toolkits) in bits 0-7. */
	return eh->e_ident[EI_ABIVERSION] >= 8 ? (eh->e_flags >> 8) & 0xff : eh->e_flags & 0xff;
}

void cubin_kernel_names(const unsigned char *b, size_t n, void (*cb)(void *ctx, const char *name),
			void *ctx)
{
	const Elf64_Ehdr *eh = (const void *)b;
	const Elf64_Shdr *sh;

	if (n < sizeof(*eh) || memcmp(b, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64)
		return;
	/* (Tables at aligned offsets only, as every cubin has them: b is malloc'ed.) */
	if (eh->e_shentsize != sizeof(*sh) || eh->e_shoff > n || eh->e_shoff % 8 ||
	    (n - eh->e_shoff) / sizeof(*sh) < eh->e_shnum)
		return;
	sh = (const void *)(b + eh->e_shoff);
	for (unsigned int i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *st = &sh[i], *ss;
		const Elf64_Sym *sym;
		const char *str;

		if (st->sh_type != SHT_SYMTAB || st->sh_link >= eh->e_shnum ||
		    st->sh_entsize != sizeof(*sym) || st->sh_offset > n || st->sh_offset % 8 ||
		    st->sh_size > n - st->sh_offset)
			continue;
		ss = &sh[st->sh_link];
		if (ss->sh_offset > n || ss->sh_size > n - ss->sh_offset)
			continue;
		sym = (const void *)(b + st->sh_offset);
		str = (const char *)b + ss->sh_offset;
		for (size_t k = 0; k < st->sh_size / sizeof(*sym); k++) {
			if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC ||
			    !(sym[k].st_other & CUDA_ENTRY) || sym[k].st_name >= ss->sh_size ||
			    !memchr(str + sym[k].st_name, 0, ss->sh_size - sym[k].st_name))
				continue;
			cb(ctx, str + sym[k].st_name);
		}
	}
}
