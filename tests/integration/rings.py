"""In-process rings as a hostile local user makes them (core/shmring.h's layout): for the
tests that check the agent and `run --inject` trust nothing in a ring but what they can
prove."""
import mmap
import os
import struct

HDR = 4096
MIN_DATA = 64 << 10
EV_MAX = 25
# struct shmring_hdr: magic, version, hdr_size, data_size, pid, pad, created_ns; head at 64,
# tail at 128, drops[GS_EV_MAX] at 192, unwrapped, gates_forced, time_capped, time_lost.
OFF_CREATED, OFF_DROPS, OFF_UNWRAPPED, OFF_GATES = 32, 192, 192 + 8 * EV_MAX, 200 + 8 * EV_MAX


def header(pid, data_size=MIN_DATA, created_ns=0, drops=0, unwrapped=0):
    h = bytearray(HDR)
    struct.pack_into("<8sIIQII Q", h, 0, b"GSRING01", 1, HDR, data_size, pid, 0, created_ns)
    for t in range(EV_MAX):
        struct.pack_into("<Q", h, OFF_DROPS + 8 * t, drops)
    struct.pack_into("<Q", h, OFF_UNWRAPPED, unwrapped)
    return bytes(h)


class Ring:
    """A ring file, written whole and mapped by this process (as the library's would be),
    named as the library names it: <pid>.ring, or with the agent <pid>-<16 hex>.ring."""

    def __init__(self, directory, pid=None, agent=True, uid=None, mapped=True, **hdr):
        self.pid = pid if pid is not None else os.getpid()
        name = "%d-%016x.ring" % (self.pid, id(self)) if agent else "%d.ring" % self.pid
        self.path = os.path.join(str(directory), name)
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(header(self.pid, **hdr))
            f.truncate(HDR + hdr.get("data_size", MIN_DATA))
        if uid is not None:
            os.chown(tmp, uid, -1)
        os.chmod(tmp, 0o600)
        self.map = None
        if mapped:  # (before it appears under its name, as the library does)
            self.f = open(tmp, "r+b")
            self.map = mmap.mmap(self.f.fileno(), 0)
        os.rename(tmp, self.path)

    def truncate(self):
        """Cut the file under everyone's mapping (a touch of it then raises SIGBUS)."""
        os.truncate(self.path, 0)

    def close(self):
        if self.map is not None:
            self.map.close()
            self.f.close()
            self.map = None
