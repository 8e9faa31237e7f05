"""Perfetto traces written by gpuscope, decoded by protoc against tests/proto/perfetto_subset.proto
and turned into tracks, slices, instants, counters and flows (as a trace viewer sees them)."""
import collections
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO = os.path.join(ROOT, "tests", "proto", "perfetto_subset.proto")

TOKEN = re.compile(r'\s*(?:(\})|([A-Za-z_][A-Za-z0-9_]*)\s*(\{|:\s*("(?:[^"\\]|\\.)*"|[^\s{}]+)))')


def _unescape(s):
    # protoc's text format escapes bytes as octal (\ooo) and the usual C escapes.
    out = bytearray()
    i = 0
    raw = s.encode("latin-1", "backslashreplace")
    while i < len(raw):
        c = raw[i]
        if c != 0x5C:
            out.append(c)
            i += 1
            continue
        n = raw[i + 1:i + 2]
        if n.isdigit():
            j = i + 1
            while j < len(raw) and j < i + 4 and chr(raw[j]).isdigit():
                j += 1
            out.append(int(raw[i + 1:j], 8))
            i = j
            continue
        out += {b"n": b"\n", b"t": b"\t", b"r": b"\r", b'"': b'"', b"'": b"'",
                b"\\": b"\\"}.get(n, n)
        i += 2
    return out.decode("utf-8", "replace")


def parse_text(text):
    """protoc's text format as nested dicts; every field is a list (repeated or not)."""
    root = collections.defaultdict(list)
    stack = [root]
    pos = 0
    while True:
        m = TOKEN.match(text, pos)
        if not m:
            if text[pos:].strip():
                raise ValueError("cannot parse protoc output at %r" % text[pos:pos + 80])
            break
        pos = m.end()
        if m.group(1):
            stack.pop()
            continue
        name, opener, value = m.group(2), m.group(3), m.group(4)
        if opener == "{":
            child = collections.defaultdict(list)
            stack[-1][name].append(child)
            stack.append(child)
        elif value.startswith('"'):
            stack[-1][name].append(_unescape(value[1:-1]))
        else:
            try:
                v = int(value)
            except ValueError:
                try:
                    v = float(value)
                except ValueError:
                    v = value  # an enum's name
            stack[-1][name].append(v)
    if len(stack) != 1:
        raise ValueError("unbalanced braces in protoc output")
    return root


def decode(path):
    with open(path, "rb") as f:
        p = subprocess.run(["protoc", "--proto_path=" + os.path.dirname(PROTO),
                            "--decode=perfetto.protos.Trace", os.path.basename(PROTO)],
                           stdin=f, capture_output=True, text=True)
    if p.returncode:
        raise AssertionError("protoc cannot decode %s: %s" % (path, p.stderr))
    return parse_text(p.stdout)


def one(msg, field, default=None):
    v = msg.get(field)
    return v[0] if v else default


class Trace:
    """Tracks by uuid, events in time order with names and arguments resolved."""

    def __init__(self, path):
        self.packets = decode(path)["packet"]
        self.tracks = {}
        interned = {"cat": {}, "name": {}, "arg": {}, "value": {}}
        self.intern_counts = collections.Counter()
        self.raw = []
        for i, p in enumerate(self.packets):
            assert one(p, "trusted_packet_sequence_id") == 1
            if i == 0:
                assert one(p, "sequence_flags") == 1  # incremental state cleared first
            for d in p.get("interned_data", []):
                for field, table in (("event_categories", "cat"), ("event_names", "name"),
                                     ("debug_annotation_names", "arg"),
                                     ("debug_annotation_string_values", "value")):
                    for e in d.get(field, []):
                        iid = one(e, "iid")
                        assert iid not in interned[table], "iid %d reused" % iid
                        s = one(e, "name", one(e, "str"))
                        interned[table][iid] = s
                        self.intern_counts[(table, s)] += 1
            for t in p.get("track_descriptor", []):
                uuid = one(t, "uuid")
                proc, thread = one(t, "process"), one(t, "thread")
                self.tracks[uuid] = {
                    "uuid": uuid, "parent": one(t, "parent_uuid"),
                    "name": one(t, "name") or (proc and one(proc, "process_name")) or
                    (thread and one(thread, "thread_name")),
                    "pid": one(proc, "pid") if proc else one(thread, "pid") if thread else None,
                    "tid": one(thread, "tid") if thread else None,
                    "cmdline": proc.get("cmdline", []) if proc else [],
                    "kind": "process" if proc else "thread" if thread else
                    "counter" if "counter" in t else "track",
                    "unit": one(one(t, "counter"), "unit") if "counter" in t else None}
            for e in p.get("track_event", []):
                assert one(p, "sequence_flags") == 2
                ev = {"ts": one(p, "timestamp"), "type": one(e, "type"),
                      "track": one(e, "track_uuid"),
                      "name": interned["name"].get(one(e, "name_iid")),
                      "cat": interned["cat"].get(one(e, "category_iids")),
                      "value": one(e, "double_counter_value"),
                      "flow_out": e.get("flow_ids", []),
                      "flow_in": e.get("terminating_flow_ids", []), "args": {}}
                for a in e.get("debug_annotations", []):
                    key = interned["arg"][one(a, "name_iid")]
                    if "string_value_iid" in a:
                        ev["args"][key] = interned["value"][one(a, "string_value_iid")]
                    else:
                        ev["args"][key] = one(a, "uint_value", one(a, "int_value", one(
                            a, "pointer_value", one(a, "double_value"))))
                assert ev["track"] in self.tracks, "event on an undeclared track"
                self.raw.append(ev)
        self._pair()

    def _pair(self):
        """Slices from begin/end pairs per track (as the trace processor sorts: by time,
        stably), instants and counters."""
        self.slices, self.instants, self.counters = [], [], collections.defaultdict(list)
        open_ = collections.defaultdict(list)
        for ev in sorted(self.raw, key=lambda e: e["ts"]):
            t = ev["type"]
            if t == "TYPE_SLICE_BEGIN":
                open_[ev["track"]].append(ev)
            elif t == "TYPE_SLICE_END":
                b = open_[ev["track"]].pop()
                b = dict(b, dur=ev["ts"] - b["ts"])
                self.slices.append(b)
            elif t == "TYPE_INSTANT":
                self.instants.append(ev)
            elif t == "TYPE_COUNTER":
                self.counters[ev["track"]].append((ev["ts"], ev["value"]))
        assert not any(open_.values()), "slices left open"

    def track_named(self, name):
        return [t for t in self.tracks.values() if t["name"] == name]

    def on(self, pred):
        return [s for s in self.slices if pred(self.tracks[s["track"]])]
