"""The data model of contrastive analysis: capabilities, labels and labeling runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["Capability", "Label", "LabelRun", "LabelValue", "Evidence"]


class LabelValue(StrEnum):
    NA = "NA"            # the capability was not needed in this trajectory
    PRESENT = "PRESENT"  # needed and exercised correctly
    LACKING = "LACKING"  # needed and not exercised (or exercised wrongly)


@dataclass(frozen=True)
class Capability:
    """A general (not domain-specific) agent capability, e.g. *precondition verification*."""

    name: str
    definition: str
    example_task_ids: tuple[str, ...] = ()
    starter_env: str | None = None  # the starter capability env that trains it, if any

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["example_task_ids"] = list(self.example_task_ids)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Capability:
        return cls(d["name"], d["definition"], tuple(d.get("example_task_ids", ())), d.get("starter_env"))


@dataclass(frozen=True)
class Evidence:
    """Where a label comes from: the message index (turn), the tool call, and a sentence."""

    reason: str
    turn: int | None = None
    call: str | None = None


@dataclass(frozen=True)
class Label:
    trajectory_id: str
    capability: str
    value: LabelValue
    evidence: tuple[Evidence, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "trajectory_id": self.trajectory_id,
            "capability": self.capability,
            "value": self.value.value,
            "evidence": [asdict(e) for e in self.evidence],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Label:
        return cls(d["trajectory_id"], d["capability"], LabelValue(d["value"]), tuple(Evidence(**e) for e in d.get("evidence", ())))


@dataclass
class LabelRun:
    """One independent labeling pass over every (trajectory, capability) pair."""

    run: int
    seed: int
    labels: list[Label] = field(default_factory=list)
    malformed: int = 0  # model outputs that stayed invalid after retries (reported, never dropped silently)
    unlabeled: list[tuple[str, str]] = field(default_factory=list)  # pairs that got no valid label

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "seed": self.seed,
            "malformed": self.malformed,
            "unlabeled": [list(p) for p in self.unlabeled],
            "labels": [lab.to_dict() for lab in self.labels],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LabelRun:
        return cls(d["run"], d["seed"], [Label.from_dict(x) for x in d["labels"]], d.get("malformed", 0),
                   [tuple(p) for p in d.get("unlabeled", [])])
