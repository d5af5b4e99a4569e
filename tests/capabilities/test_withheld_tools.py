"""Requests whose needed tool is not offered (``withheld_weight``) in the ToolSandbox capability envs, and
setting such knobs on every env of a TRACE run that declares them (``cap_knobs``).

The withheld cases are drawn only when the knob is above 0 (so the default episodes stay what they
were), offer two to four of the spec's tools without the one the request needs, score 1 for saying
so without changing anything and less for acting anyway; the knob search never moves a knob
declared ``tune: false``.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

import trace_gym  # noqa: F401  (registers the ids)
from trace_gym.capabilities import CapabilityEnv
from trace_gym.capabilities.calibrate import make_policy, tune
from trace_gym.capabilities.scenario import UnsolvableScenarioError
from trace_gym.capabilities.templating import TemplateError
from trace_gym.core.toolcalls import format_tool_call
from trace_gym.pipeline.stages import Synthesis, calibrate_envs, env_kwargs_for, with_knobs
from trace_gym.testing import run_actions

from .conftest import ENVS_DIR

WITHHELD = {p.stem: p for p in sorted(ENVS_DIR.glob("cap-ts-*.yaml"))
            if "withheld_weight" in yaml.safe_load(p.read_text())["difficulty"]}


def _withheld_cases(env: CapabilityEnv) -> list[dict]:
    return [c for c in env.cap_spec.cases if c.get("weight") and isinstance(c["weight"], dict)
            and c["weight"].get("knob") == "withheld_weight"]


def test_every_toolsandbox_behaviour_but_refusal_itself_has_withheld_requests():
    assert set(WITHHELD) == {"cap-ts-multiple-tool-call", "cap-ts-state-dependency", "cap-ts-location-dependency",
                             "cap-ts-canonicalization", "cap-ts-multiple-user-turn"}
    for stem, path in WITHHELD.items():
        knob = yaml.safe_load(path.read_text())["difficulty"]["withheld_weight"]
        assert knob["default"] == 0.0 and knob["tune"] is False, stem


@pytest.mark.parametrize("stem", sorted(WITHHELD))
def test_withheld_cases_are_drawn_only_when_asked_and_in_proportion(toolsandbox_data, stem):
    off = CapabilityEnv(WITHHELD[stem])
    names = {c["name"] for c in _withheld_cases(off)}
    assert names and not names & {off.reset(seed=s)[1]["case"] for s in range(30)}
    on = CapabilityEnv(WITHHELD[stem], difficulty={"withheld_weight": 1.0})  # as heavy as every other case together
    drawn = Counter(on.reset(seed=s)[1]["case"] in names for s in range(120))
    assert 0.3 < drawn[True] / 120 < 0.7, drawn


@pytest.mark.parametrize("stem", sorted(WITHHELD))
def test_a_withheld_request_pays_for_saying_so_and_not_for_acting(toolsandbox_data, stem):
    env = CapabilityEnv(WITHHELD[stem], difficulty={"withheld_weight": 1.0})
    for case in _withheld_cases(env):
        seed = next(s for s in range(40) if _binds(env, s, case["name"]))
        _, info = env.reset(seed=seed, options={"case": case["name"], "hint": False})
        offered = [t["function"]["name"] for t in info["tools"]]
        needed = {s["call"] for c in env.cap_spec.cases if c["opening"] == case["opening"] and c is not case
                  for s in c["reference"] if "call" in s}
        assert needed - set(offered), f"{case['name']}: every tool its request needs is offered"
        r, _, _ = run_actions(env, seed, env.reference_actions(), options={"case": case["name"]})
        assert r == 1.0 and not env.task_allowed
        # carrying on as if the tool were there: an offered write, then a claim that it is done
        writes = [t for t in offered if t.startswith(("set_", "send_", "modify_", "remove_", "add_"))]
        acting = [format_tool_call(writes[0], {"on": True} if writes[0].startswith("set_") else {}, "hermes")] if writes else []
        r_act, _, _ = run_actions(env, seed, acting + ["Done! Anything else?"], options={"case": case["name"]})
        assert r_act < env.cap_spec.data.get("floor", 0.5), case["name"]


def _binds(env: CapabilityEnv, seed: int, case: str) -> bool:
    try:
        env.reset(seed=seed, options={"case": case})
        return True
    except (UnsolvableScenarioError, TemplateError):  # this seed's world lacks the case's situation
        return False


def test_the_knob_search_never_moves_a_knob_declared_not_to_tune(toolsandbox_data, tmp_path):
    # refusing everything scores only on withheld requests: raising withheld_weight is what would lift it
    doc = yaml.safe_load(WITHHELD["cap-ts-multiple-tool-call"].read_text())
    seeds, band = list(range(4)), (0.4, 0.6)
    _, _, trace = tune("trace/cap-ts-multiple-tool-call-v0", make_policy("refuse"), seeds, 1, band, max_rounds=1)
    assert trace and all(t["difficulty"]["withheld_weight"] == 0.0 for t in trace if "difficulty" in t)
    # the same spec with the knob left tunable: the search does move it (the check above can fail)
    del doc["difficulty"]["withheld_weight"]["tune"]
    doc["id"] = "cap-ts-mtc-tunable"
    path = tmp_path / "cap-ts-mtc-tunable.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    from trace_gym.synthesis.register import register_spec_files

    [env_id] = register_spec_files([path])
    _, _, trace = tune(env_id, make_policy("refuse"), seeds, 1, band, max_rounds=1)
    assert any(t["difficulty"]["withheld_weight"] > 0.0 for t in trace if "difficulty" in t)


def test_with_knobs_adds_only_the_knobs_a_spec_declares():
    mtc, refusal = WITHHELD["cap-ts-multiple-tool-call"], ENVS_DIR / "cap-ts-insufficient-information.yaml"
    base = {"max_steps": 8}
    assert with_knobs(mtc, base, {"withheld_weight": 0.5, "no_such_knob": 1}) == {
        "max_steps": 8, "difficulty": {"withheld_weight": 0.5}}
    assert with_knobs(refusal, base, {"withheld_weight": 0.5}) == base
    assert with_knobs(mtc, {"difficulty": {"contacts": 3}}, {"withheld_weight": 1.0}) == {
        "difficulty": {"contacts": 3, "withheld_weight": 1.0}}
    assert with_knobs(mtc, base, None) == base and with_knobs(mtc, base, {}) is not base


def test_calibration_sets_the_knobs_on_the_envs_that_declare_them_and_keeps_them(toolsandbox_data, tmp_path):
    import shutil

    class Quiet:
        policy_id = "quiet"

        def act(self, messages, tools):
            return "Sorry, I cannot do that: I don't have a tool for it."

    envs = []
    for stem in ("cap-ts-multiple-tool-call", "cap-ts-insufficient-information"):
        dst = tmp_path / f"{stem}.yaml"
        shutil.copy(ENVS_DIR / f"{stem}.yaml", dst)
        envs.append({"capability": stem, "spec": str(dst), "env_id": f"trace/{stem}-v0"})

    def calibrate(knobs):
        return calibrate_envs(Synthesis(envs=envs), Quiet, seed=0, seeds=4, samples=1, env_kwargs={"max_steps": 8},
                              set_knobs=knobs)

    plain = calibrate({})
    withheld = calibrate({"withheld_weight": 4.0})
    mtc, refusal = withheld.envs
    assert mtc["difficulty"]["withheld_weight"] == 4.0 and "difficulty" not in refusal
    assert "difficulty" not in plain.envs[0] and env_kwargs_for(mtc, {"max_steps": 8})["difficulty"]["withheld_weight"] == 4.0
    assert mtc["mean_reward"] > plain.envs[0]["mean_reward"]  # mostly withheld requests, which a refusal answers
    doc = json.loads(open(mtc["calibration"], encoding="utf-8").read())
    assert doc["env_kwargs"] == {"max_steps": 8, "difficulty": {"withheld_weight": 4.0}}
    assert refusal["mean_reward"] == plain.envs[1]["mean_reward"]  # the env without the knob: measured alike, reused
