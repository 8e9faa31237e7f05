// SPDX-License-Identifier: MIT
/* A ring whose contents another process controls: arbitrary bytes in the data area and the
 * positions, read by gpuscope's consumer. No crash, no read outside the mapping. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/shmring.h"

static void sink(void *ctx, const struct gs_hdr *ev)
{
	(void)ctx;
	(void)ev;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct shmring_hdr h = { .version = 1,
				 .hdr_size = GS_SHMRING_HDR,
				 .data_size = GS_SHMRING_MIN };
	struct shmring r;
	char err[128];
	bool busy;
	int fd = memfd_create("fuzz-ring", 0);

	if (fd < 0)
		return 0;
	memcpy(h.magic, GS_SHMRING_MAGIC, sizeof(h.magic));
	if (size >= 8)
		memcpy(&h.tail, data, 8); /* the consumer position too is the producer's to spoil */
	if (ftruncate(fd, GS_SHMRING_HDR + GS_SHMRING_MIN) == 0 &&
	    pwrite(fd, &h, sizeof(h), 0) == sizeof(h) &&
	    pwrite(fd, data, size < GS_SHMRING_MIN ? size : GS_SHMRING_MIN, GS_SHMRING_HDR) >= 0 &&
	    shmring_open_fd(&r, fd, err, sizeof(err)) == 0) {
		while (shmring_drain(&r, sink, NULL, &busy, err, sizeof(err)) > 0)
			;
		shmring_close(&r);
	}
	close(fd);
	return 0;
}
