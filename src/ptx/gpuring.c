// SPDX-License-Identifier: MIT
/* The host's side of the GPU ring buffers (see gpuring.h). */
#include <string.h>

#include "ptx/gpuring.h"
#include "ptx/translate.h"

static unsigned long long word_at(volatile unsigned char *ring, unsigned long long mask,
				  unsigned long long pos)
{
	return __atomic_load_n((volatile unsigned long long *)(ring + (pos & mask)),
			       __ATOMIC_ACQUIRE);
}

long gpuring_drain(volatile unsigned char *ring, unsigned long long bytes,
		   volatile unsigned long long *tail, size_t max, gpuring_fn fn, void *arg)
{
	unsigned long long t = __atomic_load_n(tail, __ATOMIC_ACQUIRE), mask = bytes - 1;
	unsigned char data[GS_RING_REC_MAX + 8];
	long n = 0;

	if (bytes < GS_RING_MIN || (bytes & mask))
		return -1;
	while ((size_t)n < max) {
		unsigned long long h = word_at(ring, mask, t), ts, need;
		unsigned int len = (unsigned int)h;

		if (h >> 32 != 1)
			break; /* (not written yet) */
		if (len > GS_RING_REC_MAX) {
			n = -1;
			break;
		}
		need = (GS_RING_HDR + len + 7) & ~7ULL;
		ts = word_at(ring, mask, t + 8);
		for (unsigned long long off = GS_RING_HDR; off < need; off += 8) {
			unsigned long long w = word_at(ring, mask, t + off);

			memcpy(data + off - GS_RING_HDR, &w, 8);
		}
		fn(arg, ts, data, len);
		/* Cleared before the writers may have the room again, so that no stale record
		 * is ever read there. */
		for (unsigned long long off = 0; off < need; off += 8)
			__atomic_store_n((volatile unsigned long long *)(ring + ((t + off) & mask)),
					 0ULL, __ATOMIC_RELAXED);
		t += need;
		n++;
		__atomic_store_n(tail, t, __ATOMIC_RELEASE);
	}
	return n;
}
