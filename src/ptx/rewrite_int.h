/* SPDX-License-Identifier: MIT */
/*
 * The PTX rewriter's parts (see rewrite.h):
 *   rewrite.c          probes placed in kernels: parameters, returns, memory accesses;
 *   rewrite_modvars.c  module variables: read through __gs_vars (below);
 *   ptxlex.c           reading PTX line by line (ptxlex.h).
 */
#ifndef GS_PTX_REWRITE_INT_H
#define GS_PTX_REWRITE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/hmap.h"

struct strbuf;

#define MAX_NAME 1024 /* a kernel's or function's name, at most */

/*
 * An instrumented module is loaded apart from the program's, so its own __device__,
 * __constant__ and __managed__ variables (module-scope .global and .const) would not be the
 * ones the program fills (cudaMemcpyToSymbol) and its other kernels use. Every function
 * body of the output reads them where the program's are instead: each reference becomes a
 * register loaded from __gs_vars, a table of their addresses, one slot a variable in the
 * module's order. Its initializer holds the module's own (generic) addresses, right for the
 * module loaded as it is (bpf2ptx); gpuscope's in-process plane writes the program's into
 * it (cuModuleGetGlobal, cuLibraryGetGlobal) after the JIT. Since those are addresses in the
 * global window, .const accesses become generic ones (ld.const -> ld, cvta[.to].const ->
 * mov). Texture, sampler and surface references cannot be read that way: a kernel that uses
 * one, itself or through a function it calls, is left alone.
 */
struct mv_fn {
	int var; /* the first opaque reference it uses (an index into var), or -1 */
	__u64 *callees;
	size_t ncallees, cap;
};

struct mv_var {
	char *name;
	size_t line; /* where it is declared */
	bool opaque; /* a .texref, .samplerref or .surfref */
};

struct modvars {
	struct hmap vars, fns; /* a name's hash -> its index + 1 */
	struct mv_var *var;
	size_t nvars;
	struct mv_fn *fn;
	size_t nfn;
	int *kfn; /* each kernel's function */
	size_t nk;
	size_t fn_cap, var_cap, kfn_cap;
	size_t table_line; /* __gs_vars goes before this line (the first function body's
			    * header), 0: nowhere */
	bool oom;	   /* what was found is not all there is: use none of it */
};

/* The module's variables and the functions that use an opaque one, each kernel's included;
 * v->oom if that could not be known whole. */
void mv_scan(struct modvars *v, const char *ptx, size_t len);
/* The opaque reference kernel k (in the order of the module) uses, itself or through a
 * function it calls; NULL for none. */
const char *mv_kernel_var(const struct modvars *v, size_t k);
/*
 * One line of a function body (its code, comments blanked): 0 if it stays as it is; 1 if
 * it reads a variable: *pre gets its label and the opening of a block with the addresses
 * loaded, *out the instruction, and a "}" must follow it; 2 if only its .const state space
 * went (*out the line); -1 if it cannot be read (an instruction over several lines:
 * continued, the line goes on one the line before began; or more than 8 references).
 * used[i] is set for each slot read.
 */
int mv_line(const struct modvars *v, const char *code, bool continued, struct strbuf *pre,
	    struct strbuf *out, unsigned char *used);
/* The declaration of __gs_vars (nothing for a module with no variable). */
void mv_table(const struct modvars *v, struct strbuf *o);
void mv_free(struct modvars *v);

#endif
