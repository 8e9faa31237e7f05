/* SPDX-License-Identifier: MIT */
/* Names of code addresses in live processes (elfutils' libdwfl; see symbolize.c). */
#ifndef GS_CORE_SYMBOLIZE_H
#define GS_CORE_SYMBOLIZE_H

#include <stddef.h>
#include <linux/types.h>

struct symbolizer;

struct symbolizer *symbolizer__new(void);
void symbolizer__free(struct symbolizer *s);
/* The function (as named in the file, mangled) that contains the return address `addr`,
 * else "module+0xoffset": 0, or -1 if the process or its module cannot be read. */
int symbolizer__name(struct symbolizer *s, __u32 pid, __u64 addr, char *buf, size_t n);
/* The process exited or exec'ed: its modules are not valid any more. */
void symbolizer__forget(struct symbolizer *s, __u32 pid);

#endif
