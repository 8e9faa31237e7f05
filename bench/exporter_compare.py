"""Compare gpuscope exporter scrapes with nvidia-smi readings taken at the same rate
(bench/exporter_gpu.sh's output directory). Prints a table; writes summary.json there.

    python3 bench/exporter_compare.py DIR
"""
import csv
import io
import json
import re
import statistics
import sys
import tarfile

FIELDS = [  # (exporter metric, scale to nvidia-smi's unit, nvidia-smi column)
    ("DCGM_FI_DEV_GPU_UTIL", 1, "utilization.gpu [%]"),
    ("DCGM_FI_DEV_FB_USED", 1, "memory.used [MiB]"),
    ("DCGM_FI_DEV_POWER_USAGE", 1, "power.draw [W]"),
    ("DCGM_FI_DEV_GPU_TEMP", 1, "temperature.gpu"),
    ("DCGM_FI_DEV_SM_CLOCK", 1, "clocks.current.sm [MHz]"),
    ("DCGM_FI_DEV_MEM_CLOCK", 1, "clocks.current.memory [MHz]"),
]


def scrape_values(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(\w+)(\{[^}]*\})? (\S+)$', line)
        if m and not line.startswith("#"):
            out.setdefault(m.group(1), float(m.group(3)))
    return out


def main(d):
    scrapes = []
    with tarfile.open(d + "/metrics.tar.gz") as t:
        for m in sorted(t.getmembers(), key=lambda m: int(re.findall(r"\d+", m.name)[-1])):
            scrapes.append(scrape_values(t.extractfile(m).read().decode()))
    rows = list(csv.DictReader(io.StringIO(open(d + "/smi.csv").read()),
                               skipinitialspace=True))
    busy = [r for r in rows if float(r["utilization.gpu [%]"]) > 0]
    summary = {"scrapes": len(scrapes), "smi_rows": len(rows), "smi_busy_rows": len(busy)}
    print("%-26s %14s %14s" % ("field", "exporter p50", "nvidia-smi p50"))
    for name, scale, col in FIELDS:
        ex = [s[name] * scale for s in scrapes if name in s and s.get("DCGM_FI_DEV_GPU_UTIL", 0) > 0]
        smi = [float(r[col]) for r in busy]
        summary[name] = {"exporter_p50": statistics.median(ex), "smi_p50": statistics.median(smi),
                         "exporter_n": len(ex), "smi_n": len(smi)}
        print("%-26s %14.2f %14.2f" % (name, summary[name]["exporter_p50"],
                                        summary[name]["smi_p50"]))
    for name in ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                 "DCGM_FI_PROF_DRAM_ACTIVE", "gpuscope_gpu_process_memory_bytes"):
        v = [s[name] for s in scrapes if name in s and s.get("DCGM_FI_DEV_GPU_UTIL", 0) > 0]
        summary[name] = {"p50": statistics.median(v), "n": len(v)} if v else None
        print("%-36s %s" % (name, summary[name]))
    json.dump(summary, open(d + "/summary.json", "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
