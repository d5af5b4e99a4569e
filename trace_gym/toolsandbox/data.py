"""Reading ToolSandbox data files: frozen JSON values and field readers that name what is wrong.

Nested JSON payloads (world rows, target rows, schemas, the RapidAPI knowledge base) are
deep-frozen: dicts become :class:`FrozenDict`, lists become tuples; :func:`thaw` turns such
a value back into plain, mutable JSON data.  Malformed data raises :class:`ScenarioError`,
whose message names the file, the line, the scenario or tool and the field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["FrozenDict", "ScenarioError", "freeze", "thaw", "Fields", "json_isinstance"]


class ScenarioError(ValueError):
    """The ToolSandbox data is malformed; the message names the file, scenario and field."""


# --------------------------------------------------------------------------- frozen JSON


class FrozenDict(Mapping[str, Any]):
    """A read-only, hashable, picklable mapping (the frozen form of a JSON object)."""

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(data or {})
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset((k, _hashable(v)) for k, v in self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenDict):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (self._data,))


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def freeze(value: Any) -> Any:
    """Deep-freeze JSON data: dicts -> :class:`FrozenDict`, lists -> tuples, scalars unchanged."""
    if isinstance(value, Mapping):
        return FrozenDict({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of :func:`freeze`: plain, mutable dicts and lists."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


# --------------------------------------------------------------------------- field readers


class Fields:
    """Reads typed fields out of one JSON object, naming ``where`` and the field on failure."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.where}: {field}: {problem}")

    def get(self, obj: Any, key: str, field: str, types: type | tuple[type, ...], optional: bool = False) -> Any:
        if not isinstance(obj, Mapping):
            raise self.fail(
                field.rsplit(".", 1)[0] if "." in field else field, f"expected an object, got {type(obj).__name__}"
            )
        if key not in obj:
            if optional:
                return None
            raise self.fail(field, "missing")
        value = obj[key]
        if value is None and optional:
            return None
        if not json_isinstance(value, types):
            raise self.fail(field, f"expected {_type_names(types)}, got {type(value).__name__} {value!r:.60}")
        return value

    def strings(self, obj: Any, key: str, field: str, optional: bool = False) -> tuple[str, ...] | None:
        value = self.get(obj, key, field, list, optional)
        if value is None:
            return None
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f"{field}[{i}]", f"expected a string, got {type(item).__name__}")
        return tuple(value)


def json_isinstance(value: Any, types: type | tuple[type, ...]) -> bool:
    tup = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool) and bool not in tup:
        return False  # JSON true/false is never an integer or a number here
    return isinstance(value, tup)


def _type_names(types: type | tuple[type, ...]) -> str:
    tup = types if isinstance(types, tuple) else (types,)
    names = {
        list: "a list",
        dict: "an object",
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
    }
    return " or ".join(names.get(t, t.__name__) for t in tup)

