"""Hostile spec files: every one is refused fast with a SpecError naming the file and the place, never a crash.

Size, encoding, nesting, YAML aliases and merge keys, duplicate keys, non-finite numbers
and unknown matcher operators, each with generated inputs; plus a broken file in a spec
folder, which must not break ``import trace_gym``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_gym.capabilities.matchers import OPERATORS, matches
from trace_gym.capabilities.spec import SpecError, load_spec, parse_spec
from trace_gym.capabilities.specfile import (
    MAX_SPEC_ALIASES,
    MAX_SPEC_BYTES,
    MAX_SPEC_DEPTH,
    MAX_SPEC_VALUES,
    _load_yaml,
    parse_spec_text,
    read_spec_document,
)

from .conftest import ENVS_DIR, SPEC_FILES

_FAST = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
STARTER = ENVS_DIR / "cap-structured-selection.yaml"
STARTER_TEXT = STARTER.read_text(encoding="utf-8")
DOCS = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in SPEC_FILES]


def _refused(fn, *args, match: str, seconds: float = 10.0, **kwargs) -> SpecError:
    # CPU time of this process: a refusal must not hang, whatever else the machine is running
    t0 = time.process_time()
    with pytest.raises(SpecError, match=match) as info:
        fn(*args, **kwargs)
    assert time.process_time() - t0 < seconds
    return info.value


def _both_parsers(text: str, match: str) -> None:
    """Through the default loader (libyaml when installed) and the pure-Python one."""
    _refused(parse_spec_text, text, "x.yaml", match=match)
    try:
        _load_yaml(text, "x.yaml", pure_python=True)
    except SpecError:
        return
    # the pure-Python loader may leave a too-large or self-containing document to the shape check
    _refused(parse_spec_text, text, "x.yaml", match=match)


def test_a_file_over_the_size_cap_is_refused_before_it_is_read(tmp_path):
    p = tmp_path / "cap-big.yaml"
    p.write_bytes(b"id: cap-big\n" + b"#" * MAX_SPEC_BYTES)
    err = _refused(load_spec, p, match=rf"at most {MAX_SPEC_BYTES} bytes", seconds=2)
    assert err.file == str(p)


@_FAST
@given(st.integers(0, len(STARTER_TEXT.encode()) - 1), st.sampled_from([b"\xff", b"\xc3", b"\xe9", b"\x80", b"\xed\xa0\x80"]))
def test_bytes_that_are_not_utf8_are_reported_with_file_and_position(tmp_path_factory, at, bad):
    raw = STARTER_TEXT.encode()
    p = tmp_path_factory.mktemp("enc") / "cap-structured-selection.yaml"
    p.write_bytes(raw[:at] + bad + raw[at:])
    err = _refused(read_spec_document, p, match="UTF-8")
    assert err.file == str(p) and "line" in err.where


@_FAST
@given(st.integers(2, 6), st.integers(3, 12))
def test_alias_bombs_are_refused_at_once(levels, fanout):
    lines = ["a0: &a0 [" + ", ".join(["lol"] * fanout) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fanout) + "]")
    text = "\n".join(lines)
    if fanout ** (levels + 1) <= MAX_SPEC_VALUES and levels * fanout <= MAX_SPEC_ALIASES:
        parse_spec_text(text, "x.yaml")  # small enough: expanded, not refused
        return
    _both_parsers(text, "aliases")


def test_too_many_alias_uses_and_self_containing_anchors_are_refused():
    _both_parsers("a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_SPEC_ALIASES + 1)) + "]", "aliases")
    _both_parsers("a: &a [1, *a]", "contain itself")
    chain = ["m0: &m0 {k0: 1}"] + [f"m{i}: &m{i} {{<<: *m{i - 1}, k{i}: 1}}" for i in range(1, 3 * MAX_SPEC_ALIASES)]
    _both_parsers("\n".join(chain), "aliases")


@_FAST
@given(st.integers(MAX_SPEC_DEPTH + 1, 30_000), st.sampled_from(["flow_list", "flow_map", "block", "json_list", "json_map"]))
def test_deep_nesting_is_refused_without_a_recursion_error(depth, style):
    if style == "flow_list":
        text, name = "a: " + "[" * depth + "]" * depth, "x.yaml"
    elif style == "flow_map":
        text, name = "a: " + "{a: " * depth + "1" + "}" * depth, "x.yaml"
    elif style == "block":
        depth = min(depth, 1_200)  # a block level costs its indentation
        text, name = "".join(" " * i + f"k{i}:\n" for i in range(depth)) + " " * depth + "v\n", "x.yaml"
    elif style == "json_list":
        text, name = "[" * depth + "]" * depth, "x.json"
    else:
        text, name = '{"a": ' * depth + "1" + "}" * depth, "x.json"
    if name.endswith(".yaml"):
        _both_parsers(text, "nested|nesting")
    else:
        _refused(parse_spec_text, text, name, match="nested")


def test_nesting_within_the_limit_is_accepted():
    depth = MAX_SPEC_DEPTH - 1
    def nested(n):
        return [] if n == 1 else [nested(n - 1)]

    assert parse_spec_text("[" * depth + "]" * depth, "x.json") == nested(depth)
    assert parse_spec_text("a: " + "[" * (depth - 1) + "]" * (depth - 1), "x.yaml") == {"a": nested(depth - 1)}


_KEYS = st.from_regex(r"[a-z][a-z_]{0,6}", fullmatch=True)


@_FAST
@given(st.lists(_KEYS, min_size=1, max_size=6, unique=True), st.data())
def test_duplicate_keys_are_refused_in_yaml_and_json(keys, data):
    dup = data.draw(st.sampled_from(keys))
    pairs = [(k, i) for i, k in enumerate(keys)] + [(dup, 99)]
    order = data.draw(st.permutations(pairs))
    yaml_text = "\n".join(f"{k}: {v}" for k, v in order)
    json_text = "{" + ", ".join(f'"{k}": {v}' for k, v in order) + "}"
    nested = "outer:\n" + "\n".join(f"  {k}: {v}" for k, v in order)
    for text, name in ((yaml_text, "x.yaml"), (json_text, "x.json"), (nested, "x.yaml")):
        err = _refused(parse_spec_text, text, name, match="given twice")
        assert repr(dup) in str(err)
    with pytest.raises(SpecError, match="given twice"):
        _load_yaml(yaml_text, "x.yaml", pure_python=True)


def test_merge_keys_may_still_be_overridden_and_a_repeated_top_level_field_is_refused(tmp_path):
    assert parse_spec_text("base: &b {x: 1, y: 2}\nd: {<<: *b, x: 3}", "x.yaml")["d"] == {"x": 3, "y": 2}
    p = tmp_path / "cap-structured-selection.yaml"
    p.write_text(STARTER_TEXT + "floor: 0.3\n", encoding="utf-8")
    err = _refused(load_spec, p, match="'floor' is given twice")
    assert err.where.startswith("line ")


def _number_paths(node, prefix=()):
    if isinstance(node, bool):
        return
    if isinstance(node, (int, float)):
        yield prefix
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _number_paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _number_paths(v, prefix + (i,))


def _unshared(node):
    if isinstance(node, dict):
        return {k: _unshared(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_unshared(v) for v in node]
    return node


def _where(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


@_FAST
@given(st.integers(0, len(DOCS) - 1), st.sampled_from([math.nan, math.inf, -math.inf]), st.data())
def test_every_number_must_be_finite_and_the_error_names_the_field(doc_i, bad, data):
    doc = _unshared(DOCS[doc_i])  # YAML aliases share nodes: give every path its own copy
    path = data.draw(st.sampled_from(sorted(_number_paths(doc), key=str)))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = bad
    err = _refused(parse_spec, doc, "fuzzed.yaml", match="finite number")
    assert err.where == _where(path)


@pytest.mark.parametrize("text", ["floor: .nan", "floor: .inf", "floor: -.Inf"])
def test_a_nan_floor_in_a_file_is_refused(tmp_path, text):
    p = tmp_path / "cap-structured-selection.yaml"
    p.write_text(STARTER_TEXT.replace("floor: 0.5", text), encoding="utf-8")
    err = _refused(load_spec, p, match="finite number")
    assert err.where == "floor"


def _matcher_slots(doc):
    """(path to a matcher) for every matcher position of a spec document."""
    for i, case in enumerate(doc["cases"]):
        for sname, slot in case["slots"].items():
            for key in slot.get("where") or {}:
                yield ("cases", i, "slots", sname, "where", key)
        for j, r in enumerate(case["rewards"]):
            for key in r.get("args") or {}:
                yield ("cases", i, "rewards", j, "args", key)
            if "match" in r:
                yield ("cases", i, "rewards", j, "match")


@_FAST
@given(st.integers(0, len(DOCS) - 1), _KEYS.filter(lambda k: k not in OPERATORS), st.data())
def test_an_unknown_matcher_operator_is_refused_naming_the_field(doc_i, op, data):
    doc = copy.deepcopy(DOCS[doc_i])
    paths = list(_matcher_slots(doc))
    assert paths, doc["id"]  # every starter spec has matchers to corrupt
    path = data.draw(st.sampled_from(paths))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = {op: 1}
    err = _refused(parse_spec, doc, "fuzzed.yaml", match=f"unknown operator '{op}'")
    assert err.where.endswith(str(path[-1]))


def test_equality_with_a_mapping_is_written_with_eq():
    doc = copy.deepcopy(DOCS[0])
    case = doc["cases"][0]
    reward = next(r for r in case["rewards"] if r.get("args"))
    key = next(iter(reward["args"]))
    reward["args"][key] = {"eq": {"colour": "red"}}
    spec = parse_spec(doc, "ok.yaml")  # accepted: the mapping is eq's operand, not a map of operators
    kept = next(r for r in spec.data["cases"][0]["rewards"] if r["name"] == reward["name"])["args"][key]
    assert kept == {"eq": {"colour": "red"}}
    assert matches({"colour": "red"}, kept) and not matches({"colour": "blue"}, kept) and not matches("red", kept)
    with pytest.raises(SpecError, match="unknown operator 'colour'"):  # the same mapping bare is read as operators
        parse_spec(dict(doc, cases=[dict(case, rewards=[dict(reward, args={key: {"colour": "red"}})])]), "bare.yaml")


def test_one_bad_file_in_a_spec_folder_does_not_break_import(tmp_path):
    (tmp_path / "cap-latin1.yaml").write_bytes(b"id: cap-latin1\ntitle: caf\xe9\n")
    (tmp_path / "cap-huge.yaml").write_bytes(b"id: cap-huge\n" + b"#" * (MAX_SPEC_BYTES + 1))
    env = dict(os.environ, TRACE_GYM_ENVS_DIR=str(tmp_path))
    code = ("import warnings, gymnasium as gym\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    import trace_gym\n"
            "print([str(x.message) for x in w if x.category.__name__ == 'SpecFileWarning'])\n"
            "print('trace/cap-refund-policy-v0' in gym.registry, 'trace/cap-latin1-v0' in gym.registry)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    warned, registered = out.stdout.strip().splitlines()
    assert "cap-latin1.yaml" in warned and "UTF-8" in warned and "cap-huge.yaml" in warned
    assert registered == "True False"


def test_the_starter_specs_read_the_same_as_a_plain_yaml_load():
    for p in SPEC_FILES:
        assert read_spec_document(p) == yaml.safe_load(p.read_text(encoding="utf-8"))
        assert json.loads(json.dumps(read_spec_document(p))) == read_spec_document(p)
