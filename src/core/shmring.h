/* SPDX-License-Identifier: MIT */
/*
 * The in-process plane's event ring: one file per traced process in gpuscope's session
 * directory (/dev/shm), written by the process's threads, read by gpuscope.
 *
 * Layout: a 4096-byte header (counters and positions), then the data area, a power of two
 * in size, mapped twice back to back so a record never wraps. Each record is preceded by an
 * 8-byte slot word {length, state}. Producers reserve space with a compare-and-swap on
 * `head` (never blocking: when the ring is full the record is dropped and counted), write
 * the record, and publish it with a release store of the state. The consumer reads in
 * order from `tail`, stops at a record still being written, and zeroes each record before
 * moving `tail` past it, so unwritten space always reads as an empty slot.
 *
 * The consumer trusts nothing in the mapping: the producer is another process, perhaps
 * another user's. Lengths are bounded, every record is copied out before it is checked
 * (core/event.h), and a ring that holds garbage is reported and abandoned. The file itself
 * may be truncated under the mapping, which turns the next access into SIGBUS: its size is
 * checked before each read, and every access to the mapping runs under a guard that turns
 * such a fault into an error for that ring alone (the agent goes on). A drain reads at most
 * one lap of the ring, so a producer that keeps writing cannot keep the consumer in it.
 */
#ifndef GS_CORE_SHMRING_H
#define GS_CORE_SHMRING_H

#include <stdbool.h>
#include <stddef.h>
#include "gpuscope/event.h"

#define GS_SHMRING_MAGIC "GSRING01"
#define GS_SHMRING_HDR	 4096
#define GS_SHMRING_MIN	 (64ULL << 10)
#define GS_SHMRING_MAX	 (1ULL << 30)
#define GS_SLOT		 8 /* bytes of the slot word before each record */

enum {
	GS_SLOT_EMPTY = 0,
	GS_SLOT_WRITING = 1,
	GS_SLOT_READY = 2
};

struct shmring_hdr {
	char magic[8];
	__u32 version;
	__u32 hdr_size;
	__u64 data_size;
	__u32 pid;     /* the producing process */
	__u32 claimed; /* set by the agent once it has proved whose the ring is (its process
			* waits for it a little at exit: see inject/ring.c) */
	__u64 created_ns;
	__u64 head __attribute__((aligned(64))); /* bytes reserved by producers */
	__u64 tail __attribute__((aligned(64))); /* bytes consumed */
	__u64 drops[GS_EV_MAX] __attribute__((aligned(64)));
	__u64 unwrapped;    /* driver entry points handed out unwrapped */
	__u64 gates_forced; /* GPU timing gates the watchdog had to open (inject/gate.h) */
	__u64 time_capped;  /* launches due for GPU timing left untimed by its rate (gputime.c) */
	__u64 time_lost;    /* ... for want of events or queue room (gputime.c) */
};

_Static_assert(sizeof(struct shmring_hdr) <= GS_SHMRING_HDR, "shmring header fits its page");

struct shmring {
	struct shmring_hdr *h;
	unsigned char *data; /* data_size bytes, mapped twice */
	__u64 mask;
	__u64 tail;	 /* consumer: its own position, never re-read from the shared header */
	__u64 seen_tail; /* producers: the consumer's position when last read (a stale value
			  * only under-estimates the free space), so that the header's tail
			  * line, which the consumer writes, is read only when space looks short */
	size_t map_size;
	void *map;
	int fd; /* consumer: the file, whose size is checked before each read; producer: -1 */
	bool no_prefetch; /* producers: no prefetch in shmring_reserve (measurements: ring_cost.c,
			   * ab.c; atomic) */
};

/* Map a ring's file (the data area twice): 0 or -errno. populate: fault its pages in now. */
int shmring_map(struct shmring *r, int fd, __u64 data_size, bool populate);

/* Producer. Create a ring of data_size bytes (a power of two) at path: it appears
 * complete (written under a temporary name, then renamed). 0 or -errno. */
int shmring_create(struct shmring *r, const char *path, __u64 data_size, __u32 pid, __u64 now);
/* Reserve room for a record of `size` bytes; NULL (and a counted drop) if full. */
void *shmring_reserve(struct shmring *r, __u32 size, __u16 type);
/* Publish a reserved record. */
void shmring_commit(struct shmring *r, void *rec);

/* Consumer. Map an existing ring (fd is duplicated and kept); -1 with err set if it is not
 * one. */
int shmring_open_fd(struct shmring *r, int fd, char *err, size_t errlen);
int shmring_open(struct shmring *r, const char *path, char *err, size_t errlen);
/*
 * Deliver the published records in order, at most one lap of the ring. Returns the number
 * delivered (0 if none, or if the next one is still being written), or -1 if the ring is
 * corrupt or its file was cut short (err says what; stop reading it). *busy is set when a
 * record is still being written at the tail.
 */
int shmring_drain(struct shmring *r, void (*fn)(void *ctx, const struct gs_hdr *ev), void *ctx,
		  bool *busy, char *err, size_t errlen);
/* Copy the header out (its counters are the producer's to set: untrusted). 0, or -1 with err
 * set if the file was cut short. */
int shmring_read_hdr(const struct shmring *r, struct shmring_hdr *out, char *err, size_t errlen);
/* The producer's reservation position (untrusted), into *head: 0 or -1 as above. */
int shmring_read_head(const struct shmring *r, __u64 *head, char *err, size_t errlen);
/* Tell the producer its ring is claimed (the agent, once it knows whose it is): 0 or -1. */
int shmring_claim(struct shmring *r, char *err, size_t errlen);
void shmring_close(struct shmring *r);

#endif
