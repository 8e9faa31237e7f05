/* SPDX-License-Identifier: MIT */
#ifndef GS_CMD_CMDS_H
#define GS_CMD_CMDS_H

int cmd_run(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_exporter(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_fatbin(int argc, char **argv);
int cmd_bpf2ptx(int argc, char **argv);
int cmd_probe(int argc, char **argv);

#endif
