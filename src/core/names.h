/* SPDX-License-Identifier: MIT */
/* Names for the values in event records: APIs, results, directions, operations. */
#ifndef GS_CORE_NAMES_H
#define GS_CORE_NAMES_H

#include <stdbool.h>
#include "gpuscope/api.h"

extern const struct gs_api_desc gs_api_descs[GS_API_MAX];

const char *api_name(unsigned int api);		      /* "cuMemAlloc_v2", "?" if unknown */
int api_lookup(const char *symbol);		      /* GS_API_* or -1 */
const struct gs_api_desc *api_desc(unsigned int api); /* NULL if unknown */
/* "CUDA_ERROR_OUT_OF_MEMORY" etc. for the library that exports `api`; NULL if unknown. */
const char *result_name(unsigned int api, int result);
/* A non-zero result that is a status, not a failure (polling: CUDA_ERROR_NOT_READY). */
bool result_is_status(unsigned int api, int result);
const char *copy_kind_name(unsigned int kind); /* "HtoD" ... */
const char *nccl_op_name(unsigned int op);     /* "all_reduce" ... */
int nccl_type_size(int datatype);	       /* bytes, 0 if unknown */
const char *lib_kind_name(unsigned int kind);  /* "libcuda" ... */
const char *event_type_name(unsigned int type);
const char *syscall_name(unsigned int nr);	/* x86-64: "read" ...; "syscall N" unknown */
const char *offcpu_reason_name(unsigned int r); /* "preempted", "sleep", "disk", "other" */
const char *block_op_name(unsigned int op);	/* "read", "write", "flush", "discard" */
const char *net_proto_name(int proto);		/* NET_TCP ...: "TCP", "UDP", "other" */

#endif
