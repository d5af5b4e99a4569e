"""A tiny arithmetic evaluator for the ``calculate`` tool (numbers, + - * /, parentheses); no ``eval``."""

from __future__ import annotations

import ast
import operator

from ...core.tools import ToolError

__all__ = ["evaluate"]

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UN = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return _BIN[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UN:
        return _UN[type(node.op)](_eval(node.operand))
    raise ToolError("Invalid expression")


def evaluate(expression: str) -> float:
    """Value of an arithmetic expression; raises :class:`ToolError` on anything else."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        return _eval(tree)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except (SyntaxError, ValueError, RecursionError):
        raise ToolError("Invalid expression") from None
