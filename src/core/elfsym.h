/* SPDX-License-Identifier: MIT */
/*
 * Finding the traced functions in an ELF file: which entries of the API table
 * (gpuscope/api.h) the file defines, at which file offsets (what uprobes take).
 * Undefined (imported) symbols are skipped, addresses are converted through the PT_LOAD
 * segments, and two names at one address (aliases) are attached once, under the first
 * name of the table.
 */
#ifndef GS_CORE_ELFSYM_H
#define GS_CORE_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include "gpuscope/api.h"

struct elf_apis {
	__u64 offset[GS_API_MAX]; /* file offset of the function, 0 if absent */
	int nfound;
	int naliases; /* table names skipped because an earlier one has the same address */
	char soname[256];
};

/*
 * use_symtab: also search .symtab (local symbols of an executable that links the CUDA
 * runtime statically). Returns 0, or -1 with err set.
 */
int elf_find_apis(const char *path, bool use_symtab, struct elf_apis *out, char *err,
		  size_t errlen);
int elf_find_apis_mem(const void *buf, size_t len, bool use_symtab, struct elf_apis *out, char *err,
		      size_t errlen);

/* A symbol's value (its address in the file's own terms) and size, from the dynamic symbol
 * table or the full one; *pie: addresses are relative to where the file is loaded. 0 or
 * -1 (not there, or not an ELF file). */
int elf_find_symbol(const char *path, const char *name, __u64 *value, __u64 *size, bool *pie);
/*
 * Where to put a uprobe on a function whose code starts with `code` (n bytes): after a
 * leading endbr64 (4), where the instruction after it is one the kernel emulates (a push
 * of a register, a nop, a relative jmp or call), else at the function (0). On x86-64 a
 * uprobe on any other instruction is stepped out of line, a second trap: measured on
 * Linux 6.18 in a Firecracker guest, 9.7 us a hit against 0.7 us (bench/uprobe_sites.sh).
 * The arguments and the return address are where they were at the function's entry.
 */
unsigned int elf_uprobe_skip(const unsigned char *code, size_t n);
/* The same for a file offset of a function in the file at path: the offset to probe. */
__u64 elf_uprobe_site(const char *path, __u64 off);
/* DT_RPATH and DT_RUNPATH of an ELF file ("" if absent); 0 or -1. */
int elf_search_paths(const char *path, char *rpath, size_t rlen, char *runpath, size_t runlen);

#endif
