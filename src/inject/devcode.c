// SPDX-License-Identifier: MIT
/*
 * Device code the program loads (GPUSCOPE_DEVCODE=1, set by `--device-code`): after a
 * successful cuModuleLoadData[Ex], cuModuleLoadFatBinary or cuLibraryLoadData, what the
 * image holds: PTX text, a fatbin (or the wrapper cudart registers), or a cubin; which
 * architectures it has PTX and SASS for; and each kernel in it, with whether its code has
 * PTX (what device-side probes are put in: SASS alone cannot be rewritten). cudart, static
 * or not, loads the fatbins it registered through these calls, so they are seen here too.
 *
 * The image is the program's memory and the driver has accepted it, yet its headers are
 * not trusted: it is copied with process_vm_readv, which fails rather than faults on an
 * address that is not mapped, up to the size its headers claim (bounded), and parsed
 * from the copy (ptx/fatbin.c, bounds-checked). Nothing here can change what the call
 * returned.
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/names.h"
#include "core/util.h"
#include "inject/inject.h"
#include "ptx/fatbin.h"

#define IMAGE_MAX   (512ULL << 20) /* bytes of one image read */
#define KERNELS_MAX 65536	   /* kernel records of one module */

static int enabled = -1;

static bool devcode_on(void)
{
	if (enabled < 0) {
		const char *e = getenv("GPUSCOPE_DEVCODE");

		enabled = e && !strcmp(e, "1");
	}
	return enabled;
}

static int safe_read(void *dst, size_t n, __u64 addr)
{
	struct iovec l = { dst, n }, r = { (void *)(unsigned long)addr, n };

	if (addr < 4096)
		return -1;
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* Copy n bytes from the program's memory; NULL if any of them is not readable. */
static unsigned char *copy_in(__u64 addr, size_t n)
{
	unsigned char *b = malloc(n + 1);

	if (!b)
		return NULL;
	if (safe_read(b, n, addr)) {
		free(b);
		return NULL;
	}
	b[n] = 0;
	return b;
}

struct found {
	struct gs_ev_devcode mod;
	const char **names; /* into the buffers below */
	unsigned char *has_ptx;
	size_t n, cap;
	unsigned char *bufs[2]; /* what the names point into */
	bool text_only;		/* keep the PTX text whole: no kernel names */
	unsigned int sm;	/* the device's (major * 10 + minor): its PTX; 0: the newest */
};

static void add_kernel(struct found *f, const char *name, bool ptx)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 64;
		const char **n = realloc(f->names, cap * sizeof(*n));
		unsigned char *p;

		if (!n)
			return;
		f->names = n;
		p = realloc(f->has_ptx, cap);
		if (!p)
			return;
		f->has_ptx = p;
		f->cap = cap;
	}
	f->names[f->n] = name;
	f->has_ptx[f->n++] = ptx;
}

static bool known(const struct found *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->names[i], name))
			return true;
	return false;
}

static void add_cb(void *ctx, const char *name)
{
	struct found *f = ctx;

	if (f->n < KERNELS_MAX)
		add_kernel(f, name, true);
}

static void add_sass_cb(void *ctx, const char *name)
{
	struct found *f = ctx;

	if (f->n < KERNELS_MAX && !known(f, name))
		add_kernel(f, name, false);
}

static void ptx_kernels(struct found *f, char *ptx)
{
	f->mod.ptx_arch = GS_MAX(f->mod.ptx_arch, (__u16)ptx_target_arch(ptx));
	if (!f->text_only)
		ptx_kernel_names(ptx, add_cb, f);
}

static void cubin_kernels(struct found *f, const unsigned char *b, size_t n, unsigned int *arch)
{
	*arch = cubin_arch(b, n);
	if (!f->text_only)
		cubin_kernel_names(b, n, add_sass_cb, f);
}

/* Of two PTX entries, the one for a device of f->sm: the newest it can run (the driver JITs
 * PTX for its own architecture or older), else the oldest; without a device, the newest. */
static bool better_ptx(const struct found *f, const struct fatbin_entry *e,
		       const struct fatbin_entry *best)
{
	bool fits = !f->sm || e->arch <= f->sm, best_fits = !f->sm || best->arch <= f->sm;

	if (fits != best_fits)
		return fits;
	return fits ? e->arch > best->arch : e->arch < best->arch;
}

/* A fatbin container at addr: its entries, the kernels of its PTX (the newest, or the one
 * suited to f->sm), and those of its newest cubin that the PTX does not have. */
static void read_fatbin(struct found *f, __u64 addr, char *why, size_t whylen)
{
	unsigned char hdr[16], *buf, *ptx = NULL, *elf = NULL;
	const struct fatbin_entry *best_ptx = NULL, *best_elf = NULL, *low_elf = NULL;
	struct fatbin fb;
	size_t total, n;

	if (safe_read(hdr, sizeof(hdr), addr)) {
		snprintf(why, whylen, "fatbin header not readable");
		return;
	}
	total = (size_t) * (const __u16 *)(hdr + 6) + *(const __u64 *)(hdr + 8);
	if (total > IMAGE_MAX || !(buf = copy_in(addr, total))) {
		snprintf(why, whylen, "fatbin of %zu bytes not readable", total);
		return;
	}
	f->mod.bytes = total;
	if (fatbin_parse(buf, total, &fb, why, whylen)) {
		free(buf);
		return;
	}
	for (size_t i = 0; i < fb.n; i++) {
		const struct fatbin_entry *e = &fb.e[i];

		if (e->kind == FATBIN_PTX) {
			f->mod.nptx++;
			if (!best_ptx || better_ptx(f, e, best_ptx))
				best_ptx = e;
		} else if (e->kind == FATBIN_ELF) {
			f->mod.nsass++;
			if (!best_elf || e->arch > best_elf->arch)
				best_elf = e;
			if (!low_elf || e->arch < low_elf->arch)
				low_elf = e;
		}
	}
	f->mod.ptx_arch = best_ptx ? (__u16)best_ptx->arch : 0;
	f->mod.sass_arch = best_elf ? (__u16)best_elf->arch : 0;
	f->mod.sass_arch_low = low_elf ? (__u16)low_elf->arch : 0;
	if (best_ptx && !fatbin_payload(best_ptx, &ptx, &n, why, whylen))
		ptx_kernels(f, (char *)ptx);
	if (best_elf && !fatbin_payload(best_elf, &elf, &n, why, whylen)) {
		unsigned int arch;

		cubin_kernels(f, elf, n, &arch);
	}
	f->bufs[0] = ptx;
	f->bufs[1] = elf;
	fatbin_free(&fb);
	free(buf);
}

/* Read what is readable of [addr, addr + n), a page per piece: the bytes read, which stop
 * at the first page that is not mapped. */
static size_t read_upto(unsigned char *dst, size_t n, __u64 addr)
{
	struct iovec l = { dst, n }, r[16];
	size_t k = 0, off = 0;
	ssize_t got;

	while (off < n && k < 16) {
		size_t piece = GS_MIN(n - off, 4096 - ((addr + off) & 4095));

		r[k].iov_base = (void *)(unsigned long)(addr + off);
		r[k++].iov_len = piece;
		off += piece;
	}
	l.iov_len = off;
	if (addr < 4096)
		return 0;
	got = process_vm_readv(getpid(), &l, 1, r, k, 0);
	return got > 0 ? (size_t)got : 0;
}

/* PTX text: NUL-terminated (the driver took it as such), read up to its NUL. */
static void read_ptx_text(struct found *f, __u64 img, char *why, size_t whylen)
{
	size_t n = 0, cap = 0;
	unsigned char *b = NULL;

	f->mod.kind = GS_CODE_UNKNOWN;
	while (n < IMAGE_MAX) {
		unsigned char *z, *nb;
		size_t got;

		if (cap - n < (64 << 10) + 1) {
			cap = cap ? 2 * cap : 128 << 10;
			if (!(nb = realloc(b, cap)))
				break;
			b = nb;
		}
		got = read_upto(b + n, 64 << 10, img + n);
		if (!got)
			break;
		if ((z = memchr(b + n, 0, got))) {
			n = (size_t)(z - b);
			if (strstr((char *)b, ".version")) {
				f->mod.kind = GS_CODE_PTX;
				f->mod.nptx = 1;
				f->mod.bytes = n;
				ptx_kernels(f, (char *)b);
			} else {
				snprintf(why, whylen, "neither PTX, a fatbin nor a cubin");
			}
			f->bufs[0] = b;
			return;
		}
		n += got;
	}
	free(b);
	snprintf(why, whylen, "neither PTX, a fatbin nor a cubin (no end found)");
}

static void read_image(struct found *f, __u64 img, char *why, size_t whylen)
{
	unsigned char head[64];

	if (safe_read(head, 16, img)) {
		f->mod.kind = GS_CODE_UNKNOWN;
		snprintf(why, whylen, "image not readable");
		return;
	}
	if (*(const __u32 *)head == FATBIN_WRAPPER_MAGIC) {
		f->mod.kind = GS_CODE_FATBIN;
		read_fatbin(f, *(const __u64 *)(head + 8), why, whylen);
	} else if (*(const __u32 *)head == FATBIN_CONTAINER_MAGIC) {
		f->mod.kind = GS_CODE_FATBIN;
		read_fatbin(f, img, why, whylen);
	} else if (!memcmp(head, ELFMAG, SELFMAG)) {
		const Elf64_Ehdr *eh = (const void *)head;
		unsigned char *b;
		unsigned int arch = 0;
		size_t n;

		f->mod.kind = GS_CODE_CUBIN;
		f->mod.nsass = 1;
		if (safe_read(head, sizeof(*eh), img) || head[EI_CLASS] != ELFCLASS64) {
			snprintf(why, whylen, "ELF header not readable, or not 64-bit");
			return;
		}
		n = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
		if (n > IMAGE_MAX || !(b = copy_in(img, n))) {
			snprintf(why, whylen, "cubin of %zu bytes not readable", n);
			return;
		}
		f->mod.bytes = n;
		cubin_kernels(f, b, n, &arch);
		f->mod.sass_arch = f->mod.sass_arch_low = (__u16)arch;
		f->bufs[1] = b;
	} else {
		read_ptx_text(f, img, why, whylen);
	}
}

static void emit_rec(const struct gs_ev_devcode *base, const char *name, bool kernel, bool ptx,
		     __u64 ts)
{
	size_t len = strnlen(name, GS_NAME_MAX - 1);
	__u32 size = (__u32)((offsetof(struct gs_ev_devcode, name) + len + 1 + 7) & ~(size_t)7);
	struct gs_ev_devcode *e = gs_emit_reserve(size, GS_EV_DEVCODE);

	if (!e)
		return;
	memcpy(e, base, offsetof(struct gs_ev_devcode, name));
	gs_fill_hdr(&e->h, GS_EV_DEVCODE, size, ts);
	e->kernel = kernel;
	e->has_ptx = ptx;
	e->len = (__u16)len;
	memcpy(e->name, name, len);
	memset(e->name + len, 0, size - offsetof(struct gs_ev_devcode, name) - len);
	gs_emit_commit(e);
}

void gs_devcode_loaded(unsigned int api, __u64 handle_ptr, __u64 image, __u64 ts)
{
	struct found f;
	char why[GS_NAME_MAX] = "";
	__u64 scope = 0;

	if (!devcode_on() || safe_read(&scope, sizeof(scope), handle_ptr))
		return;
	memset(&f, 0, sizeof(f));
	f.mod.scope = scope;
	f.mod.api = (__u16)api;
	read_image(&f, image, why, sizeof(why));
	f.mod.nkernels = (__u32)f.n;
	emit_rec(&f.mod, why, false, false, ts);
	for (size_t i = 0; i < f.n; i++) {
		struct gs_ev_devcode k = f.mod;

		k.ptx_arch = f.has_ptx[i] ? f.mod.ptx_arch : 0;
		emit_rec(&k, f.names[i], true, f.has_ptx[i], ts);
	}
	free(f.names);
	free(f.has_ptx);
	free(f.bufs[0]);
	free(f.bufs[1]);
}

void *gs_devcode_read_file(__u64 path)
{
	char name[4096], *b = NULL;
	struct stat st;
	size_t got;
	int fd;

	/* (the name, up to its NUL: what is mapped of it) */
	got = read_upto((unsigned char *)name, sizeof(name), path);
	if (!got || !memchr(name, 0, got))
		return NULL;
	fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && (__u64)st.st_size <= IMAGE_MAX)
		b = gs_read_all(fd, (size_t)st.st_size);
	close(fd);
	return b;
}

char *gs_devcode_ptx(__u64 image, unsigned int sm, unsigned int *arch, char *why, size_t whylen)
{
	struct found f;
	char *ptx = NULL, where[4200] = "";

	memset(&f, 0, sizeof(f));
	f.text_only = true;
	f.sm = sm;
	why[0] = 0;
	read_image(&f, image, why, whylen);
	if (f.bufs[0] && (f.mod.kind == GS_CODE_PTX || f.mod.nptx)) {
		ptx = (char *)f.bufs[0];
		f.bufs[0] = NULL;
		*arch = f.mod.ptx_arch;
		why[0] = 0; /* (on success, why says only where the PTX came from) */
	} else if (f.mod.kind == GS_CODE_CUBIN && f.bufs[1] && !why[0] &&
		   (ptx = gs_triton_ptx(f.bufs[1], f.mod.bytes, where, sizeof(where)))) {
		*arch = ptx_target_arch(ptx);
		snprintf(why, whylen, "a cubin: its PTX from Triton's cache, %s", where);
	} else if (!why[0]) {
		snprintf(why, whylen, "%s%s%s",
			 f.mod.kind == GS_CODE_CUBIN ? "a cubin: SASS only"
			 : f.mod.nsass		     ? "SASS only, no PTX"
						     : "no PTX",
			 where[0] ? "; " : "", where);
	}
	free(f.names);
	free(f.has_ptx);
	free(f.bufs[0]);
	free(f.bufs[1]);
	return ptx;
}
