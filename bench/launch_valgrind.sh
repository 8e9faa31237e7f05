# shellcheck shell=bash
# Sourced by bench/launch_lines.sh and bench/launch_pages.sh (from the repository root, $1
# the script's name for its error line): BUILDS (default .output/gpuscope), OUT a folder
# removed at exit, valgrind looked for, bench/launch_cold.c built in OUT on the test double.
BUILDS=${BUILDS:-.output/gpuscope}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
command -v valgrind >/dev/null || { echo "$1: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
gcc -O2 -Itests/fakes bench/launch_cold.c -o "$OUT/launch_cold" -L.output/fakes -lcuda
