/* SPDX-License-Identifier: MIT */
/*
 * What the static build and its NVML helper (nvml/helper/main.c) say over their pipe: the
 * helper's hello, then a reply to each request. Both ends are one build of gpuscope, so the
 * structs go as they are; the static side checks the magic and the counts anyway.
 */
#ifndef GS_NVML_PROXY_H
#define GS_NVML_PROXY_H

#include "nvml/nvml.h"

#define NVML_PROXY_MAGIC 0x4e564d4cu /* "NVML" */

struct nvml_proxy_hello {
	__u32 magic;
	__u32 ok; /* NVML loaded; else err says why */
	char err[256];
	char driver[96];
};

enum {
	NVML_PROXY_SNAPSHOT = 1,
	NVML_PROXY_SAMPLE = 2
};

struct nvml_proxy_request {
	__u32 op;
	__u32 slow_every; /* NVML_PROXY_SAMPLE: as nvml_sample's */
};

/* Followed by count struct nvml_gpu. */
struct nvml_proxy_reply {
	__u32 magic, count;
	__u64 errors;
	struct nvml_call_stat stats[NF_COUNT];
};

#endif
