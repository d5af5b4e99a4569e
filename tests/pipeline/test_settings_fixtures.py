"""Settings written before the per-stage settings existed still read as the same settings.

``tests/fixtures/config/settings_before.json`` holds, per benchmark preset and demo size, the settings dict that
compare stores as ``compare.json``'s ``config`` (and as every stage record's fingerprint) and that the demo stores
as ``summary.json``'s ``config`` (and as its fingerprint), as the code wrote them before this refactor;
``plans_before.json`` holds what the front ends then put in the TRACE plan.  A run folder made before must
resume (same fingerprints), and the same flags must make the same plan.  The one setting renamed since
(the demo's ``router_seeds``, now ``routing_seeds`` as everywhere else) is read through
:data:`~trace_gym.pipeline.settings.RENAMED`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rich.console import Console

from benchmarks.trace_vs_baselines import PRESETS
from trace_gym.compare.config import CompareConfig
from trace_gym.compare.pipeline import trace_plan
from trace_gym.demo.config import DemoConfig
from trace_gym.demo.stages import Context, demo_plan
from trace_gym.pipeline.budget import RolloutBudget
from trace_gym.pipeline.settings import RENAMED, current_names
from trace_gym.pipeline.store import StageStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "config"
BEFORE = json.loads((FIXTURES / "settings_before.json").read_text(encoding="utf-8"))
PLANS = json.loads((FIXTURES / "plans_before.json").read_text(encoding="utf-8"))
DEMOS = {"demo-tiny-toolsandbox": dict(model="tiny"), "demo-smollm2-toolsandbox": dict(model="smollm2"),
         "demo-smollm2-toolsandbox-fast": dict(model="smollm2", fast=True),
         "demo-tiny-tau2": dict(model="tiny", target="tau2-retail"),
         "demo-smollm2-tau2-fast": dict(model="smollm2", target="tau2-retail", fast=True)}


def _compare(name: str, **changes) -> CompareConfig:
    return CompareConfig(**{"out": f"runs/compare-{name}", **PRESETS[name], **changes}).validate()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_makes_the_settings_it_made_before(name):
    assert _compare(name).to_dict() == BEFORE[f"compare-{name}"]


@pytest.mark.parametrize("key", sorted(k for k in BEFORE if k.startswith("compare-")))
def test_a_stored_compare_config_reads_as_the_same_settings(key):
    cfg = CompareConfig.from_dict(BEFORE[key]).validate()
    assert cfg.to_dict() == BEFORE[key]


@pytest.mark.parametrize("key", sorted(DEMOS))
def test_the_demo_sizes_are_the_sizes_of_before(key):
    now = DemoConfig.for_run(out="runs/demo", **DEMOS[key]).to_dict()
    assert "router_seeds" in BEFORE[key] and "router_seeds" not in now
    assert now == current_names(BEFORE[key])


def test_an_old_spelling_is_read_as_the_setting_and_both_at_once_are_refused():
    assert RENAMED == {"router_seeds": "routing_seeds"}
    assert CompareConfig.from_dict({"router_seeds": 3}).routing_seeds == 3  # e.g. --set router_seeds=3
    with pytest.raises(ValueError, match="router_seeds and routing_seeds name the same setting"):
        CompareConfig.from_dict({"router_seeds": 3, "routing_seeds": 2})


@pytest.mark.parametrize("key", ["compare-smoke-toolsandbox", "demo-tiny-toolsandbox"])
def test_a_stage_recorded_before_is_done_with_the_same_settings(tmp_path, key):
    """A stage record fingerprinted with the settings of before is found done by today's store (resume redoes
    nothing), and one fingerprinted with other settings is not."""
    old = StageStore(tmp_path, fingerprint=BEFORE[key])
    old.run("rollouts", lambda: {"n": 1})
    now = _compare("smoke-toolsandbox") if key.startswith("compare") else DemoConfig.for_run(out="runs/demo", model="tiny")
    store = StageStore(tmp_path, fingerprint=now.to_dict())
    assert store.lookup("rollouts")[1] == ""
    other = dict(BEFORE[key], seed=1)
    assert not StageStore(tmp_path, fingerprint=other).done("rollouts")


# the plan's names before its stage settings took the front ends' names
PLAN_NAMES = {"warm_demos": "cap_warm_demos", "rehearse_base": "cap_rehearse_base", "rehearse_peers": "cap_rehearse_peers"}
STAGE_SETTINGS = ("analysis", "synthesis", "calibration", "training", "routing")


def _plan_values(plan) -> dict:
    """The plan's settings as ``plans_before.json`` records them (a flat dict; callables by what they give)."""
    skip = {"target", "base_policy", "jobs", "name_adapter", "adapter_policy", "budget", "rehearsal", *STAGE_SETTINGS}
    out = {}
    for name in STAGE_SETTINGS:
        out.update(dataclasses.asdict(getattr(plan, name)))
    for f in dataclasses.fields(plan):
        value = getattr(plan, f.name)
        if f.name in skip:
            continue
        if isinstance(value, Path):
            value = str(value.relative_to(Path.cwd())) if value.is_absolute() else str(value)
        out[f.name] = value
    out["model"] = out["model"].replace(str(Path.cwd()) + "/", "")
    out["target"] = {"env_id": plan.target.env_id, "env_kwargs": plan.target.env_kwargs, "success": plan.target.success}
    out["jobs"] = [[j.policy_id, j.task, j.seed, j.env_kwargs] for j in plan.jobs]
    out["rehearsal"] = None if plan.training.rehearsal is None else dataclasses.asdict(plan.training.rehearsal)
    out["adapter_policy"] = plan.adapter_policy is not None
    out["name_adapter"] = plan.name_adapter(0, "Some Cap")
    return json.loads(json.dumps(out, default=list))


def _renamed(values: dict) -> dict:
    return {PLAN_NAMES.get(k, k): v for k, v in values.items()}


def test_compare_makes_the_plan_it_made_before(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = CompareConfig(**{**PRESETS["smoke-toolsandbox"], "out": "runs/x"}).validate()
    plan = trace_plan(cfg, RolloutBudget(8), Path("runs/x"), ["t1", "t2"], ["t1", "t2", "t3"])
    assert _plan_values(plan) == _renamed(PLANS["compare-smoke-toolsandbox"])
    cfg = CompareConfig(**{**PRESETS["cpu-toolsandbox"], "out": "runs/x", "model": "tiny"})
    plan = trace_plan(cfg, RolloutBudget(168), Path("runs/x"), ["t1"], ["t1", "t2"])
    assert _plan_values(plan) == _renamed(PLANS["compare-cpu-toolsandbox-tiny"])


@pytest.mark.parametrize("key", ["demo-tiny-toolsandbox", "demo-tiny-tau2", "demo-smollm2-toolsandbox"])
def test_the_demo_makes_the_plan_it_made_before(tmp_path, monkeypatch, key):
    monkeypatch.chdir(tmp_path)
    plan, _ = demo_plan(Context(DemoConfig.for_run(out="runs/demo", **DEMOS[key]), Console(quiet=True)))
    assert _plan_values(plan) == _renamed(PLANS[key])
