/* SPDX-License-Identifier: MIT */
/*
 * Names of kernels whose lookups gpuscope did not see: those looked up before it probed
 * their process (attach, the exporter's running processes), and, on a driver where this
 * is known to hold, the functions cuKernelGetFunction gives (below). The driver keeps a
 * kernel's name in the object its handle points to. The kernel plane reads it there, in the
 * program's thread while the object is certainly alive (cuda.bpf.c's driver_names): at a
 * handle's first launch returned on each CPU, before the launch's record, and at a lookup's
 * return, after the lookup's. This filter decides what to keep of those name records of no
 * lookup (GS_API_NONE).
 *
 * Where the driver keeps it is not documented: on driver 580 a CUfunction's and a CUkernel's
 * object hold the name's address 8 bytes in (bench/results/attach-names-2026-11-30.md).
 * - A name is kept only for a process whose names are read, once a handle, and only if it
 *   is a symbol's (letters, digits, '_', '$', '.'; not a digit first); otherwise the
 *   kernel stays unnamed.
 * - A handle named by a lookup, or aliased to a named one (a kernel's function, a runtime
 *   kernel's stub), is not named from its object. The object's name read at a lookup's
 *   return is checked against the lookup's: one that differs (or is no symbol's) stops the
 *   reading in that process (counted: late_names__counts).
 * - After a module or library is unloaded, a process's handles are named again at their
 *   next launches: the driver gives the handles of unloaded functions to new ones, and the
 *   plane's per-CPU table of launched handles starts again then.
 *
 * On a driver where the name was found there (driver 580), cuKernelGetFunction is not
 * probed at all: cuDNN calls it before each launch of its kernels (131 uprobe hits a
 * ResNet-50 step, each ~0.9 us on the GPU guests), and the function it gives holds its name
 * as the kernel does. Then every process's names are read. GPUSCOPE_DRIVER_NAMES=all: so on
 * any driver; =late: cuKernelGetFunction probed, names read only for processes probed late.
 * GPUSCOPE_NO_DRIVER_NAMES=1: none read (cuKernelGetFunction probed).
 */
#ifndef GS_SOURCE_KERNEL_NAMES_H
#define GS_SOURCE_KERNEL_NAMES_H

#include <stdbool.h>
#include <linux/types.h>

struct stream;
struct late_names;

struct late_names_counts {
	__u64 read;	  /* names read from the driver's objects */
	__u64 unreadable; /* handles whose object held no symbol's name */
	__u64 agreed;	  /* names looked up later, the driver's object saying the same */
	__u64 differed;	  /* ... saying another (the reading then stopped in that process) */
	__u64 full;	  /* handles past the table's bound: not read */
};

/* Whether names are read from the driver (GPUSCOPE_NO_DRIVER_NAMES=1: not). */
bool late_names__enabled(void);
/* Filters the stream's launch and name records; not enabled: NULL. */
struct late_names *late_names__new(struct stream *s);
/* pid was probed late: its unnamed handles are read from now on. */
void late_names__process(struct late_names *n, __u32 pid);
/* Whether cuKernelGetFunction goes unprobed in the driver at libcuda (a path), its
 * functions named from the driver's objects: then every process's unnamed handles are read
 * from now on. */
bool late_names__replaces_kfunc(struct late_names *n, const char *libcuda);
/* Whether every process's are (late_names__replaces_kfunc said so for some driver). */
bool late_names__all(const struct late_names *n);
void late_names__counts(const struct late_names *n, struct late_names_counts *c);
void late_names__free(struct late_names *n);

#endif
