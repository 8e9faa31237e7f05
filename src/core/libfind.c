// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/elfsym.h"
#include "core/libfind.h"
#include "core/util.h"

/* The sonames gpuscope traces, in the order the report lists them. */
static const char *const sonames[] = {
	"libcuda.so.1", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libnccl.so.2",
};

static const char *const default_dirs[] = {
	"/lib/x86_64-linux-gnu",
	"/usr/lib/x86_64-linux-gnu",
	"/lib64",
	"/usr/lib64",
	"/lib",
	"/usr/lib",
};

unsigned int lib_kind_of(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!strncmp(base, "libcudart", 9))
		return GS_LIB_CUDART;
	if (!strncmp(base, "libcuda.so", 10))
		return GS_LIB_CUDA;
	if (!strncmp(base, "libnccl", 7))
		return GS_LIB_NCCL;
	return GS_LIB_NONE;
}

void lib_list_free(struct lib_list *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* Format a path; false if it does not fit (the candidate is skipped). */
static bool fmt_path(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return r >= 0 && (size_t)r < n;
}

/* Add a regular file once (by device and inode), classified by its name. */
static void add(struct lib_list *l, const char *path)
{
	struct stat st, other;
	unsigned int kind = lib_kind_of(path);

	if (kind == GS_LIB_NONE || stat(path, &st) || !S_ISREG(st.st_mode))
		return;
	for (size_t i = 0; i < l->n; i++)
		if (!stat(l->v[i].path, &other) && other.st_dev == st.st_dev &&
		    other.st_ino == st.st_ino)
			return;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	gs_strlcpy(l->v[l->n].path, path, sizeof(l->v[l->n].path));
	l->v[l->n++].kind = kind;
}

static void add_cb(const char *path, void *ctx)
{
	add(ctx, path);
}

/* A colon-separated list of directories, with $ORIGIN expanded to origin. */
static void search_dirs(struct lib_list *l, const char *list, const char *origin)
{
	char *copy, *dir, *save = NULL, path[PATH_MAX], expanded[PATH_MAX];

	if (!list || !*list)
		return;
	copy = xstrdup(list);
	for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		const char *d = dir;

		if (origin && (!strncmp(dir, "$ORIGIN", 7) || !strncmp(dir, "${ORIGIN}", 9))) {
			if (!fmt_path(expanded, sizeof(expanded), "%s%s", origin,
				      dir + (dir[1] == '{' ? 9 : 7)))
				continue;
			d = expanded;
		}
		for (size_t i = 0; i < ARRAY_SIZE(sonames); i++) {
			if (fmt_path(path, sizeof(path), "%s/%s", d, sonames[i]))
				add(l, path);
		}
	}
	free(copy);
}

/*
 * /etc/ld.so.cache, glibc >= 2.32 layout: optionally the old "ld.so-1.7.0" table, then the
 * new "glibc-ld.so.cache1.1" header (48 bytes) and 24-byte entries whose key and value are
 * string offsets from the start of the new header.
 */
#define OLD_MAGIC "ld.so-1.7.0"
#define NEW_MAGIC "glibc-ld.so.cache1.1"

int ldcache_lookup(const void *buf, size_t len, const char *name,
		   void (*fn)(const char *path, void *ctx), void *ctx)
{
	const unsigned char *p = buf, *hdr;
	size_t off = 0, hlen, nlibs;
	int seen = 0;

	if (len >= 16 && !memcmp(p, OLD_MAGIC, strlen(OLD_MAGIC))) {
		__u32 nold;

		memcpy(&nold, p + 12, 4);
		if (nold > len / 12)
			return -1;
		off = (16 + (size_t)nold * 12 + 7) & ~(size_t)7;
	}
	if (off > len || len - off < 48 || memcmp(p + off, NEW_MAGIC, strlen(NEW_MAGIC)))
		return -1;
	hdr = p + off;
	hlen = len - off;
	{
		__u32 n;

		memcpy(&n, hdr + 20, 4);
		nlibs = n;
	}
	if (nlibs > (hlen - 48) / 24)
		return -1;
	for (size_t i = 0; i < nlibs; i++) {
		const unsigned char *e = hdr + 48 + i * 24;
		__u32 key, value;
		const char *k, *v;

		memcpy(&key, e + 4, 4);
		memcpy(&value, e + 8, 4);
		if (key >= hlen || value >= hlen)
			continue;
		k = (const char *)hdr + key;
		v = (const char *)hdr + value;
		/* Both strings must end inside the file. */
		if (!memchr(k, 0, hlen - key) || !memchr(v, 0, hlen - value))
			continue;
		if (strcmp(k, name))
			continue;
		seen++;
		if (fn)
			fn(v, ctx);
	}
	return seen;
}

void ldcache_each(const char *const *names, size_t n, void (*fn)(const char *path, void *ctx),
		  void *ctx)
{
	int fd = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC);
	struct stat st;
	void *m;

	if (fd < 0)
		return;
	if (fstat(fd, &st) || st.st_size <= 0 || st.st_size > (64 << 20)) {
		close(fd);
		return;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return;
	for (size_t i = 0; i < n; i++)
		ldcache_lookup(m, (size_t)st.st_size, names[i], fn, ctx);
	munmap(m, (size_t)st.st_size);
}

static void search_ldcache(struct lib_list *l)
{
	ldcache_each(sonames, ARRAY_SIZE(sonames), add_cb, l);
}

static void search_glob(struct lib_list *l, const char *pattern)
{
	glob_t g;

	if (glob(pattern, GLOB_BRACE | GLOB_NOSORT, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			add(l, g.gl_pathv[i]);
	}
	globfree(&g);
}

/* Python installations: pip's nvidia-* wheels, torch's bundled copies, conda's lib. */
static void search_python_prefix(struct lib_list *l, const char *prefix)
{
	char pat[PATH_MAX];

	if (!prefix || !*prefix)
		return;
	if (fmt_path(pat, sizeof(pat),
		     "%s/lib/python3*/{site,dist}-packages/{nvidia/*/lib,torch/lib}/"
		     "{libcudart,libnccl,libcuda}*.so*",
		     prefix))
		search_glob(l, pat);
	if (fmt_path(pat, sizeof(pat), "%s/lib/{libcudart,libnccl}*.so*", prefix))
		search_glob(l, pat);
}

static void search_python_dir(struct lib_list *l, const char *dir)
{
	char pat[PATH_MAX];

	if (fmt_path(pat, sizeof(pat),
		     "%s/{nvidia/*/lib,torch/lib}/{libcudart,libnccl,libcuda}*.so*", dir))
		search_glob(l, pat);
}

/* The interpreter of a "#!" script, resolved; "" if exe is not a script. */
static void script_interpreter(const char *exe, char *out, size_t n)
{
	char line[512], *p, *arg;
	FILE *f = fopen(exe, "re");

	out[0] = 0;
	if (!f)
		return;
	if (!fgets(line, sizeof(line), f) || strncmp(line, "#!", 2)) {
		fclose(f);
		return;
	}
	fclose(f);
	p = line + 2 + strspn(line + 2, " \t");
	p[strcspn(p, "\r\n")] = 0;
	arg = p + strcspn(p, " \t");
	if (*arg)
		*arg++ = 0;
	arg += strspn(arg, " \t");
	arg[strcspn(arg, " \t")] = 0;
	/* "#!/usr/bin/env python3" names the interpreter in the argument. */
	if (!strcmp(basename(p), "env") && *arg)
		resolve_command(arg, out, n);
	else
		gs_strlcpy(out, p, n);
}

/* /usr/bin/python3.11 -> /usr; resolve symlinks only if `resolve`. */
static void prefix_of(const char *exe, bool resolve, char *out, size_t n)
{
	char path[PATH_MAX], *slash;

	out[0] = 0;
	if (!resolve || !realpath(exe, path))
		gs_strlcpy(path, exe, sizeof(path));
	for (int i = 0; i < 2; i++) {
		slash = strrchr(path, '/');
		if (!slash)
			return;
		*slash = 0;
	}
	gs_strlcpy(out, path[0] ? path : "/", n);
}

/* A venv's bin/python3 links to the system interpreter: both prefixes hold packages. */
static void search_interpreter(struct lib_list *l, const char *exe)
{
	char prefix[PATH_MAX];

	prefix_of(exe, false, prefix, sizeof(prefix));
	search_python_prefix(l, prefix);
	prefix_of(exe, true, prefix, sizeof(prefix));
	search_python_prefix(l, prefix);
}

void libfind_for_command(const char *exe, struct lib_list *out)
{
	char rpath[4096], runpath[4096], origin[PATH_MAX], interp[PATH_MAX], prefix[PATH_MAX];
	char python[PATH_MAX];
	const char *home = getenv("HOME");
	const char *pypath = getenv("PYTHONPATH");

	gs_strlcpy(origin, exe, sizeof(origin));
	gs_strlcpy(origin, dirname(origin), sizeof(origin));
	if (elf_search_paths(exe, rpath, sizeof(rpath), runpath, sizeof(runpath)) == 0) {
		if (!runpath[0])
			search_dirs(out, rpath, origin);
	}
	search_dirs(out, getenv("LD_LIBRARY_PATH"), NULL);
	search_dirs(out, runpath, origin);
	search_ldcache(out);
	for (size_t i = 0; i < ARRAY_SIZE(default_dirs); i++)
		search_dirs(out, default_dirs[i], NULL);

	/* Python: the command's own prefix, its script interpreter's, and the usual ones. */
	search_interpreter(out, exe);
	script_interpreter(exe, interp, sizeof(interp));
	if (interp[0])
		search_interpreter(out, interp);
	if (resolve_command("python3", python, sizeof(python)) == 0)
		search_interpreter(out, python);
	search_python_prefix(out, getenv("VIRTUAL_ENV"));
	search_python_prefix(out, getenv("CONDA_PREFIX"));
	search_python_prefix(out, "/usr");
	search_python_prefix(out, "/usr/local");
	if (home) {
		if (fmt_path(prefix, sizeof(prefix), "%s/.local", home))
			search_python_prefix(out, prefix);
	}
	if (pypath) {
		char *copy = xstrdup(pypath), *save = NULL;

		for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
			search_python_dir(out, d);
		free(copy);
	}
}

int resolve_command(const char *cmd, char *out, size_t n)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save = NULL, buf[PATH_MAX];
	int err = -ENOENT;

	if (!cmd || !*cmd)
		return -ENOENT;
	if (strchr(cmd, '/')) {
		if (access(cmd, X_OK))
			return -errno;
		gs_strlcpy(out, cmd, n);
		return 0;
	}
	copy = xstrdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		struct stat st;

		if (!fmt_path(buf, sizeof(buf), "%s/%s", *dir ? dir : ".", cmd) || stat(buf, &st) ||
		    !S_ISREG(st.st_mode))
			continue;
		if (access(buf, X_OK)) {
			err = -EACCES;
			continue;
		}
		gs_strlcpy(out, buf, n);
		err = 0;
		break;
	}
	free(copy);
	return err;
}
