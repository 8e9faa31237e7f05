/* SPDX-License-Identifier: MIT */
/*
 * Names of kernels looked up before gpuscope probed their process (attach, the exporter's
 * running processes): the kernel plane sees launches of handles it never saw named. The
 * driver keeps a kernel's name in the object its handle points to; for such a handle, at its
 * first launch, the name is read from the process there and put in the stream as a name
 * record of gpuscope's own, before the launch.
 *
 * Where the driver keeps it is not documented: on driver 580 a CUfunction's and a CUkernel's
 * object hold the name's address 8 bytes in (bench/results/attach-names-2026-11-30.md).
 * What is read there is taken only if it is a symbol's name (letters, digits, '_', '$', '.';
 * not a digit first); otherwise the kernel stays unnamed. A handle aliased since the probes
 * to a named one (a kernel's function, a runtime kernel's stub) is not read. Each name looked
 * up after the probes is checked against what the driver's object says then; one that
 * differs stops the reading in that process (counted: late_names__counts).
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
void late_names__counts(const struct late_names *n, struct late_names_counts *c);
void late_names__free(struct late_names *n);

#endif
