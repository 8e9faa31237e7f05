/* SPDX-License-Identifier: MIT */
#ifndef GS_CORE_EVENT_H
#define GS_CORE_EVENT_H

#include <stddef.h>
#include "gpuscope/event.h"

/*
 * Check that `len` bytes at `buf` are one well-formed record: header, size, type, the
 * fixed size of its type (or the bounds of a variable one), and enum fields in range, so
 * that nothing downstream indexes a table with a value from outside. Returns 0, or -1 with
 * *why set to a static description.
 */
int gs_event_check(const void *buf, size_t len, const char **why);

#endif
