/* SPDX-License-Identifier: MIT */
/* Reading /proc: mappings, names, liveness. */
#ifndef GS_CORE_PROCFS_H
#define GS_CORE_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

struct map_entry {
	__u64 start, end, offset, inode;
	unsigned int dev_major, dev_minor;
	bool exec;
	char path[4096]; /* empty for anonymous mappings */
};

/* Parse one line of /proc/PID/maps; 0 or -EINVAL. */
int maps_parse_line(const char *line, struct map_entry *e);
/* All file-backed executable mappings of pid, one per distinct file. */
int proc_exec_files(pid_t pid, struct map_entry **out, size_t *n);

/* Whether pid maps the file (device major:minor, inode) (a shared-memory ring, say). */
bool proc_maps_file(pid_t pid, unsigned int major, unsigned int minor, __u64 ino);
/* The process that maps that file: `hint` if it does, else the first of the processes of
 * `uid` found in /proc; 0 if none does. */
pid_t proc_find_mapper(pid_t hint, unsigned int major, unsigned int minor, __u64 ino, uid_t uid);

bool proc_exists(pid_t pid);
int proc_comm(pid_t pid, char *buf, size_t n);
int proc_exe(pid_t pid, char *buf, size_t n);
int proc_ppid(pid_t pid);
/* The process (thread group) a thread belongs to; -1 if unknown. */
int proc_tgid(pid_t tid);
/* Whether the process runs as `uid` (its real, effective or file-system user). */
bool proc_runs_as(pid_t pid, uid_t uid);
/* When the process started, on CLOCK_MONOTONIC (ns; to a clock tick): 0, or -errno. */
int proc_start_ns(pid_t pid, __u64 *out);
/* n bytes of another process's memory (pages are faulted in): 0, or -errno (-EFAULT: not
 * all of them readable). */
int proc_read(pid_t pid, __u64 addr, void *buf, size_t n);
/* A NUL-terminated string from another process's memory (pages are faulted in): its
 * length, or -errno. At most n-1 bytes; longer strings are cut. */
int proc_read_str(pid_t pid, __u64 addr, char *buf, size_t n);
/* "/proc/PID/root" + path, so the path resolves in the process's mount namespace. */
void proc_root_path(pid_t pid, const char *path, char *buf, size_t n);
/* The name of a block device (dev_t as the kernel packs it: major << 20 | minor), from
 * sysfs ("vda"), else "MAJOR:MINOR". Returns buf. */
char *block_dev_name(__u32 dev, char *buf, size_t n);

#endif
