/* SPDX-License-Identifier: MIT */
/*
 * The PTX rewriter's parts (see rewrite.h):
 *   rewrite.c          probes placed in kernels: parameters, returns, memory accesses;
 *   rewrite_modvars.c  which kernels use a module variable (left alone, below);
 *   ptxlex.c           reading PTX line by line (ptxlex.h).
 */
#ifndef GS_PTX_REWRITE_INT_H
#define GS_PTX_REWRITE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/hmap.h"

#define MAX_NAME 1024 /* a kernel's or function's name, at most */

/*
 * An instrumented module is a copy of the original, loaded apart: its __device__, __constant__
 * and __managed__ variables (module-scope .global and .const) are its own, not the ones the
 * program writes (cudaMemcpyToSymbol) and its other kernels use. A kernel that uses one,
 * itself or in a function it calls, is left alone.
 */
struct mv_fn {
	int var; /* the first variable it uses (an index into names), or -1 */
	__u64 *callees;
	size_t ncallees, cap;
};

struct modvars {
	struct hmap vars, fns; /* a name's hash -> its index + 1 */
	char **names;
	size_t nvars;
	struct mv_fn *fn;
	size_t nfn;
	int *kfn; /* each kernel's function */
	size_t nk;
	size_t fn_cap, names_cap, kfn_cap;
	bool oom; /* what was found is not all there is: use none of it */
};

/* The module's variables and the functions that use one, each kernel's included; v->oom
 * if that could not be known whole. */
void mv_scan(struct modvars *v, const char *ptx, size_t len);
/* The variable kernel k (in the order of the module) uses, itself or through a function
 * it calls; NULL for none. */
const char *mv_kernel_var(const struct modvars *v, size_t k);
void mv_free(struct modvars *v);

#endif
