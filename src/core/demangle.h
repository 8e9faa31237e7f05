/* SPDX-License-Identifier: MIT */
#ifndef GS_CORE_DEMANGLE_H
#define GS_CORE_DEMANGLE_H

#include <stddef.h>

/* Itanium C++ demangling (the C++ runtime's); a malloc'd copy of `name` if not mangled. */
char *demangle(const char *name);
/*
 * A display form that fits `width` columns: the demangled name with template arguments
 * and parameter lists folded to "<...>" and "(...)" from the innermost out until it fits,
 * then cut with "...". Returns buf.
 */
char *shorten_name(const char *demangled, size_t width, char *buf, size_t n);

#endif
