// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/procfs.h"
#include "core/util.h"

int maps_parse_line(const char *line, struct map_entry *e)
{
	unsigned long long start, end, off, ino;
	unsigned int maj, min;
	char perms[8];
	int pos = 0;

	memset(e, 0, sizeof(*e));
	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj, &min,
		   &ino, &pos) != 7 ||
	    end < start || strlen(perms) != 4)
		return -EINVAL;
	e->start = start;
	e->end = end;
	e->offset = off;
	e->dev_major = maj;
	e->dev_minor = min;
	e->inode = ino;
	e->exec = perms[2] == 'x';
	if (pos > 0 && line[pos] == '/') {
		size_t n = strcspn(line + pos, "\n");

		if (n >= sizeof(e->path))
			return -EINVAL;
		memcpy(e->path, line + pos, n);
		e->path[n] = 0;
	}
	return 0;
}

bool proc_maps_file(pid_t pid, unsigned int major, unsigned int minor, __u64 ino)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	bool found = false;
	FILE *f;

	if (pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && getline(&line, &cap, f) > 0) {
		unsigned long long i;
		unsigned int ma, mi;

		/* start-end perms offset major:minor inode [path] */
		found = sscanf(line, "%*x-%*x %*s %*x %x:%x %llu", &ma, &mi, &i) == 3 && i == ino &&
			ma == major && mi == minor;
	}
	free(line);
	fclose(f);
	return found;
}

pid_t proc_find_mapper(pid_t hint, unsigned int major, unsigned int minor, __u64 ino, uid_t uid)
{
	struct stat st;
	struct dirent *de;
	pid_t found = 0;
	DIR *d;

	if (proc_maps_file(hint, major, minor, ino))
		return hint;
	d = opendir("/proc");
	if (!d)
		return 0;
	while (!found && (de = readdir(d))) {
		long pid = strtol(de->d_name, NULL, 10);

		/* (Only the processes of that user: another user's many processes cost nothing.) */
		if (pid > 0 && pid != hint && fstatat(dirfd(d), de->d_name, &st, 0) == 0 &&
		    st.st_uid == uid && proc_maps_file((pid_t)pid, major, minor, ino))
			found = (pid_t)pid;
	}
	closedir(d);
	return found;
}

int proc_exec_files(pid_t pid, struct map_entry **out, size_t *n)
{
	char path[64], line[8192];
	struct map_entry *v = NULL, e;
	size_t len = 0, cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		bool dup = false;

		if (maps_parse_line(line, &e) || !e.exec || !e.path[0] || !e.inode)
			continue;
		for (size_t i = 0; i < len && !dup; i++)
			dup = v[i].inode == e.inode && v[i].dev_major == e.dev_major &&
			      v[i].dev_minor == e.dev_minor;
		if (dup)
			continue;
		if (len == cap) {
			cap = cap ? cap * 2 : 32;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[len++] = e;
	}
	fclose(f);
	*out = v;
	*n = len;
	return 0;
}

bool proc_exists(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

static int read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -errno;
	buf[r] = 0;
	return (int)r;
}

int proc_comm(pid_t pid, char *buf, size_t n)
{
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	r = read_small(path, buf, n);
	if (r < 0)
		return r;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

int proc_exe(pid_t pid, char *buf, size_t n)
{
	char path[64];
	ssize_t r;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	r = readlink(path, buf, n - 1);
	if (r < 0)
		return -errno;
	buf[r] = 0;
	return 0;
}

int proc_ppid(pid_t pid)
{
	char path[64], buf[1024], *p;
	int ppid;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	/* The command name may contain spaces and parentheses: parse after the last ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return -1;
	return ppid;
}

int proc_tgid(pid_t tid)
{
	char path[64], buf[2048], *p;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	p = strstr(buf, "\nTgid:");
	return p ? atoi(p + 6) : -1;
}

bool proc_runs_as(pid_t pid, uid_t uid)
{
	char path[64], buf[2048], *p;
	unsigned long u[4];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_small(path, buf, sizeof(buf)) < 0)
		return false;
	p = strstr(buf, "\nUid:");
	if (!p || sscanf(p + 5, "%lu %lu %lu %lu", &u[0], &u[1], &u[2], &u[3]) != 4)
		return false;
	return u[0] == uid || u[1] == uid || u[3] == uid;
}

int proc_start_ns(pid_t pid, __u64 *out)
{
	char path[64], buf[1024], *p;
	unsigned long long ticks;
	struct timespec boot, mono;
	__s64 since_boot, offset;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, sizeof(buf)) < 0)
		return -ESRCH;
	/* After the command's ')': field 3 (state) on; the start time is field 22, in clock
	 * ticks since boot (CLOCK_BOOTTIME, which runs on through a suspend). */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1,
			 " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
			 "%*d %llu",
			 &ticks) != 1)
		return -EINVAL;
	clock_gettime(CLOCK_BOOTTIME, &boot);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	since_boot = (__s64)(ticks * (1000000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK)));
	offset = (boot.tv_sec - mono.tv_sec) * 1000000000LL + (boot.tv_nsec - mono.tv_nsec);
	*out = since_boot > offset ? (__u64)(since_boot - offset) : 0;
	return 0;
}

int proc_read(pid_t pid, __u64 addr, void *buf, size_t n)
{
	struct iovec local = { buf, n }, remote = { (void *)(uintptr_t)addr, n };
	ssize_t r = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (r < 0)
		return -errno;
	return (size_t)r == n ? 0 : -EFAULT;
}

int proc_read_str(pid_t pid, __u64 addr, char *buf, size_t n)
{
	size_t got = 0;

	if (!n)
		return -EINVAL;
	/* Page by page: the string may end just before an unmapped page. */
	while (got + 1 < n) {
		size_t to_page = 4096 - ((addr + got) & 4095);
		size_t want = GS_MIN(to_page, n - 1 - got);
		struct iovec local = { buf + got, want };
		struct iovec remote = { (void *)(uintptr_t)(addr + got), want };
		ssize_t r = process_vm_readv(pid, &local, 1, &remote, 1, 0);
		char *nul;

		if (r <= 0) {
			if (!got)
				return r < 0 ? -errno : -EFAULT;
			break;
		}
		nul = memchr(buf + got, 0, (size_t)r);
		if (nul)
			return (int)(nul - buf);
		got += (size_t)r;
	}
	buf[got] = 0;
	return (int)got;
}

void proc_root_path(pid_t pid, const char *path, char *buf, size_t n)
{
	snprintf(buf, n, "/proc/%d/root%s", (int)pid, path);
}

char *block_dev_name(__u32 dev, char *buf, size_t n)
{
	unsigned int major = dev >> 20, minor = dev & 0xfffff;
	char path[64], line[256];
	FILE *f;

	snprintf(buf, n, "%u:%u", major, minor);
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/uevent", major, minor);
	f = fopen(path, "re");
	if (!f)
		return buf;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "DEVNAME=", 8)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(buf, n, "%s", line + 8);
			break;
		}
	fclose(f);
	return buf;
}
