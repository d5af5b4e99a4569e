"""The compiled, cached argument check with its fast path is the full JSON-Schema check.

``schema_validator`` must accept exactly what ``full_validator`` accepts and return the very
same error texts, on every schema shape (plain shapes take the fast path, the rest go
straight to the schema engine) and every kind of argument value.
"""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trace_gym.core.tools import Tool, ToolSet, full_validator, quick_validator, schema_validator

_SCALARS = ["string", "integer", "number", "boolean"]


_OTHER_SHAPES = [  # shapes the fast path leaves to the schema engine
    {"type": "integer", "minimum": 3},
    {"type": "string", "pattern": "^x"},
    {"type": "null"},
    {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]},
    {"enum": [1, "1", True]},
]


def _leaf() -> st.SearchStrategy:
    scalar = st.sampled_from(_SCALARS).map(lambda t: {"type": t})
    return st.one_of(
        scalar, scalar, scalar,  # the plain shapes, often, so the fast path is exercised
        st.lists(st.sampled_from(["a", "b", "1", "", "é"]), min_size=1, max_size=3, unique=True)
        .map(lambda e: {"type": "string", "enum": e}),
        st.sampled_from([{"type": "object"}, {"type": "object", "additionalProperties": True}]),
        st.sampled_from(_OTHER_SHAPES),
    )


_PROPERTY = st.recursive(
    _leaf(),
    lambda inner: st.one_of(
        inner.map(lambda s: {"type": "array", "items": s}),
        st.just({"type": "array"}),
        st.lists(inner, min_size=1, max_size=3).map(lambda b: {"anyOf": b}),
        inner.map(lambda s: {**s, "description": "described"}),
    ),
    max_leaves=4,
)


@st.composite
def _schemas(draw):
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4, unique=True))
    props = {n: draw(_PROPERTY) for n in names}
    schema: dict = {"type": "object", "properties": props}
    if names:
        schema["required"] = draw(st.lists(st.sampled_from(names), unique=True))
    extra = draw(st.sampled_from([None, False, True, {"type": "string"}]))
    if extra is not None:
        schema["additionalProperties"] = extra
    if draw(st.booleans()):
        schema["title"] = "T"
    return schema


_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.just(1.0), st.just(0.0),
              st.sampled_from(["a", "b", "1", "", "é", "x"]), st.text(max_size=3)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2)),
    max_leaves=5,
)


# values on the edge of a type: bools for numbers, integral floats, non-finite floats, ...
_TRICKY = [True, False, 1.5, 1.0, 0.0, -0.0, float("nan"), float("inf"), 2**70, "1", "", None, [], {}, [1], ["a"], [True],
           [1.5], {"a": 1}, "a", "é"]


@st.composite
def _arguments(draw, schema):
    props = schema.get("properties") or {}
    args = {}
    for name in props:
        roll = draw(st.integers(0, 5))
        if roll == 0:
            continue  # a missing property
        args[name] = draw(st.sampled_from(_TRICKY) if roll <= 2 else _VALUE if roll == 3 else _conforming(props[name]))
    if draw(st.integers(0, 5)) == 0:
        args[draw(st.sampled_from(["z", "a", "zz"]))] = draw(_VALUE)
    return args


def _conforming(sub):
    """Values of the declared type (so the fast path is taken often)."""
    if "anyOf" in sub:
        return st.one_of(*[_conforming(b) for b in sub["anyOf"]])
    kind = sub.get("type")
    if "enum" in sub:
        return st.sampled_from(sub["enum"])
    if kind == "array":
        return st.lists(_conforming(sub["items"]) if "items" in sub else _VALUE, max_size=3)
    return {"string": st.text(max_size=3), "integer": st.integers(-5, 5), "number": st.floats(allow_nan=False),
            "boolean": st.booleans(), "object": st.dictionaries(st.text(max_size=2), _VALUE, max_size=2),
            "null": st.none()}.get(kind, _VALUE)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_fast_path_accepts_exactly_what_the_full_check_accepts(data):
    schema = data.draw(_schemas())
    fast, full = schema_validator(schema), full_validator(schema)
    for _ in range(5):
        args = data.draw(_arguments(schema))
        assert fast(args) == full(args), (schema, args)


def test_plainly_valid_arguments_skip_the_schema_engine_and_invalid_ones_keep_their_text():
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "n": {"type": "array", "items": {"type": "integer"}}},
              "required": ["a"]}
    full = full_validator(schema)
    seen = []

    def counting(args):
        seen.append(args)
        return full(args)

    quick = quick_validator(schema, counting)
    assert quick({"a": "x", "n": [1, 2]}) is None and seen == []
    for bad in ({"a": 1}, {"n": [1]}, {"a": "x", "n": [1.5]}, {"a": "x", "other": 1}, {"a": "x", "n": [True]}):
        assert quick(bad) == full(bad) is not None
    assert len(seen) == 5
    assert full({"a": 1}) == "invalid a: 1 is not of type 'string'"
    assert full({"a": "x", "other": 1}) == "unexpected argument(s) ['other']; expected only ['a', 'n']"


def test_validators_are_compiled_once_per_schema_and_the_cache_is_private():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    same = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    check = schema_validator(schema)
    assert schema_validator(same) is check
    assert Tool("t", "", same, lambda **kw: None).validate is check
    schema["required"].append("r")  # mutating a caller's schema afterwards cannot change the shared check
    assert check({"q": "x"}) is None
    reordered = {"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}}}
    assert schema_validator(reordered) is not check  # key order decides which error comes first


def test_invalid_schemas_still_fail_when_the_tool_is_made():
    with pytest.raises(jsonschema.SchemaError):
        Tool("t", "", {"type": "object", "properties": {"a": {"type": "no-such-type"}}}, lambda **kw: None)


def test_toolset_errors_are_unchanged_through_the_fast_path():
    ts = ToolSet([Tool("add", "", {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
                       lambda x: x + 1)])
    assert ts.call("add", {"x": 1}).content == "2"
    assert ts.call("add", {"x": "1"}).content == "Error: add: invalid x: '1' is not of type 'integer'"
    assert ts.call("add", {}).content == "Error: add: invalid arguments: 'x' is a required property"


def _shapes() -> list:
    leaves = [{"type": t} for t in _SCALARS] + [{"type": "string", "enum": ["a", "1"]}, {"type": "object"},
                                                 {"type": "object", "additionalProperties": True}] + _OTHER_SHAPES
    shapes = list(leaves)
    shapes += [{"type": "array", "items": leaf} for leaf in leaves] + [{"type": "array"}]
    shapes += [{"anyOf": [a, b]} for a in leaves for b in leaves[:4]]
    shapes += [{**leaf, "description": "d", "title": "t"} for leaf in leaves]
    return shapes


def test_every_shape_and_edge_value_gets_the_full_checks_answer():
    values = _TRICKY + [-1, 0, 3, 2.5, "x", "b", [0, 1], ["a", "1"], [None], {"b": "x"}, {"b": 1}, [[1]]]
    for shape in _shapes():
        for required in ([], ["p"]):
            schema = {"type": "object", "properties": {"p": shape, "q": {"type": "string"}}, "required": required}
            fast, full = schema_validator(schema), full_validator(schema)
            for v in values:
                for args in ({"p": v}, {"p": v, "q": "s"}, {"p": v, "q": 1}, {"p": v, "other": v}):
                    assert fast(args) == full(args), (schema, args)
            assert fast({}) == full({}), schema
