"""The chaos suite's two sizes and its table.

`make test` runs each scenario small (GS_CHAOS unset: a few seconds each); `make chaos`
runs them at the issue's sizes (GS_CHAOS=long) and writes one row per scenario and plane
into GS_CHAOS_TABLE (JSON lines), which tests/chaos/table.py turns into the table in
bench/results/."""
import json
import os
import time

LONG = os.environ.get("GS_CHAOS") == "long"


def size(quick, long):
    return long if LONG else quick


def row(scenario, plane, tried, times, made, kept, lost, notes=""):
    """One line of the table: what was tried, how often, what the target made, what
    gpuscope kept, and what it lost of what it had reported as kept (the goal: 0)."""
    path = os.environ.get("GS_CHAOS_TABLE")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps({"scenario": scenario, "plane": plane, "tried": tried,
                            "times": times, "made": made, "kept": kept, "lost": lost,
                            "notes": notes, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                time.gmtime())}) + "\n")
