"""τ²-bench toolkits: how a domain writes its tools, and how their results become text.

A domain's tools are the methods of a :class:`Toolkit` subclass marked with
``@tool("read"|"write"|"generic"|"think")`` (see :mod:`trace_gym.tau2.domain_spec` for the
whole recipe).  A tool returns a ``str`` (sent verbatim), a :class:`Model` or list of
them (tau2's pydantic models), or plain JSON-like values; :func:`to_json_str` renders
any of these exactly as tau2's ``Environment.to_json_str`` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from .db import DbState

__all__ = ["Model", "Toolkit", "to_json_str", "tool"]


# --------------------------------------------------------------------------- results


class Model:
    """A tool result that tau2 returns as a pydantic model: rendered as its dict, numbers kept."""

    __slots__ = ("data",)

    def __init__(self, data: Any):
        self.data = data

    def __repr__(self) -> str:
        return f"Model({self.data!r})"


def _process(value: Any) -> Any:
    if isinstance(value, Model):
        return value.data
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, (bool, int, float)):
        return str(value)
    if isinstance(value, list):
        return [_process(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_process(v) for v in value)
    if isinstance(value, dict):
        return {k: _process(v) for k, v in value.items()}
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise ValueError(f"Unsupported type: {type(value)}")


def to_json_str(value: Any) -> str:
    """tau2's ``Environment.to_json_str``: strings verbatim, everything else JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(_process(value), default=str)


# --------------------------------------------------------------------------- toolkits

_TOOL_KIND_ATTR = "__tau2_tool_kind__"
_KINDS = ("read", "write", "generic", "think")


def tool(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a toolkit method as a tool of the given kind (``write`` tools mutate state)."""
    if kind not in _KINDS:
        raise ValueError(f"tool kind must be one of {_KINDS}, got {kind!r}")

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, _TOOL_KIND_ATTR, kind)
        return fn

    return mark


class Toolkit:
    """Base class of a domain's tool collection (one instance per episode and side).

    ``self.env`` is the episode's :class:`~trace_gym.tau2.engine.Tau2Environment` and
    ``self.db`` the side's :class:`~trace_gym.tau2.db.DbState`.
    """

    TOOL_KINDS: dict[str, str] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kinds: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                kind = getattr(member, _TOOL_KIND_ATTR, None)
                if kind is not None:
                    kinds[name] = kind
        cls.TOOL_KINDS = kinds

    def __init__(self, env: Any, db: DbState):
        self.env = env  # the episode's Tau2Environment
        self.db = db

    @classmethod
    def has_tool(cls, name: str) -> bool:
        return name in cls.TOOL_KINDS

    def env_function(self, name: str) -> Callable[..., Any]:
        """A public method by name (tools and helpers), as tau2's ``getattr(toolkit, name)``."""
        if not isinstance(name, str) or name.startswith("_") or name in ("env", "db", "env_function", "has_tool"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        fn = getattr(self, name)  # raises AttributeError with CPython's wording
        if not callable(fn):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        return fn
