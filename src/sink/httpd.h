/* SPDX-License-Identifier: MIT */
/*
 * The exporter's HTTP server (libmicrohttpd), made for untrusted peers. A pool of threads,
 * each with its own epoll loop, so that no connection holds up another; at most
 * HTTPD_PER_ADDRESS connections from one address and HTTPD_CONNECTIONS in all; and a
 * deadline: a connection must deliver each request's headers within HTTPD_DEADLINE_S of
 * its start (or of its previous response), else it is cut, however slowly it trickles
 * bytes to keep itself alive. What is served is the caller's: the respond callback copies a
 * page into the reply.
 */
#ifndef GS_SINK_HTTPD_H
#define GS_SINK_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#define HTTPD_THREADS	  4
#define HTTPD_CONNECTIONS 512
#define HTTPD_PER_ADDRESS 128
#define HTTPD_DEADLINE_S  5

struct httpd;
struct httpd_reply;

/* A GET or HEAD of `url`: the callback sets the reply (copied at once). */
typedef void (*httpd_respond_fn)(void *ctx, const char *url, struct httpd_reply *r);
void httpd_reply(struct httpd_reply *r, unsigned int status, const char *type, const char *body,
		 size_t len);

/* Serve on a listening socket (taken over). NULL with a message in err. */
struct httpd *httpd__start(int listen_fd, bool ipv6, httpd_respond_fn fn, void *ctx, char *err,
			   size_t errlen);
/* Connections cut at their deadline so far. */
__u64 httpd__cut(const struct httpd *h);
void httpd__stop(struct httpd *h);

#endif
