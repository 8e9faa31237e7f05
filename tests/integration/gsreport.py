"""Read gpuscope JSON reports in the flat key form of the workloads' ground truth
(tests/workloads/truth.h), so a test compares the two dictionaries key by key."""
import json

KINDS = ("device", "managed", "host")


def flatten(report):
    """Map a gpuscope JSON report to truth keys: every key a workload can record."""
    flat = {}
    k = report["kernels"]
    flat["launches"] = k["launches"]
    flat["graph_launches"] = k["graph_launches"]
    flat["graph_launches_conditional"] = k["graph_launches_conditional"]
    flat["graph_nodes_lost"] = k["graph_nodes_lost"]
    for api, n in k["by_api"].items():
        if api.startswith("cuGraphLaunch"):
            continue
        flat["launch_api:" + api] = n
    for kern in k["list"]:
        name = kern["name"] if kern["name"] else "unknown:" + kern["handle"]
        flat["launch:" + name] = flat.get("launch:" + name, 0) + kern["launches"]
        if kern["captured"]:
            flat["captured:" + name] = kern["captured"]
        if kern["graph_runs"]:
            flat["graph_runs:" + name] = kern["graph_runs"]
    for direction, c in report["copies"].items():
        flat["copy:%s:count" % direction] = c["count"]
        flat["copy:%s:bytes" % direction] = c["bytes"]
    for api, s in report["sync"].items():
        flat["sync:" + api] = s["calls"]
        if s["not_ready"]:
            flat["not_ready:" + api] = s["not_ready"]
    mem = report["memory"]
    for api, a in mem["by_api"].items():
        flat["alloc:" + api] = a["calls"]
    for kind in KINDS:
        flat["outstanding:" + kind] = mem["outstanding"]["bytes"][kind]
    flat["peak:device"] = mem["peak_bytes"]["device"]
    for p in report["processes"]:  # (summed over processes: one in the workloads that say)
        for d in p["devices"]:
            dev = "?" if d["device"] is None else d["device"]
            for key, v in (("mem:dev%s:peak" % dev, d["peak_bytes"]),
                           ("mem:dev%s:end" % dev, d["outstanding_bytes"])):
                flat[key] = flat.get(key, 0) + v
    for e in report["errors"]:
        key = "error:%s:%d" % (e["api"], e["result"])
        flat[key] = flat.get(key, 0) + e["count"]
    for op, s in report["nccl"]["ops"].items():
        flat["nccl:%s:count" % op] = s["calls"]
        if s["bytes"]:
            flat["nccl:%s:bytes" % op] = s["bytes"]
    flat["processes"] = len(report["processes"])
    return flat


def compare(truth, report, keys=None, ignore=()):
    """Differences between truth and the report, as a list of strings (empty: equal)."""
    flat = flatten(report)
    diffs = []
    for key in sorted(keys if keys is not None else truth):
        if any(key.startswith(p) for p in ignore):
            continue
        want = truth.get(key, 0)
        got = flat.get(key, 0)
        if want != got:
            diffs.append("%s: truth %s, gpuscope %s" % (key, want, got))
    return diffs


def load(path):
    with open(path) as f:
        return json.load(f)
