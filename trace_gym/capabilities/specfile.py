"""Reading a capability spec file into a document, within bounds.

A spec folder may hold anything, so reading one is bounded at every step and every
problem is a :class:`SpecError` naming the file and the place inside it:

* **size** — a file over :data:`MAX_SPEC_BYTES` is refused before it is read;
* **encoding** — the text must be UTF-8 (the error gives the offset of the first bad byte);
* **nesting** — at most :data:`MAX_SPEC_DEPTH` levels of mappings and lists, checked while
  parsing (YAML) or before decoding (JSON), so a deep file never reaches a recursion limit;
* **aliases** — at most :data:`MAX_SPEC_ALIASES` uses of YAML aliases, merge keys that
  expand to at most :data:`MAX_SPEC_VALUES` entries, and a document that, aliases
  expanded, has at most :data:`MAX_SPEC_VALUES` values (an alias bomb is refused at once),
  with no anchor containing itself;
* **duplicate keys** — a key given twice in one mapping is an error, not a silent overwrite
  (YAML merge keys ``<<`` may still be overridden).

This module reads only; :mod:`trace_gym.capabilities.spec` validates the document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core import boundedjson

__all__ = ["SpecError", "MAX_SPEC_BYTES", "MAX_SPEC_DEPTH", "MAX_SPEC_ALIASES", "MAX_SPEC_VALUES", "SPEC_SUFFIXES",
           "read_spec_text", "parse_spec_text", "read_spec_document", "check_shape"]

MAX_SPEC_BYTES = 1 << 20  # 1 MiB
MAX_SPEC_DEPTH = 64
MAX_SPEC_ALIASES = 128
MAX_SPEC_VALUES = 200_000  # values in the document once aliases are expanded
SPEC_SUFFIXES = (".yaml", ".yml", ".json")


class SpecError(ValueError):
    """An invalid capability spec: ``file``, ``where`` (a path inside it) and the ``problem`` (what was expected)."""

    def __init__(self, file: str, where: str, problem: str):
        self.file, self.where, self.problem = file, where, problem
        super().__init__(f"{file}: at {where or '(top level)'}: {problem}")


def read_spec_text(path: str | Path) -> str:
    """The text of a spec file: at most :data:`MAX_SPEC_BYTES` bytes of UTF-8."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise SpecError(str(p), "", f"a spec file of at most {MAX_SPEC_BYTES} bytes, got {size} bytes")
        with open(p, "rb") as fh:
            data = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError(str(p), "", f"a readable file ({exc.strerror or exc})") from None
    if len(data) > MAX_SPEC_BYTES:  # grew while being read
        raise SpecError(str(p), "", f"a spec file of at most {MAX_SPEC_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(str(p), f"line {line} (byte {exc.start})",
                        f"UTF-8 text; byte 0x{data[exc.start]:02x} is not valid UTF-8 ({exc.reason})") from None


class _Limit(Exception):
    def __init__(self, problem: str, mark: Any = None):
        super().__init__(problem)
        self.problem, self.mark = problem, mark


def _yaml_loader(pure_python: bool) -> type:
    import yaml

    merge_tag = "tag:yaml.org,2002:merge"
    # libyaml when present: the same documents, several times faster
    base: type = yaml.SafeLoader if pure_python else getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class BoundedLoader(base):  # type: ignore[misc, valid-type]
        """The safe loader with nesting, alias and merge limits, and duplicate keys refused.

        With libyaml, nesting is bounded by libyaml itself while parsing and to
        :data:`MAX_SPEC_DEPTH` by :func:`check_shape`; the pure-Python parser stops at
        :data:`MAX_SPEC_DEPTH` while scanning and composing.
        """

        def __init__(self, stream: str):
            super().__init__(stream)
            self._depth = 0
            self._aliases = 0
            self._merged = 0

        # -- pure-Python parser only (libyaml does not call these)
        def fetch_flow_collection_start(self, token_class: Any) -> None:
            if self.flow_level >= MAX_SPEC_DEPTH:  # deeper flow levels make the scanner quadratic
                raise _Limit(f"mappings and lists nested at most {MAX_SPEC_DEPTH} levels deep", self.get_mark())
            super().fetch_flow_collection_start(token_class)

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                return super().compose_node(parent, index)
            self._depth += 1
            try:
                if self._depth > MAX_SPEC_DEPTH:
                    raise _Limit(f"mappings and lists nested at most {MAX_SPEC_DEPTH} levels deep", self.peek_event().start_mark)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        # -- both parsers
        def construct_object(self, node: Any, deep: bool = False) -> Any:
            if node in self.constructed_objects or node in self.recursive_objects:  # a node used again: an alias
                self._aliases += 1
                if self._aliases > MAX_SPEC_ALIASES:
                    raise _Limit(f"at most {MAX_SPEC_ALIASES} uses of YAML aliases (*name)", node.start_mark)
            return super().construct_object(node, deep=deep)

        def flatten_mapping(self, node: Any) -> None:
            super().flatten_mapping(node)
            self._merged += len(node.value)
            if self._merged > MAX_SPEC_VALUES:
                raise _Limit(f"a document of at most {MAX_SPEC_VALUES} values once YAML merge keys (<<) are expanded",
                             node.start_mark)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[tuple[str, str]] = set()
                for key_node, _ in node.value:
                    if key_node.tag == merge_tag or not isinstance(key_node, yaml.ScalarNode):
                        continue
                    key = (key_node.tag, key_node.value)
                    if key in seen:
                        raise _Limit(f"each key once per mapping; {key_node.value!r} is given twice", key_node.start_mark)
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return BoundedLoader


_LOADERS: dict[bool, type] = {}


def _load_yaml(text: str, source: str, pure_python: bool = False) -> Any:
    import yaml

    if pure_python not in _LOADERS:
        _LOADERS[pure_python] = _yaml_loader(pure_python)
    loader = _LOADERS[pure_python](text)
    try:
        return loader.get_single_data()
    except _Limit as exc:
        where = f"line {exc.mark.line + 1} column {exc.mark.column + 1}" if exc.mark is not None else ""
        raise SpecError(source, where, exc.problem) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise SpecError(source, where, f"valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    except RecursionError:  # not expected within the depth limit; bounded all the same
        raise SpecError(source, "", f"mappings and lists nested at most {MAX_SPEC_DEPTH} levels deep") from None
    finally:
        loader.dispose()


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Limit(f"each key once per object; {k!r} is given twice")
        out[k] = v
    return out


def _load_json(text: str, source: str) -> Any:
    try:
        return boundedjson.loads(text, max_depth=MAX_SPEC_DEPTH, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise SpecError(source, f"line {exc.lineno} column {exc.colno}", f"valid JSON ({exc.msg})") from None
    except boundedjson.JSONLimitError as exc:
        raise SpecError(source, "", f"JSON within limits ({exc})") from None
    except _Limit as exc:
        raise SpecError(source, "", exc.problem) from None


def parse_spec_text(text: str, source: str = "<spec>", *, json_syntax: bool | None = None) -> Any:
    """Parse spec text (JSON when ``json_syntax`` or ``source`` ends in ``.json``, else YAML) within the limits."""
    if json_syntax is None:
        json_syntax = str(source).endswith(".json")
    if len(text) > MAX_SPEC_BYTES:  # characters; the byte limit is checked when reading a file
        raise SpecError(source, "", f"a spec of at most {MAX_SPEC_BYTES} characters, got {len(text)}")
    doc = _load_json(text, source) if json_syntax else _load_yaml(text, source)
    check_shape(doc, source)
    return doc


def read_spec_document(path: str | Path) -> Any:
    """Read and parse one spec file (see the module docstring for the limits)."""
    p = Path(path)
    return parse_spec_text(read_spec_text(p), str(p), json_syntax=p.suffix == ".json")


def check_shape(doc: Any, source: str = "<spec>") -> None:
    """Refuse a document that contains itself, nests deeper than :data:`MAX_SPEC_DEPTH` or
    expands to more than :data:`MAX_SPEC_VALUES` values (shared parts counted once per use).

    Each distinct list or mapping is visited once, so this is linear in the document as
    stored, however large the expansion would be.
    """
    memo: dict[int, tuple[int, int]] = {}  # id -> (values when expanded, depth)
    on_path: set[int] = set()
    keep: list[Any] = []  # keeps visited containers alive so their ids stay unique
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        key = id(node)
        if done:
            children = node.values() if isinstance(node, dict) else node
            size, depth = 1, 1
            for c in children:
                if isinstance(c, (dict, list)):
                    s, d = memo[id(c)]
                    size, depth = size + s, max(depth, d + 1)
                else:
                    size += 1
            on_path.discard(key)
            if size > MAX_SPEC_VALUES:
                raise SpecError(source, "", f"a document of at most {MAX_SPEC_VALUES} values once YAML aliases are "
                                            f"expanded (an anchor used many times, nested, multiplies)")
            if depth > MAX_SPEC_DEPTH:
                raise SpecError(source, "", f"mappings and lists nested at most {MAX_SPEC_DEPTH} levels deep")
            memo[key] = (size, depth)
            continue
        if key in memo:
            continue
        if key in on_path:
            raise SpecError(source, "", "a tree of plain values (a YAML anchor may not contain itself)")
        on_path.add(key)
        keep.append(node)
        stack.append((node, True))
        for c in (node.values() if isinstance(node, dict) else node):
            if isinstance(c, (dict, list)):
                if id(c) in on_path:
                    raise SpecError(source, "", "a tree of plain values (a YAML anchor may not contain itself)")
                if id(c) not in memo:
                    stack.append((c, False))
