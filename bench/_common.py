"""Helpers shared by the bench scripts: interleaved timing with medians, load checks, peak-RSS
sampling and a plain-text table. Run the scripts from the repository root
(``python bench/<script>.py``); this module puts the root on ``sys.path``."""
from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import explorer  # noqa: E402,F401 - before torch: its OpenMP settings apply only then


def load_average() -> float:
    """The 1-minute load average (0.0 where the OS does not report one)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


class OthersCPU:
    """The share of the machine's CPU time that other processes used while the block ran
    (Linux: /proc/stat minus this process's own time; None elsewhere). Unlike the load
    average, it does not count the benchmark's own threads."""

    def __enter__(self):
        self.start = self._sample()
        return self

    def __exit__(self, *exc):
        end = self._sample()
        self.share = None
        if self.start and end:
            total, busy, mine = (b - a for a, b in zip(self.start, end))
            self.share = max(0.0, (busy - mine) / total) if total > 0 else None
        return False

    @staticmethod
    def _sample():
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
            with open("/proc/self/stat") as f:
                own = f.read().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)      # idle + iowait
        total = sum(fields[:8])                                         # guest time is in user
        return total, total - idle, int(own[11]) + int(own[12])          # utime + stime


def wait_for_quiet(max_load: float, max_wait_s: float = 60.0) -> float:
    """Wait (up to ``max_wait_s``) until the 1-minute load drops below ``max_load``; return it.
    Other processes on a 2-core machine distort timings; this makes that visible."""
    deadline = time.monotonic() + max_wait_s
    load = load_average()
    while load >= max_load and time.monotonic() < deadline:
        time.sleep(2.0)
        load = load_average()
    return load


def interleaved(variants: dict, repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Time each zero-argument callable ``repeats`` times, one run of each in turn (A B C A B C
    ...), so a burst of load from elsewhere hits every variant alike. Returns seconds per run."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            started = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - started)
    return times


def median(values) -> float:
    return statistics.median(values)


def paired_ratios(times: dict[str, list[float]], base: str) -> dict[str, float]:
    """Median over rounds of (variant time / base time in the same round): robust to load that
    changes from one round to the next."""
    out = {}
    for name, ts in times.items():
        out[name] = statistics.median(t / b for t, b in zip(ts, times[base]))
    return out


def rss_bytes() -> int:
    """Resident set size of this process now (Linux: /proc/self/statm)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakRSS:
    """``with PeakRSS() as p: work()`` -> ``p.increase``: the highest RSS seen while ``work``
    ran (sampled every millisecond) minus the RSS before it."""

    def __init__(self, interval_s: float = 0.001):
        self.interval_s = interval_s
        self.before = self.peak = 0
        self._stop = threading.Event()

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(self.interval_s)

    def __enter__(self):
        self.before = self.peak = rss_bytes()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def increase(self) -> int:
        return self.peak - self.before


def mb(n_bytes: float) -> str:
    return f"{n_bytes / 1e6:,.1f} MB"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    print(line)
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
