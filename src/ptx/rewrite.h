/* SPDX-License-Identifier: MIT */
/*
 * Probe injection into PTX: a module's kernels get a call of a probe function right after
 * their opening brace (entry) and just before each of their `ret` and `exit` instructions
 * (exit; a predicated one keeps its predicate on the call, a label on its line stays in
 * front of the call, so that branches to it run the probe). The probe functions' PTX
 * (from bpf_to_ptx) goes in before the module's first function. Each call is its own
 * block, with its own parameters, so nothing in the kernel is renamed or shadowed.
 *
 * The probe is given a context: its kernel's index in the module's kernel list
 * (a small integer, for now) -- what the probe may read of the launch comes from the GPU
 * helpers.
 *
 * PTX the rewriter does not understand (a kernel whose braces do not match, a module
 * without .version/.target) is refused with a message; the caller runs the original code.
 */
#ifndef GS_PTX_REWRITE_H
#define GS_PTX_REWRITE_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf;

enum ptx_point {
	PTX_ENTRY = 1,
	PTX_EXIT = 2,
};

struct ptx_probe {
	const char *kernel; /* mangled name, or "*" for every kernel */
	enum ptx_point point;
	const char *func; /* the probe function's name */
};

struct ptx_rewrite_stats {
	unsigned int kernels;	   /* in the module */
	unsigned int instrumented; /* kernels that got at least one call */
	unsigned int entry_calls, exit_calls;
};

/*
 * Rewrite the PTX module `ptx` (len bytes) into out. `funcs` is the probe functions' PTX.
 * 0, or -1 with err set (out as it was).
 */
int ptx_rewrite(const char *ptx, size_t len, const char *funcs, const struct ptx_probe *probes,
		size_t nprobes, struct strbuf *out, struct ptx_rewrite_stats *st, char *err,
		size_t errlen);
/* A kernel's name from an `.entry NAME(` line, or the section name of a probe
 * ("gpu/entry/NAME", "gpu/exit/NAME", bpftime's "kprobe/NAME" and "kretprobe/NAME"):
 * 0 and the point and kernel, -1 if it names no probe point. */
int ptx_probe_section(const char *section, enum ptx_point *point, const char **kernel);

#endif
