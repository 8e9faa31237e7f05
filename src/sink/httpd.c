// SPDX-License-Identifier: MIT
/*
 * The exporter's HTTP server (see httpd.h). libmicrohttpd gives the pool of epoll threads,
 * the caps per address and in all, and an inactivity timeout. What it has no option for is
 * a deadline that a peer cannot push back by trickling a byte now and then: each connection
 * is noted when it starts (with a duplicate of its socket, ours to shut down without racing
 * the library's close), marked while a request is being answered, and a reaper thread shuts
 * down the socket of one that has waited too long for its request's headers, or spent too
 * long on a request; the library then sees the connection end and closes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "sink/httpd.h"

#define REQUEST_S 30 /* a request answered (a slow reader of the page) */

struct conn {
	int fd;	      /* our duplicate of its socket */
	double since; /* when it began to wait for a request, or its request began */
	bool in_request, cut;
	struct conn *prev, *next;
};

struct httpd {
	struct MHD_Daemon *d;
	httpd_respond_fn fn;
	void *ctx;
	pthread_mutex_t lock; /* conns */
	struct conn *conns;
	pthread_t reaper;
	bool reaper_started;
	volatile bool stop;
	__u64 cut;
};

struct httpd_reply {
	struct MHD_Connection *c;
	enum MHD_Result ret;
};

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void httpd_reply(struct httpd_reply *r, unsigned int status, const char *type, const char *body,
		 size_t len)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);

	r->ret = MHD_NO;
	if (!resp)
		return;
	MHD_add_response_header(resp, "Content-Type", type);
	r->ret = MHD_queue_response(r->c, status, resp);
	MHD_destroy_response(resp);
}

static struct conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *i =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return i ? i->socket_context : NULL;
}

static void mark(struct httpd *h, struct conn *k, bool in_request)
{
	if (!k)
		return;
	pthread_mutex_lock(&h->lock);
	k->in_request = in_request;
	k->since = mono_s();
	pthread_mutex_unlock(&h->lock);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_len, void **state)
{
	struct httpd *h = cls;
	struct httpd_reply r = { .c = c };

	(void)version;
	(void)upload;
	if (!*state) { /* first call: the headers are in */
		*state = h;
		mark(h, conn_of(c), true);
		return MHD_YES;
	}
	if (*upload_len) { /* a body we do not want */
		*upload_len = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		httpd_reply(&r, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9);
		return r.ret;
	}
	h->fn(h->ctx, url, &r);
	return r.ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **state,
		      enum MHD_RequestTerminationCode toe)
{
	(void)state;
	(void)toe;
	mark(cls, conn_of(c), false);
}

static void notify(void *cls, struct MHD_Connection *c, void **socket_context,
		   enum MHD_ConnectionNotificationCode toe)
{
	struct httpd *h = cls;
	struct conn *k = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *i =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

		k = calloc(1, sizeof(*k));
		if (!k)
			return; /* (no deadline for it: the library's timeout still holds) */
		k->fd = i ? fcntl(i->connect_fd, F_DUPFD_CLOEXEC, 3) : -1;
		k->since = mono_s();
		pthread_mutex_lock(&h->lock);
		k->next = h->conns;
		if (h->conns)
			h->conns->prev = k;
		h->conns = k;
		pthread_mutex_unlock(&h->lock);
		*socket_context = k;
		return;
	}
	if (!k)
		return;
	pthread_mutex_lock(&h->lock);
	if (k->prev)
		k->prev->next = k->next;
	else
		h->conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	pthread_mutex_unlock(&h->lock);
	if (k->fd >= 0)
		close(k->fd);
	free(k);
	*socket_context = NULL;
}

static void *reap(void *arg)
{
	struct httpd *h = arg;

	while (!h->stop) {
		double now = mono_s();

		pthread_mutex_lock(&h->lock);
		for (struct conn *k = h->conns; k; k = k->next) {
			double limit = k->in_request ? REQUEST_S : HTTPD_DEADLINE_S;

			if (k->cut || k->fd < 0 || now - k->since <= limit)
				continue;
			shutdown(k->fd, SHUT_RDWR);
			k->cut = true;
			__atomic_add_fetch(&h->cut, 1, __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&h->lock);
		usleep(100000);
	}
	return NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	(void)fmt;
	(void)ap; /* (a client's faults are its own: not the agent's log) */
}

struct httpd *httpd__start(int listen_fd, bool ipv6, httpd_respond_fn fn, void *ctx, char *err,
			   size_t errlen)
{
	struct httpd *h = xcalloc(1, sizeof(*h));

	h->fn = fn;
	h->ctx = ctx;
	pthread_mutex_init(&h->lock, NULL);
	h->d = MHD_start_daemon(
		MHD_USE_EPOLL_INTERNAL_THREAD | (ipv6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL, handle, h,
		MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_THREAD_POOL_SIZE,
		(unsigned int)HTTPD_THREADS, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned int)HTTPD_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		(unsigned int)HTTPD_PER_ADDRESS, MHD_OPTION_CONNECTION_TIMEOUT, 10U,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024, MHD_OPTION_NOTIFY_CONNECTION,
		notify, h, MHD_OPTION_NOTIFY_COMPLETED, completed, h, MHD_OPTION_EXTERNAL_LOGGER,
		mhd_log, NULL, MHD_OPTION_END);
	if (!h->d) {
		snprintf(err, errlen, "the HTTP server did not start");
		goto fail;
	}
	if (pthread_create(&h->reaper, NULL, reap, h)) {
		snprintf(err, errlen, "cannot start the HTTP server's reaper: %s", strerror(errno));
		goto fail;
	}
	h->reaper_started = true;
	return h;
fail:
	httpd__stop(h);
	return NULL;
}

__u64 httpd__cut(const struct httpd *h)
{
	return __atomic_load_n(&h->cut, __ATOMIC_RELAXED);
}

void httpd__stop(struct httpd *h)
{
	if (!h)
		return;
	h->stop = true;
	if (h->reaper_started)
		pthread_join(h->reaper, NULL);
	if (h->d)
		MHD_stop_daemon(h->d);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
