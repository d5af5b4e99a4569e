"""Spec loading: the starter specs are valid; bad specs are rejected with file, place and expectation."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from trace_gym.capabilities.spec import SCHEMA_PATH, SpecError, load_spec, parse_spec

from .conftest import SPEC_FILES

STARTERS = {"cap-refund-policy", "cap-precondition-verification", "cap-multi-step-completion", "cap-tool-call-precision",
            "cap-structured-selection"}


def test_published_schema_is_a_valid_json_schema():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["required"] == ["id", "title", "capability", "domain", "tools", "cases"]


def test_all_starter_specs_exist_and_load():
    assert STARTERS <= {p.stem for p in SPEC_FILES}
    for p in SPEC_FILES:
        spec = load_spec(p)
        assert spec.id == p.stem
        assert spec.env_id == f"trace/{p.stem}-v0"
        assert 0 < spec.floor <= 1
        for case in spec.cases:
            assert case["reference"] and case["rewards"]


@pytest.fixture
def base_doc():
    return yaml.safe_load((Path(SPEC_FILES[0]).parent / "cap-refund-policy.yaml").read_text())


def _reject(doc, tmp_path, name="cap-refund-policy.yaml") -> SpecError:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(SpecError) as ei:
        load_spec(path)
    assert str(path) in str(ei.value)
    return ei.value


def test_json_spec_is_accepted(base_doc, tmp_path):
    path = tmp_path / "cap-refund-policy.json"
    path.write_text(json.dumps(base_doc))
    assert load_spec(path).id == "cap-refund-policy"


@pytest.mark.parametrize(
    "mutate, where, expected",
    [
        (lambda d: d.pop("capability"), "(top level)", "'capability' is a required property"),
        (lambda d: d.update(domain="mars"), "domain", "unknown capability domain 'mars'"),
        (lambda d: d["tools"].append("delete_everything"), "tools[16]", "unknown retail tool 'delete_everything'"),
        (lambda d: d["cases"][0]["reference"].append({"call": "list_all_airports"}), "cases[0].reference[5].call", "one of the exposed tools"),
        (lambda d: d.update(max_steps={"knob": "speed"}), "max_steps", "a declared difficulty knob"),
        (lambda d: d["cases"][0].update(opening="Hi {ghost.name}"), "cases[0].opening", "names 'ghost'"),
        (lambda d: d["cases"][0].update(opening="Hi {user.name|shout}"), "cases[0].opening", "a known filter"),
        (lambda d: d["cases"][0]["rewards"][0].update(path=["x"]), "cases[0].rewards[0].path", "for a 'required_call' reward"),
        (lambda d: d["cases"][0]["rewards"][0].update(type="vibes"), "cases[0].rewards[0].type", "'vibes' is not one of"),
        (lambda d: d["cases"][1].update(name=d["cases"][0]["name"]), "cases[1].name", "a unique case name"),
        (lambda d: d["difficulty"]["users"].update(default=99), "difficulty.users", "within [min, max]"),
        (lambda d: d["cases"][0]["slots"]["user"].update(frm="users"), "cases[0].slots.user", "Additional properties"),
        (lambda d: d["cases"][0]["slots"]["order"].update({"from": "warehouses"}), "cases[0].slots.order.from", "a table of the retail database"),
        (lambda d: d["cases"][0]["slots"]["other"].update(distinct_from=["nobody"]), "cases[0].slots.other.distinct_from", "a slot declared before"),
        (lambda d: d["cases"][0]["unauthorized"][0].update(call="get_order_details"), "cases[0].unauthorized[0].call", "an exposed write tool"),
        (lambda d: [r.update(gate=True) for r in d["cases"][0]["rewards"]], "cases[0].rewards", "not a gate"),
        (lambda d: d.update(id="Bad Id"), "id", "does not match"),
        (lambda d: d.update(max_steps=3), "max_steps", "at least the longest reference solution"),
        (lambda d: d["difficulty"]["max_steps"].update(min=2), "max_steps", "at least the longest reference solution"),
        (lambda d: d["cases"][0]["distractors"][0].update(like="ghost"), "cases[0].distractors[0].like", "a declared slot"),
        (lambda d: d["cases"][0]["distractors"][0].update(table="reservations"), "cases[0].distractors[0].table", "for the retail domain"),
    ],
)
def test_invalid_specs_name_file_place_and_expectation(base_doc, tmp_path, mutate, where, expected):
    doc = copy.deepcopy(base_doc)
    mutate(doc)
    err = _reject(doc, tmp_path)
    assert err.where == where or (where == "(top level)" and err.where == ""), str(err)
    assert expected in str(err), str(err)


def test_yaml_syntax_error_names_line(tmp_path):
    path = tmp_path / "cap-broken.yaml"
    path.write_text("id: cap-broken\ntools: [a, b\ncases: 3\n")
    with pytest.raises(SpecError) as ei:
        load_spec(path)
    assert "valid YAML" in str(ei.value) and "line" in ei.value.where


def test_file_name_must_match_id(base_doc, tmp_path):
    err = _reject(base_doc, tmp_path, name="something-else.yaml")
    assert err.where == "id"
    # a tuned copy next to it is fine
    path = tmp_path / "cap-refund-policy.tuned.yaml"
    path.write_text(yaml.safe_dump(base_doc, sort_keys=False))
    assert load_spec(path).id == "cap-refund-policy"


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(SpecError, match="an existing"):
        load_spec(tmp_path / "nope.yaml")
    with pytest.raises(SpecError, match="a mapping at the top level"):
        parse_spec([1, 2], "inline")


def test_knob_overrides_are_range_checked(base_doc):
    spec = parse_spec(base_doc, "inline")
    assert spec.knobs({"users": 5})["users"] == 5
    with pytest.raises(ValueError, match="must be a number in"):
        spec.knobs({"users": 500})
    with pytest.raises(ValueError, match="unknown difficulty knob"):
        spec.knobs({"nonsense": 1})
    tuned = spec.with_knob_defaults({"users": 6})
    assert tuned["difficulty"]["users"]["default"] == 6 and base_doc["difficulty"]["users"]["default"] == 3


def test_starter_specs_ship_inside_the_package():
    """``trace_gym/starter_envs`` (a link to ``envs/`` in the repository) is what a built wheel carries."""
    from pathlib import Path

    import trace_gym
    from trace_gym.capabilities.entries import spec_dirs

    packaged = Path(trace_gym.__file__).resolve().parent / "starter_envs"
    repo = Path(__file__).resolve().parents[2] / "envs"
    assert packaged.is_dir()
    assert sorted(p.name for p in packaged.glob("cap-*.yaml")) == sorted(p.name for p in repo.glob("cap-*.yaml"))
    assert packaged.resolve() in [d.resolve() for d in spec_dirs()]
