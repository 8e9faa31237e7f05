/* SPDX-License-Identifier: MIT */
/*
 * Which CUDA and NCCL libraries a command is going to load, found before it starts, so
 * their probes are in place from its first instruction: the dynamic loader's search order
 * (DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH, /etc/ld.so.cache, the default directories) and
 * the places Python packages keep them (nvidia/<pkg>/lib in site-packages, torch/lib,
 * conda's lib). Every match is kept, not only the first: a probe on a file nobody maps
 * costs nothing, a missed file loses events.
 */
#ifndef GS_CORE_LIBFIND_H
#define GS_CORE_LIBFIND_H

#include <limits.h>
#include <stddef.h>
#include "gpuscope/event.h"

struct lib_candidate {
	char path[PATH_MAX];
	unsigned int kind; /* enum gs_lib_kind */
};

struct lib_list {
	struct lib_candidate *v;
	size_t n, cap;
};

/* exe: resolved path of the command (its RPATH/RUNPATH and, if a script, its interpreter). */
void libfind_for_command(const char *exe, struct lib_list *out);
void lib_list_free(struct lib_list *l);
/* GS_LIB_* from a file name ("libcudart.so.13" -> GS_LIB_CUDART), GS_LIB_NONE otherwise. */
unsigned int lib_kind_of(const char *path);

/* ld.so.cache: call fn for every entry whose name is `name`. Returns entries seen or -1. */
int ldcache_lookup(const void *buf, size_t len, const char *name,
		   void (*fn)(const char *path, void *ctx), void *ctx);
/* The system's /etc/ld.so.cache: fn for every entry of each of the n names. */
void ldcache_each(const char *const *names, size_t n, void (*fn)(const char *path, void *ctx),
		  void *ctx);

/* Resolve `cmd` as execvp would (PATH search unless it has a '/'). 0, or -errno. */
int resolve_command(const char *cmd, char *out, size_t n);

#endif
