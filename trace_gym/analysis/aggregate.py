"""TRACE's contrastive selection of capabilities.

For one labeling run and one capability, over the trajectories split into *failed*
(reward below the success threshold) and *passed*:

* coverage ``Cov = #LACKING on failed / #failed``;
* error rates ``ER- = LACKING / (LACKING + PRESENT)`` on failed, ``ER+`` the same on passed
  (0 when the capability was never needed in that group);
* contrastive gap ``Δ = ER- − ER+`` (in [-1, 1]).

A run *passes* a capability when ``Cov ≥ ρ`` and ``Δ ≥ δ``.  A capability is selected
when it passes in at least ``K`` of the ``N`` runs; selected capabilities are ranked by
their mean Δ over runs.  Paper defaults: ρ = 0.10, δ = 0.20, K = 8, N = 10.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.outcome import is_success
from .labels import LabelRun, LabelValue

__all__ = ["Thresholds", "CapabilityRunStats", "CapabilitySummary", "AggregationResult", "run_stats", "aggregate"]


@dataclass(frozen=True)
class Thresholds:
    rho: float = 0.10    # minimum coverage
    delta: float = 0.20  # minimum contrastive gap
    k: int = 8           # runs a capability must pass
    success: float = 1.0  # the success threshold: trace_gym.core.outcome.is_success(reward, success) counts as passed

    def __post_init__(self) -> None:
        if not 0.0 <= self.rho <= 1.0:
            raise ValueError(f"rho must be in [0, 1], got {self.rho}")
        if not -1.0 <= self.delta <= 1.0:
            raise ValueError(f"delta must be in [-1, 1], got {self.delta}")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")


@dataclass(frozen=True)
class CapabilityRunStats:
    capability: str
    run: int
    lacking_failed: int
    present_failed: int
    lacking_passed: int
    present_passed: int
    n_failed: int
    n_passed: int

    @property
    def coverage(self) -> float:
        return self.lacking_failed / self.n_failed if self.n_failed else 0.0

    @property
    def er_minus(self) -> float:
        d = self.lacking_failed + self.present_failed
        return self.lacking_failed / d if d else 0.0

    @property
    def er_plus(self) -> float:
        d = self.lacking_passed + self.present_passed
        return self.lacking_passed / d if d else 0.0

    @property
    def gap(self) -> float:
        return self.er_minus - self.er_plus

    def passes(self, t: Thresholds) -> bool:
        return self.coverage >= t.rho and self.gap >= t.delta

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(coverage=self.coverage, er_minus=self.er_minus, er_plus=self.er_plus, gap=self.gap)
        return d


@dataclass
class CapabilitySummary:
    capability: str
    runs_passed: int
    n_runs: int
    mean_gap: float
    mean_coverage: float
    selected: bool
    per_run: list[CapabilityRunStats] = field(default_factory=list)

    @property
    def selection_frequency(self) -> float:
        return self.runs_passed / self.n_runs if self.n_runs else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "capability": self.capability,
            "runs_passed": self.runs_passed,
            "n_runs": self.n_runs,
            "selection_frequency": self.selection_frequency,
            "mean_gap": self.mean_gap,
            "mean_coverage": self.mean_coverage,
            "selected": self.selected,
            "per_run": [s.to_dict() for s in self.per_run],
        }


@dataclass
class AggregationResult:
    thresholds: Thresholds
    summaries: list[CapabilitySummary]  # every capability, ranked: selected first, then by mean gap

    @property
    def selected(self) -> list[str]:
        return [s.capability for s in self.summaries if s.selected]

    def to_dict(self) -> dict[str, Any]:
        return {"thresholds": asdict(self.thresholds), "selected": self.selected,
                "capabilities": [s.to_dict() for s in self.summaries]}


def run_stats(run: LabelRun, rewards: Mapping[str, float], capabilities: Iterable[str], success: float = 1.0) -> list[CapabilityRunStats]:
    """Per-capability counts for one labeling run.  ``rewards`` maps trajectory id → reward."""
    failed = {t for t, r in rewards.items() if not is_success(r, success)}
    n_failed, n_passed = len(failed), len(rewards) - len(failed)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for lab in run.labels:
        if lab.trajectory_id not in rewards or lab.value is LabelValue.NA:
            continue
        c = counts[lab.capability]
        is_failed = lab.trajectory_id in failed
        idx = (0 if lab.value is LabelValue.LACKING else 1) + (0 if is_failed else 2)
        c[idx] += 1
    return [
        CapabilityRunStats(cap, run.run, *counts[cap], n_failed, n_passed)  # type: ignore[arg-type]
        for cap in capabilities
    ]


def aggregate(runs: list[LabelRun], rewards: Mapping[str, float], capabilities: list[str], thresholds: Thresholds = Thresholds()) -> AggregationResult:
    """Select capabilities that pass in at least ``k`` runs; rank by mean gap."""
    if not runs:
        raise ValueError("aggregate() needs at least one labeling run")
    per_cap: dict[str, list[CapabilityRunStats]] = {c: [] for c in capabilities}
    for run in runs:
        for s in run_stats(run, rewards, capabilities, thresholds.success):
            per_cap[s.capability].append(s)
    summaries = []
    for cap, stats in per_cap.items():
        passed = sum(s.passes(thresholds) for s in stats)
        summaries.append(CapabilitySummary(
            capability=cap,
            runs_passed=passed,
            n_runs=len(stats),
            mean_gap=sum(s.gap for s in stats) / len(stats),
            mean_coverage=sum(s.coverage for s in stats) / len(stats),
            selected=passed >= thresholds.k,
            per_run=stats,
        ))
    summaries.sort(key=lambda s: (not s.selected, -s.mean_gap, s.capability))
    return AggregationResult(thresholds, summaries)
