"""The task source of ``trace/toolsandbox-v0`` (:class:`trace_gym.core.tasks.TaskSource`).

Tasks are the base scenarios by name.  The split ``base`` (the default) is the env's
scenario pool (all 129 scenarios unless the env was made with ``scenarios=[...]``), in
file order.  ``fold_a`` and ``fold_b`` cut the pool in two halves stratified by category
(:func:`category_folds`, seeded by :data:`SPLIT_SEED`): scenarios with the same set of
categories are shuffled and dealt to the two folds in turn, so every category (state
dependency, canonicalization, insufficient information, …) is split about evenly and each
fold has enough non-refusal scenarios of every category to measure.  ``train`` is
``fold_a`` and ``test`` is ``fold_b``: a run learning from ``train`` is evaluated on
scenarios it never saw, and running again with the folds swapped (learn on ``fold_b``,
evaluate on ``fold_a``) gives the second half of a 2-fold estimate.  A scenario is played
with ``options={"scenario": name}``.  Capability envs are synthesized for the ``toolsandbox``
tool domain (``domain``).  Its gold reference
is what its milestones expect: the tool calls of the milestones' tool traces, in
milestone order (arguments that upstream fills in from earlier results while scoring
are not known in advance and are left out), with the tools that write the world
databases as write tools; ``details`` holds the typed milestones and minefields and the
scenario's ``categories`` (upstream's names, which the offline labeler reads).
Reports count a scenario in every category it carries (:meth:`ToolSandboxTasks.groups`, lower
case, ``NO_DISTRACTION_TOOLS`` left out as every base scenario has it), as ToolSandbox reports
them, and every scenario without insufficient information also in ``answerable``;
:meth:`~ToolSandboxTasks.group` is the first of single tool call, multiple tool call,
multiple user turn, insufficient information that applies (one label per scenario).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trace_gym.core.tasks import Gold, UnknownSplitError, UnknownTaskError

__all__ = ["ToolSandboxTasks", "REPORT_CATEGORIES", "ALL_CATEGORIES", "ANSWERABLE", "SPLIT_SEED", "category_group",
           "category_folds"]

SPLIT_SEED = 0  # the seed of the fold cut: fixed, so every run holds out the same scenarios
_SPLITS = ("base", "train", "test", "fold_a", "fold_b")
_FOLD_OF = {"train": 0, "fold_a": 0, "test": 1, "fold_b": 1}

# The primary label of a scenario (``group``): the first of these it carries.
REPORT_CATEGORIES = ("SINGLE_TOOL_CALL", "MULTIPLE_TOOL_CALL", "MULTIPLE_USER_TURN", "INSUFFICIENT_INFORMATION")
# Every category a scenario can count in (``groups``), in report order.
ALL_CATEGORIES = ("STATE_DEPENDENCY", "CANONICALIZATION", "INSUFFICIENT_INFORMATION", "SINGLE_USER_TURN",
                  "MULTIPLE_USER_TURN", "SINGLE_TOOL_CALL", "MULTIPLE_TOOL_CALL")
# The report group of every scenario the agent can complete (no INSUFFICIENT_INFORMATION): where an adapter
# that teaches tool use can gain, and a refusal cannot.
ANSWERABLE = "answerable"
_AGENT_TRACE = ("EXECUTION_ENVIRONMENT", "AGENT")  # (sender, recipient) of the agent's tool results


def category_group(categories: Sequence[str]) -> str:
    """The report group of a scenario with ``categories`` (lower case)."""
    for c in REPORT_CATEGORIES:
        if c in categories:
            return c.lower()
    return ",".join(categories) or "toolsandbox"


def category_folds(names: Sequence[str], categories: Any, seed: int = SPLIT_SEED) -> tuple[list[str], list[str]]:
    """``(fold_a, fold_b)``: scenarios with the same set of categories (``categories(name)``) are
    shuffled (seeded by ``seed`` and the set) and dealt to the folds in turn; the fold that deals
    first alternates from one set to the next, so the folds differ in size by at most one.  Each
    list keeps the order of ``names``."""
    by_set: dict[tuple[str, ...], list[str]] = {}
    for n in names:
        by_set.setdefault(tuple(sorted(str(c) for c in categories(n))), []).append(n)
    fold_b: set[str] = set()
    first = 0  # the fold that gets a set's odd member
    for i, key in enumerate(sorted(by_set)):
        members = by_set[key]
        order = np.random.default_rng([seed, i]).permutation(len(members))
        for pos, j in enumerate(order):
            if (pos + first) % 2 == 1:
                fold_b.add(members[j])
        if len(members) % 2:
            first ^= 1
    return [n for n in names if n not in fold_b], [n for n in names if n in fold_b]


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
        folds = category_folds(self._pool, self.groups)
        return folds[_FOLD_OF[split]]

    def reset_options(self, task_id: str) -> dict[str, Any]:
        return {self.option_key: self._scenario(task_id).name}

    def gold(self, task_id: str) -> Gold:
        from .scenarios import thaw

        scenario = self._scenario(task_id)
        refuse = "INSUFFICIENT_INFORMATION" in scenario.categories
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
                             "categories": tuple(scenario.categories)},
                    refuse=refuse, missing=tuple(scenario.tool_deny_list or ()) if refuse else ())

    def group(self, task_id: str) -> str:
        return category_group(self._scenario(task_id).categories)

    def groups(self, task_id: str) -> tuple[str, ...]:
        """Every category the scenario carries (lower case, :data:`ALL_CATEGORIES` order), then
        :data:`ANSWERABLE` for a scenario without ``INSUFFICIENT_INFORMATION`` (one the agent can complete
        with the tools it is given, so the refusal floor scores it 0)."""
        cats = set(self._scenario(task_id).categories)
        out = tuple(c.lower() for c in ALL_CATEGORIES if c in cats) or (self.group(task_id),)
        return out if "INSUFFICIENT_INFORMATION" in cats else out + (ANSWERABLE,)

    def task_id_of(self, info: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> str | None:
        name = (options or {}).get(self.option_key) or info.get("scenario")
        return None if name is None else str(name)
