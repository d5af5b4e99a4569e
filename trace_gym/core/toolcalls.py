"""Parse an agent's text action into a message and/or tool calls.

The grammar (checked in this order, after removing reasoning):

1. **Reasoning** — ``<think>...</think>`` blocks are removed; if the action contains a
   ``</think>`` with no opening tag (chat templates that open the block in the prompt),
   everything up to it is removed.  Reasoning is never shown to the user.
2. **Hermes / Qwen blocks** — if the action contains ``<tool_call>``, every
   ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block is one call, in
   order.  Text outside the blocks is kept as the assistant message's ``content`` (a
   preamble, as in the OpenAI format) but it is **not** delivered to the user: an action
   that calls tools talks to the tools only.
3. **JSON** — if the whole action (optionally inside a single Markdown code fence) is a
   JSON object ``{"name": ..., "arguments": {...}}`` (OpenAI's
   ``{"type": "function", "function": {...}}`` shape and ``"parameters"`` instead of
   ``"arguments"`` are accepted too), it is one call; a JSON list of such objects is
   several calls, executed in order.
4. **Python call syntax** — if the whole action is one or more calls
   ``name(arg=value, ...)`` separated by newlines or ``;`` with keyword arguments whose
   values are literals (strings, numbers, booleans, ``None``/``null``, lists, dicts),
   each is one call, in order.
5. **Anything else** is a message to the user.

An action that *tries* to be a call but is malformed — an unclosed ``<tool_call>``,
text that starts with ``name(`` but is not valid call syntax,
invalid JSON inside a block or in an action that starts with ``{``/``[``, a JSON object
without a ``name``, positional arguments, non-literal values — is a format error:
:attr:`ParsedAction.error` says what was wrong and how to write it instead, and the
environment changes no state.  So is an empty action.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .messages import ToolCall

__all__ = ["ParsedAction", "parse_action", "format_tool_call", "strip_reasoning"]

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL)
_BLOCK_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FENCE_RE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)
_PYCALL_HEAD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*\(")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")

_JSON_CALL_HELP = 'write a call as {"name": "<tool>", "arguments": {...}}'
_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})
_ARGS_ENCODER = json.JSONEncoder(ensure_ascii=False)  # same text as json.dumps(..., ensure_ascii=False)


@dataclass(slots=True)
class ParsedAction:
    """The result of parsing one text action.

    ``content`` is the text for the user when there are no calls, or the preamble kept
    with the calls; ``calls`` are the parsed calls (ids are assigned by the caller);
    ``error`` is set (and ``calls`` empty) when the action is malformed.
    """

    content: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    error: str | None = None

    @property
    def is_call(self) -> bool:
        return bool(self.calls)

    def tool_calls(self, start: int = 0, prefix: str = "call_") -> list[ToolCall]:
        return [ToolCall(f"{prefix}{start + i}", name, args) for i, (name, args) in enumerate(self.calls)]

    def openai_tool_calls(self, start: int = 0, prefix: str = "call_") -> list[dict[str, Any]]:
        """The calls as OpenAI ``tool_calls`` dicts, exactly ``[c.to_dict() for c in self.tool_calls(start, prefix)]``
        (built directly: this runs on every step)."""
        return [
            {"id": f"{prefix}{start + i}", "type": "function",
             "function": {"name": name, "arguments": _ARGS_ENCODER.encode(args)}}
            for i, (name, args) in enumerate(self.calls)
        ]


def strip_reasoning(text: str) -> str:
    if "think>" not in text:  # the common case: no reasoning to remove
        return text
    text = _THINK_RE.sub("", text)
    if "</think>" in text:
        text = text.split("</think>")[-1]
    return text


def _call_from_obj(obj: Any, where: str) -> tuple[str, dict[str, Any]] | str:
    """Turn a decoded JSON value into (name, arguments), or return an error string."""
    if not isinstance(obj, dict):
        return f"{where}: expected a JSON object, got {type(obj).__name__}; {_JSON_CALL_HELP}"
    if obj.get("type") == "function" and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return f'{where}: the object has no string "name"; {_JSON_CALL_HELP}'
    extra = obj.keys() - _CALL_KEYS
    if extra:
        return f"{where}: unexpected keys {sorted(extra)} next to the call; put the tool's arguments inside \"arguments\""
    args: Any = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return f"{where}: \"arguments\" is a string that is not valid JSON ({exc.msg} at char {exc.pos})"
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return f'{where}: "arguments" must be a JSON object, got {type(args).__name__}'
    return name, args


def _parse_blocks(text: str) -> ParsedAction:
    calls: list[tuple[str, dict[str, Any]]] = []
    for i, m in enumerate(_BLOCK_RE.finditer(text)):
        body = m.group(1).strip()
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as exc:
            return ParsedAction(error=f"<tool_call> block {i + 1}: invalid JSON ({exc.msg} at char {exc.pos}); {_JSON_CALL_HELP}")
        res = _call_from_obj(obj, f"<tool_call> block {i + 1}")
        if isinstance(res, str):
            return ParsedAction(error=res)
        calls.append(res)
    rest = _BLOCK_RE.sub("", text)
    if "<tool_call>" in rest or "</tool_call>" in rest:
        return ParsedAction(error="unbalanced <tool_call> tags: every <tool_call> needs a matching </tool_call>")
    preamble = rest.strip() or None
    return ParsedAction(content=preamble, calls=calls)


def _parse_json(text: str) -> ParsedAction:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return ParsedAction(error=f"the action starts like JSON but is not valid JSON ({exc.msg} at char {exc.pos}); {_JSON_CALL_HELP}, or send plain text to talk to the user")
    items = obj if isinstance(obj, list) else [obj]
    if not items:
        return ParsedAction(error=f"an empty JSON list calls nothing; {_JSON_CALL_HELP}")
    calls = []
    for i, item in enumerate(items):
        res = _call_from_obj(item, "JSON call" if len(items) == 1 else f"JSON call {i + 1}")
        if isinstance(res, str):
            return ParsedAction(error=res)
        calls.append(res)
    return ParsedAction(calls=calls)


def _literal(node: ast.AST) -> Any:
    # Accept JSON spellings too: true/false/null.
    if isinstance(node, ast.Name) and node.id in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[node.id]
    if isinstance(node, ast.List):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    value = ast.literal_eval(node)
    if type(value) not in _JSON_SCALARS:  # sets, bytes, complex numbers, ...: no JSON spelling
        raise ValueError(f"{type(value).__name__} is not a JSON value")
    return value


def _parse_python(text: str) -> ParsedAction | None:
    """Python call syntax; None if the text is not an attempted call."""
    if not _PYCALL_HEAD.match(text):
        return None
    try:
        tree = ast.parse(text, mode="exec")
    except (SyntaxError, ValueError):
        return ParsedAction(
            error="the action starts like a call name(arg=value, ...) but is not valid call syntax; "
            "check quotes, commas and brackets"
        )
    calls = []
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)):
            return None
        call = stmt.value
        name = call.func.id  # type: ignore[union-attr]
        if call.args:
            return ParsedAction(error=f"{name}(...): pass arguments by keyword, e.g. {name}(order_id=\"#W123\")")
        args: dict[str, Any] = {}
        for kw in call.keywords:
            if kw.arg is None:
                return ParsedAction(error=f"{name}(...): **kwargs is not allowed; name each argument")
            try:
                args[kw.arg] = _literal(kw.value)
            except (ValueError, TypeError, SyntaxError):
                return ParsedAction(error=f"{name}(...): argument {kw.arg!r} must be a literal (string, number, boolean, None, list or dict)")
        calls.append((name, args))
    if not calls:
        return None
    return ParsedAction(calls=calls)


def parse_action(action: str) -> ParsedAction:
    """Parse one text action; see the module docstring for the grammar."""
    if not isinstance(action, str):
        return ParsedAction(error=f"an action must be a string, got {type(action).__name__}")
    text = strip_reasoning(action)
    if "<tool_call>" in text or "</tool_call>" in text:
        return _parse_blocks(text)
    stripped = text.strip()
    if not stripped:
        return ParsedAction(error="empty action: send a message to the user or call a tool")
    fence = _FENCE_RE.match(stripped) if stripped.startswith("```") else None
    body = fence.group(1).strip() if fence else stripped
    if body.startswith("{") or body.startswith("[{") or (body.startswith("[") and body.endswith("]") and '"name"' in body):
        return _parse_json(body)
    py = _parse_python(body)
    if py is not None:
        return py
    return ParsedAction(content=stripped)


def format_tool_call(name: str, arguments: dict[str, Any], style: str = "hermes") -> str:
    """Render a call as text an environment parses back to the same call."""
    payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    if style == "hermes":
        return f"<tool_call>\n{payload}\n</tool_call>"
    if style == "json":
        return payload
    if style == "python":
        if not _IDENT.match(name) or "." in name or "-" in name:
            raise ValueError(f"{name!r} is not a Python identifier; use style='hermes'")
        parts = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        return f"{name}({parts})"
    raise ValueError(f"unknown style {style!r}; expected 'hermes', 'json' or 'python'")
