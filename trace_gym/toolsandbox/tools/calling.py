"""Calling one ToolSandbox tool the way upstream's execution environment does.

:func:`run_tool` binds the arguments like Python's ``Signature.bind`` (with its error
texts), applies upstream's run-time type check where upstream has one, runs the tool on
the given world and returns a :class:`ToolOutcome`: the result and the traced arguments,
or the one-line error the agent sees (the last line of a Python traceback, e.g.
``ConnectionError: Cellular service is not enabled``).  It never raises for bad input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..world import NoDataError as _WorldNoData
from ..world import World
from .common import NOT_GIVEN, NoDataError, check_type, format_exception
from .table import TOOL_FUNCTIONS

if TYPE_CHECKING:
    from ..catalog import ToolSpec
    from .rapidapi import KnowledgeBase

__all__ = ["ToolOutcome", "run_tool", "bind_arguments"]


@dataclass(frozen=True)
class ToolOutcome:
    """What one call produced: ``result`` and ``trace_arguments``, or ``error`` (the agent-visible line)."""

    result: Any = None
    trace_arguments: dict[str, Any] | None = None
    error: str | None = None

    @property
    def content(self) -> str:
        return self.error if self.error is not None else repr(self.result)


def bind_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """Python's ``Signature.bind`` + ``apply_defaults``, with its error texts."""
    from ..catalog import REQUIRED

    left = dict(arguments)
    bound: dict[str, Any] = {}
    for p in spec.params:
        if p.name in left:
            bound[p.name] = left.pop(p.name)
        elif p.default is REQUIRED:
            raise TypeError(f"missing a required argument: {p.name!r}")
        else:
            bound[p.name] = p.default
    if left:
        raise TypeError(f"got an unexpected keyword argument {next(iter(left))!r}")
    return bound


def run_tool(
    spec: ToolSpec, world: World, kb: KnowledgeBase, arguments: Any,
    functions: dict[str, Callable[..., Any]] | None = None,
) -> ToolOutcome:
    """Call one tool on ``world`` like upstream's execution environment; never raises for bad input.

    ``functions`` maps tool names to implementations (default: every ToolSandbox tool).
    """
    if not isinstance(arguments, dict):
        return ToolOutcome(
            error=f"TypeError: {spec.name}() argument after ** must be a mapping, not {type(arguments).__name__}"
        )
    if functions is None:
        functions = TOOL_FUNCTIONS
    try:
        bound = bind_arguments(spec, arguments)
        if spec.typechecked:
            for p in spec.params:
                check_type(bound[p.name], p.name, p.annotation, p.allowed)
        result = functions[spec.name](world, kb, **bound)
    except _WorldNoData as exc:
        return ToolOutcome(error=format_exception(NoDataError(str(exc))))
    except Exception as exc:  # every tool failure is shown to the agent as one line
        return ToolOutcome(error=format_exception(exc))
    trace_args = {k: v for k, v in bound.items() if v is not NOT_GIVEN}
    return ToolOutcome(result=result, trace_arguments=trace_args)
