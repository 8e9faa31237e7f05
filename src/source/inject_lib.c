// SPDX-License-Identifier: MIT
/* The in-process library's files (inject_int.h): carried inside gpuscope, written into a
 * session's or the agent's directory, stale sessions' directories removed, and the
 * environment that makes a program load it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/procfs.h"
#include "core/util.h"
#include "source/inject_int.h"

#ifndef GS_INJECT_SO
#error "GS_INJECT_SO names the built library to carry (set by the Makefile)"
#endif

/* The library, carried inside gpuscope so that one binary is all there is to install. */
__asm__(".section .rodata\n"
	".balign 64\n"
	".globl gs_inject_so\n"
	".hidden gs_inject_so\n"
	"gs_inject_so:\n"
	".incbin \"" GS_INJECT_SO "\"\n"
	".globl gs_inject_so_end\n"
	".hidden gs_inject_so_end\n"
	"gs_inject_so_end:\n"
	".previous\n");
extern const unsigned char gs_inject_so[], gs_inject_so_end[];

#define DIR_PREFIX "gpuscope-"
/* Remove a session directory and what is in it (flat: rings and the library). */
void inj_remove_dir(const char *dir)
{
	char path[PATH_MAX + 256];
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(dir);
}

/* Sessions of gpuscope processes that are gone (killed before they could clean up). */
static void remove_stale(const char *base)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(base);

	if (!d)
		return;
	while ((de = readdir(d))) {
		long pid;
		char *end;

		if (strncmp(de->d_name, DIR_PREFIX, strlen(DIR_PREFIX)))
			continue;
		pid = strtol(de->d_name + strlen(DIR_PREFIX), &end, 10);
		if (pid <= 0 || *end != '-' || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid()) {
			gs_debug("removing %s, left by gpuscope %ld", path, pid);
			inj_remove_dir(path);
		}
	}
	closedir(d);
}

int inj_make_dir(const char *base, char *out, size_t n)
{
	struct stat st;

	if (stat(base, &st) || !S_ISDIR(st.st_mode) || access(base, W_OK | X_OK))
		return -1;
	remove_stale(base);
	if (snprintf(out, n, "%s/" DIR_PREFIX "%d-XXXXXX", base, (int)getpid()) >= (int)n)
		return -1;
	return mkdtemp(out) ? 0 : -1;
}

bool inj_noexec(const char *dir)
{
	struct statvfs sv;

	return statvfs(dir, &sv) == 0 && (sv.f_flag & ST_NOEXEC);
}

int inj_write_library(const char *path)
{
	size_t len = (size_t)(gs_inject_so_end - gs_inject_so);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);

	if (fd < 0)
		return -1;
	/* (0755 whatever the umask: other users' programs load it from the agent's
	 * directory) */
	if (gs_io_full(fd, (void *)gs_inject_so, len, true) || fchmod(fd, 0755)) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* Written beside, then renamed over: a program that has the old one mapped keeps it. */
int inj_replace_library(const char *path)
{
	char tmp[PATH_MAX + 16];

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
	if (inj_write_library(tmp) || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}
static char *env_pair(const char *name, const char *value)
{
	struct strbuf sb = {};

	sb_printf(&sb, "%s=%s", name, value);
	return sb.buf;
}

char **inject__env(const struct inject *in, char *const *env)
{
	static const char *const ours[] = { "LD_PRELOAD=",	    "GPUSCOPE_INJECT_DIR=",
					    "GPUSCOPE_PID=",	    "GPUSCOPE_GPU_TIME=",
					    "GPUSCOPE_RING_BYTES=", "GPUSCOPE_STACKS=",
					    "GPUSCOPE_DEVCODE=",    "GPUSCOPE_PROBE=",
					    "GPUSCOPE_PROBE_OUT=",  "GPUSCOPE_STACK_RATE=" };
	const char *preload = NULL;
	char num[32], **out;
	size_t n = 0, k = 0;
	bool cupy_set = false;

	while (env[n])
		n++;
	out = xcalloc(n + sizeof(ours) / sizeof(ours[0]) + 2, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		bool skip = false;

		cupy_set |= !strncmp(env[i], "CUPY_COMPILE_WITH_PTX=", 22);
		for (size_t j = 0; j < sizeof(ours) / sizeof(ours[0]); j++)
			if (!strncmp(env[i], ours[j], strlen(ours[j])))
				skip = true;
		if (!strncmp(env[i], "LD_PRELOAD=", 11))
			preload = env[i] + 11;
		if (!skip)
			out[k++] = xstrdup(env[i]);
	}
	/* Ours first, so that our definitions of the driver's functions are the ones bound. */
	if (preload && *preload) {
		struct strbuf sb = {};

		sb_printf(&sb, "LD_PRELOAD=%s:%s", in->so_path, preload);
		out[k++] = sb.buf;
	} else {
		out[k++] = env_pair("LD_PRELOAD", in->so_path);
	}
	out[k++] = env_pair("GPUSCOPE_INJECT_DIR", in->dir);
	snprintf(num, sizeof(num), "%d", (int)getpid());
	out[k++] = env_pair("GPUSCOPE_PID", num);
	if (in->o.gpu_time == 0)
		snprintf(num, sizeof(num), "off");
	else if (in->o.gpu_time == 1)
		snprintf(num, sizeof(num),
			 in->o.gpu_chains	  ? "chained"
			 : in->o.gpu_cupti_graphs ? "cupti"
			 : in->o.gpu_cupti	  ? "all"
						  : "pairs");
	else
		snprintf(num, sizeof(num), "%u", in->o.gpu_time);
	out[k++] = env_pair("GPUSCOPE_GPU_TIME", num);
	if (in->o.device_code)
		out[k++] = env_pair("GPUSCOPE_DEVCODE", "1");
	if (in->o.probe_bundle && in->o.probe_out) {
		out[k++] = env_pair("GPUSCOPE_PROBE", in->o.probe_bundle);
		out[k++] = env_pair("GPUSCOPE_PROBE_OUT", in->o.probe_out);
		/* CuPy's kernels with PTX, not cubins, so that they can be instrumented (unless
		 * the user says otherwise) */
		if (!cupy_set)
			out[k++] = env_pair("CUPY_COMPILE_WITH_PTX", "1");
	}
	snprintf(num, sizeof(num), "%llu", (unsigned long long)in->o.ring_bytes);
	out[k++] = env_pair("GPUSCOPE_RING_BYTES", num);
	snprintf(num, sizeof(num), "%u", in->o.stack_every);
	out[k++] = env_pair("GPUSCOPE_STACKS", num);
	snprintf(num, sizeof(num), "%u", in->o.stack_rate);
	out[k++] = env_pair("GPUSCOPE_STACK_RATE", num);
	out[k] = NULL;
	return out;
}

void inject__free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}
