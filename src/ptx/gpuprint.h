/* SPDX-License-Identifier: MIT */
/*
 * Printing from the GPU (helpers 6 and 501, translate.h): a printing ring's record turned
 * into its line, as bpf_trace_printk formats on the host. The record comes from the traced
 * program's memory: any bytes are taken, and what is not a known conversion is copied.
 */
#ifndef GS_PTX_GPUPRINT_H
#define GS_PTX_GPUPRINT_H

#include <stddef.h>

/* The line of record rec (len bytes) into out (n bytes, NUL-terminated; a trailing newline
 * dropped): 0, or -1 if rec is no printing record. Conversions: %d %i %u %x %X %o %c %p
 * %%, with flags (-, 0, +, space, #), a width, l/ll/h/hh/z; %s (a GPU address: not read)
 * prints "(string)". At most three arguments, as bpf_trace_printk. */
int gpu_print_format(const unsigned char *rec, size_t len, char *out, size_t n);

#endif
