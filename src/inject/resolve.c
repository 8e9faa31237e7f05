// SPDX-License-Identifier: MIT
/*
 * Where calls go: the real driver functions behind our wrappers (resolved on first use, or
 * learnt from what dlsym and cuGetProcAddress returned: handout.c), and where a call into
 * a wrapper came from (libcuda's own code, our own, the kernel's uretprobe trampoline).
 */
#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/names.h"
#include "inject/inject.h"

typedef void *(*dlsym_fn)(void *, const char *);

GS_HIDDEN void *gs_real_dlsym;	     /* glibc's dlsym */
void *gs_real_fn[GS_API_MAX] GS_HOT; /* (gs_real, inline) */
struct gs_api_desc gs_descs[GS_API_MAX] GS_HOT = { GS_API_LIST(GS_API_DESC) };
static void *cuda_handle;

GS_HIDDEN void *gs_resolve_dlsym(void)
{
	void *p = __atomic_load_n(&gs_real_dlsym, __ATOMIC_ACQUIRE);

	if (p)
		return p;
	p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!p)
		p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	__atomic_store_n(&gs_real_dlsym, p, __ATOMIC_RELEASE);
	return p;
}

void *gs_real_sym(void *handle, const char *name)
{
	dlsym_fn f = (dlsym_fn)gs_resolve_dlsym();

	return f ? f(handle, name) : NULL;
}

/* Where libcuda's code is: calls from there are the driver calling itself. And where
 * ours is: a wrapper entered with a return address in it is the driver tail-calling
 * another entry point from the real function one of our wrappers called. */
static unsigned long cuda_lo, cuda_hi, self_lo, self_hi;

struct text_range {
	unsigned long base, *lo, *hi;
};

static int find_segments(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct text_range *r = arg;

	(void)size;
	if (info->dlpi_addr != (ElfW(Addr))r->base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		unsigned long lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (!*r->lo || lo < *r->lo)
			*r->lo = lo;
		if (hi > *r->hi)
			*r->hi = hi;
	}
	return 1;
}

bool gs_called_from_self(void *caller)
{
	unsigned long pc = (unsigned long)caller;

	if (!__atomic_load_n(&self_hi, __ATOMIC_ACQUIRE)) {
		Dl_info info;
		unsigned long lo = 0, hi = 0;
		struct text_range r = { 0, &lo, &hi };

		if (!dladdr((void *)gs_called_from_self, &info))
			return false;
		r.base = (unsigned long)info.dli_fbase;
		/* (An executable's base is its load bias, which dlpi_addr gives too.) */
		dl_iterate_phdr(find_segments, &r);
		self_lo = lo;
		__atomic_store_n(&self_hi, hi, __ATOMIC_RELEASE);
	}
	return pc >= self_lo && pc < self_hi;
}

void *gs_libcuda(void)
{
	void *h = __atomic_load_n(&cuda_handle, __ATOMIC_ACQUIRE);
	struct link_map *lm;

	if (!h) {
		h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			return NULL;
		if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0) {
			struct text_range r = { (unsigned long)lm->l_addr, &cuda_lo, &cuda_hi };

			dl_iterate_phdr(find_segments, &r);
		}
		__atomic_store_n(&cuda_handle, h, __ATOMIC_RELEASE);
	}
	return h;
}

/* The function an entry point is a variant of: the first entry of the table with the same
 * name once _ptsz, _ptds and _v2 are cut off. */
static unsigned short base_of[GS_API_MAX];

static void base_name(unsigned int api, char *out, size_t size)
{
	static const char *const suffixes[] = { "_ptsz", "_ptds", "_v2" };
	bool cut = true;

	snprintf(out, size, "%s", api_name(api));
	while (cut) {
		size_t n = strlen(out);

		cut = false;
		for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]) && !cut; i++) {
			size_t k = strlen(suffixes[i]);

			if (n > k && !strcmp(out + n - k, suffixes[i])) {
				out[n - k] = 0;
				cut = true;
			}
		}
	}
}

void gs_resolve_init(void)
{
	static char names[GS_API_MAX][64];

	for (unsigned int a = 1; a < GS_API_MAX; a++) {
		base_name(a, names[a], sizeof(names[a]));
		base_of[a] = (unsigned short)a;
		for (unsigned int b = 1; b < a; b++)
			if (!strcmp(names[a], names[b])) {
				base_of[a] = base_of[b];
				break;
			}
	}
}

bool gs_same_function(unsigned int a, unsigned int b)
{
	return a < GS_API_MAX && b < GS_API_MAX && base_of[a] == base_of[b];
}

/*
 * The kernel's uretprobe trampoline: another tracer (gpuscope's own exporter on the node,
 * say) with a return probe on a driver function replaces its return address with the
 * trampoline's. A wrapper entered with that return address was jumped to from inside the
 * real function (a tail call): a call of the driver's, not the program's. Found in
 * /proc/self/maps ("[uprobes]", made at the first return probe hit) once there.
 */
static unsigned long tramp_lo, tramp_hi;

/* A line of /proc/self/maps: is it the trampoline's? (Then its range is kept.) */
static bool trampoline_line(const char *line, size_t len)
{
	unsigned long lo, hi;

	if (len < 9 || !memmem(line, len, "[uprobes]", 9) || sscanf(line, "%lx-%lx", &lo, &hi) != 2)
		return false;
	tramp_lo = lo;
	__atomic_store_n(&tramp_hi, hi, __ATOMIC_RELEASE);
	return true;
}

static bool from_trampoline(unsigned long pc)
{
	char buf[4096];
	size_t len = 0;
	ssize_t n;
	int fd;

	if (__atomic_load_n(&tramp_hi, __ATOMIC_ACQUIRE))
		return pc >= tramp_lo && pc < tramp_hi;
	/* Only a return address outside every file mapping is worth a look. (No stdio: this
	 * may run in a signal handler.) */
	{
		Dl_info info;

		if (dladdr((void *)pc, &info) && info.dli_fname)
			return false;
	}
	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	while ((n = read(fd, buf + len, sizeof(buf) - len)) > 0) {
		char *p = buf, *nl;

		len += (size_t)n;
		while ((nl = memchr(p, '\n', len - (size_t)(p - buf)))) {
			if (trampoline_line(p, (size_t)(nl - p))) {
				close(fd);
				return pc >= tramp_lo && pc < tramp_hi;
			}
			p = nl + 1;
		}
		len -= (size_t)(p - buf); /* the partial line, to the front */
		memmove(buf, p, len);
		if (len == sizeof(buf))
			len = 0; /* (a line longer than the buffer: not ours) */
	}
	close(fd);
	return false;
}

bool gs_called_from_driver(void *caller)
{
	unsigned long pc = (unsigned long)caller;

	if (from_trampoline(pc))
		return true;

	/* Unknown (libcuda not found yet): assume the driver, and record nothing twice. */
	return !__atomic_load_n(&cuda_handle, __ATOMIC_ACQUIRE) || !cuda_hi ||
	       (pc >= cuda_lo && pc < cuda_hi);
}

/* Another copy of this library, loaded before us, records: our calls go through its entry
 * points (see gs_resolve_other_copy). */
static bool forward;

/* One per copy of the library, exported as gpuscope_inject_instance: looked up by name it
 * is the first copy's. (Our own by its hidden name: the exported one binds to the first.) */
GS_HIDDEN const char gs_instance = 1;
__asm__(".globl gpuscope_inject_instance\n\t.type gpuscope_inject_instance, @object\n\t"
	".size gpuscope_inject_instance, 1\n\t.set gpuscope_inject_instance, gs_instance");

bool gs_resolve_other_copy(void)
{
	const void *first = gs_real_sym(RTLD_DEFAULT, "gpuscope_inject_instance");

	forward = first && first != (const void *)&gs_instance;
	return forward;
}

gs_fn gs_real_find(unsigned int api)
{
	void *p, *h;

	/* The other copy's wrapper (never one of our own: that would call itself). */
	if (forward && (p = gs_real_sym(RTLD_DEFAULT, api_name(api))) && !gs_called_from_self(p)) {
		__atomic_store_n(&gs_real_fn[api], p, __ATOMIC_RELEASE);
		return (gs_fn)p;
	}
	h = gs_libcuda();
	p = gs_real_sym(h ? h : RTLD_NEXT, api_name(api));
	if (p)
		__atomic_store_n(&gs_real_fn[api], p, __ATOMIC_RELEASE);
	return (gs_fn)p;
}

void *gs_real_by_name(const char *name)
{
	void *h = gs_libcuda();

	return h ? gs_real_sym(h, name) : NULL;
}

void gs_real_learn(unsigned int api, void *p, bool replace)
{
	void *expected = NULL;

	if (replace)
		__atomic_store_n(&gs_real_fn[api], p, __ATOMIC_RELEASE);
	else
		__atomic_compare_exchange_n(&gs_real_fn[api], &expected, p, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE);
}
