"""The task source of the τ²-bench envs (:class:`trace_gym.core.tasks.TaskSource`).

Tasks are the domain's ``tasks.json`` entries (in solo mode only those with a ticket),
the splits are ``split_tasks.json``'s (``base``, and ``train``/``test`` where the domain
has them; the default is ``test`` when there is one, else ``base``), a task is played
with ``options={"task_id": id}``, its gold reference is its ``evaluation_criteria``
(the agent's gold actions, ``communicate_info``) with the domain's write tools, and
reports group tasks by domain.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from trace_gym.core.tasks import Gold, UnknownSplitError, UnknownTaskError

__all__ = ["Tau2Tasks"]


@lru_cache(maxsize=16)
def _write_tools_in(path: str) -> frozenset[str]:
    from .data import read_tools_json

    return frozenset(t["name"] for t in read_tools_json(Path(path)) if t["tool_type"] == "write")


def _write_tools(domain: str, data_dir: str | None) -> frozenset[str]:
    from .data import domain_dir

    return _write_tools_in(str(domain_dir(domain, data_dir) / "tools.json"))


class Tau2Tasks:
    """The tasks of one τ²-bench domain (see the module docstring)."""

    option_key = "task_id"

    def __init__(self, domain: str, *, data_dir: str | Path | None = None, solo_mode: bool = False):
        from .prompts import agent_system_prompt

        self._domain = domain
        self.domain: str | None = domain
        self.data_dir = None if data_dir is None else str(data_dir)
        self.solo_mode = solo_mode
        # the frame around the domain policy (the policy itself stays in every prompt)
        self.instruction: str | None = agent_system_prompt("", solo_ticket="" if solo_mode else None).split("\n\n<policy>")[0]

    def _name(self) -> str:
        return f"τ²-bench {self._domain}" + (" (solo mode)" if self.solo_mode else "")

    def _splits(self) -> dict[str, list[str]]:
        from .data import load_splits

        return load_splits(self._domain, self.data_dir)

    def _tasks(self) -> dict[str, dict[str, Any]]:
        from .data import load_tasks

        tasks = load_tasks(self._domain, self.data_dir)
        return {t["id"]: t for t in tasks if not self.solo_mode or t.get("ticket")}

    def _task(self, task_id: str) -> dict[str, Any]:
        task = self._tasks().get(str(task_id))
        if task is None:
            raise UnknownTaskError(f"{self._name()} has no task {task_id!r}")
        return task

    # ------------------------------------------------------------------ TaskSource
    def splits(self) -> tuple[str, ...]:
        return tuple(self._splits())

    def default_split(self) -> str:
        names = self.splits()
        return "test" if "test" in names else ("base" if "base" in names else names[0])

    def task_ids(self, split: str | None = None) -> list[str]:
        name = self.default_split() if split is None else split
        splits = self._splits()
        if name not in splits:
            raise UnknownSplitError(f"{self._name()} has no split {name!r}; its splits are {sorted(splits)}")
        known = self._tasks()
        return [str(t) for t in splits[name] if str(t) in known]

    def reset_options(self, task_id: str) -> dict[str, Any]:
        self._task(task_id)
        return {self.option_key: str(task_id)}

    def gold(self, task_id: str) -> Gold:
        # a copy: the task dicts are shared with the loader's cache
        criteria = json.loads(json.dumps(self._task(task_id).get("evaluation_criteria") or {}))
        actions = tuple({"name": a["name"], "arguments": dict(a.get("arguments") or {})}
                        for a in criteria.get("actions") or [] if a.get("requestor", "assistant") == "assistant")
        return Gold(actions=actions, write_tools=_write_tools(self._domain, self.data_dir),
                    communicate=tuple(str(c) for c in criteria.get("communicate_info") or []), details=criteria)

    def group(self, task_id: str) -> str:
        self._task(task_id)
        return self._domain

    def task_id_of(self, info: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> str | None:
        tid = (options or {}).get(self.option_key) or info.get("task_id")
        return None if tid is None else str(tid)
