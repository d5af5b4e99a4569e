"""Tools an agent can call: a name, JSON-Schema parameters, a kind and a callable.

Arguments are validated before the callable runs.  Every failure — unknown tool,
arguments that are not an object, wrong types, missing or extra arguments, or an
exception raised by the tool — becomes a :class:`ToolResult` with ``error=True`` and a
text that says what was wrong; the callable is not invoked on invalid arguments, so a
rejected call changes no state (tools must themselves check before they mutate).

The JSON-Schema check of a parameters schema is compiled once per distinct schema in the
process (:func:`schema_validator`), and arguments that plainly conform to a schema of
typed properties skip the schema engine (:func:`quick_validator`): what is accepted and
every error text are exactly those of the full check (:func:`full_validator`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Tool", "ToolKind", "ToolResult", "ToolSet", "ToolError", "schema_validator", "full_validator", "quick_validator"]

ToolKind = Literal["read", "write", "generic", "think"]
_KINDS = ("read", "write", "generic", "think")


class ToolError(Exception):
    """Raise inside a tool to return a clean error result (the message is shown to the agent)."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    error: bool = False


def full_validator(schema: dict[str, Any]) -> Callable[[Any], str | None]:
    """The complete check of arguments against ``schema``: extra arguments (unless the schema
    allows them), then JSON Schema, reporting the first error by path.  Compiles the schema
    (and checks it is a valid schema) on every call: use :func:`schema_validator`."""
    import jsonschema  # here, not at module import: environments whose tools check their own arguments never load it

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
    tool schemas: a scalar type (strings possibly from an ``enum``), an array of such, any
    object, or ``anyOf`` such branches; ``None`` for anything else."""
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
    including every invalid call — goes to ``full``, so error texts are unchanged.  Returns
    ``full`` itself when the schema has another shape.
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


_COMPILED: dict[str, Callable[[Any], str | None]] = {}


def schema_validator(schema: dict[str, Any]) -> Callable[[Any], str | None]:
    """The argument check of a parameters schema (:func:`full_validator` behind
    :func:`quick_validator`'s shortcut), compiled once per distinct schema in the process:
    schemas with the same JSON text (key order included, which decides the error reported
    first) share one check, compiled from a private copy.  An invalid schema raises
    ``jsonschema.SchemaError``."""
    try:
        key = json.dumps(schema, ensure_ascii=False)
    except (TypeError, ValueError):  # not plain JSON: compile it for this tool alone
        return quick_validator(schema, full_validator(schema))
    check = _COMPILED.get(key)
    if check is None:
        private = copy.deepcopy(schema)
        check = _COMPILED[key] = quick_validator(private, full_validator(private))
    return check


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
            self.validate = schema_validator(self.parameters)

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
