"""The target domain's tools as the agent sees them: the benchmark's exact schemas.

Schemas, descriptions and tool kinds come from the benchmark's ``tools.json`` (found via
``TAU2_DATA_DIR``), so an agent sees exactly what it sees on the target benchmark.
Calls are routed by the environment to the episode's backend (see :mod:`.backend`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..core.tools import Tool, ToolError, ToolSet
from ..datadirs import tau2_domain_dir

__all__ = ["DomainTools", "domain_tool_records", "domain_policy", "copy_db", "quick_validator"]

# keywords that describe a value without constraining it
_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
# "$defs" only holds definitions; a property that refers to one is not a plain shape
_TOP_LEVEL = frozenset({"type", "properties", "required", "additionalProperties", "$defs"}) | _ANNOTATIONS
_SCALAR_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int,  # floats like 1.0 and bools: the full check decides
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
}


def _plain_type_check(schema: Any) -> Callable[[Any], bool] | None:
    """A test that is True only for values ``schema`` certainly accepts, for the plain shapes of
    the benchmark's tool schemas: a scalar type (strings possibly from an ``enum``), an array
    of such, any object, or ``anyOf`` such branches; ``None`` for anything else."""
    if not isinstance(schema, dict):
        return None
    keys = set(schema) - _ANNOTATIONS
    if keys == {"anyOf"}:
        branches = schema["anyOf"]
        checks = [c for c in (_plain_type_check(b) for b in branches) if c is not None] if isinstance(branches, list) else []
        if not checks:
            return None
        return lambda v: any(c(v) for c in checks)  # one accepting branch is enough
    kind = schema.get("type")
    if kind == "string" and keys == {"type", "enum"}:
        allowed = schema["enum"]
        if not isinstance(allowed, list) or not all(type(a) is str for a in allowed):
            return None
        options = frozenset(allowed)
        return lambda v: isinstance(v, str) and v in options
    if keys == {"type"} and isinstance(kind, str) and kind in _SCALAR_CHECKS:
        return _SCALAR_CHECKS[kind]
    if kind == "array" and keys <= {"type", "items"}:
        if "items" not in schema:
            return lambda v: type(v) is list
        each = _plain_type_check(schema["items"])
        if each is None:
            return None
        return lambda v: type(v) is list and all(each(x) for x in v)
    if kind == "object" and (keys == {"type"} or (keys == {"type", "additionalProperties"} and schema["additionalProperties"] is True)):
        return lambda v: type(v) is dict  # no properties declared: any object
    return None


def quick_validator(parameters: dict[str, Any], full: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    """``full`` (the JSON-Schema check) with a shortcut for arguments that plainly conform.

    For a parameters schema made only of typed properties, ``required`` and no extra
    properties, arguments whose every value has the declared plain type and that name every
    required property are valid without running the schema engine.  Anything else —
    including every invalid call — goes to ``full``, so error texts are unchanged.
    """
    if not isinstance(parameters, dict) or not set(parameters) <= _TOP_LEVEL or parameters.get("type", "object") != "object":
        return full
    if parameters.get("additionalProperties", False) is not False:
        return full
    props = parameters.get("properties") or {}
    required = parameters.get("required") or []
    if not isinstance(props, dict) or not isinstance(required, list) or not all(isinstance(r, str) and r in props for r in required):
        return full
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, sub in props.items():
        check = _plain_type_check(sub)
        if check is None:
            return full
        checks[name] = check

    def validate(args: Any) -> str | None:
        if type(args) is dict and all(r in args for r in required):
            for k, v in args.items():
                check = checks.get(k)
                if check is None or not check(v):
                    return full(args)
            return None
        return full(args)

    return validate


@lru_cache(maxsize=4)
def domain_tool_records(domain: str) -> dict[str, dict[str, Any]]:
    """``name -> tools.json record`` for a τ²-bench domain."""
    path = tau2_domain_dir(domain) / "tools.json"
    return {rec["name"]: rec for rec in json.loads(path.read_text(encoding="utf-8"))}


@lru_cache(maxsize=4)
def domain_policy(domain: str) -> str:
    """The domain's agent policy text."""
    return (tau2_domain_dir(domain) / "policy.md").read_text(encoding="utf-8")


def copy_db(x: Any) -> Any:
    """A deep copy of JSON-like data (faster than ``copy.deepcopy`` for this shape)."""
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
            assert tool.validate is not None
            tool.validate = quick_validator(tool.parameters, tool.validate)
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
