"""Small numeric and process helpers shared by the benchmarks.

Percentiles interpolate linearly between samples (numpy's default), so a p95 of 20 samples is
between the 19th and the 20th. Memory is read from /proc (no psutil dependency); on a system
without /proc those readings are None and the reports say "n/a".
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# The checkout the benchmarks run from (plugins/, characters/ and ../shared live around it):
# they are not installed with Mnemo, so they always run from one.
REPO_ROOT = Path(__file__).resolve().parents[1]


class BenchError(Exception):
    """A benchmark cannot run as asked; the message is one line for the person running it."""


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0-100, not {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: Sequence[float], *, digits: int = 2) -> dict[str, float | int]:
    """p50, p95, mean and max of the values, rounded, with their count."""
    if not values:
        return {"n": 0, "p50": 0.0, "p95": 0.0, "mean": 0.0, "max": 0.0}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), digits),
        "p95": round(percentile(values, 95), digits),
        "mean": round(statistics.fmean(values), digits),
        "max": round(max(values), digits),
    }


def ratio(numerator: float, denominator: float, *, digits: int = 3) -> float | None:
    """numerator / denominator, or None when the denominator is zero."""
    if not denominator:
        return None
    return round(numerator / denominator, digits)


def rate(count: int, seconds: float, *, digits: int = 1) -> float:
    """Items per second; 0.0 when no time passed (nothing was measured)."""
    return round(count / seconds, digits) if seconds > 0 else 0.0


@dataclass
class Stopwatch:
    """Elapsed seconds of a `with` block (perf_counter, so unaffected by clock changes)."""

    started: float = 0.0
    seconds: float = 0.0

    @contextmanager
    def running(self) -> Iterator[Stopwatch]:
        self.started = time.perf_counter()
        try:
            yield self
        finally:
            self.seconds = time.perf_counter() - self.started


# ---------------------------------------------------------------------------------------------
# Memory and CPU of processes


def _status_field(pid: int | str, name: str) -> int | None:
    """A `kB` field of /proc/<pid>/status (VmRSS, VmHWM ...) in bytes, or None."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(f"{name}:"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) >= 2 and parts[1].isdigit() else None
    return None


def rss_bytes(pid: int | str = "self") -> int | None:
    """Resident memory of a process now."""
    return _status_field(pid, "VmRSS")


def peak_rss_bytes() -> int:
    """This process's peak resident memory since it started or since `reset_peak_rss()`."""
    high_water = _status_field("self", "VmHWM")
    if high_water is not None:
        return high_water
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return peak if sys.platform == "darwin" else peak * 1024


def reset_peak_rss() -> bool:
    """Start the peak over from the current RSS (Linux 4.0+), so a benchmark's peak is its
    own and not an earlier one's in the same process. False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def mib(value: int | None) -> float | None:
    return None if value is None else round(value / 2**20, 1)


def cpu_seconds(pid: int | str = "self") -> float | None:
    """User + system CPU seconds a process has used (all its threads), from /proc/<pid>/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; the fields after its ')' are fixed.
    fields = text.rsplit(")", 1)[-1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def child_pids(pid: int) -> list[int]:
    """Direct children of a process (scans /proc; empty where there is none)."""
    children = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(entry.name))
    return sorted(children)
