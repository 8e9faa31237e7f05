/* SPDX-License-Identifier: MIT */
/*
 * What a device-side probe is given (its r1, `void *ctx`), and the helpers it may call:
 * include this from a probe's .bpf.c (clang -target bpf). Section names say where the
 * probe goes: gpu/entry/KERNEL, gpu/exit/KERNEL, gpu/load/KERNEL, gpu/store/KERNEL,
 * gpu/mem/KERNEL (loads and stores), KERNEL the mangled name or * for every kernel.
 */
#ifndef GPUSCOPE_PROBE_H
#define GPUSCOPE_PROBE_H

enum gs_probe_point {
	GS_POINT_ENTRY = 1,
	GS_POINT_EXIT = 2,
	GS_POINT_LOAD = 3,
	GS_POINT_STORE = 4, /* atomics and reductions too */
};

struct gs_probe_ctx {
	unsigned int kernel;	 /* gpuscope's id of the kernel: the output names it */
	unsigned int point;	 /* enum gs_probe_point */
	unsigned long long addr; /* load/store: the (generic) address accessed */
	unsigned int size;	 /* load/store: its bytes */
	unsigned int pad;
	unsigned long long launch;    /* the launch's sequence number in the process, from 1 */
	unsigned long long launch_ns; /* when the launch was called, on the GPU's global
				       * timer (ns); 0 if not known */
};

#define GS_PROBE_CTX_SIZE 40

#endif
