"""The reset fast paths change nothing: pinned episodes, and each shortcut against the general code.

The digests below were computed with the code as it was before the reset speed-ups.
They fail if a starter spec, the τ²-bench data or the engine's outputs change on
purpose: then recompute them (digest of the same lists) and say why in the commit.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trace_gym  # noqa: F401
from trace_gym.capabilities.domain import domain_tool_records, quick_validator
from trace_gym.capabilities.matchers import where_getters, where_holds, where_matches
from trace_gym.capabilities.synthdb import GENERATORS
from trace_gym.capabilities.synthdb.clone import clone_record
from trace_gym.capabilities.templating import TemplateError, compile_template, render
from trace_gym.core.env import ToolEnv
from trace_gym.core.tools import Tool

# env id -> [(reset digest, reference-play digest) for seeds 0..4]
PINNED = {
    "cap-flight-selection-v0": [("f1ae8f2e2ac3bffa", "451885a14206e1f9"), ("13effc897ef6dce3", "40490cc2a0b377f3"), ("818bf9c55eff917b", "2bf8e217bff8d4b1"), ("e7ace1682a437a0c", "71f1188b5190ee89"), ("2a595d08d47289ce", "22d98ba299516c87")],
    "cap-multi-step-completion-v0": [("6b873427f52930a7", "76bdaea4b5eac56e"), ("c7233e4f47d3140a", "a067e48bdf038671"), ("0a878803b205e6be", "6680e1f8ad41aefa"), ("0adbb5808f841d4a", "ab622a659435c16d"), ("b43def25a3a4443d", "b962bddd66eb76d0")],
    "cap-precondition-verification-v0": [("73012f7f899244be", "c90348019cceaab6"), ("ab659234e2014569", "389d7c6b34249629"), ("d89a11ae23a229e3", "e226db421ae2b2b8"), ("56f2b06c403197c5", "393cca4cd4f383e3"), ("c1d46d8c4f6d1cd9", "333f6538a1438233")],
    "cap-refund-policy-v0": [("1a3706a586e84705", "7eaf956b3112b6e1"), ("f5b02d321c14dac4", "b1cdb7c0152a469e"), ("51e15a16833375b3", "3bd7e00a72274e81"), ("d4b7f09bbdf1591c", "a6a10ffc5610fae2"), ("a4cc85aaf2bd1a2b", "39b785f85386eef6")],
    "cap-structured-selection-v0": [("c758774a95be1cba", "351cc2362506fd3c"), ("ee9155dfe026a0c2", "1496408647c2fc5d"), ("4076b19f74348d2f", "7945837b67592193"), ("ccac681186ae32f6", "a460d623fd5a7cf7"), ("b5e678b89447f811", "7a1bab86c6323ae0")],
    "cap-tool-call-precision-v0": [("819eb0a9df463381", "47253b8aba0c1627"), ("812af7a567aaa40f", "08595917d2b92d98"), ("7a12544d7a1aed01", "eadb931b9d4fa58f"), ("4cf204c8658a9360", "71580450689ad48f"), ("64d0c12fe1e8bd86", "92a2b9c05089eea9")],
}

# (domain, sizes) -> digest of the databases of seeds 0..19 and of the generator's next draw (the airline
# ones recomputed when a reservation's flight entries took the benchmark's key order: same values, same draws)
PINNED_DBS = [
    ("retail", {}, "1404b5c13cbac8f150a7d59bcb4be7f640ce8665be741c340a9f9f4933283ac8"),
    ("retail", {"users": 8, "extra_orders": 8, "products": 8, "variants": 9}, "39a77ac98860a8d55e49c13844543521a1fc769d53b3e1368d4dfcc99407dc7e"),
    ("retail", {"users": 1, "extra_orders": 0, "products": 2, "variants": 3}, "d292341d4ef90fa42a0dc16569caf373016389f733a5134e4c5e968252e3d26d"),
    ("airline", {}, "4bb8d898648e28f741f7e26c6694ee89b8b94929ebe33ccbb60def24e692f22c"),
    ("airline", {"users": 8, "extra_reservations": 8, "routes": 4}, "3ce75d9ae7935ee1756df33ecfc9ae20d045e048c5c071cdbf69a542dfdaffe4"),
    ("airline", {"users": 1, "extra_reservations": 0, "routes": 1}, "ce4c1109809ca1d4bf90f8b86043d7f4f0585797664f9464ff3d1f112c8e05d3"),
]


def digest(x) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()[:16]


def _episode_digests(env, seed):
    obs, info = env.reset(seed=seed)
    opening = digest([obs, info["messages"], info["tools"]])
    trace = []
    for a in env.reference_actions():
        o, rew, term, trunc, inf = env.step(a)
        trace.append([o, rew, term, trunc, inf.get("reward_info")])
        if term or trunc:
            break
    trace.append(env.state_fingerprint())
    return opening, digest(trace)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_starter_episodes_are_unchanged(tau2_data, name):
    env_id = f"trace/{name}"
    env = gym.make(env_id).unwrapped
    got = [_episode_digests(env, s) for s in range(5)]
    assert got == PINNED[name]


@pytest.mark.parametrize("domain, sizes, expected", PINNED_DBS, ids=lambda v: str(v)[:40])
def test_synthetic_databases_are_unchanged(domain, sizes, expected):
    h = hashlib.sha256()
    for s in range(20):
        rng = random.Random(s)
        h.update(json.dumps(GENERATORS[domain](rng, **sizes)).encode())
        h.update(repr(rng.random()).encode())  # the generator consumed exactly the same draws
    assert h.hexdigest() == expected


@pytest.mark.parametrize("tools_in_observation", [True, False])
@pytest.mark.parametrize("name", sorted(PINNED))
def test_reset_matches_the_core_reset(tau2_data, name, tools_in_observation):
    """CapabilityEnv.reset (the core reset plus seed bookkeeping) gives what ToolEnv.reset gives."""
    env_id = f"trace/{name}"
    env = gym.make(env_id, tools_in_observation=tools_in_observation).unwrapped
    for seed, options in ((0, None), (1, {"hint": True}), (2, {"hint": False})):
        obs, info = env.reset(seed=seed, options=options)
        state = (list(env.messages), env.step_count, env.termination_reason)
        core_obs, core_info = ToolEnv.reset(env, seed=seed, options=options)
        assert obs == core_obs
        assert json.dumps(info, sort_keys=True, default=str) == json.dumps(core_info, sort_keys=True, default=str)
        assert state == (list(env.messages), env.step_count, env.termination_reason)
    small = gym.make(env_id, max_observation_length=300, tools_in_observation=tools_in_observation).unwrapped
    obs, _ = small.reset(seed=3)
    assert obs == ToolEnv.reset(small, seed=3)[0] and len(obs) <= 300


# ------------------------------------------------------------------ the schema-check shortcut

def _tools():
    return [(d, r) for d in ("retail", "airline") for r in domain_tool_records(d).values()]


_SCALARS = st.one_of(st.text(max_size=4), st.integers(-5, 5), st.floats(allow_nan=False, width=32), st.booleans(), st.none())
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3), st.dictionaries(st.text(max_size=3), _SCALARS, max_size=2))
_TYPED = {"string": "abc", "integer": 2, "number": 2.5, "boolean": True, "object": {"k": 1}}
_TRICKY = ["", "1", "ECONOMY", 0, 1, -1, 1.0, 1.5, True, False, None, [], ["a"], [1], [1.0], [True], [None], [{}],
           [{"flight_number": 1}], {}, {"a": 1}]


def _example(schema):
    """A value the schema accepts (for the shapes of the benchmark's tool schemas)."""
    if "anyOf" in schema:
        return _example(next(b for b in schema["anyOf"] if "type" in b))
    if "enum" in schema:
        return schema["enum"][0]
    if schema.get("type") == "array":
        return [_example(schema.get("items") or {"type": "string"})]
    return _TYPED.get(schema.get("type"), "abc")


def _plausible(draw, props):
    """Arguments that are mostly well formed (so the shortcut is exercised), sometimes not."""
    args = {}
    for name, sub in props.items():
        roll = draw(st.integers(0, 9))
        if roll == 0:
            continue  # a missing property
        if roll <= 2:
            args[name] = draw(_VALUES)
        elif roll <= 4:
            args[name] = draw(st.sampled_from(_TRICKY))
        elif sub.get("type") == "array":
            args[name] = draw(st.lists(st.one_of(st.just(_example(sub)[0]), st.sampled_from(_TRICKY)), max_size=3))
        else:
            args[name] = _example(sub)
    if draw(st.integers(0, 7)) == 0:
        args[draw(st.text(min_size=1, max_size=4))] = draw(_VALUES)
    return args


_CHECKS: list = []


def _checks():
    if not _CHECKS:
        for _, rec in _tools():
            params = rec["openai_schema"]["function"]["parameters"]
            full = Tool(rec["name"], "", params, lambda **kw: None).validate
            _CHECKS.append((params.get("properties") or {}, full, quick_validator(params, full)))
    return _CHECKS


def test_quick_schema_check_agrees_on_every_property_and_tricky_value(tau2_data):
    for props, full, quick in _checks():
        base = {k: _example(sub) for k, sub in props.items()}  # every property, well formed
        assert quick(base) is None and full(base) is None, base
        for k in props:
            for v in _TRICKY + [[base[k]] * 2 if isinstance(base[k], list) else base[k]]:
                args = dict(base, **{k: v})
                assert quick(args) == full(args), args
            args = {a: b for a, b in base.items() if a != k}
            assert quick(args) == full(args), args


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_quick_schema_check_agrees_with_the_full_check(tau2_data, data):
    for props, full, quick in _checks():  # every tool of both domains
        args = _plausible(data.draw, props)
        assert quick(args) == full(args), args


@pytest.mark.parametrize("domain, tool, ok", [
    ("retail", "exchange_delivered_order_items", {"order_id": "#W1", "item_ids": ["1"], "new_item_ids": ["2"], "payment_method_id": "credit_card_1"}),
    ("airline", "update_reservation_flights", {"reservation_id": "ABC123", "cabin": "economy", "flights": [{"flight_number": "HAT001", "date": "2024-05-20"}],
                                              "payment_id": "credit_card_1"}),
])
def test_quick_schema_check_skips_the_schema_engine_for_valid_calls(tau2_data, domain, tool, ok):
    calls = []
    params = domain_tool_records(domain)[tool]["openai_schema"]["function"]["parameters"]
    full = Tool("x", "", params, lambda **kw: None).validate

    def counting(args):
        calls.append(args)
        return full(args)

    quick = quick_validator(params, counting)
    assert quick(ok) is None and calls == []
    first = next(iter(ok))
    bad = dict(ok, **{first: 7})
    assert quick(bad) == full(bad) is not None and calls == [bad]
    assert quick({**ok, "extra": 1}) == full({**ok, "extra": 1}) is not None
    assert quick({k: v for k, v in ok.items() if k != first}) is not None
    assert quick(dict(ok, **{first: True})) == full(dict(ok, **{first: True})) is not None


def test_quick_schema_check_leaves_other_shapes_to_the_full_check():
    for params in (
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}, "required": ["a"]},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}},
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 3}}},
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
        {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": {"a": {"type": "integer"}}},
    ):
        full = Tool("y", "", params, lambda **kw: None).validate
        assert quick_validator(params, full) is full, params


# ------------------------------------------------------------------ compiled templates and where checks

_PATHS = ["a", "a.b", "a.c", "l", "l.0", "l.-1", "l.5", "m", "m.x", "n", "missing", "a.b.c", " a "]
_FILTERS = ["", "|len", "|upper", "|lower", "|first", "|last", "|sorted", "|money", "|keys", "|values", "|join", "|pairs",
            "|map:x", "|sum:x", "|sum", "|bogus", "|len|money"]
_CTX = {"a": {"b": "Bee", "c": 2.5}, "l": [3, 1, 2], "m": {"x": 1, "y": 2}, "n": [{"x": 1.25}, {"x": 2}], "s": "text"}

_exprs = st.builds(lambda p, f: p + f, st.sampled_from(_PATHS), st.sampled_from(_FILTERS))
_pieces = st.one_of(st.sampled_from(["", "x", " ", "{{", "}}", "{", "}", "-", "\n"]), _exprs.map(lambda e: "{" + e + "}"))
_strings = st.lists(_pieces, max_size=5).map("".join)
_templates = st.recursive(
    st.one_of(_strings, st.integers(), st.booleans(), st.none(), _exprs.map(lambda e: "{" + e + "}")),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=3), inner, max_size=4)),
    max_leaves=12,
)


def _outcome(fn):
    try:
        return ("ok", fn())
    except TemplateError as exc:
        return ("error", str(exc))


@settings(max_examples=250, deadline=None)
@given(template=_templates)
def test_compiled_template_equals_render(template):
    fill = compile_template(template)
    expected = _outcome(lambda: render(template, _CTX))
    got = _outcome(lambda: fill(_CTX))
    assert got == expected
    if got[0] == "ok" and isinstance(template, (list, dict)):
        again = fill(_CTX)
        assert again == got[1] and again is not got[1]  # a fresh container every time (a lone placeholder: the value itself, as render gives)


def test_compiled_template_builds_fresh_nested_containers():
    template = {"k": [1, {"a": "x"}], "v": "{a.b}", "c": {"d": [1, 2]}}
    fill = compile_template(template)
    first = fill(_CTX)
    first["k"][1]["a"] = "changed"
    first["c"]["d"].append(3)
    assert fill(_CTX) == {"k": [1, {"a": "x"}], "v": "Bee", "c": {"d": [1, 2]}} == render(template, _CTX)


_SMALL = st.sampled_from(["a", "A", "ab", "", 0, 1, 1.0, 2.5, True, False, None])
_records = st.recursive(st.one_of(_SMALL, _SCALARS), lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "0", "x"]), inner, max_size=3)),
                        max_leaves=8)
_matchers = st.one_of(
    _SMALL,
    _SCALARS,
    st.dictionaries(st.sampled_from(["eq", "ne", "in", "exists", "gt", "startswith", "len"]),
                    st.one_of(_SMALL, st.lists(_SMALL, max_size=2)), min_size=1, max_size=2),
)


@settings(max_examples=250, deadline=None)
@given(record=_records, where=st.dictionaries(st.sampled_from(["a", "b", "a.b", "a.0", "0", ".", "x.a"]), _matchers, max_size=3))
def test_where_shortcut_equals_where_matches(record, where):
    getters = where_getters(list(where))
    assert getters is not None
    assert where_holds(record, getters, list(where.values())) == where_matches(record, where)


def test_where_with_a_non_text_key_never_holds():
    assert where_getters(["a", 1]) is None
    assert where_matches({"a": 1}, {"a": 1, 1: 2}) is False


def test_cloned_records_share_nothing_with_the_original():
    db = GENERATORS["retail"](random.Random(5))
    order = next(iter(db["orders"].values()))
    before = copy.deepcopy(order)
    clone = clone_record(db, "retail", "orders", order, random.Random(1))
    assert clone["order_id"] != order["order_id"] and clone["items"] == order["items"]
    clone["items"][0]["options"]["x"] = 1
    clone["address"]["city"] = "Nowhere"
    assert order == before
