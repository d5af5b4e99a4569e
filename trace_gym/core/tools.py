"""Tools an agent can call: a name, JSON-Schema parameters, a kind and a callable.

Arguments are validated before the callable runs.  Every failure — unknown tool,
arguments that are not an object, wrong types, missing or extra arguments, or an
exception raised by the tool — becomes a :class:`ToolResult` with ``error=True`` and a
text that says what was wrong; the callable is not invoked on invalid arguments, so a
rejected call changes no state (tools must themselves check before they mutate).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema

__all__ = ["Tool", "ToolKind", "ToolResult", "ToolSet", "ToolError"]

ToolKind = Literal["read", "write", "generic", "think"]
_KINDS = ("read", "write", "generic", "think")


class ToolError(Exception):
    """Raise inside a tool to return a clean error result (the message is shown to the agent)."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    error: bool = False


def _schema_validator(schema: dict[str, Any]) -> Callable[[dict[str, Any]], str | None]:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    validator = cls(schema)
    props = set((schema.get("properties") or {}).keys())
    allow_extra = schema.get("additionalProperties", False) is not False and "additionalProperties" in schema

    def validate(args: dict[str, Any]) -> str | None:
        if not allow_extra:
            extra = sorted(set(args) - props)
            if extra:
                return f"unexpected argument(s) {extra}; expected only {sorted(props)}"
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
        if errors:
            e = errors[0]
            where = "/".join(str(p) for p in e.absolute_path) or "arguments"
            return f"invalid {where}: {e.message}"
        return None

    return validate


@dataclass(slots=True)
class Tool:
    """A callable tool.

    ``fn`` receives the validated arguments as keyword arguments and returns any value;
    non-string results are rendered with ``render`` (JSON by default).  ``validate`` may
    replace the JSON-Schema check (returning an error text or ``None``), e.g. to
    reproduce another framework's exact error messages.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    kind: ToolKind = "generic"
    validate: Callable[[dict[str, Any]], str | None] | None = None
    render: Callable[[Any], str] | None = None
    _schema: dict[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"tool {self.name!r}: kind must be one of {_KINDS}, got {self.kind!r}")
        if self.parameters.get("type", "object") != "object":
            raise ValueError(f"tool {self.name!r}: parameters must be a JSON Schema of type 'object'")
        if self.validate is None:
            self.validate = _schema_validator(self.parameters)

    @property
    def mutates_state(self) -> bool:
        return self.kind == "write"

    def openai_schema(self) -> dict[str, Any]:
        if self._schema is None:
            self._schema = {
                "type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
            }
        return self._schema


def _default_render(value: Any) -> str:
    import json

    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


class ToolSet:
    """An ordered collection of tools with validated dispatch."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)
        self._schemas: list[dict[str, Any]] | None = None
        self._listing: str | None = None

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"duplicate tool name {tool.name!r}")
        self._tools[tool.name] = tool
        self._schemas = None
        self._listing = None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI function schemas, in order (cached)."""
        if self._schemas is None:
            self._schemas = [t.openai_schema() for t in self._tools.values()]
        return self._schemas

    def listing(self) -> str:
        """One JSON line per tool's function schema, in order (cached), as observations list tools."""
        if self._listing is None:
            self._listing = "\n".join(json.dumps(s["function"], ensure_ascii=False) for s in self.schemas())
        return self._listing

    def call(self, name: str, arguments: Any) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "(none)"
            return ToolResult(f"Error: unknown tool {name!r}. Available tools: {known}", True)
        if not isinstance(arguments, dict):
            return ToolResult(f"Error: {name}: arguments must be an object, got {type(arguments).__name__}", True)
        problem = tool.validate(arguments)  # type: ignore[misc]
        if problem is not None:
            return ToolResult(f"Error: {name}: {problem}", True)
        try:
            value = tool.fn(**arguments)
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", True)
        except Exception as exc:  # a tool bug must not crash the episode
            return ToolResult(f"Error: {name} failed: {type(exc).__name__}: {exc}", True)
        return ToolResult((tool.render or _default_render)(value), False)
