"""A ready-made :class:`~trace_gym.capabilities.domains.CapabilityDomain` over a plain dict state.

For a domain of your own (a plug-in, see :mod:`trace_gym.capabilities.plugins`) write the
tools as functions of the state, a seeded generator and a system prompt, and hand them to
:class:`DictDomain`::

    def get_book(db, book_id):
        if book_id not in db["books"]:
            raise ToolError(f"no book {book_id}")
        return db["books"][book_id]

    DictDomain("bookshop", [DomainTool("get_book", "Look a book up.", {...}, get_book)],
               generate=make_world, system_prompt=POLICY)

* **State** is a dict of tables (each a dict keyed by id, or a list) drawn by
  ``generate(rng, **sizes)``; ``sizes`` are the spec's ``db:`` entries.  The generator must
  draw everything from ``rng`` (one seed, one world).
* **Tools** are :class:`DomainTool` items: ``fn(db, **arguments)`` returns the result (text,
  or anything JSON can show) or raises (any exception; :class:`~trace_gym.core.tools.ToolError`
  for the message the agent sees).  Arguments are checked against the tool's JSON Schema
  first.  A ``write`` tool runs on a copy of the state that replaces it only when the call
  succeeds, so a failed call changes nothing; ``read`` tools must not change the state.
* **Rewards** see the state: ``db`` paths, ``no_mutation`` and ``no_collateral`` compare the
  tables before and after the episode.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.tools import Tool, ToolError, ToolResult, ToolSet, schema_validator
from .domain import copy_db

__all__ = ["DomainTool", "DictDomain", "DictBackend", "DictToolSet"]


@dataclass(frozen=True)
class DomainTool:
    """One tool: ``fn(db, **arguments)``; ``kind`` is ``read``, ``write`` or ``generic``."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    kind: str = "read"


def _render(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


class DictBackend:
    """One episode's state; calls run the domain's tool functions on it (never raises from :meth:`call`)."""

    def __init__(self, db: dict[str, Any], tools: dict[str, DomainTool]):
        self._initial = db  # never written: the first successful write replaces self._state with a changed copy
        self._state = db
        self._tools = tools
        self._checks = {n: schema_validator(t.parameters) for n, t in tools.items()}

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(f"Error: unknown tool {name!r}. Available tools: {', '.join(self._tools)}", True)
        if not isinstance(args, dict):
            return ToolResult(f"Error: {name}: arguments must be an object", True)
        problem = self._checks[name](args)
        if problem is not None:
            return ToolResult(f"Error: {name}: {problem}", True)
        work = copy_db(self._state) if tool.kind == "write" else self._state
        try:
            out = tool.fn(work, **args)
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", True)
        except Exception as exc:  # noqa: BLE001 - a tool's failure is the call's error, never the episode's
            return ToolResult(f"Error: {type(exc).__name__}: {exc}", True)
        if tool.kind == "write":
            self._state = work
        return ToolResult(_render(out), False)

    def initial_db(self) -> dict[str, Any]:
        return self._initial

    def current_db(self) -> dict[str, Any]:
        return copy_db(self._state)

    def state_view(self) -> dict[str, Any]:
        return self._state

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self._state, sort_keys=True, default=repr).encode()).hexdigest()

    def fork(self) -> DictBackend:
        return DictBackend(self._initial, self._tools)


class DictToolSet:
    """The exposed tools as the agent sees them; calls go to the episode's :class:`DictBackend`."""

    def __init__(self, tools: Sequence[DomainTool]):
        self.backend: DictBackend | None = None
        self.kinds = {t.name: t.kind for t in tools}
        self.toolset = ToolSet(Tool(t.name, t.description, t.parameters, self._dispatcher(t.name),
                                    kind=t.kind if t.kind in ("read", "write", "generic", "think") else "generic")
                               for t in tools)

    def validate(self, name: str, args: dict[str, Any]) -> str | None:
        if name not in self.toolset:
            return f"unknown tool {name!r}"
        return self.toolset[name].validate(args)  # type: ignore[misc]

    def _dispatcher(self, name: str) -> Callable[..., str]:
        def call(**kwargs: Any) -> str:
            if self.backend is None:
                raise ToolError("no episode is running: call reset() first")
            res = self.backend.call(name, kwargs)
            if res.error:
                raise ToolError(res.content.removeprefix("Error: "))
            return res.content

        return call


class DictDomain:
    """A capability domain over a dict state (see the module docstring).

    Args:
        name: the domain's name, as specs and the registry spell it.
        tools: the domain's tools.
        generate: ``generate(rng, **sizes) -> dict`` — a seeded synthetic world.
        system_prompt: the agent's instructions (the domain policy).
        tables: the tables slots may draw from (default: those of a world drawn with seed 0
            whose value is a dict or a list).
        capabilities: what the domain's specs train (see
            :class:`~trace_gym.capabilities.domains.CapabilityDomain`).
        check_spec: ``check_spec(doc, source)`` for checks only this domain can make (raise
            :class:`~trace_gym.capabilities.specfile.SpecError`).

    Error contract: :meth:`tools` raises ``ValueError`` for unknown names; the backend's
    ``call`` never raises (a failed call is an error result and changes nothing).
    """

    def __init__(self, name: str, tools: Sequence[DomainTool], generate: Callable[..., dict[str, Any]], system_prompt: str,
                 *, tables: Sequence[str] | None = None, capabilities: Sequence[Any] = (),
                 check_spec: Callable[[dict[str, Any], str], None] | None = None):
        self.name = name
        self._tools = {t.name: t for t in tools}
        if len(self._tools) != len(tools):
            raise ValueError(f"domain {name!r}: two tools share a name")
        self._generate = generate
        self._prompt = system_prompt
        self._tables = tuple(tables) if tables is not None else None
        self._capabilities = list(capabilities)
        self._check_spec = check_spec

    def tool_names(self) -> frozenset[str]:
        return frozenset(self._tools)

    def write_tools(self) -> frozenset[str]:
        return frozenset(n for n, t in self._tools.items() if t.kind == "write")

    def tables(self) -> tuple[str, ...]:
        if self._tables is None:
            world = self._generate(random.Random(0))
            self._tables = tuple(k for k, v in world.items() if isinstance(v, (dict, list)))
        return self._tables

    def clonable(self) -> tuple[str, ...]:
        return ()

    def check_spec(self, doc: dict[str, Any], source: str) -> None:
        if self._check_spec is not None:
            self._check_spec(doc, source)

    def tools(self, names: list[str]) -> DictToolSet:
        unknown = [n for n in names if n not in self._tools]
        if unknown:
            raise ValueError(f"domain {self.name!r} has no tool(s) {unknown}; available: {sorted(self._tools)}")
        return DictToolSet([self._tools[n] for n in names])

    def generate(self, rng: random.Random, **sizes: int) -> dict[str, Any]:
        return self._generate(rng, **sizes)

    def backend(self, db: dict[str, Any]) -> DictBackend:
        return DictBackend(db, self._tools)

    def system_prompt(self) -> str:
        return self._prompt

    def user_tool_names(self) -> frozenset[str]:
        """None: a dict-state world has no user-side device."""
        return frozenset()

    def capabilities(self) -> list[Any]:
        return list(self._capabilities)
