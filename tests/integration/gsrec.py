"""A reader of gpuscope recordings for tests: the header, then records framed by their
size field (include/gpuscope/event.h)."""
import struct

HDR = struct.Struct("<HBBIQII")  # type, source, flags, size, ts, pid, tid
EV_KNAME, EV_KALIAS = 2, 3
NS_DRIVER, NS_HOSTFN = 0, 1


def records(path):
    data = open(path, "rb").read()
    assert data[:8] == b"GPUSCOPE", "not a recording"
    off = 16
    while off < len(data):
        rtype, source, flags, size, ts, pid, tid = HDR.unpack_from(data, off)
        yield {"type": rtype, "source": source, "size": size, "ts": ts, "pid": pid,
               "tid": tid, "body": data[off + HDR.size:off + size]}
        off += size


def knames(path):
    """(namespace, handle, name) of every kernel name record."""
    out = []
    for r in records(path):
        if r["type"] == EV_KNAME:
            handle, scope, addr, api, length, ns = struct.unpack_from("<QQQHHB", r["body"])
            out.append((ns, handle, r["body"][32:32 + length].decode()))
    return out


def kaliases(path):
    """(handle, target, target namespace) of every alias record."""
    out = []
    for r in records(path):
        if r["type"] == EV_KALIAS:
            handle, target, api, ns = struct.unpack_from("<QQHB", r["body"])
            out.append((handle, target, ns))
    return out


EV_GPU = 14
GPU = struct.Struct("<QQQQQQQQQHBBiII")


def gpu_records(path):
    """Every GPU timing record (in-process plane) as a dict."""
    out = []
    for r in records(path):
        if r["type"] == EV_GPU:
            (start, end, call_end, func, stream, nbytes, dst, src, ctx, api, kind, flags,
             device, copy_kind, flags2) = GPU.unpack_from(r["body"])
            out.append({"call": r["ts"], "call_end": call_end, "start": start, "end": end,
                        "func": func, "stream": stream, "bytes": nbytes, "api": api,
                        "kind": kind, "flags": flags, "device": device, "pid": r["pid"],
                        "flags2": flags2, "tid": r["tid"]})
    return out
