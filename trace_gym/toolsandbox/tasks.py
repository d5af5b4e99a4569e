"""The task source of ``trace/toolsandbox-v0`` (:class:`trace_gym.core.tasks.TaskSource`).

Tasks are the base scenarios by name.  The split ``base`` (the default) is the env's
scenario pool (all 129 scenarios unless the env was made with ``scenarios=[...]``), in
file order.  ``train`` and ``test`` cut the pool in two, stratified by report category
and seeded (:data:`SPLIT_SEED`): in each category, a seeded shuffle of its scenarios
gives the first half (rounded down, at least one when the category has two or more) to
``test`` and the rest to ``train``, so an evaluation on ``test`` plays scenarios that a
run learning from ``train`` never saw.  A scenario is played with
``options={"scenario": name}``.  Capability envs are synthesized for the ``toolsandbox``
tool domain (``domain``).  Its gold reference
is what its milestones expect: the tool calls of the milestones' tool traces, in
milestone order (arguments that upstream fills in from earlier results while scoring
are not known in advance and are left out), with the tools that write the world
databases as write tools; ``details`` holds the typed milestones and minefields and the
scenario's ``categories`` (upstream's names, which the offline labeler reads).
Reports group scenarios by their ToolSandbox category (the first of single tool call,
multiple tool call, multiple user turn, insufficient information that applies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trace_gym.core.tasks import Gold, UnknownSplitError, UnknownTaskError

__all__ = ["ToolSandboxTasks", "REPORT_CATEGORIES", "SPLIT_SEED", "category_group", "stratified_split"]

SPLIT_SEED = 0  # the seed of the train/test cut: fixed, so every run holds out the same scenarios
_SPLITS = ("base", "train", "test")

# The categories results are reported by, in the order they are looked for.
REPORT_CATEGORIES = ("SINGLE_TOOL_CALL", "MULTIPLE_TOOL_CALL", "MULTIPLE_USER_TURN", "INSUFFICIENT_INFORMATION")
_AGENT_TRACE = ("EXECUTION_ENVIRONMENT", "AGENT")  # (sender, recipient) of the agent's tool results


def category_group(categories: Sequence[str]) -> str:
    """The report group of a scenario with ``categories`` (lower case)."""
    for c in REPORT_CATEGORIES:
        if c in categories:
            return c.lower()
    return ",".join(categories) or "toolsandbox"


def stratified_split(names: Sequence[str], group: Any, seed: int = SPLIT_SEED) -> tuple[list[str], list[str]]:
    """``(train, test)``: per group (``group(name)``), a seeded shuffle; the first half (rounded down, at
    least one of two or more) is ``test``.  Each list keeps the order of ``names``."""
    by_group: dict[str, list[str]] = {}
    for n in names:
        by_group.setdefault(str(group(n)), []).append(n)
    test: set[str] = set()
    for i, g in enumerate(sorted(by_group)):
        members = by_group[g]
        order = np.random.default_rng([seed, i]).permutation(len(members))
        k = max(1, len(members) // 2) if len(members) >= 2 else 0
        test.update(members[j] for j in order[:k])
    return [n for n in names if n not in test], [n for n in names if n in test]


class ToolSandboxTasks:
    """The scenarios of a ToolSandbox env (see the module docstring)."""

    option_key = "scenario"
    refusal_floor = True  # insufficient-information scenarios credit a refusal: evaluations report the floor
    domain: str | None = "toolsandbox"
    instruction: str | None = None

    def __init__(self, scenarios: Mapping[str, Any], pool: Sequence[str], write_tools: frozenset[str]):
        self._all = scenarios
        self._pool = list(pool)
        self._write_tools = frozenset(write_tools)

    def _scenario(self, task_id: str) -> Any:
        s = self._all.get(str(task_id))
        if s is None:
            raise UnknownTaskError(f"ToolSandbox has no scenario {task_id!r} ({len(self._all)} known)")
        return s

    # ------------------------------------------------------------------ TaskSource
    def splits(self) -> tuple[str, ...]:
        return _SPLITS

    def default_split(self) -> str:
        return "base"

    def task_ids(self, split: str | None = None) -> list[str]:
        if split not in (None, *_SPLITS):
            raise UnknownSplitError(f"ToolSandbox has no split {split!r}; its splits are {list(_SPLITS)}")
        if split in (None, "base"):
            return list(self._pool)
        train, test = stratified_split(self._pool, self.group)
        return train if split == "train" else test

    def reset_options(self, task_id: str) -> dict[str, Any]:
        return {self.option_key: self._scenario(task_id).name}

    def gold(self, task_id: str) -> Gold:
        from .scenarios import thaw

        scenario = self._scenario(task_id)
        actions: list[dict[str, Any]] = []
        for milestone in scenario.milestones:
            for c in milestone.constraints:
                if c.database != "SANDBOX" or "tool_trace" not in c.target_columns:
                    continue
                for row in c.target_rows:
                    if (row.get("sender"), row.get("recipient")) != _AGENT_TRACE:
                        continue
                    for call in thaw(row.get("tool_trace") or ()):
                        actions.append({"name": call["tool_name"], "arguments": dict(call.get("arguments") or {})})
        return Gold(actions=tuple(actions), write_tools=self._write_tools,
                    details={"milestones": scenario.milestones, "minefields": scenario.minefields,
                             "categories": tuple(scenario.categories)})

    def group(self, task_id: str) -> str:
        return category_group(self._scenario(task_id).categories)

    def task_id_of(self, info: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> str | None:
        name = (options or {}).get(self.option_key) or info.get("scenario")
        return None if name is None else str(name)
