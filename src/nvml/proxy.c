// SPDX-License-Identifier: MIT
/*
 * NVML in the static build: the API of nvml.h, answered by the helper the static gpuscope
 * carries (nvml/helper/main.c, dynamically linked: it loads libnvidia-ml with the system's C
 * library, which a static binary cannot). The helper runs from a memory file descriptor, so
 * there is still one file to install; it is asked over a socket pair and ends when the
 * socket closes. A helper that stops answering (10 s) or says nonsense is dropped: the GPUs'
 * metrics stop, and nothing else does.
 */
#ifdef GS_STATIC_BUILD
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"
#include "nvml/nvml.h"
#include "nvml/proxy.h"

#ifndef GS_NVML_HELPER
#error "GS_NVML_HELPER names the built helper to carry (set by the Makefile)"
#endif

__asm__(".section .rodata\n"
	".balign 64\n"
	".globl gs_nvml_helper\n"
	".hidden gs_nvml_helper\n"
	"gs_nvml_helper:\n"
	".incbin \"" GS_NVML_HELPER "\"\n"
	".globl gs_nvml_helper_end\n"
	".hidden gs_nvml_helper_end\n"
	"gs_nvml_helper_end:\n"
	".previous\n");
extern const unsigned char gs_nvml_helper[], gs_nvml_helper_end[];

#define HELLO_MS 30000 /* (nvmlInit takes seconds on a machine with many GPUs) */
#define REPLY_MS 10000

struct nvml {
	struct nvml_totals t; /* (first: totals.c reads it) */
	pid_t pid;
	int fd; /* our end of the socket pair */
	bool dead;
	unsigned int ndev;
	struct nvml_gpu g[NVML_MAX_DEVICES];
};

/* n bytes from the helper within ms: 0, or -1. */
static int get(int fd, void *p, size_t n, int ms)
{
	char *c = p;

	while (n) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&pfd, 1, ms) <= 0)
			return -1;
		r = recv(fd, c, n, 0);
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

static pid_t start_helper(int *fd, char *err, size_t errlen)
{
	size_t size = (size_t)(gs_nvml_helper_end - gs_nvml_helper);
	int mfd = memfd_create("gpuscope-nvml", MFD_CLOEXEC), sv[2];
	pid_t pid;

	if (mfd < 0 || write(mfd, gs_nvml_helper, size) != (ssize_t)size ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		snprintf(err, errlen, "cannot start the NVML helper: %s", strerror(errno));
		if (mfd >= 0)
			close(mfd);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		char *argv[] = { "gpuscope-nvml", NULL };

		if (dup2(sv[1], STDIN_FILENO) >= 0 && dup2(sv[1], STDOUT_FILENO) >= 0)
			fexecve(mfd, argv, environ);
		_exit(127);
	}
	close(mfd);
	close(sv[1]);
	if (pid < 0) {
		snprintf(err, errlen, "cannot start the NVML helper: %s", strerror(errno));
		close(sv[0]);
		return -1;
	}
	*fd = sv[0];
	return pid;
}

static void stop_helper(struct nvml *n)
{
	if (n->fd >= 0)
		close(n->fd); /* (it ends when its input does) */
	n->fd = -1;
	if (n->pid > 0 && waitpid(n->pid, NULL, WNOHANG) == 0) {
		usleep(100000);
		if (waitpid(n->pid, NULL, WNOHANG) == 0) {
			kill(n->pid, SIGKILL);
			waitpid(n->pid, NULL, 0);
		}
	}
	n->pid = 0;
}

struct nvml *nvml_open(char *err, size_t errlen)
{
	struct nvml *n = xcalloc(1, sizeof(*n));
	struct nvml_proxy_hello hello;

	n->pid = start_helper(&n->fd, err, errlen);
	if (n->pid < 0) {
		free(n);
		return NULL;
	}
	if (get(n->fd, &hello, sizeof(hello), HELLO_MS) || hello.magic != NVML_PROXY_MAGIC) {
		snprintf(err, errlen,
			 "the NVML helper did not start (it needs the system's C "
			 "library, glibc 2.34 or newer)");
		goto fail;
	}
	hello.err[sizeof(hello.err) - 1] = hello.driver[sizeof(hello.driver) - 1] = 0;
	if (!hello.ok) {
		snprintf(err, errlen, "%s", hello.err);
		goto fail;
	}
	gs_strlcpy(n->t.driver, hello.driver, sizeof(n->t.driver));
	return n;
fail:
	stop_helper(n);
	free(n);
	return NULL;
}

/* One request and its reply: the GPUs' state kept. */
static void ask(struct nvml *n, __u32 op, unsigned int slow_every)
{
	struct nvml_proxy_request req = { .op = op, .slow_every = slow_every };
	struct nvml_proxy_reply rep;

	if (n->dead)
		return;
	if (send(n->fd, &req, sizeof(req), MSG_NOSIGNAL) != sizeof(req) ||
	    get(n->fd, &rep, sizeof(rep), REPLY_MS) || rep.magic != NVML_PROXY_MAGIC ||
	    rep.count > NVML_MAX_DEVICES ||
	    get(n->fd, n->g, rep.count * sizeof(n->g[0]), REPLY_MS)) {
		gs_warn("the NVML helper stopped answering: no more GPU metrics");
		n->dead = true;
		n->ndev = 0;
		stop_helper(n);
		return;
	}
	n->ndev = rep.count;
	n->t.errors = rep.errors;
	memcpy(n->t.stats, rep.stats, sizeof(n->t.stats));
}

void nvml_sample(struct nvml *n, unsigned int slow_every)
{
	ask(n, NVML_PROXY_SAMPLE, slow_every);
}

unsigned int nvml_snapshot(struct nvml *n, struct nvml_gpu *out, unsigned int max)
{
	unsigned int k;

	ask(n, NVML_PROXY_SNAPSHOT, 0);
	k = GS_MIN(max, n->ndev);
	memcpy(out, n->g, k * sizeof(*out));
	return k;
}

void nvml_close(struct nvml *n)
{
	if (!n)
		return;
	stop_helper(n);
	free(n);
}
#endif
