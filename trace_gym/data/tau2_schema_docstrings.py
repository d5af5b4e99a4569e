"""Google-style docstrings as τ²-bench reads them for its tool schemas (description, parameter texts).

tau2-bench parses a tool method's docstring with ``docstring_parser`` in its automatic mode; for the
Google style that its code uses, the result is what :func:`parse_docstring` returns: the first line is
the short description, the text up to the first section title (``Args:``, ``Returns:``, ``Raises:``...
alone on an unindented line) is the long one, and each ``name: text`` item of a parameter section gives
that parameter's description (continuation lines are dedented and kept on their own lines;
``Attributes:`` items count as parameters too, ``name (type, optional):`` gives the name).  A section
that does not parse (an item without a colon, a parameter section with no item) leaves the docstring as
plain text.  Docstrings in the other styles that parser knows (reST ``:param x:``, epydoc ``@param``,
numpydoc underlined titles) are refused with :class:`DocstringStyleError`.
"""

from __future__ import annotations

import inspect
import re

__all__ = ["DocstringStyleError", "parse_docstring"]


class DocstringStyleError(ValueError):
    """The docstring is not in the Google style."""


_SECTIONS = {"Arguments": "param", "Args": "param", "Parameters": "param", "Params": "param",
             "Raises": "multi", "Exceptions": "multi", "Except": "multi", "Attributes": "param",
             "Example": "single", "Examples": "single", "Returns": "either", "Yields": "either"}
_TITLE = re.compile("^(" + "|".join(_SECTIONS) + "):[ \t\r\f\v]*$", re.M)
_TYPED_ARG = re.compile(r"\s*(.+?)\s*\(\s*(.*[^\s]+)\s*\)")
_MULTI_ITEM = re.compile(r"(\s*[^:\s]+:)|([^:]*\]:.*)")
_OTHER_STYLE = re.compile(r"^(:|@|\.\. |[-=]{3,}\s*$)", re.M)


class _Malformed(Exception):
    """A Google section that does not parse; the docstring then counts as plain text."""


def _split_description(text: str) -> tuple[str, str]:
    first, _, rest = text.partition("\n")
    return first, rest.strip()


def _item(text: str, kind: str) -> tuple[str, str] | None:
    """``(name, description)`` of one section item (``None`` for a single-text item)."""
    if kind == "single" or (kind == "either" and not _MULTI_ITEM.match(text)):
        return None
    if ":" not in text:
        raise _Malformed
    before, desc = text.split(":", 1)
    if "\n" in before:
        head, rest = before.split("\n", 1)
        before = head + inspect.cleandoc(rest)
    if desc:
        desc = desc[1:] if desc[0] == " " else desc
        if "\n" in desc:
            head, rest = desc.split("\n", 1)
            desc = head + "\n" + inspect.cleandoc(rest)
        desc = desc.strip("\n")
    return before, desc


def _google_params(meta: str) -> dict[str, tuple[str, str | None]]:
    """Parameter name -> (description, type written in the docstring) from the sections text."""
    titles = list(_TITLE.finditer(meta))
    chunks: dict[str, str] = {}
    for i, m in enumerate(titles):
        body = meta[m.end(): titles[i + 1].start() if i + 1 < len(titles) else len(meta)]
        stray = re.search(r"\n\S", body)  # an unindented line ends a section
        chunks[m.group(1)] = (body[: stray.start()] if stray else body).strip("\n")
    params: dict[str, tuple[str, str | None]] = {}
    for title, chunk in chunks.items():
        kind = _SECTIONS[title]
        if kind in ("single", "either"):
            _item(inspect.cleandoc(chunk), kind)
            continue
        indent = re.match(r"^\s*", chunk).group()  # type: ignore[union-attr]
        starts = list(re.finditer("^" + indent + r"(?=\S)", chunk, re.M))
        if not starts:
            raise _Malformed
        for j, s in enumerate(starts):
            end = starts[j + 1].start() if j + 1 < len(starts) else len(chunk)
            name, desc = _item(chunk[s.end(): end].strip("\n"), kind)  # type: ignore[misc]
            if kind == "param":
                typed = _TYPED_ARG.match(name)
                if typed:
                    name, type_name = typed.group(1), typed.group(2)
                    for tail in (", optional", "?"):
                        if type_name.endswith(tail):
                            type_name = type_name[: -len(tail)]
                            break
                    params[name] = (desc, type_name)
                else:
                    params[name] = (desc, None)
    return params


def parse_docstring(doc: str | None) -> tuple[str, str, dict[str, tuple[str, str | None]]]:
    """``(short, long, params)`` of a raw docstring: the first line, the rest of the text before the first
    section (stripped), and per documented parameter its description and written type (or ``None``).

    A section that does not parse (an item without a colon, an empty parameter section) makes the whole
    docstring plain text: the description is then all of it and no parameter is documented.
    """
    if not doc:
        return "", "", {}
    text = inspect.cleandoc(doc)
    if _OTHER_STYLE.search(text):
        raise DocstringStyleError("only Google-style docstrings are understood (a line starts like a "
                                  "reST/epydoc/numpydoc field)")
    title = _TITLE.search(text)
    desc, meta = (text[: title.start()], text[title.start():]) if title else (text, "")
    try:
        params = _google_params(meta) if meta else {}
    except _Malformed:
        desc, params = text, {}
    short, long = _split_description(desc)
    return short, long, params
