// SPDX-License-Identifier: MIT
/*
 * Where calls come from, and where they go.
 *
 * A program reaches the driver three ways; all three must land in our wrappers:
 *  - symbols bound by the dynamic loader: our exported names come first (LD_PRELOAD);
 *  - dlsym(handle, "cu...") on a dlopen'ed libcuda: dlsym is interposed, and a driver
 *    function of the table found in libcuda is answered with its wrapper;
 *  - cuGetProcAddress[_v2], which cudart, cuBLAS, NCCL and Triton use: the returned
 *    pointer is matched against the addresses of libcuda's exported functions, and the
 *    matching wrapper is handed out instead (a version-specific entry point such as
 *    cuLaunchKernel_ptsz is itself an exported function of the table).
 *
 * dlsym(RTLD_NEXT, ...) means "the next definition after the caller", so glibc looks at
 * its return address. The interposer is therefore an assembly trampoline that jumps (not
 * calls) to the real dlsym for RTLD_NEXT, leaving the caller's return address in place.
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

#if !defined(__x86_64__)
#error "the in-process plane's dlsym trampoline is written for x86-64"
#endif

typedef void *(*dlsym_fn)(void *, const char *);
typedef int (*gpa_fn)(const char *, void **, int, __u64);
typedef int (*gpa2_fn)(const char *, void **, int, __u64, int *);

GS_HIDDEN void *gs_real_dlsym; /* glibc's dlsym */
static void *real_fn[GS_API_MAX];
static void *cuda_addr[GS_API_MAX]; /* libcuda's exported functions, for matching */
static void *real_gpa, *real_gpa2, *cuda_handle;
static int addrs_ready;

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

static void *real_dlsym(void *handle, const char *name)
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

/* libcuda, wherever and however it was loaded (by its soname), once it is. */
static void *libcuda(void)
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
	const void *first = real_dlsym(RTLD_DEFAULT, "gpuscope_inject_instance");

	forward = first && first != (const void *)&gs_instance;
	return forward;
}

gs_fn gs_real(unsigned int api)
{
	void *p = __atomic_load_n(&real_fn[api], __ATOMIC_ACQUIRE), *h;

	if (p)
		return (gs_fn)p;
	/* The other copy's wrapper (never one of our own: that would call itself). */
	if (forward && (p = real_dlsym(RTLD_DEFAULT, api_name(api))) && !gs_called_from_self(p)) {
		__atomic_store_n(&real_fn[api], p, __ATOMIC_RELEASE);
		return (gs_fn)p;
	}
	h = libcuda();
	p = real_dlsym(h ? h : RTLD_NEXT, api_name(api));
	if (p)
		__atomic_store_n(&real_fn[api], p, __ATOMIC_RELEASE);
	return (gs_fn)p;
}

void *gs_real_by_name(const char *name)
{
	void *h = libcuda();

	return h ? real_dlsym(h, name) : NULL;
}

static void learn_addresses(void)
{
	void *h;

	if (__atomic_load_n(&addrs_ready, __ATOMIC_ACQUIRE) || !(h = libcuda()))
		return;
	for (unsigned int a = 1; a < GS_API_MAX; a++)
		if (gs_wrappers[a])
			cuda_addr[a] = real_dlsym(h, api_name(a));
	__atomic_store_n(&addrs_ready, 1, __ATOMIC_RELEASE);
}

int cuGetProcAddress(const char *symbol, void **pfn, int version, __u64 flags);
int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, __u64 flags, int *status);

void *gs_wrap_pointer(void *p)
{
	if (!p)
		return p;
	if (p == real_gpa)
		return (void *)cuGetProcAddress;
	if (p == real_gpa2)
		return (void *)cuGetProcAddress_v2;
	learn_addresses();
	for (unsigned int a = 1; a < GS_API_MAX; a++)
		if (cuda_addr[a] == p && gs_wrappers[a]) {
			void *expected = NULL;

			__atomic_compare_exchange_n(&real_fn[a], &expected, p, false,
						    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
			return gs_wrappers[a];
		}
	return p;
}

static bool in_libcuda(void *p)
{
	const char *base;
	Dl_info info;

	if (!dladdr(p, &info) || !info.dli_fname)
		return false;
	base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	return !strncmp(base, "libcuda.so", 10);
}

/* dlsym for every handle but RTLD_NEXT (see the trampoline). */
GS_HIDDEN void *gs_dlsym_c(void *handle, const char *name)
{
	void *p = real_dlsym(handle, name);
	int api;

	if (!p || !name || name[0] != 'c' || name[1] != 'u' || !in_libcuda(p))
		return p;
	if (!strcmp(name, "cuGetProcAddress")) {
		real_gpa = p;
		return (void *)cuGetProcAddress;
	}
	if (!strcmp(name, "cuGetProcAddress_v2")) {
		real_gpa2 = p;
		return (void *)cuGetProcAddress_v2;
	}
	api = api_lookup(name);
	if (api <= 0 || !gs_wrappers[api])
		return p;
	__atomic_store_n(&real_fn[api], p, __ATOMIC_RELEASE);
	return gs_wrappers[api];
}

__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	cmpq $-1, %rdi\n" /* RTLD_NEXT */
	"	jne gs_dlsym_c\n"
	"	movq gs_real_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"
	"	jmp *%rax\n"
	"1:	pushq %rdi\n"
	"	pushq %rsi\n"
	"	subq $8, %rsp\n"
	"	call gs_resolve_dlsym\n"
	"	addq $8, %rsp\n"
	"	popq %rsi\n"
	"	popq %rdi\n"
	"	jmp *%rax\n"
	".size dlsym, .-dlsym\n");

/* A driver entry point asked for by name that could not be matched to a wrapper. */
static void note_unwrapped(const char *symbol, void *p)
{
	char v2[128];

	if (!symbol || strlen(symbol) > 100 || p == NULL)
		return;
	snprintf(v2, sizeof(v2), "%s_v2", symbol);
	if (api_lookup(symbol) > 0 || api_lookup(v2) > 0) {
		gs_count_unwrapped();
		/* For diagnosing the plane itself: which ones. */
		if (getenv("GPUSCOPE_INJECT_DEBUG")) {
			Dl_info info = { 0 };

			dladdr(p, &info);
			fprintf(stderr, "gpuscope-inject: %s handed out unwrapped (%p = %s+%#lx)\n",
				symbol, p, info.dli_sname ? info.dli_sname : "?",
				(unsigned long)((char *)p - (char *)info.dli_saddr));
		}
	}
}

/* One of our own entry points (the driver may hand back what dlsym gave it). */
static bool ours(void *p)
{
	if (p == (void *)cuGetProcAddress || p == (void *)cuGetProcAddress_v2)
		return true;
	for (unsigned int a = 1; a < GS_API_MAX; a++)
		if (gs_wrappers[a] == p)
			return true;
	return false;
}

static void *wrap_result(const char *symbol, void *p)
{
	void *w = gs_wrap_pointer(p);

	if (w == p && gs_active && !ours(p))
		note_unwrapped(symbol, p);
	return w;
}

static void *real_gpa_fn(void **slot, const char *name)
{
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE), *h;

	if (!p && (h = libcuda())) {
		p = real_dlsym(h, name);
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	}
	return p;
}

__attribute__((visibility("default"))) int cuGetProcAddress(const char *symbol, void **pfn,
							    int version, __u64 flags)
{
	gpa_fn f = (gpa_fn)real_gpa_fn(&real_gpa, "cuGetProcAddress");
	int r;

	if (!f)
		return 3; /* CUDA_ERROR_NOT_INITIALIZED */
	r = f(symbol, pfn, version, flags);
	if (r == 0 && pfn)
		*pfn = wrap_result(symbol, *pfn);
	return r;
}

__attribute__((visibility("default"))) int
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, __u64 flags, int *status)
{
	gpa2_fn f = (gpa2_fn)real_gpa_fn(&real_gpa2, "cuGetProcAddress_v2");
	int r;

	if (!f)
		return 3;
	r = f(symbol, pfn, version, flags, status);
	if (r == 0 && pfn)
		*pfn = wrap_result(symbol, *pfn);
	return r;
}
