// SPDX-License-Identifier: MIT
/* Files gpuscope writes for its user (see output.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/output.h"
#include "core/util.h"

/* The user sudo ran gpuscope for, if gpuscope runs as root through sudo: 0, or -1. */
static int sudo_user(uid_t *uid, gid_t *gid)
{
	const char *u = getenv("SUDO_UID"), *g = getenv("SUDO_GID");
	__u32 v, w;

	if (geteuid() != 0 || !u || !g || parse_u32(u, &v) || parse_u32(g, &w) || !v)
		return -1;
	*uid = (uid_t)v;
	*gid = (gid_t)w;
	return 0;
}

FILE *output_open(const char *verb, const char *path, char *err, size_t errlen)
{
	struct stat st;
	uid_t uid;
	gid_t gid;
	FILE *f;
	int fd;

	if (!strcmp(path, "-"))
		return stdout;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "cannot %s '%s': it is a directory (give a file name)", verb,
			 path);
		return NULL;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd >= 0) {
		/* (Ours, new: the sudo user's, as if they had written it.) */
		if (sudo_user(&uid, &gid) == 0 && fchown(fd, uid, gid))
			gs_debug("cannot give %s to uid %u: %s", path, (unsigned)uid,
				 strerror(errno));
	} else if (errno == EEXIST) {
		fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
	}
	if (fd < 0) {
		snprintf(err, errlen, "cannot %s '%s': %s", verb, path, strerror(errno));
		return NULL;
	}
	f = fdopen(fd, "w");
	if (!f) {
		snprintf(err, errlen, "cannot %s '%s': %s", verb, path, strerror(errno));
		close(fd);
	}
	return f;
}

int output_close(FILE *f, const char *what, const char *path, char *err, size_t errlen)
{
	int bad = ferror(f) | (f == stdout ? fflush(f) : fclose(f));

	if (!bad)
		return 0;
	snprintf(err, errlen, "writing %s '%s' failed%s%s", what, path, errno ? ": " : "",
		 errno ? strerror(errno) : "");
	return -1;
}
