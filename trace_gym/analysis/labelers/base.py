"""The labeler seam: one Protocol, one input record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..labels import Capability, LabelRun

__all__ = ["LabelingItem", "Labeler"]


@dataclass(frozen=True)
class LabelingItem:
    """One trajectory to label.

    ``gold`` is the target's reference solution when it has one (τ²-bench: the task's
    ``evaluation_criteria`` with ``actions`` and ``communicate_info``); ``write_tools``
    names the state-changing tools of the domain.
    """

    trajectory_id: str
    messages: list[dict[str, Any]]
    reward: float
    task_id: str | None = None
    gold: dict[str, Any] | None = None
    write_tools: frozenset[str] = field(default_factory=frozenset)


@runtime_checkable
class Labeler(Protocol):
    """Labels every item against every capability in one run.

    Contract: returns one :class:`LabelRun` whose labels cover each (item, capability)
    pair at most once; pairs it could not label are listed in ``LabelRun.unlabeled`` and
    counted in ``LabelRun.malformed`` — never dropped silently.  Raises ``ValueError``
    only for unusable inputs (e.g. a labeler that needs gold solutions given none).
    """

    name: str

    def label(self, items: list[LabelingItem], capabilities: list[Capability], *, run: int, seed: int) -> LabelRun: ...
