"""The chaos table: the rows make chaos wrote (JSON lines), as Markdown, with the machine
and the commit they come from.

    python3 tests/chaos/table.py ROWS.jsonl OUT.md"""
import json
import os
import platform
import subprocess
import sys
import time


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return "%s, %d cores, %.0f GiB, Linux %s" % (cpu, os.cpu_count(), mem, platform.release())


def commit():
    here = os.path.dirname(os.path.abspath(__file__))
    # (A copied tree's index is stale: refreshed, it says "dirty" only for real changes.)
    subprocess.run(["git", "update-index", "-q", "--refresh"], capture_output=True, cwd=here)
    p = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                       text=True, cwd=here)
    return p.stdout.strip() or "?"


def main(rows_path, out_path):
    try:
        rows = [json.loads(line) for line in open(rows_path) if line.strip()]
    except (OSError, ValueError) as e:
        sys.exit("table.py: cannot read the rows in %s: %s" % (rows_path, e))
    if not rows:
        sys.exit("table.py: %s holds no rows (did make chaos run?)" % rows_path)
    out = ["# Chaos suite (issue 19)", "",
           "`make chaos` on %s; commit %s; %s. The test doubles stand for the CUDA driver "
           "(tests/fakes): these rows are about gpuscope, not a GPU." % (
               time.strftime("%Y-%m-%d", time.gmtime()), commit(), machine()), "",
           "*Made*: what the target did (its own count); *kept*: what gpuscope reported "
           "(seen, or counted as dropped); *lost*: what gpuscope had reported as kept and "
           "did not deliver -- the goal is 0 in every row.", "",
           "| scenario | plane | what was tried | times | made | kept | lost | notes |",
           "|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append("| %s | %s | %s | %d | %d | %d | %d | %s |" % (
            r["scenario"], r["plane"], r["tried"], r["times"], r["made"], r["kept"],
            r["lost"], r["notes"]))
    with open(out_path, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: table.py ROWS.jsonl OUT.md")
    main(sys.argv[1], sys.argv[2])
