// SPDX-License-Identifier: MIT
/*
 * The in-process plane's ring (see shmring.h): its mapping and the producer's side, built
 * into the inject library (no allocation, no locks) and gpuscope. The consumer's side is
 * shmring_read.c, gpuscope's alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/event.h"
#include "core/shmring.h"

/* (In the injected library the producer's side goes with a launch's code: inject.h,
 * GS_HOT_FN.) */
#ifdef GS_IN_TARGET
#define SHMRING_HOT __attribute__((section(".text.sorted.gs_hot_1")))
#else
#define SHMRING_HOT
#endif

/* populate: fill the page tables now (the producer), rather than fault once per page on the
 * first lap of a hot path. */
int shmring_map(struct shmring *r, int fd, __u64 data_size, bool populate)
{
	int pop = populate ? MAP_POPULATE : 0;
	size_t total = GS_SHMRING_HDR + 2 * (size_t)data_size;
	unsigned char *base;

	base = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return -errno;
	if (mmap(base, GS_SHMRING_HDR, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
		    MAP_FAILED ||
	    mmap(base + GS_SHMRING_HDR, data_size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED | pop, fd, GS_SHMRING_HDR) == MAP_FAILED ||
	    mmap(base + GS_SHMRING_HDR + data_size, data_size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED | pop, fd, GS_SHMRING_HDR) == MAP_FAILED) {
		int err = -errno;

		munmap(base, total);
		return err;
	}
	r->map = base;
	r->map_size = total;
	r->h = (struct shmring_hdr *)base;
	r->data = base + GS_SHMRING_HDR;
	r->mask = data_size - 1;
	r->tail = 0;
	r->seen_tail = 0;
	r->fd = -1;
	r->no_prefetch = false;
	return 0;
}

int shmring_create(struct shmring *r, const char *path, __u64 data_size, __u32 pid, __u64 now)
{
	char tmp[4096];
	int fd, err;

	if (data_size < GS_SHMRING_MIN || data_size > GS_SHMRING_MAX ||
	    (data_size & (data_size - 1)))
		return -EINVAL;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* Reserve the memory now: on a full tmpfs, a lazily filled file would fault the
	 * traced program with SIGBUS at some later record. */
	err = posix_fallocate(fd, 0, (off_t)(GS_SHMRING_HDR + data_size));
	if (err) {
		err = -err;
		goto fail;
	}
	err = shmring_map(r, fd, data_size, true);
	if (err)
		goto fail;
	memcpy(r->h->magic, GS_SHMRING_MAGIC, sizeof(r->h->magic));
	r->h->version = 1;
	r->h->hdr_size = GS_SHMRING_HDR;
	r->h->data_size = data_size;
	r->h->pid = pid;
	r->h->created_ns = now;
	if (rename(tmp, path)) {
		err = -errno;
		munmap(r->map, r->map_size);
		goto fail;
	}
	close(fd);
	return 0;
fail:
	close(fd);
	unlink(tmp);
	return err;
}

/* Reservations tried before a record is given up (others' succeeding is what makes one
 * fail, so only a header in a state no writer made gets here). */
#define SHMRING_TRIES 100000

SHMRING_HOT void *shmring_reserve(struct shmring *r, __u32 size, __u16 type)
{
	struct shmring_hdr *h = r->h;
	/* (The data area's size as mapped, not the header's: one line fewer to read, and
	 * nothing another process writes there decides where this one writes.) */
	__u64 need = ((__u64)size + GS_SLOT + 7) & ~7ULL, size_all = r->mask + 1, head, tail;
	__u32 *slot;

	if (need > size_all)
		goto drop;
	head = __atomic_load_n(&h->head, __ATOMIC_RELAXED);
	tail = __atomic_load_n(&r->seen_tail, __ATOMIC_ACQUIRE);
	/* (Bounded: the header is shared, and a head or tail no writer of ours put there must
	 * cost a record, not a thread that never returns.) */
	for (int tries = 0;; tries++) {
		if (__builtin_expect(tries > SHMRING_TRIES, 0))
			goto drop;
		if (__builtin_expect(tail > head, 0)) { /* a stale head: positions only grow */
			head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
			continue;
		}
		if (__builtin_expect(head + need - tail > size_all, 0)) {
			tail = __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE);
			__atomic_store_n(&r->seen_tail, tail, __ATOMIC_RELEASE);
			if (tail > head)
				continue;
			if (head + need - tail > size_all)
				goto drop;
		}
		if (__atomic_compare_exchange_n(&h->head, &head, head + need, true,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			break;
	}
	slot = (__u32 *)(r->data + (head & r->mask));
	/* The lines the next record will likely take, asked for now to write: the consumer has
	 * read them since they were last written, and fetching them back is most of what a
	 * record costs the writer when it waits for them (bench/ring_cost.c). (A prefetch
	 * never faults; past the data area's end is its second mapping.) */
	if (!__atomic_load_n(&r->no_prefetch, __ATOMIC_RELAXED)) {
		unsigned char *next = r->data + ((head + need) & r->mask);

		__builtin_prefetch(next, 1, 3);
		__builtin_prefetch(next + 64, 1, 3);
		__builtin_prefetch(next + 128, 1, 3);
	}
	slot[0] = (__u32)need;
	__atomic_store_n(&slot[1], GS_SLOT_WRITING, __ATOMIC_RELAXED);
	return slot + 2;
drop:
	if (type < GS_EV_MAX)
		__atomic_fetch_add(&h->drops[type], 1, __ATOMIC_RELAXED);
	return NULL;
}

SHMRING_HOT void shmring_commit(struct shmring *r, void *rec)
{
	__u32 *slot = (__u32 *)rec - 2;

	(void)r;
	__atomic_store_n(&slot[1], GS_SLOT_READY, __ATOMIC_RELEASE);
}
