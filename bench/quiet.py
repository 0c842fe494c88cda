"""Keeping other processes' CPU use out of bench/compare.py's numbers.

On a small shared machine a compiler running next to a benchmark can triple its time. So before
each benchmark process we wait (a bounded time) for the CPUs to go idle, and while it runs we
measure how much CPU time *other* processes took: all busy time in /proc/stat minus what our
child used (getrusage of children). A run with too much foreign load is repeated.
"""
import os
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1


def _cpu_busy_seconds():
    """Busy CPU seconds of the whole machine since boot (every CPU summed), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    vals = [int(v) for v in fields[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    # guest time is already counted in user time, so only the first eight fields are summed.
    return (sum(vals[:8]) - idle) / CLK_TCK


def _children_cpu_seconds():
    t = os.times()
    return t.children_user + t.children_system


class ForeignLoad:
    """Context manager: .fraction is the share of all CPUs that processes other than our children
    kept busy while the block ran (0.0 idle machine, 1.0 every CPU taken by others)."""

    def __enter__(self):
        self.wall0 = time.monotonic()
        self.busy0 = _cpu_busy_seconds()
        self.child0 = _children_cpu_seconds()
        self.fraction = None
        self.wall = 0.0
        return self

    def __exit__(self, *exc):
        busy1 = _cpu_busy_seconds()
        wall = self.wall = time.monotonic() - self.wall0
        if self.busy0 is None or busy1 is None or wall <= 0:
            return False
        foreign = (busy1 - self.busy0) - (_children_cpu_seconds() - self.child0)
        self.fraction = max(0.0, min(1.0, foreign / (wall * NCPU)))
        return False


def wait_until_idle(max_wait_s, threshold, sample_s=1.0):
    """Waits until the machine's busy share over `sample_s` is under `threshold`, for at most
    `max_wait_s`; returns the last busy share measured (None where /proc/stat is unreadable)."""
    deadline = time.monotonic() + max_wait_s
    while True:
        b0 = _cpu_busy_seconds()
        time.sleep(sample_s)
        b1 = _cpu_busy_seconds()
        if b0 is None or b1 is None:
            return None
        busy = (b1 - b0) / (sample_s * NCPU)
        if busy < threshold or time.monotonic() >= deadline:
            return busy
