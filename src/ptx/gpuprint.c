// SPDX-License-Identifier: MIT
/* Printing from the GPU: a record's line (see gpuprint.h). */
#include <stdbool.h>
#include <string.h>

#include "ptx/gpuprint.h"
#include "ptx/translate.h"

struct out {
	char *p;
	size_t n, at;
};

static void put(struct out *o, char c)
{
	if (o->at + 1 < o->n)
		o->p[o->at++] = c;
}

static void puts_n(struct out *o, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put(o, s[i]);
}

/* One integer conversion: v (already cut to its length), as conv says, with the flags. */
static void integer(struct out *o, unsigned long long v, bool neg, char conv, bool left, bool zero,
		    char sign, bool alt, unsigned int width)
{
	char digits[80];
	const char *set = conv == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
	unsigned int base = conv == 'o' ? 8 : (conv == 'x' || conv == 'X' || conv == 'p') ? 16 : 10;
	size_t nd = 0, pre = 0, total;
	char prefix[3];

	do {
		digits[nd++] = set[v % base];
		v /= base;
	} while (v && nd < sizeof(digits));
	if (neg)
		prefix[pre++] = '-';
	else if (sign && base == 10)
		prefix[pre++] = sign;
	if ((alt && base == 16) || conv == 'p') {
		prefix[pre++] = '0';
		prefix[pre++] = conv == 'X' ? 'X' : 'x';
	}
	width = width > 64 ? 64 : width;
	total = nd + pre;
	if (!left && !zero)
		for (size_t w = total; w < width; w++)
			put(o, ' ');
	puts_n(o, prefix, pre);
	if (!left && zero)
		for (size_t w = total; w < width; w++)
			put(o, '0');
	while (nd)
		put(o, digits[--nd]);
	if (left) /* (the padding after) */
		for (size_t w = total; w < width; w++)
			put(o, ' ');
}

int gpu_print_format(const unsigned char *rec, size_t len, char *out, size_t n)
{
	struct out o = { out, n, 0 };
	unsigned int id, tlen, argi = 0;
	unsigned long long args[3];
	const char *f;

	if (!n)
		return -1;
	out[0] = 0;
	if (len < GS_PRINT_HDR)
		return -1;
	memcpy(&id, rec, 4);
	memcpy(&tlen, rec + 4, 4);
	memcpy(args, rec + 8, sizeof(args));
	if ((id != GS_BPF_TRACE_PRINTK && id != GS_BPF_PUTS) || tlen > len - GS_PRINT_HDR)
		return -1;
	f = (const char *)rec + GS_PRINT_HDR;
	if (tlen && f[tlen - 1] == '\n')
		tlen--; /* (one line each) */
	for (size_t i = 0; i < tlen; i++) {
		bool left = false, zero = false, alt = false;
		char sign = 0, conv;
		unsigned int width = 0, lng = 0, shrt = 0;
		size_t start = i;
		unsigned long long v;

		if (f[i] != '%' || id == GS_BPF_PUTS) {
			put(&o, f[i]);
			continue;
		}
		for (i++; i < tlen && strchr("-0+ #", f[i]); i++) {
			left |= f[i] == '-';
			zero |= f[i] == '0';
			alt |= f[i] == '#';
			if (f[i] == '+' || (f[i] == ' ' && !sign))
				sign = f[i];
		}
		for (; i < tlen && f[i] >= '0' && f[i] <= '9'; i++)
			width = width > 1000 ? width : width * 10 + (unsigned int)(f[i] - '0');
		for (; i < tlen && (f[i] == 'l' || f[i] == 'h' || f[i] == 'z'); i++) {
			lng += f[i] == 'l' || f[i] == 'z';
			shrt += f[i] == 'h';
		}
		conv = i < tlen ? f[i] : 0;
		if (conv == '%' && i == start + 1) {
			put(&o, '%');
			continue;
		}
		if (!conv || !strchr("diuxXocps", conv) || argi == 3) {
			puts_n(&o, f + start, (i < tlen ? i + 1 : tlen) - start);
			continue;
		}
		if (conv == 's') {
			argi++;
			puts_n(&o, "(string)", 8);
			continue;
		}
		v = args[argi++];
		if (conv == 'c') {
			put(&o, (char)v);
			continue;
		}
		if (conv != 'p' && !lng)
			v = shrt >= 2 ? (unsigned char)v
			    : shrt    ? (unsigned short)v
				      : (unsigned int)v;
		if (conv == 'd' || conv == 'i') {
			long long sv = lng || conv == 'p' ? (long long)v
				       : shrt >= 2	  ? (signed char)v
				       : shrt		  ? (short)v
							  : (int)v;

			integer(&o, sv < 0 ? 0 - (unsigned long long)sv : (unsigned long long)sv,
				sv < 0, conv, left, zero && !left, sign, alt, width);
		} else {
			integer(&o, v, false, conv, left, zero && !left, 0, alt, width);
		}
	}
	out[o.at] = 0;
	return 0;
}
