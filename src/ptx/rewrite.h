/* SPDX-License-Identifier: MIT */
/*
 * Probe injection into PTX. A module's kernels get a call of a probe function
 *   - right after their opening brace (entry);
 *   - just before each of their `ret` and `exit` instructions (exit; a predicated one keeps
 *     its predicate on the call, a label on its line stays in front of the call, so that
 *     branches to it run the probe);
 *   - just before each global memory access (load, store), with its address and size:
 *     ld/st/atom/red of the .global state space, and generic ld/st/atom/red whose address
 *     turns out to be global (isspacep.global at run time). Accesses in device functions
 *     the kernel calls (.func) and cp.async copies are not seen.
 * The probe functions' PTX (from bpf_to_ptx) goes in before the module's first function.
 * Each call is its own block, with its own registers and parameters, so nothing in the
 * kernel is renamed or shadowed.
 *
 * The probe is given a context (struct gs_probe_ctx, gpuscope/probe.h) in the kernel's
 * local memory: the kernel's id, the point, the access, and the launch. The launch's part
 * comes from a parameter the rewriter appends to each instrumented kernel (opts.launch_param,
 * `.param .align 8 .b8 __gs_launch[16]`: sequence number and launch time), which the
 * launcher must then pass: ptx_kernel_info says where it goes.
 *
 * The instrumented module is loaded apart from the original, so its module-scope variables
 * (__device__, __constant__, __managed__: .global and .const) would be copies, not the ones
 * the program fills and its other kernels use: every function body reads them through
 * __gs_vars instead, a table of their addresses (ptx_rewrite_stats.var_names, one slot a
 * variable) that the loader fills with the program's (ptx/rewrite_int.h). Its initializer
 * holds the module's own, right for a module loaded in place of the original. A kernel that
 * uses a texture, sampler or surface reference is left as it was
 * (ptx_kernel_info.variable names it).
 *
 * PTX the rewriter does not understand (a kernel whose braces do not match, a module
 * without .version/.target, a parameter list it cannot lay out) is refused with a message;
 * the caller runs the original code.
 */
#ifndef GS_PTX_REWRITE_H
#define GS_PTX_REWRITE_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf;

enum ptx_point {
	PTX_ENTRY = 1,
	PTX_EXIT = 2,
	PTX_LOAD = 3,
	PTX_STORE = 4, /* (atomics and reductions too) */
	PTX_MEM = 5,   /* a probe of both loads and stores; its calls say which */
};

struct ptx_probe {
	const char *kernel; /* mangled name, or "*" for every kernel */
	enum ptx_point point;
	const char *func; /* the probe function's name */
};

struct ptx_rewrite_opts {
	unsigned int kernel_base; /* kernel ids: kernel_base + the kernel's index in the module */
	bool launch_param;	  /* append __gs_launch to instrumented kernels */
	const char *only;	  /* if set: only this kernel; the others are left out of the
				   * output (ids and ptx_kernel_info kept) */
};

/* A kernel of the module, as the rewriter left it. */
struct ptx_kernel_info {
	char *name;
	unsigned int id;
	bool instrumented;
	unsigned int nparams;	 /* its own parameters (before __gs_launch) */
	unsigned int launch_off; /* __gs_launch's offset in the parameter buffer */
	char *variable;		 /* an opaque reference it uses (left alone: above), or NULL */
};

struct ptx_rewrite_stats {
	unsigned int kernels;	   /* in the module */
	unsigned int instrumented; /* kernels that got at least one call */
	unsigned int variables;	   /* kernels a probe wanted, left alone for a reference */
	unsigned int entry_calls, exit_calls, load_calls, store_calls;
	struct ptx_kernel_info *k; /* kernels entries, in the module's order */
	unsigned int nvars;	   /* the module's variables: __gs_vars's slots */
	char **var_names;	   /* each slot's variable */
	unsigned char *var_used;   /* the slots the output reads (1) */
};

/*
 * Rewrite the PTX module `ptx` (len bytes) into out. `funcs` is the probe functions' PTX.
 * 0, or -1 with err set (out as it was). st->k is allocated on success: free with
 * ptx_rewrite_stats_free.
 */
int ptx_rewrite(const char *ptx, size_t len, const char *funcs, const struct ptx_probe *probes,
		size_t nprobes, const struct ptx_rewrite_opts *opts, struct strbuf *out,
		struct ptx_rewrite_stats *st, char *err, size_t errlen);
void ptx_rewrite_stats_free(struct ptx_rewrite_stats *st);
/* A kernel's name from an `.entry NAME(` line, or the section name of a probe
 * ("gpu/entry/NAME", "gpu/exit/NAME", "gpu/load/NAME", "gpu/store/NAME", "gpu/mem/NAME",
 * bpftime's "kprobe/NAME" and "kretprobe/NAME"): 0 and the point and kernel, -1 if it
 * names no probe point. */
int ptx_probe_section(const char *section, enum ptx_point *point, const char **kernel);

#endif
