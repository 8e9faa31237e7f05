// SPDX-License-Identifier: MIT
/*
 * The call frame information's rows (DWARF 4, 6.4, in .eh_frame's form: the CIE's
 * augmentation, pointer encodings): what the in-process plane's unwinder keeps of a frame
 * (src/inject/unwind.c). Reads stay within the bounds given (the fuzz target's input;
 * the unwinder gives a loaded library's FDE as libgcc found it, unbounded).
 */
#include <stdint.h>
#include <string.h>

#include "core/cfi.h"

#define REMEMBER 8 /* DW_CFA_remember_state's depth */
#define REG_RBP	 6
#define REG_RSP	 7
#define REG_RA	 16

/* A register's rule: R_AT_RBP, saved at rbp plus an offset (an expression of one
 * DW_OP_breg6: a realigned frame's rbp). */
enum {
	R_SAME,
	R_UNDEF,
	R_OFFSET,
	R_AT_RBP,
	R_OTHER
};

struct cur {
	const __u8 *p, *end;
	bool bad;
};

static __u64 uleb(struct cur *c)
{
	__u64 v = 0;

	for (unsigned int s = 0; c->p < c->end; s += 7) {
		__u8 b = *c->p++;

		if (s < 64)
			v |= (__u64)(b & 0x7f) << s;
		if (!(b & 0x80))
			return v;
	}
	c->bad = true;
	return 0;
}

static __s64 sleb(struct cur *c)
{
	__u64 v = 0;
	unsigned int s = 0;
	__u8 b = 0x80;

	while (c->p < c->end && (b & 0x80)) {
		b = *c->p++;
		if (s < 64)
			v |= (__u64)(b & 0x7f) << s;
		s += 7;
	}
	if (b & 0x80)
		c->bad = true;
	else if (s < 64 && (b & 0x40))
		v |= ~0ULL << s;
	return (__s64)v;
}

/* v times a factor, wrapping (what is kept is checked for its range after). */
static __s64 times(__u64 v, __s64 f)
{
	return (__s64)(v * (__u64)f);
}

static __u64 fixed(struct cur *c, unsigned int n)
{
	__u64 v = 0;

	if ((size_t)(c->end - c->p) < n) {
		c->bad = true;
		return 0;
	}
	memcpy(&v, c->p, n); /* (little-endian) */
	c->p += n;
	return v;
}

/* Skips an encoded pointer (DW_EH_PE_*'s format, the low 4 bits). */
static void skip_ptr(struct cur *c, __u8 enc)
{
	static const __u8 size[16] = { 8, 0, 2, 4, 8, 0, 0, 0, 8, 0, 2, 4, 8 };

	if (enc == 0xff)
		return;
	if ((enc & 0x0f) == 0x01 || (enc & 0x0f) == 0x09)
		(void)uleb(c);
	else if (size[enc & 0x0f] && (enc & 0x70) != 0x50)
		(void)fixed(c, size[enc & 0x0f]);
	else
		c->bad = true;
}

/* An expression of DW_OP_breg6 or 7 (rbp's, rsp's) with an offset, then DW_OP_deref if
 * deref: its register, and the offset in *off; -1 any other. */
static int breg(const __u8 *p, __u64 n, bool deref, __s64 *off)
{
	struct cur c = { .p = p + 1, .end = p + n };

	if (!n || (p[0] != 0x76 && p[0] != 0x77))
		return -1;
	*off = sleb(&c);
	if (c.bad || c.end - c.p != (deref ? 1 : 0) || (deref && *c.p != 0x06))
		return -1;
	return p[0] - 0x70;
}

struct state {
	__u64 cfa_reg;
	__s64 cfa_off;
	bool cfa_expr;	/* by an expression not kept */
	bool cfa_deref; /* *(cfa_reg + cfa_off) */
	int how[2];	/* rbp's, the return address's */
	__s64 off[2];
};

struct cie {
	__u64 code_align;
	__s64 data_align;
	__u8 fde_enc;
	bool z;
	const __u8 *insns, *end;
};

static bool read_cie(const __u8 *p, uintptr_t lo, uintptr_t hi, struct cie *ci)
{
	uintptr_t at = (uintptr_t)p;
	__u32 len, id;
	struct cur c;
	const char *aug;
	__u8 version;

	if (at < lo || at > hi || hi - at < 9)
		return false;
	memcpy(&len, p, 4);
	memcpy(&id, p + 4, 4);
	if (len < 5 || len == 0xffffffffu || id || len > hi - at - 4)
		return false;
	c = (struct cur){ .p = p + 8, .end = p + 4 + len };
	version = (__u8)fixed(&c, 1);
	aug = (const char *)c.p;
	while (c.p < c.end && *c.p)
		c.p++;
	if (c.p == c.end || (version != 1 && version != 3) || (aug[0] && aug[0] != 'z'))
		return false;
	c.p++;
	ci->code_align = uleb(&c);
	ci->data_align = sleb(&c);
	if ((version == 1 ? fixed(&c, 1) : uleb(&c)) != REG_RA)
		return false;
	ci->fde_enc = 0; /* (DW_EH_PE_absptr) */
	ci->z = aug[0] == 'z';
	if (ci->z) {
		__u64 n = uleb(&c);
		const __u8 *data_end;

		if (c.bad || n > (__u64)(c.end - c.p))
			return false;
		data_end = c.p + n;
		for (const char *a = aug + 1; *a; a++) {
			if (*a == 'R') {
				ci->fde_enc = (__u8)fixed(&c, 1);
			} else if (*a == 'L') {
				(void)fixed(&c, 1);
			} else if (*a == 'P') {
				skip_ptr(&c, (__u8)fixed(&c, 1));
			} else if (*a != 'B') {
				return false; /* ('S': a signal's frame) */
			}
		}
		c.p = data_end;
	}
	ci->insns = c.p;
	ci->end = c.end;
	return !c.bad;
}

/* Runs a CFA program from loc while loc < target (rows before target apply); s is the state
 * so far, init the CIE's for DW_CFA_restore. False: an instruction not known here. */
static bool run(const struct cie *ci, const __u8 *p, const __u8 *end, __u64 loc, __u64 target,
		struct state *s, const struct state *init)
{
	struct state saved[REMEMBER];
	int depth = 0;
	struct cur c = { .p = p, .end = end };

	while (c.p < c.end && !c.bad) {
		__u8 op = *c.p++, low = op & 0x3f;
		__u64 reg = 0, delta = 0;
		__s64 off = 0;
		int how = -1, k;

		switch (op >> 6) {
		case 1:
			delta = low;
			break;
		case 2:
			reg = low;
			off = times(uleb(&c), ci->data_align);
			how = R_OFFSET;
			break;
		case 3:
			reg = low;
			how = 99; /* restore */
			break;
		default:
			switch (op) {
			case 0x00: /* nop */
				break;
			case 0x02:
				delta = fixed(&c, 1);
				break;
			case 0x03:
				delta = fixed(&c, 2);
				break;
			case 0x04:
				delta = fixed(&c, 4);
				break;
			case 0x05: /* offset_extended */
				reg = uleb(&c);
				off = times(uleb(&c), ci->data_align);
				how = R_OFFSET;
				break;
			case 0x11: /* offset_extended_sf */
				reg = uleb(&c);
				off = times((__u64)sleb(&c), ci->data_align);
				how = R_OFFSET;
				break;
			case 0x2f: /* GNU_negative_offset_extended */
				reg = uleb(&c);
				off = times(0 - uleb(&c), ci->data_align);
				how = R_OFFSET;
				break;
			case 0x06: /* restore_extended */
				reg = uleb(&c);
				how = 99;
				break;
			case 0x07: /* undefined */
				reg = uleb(&c);
				how = R_UNDEF;
				break;
			case 0x08: /* same_value */
				reg = uleb(&c);
				how = R_SAME;
				break;
			case 0x09: /* register */
				reg = uleb(&c);
				(void)uleb(&c);
				how = R_OTHER;
				break;
			case 0x14: /* val_offset */
			case 0x15: /* val_offset_sf */
				reg = uleb(&c);
				(void)(op == 0x14 ? (__s64)uleb(&c) : sleb(&c));
				how = R_OTHER;
				break;
			case 0x10: /* expression */
			case 0x16: /* val_expression */
				reg = uleb(&c);
				delta = uleb(&c);
				if (c.bad || delta > (__u64)(c.end - c.p))
					return false;
				how = op == 0x10 && breg(c.p, delta, false, &off) == REG_RBP
					      ? R_AT_RBP
					      : R_OTHER;
				c.p += delta;
				delta = 0;
				break;
			case 0x0a: /* remember_state */
				if (depth == REMEMBER)
					return false;
				saved[depth++] = *s;
				break;
			case 0x0b: /* restore_state */
				if (!depth)
					return false;
				*s = saved[--depth];
				break;
			case 0x0c: /* def_cfa */
				s->cfa_reg = uleb(&c);
				s->cfa_off = (__s64)uleb(&c);
				s->cfa_expr = s->cfa_deref = false;
				break;
			case 0x12: /* def_cfa_sf */
				s->cfa_reg = uleb(&c);
				s->cfa_off = times((__u64)sleb(&c), ci->data_align);
				s->cfa_expr = s->cfa_deref = false;
				break;
			case 0x0d: /* def_cfa_register */
				s->cfa_reg = uleb(&c);
				s->cfa_expr = s->cfa_deref = false;
				break;
			case 0x0e: /* def_cfa_offset */
				s->cfa_off = (__s64)uleb(&c);
				s->cfa_expr |= s->cfa_deref; /* (not one kept) */
				break;
			case 0x13: /* def_cfa_offset_sf */
				s->cfa_off = times((__u64)sleb(&c), ci->data_align);
				s->cfa_expr |= s->cfa_deref;
				break;
			case 0x0f: /* def_cfa_expression: a realigned frame's, *(rbp + k), kept */
				delta = uleb(&c);
				if (c.bad || delta > (__u64)(c.end - c.p))
					return false;
				k = breg(c.p, delta, true, &s->cfa_off);
				s->cfa_deref = k >= 0;
				s->cfa_expr = k < 0;
				s->cfa_reg = k >= 0 ? (__u64)k : s->cfa_reg;
				c.p += delta;
				delta = 0;
				break;
			case 0x2e: /* GNU_args_size */
				(void)uleb(&c);
				break;
			default: /* (set_loc, and what DWARF 4 does not have) */
				return false;
			}
		}
		if (delta) {
			loc += delta * ci->code_align;
			if (loc >= target)
				break;
		}
		if (how >= 0) {
			int k = reg == REG_RBP ? 0 : reg == REG_RA ? 1 : -1;

			if (reg == REG_RSP)
				return false;
			if (k >= 0 && how == 99) {
				s->how[k] = init ? init->how[k] : R_SAME;
				s->off[k] = init ? init->off[k] : 0;
			} else if (k >= 0) {
				s->how[k] = how;
				s->off[k] = off;
			}
		}
	}
	return !c.bad;
}

int cfi_rule(const __u8 *fde, uintptr_t lo, uintptr_t hi, __u64 func, __u64 target,
	     struct cfi_rule *r)
{
	struct state init = { .cfa_reg = REG_RSP, .how = { R_SAME, R_UNDEF } }, s;
	uintptr_t at = (uintptr_t)fde;
	struct cie ci;
	struct cur c;
	__u32 len, cie_off;

	if (at < lo || at > hi || hi - at < 8)
		return -1;
	memcpy(&len, fde, 4);
	memcpy(&cie_off, fde + 4, 4);
	if (len < 4 || len == 0xffffffffu || len > hi - at - 4 || !cie_off ||
	    cie_off > at - lo + 4 || !read_cie(fde + 4 - cie_off, lo, hi, &ci))
		return -1;
	c = (struct cur){ .p = fde + 8, .end = fde + 4 + len };
	skip_ptr(&c, ci.fde_enc);	 /* the function's start (func) */
	skip_ptr(&c, ci.fde_enc & 0x0f); /* its length */
	if (ci.z) {
		__u64 n = uleb(&c);

		if (c.bad || n > (__u64)(c.end - c.p))
			return -1;
		c.p += n;
	}
	if (c.bad || !run(&ci, ci.insns, ci.end, func, ~0ULL, &init, NULL))
		return -1;
	s = init;
	if (!run(&ci, c.p, c.end, func, target, &s, &init))
		return -1;
	if (s.cfa_expr || (s.cfa_reg != REG_RSP && s.cfa_reg != REG_RBP) || s.cfa_off < INT32_MIN ||
	    s.cfa_off > INT32_MAX || s.how[0] == R_OTHER || s.how[1] == R_OTHER ||
	    s.how[1] == R_AT_RBP ||
	    (s.how[1] == R_OFFSET && (s.off[1] < -4096 || s.off[1] > 4096)) ||
	    (s.how[0] >= R_OFFSET && (s.off[0] < -4096 || s.off[0] > 4096)))
		return -1;
	*r = (struct cfi_rule){ .cfa_off = (__s32)s.cfa_off,
				.ra_off = (__s16)s.off[1],
				.rbp_off = (__s16)s.off[0],
				.cfa_rbp = s.cfa_reg == REG_RBP,
				.cfa_deref = s.cfa_deref,
				.rbp_saved = s.how[0] == R_OFFSET   ? CFI_AT_CFA
					     : s.how[0] == R_AT_RBP ? CFI_AT_RBP
								    : CFI_SAME,
				.end = s.how[1] != R_OFFSET };
	return 0;
}
