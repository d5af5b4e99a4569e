"""Randomly damaged specs are either accepted or rejected with a SpecError — never a crash."""

from __future__ import annotations

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_gym.capabilities.spec import SpecError, parse_spec

from .conftest import SPEC_FILES

DOCS = [yaml.safe_load(p.read_text()) for p in SPEC_FILES]

JUNK = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=6), st.just("{ghost.x}"), st.just({"knob": "nope"}),
                 st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, len(DOCS) - 1), st.data())
def test_damaged_specs_never_crash_the_loader(doc_i, data):
    doc = copy.deepcopy(DOCS[doc_i])
    paths = [p for p in _paths(doc) if p]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        parent = doc
        try:
            for part in path[:-1]:
                parent = parent[part]
            action = data.draw(st.sampled_from(["replace", "delete"]))
            if action == "delete" and isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif action == "delete" and isinstance(parent, list) and len(parent) > path[-1]:
                parent.pop(path[-1])
            elif isinstance(parent, (dict, list)) and (isinstance(parent, dict) or len(parent) > path[-1]):
                parent[path[-1]] = data.draw(JUNK)
        except (KeyError, IndexError, TypeError):
            continue
    try:
        parse_spec(doc, "fuzzed.yaml")
    except SpecError as exc:
        assert str(exc).startswith("fuzzed.yaml: at ")


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, len(DOCS) - 1), st.data())
def test_accepted_damaged_specs_reset_cleanly_or_report_unsolvable(tau2_data, doc_i, data):
    from trace_gym.capabilities import CapabilityEnv, UnsolvableScenarioError

    doc = copy.deepcopy(DOCS[doc_i])
    case = data.draw(st.sampled_from(doc["cases"]))
    paths = [p for p in _paths(case) if p and p[0] in ("slots", "opening", "reference", "rewards", "distractors", "user")]
    path = data.draw(st.sampled_from(paths))
    parent = case
    for part in path[:-1]:
        parent = parent[part]
    if isinstance(parent, (dict, list)):
        parent[path[-1]] = data.draw(JUNK)
    try:
        parse_spec(doc, "fuzzed.yaml")
    except SpecError:
        return
    env = CapabilityEnv(doc)
    try:
        env.reset(seed=data.draw(st.integers(0, 50)), options={"case": case["name"]})
    except UnsolvableScenarioError as exc:
        assert "seed" in str(exc)
        return
    for action in env.reference_actions()[:20]:
        _, r, term, trunc, _ = env.step(action)
        assert 0.0 <= r <= 1.0
        if term or trunc:
            break
