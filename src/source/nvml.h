/* SPDX-License-Identifier: MIT */
/* NVML as a source of a session: each GPU's device metrics as a record, once a second (the
 * fast fields only: about 0.3 ms a sample on an H200). */
#ifndef GS_SOURCE_NVML_H
#define GS_SOURCE_NVML_H

#include "core/session.h"

/* A source of s if NVML loads; else nothing (a debug message says why). */
void nvml_source__open(struct session *s);

#endif
