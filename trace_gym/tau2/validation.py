"""Field checks that behave like the pydantic v2 (lax mode) constructors tau2's tools use.

tau2 builds pydantic models from tool arguments (``Task(...)``, ``Passenger(**p)``,
``Certificate(amount=...)``); a bad value makes the call fail with a
``ValidationError`` whose first line is ``N validation error(s) for <Model>``.  We
reproduce the acceptance rules and coercions (``int`` -> ``float``, ``100.0`` ->
``100`` for int fields, numeric strings) and an error text of the same layout; only
the first line is guaranteed to match (the rest carries pydantic-version details).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["ValidationError", "Field", "build", "STR", "OPT_STR", "INT", "FLOAT", "literal", "optional", "model_list"]

_DOCS = "https://errors.pydantic.dev/2.14/v/"


class ValidationError(ValueError):
    """A failed model construction; ``str()`` has pydantic's layout."""

    def __init__(self, model: str, errors: list[tuple[str, str, str, Any]]):
        self.model = model
        self.errors = errors  # (location, message, type, input)
        n = len(errors)
        lines = [f"{n} validation error{'s' if n != 1 else ''} for {model}"]
        for loc, msg, typ, value in errors:
            lines.append(loc)
            lines.append(f"  {msg} [type={typ}, input_value={_short_repr(value)}, input_type={type(value).__name__}]")
            lines.append(f"    For further information visit {_DOCS}{typ}")
        super().__init__("\n".join(lines))


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:49] + "..." + text[-48:]


class _Invalid(Exception):
    def __init__(self, msg: str, typ: str, errors: list[tuple[str, str, str, Any]] | None = None):
        self.msg, self.typ, self.nested = msg, typ, errors


Check = Callable[[Any], Any]
"""Returns the coerced value or raises ``_Invalid``."""


def _str(v: Any) -> Any:
    if isinstance(v, str):
        return v
    raise _Invalid("Input should be a valid string", "string_type")


_INT_RE = re.compile(r"^\s*([+-]?\d(?:_?\d)*)(?:\.0*)?\s*$")


def _int(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise _Invalid("Input should be a finite number", "finite_number")
        if v != int(v):
            raise _Invalid("Input should be a valid integer, got a number with a fractional part", "int_from_float")
        if abs(v) >= 2.0**63:
            raise _Invalid("Unable to parse input string as an integer, exceeded maximum size", "int_parsing_size")
        return int(v)
    if isinstance(v, str):
        m = _INT_RE.match(v)
        if m:
            return int(m.group(1))
        raise _Invalid("Input should be a valid integer, unable to parse string as an integer", "int_parsing")
    raise _Invalid("Input should be a valid integer", "int_type")


def _float(v: Any) -> Any:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            pass
        raise _Invalid("Input should be a valid number, unable to parse string as a number", "float_parsing")
    raise _Invalid("Input should be a valid number", "float_type")


STR: Check = _str
INT: Check = _int
FLOAT: Check = _float


def optional(check: Check) -> Check:
    def opt(v: Any) -> Any:
        return None if v is None else check(v)

    return opt


OPT_STR: Check = optional(_str)


def literal(*values: str) -> Check:
    if len(values) == 1:
        expected = repr(values[0])
    else:
        expected = ", ".join(repr(x) for x in values[:-1]) + f" or {values[-1]!r}"

    def lit(v: Any) -> Any:
        if isinstance(v, str) and v in values:
            return v
        raise _Invalid(f"Input should be {expected}", "literal_error")

    return lit


class Field:
    """One model field: a check, and a default when not required."""

    __slots__ = ("check", "default", "required")

    def __init__(self, check: Check, default: Any = ..., required: bool | None = None):
        self.check = check
        self.default = default
        self.required = default is ... if required is None else required


def build(model: str, fields: dict[str, Field], values: dict[str, Any]) -> dict[str, Any]:
    """Validate ``values`` (extra keys ignored) into a dict in field order, or raise :class:`ValidationError`."""
    errors: list[tuple[str, str, str, Any]] = []
    out = _build(fields, values, errors, prefix="")
    if errors:
        raise ValidationError(model, errors)
    return out


def _build(fields: dict[str, Field], values: dict[str, Any], errors: list[tuple[str, str, str, Any]], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in values:
            if f.required:
                errors.append((prefix + name, "Field required", "missing", values))
            else:
                out[name] = f.default
            continue
        v = values[name]
        try:
            out[name] = f.check(v)
        except _Invalid as exc:
            if exc.nested is not None:
                errors.extend((f"{prefix}{name}.{loc}", msg, typ, val) for loc, msg, typ, val in exc.nested)
            else:
                errors.append((prefix + name, exc.msg, exc.typ, v))
    return out


def model_list(model: str, fields: dict[str, Field]) -> Check:
    """A ``List[Model]`` field: every item must be a dict (an instance is its dict here)."""

    def check(v: Any) -> Any:
        if not isinstance(v, (list, tuple)):
            raise _Invalid("Input should be a valid list", "list_type")
        errors: list[tuple[str, str, str, Any]] = []
        out = []
        for i, item in enumerate(v):
            if isinstance(item, dict):
                sub: list[tuple[str, str, str, Any]] = []
                built = _build(fields, item, sub, prefix="")
                errors.extend((f"{i}.{loc}", msg, typ, val) for loc, msg, typ, val in sub)
                out.append(built)
            else:
                errors.append((str(i), f"Input should be a valid dictionary or instance of {model}", "model_type", item))
        if errors:
            raise _Invalid("", "", errors)
        return out

    return check
