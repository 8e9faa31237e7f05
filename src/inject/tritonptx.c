// SPDX-License-Identifier: MIT
/*
 * The PTX of a cubin Triton compiled (device-side probes, issue 21): Triton loads its kernels
 * as cubins, SASS only, but keeps each kernel's PTX beside the cubin in its cache
 * ($TRITON_CACHE_DIR, else $HOME/.triton/cache: one directory per compiled kernel, with
 * NAME.cubin and NAME.ptx). A loaded cubin is looked for there by its bytes, and the PTX
 * beside the copy that equals it is taken.
 *
 * The cache may sit in a shared place (TRITON_CACHE_DIR=/tmp/...), and a PTX taken from it
 * runs in the program's kernels: a file, and the directory it is in, are taken only if this
 * process's user owns them and no one else may write them (an lstat'ed directory, a file
 * opened with O_NOFOLLOW and checked on its descriptor). The cache's directory list is read
 * once per load of a cubin, at most 4,096 entries; a cubin is compared only with files of
 * its size. (What gpuscope read of the loaded cubin ends with its section headers; its
 * program headers, which ptxas writes after them and which follow from the sections, are
 * counted in its size but not compared.)
 */
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "inject/inject.h"

#define MAX_ENTRIES 4096
#define PTX_MAX	    (64U << 20)

/* Whether st is this user's and no one else may write it. */
static bool ours(const struct stat *st)
{
	return st->st_uid == geteuid() && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* The whole file dir/name if it is ours, regular and n bytes (n 0: any size up to
 * PTX_MAX); NULL otherwise. *len: its size. */
static char *read_ours(const char *dir, const char *name, size_t n, size_t *len)
{
	char path[4096];
	struct stat st;
	char *b = NULL;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return NULL;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && ours(&st) &&
	    (n ? (size_t)st.st_size == n : (size_t)st.st_size <= PTX_MAX) &&
	    (b = gs_read_all(fd, (size_t)st.st_size)))
		*len = (size_t)st.st_size;
	close(fd);
	return b;
}

/* In one kernel's directory: the PTX beside a cubin of size bytes whose first n equal the
 * image's, or NULL. */
static char *in_entry(const char *dir, const unsigned char *img, size_t n, size_t size)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char *ptx = NULL;

	if (!d)
		return NULL;
	while (!ptx && (e = readdir(d))) {
		size_t len = strlen(e->d_name), got = 0;
		char name[512];
		char *cubin;

		if (len < 7 || len >= sizeof(name) || strcmp(e->d_name + len - 6, ".cubin"))
			continue;
		cubin = read_ours(dir, e->d_name, size, &got);
		if (cubin && !memcmp(cubin, img, n)) {
			memcpy(name, e->d_name, len - 6);
			strcpy(name + len - 6, ".ptx");
			ptx = read_ours(dir, name, 0, &got);
		}
		free(cubin);
	}
	closedir(d);
	return ptx;
}

char *gs_triton_ptx(const unsigned char *img, size_t n, char *where, size_t wn)
{
	const char *cache = getenv("TRITON_CACHE_DIR"), *home = getenv("HOME");
	char root[4096], dir[4096];
	struct stat st;
	struct dirent *e;
	const Elf64_Ehdr *eh = (const void *)img;
	char *ptx = NULL;
	unsigned int seen = 0;
	size_t size = n;
	DIR *d;

	if (n < sizeof(*eh))
		return NULL;
	if (eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize > size)
		size = eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize;
	if (size > PTX_MAX * 4ULL)
		return NULL;

	if (cache && *cache)
		snprintf(root, sizeof(root), "%s", cache);
	else if (home && *home)
		snprintf(root, sizeof(root), "%s/.triton/cache", home);
	else
		return NULL;
	if (lstat(root, &st) || !S_ISDIR(st.st_mode) || !(d = opendir(root)))
		return NULL;
	if (!ours(&st))
		snprintf(where, wn, "Triton's cache %s is not only this user's: not read", root);
	else
		while (!ptx && seen++ < MAX_ENTRIES && (e = readdir(d))) {
			if (e->d_name[0] == '.' ||
			    snprintf(dir, sizeof(dir), "%s/%s", root, e->d_name) >=
				    (int)sizeof(dir) ||
			    lstat(dir, &st) || !S_ISDIR(st.st_mode) || !ours(&st))
				continue;
			if ((ptx = in_entry(dir, img, n, size)))
				snprintf(where, wn, "%s", dir);
		}
	closedir(d);
	return ptx;
}
