"""Pieces shared by several domains: the ``calculate`` tool and model-like attribute access."""

from __future__ import annotations

import ast
import operator
from typing import Any

__all__ = ["calculate", "field_of", "Obj"]

_ALLOWED_CHARS = frozenset("0123456789+-*/(). ")
_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
_UNOPS = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_MAX_POW_BITS = 100_000


def _bits(x: Any) -> int:
    if isinstance(x, int):
        return max(x.bit_length(), 1)
    return 64


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
            if right > 0 and _bits(left) * right > _MAX_POW_BITS:
                # the exact power would be astronomically large; tau2 would fail converting it to float
                raise OverflowError("int too large to convert to float")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
        return _UNOPS[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e) for e in node.elts)
    raise TypeError("'NoneType' object is not subscriptable")


def calculate(expression: Any) -> str:
    """tau2's ``calculate``: arithmetic on digits, ``+-*/().`` and spaces, rounded to 2 places.

    Evaluated on the parsed expression tree (no ``eval``), with Python's semantics and
    error texts; only powers with astronomically large results are refused.
    """
    if not all(ch in _ALLOWED_CHARS for ch in expression):
        raise ValueError("Invalid characters in expression")
    if not isinstance(expression, str):
        raise TypeError("eval() arg 1 must be a string, bytes or code object")
    source = expression.lstrip(" \t")  # as eval() does for string input
    tree = compile(source, "<string>", "eval", ast.PyCF_ONLY_AST)
    return str(round(float(_eval(tree)), 2))


class Obj(dict):
    """A validated model instance held transiently by a tool (fields by key)."""

    __slots__ = ()


def field_of(obj: Any, name: str) -> Any:
    """``obj.name`` as tau2 would evaluate it on a pydantic model or a raw value."""
    if type(obj) is Obj:
        return obj[name]
    raise AttributeError(f"'{type(obj).__name__}' object has no attribute '{name}'")
