#!/bin/bash
# What a uprobe costs by the instruction it sits on (core/elfsym.h's elf_uprobe_skip): builds
# bench/uprobe_sites.c, runs it without probes and with a tracefs uprobe on each site, and
# prints ns a call for both. Root; tracefs mounted at /sys/kernel/tracing (mounted if not).
#   bash bench/uprobe_sites.sh [N]
set -eu
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs tracefs $T
w=$(mktemp -d)
trap 'echo 0 >$T/events/uprobes/enable 2>/dev/null; grep -q gs_site $T/uprobe_events && sed -n "s/^p:\(uprobes\/gs_site[0-9]*\) .*/-:\1/p" $T/uprobe_events >>$T/uprobe_events; rm -rf "$w"' EXIT
cc -O1 -o "$w/sites" bench/uprobe_sites.c
echo "== no probes"
"$w/sites" "${1:-20000}"
syms=(s_endbr s_push s_push_r15 s_nop s_call s_sub s_test)
"$w/sites" --sites | while read -r i at; do
	a=$(nm "$w/sites" | awk -v s="${syms[$i]}" '$3 == s { print $1 }')
	printf 'p:gs_site%s %s:0x%x\n' "$i" "$w/sites" $((0x$a + at)) >>$T/uprobe_events
done
for i in "${!syms[@]}"; do echo 1 >$T/events/uprobes/gs_site$i/enable; done
echo "== a uprobe on each site"
"$w/sites" "${1:-20000}"
