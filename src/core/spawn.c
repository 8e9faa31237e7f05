// SPDX-License-Identifier: MIT
/* Starting the traced command (see spawn.h). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/spawn.h"
#include "core/util.h"

int spawn_user_lookup(const char *user, struct spawn_user *u, char *err, size_t errlen)
{
	struct passwd *pw;
	__u32 id;

	memset(u, 0, sizeof(*u));
	errno = 0;
	pw = parse_u32(user, &id) == 0 ? getpwuid((uid_t)id) : getpwnam(user);
	if (!pw) {
		snprintf(err, errlen, "no user '%s'%s%s", user, errno ? ": " : "",
			 errno ? strerror(errno) : "");
		return -1;
	}
	u->set = true;
	gs_strlcpy(u->name, pw->pw_name, sizeof(u->name));
	u->uid = pw->pw_uid;
	u->gid = pw->pw_gid;
	/* (Looked up here: after fork, only system calls.) */
	u->ngroups = (int)(sizeof(u->groups) / sizeof(u->groups[0]));
	if (getgrouplist(pw->pw_name, pw->pw_gid, u->groups, &u->ngroups) < 0) {
		snprintf(err, errlen, "user '%s' is in more than %zu groups", user,
			 sizeof(u->groups) / sizeof(u->groups[0]));
		return -1;
	}
	return 0;
}

/* In the child: the user's groups, then its group, then its user (last: it gives up root). */
static int become(const struct spawn_user *u)
{
	if (setgroups((size_t)u->ngroups, u->groups) || setgid(u->gid) || setuid(u->uid))
		return -1;
	return 0;
}

pid_t spawn(const char *exe, char **argv, char **envp, const struct spawn_user *user, int *go_fd,
	    int *err_fd)
{
	int go[2], errp[2];
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) || pipe2(errp, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char c;
		int e;

		close(go[1]);
		close(errp[0]);
		signal(SIGPIPE, SIG_DFL);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		if (user && user->set && become(user)) {
			e = -errno; /* (negative: not the exec) */
			if (write(errp[1], &e, sizeof(e)) < 0)
				_exit(127);
			_exit(127);
		}
		execve(exe, argv, envp);
		e = errno;
		if (write(errp[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(errp[1]);
	*go_fd = go[1];
	*err_fd = errp[0];
	return pid;
}
