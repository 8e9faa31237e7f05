/* SPDX-License-Identifier: MIT */
/* Starting the traced command: held at a pipe until its probes are attached. */
#ifndef GS_CORE_SPAWN_H
#define GS_CORE_SPAWN_H

#include <sys/types.h>

/*
 * Fork a child that waits for one byte on *go_fd, then execs exe with argv and envp. An
 * exec failure comes back as an errno on *err_fd (a close-on-exec pipe). The child's pid,
 * or -1 (errno set).
 */
pid_t spawn(const char *exe, char **argv, char **envp, int *go_fd, int *err_fd);

#endif
