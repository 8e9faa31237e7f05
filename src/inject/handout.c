// SPDX-License-Identifier: MIT
/*
 * Where calls come from: a program reaches the driver three ways, and all three must land
 * in our wrappers:
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "inject/gputime.h"
#include "inject/inject.h"

#if !defined(__x86_64__)
#error "the in-process plane's dlsym trampoline is written for x86-64"
#endif

typedef int (*gpa_fn)(const char *, void **, int, __u64);
typedef int (*gpa2_fn)(const char *, void **, int, __u64, int *);

static void *cuda_addr[GS_API_MAX]; /* libcuda's exported functions, for matching */
static void *real_gpa, *real_gpa2;
static int addrs_ready;

static void learn_addresses(void)
{
	void *h;

	if (__atomic_load_n(&addrs_ready, __ATOMIC_ACQUIRE) || !(h = gs_libcuda()))
		return;
	for (unsigned int a = 1; a < GS_API_MAX; a++)
		if (gs_wrappers[a])
			cuda_addr[a] = gs_real_sym(h, api_name(a));
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
			gs_real_learn(a, p, false);
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

/* A function that changes an instantiated graph, which the twins of CUDA graphs
 * (gputime_graph.c) must know of. */
static bool changes_exec(const char *symbol)
{
	return (!strncmp(symbol, "cuGraphExec", 11) &&
		(strstr(symbol, "Set") || strstr(symbol, "Update"))) ||
	       !strncmp(symbol, "cuGraphNodeSetEnabled", 21);
}

/* dlsym for every handle but RTLD_NEXT (see the trampoline). */
GS_HIDDEN void *gs_dlsym_c(void *handle, const char *name)
{
	void *p = gs_real_sym(handle, name);
	int api;

	if (p && name && !strncmp(name, "cupti", 5))
		return gs_cupti_dlsym(name, p); /* (a profiler of the program's: gputime_cupti.c) */
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
	if (api <= 0 || !gs_wrappers[api]) {
		if (changes_exec(name))
			gs_graphtime_unwrapped();
		return p;
	}
	gs_real_learn((unsigned int)api, p, true);
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
	if (changes_exec(symbol))
		gs_graphtime_unwrapped();
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

	if (!p && (h = gs_libcuda())) {
		p = gs_real_sym(h, name);
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
