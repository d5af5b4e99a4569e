"""Resuming a comparison with changed settings: TRACE's later stages run again, everything else is kept."""

from __future__ import annotations

import json

import pytest

from trace_gym.compare.pipeline import CompareConfig
from trace_gym.compare.resume import check_config

STAGES = ["grpo", "gepa", "trace_rollouts", "trace_analysis", "trace_synthesis", "trace_calibration",
          "trace_training", "trace_routing", "eval_grpo", "eval_gepa", "eval_trace", "eval_single"]


def _run(tmp_path, **kw):
    root = tmp_path / "run"
    (root / "stages").mkdir(parents=True)
    for name in STAGES:
        (root / "stages" / f"{name}.json").write_text(json.dumps({"stage": name}))
    (root / "trace" / "adapters" / "cap-0-x").mkdir(parents=True)
    (root / "trace" / "adapters" / "manifest.json").write_text("{}")
    (root / "eval").mkdir()
    for method in ("base", "grpo", "trace", "single"):
        (root / "eval" / f"{method}.jsonl").write_text("{}\n")
    assert check_config(CompareConfig(out=str(root), **kw), root, log=lambda m: None) == []
    return root


def _left(root):
    return sorted(p.stem for p in (root / "stages").glob("*.json"))


def test_same_settings_or_free_ones_change_nothing(tmp_path):
    root = _run(tmp_path)
    assert check_config(CompareConfig(out="elsewhere", methods=["base", "trace"], batch_size=4), root) == []
    assert _left(root) == sorted(STAGES) and (root / "trace" / "adapters").exists()


def test_a_routing_setting_reruns_routing_and_trace_evaluation_only(tmp_path):
    root = _run(tmp_path)
    lines = []
    moved = check_config(CompareConfig(router_rule="gate"), root, log=lines.append)
    assert moved == ["trace_routing", "eval_trace"]
    assert set(_left(root)) == set(STAGES) - {"trace_routing", "eval_trace"}
    assert (root / "trace" / "adapters" / "cap-0-x").exists()  # the adapters are kept
    aside = next((root / "replaced").iterdir())
    assert sorted(p.name for p in aside.iterdir()) == ["config.json", "eval", "eval_trace.json", "trace_routing.json"]
    # the evaluation's episode store goes too: resumed, it would hand back the old router's episodes
    assert [p.name for p in (aside / "eval").iterdir()] == ["trace.jsonl"]
    assert sorted(p.name for p in (root / "eval").iterdir()) == ["base.jsonl", "grpo.jsonl", "single.jsonl"]
    assert json.loads((root / "config.json").read_text())["router_rule"] == "gate"
    assert json.loads((aside / "config.json").read_text())["router_rule"] == "vote"
    assert "router_rule" in lines[0] and "from routing on" in lines[0]
    assert check_config(CompareConfig(router_rule="gate"), root) == []  # stored now: nothing more to redo


def test_a_training_setting_reruns_training_routing_and_both_adapter_evaluations(tmp_path):
    root = _run(tmp_path, cap_warm_demos=4)
    moved = check_config(CompareConfig(cap_warm_demos=4, cap_rehearsal=True, router_rule="gate"), root,
                         log=lambda m: None)
    assert moved == ["trace_training", "trace_routing", "eval_trace", "eval_single"]
    assert not (root / "trace" / "adapters").exists()
    aside = next((root / "replaced").iterdir())
    assert (aside / "adapters" / "cap-0-x").exists() and (aside / "adapters" / "manifest.json").exists()
    assert sorted(p.name for p in (aside / "eval").iterdir()) == ["single.jsonl", "trace.jsonl"]
    assert "grpo" in _left(root) and "trace_calibration" in _left(root)


def test_a_stored_config_without_a_newer_setting_counts_as_its_default(tmp_path):
    root = _run(tmp_path)
    stored = json.loads((root / "config.json").read_text())
    del stored["cap_rehearsal"], stored["router_rule"]
    stored["a_setting_from_elsewhere"] = 1  # unknown to this version: ignored
    (root / "config.json").write_text(json.dumps(stored))
    assert check_config(CompareConfig(), root) == []
    assert check_config(CompareConfig(router_rule="gate"), root, log=lambda m: None) == ["trace_routing", "eval_trace"]


def test_any_other_change_is_refused_and_nothing_moves(tmp_path):
    root = _run(tmp_path)
    with pytest.raises(ValueError, match=r"different configuration \(changed: trials\)"):
        check_config(CompareConfig(trials=3, router_rule="gate"), root)
    assert _left(root) == sorted(STAGES) and not (root / "replaced").exists()
    assert json.loads((root / "config.json").read_text())["router_rule"] == "vote"


def test_rehearsal_needs_the_adapters_own_demonstrations_and_a_known_rule():
    with pytest.raises(ValueError, match="set cap_warm_demos too"):
        CompareConfig(cap_rehearsal=True).validate()
    with pytest.raises(ValueError, match="needs the warm start"):  # a τ² target has no format warm start by default
        CompareConfig(cap_rehearsal=True, cap_warm_demos=1).validate()
    with pytest.raises(ValueError, match="router_rule must be one of"):
        CompareConfig(router_rule="majority").validate()


def test_the_base_rehearsal_reruns_training_with_every_forced_evaluation_and_the_joint_adapter(tmp_path):
    root = _run(tmp_path, cap_warm_demos=4)
    for name in ("eval_adapter:cap-0-x", "joint", "eval_joint"):
        (root / "stages" / f"{name}.json").write_text("{}")
    for name in ("adapter-cap-0-x", "joint"):
        (root / "eval" / f"{name}.jsonl").write_text("{}\n")
    (root / "joint" / "adapters" / "joint").mkdir(parents=True)
    moved = check_config(CompareConfig(cap_warm_demos=4, cap_rehearse_base=True), root, log=lambda m: None)
    assert moved == ["trace_training", "trace_routing", "eval_trace", "eval_single", "eval_adapter:cap-0-x", "joint",
                     "eval_joint"]
    aside = next((root / "replaced").iterdir())
    assert (aside / "joint" / "adapters" / "joint").exists() and not (root / "joint").exists()
    assert sorted(p.name for p in (aside / "eval").iterdir()) == ["adapter-cap-0-x.jsonl", "joint.jsonl", "single.jsonl",
                                                                  "trace.jsonl"]
    assert "grpo" in _left(root) and "trace_calibration" in _left(root)


def test_a_routing_change_keeps_the_forced_evaluations_and_the_joint_adapter(tmp_path):
    root = _run(tmp_path)
    for name in ("eval_adapter:cap-0-x", "joint", "eval_joint"):
        (root / "stages" / f"{name}.json").write_text("{}")
    assert check_config(CompareConfig(router_rule="gate"), root, log=lambda m: None) == ["trace_routing", "eval_trace"]
    assert {"eval_adapter:cap-0-x", "joint", "eval_joint"} <= set(_left(root))


def test_rehearsing_the_peers_reruns_training(tmp_path):
    root = _run(tmp_path, cap_warm_demos=4)
    moved = check_config(CompareConfig(cap_warm_demos=4, cap_rehearse_peers=True), root, log=lambda m: None)
    assert moved[:2] == ["trace_training", "trace_routing"] and "trace_calibration" in _left(root)


def test_the_new_settings_are_checked():
    with pytest.raises(ValueError, match="cap_rehearse_base .* set cap_warm_demos"):
        CompareConfig(cap_rehearse_base=True).validate()
    with pytest.raises(ValueError, match="cap_rehearse_peers .* set cap_warm_demos"):
        CompareConfig(cap_rehearse_peers=True).validate()
    with pytest.raises(ValueError, match="cap_rehearse_peers must be true or false"):
        CompareConfig(cap_rehearse_peers=1, cap_warm_demos=1).validate()
    with pytest.raises(ValueError, match="cap_rehearse_base must be true or false"):
        CompareConfig(cap_rehearse_base="yes", cap_warm_demos=1).validate()
    with pytest.raises(ValueError, match="'joint' SFTs one adapter .* set cap_warm_demos"):
        CompareConfig(methods=["base", "trace", "joint"]).validate()
    for m in ("joint", "oracle", "single"):
        with pytest.raises(ValueError, match=f"method '{m}' reuses .* add 'trace'"):
            CompareConfig(methods=["base", m], cap_warm_demos=1).validate()
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        CompareConfig(seed=-1).validate()
    with pytest.raises(ValueError, match="eval_seed must be an integer or null"):
        CompareConfig(eval_seed="x").validate()


def test_a_changed_router_outcomes_reruns_routing_only(tmp_path):
    root = _run(tmp_path)
    assert check_config(CompareConfig(router_outcomes=2), root, log=lambda m: None) == ["trace_routing", "eval_trace"]
    assert "trace_training" in _left(root) and (root / "trace" / "adapters" / "cap-0-x").exists()
    assert check_config(CompareConfig(router_outcomes=1), root, log=lambda m: None) == []  # nothing left to move


def test_router_outcomes_is_checked_against_the_base_tasks_and_the_budget():
    ok = dict(methods=["base", "trace"], budget=8, base_tasks=4, calib_seeds=1, calib_samples=1, routing_seeds=1,
              cap_warm_demos=1)
    CompareConfig(**ok, router_outcomes=1).validate()  # 4 + 1 + 1 + 1 + 1 = 8
    with pytest.raises(ValueError, match=r"budget 8 is too small .* routing from outcomes 2.* smaller cap_warm_demos or "
                                         r"router_outcomes"):
        CompareConfig(**ok, router_outcomes=2).validate()
    with pytest.raises(ValueError, match=r"budget 6 is too small .* at least 7 or a smaller router_outcomes"):
        CompareConfig(**{**ok, "budget": 6, "cap_warm_demos": 0}, router_outcomes=1).validate()
    with pytest.raises(ValueError, match="router_outcomes = 5 plays the adapters on that many of TRACE's 4 base tasks"):
        CompareConfig(**{**ok, "budget": 100}, router_outcomes=5).validate()
    with pytest.raises(ValueError, match="router_outcomes must be an integer >= 0"):
        CompareConfig(router_outcomes=-1).validate()
    CompareConfig(methods=["base", "gepa"], router_outcomes=0).validate()
