"""The task source of capability environments (:class:`trace_gym.core.tasks.TaskSource`).

A capability env's task is a *scenario seed*: the seed its synthetic database, case
and slots are drawn from, written as a decimal string (``"7"``).  Any non-negative
integer is a task; two splits are fixed conventions: ``train`` (seeds 0–999, where
training and calibration draw from) and ``test`` (the default: 100 seeds from
1,000,000, held out from any training run over fewer than a million seeds).

``reset(seed=s, options={"scenario_seed": n})`` plays the scenario that
``reset(seed=n)`` plays, whatever ``s`` (which then only seeds the policy's sampling),
so several trials of one task are the same scenario.  The gold reference is the spec's
reference solution for that scenario (its tool calls, the spec's write tools and the
``all_of`` items of its ``communicated`` checks); reports group tasks by case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from trace_gym.core.tasks import Gold, UnknownSplitError, UnknownTaskError

__all__ = ["CapabilityTasks", "SPLITS", "OPTION"]

OPTION = "scenario_seed"
SPLITS: dict[str, range] = {"train": range(0, 1000), "test": range(1_000_000, 1_000_100)}


def scenario_seed(task_id: Any) -> int:
    """The seed a task id names; :class:`UnknownTaskError` for anything but a non-negative integer."""
    text = str(task_id).strip()
    if isinstance(task_id, bool) or not text.isdigit() or not text.isascii():
        raise UnknownTaskError(f"a capability env's task is a scenario seed (a non-negative integer), got {task_id!r}")
    return int(text)


class CapabilityTasks:
    """Scenario seeds of one capability spec (see the module docstring).

    ``make_env`` builds a private env with the same spec and difficulty; it is reset to
    read a seed's scenario (case and reference solution) and never shown to anyone.
    """

    option_key = OPTION
    instruction: str | None = None

    def __init__(self, env_id: str, domain: str, write_tools: frozenset[str], make_env: Callable[[], Any]):
        self.env_id = env_id
        self.domain: str | None = domain
        self._write_tools = frozenset(write_tools)
        self._make_env = make_env
        self._env: Any = None
        self._peeked: dict[int, tuple[str, list[dict[str, Any]], tuple[str, ...], bool]] = {}

    def _peek(self, task_id: str) -> tuple[str, list[dict[str, Any]], tuple[str, ...], bool, tuple[str, ...]]:
        seed = scenario_seed(task_id)
        if seed not in self._peeked:
            if self._env is None:
                self._env = self._make_env()
            self._env.reset(seed=seed)
            sc = self._env.scenario
            communicate = tuple(str(p) for r in sc.rewards if r.get("type") == "communicated" for p in r.get("all_of") or ())
            spec = self._env.cap_spec
            offered = next((c.get("tools") for c in spec.cases if c["name"] == sc.name), None)
            missing = tuple(sorted(set(spec.tool_names) - set(offered))) if offered is not None and not sc.allowed else ()
            self._peeked[seed] = (sc.name, [dict(s) for s in sc.reference], communicate, sc.allowed, missing)
        return self._peeked[seed]

    # ------------------------------------------------------------------ TaskSource
    def splits(self) -> tuple[str, ...]:
        return tuple(SPLITS)

    def default_split(self) -> str:
        return "test"

    def task_ids(self, split: str | None = None) -> list[str]:
        name = self.default_split() if split is None else split
        if name not in SPLITS:
            raise UnknownSplitError(f"{self.env_id} has no split {name!r}; its splits are {sorted(SPLITS)}")
        return [str(s) for s in SPLITS[name]]

    def reset_options(self, task_id: str) -> dict[str, Any]:
        return {self.option_key: scenario_seed(task_id)}

    def gold(self, task_id: str) -> Gold:
        case, reference, communicate, allowed, missing = self._peek(task_id)
        actions = tuple({"name": s["call"], "arguments": dict(s.get("args") or {})} for s in reference if "call" in s)
        return Gold(actions=actions, write_tools=self._write_tools, communicate=communicate,
                    details={"case": case, "allowed": allowed, "reference": reference}, refuse=not allowed,
                    missing=missing)

    def group(self, task_id: str) -> str:
        return self._peek(task_id)[0]

    def task_id_of(self, info: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> str | None:
        seed = (options or {}).get(self.option_key)
        if seed is None:
            seed = info.get("seed")
        return None if seed is None else str(seed)
