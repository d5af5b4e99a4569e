"""Parse an agent's text action into a message and/or tool calls.

The grammar (checked in this order, after removing reasoning):

1. **Reasoning** — ``<think>...</think>`` blocks are removed; if the action contains a
   ``</think>`` with no opening tag (chat templates that open the block in the prompt),
   everything up to it is removed.  Reasoning is never shown to the user.
2. **Hermes / Qwen blocks** — if the action contains ``<tool_call>``, every
   ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block is one call, in
   order; a block holding a JSON list of such objects (SmolLM2's
   ``<tool_call>[{...}, {...}]</tool_call>``) is its calls, in order.  Text outside the blocks is kept as the assistant message's ``content`` (a
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
environment changes no state.  So is an empty action, and so is an action over a
limit: values nested more than :data:`MAX_DEPTH` levels, more than :data:`MAX_CALLS`
calls in one action, call syntax ``name(...)`` longer than :data:`MAX_CALL_SYNTAX_CHARS`
characters (JSON calls have no length limit of their own).

Parsing is total and linear: no input of any shape or size raises, and the time is
proportional to the action's length (tags are found with plain substring search,
JSON nesting is measured before decoding, call syntax is bounded before Python's
parser sees it).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .boundedjson import MAX_DEPTH, JSONLimitError
from .boundedjson import loads as _loads
from .messages import ToolCall

__all__ = ["ParsedAction", "parse_action", "format_tool_call", "strip_reasoning", "MAX_DEPTH", "MAX_CALLS",
           "MAX_CALL_SYNTAX_CHARS"]

MAX_CALLS = 64  # tool calls in one action
MAX_CALL_SYNTAX_CHARS = 20_000  # Python's parser takes ~10 µs a character on some shapes: bound its input

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_CALL_OPEN, _CALL_CLOSE = "<tool_call>", "</tool_call>"
_CLOSE_RETRIES = 16  # later closing tags tried when a block's JSON holds "</tool_call>" in a string
_FENCE_LANG = re.compile(r"[a-zA-Z0-9_-]*")
_PYCALL_HEAD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*\(")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")

_JSON_CALL_HELP = 'write a call as {"name": "<tool>", "arguments": {...}}'
_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})
_ARGS_ENCODER = json.JSONEncoder(ensure_ascii=False)  # same text as json.dumps(..., ensure_ascii=False)


def _make_args_encoder() -> Any:
    """``_ARGS_ENCODER.encode``, with the C encoder it runs built once instead of on every call.

    The C encoder is made exactly as ``JSONEncoder.iterencode`` makes it, but without
    circular-reference markers; anything it cannot encode (a cycle, a value that is not
    JSON) goes to ``_ARGS_ENCODER.encode``, which returns or raises what it always did.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - Python without the _json accelerator
        return _ARGS_ENCODER.encode
    enc = _ARGS_ENCODER
    fast = make(None, enc.default, json.encoder.encode_basestring, enc.indent, enc.key_separator,
                enc.item_separator, enc.sort_keys, enc.skipkeys, enc.allow_nan)
    join = "".join

    def encode(value: Any) -> str:
        try:
            return join(fast(value, 0))
        except Exception:
            return enc.encode(value)

    return encode


_encode_args = _make_args_encoder()


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
             "function": {"name": name, "arguments": _encode_args(args)}}
            for i, (name, args) in enumerate(self.calls)
        ]


def strip_reasoning(text: str) -> str:
    """Remove ``<think>...</think>`` blocks, then everything up to a last unopened ``</think>``."""
    if "think>" not in text:  # the common case: no reasoning to remove
        return text
    if _THINK_OPEN in text:
        kept, pos = [], 0
        while (start := text.find(_THINK_OPEN, pos)) >= 0:
            end = text.find(_THINK_CLOSE, start + len(_THINK_OPEN))
            if end < 0:  # no later block can close either
                break
            kept.append(text[pos:start])
            pos = end + len(_THINK_CLOSE)
        if pos:
            kept.append(text[pos:])
            text = "".join(kept)
    cut = text.rfind(_THINK_CLOSE)
    return text[cut + len(_THINK_CLOSE):] if cut >= 0 else text


def _decode(text: str, where: str, help_text: str = _JSON_CALL_HELP) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, error)`` for JSON text from the agent."""
    try:
        return _loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"{where}: invalid JSON ({exc.msg} at char {exc.pos}); {help_text}"
    except JSONLimitError as exc:
        return None, f"{where}: the JSON is over a limit ({exc})"


def _call_from_obj(obj: Any, where: str) -> tuple[str, dict[str, Any]] | str:
    """Turn a decoded JSON value into (name, arguments), or return an error string."""
    if type(obj) is dict and len(obj) == 2:  # the usual {"name": ..., "arguments": {...}}, as the checks below take it
        name, args = obj.get("name"), obj.get("arguments")
        if type(name) is str and name and type(args) is dict:
            return name, args
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
        if not args.strip():
            args = {}
        else:
            try:
                args = _loads(args)
            except json.JSONDecodeError as exc:
                return f"{where}: \"arguments\" is a string that is not valid JSON ({exc.msg} at char {exc.pos})"
            except JSONLimitError as exc:
                return f"{where}: \"arguments\" is a string whose JSON is over a limit ({exc})"
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return f'{where}: "arguments" must be a JSON object, got {type(args).__name__}'
    return name, args


def _too_many(n: int) -> ParsedAction:
    return ParsedAction(error=f"more than {MAX_CALLS} tool calls in one action ({n} or more); send at most {MAX_CALLS} at a time")


def _parse_blocks(text: str) -> ParsedAction:
    calls: list[tuple[str, dict[str, Any]]] = []
    rest: list[str] = []
    pos = 0
    while (start := text.find(_CALL_OPEN, pos)) >= 0:
        end = text.find(_CALL_CLOSE, start + len(_CALL_OPEN))
        if end < 0:  # no later block can close either
            break
        n = len(calls) + 1
        if n > MAX_CALLS:
            return _too_many(n)
        where = f"<tool_call> block {n}"
        obj, error = _decode(text[start + len(_CALL_OPEN):end].strip(), where)
        # A closing tag may sit inside a JSON string argument: try a few later closing tags
        # (a bounded number, so parsing stays linear) before reporting the first error.
        later = end
        for _ in range(_CLOSE_RETRIES if error is not None else 0):
            later = text.find(_CALL_CLOSE, later + len(_CALL_CLOSE))
            if later < 0:
                break
            obj2, error2 = _decode(text[start + len(_CALL_OPEN):later].strip(), where)
            if error2 is None:
                obj, error, end = obj2, None, later
                break
        if error is not None:
            return ParsedAction(error=error)
        items = obj if isinstance(obj, list) else [obj]  # a JSON list in one block: several calls (SmolLM2)
        if not items:
            return ParsedAction(error=f"{where}: an empty list calls nothing; {_JSON_CALL_HELP}, "
                                      "or send plain text without <tool_call> to talk to the user")
        if len(calls) + len(items) > MAX_CALLS:
            return _too_many(len(calls) + len(items))
        for i, item in enumerate(items):
            res = _call_from_obj(item, where if len(items) == 1 else f"{where}, call {i + 1}")
            if isinstance(res, str):
                return ParsedAction(error=res)
            calls.append(res)
        rest.append(text[pos:start])
        pos = end + len(_CALL_CLOSE)
    rest.append(text[pos:])
    outside = "".join(rest)
    if _CALL_OPEN in outside or _CALL_CLOSE in outside:
        return ParsedAction(error="unbalanced <tool_call> tags: every <tool_call> needs a matching </tool_call>")
    preamble = outside.strip() or None
    return ParsedAction(content=preamble, calls=calls)


def _parse_json(text: str) -> ParsedAction:
    try:
        obj = _loads(text)
    except json.JSONDecodeError as exc:
        return ParsedAction(error=f"the action starts like JSON but is not valid JSON ({exc.msg} at char {exc.pos}); {_JSON_CALL_HELP}, or send plain text to talk to the user")
    except JSONLimitError as exc:
        return ParsedAction(error=f"the action's JSON is over a limit ({exc})")
    if type(obj) is dict:  # one call, the usual action
        res = _call_from_obj(obj, "JSON call")
        return ParsedAction(error=res) if isinstance(res, str) else ParsedAction(calls=[res])
    items = obj if isinstance(obj, list) else [obj]
    if not items:
        return ParsedAction(error=f"an empty JSON list calls nothing; {_JSON_CALL_HELP}")
    if len(items) > MAX_CALLS:
        return _too_many(len(items))
    calls = []
    for i, item in enumerate(items):
        res = _call_from_obj(item, "JSON call" if len(items) == 1 else f"JSON call {i + 1}")
        if isinstance(res, str):
            return ParsedAction(error=res)
        calls.append(res)
    return ParsedAction(calls=calls)


class _TooDeep(ValueError):
    pass


def _literal(node: ast.AST, depth: int = 1) -> Any:
    if depth > MAX_DEPTH:
        raise _TooDeep
    if type(node) is ast.Constant and type(node.value) in _JSON_SCALARS:
        return node.value
    # Accept JSON spellings too: true/false/null.
    if isinstance(node, ast.Name) and node.id in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k, depth + 1): _literal(v, depth + 1) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.Set):
        raise ValueError("a set is not a JSON value")
    value = ast.literal_eval(node)
    if type(value) not in _JSON_SCALARS:  # bytes, complex numbers, ...: no JSON spelling
        raise ValueError(f"{type(value).__name__} is not a JSON value")
    return value


_SYNTAX_HELP = "the action starts like a call name(arg=value, ...) but is not valid call syntax; check quotes, commas and brackets"


def _parse_python(text: str) -> ParsedAction | None:
    """Python call syntax; None if the text is not an attempted call."""
    if not _PYCALL_HEAD.match(text):
        return None
    if len(text) > MAX_CALL_SYNTAX_CHARS:
        return ParsedAction(error=f"call syntax name(...) is limited to {MAX_CALL_SYNTAX_CHARS} characters, got {len(text)}; "
                                  f"send a longer call as JSON: {_JSON_CALL_HELP}")
    try:
        tree = ast.parse(text, mode="exec")
    except (SyntaxError, ValueError):
        return ParsedAction(error=_SYNTAX_HELP)
    except (RecursionError, MemoryError):  # Python's parser gives up on deeply nested expressions
        return ParsedAction(error=f"the call is nested too deeply to parse; values may nest at most {MAX_DEPTH} levels")
    if len(tree.body) > MAX_CALLS and all(isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) for stmt in tree.body):
        return _too_many(len(tree.body))
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
            except _TooDeep:
                return ParsedAction(error=f"{name}(...): argument {kw.arg!r} is nested more than {MAX_DEPTH} levels deep; send flatter arguments")
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                return ParsedAction(error=f"{name}(...): argument {kw.arg!r} must be a literal (string, number, boolean, None, list or dict)")
        calls.append((name, args))
    if not calls:
        return None
    return ParsedAction(calls=calls)


def _unfence(text: str) -> str:
    """The body of a whole-action Markdown code fence (```lang ... ```), or the text itself."""
    if len(text) < 6 or not text.startswith("```") or not text.endswith("```"):
        return text
    inner = text[3:-3]
    lang = _FENCE_LANG.match(inner)
    return inner[lang.end() if lang else 0:].strip()


def parse_action(action: str) -> ParsedAction:
    """Parse one text action; see the module docstring for the grammar."""
    if type(action) is str and action[:1] == "{" and action[-1:] == "}" and "think>" not in action and "tool_call>" not in action:
        return _parse_json(action)  # a bare JSON call: what the steps below come to, without them
    if not isinstance(action, str):
        return ParsedAction(error=f"an action must be a string, got {type(action).__name__}")
    text = strip_reasoning(action)
    if _CALL_OPEN in text or _CALL_CLOSE in text:
        return _parse_blocks(text)
    stripped = text.strip()
    if not stripped:
        return ParsedAction(error="empty action: send a message to the user or call a tool")
    body = _unfence(stripped)
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
