/* SPDX-License-Identifier: MIT */
/*
 * The host's side of the GPU ring buffers device-side probes write (translate.h has the
 * format): records read in order from the consumer position, each cleared once read, and the
 * position moved on for the writers. The ring is host memory the GPU writes into while it
 * runs: read it with volatile loads, and trust nothing in it past the bounds checked here.
 */
#ifndef GS_PTX_GPURING_H
#define GS_PTX_GPURING_H

#include <stddef.h>

typedef void (*gpuring_fn)(void *arg, unsigned long long gpu_ns, const unsigned char *data,
			   unsigned int len);

/*
 * Read what is in the ring (bytes: a power of two) from *tail on, calling fn for each
 * record, until the first not yet written, or max records. The number read; -1 if the ring
 * holds what no writer writes (a length past GS_RING_REC_MAX): nothing is read past it.
 */
long gpuring_drain(volatile unsigned char *ring, unsigned long long bytes,
		   volatile unsigned long long *tail, size_t max, gpuring_fn fn, void *arg);

#endif
