"""JSON from untrusted text: bounded nesting, time linear in the text's length.

``json.loads`` recurses once per nesting level and raises :class:`RecursionError`
(or exhausts the stack of whatever walks the result later) on about a thousand
``[``; a number with thousands of digits raises a plain :class:`ValueError`.
:func:`loads` measures the nesting first, with a vectorised scan that skips
brackets inside strings, and refuses a document nested deeper than ``max_depth``
with a :class:`JSONLimitError` before decoding anything.  Every other problem is
either :class:`json.JSONDecodeError` (malformed text) or :class:`JSONLimitError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["MAX_DEPTH", "JSONLimitError", "nesting_depth", "loads"]

MAX_DEPTH = 64

_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPENERS = (ord("["), ord("{"))
_CLOSERS = (ord("]"), ord("}"))


# The C scanner ``json.loads`` itself runs, called without its Python wrappers (see :func:`loads`).
_SCAN_ONCE = json.JSONDecoder().scan_once


class JSONLimitError(ValueError):
    """The text is JSON-like but over a limit (nesting depth, a number too long to convert)."""


class _HookError(Exception):
    def __init__(self, error: BaseException):
        self.error = error


class _Guarded:
    """An ``object_pairs_hook`` whose own errors pass through :func:`loads` unchanged."""

    __slots__ = ("hook",)

    def __init__(self, hook: Callable[[list[tuple[str, Any]]], Any]):
        self.hook = hook

    def __call__(self, pairs: list[tuple[str, Any]]) -> Any:
        try:
            return self.hook(pairs)
        except Exception as exc:
            raise _HookError(exc) from None


def nesting_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of JSON ``text``, brackets inside strings not counted.

    Linear in ``len(text)``.  Over the part of the text a decoder accepts this is
    exactly the depth it reaches, so it never under-reports what decoding needs.
    """
    if "[" not in text and "{" not in text:
        return 0
    raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    delta = np.zeros(raw.size, dtype=np.int32)
    delta[(raw == _OPENERS[0]) | (raw == _OPENERS[1])] = 1
    delta[(raw == _CLOSERS[0]) | (raw == _CLOSERS[1])] = -1
    quotes = raw == _QUOTE
    if quotes.any():
        backslashes = raw == _BACKSLASH
        real = quotes
        if backslashes.any():  # a quote after an odd run of backslashes is escaped (inside a string)
            idx = np.arange(raw.size, dtype=np.int64)
            last_plain = np.maximum.accumulate(np.where(backslashes, -1, idx))
            run = np.zeros(raw.size, dtype=np.int64)
            run[1:] = idx[:-1] - last_plain[:-1]
            real = quotes & (run % 2 == 0)
        inside = (np.cumsum(real, dtype=np.int64) & 1).astype(bool)
        delta[inside] = 0
    return max(0, int(np.cumsum(delta, dtype=np.int64).max()))


def loads(text: str, *, max_depth: int = MAX_DEPTH,
          object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` without recursing.

    Raises :class:`json.JSONDecodeError` for malformed text, :class:`JSONLimitError`
    for text over a limit, and whatever ``object_pairs_hook`` raises; nothing else.
    """
    # fewer brackets than the limit cannot nest deeper than it: skip the scan
    if text.count("[") + text.count("{") > max_depth and (depth := nesting_depth(text)) > max_depth:
        raise JSONLimitError(f"nested {depth} levels deep; at most {max_depth} levels are allowed")
    if object_pairs_hook is None:
        # The usual case, a document that fills the text exactly: the scanner alone gives what
        # json.loads gives.  Anything else (surrounding whitespace, malformed text, a limit) takes
        # the full path below, which reports it.
        try:
            value, end = _SCAN_ONCE(text, 0)
        except Exception:
            pass
        else:
            if end == len(text):
                return value
    hook = None if object_pairs_hook is None else _Guarded(object_pairs_hook)
    try:
        return json.loads(text, object_pairs_hook=hook)
    except _HookError as wrapped:
        raise wrapped.error from None
    except json.JSONDecodeError:
        raise
    except RecursionError:  # not expected below max_depth; a bounded error all the same
        raise JSONLimitError(f"nested too deeply to decode; at most {max_depth} levels are allowed") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise JSONLimitError(str(exc)) from None
