/* SPDX-License-Identifier: MIT */
/*
 * Host facts as a source: what a report says about the machine and the processes, read
 * while they are there and put in the stream as records, so that a recording renders as
 * the live run did (no sink reads /proc or /sys).
 *
 *  - at the session's start, the machine (GS_EV_HOST: host name, kernel, OS, CPU, memory,
 *    NVIDIA driver, boot id);
 *  - before the first record of a process, and after each exec, its command line and
 *    cgroup (GS_EV_PROC_INFO);
 *  - before the first block I/O record of a device, its name (GS_EV_BLOCKDEV).
 * The GPUs' identity comes from the NVML source (source/nvml.h).
 */
#ifndef GS_SOURCE_HOST_H
#define GS_SOURCE_HOST_H

#include <stddef.h>
#include "core/session.h"

struct host_source;

/* procs: the processes' facts too (run, attach), not only the machine's. */
struct host_source *host_source__open(struct session *s, bool procs);

/* For tests and the fuzzers: the facts of the machine as a record, and a process's. */
void host_facts(struct gs_ev_host *h);
/* 0, or -errno if the process is gone. Its size, cut after the command line, in *size. */
int host_proc_facts(__u32 pid, struct gs_ev_proc_info *i, __u32 *size);
/* "" if unknown; the version out of /proc/driver/nvidia/version's first line. */
void host_parse_driver_version(const char *line, char *out, size_t n);

#endif
