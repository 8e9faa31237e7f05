/* SPDX-License-Identifier: MIT */
/* Starting the traced command: held at a pipe until its probes are attached. */
#ifndef GS_CORE_SPAWN_H
#define GS_CORE_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

/* Whom the command runs as (run -u USER, as strace has it): that user's uid, primary group
 * and supplementary groups, while gpuscope keeps root. */
struct spawn_user {
	bool set;
	char name[64];
	uid_t uid;
	gid_t gid;
	gid_t groups[64];
	int ngroups;
};

/* USER, a name or a number: 0, or -1 with a message in err. */
int spawn_user_lookup(const char *user, struct spawn_user *u, char *err, size_t errlen);

/*
 * Fork a child that waits for one byte on *go_fd, then (as user, if set) execs exe with
 * argv and envp. A failure to exec comes back as an errno on *err_fd (a close-on-exec pipe),
 * one to become the user as -errno. The child's pid, or -1 (errno set).
 */
pid_t spawn(const char *exe, char **argv, char **envp, const struct spawn_user *user, int *go_fd,
	    int *err_fd);

#endif
