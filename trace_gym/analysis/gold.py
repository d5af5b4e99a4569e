"""Gold solutions for targets that have them (τ²-bench), looked up by env id and task id."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ..datadirs import tau2_domain_dir

__all__ = ["tau2_gold", "domain_of"]


def domain_of(env_id: str) -> str | None:
    """``trace/tau2-retail-v0`` → ``retail``; None for non-τ² ids."""
    name = env_id.split("/")[-1]
    if not name.startswith("tau2-"):
        return None
    return name[len("tau2-"):].rsplit("-v", 1)[0]


@lru_cache(maxsize=8)
def _domain(domain: str) -> tuple[dict[str, dict[str, Any]], frozenset[str]]:
    d = tau2_domain_dir(domain)
    tasks = {str(t["id"]): t for t in json.loads((d / "tasks.json").read_text(encoding="utf-8"))}
    writes = frozenset(t["name"] for t in json.loads((d / "tools.json").read_text(encoding="utf-8")) if t.get("tool_type") == "write")
    return tasks, writes


def tau2_gold(env_id: str, task_id: str) -> tuple[dict[str, Any], frozenset[str]] | None:
    """The task's ``evaluation_criteria`` and the domain's write tools, or None when not a τ² env."""
    domain = domain_of(env_id)
    if domain is None:
        return None
    tasks, writes = _domain(domain)
    if task_id not in tasks:
        raise KeyError(f"τ²-bench {domain} has no task {task_id!r}")
    return tasks[task_id].get("evaluation_criteria") or {}, writes
