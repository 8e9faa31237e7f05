// SPDX-License-Identifier: MIT
/* The in-process plane's ring, the consumer's side (see shmring.h): gpuscope's alone. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/event.h"
#include "core/shmring.h"

/*
 * The consumer's guard. Whoever may write a ring's file may also truncate it, and the pages
 * past its new end then raise SIGBUS when touched. One handler, installed at the first
 * open, jumps back into the guarded section of the thread that faulted when the address is
 * inside the mapping it is reading; any other SIGBUS goes on to the handler before ours, or
 * to the default action (the access runs again and ends the process, as it would have).
 */
static __thread struct {
	sigjmp_buf jb;
	const unsigned char *lo, *hi;
	volatile sig_atomic_t on;
} guard;
static struct sigaction prev_bus;
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	const unsigned char *a = si->si_addr;

	if (guard.on && a >= guard.lo && a < guard.hi) {
		guard.on = 0;
		siglongjmp(guard.jb, 1);
	}
	if ((prev_bus.sa_flags & SA_SIGINFO) && prev_bus.sa_sigaction)
		prev_bus.sa_sigaction(sig, si, uc);
	else if (prev_bus.sa_handler != SIG_DFL && prev_bus.sa_handler != SIG_IGN)
		prev_bus.sa_handler(sig);
	else
		signal(SIGBUS, SIG_DFL);
}

/* At each open: ours stays in place even if a handler was installed after it. */
static void guard_install(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER },
			 cur;

	sigemptyset(&sa.sa_mask);
	pthread_mutex_lock(&guard_lock);
	if (sigaction(SIGBUS, NULL, &cur) == 0 &&
	    (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigbus))
		sigaction(SIGBUS, &sa, &prev_bus);
	pthread_mutex_unlock(&guard_lock);
}

/*
 * Run fn(r, arg) with the mapping guarded: its result, or -1 with err set if the file does
 * not hold the whole ring (before: its size; during: a fault the guard caught).
 */
static int guarded(struct shmring *r, int (*fn)(struct shmring *r, void *arg), void *arg, char *err,
		   size_t errlen)
{
	struct stat st;
	int ret;

	if (fstat(r->fd, &st) || (__u64)st.st_size < GS_SHMRING_HDR + r->mask + 1) {
		snprintf(err, errlen, "its file was cut short");
		return -1;
	}
	guard.lo = r->map;
	guard.hi = (const unsigned char *)r->map + r->map_size;
	guard.on = 1;
	if (sigsetjmp(guard.jb, 0)) {
		snprintf(err, errlen, "its file was cut short while it was read");
		return -1;
	}
	ret = fn(r, arg);
	guard.on = 0;
	return ret;
}

int shmring_open_fd(struct shmring *r, int fd, char *err, size_t errlen)
{
	struct shmring_hdr hdr;
	struct stat st;
	int e;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	if (fstat(fd, &st) || st.st_size < GS_SHMRING_HDR ||
	    pread(fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
	    memcmp(hdr.magic, GS_SHMRING_MAGIC, sizeof(hdr.magic))) {
		snprintf(err, errlen, "not a gpuscope ring");
		return -1;
	}
	if (hdr.version != 1 || hdr.hdr_size != GS_SHMRING_HDR || hdr.data_size < GS_SHMRING_MIN ||
	    hdr.data_size > GS_SHMRING_MAX || (hdr.data_size & (hdr.data_size - 1)) ||
	    (__u64)st.st_size < GS_SHMRING_HDR + hdr.data_size) {
		snprintf(err, errlen, "ring of an unknown format or size");
		return -1;
	}
	if (hdr.tail & 7) {
		snprintf(err, errlen, "corrupt ring position");
		return -1;
	}
	guard_install();
	e = shmring_map(r, fd, hdr.data_size, false);
	if (e) {
		snprintf(err, errlen, "cannot map the ring: %s", strerror(-e));
		return -1;
	}
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (r->fd < 0) {
		snprintf(err, errlen, "cannot keep the ring open: %s", strerror(errno));
		shmring_close(r);
		return -1;
	}
	r->tail = hdr.tail;
	return 0;
}

int shmring_open(struct shmring *r, const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDWR | O_CLOEXEC), ret;

	if (fd < 0) {
		snprintf(err, errlen, "cannot open: %s", strerror(errno));
		return -1;
	}
	ret = shmring_open_fd(r, fd, err, errlen);
	close(fd);
	return ret;
}

struct drain_args {
	void (*fn)(void *ctx, const struct gs_hdr *ev);
	void *ctx;
	bool *busy;
	char *err;
	size_t errlen;
};

/* One lap at most, under the guard. */
static int drain_lap(struct shmring *r, void *arg)
{
	const struct drain_args *a = arg;
	/* The data size and position were validated at open; the header page is writable by
	 * the producer, so neither is read from it again. */
	__u64 size = r->mask + 1, tail = r->tail, lap_end = r->tail + size;
	union {
		struct gs_hdr h;
		unsigned char b[GS_EVENT_MAX_SIZE];
	} rec;
	int n = 0;

	while (tail < lap_end) {
		__u32 *slot = (__u32 *)(r->data + (tail & r->mask));
		__u32 state = __atomic_load_n(&slot[1], __ATOMIC_ACQUIRE), need = slot[0];
		const char *why;
		size_t len;

		if (state == GS_SLOT_EMPTY)
			break;
		if (state == GS_SLOT_WRITING) {
			*a->busy = true;
			break;
		}
		if (state != GS_SLOT_READY || need < GS_SLOT + sizeof(struct gs_hdr) ||
		    need > GS_SLOT + sizeof(rec) || (need & 7) || need > size) {
			snprintf(a->err, a->errlen, "corrupt slot at %llu (state %u, length %u)",
				 (unsigned long long)tail, state, need);
			return -1;
		}
		memcpy(&rec, slot + 2, need - GS_SLOT);
		len = rec.h.size;
		if (len > need - GS_SLOT || gs_event_check(&rec, len, &why)) {
			snprintf(a->err, a->errlen, "corrupt record at %llu: %s",
				 (unsigned long long)tail,
				 len > need - GS_SLOT ? "longer than its slot" : why);
			return -1;
		}
		/* Clear the whole record before giving the space back: a later record's slot
		 * word may fall anywhere in it, and must read as empty until written. */
		memset(slot, 0, need);
		tail += need;
		r->tail = tail;
		/* The space goes back in batches: each store of the shared tail costs the
		 * producers a cache miss. */
		if (++n % 64 == 0)
			__atomic_store_n(&r->h->tail, tail, __ATOMIC_RELEASE);
		/* (A copy: the guard's address check leaves any fault the callback may take
		 * elsewhere alone.) */
		a->fn(a->ctx, &rec.h);
	}
	if (n % 64)
		__atomic_store_n(&r->h->tail, tail, __ATOMIC_RELEASE);
	return n;
}

int shmring_drain(struct shmring *r, void (*fn)(void *ctx, const struct gs_hdr *ev), void *ctx,
		  bool *busy, char *err, size_t errlen)
{
	struct drain_args a = { fn, ctx, busy, err, errlen };

	*busy = false;
	return guarded(r, drain_lap, &a, err, errlen);
}

static int copy_hdr(struct shmring *r, void *out)
{
	memcpy(out, r->h, sizeof(*r->h));
	return 0;
}

int shmring_read_hdr(const struct shmring *r, struct shmring_hdr *out, char *err, size_t errlen)
{
	return guarded((struct shmring *)r, copy_hdr, out, err, errlen);
}

static int load_head(struct shmring *r, void *out)
{
	*(__u64 *)out = __atomic_load_n(&r->h->head, __ATOMIC_ACQUIRE);
	return 0;
}

int shmring_read_head(const struct shmring *r, __u64 *head, char *err, size_t errlen)
{
	return guarded((struct shmring *)r, load_head, head, err, errlen);
}

static int store_claim(struct shmring *r, void *arg)
{
	(void)arg;
	__atomic_store_n(&r->h->claimed, 1, __ATOMIC_RELEASE);
	return 0;
}

int shmring_claim(struct shmring *r, char *err, size_t errlen)
{
	return guarded(r, store_claim, NULL, err, errlen);
}

void shmring_close(struct shmring *r)
{
	if (r->map)
		munmap(r->map, r->map_size);
	if (r->fd > 2)
		close(r->fd);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}
