"""The target domain's tools as the agent sees them: the benchmark's exact schemas.

Schemas, descriptions and tool kinds come from the benchmark's ``tools.json`` as the τ²-bench
engine loads it (:func:`trace_gym.tau2.domain_spec.load_domain`, data found via
``TAU2_DATA_DIR``), so an agent sees exactly what it sees on the target benchmark.
Calls are routed by the environment to the episode's backend (see :mod:`.backend`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..core.tools import Tool, ToolError, ToolSet, quick_validator
from ..tau2.data import load_policy
from ..tau2.domain_spec import load_domain

__all__ = ["DomainTools", "domain_tool_records", "domain_policy", "copy_db", "quick_validator"]

def domain_tool_records(domain: str) -> dict[str, dict[str, Any]]:
    """``name -> tools.json record`` for a τ²-bench domain (shared with the engine; do not mutate)."""
    return {rec["name"]: rec for rec in load_domain(domain).tools}


@lru_cache(maxsize=4)
def domain_policy(domain: str) -> str:
    """The domain's agent policy text."""
    return load_policy(domain)


_ATOMS = frozenset({str, int, float, bool, type(None)})  # immutable: shared, not copied


def copy_db(x: Any) -> Any:
    """A deep copy of JSON-like data (faster than ``copy.deepcopy`` for this shape)."""
    t = type(x)
    if t is dict:
        return {k: v if type(v) in _ATOMS else copy_db(v) for k, v in x.items()}
    if t is list:
        return [v if type(v) in _ATOMS else copy_db(v) for v in x]
    if isinstance(x, dict):
        return {k: copy_db(v) for k, v in x.items()}
    if isinstance(x, list):
        return [copy_db(v) for v in x]
    return x


class DomainTools:
    """The exposed tools (a :class:`ToolSet` with the benchmark's schemas) and their kinds."""

    def __init__(self, domain: str, names: list[str]):
        records = domain_tool_records(domain)
        missing = [n for n in names if n not in records]
        if missing:
            raise ValueError(f"{domain} tools.json has no tool(s) {missing}; available: {sorted(records)}")
        self.backend: Any = None
        self.kinds: dict[str, str] = {}
        tools = []
        for name in names:
            rec = records[name]
            fn_schema = rec["openai_schema"]["function"]
            kind = rec.get("tool_type", "generic")
            self.kinds[name] = kind
            tool = Tool(
                name=name,
                description=fn_schema.get("description", ""),
                parameters=fn_schema["parameters"],
                fn=self._dispatcher(name),
                kind=kind if kind in ("read", "write", "generic", "think") else "generic",
            )
            tools.append(tool)
        self.toolset = ToolSet(tools)

    def validate(self, name: str, args: dict[str, Any]) -> str | None:
        """The schema check of one call (``None`` when the arguments are valid)."""
        if name not in self.toolset:
            return f"unknown tool {name!r}"
        return self.toolset[name].validate(args)  # type: ignore[misc]

    def _dispatcher(self, name: str):
        def call(**kwargs: Any) -> Any:
            if self.backend is None:
                raise ToolError("no episode is running: call reset() first")
            res = self.backend.call(name, kwargs)
            if res.error:
                raise ToolError(res.content[len("Error: "):] if res.content.startswith("Error: ") else res.content)
            return res.content

        call.__name__ = name
        return call
