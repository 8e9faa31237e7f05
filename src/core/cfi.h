/* SPDX-License-Identifier: MIT */
/* The call frame information's rule of a frame, as the in-process plane's unwinder keeps it
 * (core/cfi.c, src/inject/unwind.c). */
#ifndef GS_CORE_CFI_H
#define GS_CORE_CFI_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>

/* Where a frame's caller's rbp is: the same, saved at CFA + rbp_off, or at rbp + rbp_off. */
enum {
	CFI_SAME,
	CFI_AT_CFA,
	CFI_AT_RBP
};

/* x86-64's usual rules: the CFA at rsp or rbp plus an offset, or read from there (a frame
 * realigned by GCC's DRAP: *(rbp - 8)); the return address saved at an offset from it (or
 * none: the outermost frame); rbp as rbp_saved says. */
struct cfi_rule {
	__s32 cfa_off;
	__s16 ra_off, rbp_off;
	__u8 cfa_rbp;	/* the CFA is rbp + cfa_off (else rsp + cfa_off) */
	__u8 cfa_deref; /* the CFA is read from there */
	__u8 rbp_saved; /* CFI_* */
	__u8 end;	/* the return address undefined: the outermost frame */
};

/* The rule in the row before target (a return address: its call's row) of the function
 * starting at func, from its FDE at fde; every byte read within [lo, hi). 0 done; -1 a rule
 * not of those forms (another expression, a CFA in another register, a signal's frame), or
 * what is not call frame information. */
int cfi_rule(const __u8 *fde, uintptr_t lo, uintptr_t hi, __u64 func, __u64 target,
	     struct cfi_rule *r);

#endif
