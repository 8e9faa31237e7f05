// SPDX-License-Identifier: MIT
/*
 * What the OS plane sees, with known amounts: a workload that sleeps, waits on a condition
 * variable, reads a file from disk with O_DIRECT, faults in fresh pages, and talks TCP and
 * UDP over loopback. No CUDA.
 *
 *   wl_os DIR      (a directory on a block device, for the file read with O_DIRECT)
 *
 * Truth keys: sleep:count, sleep:ns (each nap), futex:wait_ns, read:bytes, faults:touched,
 * tcp:bytes, udp:bytes, udp:datagrams, threads.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "truth.h"

#define NAPS	    5
#define NAP_NS	    20000000L
#define FILE_BYTES  (4 << 20)
#define READ_CHUNK  (256 << 10)
#define TOUCH_BYTES (64 << 20)
#define TCP_BYTES   3000000
#define UDP_N	    10
#define UDP_SIZE    1000
#define WAIT_NS	    30000000L

static void die(const char *what)
{
	fprintf(stderr, "wl_os: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void naps(void)
{
	struct timespec t = { 0, NAP_NS };

	for (int i = 0; i < NAPS; i++)
		nanosleep(&t, NULL);
	truth_add(NAPS, "sleep:count");
	truth_add(NAP_NS, "sleep:ns");
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int signalled;

static void *signaller(void *arg)
{
	struct timespec t = { 0, WAIT_NS };

	(void)arg;
	nanosleep(&t, NULL);
	pthread_mutex_lock(&mu);
	signalled = 1;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void condvar_wait(void)
{
	pthread_t th;

	pthread_create(&th, NULL, signaller, NULL);
	pthread_mutex_lock(&mu);
	while (!signalled)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	pthread_join(th, NULL);
	truth_add(WAIT_NS, "futex:wait_ns");
	truth_add(1, "threads");
}

static void direct_read(const char *dir)
{
	char path[4096];
	void *buf;
	int fd;

	snprintf(path, sizeof(path), "%s/wl_os.data", dir);
	if (posix_memalign(&buf, 4096, FILE_BYTES))
		die("posix_memalign");
	memset(buf, 0x5a, FILE_BYTES);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0 || write(fd, buf, FILE_BYTES) != FILE_BYTES || fsync(fd) || close(fd))
		die(path);
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0)
		die("open O_DIRECT");
	for (int off = 0; off < FILE_BYTES; off += READ_CHUNK)
		if (pread(fd, (char *)buf + off, READ_CHUNK, off) != READ_CHUNK)
			die("pread O_DIRECT");
	close(fd);
	unlink(path);
	free(buf);
	truth_add(FILE_BYTES, "read:bytes");
}

static void touch_pages(void)
{
	char *p =
		mmap(NULL, TOUCH_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	madvise(p, TOUCH_BYTES, MADV_NOHUGEPAGE); /* one fault per 4 KiB page */
	for (long i = 0; i < TOUCH_BYTES; i += 4096)
		p[i] = 1;
	munmap(p, TOUCH_BYTES);
	truth_add(TOUCH_BYTES / 4096, "faults:touched");
}

static int tcp_listener;

static void *tcp_server(void *arg)
{
	char buf[65536];
	long n = 0, r;
	int c = accept(tcp_listener, NULL, NULL);

	(void)arg;
	if (c < 0)
		die("accept");
	while (n < TCP_BYTES && (r = read(c, buf, sizeof(buf))) > 0)
		n += r;
	close(c);
	return NULL;
}

static void tcp(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	char *buf = calloc(1, TCP_BYTES);
	pthread_t th;
	long sent = 0, r;
	int c;

	tcp_listener = socket(AF_INET, SOCK_STREAM, 0);
	if (tcp_listener < 0 || bind(tcp_listener, (void *)&a, sizeof(a)) ||
	    listen(tcp_listener, 1) || getsockname(tcp_listener, (void *)&a, &len))
		die("tcp listen");
	pthread_create(&th, NULL, tcp_server, NULL);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (void *)&a, sizeof(a)))
		die("connect");
	while (sent < TCP_BYTES && (r = write(c, buf + sent, TCP_BYTES - sent)) > 0)
		sent += r;
	close(c);
	pthread_join(th, NULL);
	close(tcp_listener);
	free(buf);
	truth_add(TCP_BYTES, "tcp:bytes");
	truth_add(1, "threads");
}

static void udp(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	char buf[UDP_SIZE] = { 0 };
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	if (s < 0 || bind(s, (void *)&a, sizeof(a)) || getsockname(s, (void *)&a, &len))
		die("udp");
	for (int i = 0; i < UDP_N; i++)
		if (sendto(s, buf, sizeof(buf), 0, (void *)&a, sizeof(a)) != UDP_SIZE)
			die("sendto");
	for (int i = 0; i < UDP_N; i++)
		if (recv(s, buf, sizeof(buf), 0) != UDP_SIZE)
			die("recv");
	close(s);
	truth_add(UDP_N * UDP_SIZE, "udp:bytes");
	truth_add(UDP_N, "udp:datagrams");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: wl_os DIR\n");
		return 2;
	}
	naps();
	condvar_wait();
	direct_read(argv[1]);
	touch_pages();
	tcp();
	udp();
	truth_write();
	return 0;
}
