"""Timing helpers shared by the speed benchmarks: medians of CPU time, targets and verdicts.

Every operation is timed with process CPU time (``time.process_time``), which other
processes on a busy machine disturb far less than wall time; a deterministic operation
(the same reset seed, the same step of a replayed episode) is run ``repeat`` times and the
fastest run kept, and the benchmarks report the median over operations.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

STEPS_PER_S = 30_000  # a tool-call step on every τ² domain and capability env
CAP_RESET_MS = 1.0  # a capability-env reset


def cpu(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()``'s result and the process CPU seconds it took."""
    c = time.process_time()
    out = fn()
    return out, time.process_time() - c


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``fn`` (CPU seconds)."""
    return min(cpu(fn)[1] for _ in range(max(1, repeat)))


def median(samples: Iterable[float]) -> float:
    values = list(samples)
    return statistics.median(values) if values else float("nan")


@dataclass(frozen=True)
class Target:
    """A goal for one figure: ``value >= bound`` (``at_least``) or ``value <= bound``."""

    label: str
    bound: float
    at_least: bool
    unit: str

    def met(self, value: float) -> bool:
        return value >= self.bound if self.at_least else value <= self.bound

    def describe(self) -> str:
        return f"{self.label} {'≥' if self.at_least else '≤'} {self.bound:,g} {self.unit}"

    def verdict(self, value: float) -> str:
        return "met" if self.met(value) else "NOT met"


def report_targets(checks: list[tuple[str, Target, float]]) -> bool:
    """Print one line per (what, target, measured value); True when every target is met."""
    print("\ntargets (medians of process CPU time):")
    ok = True
    for what, target, value in checks:
        good = target.met(value)
        ok &= good
        print(f"  {what:48s} {value:>12,.3f} {target.unit:8s} target {target.describe():28s} {target.verdict(value)}")
    print("all targets met" if ok else "some targets NOT met")
    return ok
