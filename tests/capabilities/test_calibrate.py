"""Calibration metrics, difficulty tuning and the ``trace-gym calibrate`` command."""

from __future__ import annotations

import json

import pytest
import yaml

from trace_gym.capabilities.calibrate import CalibrationResult, calibrate, make_policy, pass_at_k, tune
from trace_gym.capabilities.spec import load_spec
from trace_gym.cli import main

REFUND = "trace/cap-refund-policy-v0"


def test_pass_at_k_matches_the_unbiased_estimator():
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 4, 2) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)  # C(3,3)/C(5,3)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_group_statistics():
    res = CalibrationResult("x", "p", [0, 1, 2], 2, {}, rewards={0: [0.0, 0.0], 1: [1.0, 1.0], 2: [0.5, 1.0]},
                            cases={0: "a", 1: "b", 2: "b"})
    s = res.summary()
    assert s["mean_reward"] == pytest.approx(3.5 / 6)
    assert s["success_rate"] == pytest.approx(3 / 6)
    assert (s["groups_all_zero"], s["groups_all_one"], s["groups_constant"]) == (pytest.approx(1 / 3), pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert s["pass_at_k"]["1"] == pytest.approx((0 + 1 + 0.5) / 3)
    assert s["pass_at_k"]["2"] == pytest.approx((0 + 1 + 1) / 3)
    assert s["per_case"]["b"] == {"episodes": 4, "mean_reward": pytest.approx(3.5 / 4)}


def test_baselines_bracket_the_reward(tau2_data):
    ref = calibrate(REFUND, make_policy("reference"), [0, 1, 2], 2).summary()
    assert ref["mean_reward"] == 1.0 and ref["groups_all_one"] == 1.0 and ref["pass_at_k"]["2"] == 1.0
    noop = calibrate(REFUND, make_policy("noop"), [0, 1, 2], 1).summary()
    assert noop["mean_reward"] == 0.0 and noop["groups_all_zero"] == 1.0


def test_make_policy_accepts_objects_and_rejects_junk():
    class P:
        def act(self, messages, tools):
            return "hi"

    p = P()
    assert make_policy(p) is p
    with pytest.raises(TypeError):
        make_policy(42)
    with pytest.raises(ValueError):
        make_policy("no-such-policy-kind")


def test_tune_moves_the_mean_into_the_band(tau2_data):
    # 'refuse' earns partial credit only on cases that must be refused: the case mix knob moves its mean
    best, res, trace = tune(REFUND, make_policy("refuse"), list(range(6)), 1, (0.4, 0.5))
    assert 0.4 <= res.mean_reward <= 0.5, trace
    assert len(trace) >= 2 and trace[0]["mean_reward"] < 0.4


def test_tune_from_a_measured_start_plays_only_new_settings(tau2_data):
    policy, seeds = make_policy("refuse"), list(range(6))
    start = calibrate(REFUND, policy, seeds, 1)
    played = []
    best, res, trace = tune(REFUND, policy, seeds, 1, (0.4, 0.5), start=start, on_episode=lambda: played.append(1))
    assert trace[0] == {"difficulty": start.difficulty, "mean_reward": start.mean_reward, "measured": "before the search"}
    assert len(played) == 6 * (len(trace) - 1)  # the measured setting is not played again
    assert 0.4 <= res.mean_reward <= 0.5, trace


@pytest.mark.parametrize("cap", [0, 5, 6, 13])
def test_tune_never_plays_past_its_episode_cap(tau2_data, cap):
    policy, seeds = make_policy("refuse"), list(range(6))
    start = calibrate(REFUND, policy, seeds, 1)
    played = []
    best, res, trace = tune(REFUND, policy, seeds, 1, (0.4, 0.5), start=start, max_episodes=cap,
                            on_episode=lambda: played.append(1))
    assert len(played) == 6 * (cap // 6) <= cap  # whole settings only, never one past the cap
    tried = [t for t in trace if "difficulty" in t]
    assert len(tried) == 1 + cap // 6
    in_band = 0.4 <= res.mean_reward <= 0.5
    assert in_band or "stopped" in trace[-1], trace  # a search cut short says so
    gap = [max(0.4 - t["mean_reward"], t["mean_reward"] - 0.5, 0.0) for t in tried]
    assert max(0.4 - res.mean_reward, res.mean_reward - 0.5, 0.0) == min(gap)  # the best of what was tried
    if cap < 6:
        assert best == start.difficulty and res is start and "stopped" in trace[-1]


def test_tune_stops_when_the_easiest_setting_still_misses_the_band(toolsandbox_data):
    # every knob of this env declares which way is harder; a policy that never calls a tool scores 0 at
    # any setting, so one try with every knob at its easy end settles it
    env_id = "trace/cap-ts-state-dependency-v0"
    played = []
    best, res, trace = tune(env_id, make_policy("noop"), [0, 1], 1, (0.2, 0.6), on_episode=lambda: played.append(1))
    assert [t.get("stopped", "")[:27] for t in trace] == ["", "", "the band is out of reach: e"]
    assert len(played) == 4 and res.mean_reward == 0.0
    easiest = trace[1]["difficulty"]
    assert easiest["hint_fraction"] == 1.0 and easiest["max_steps"] == 24 and easiest["contacts"] == 2


def test_tune_moves_directed_knobs_only_toward_the_band(toolsandbox_data):
    # the reference solution scores 1.0 (above a 0–0.1 band): only harder settings are tried
    env_id = "trace/cap-ts-state-dependency-v0"
    import gymnasium as gym

    decl = gym.make(env_id).unwrapped.cap_spec.data["difficulty"]
    start = calibrate(env_id, make_policy("reference"), [0, 1], 1)
    best, res, trace = tune(env_id, make_policy("reference"), [0, 1], 1, (0.0, 0.1), start=start, max_rounds=1)
    tried = [t["difficulty"] for t in trace[1:] if "difficulty" in t]
    assert any(d != start.difficulty for d in tried), trace  # the search did move some knob
    for d in tried:
        for name, v in d.items():
            moved = v - start.difficulty[name]
            if decl[name].get("tune") is False:
                assert moved == 0, (name, d)  # a knob declared not to tune stays
            else:
                assert moved == 0 or (moved > 0) == (decl[name]["harder"] == "up"), (name, d)


def test_tune_refuses_a_cap_that_cannot_measure_the_current_setting(tau2_data):
    with pytest.raises(ValueError, match="max_episodes=3"):
        tune(REFUND, make_policy("refuse"), list(range(6)), 1, (0.4, 0.5), max_episodes=3)
    with pytest.raises(ValueError, match=">= 0"):
        tune(REFUND, make_policy("refuse"), list(range(6)), 1, (0.4, 0.5), max_episodes=-1)


def test_cli_calibrate_json_and_tune_writes_a_loadable_spec(tau2_data, tmp_path, capsys):
    out = tmp_path / "cap-refund-policy.tuned.yaml"
    rc = main(["calibrate", REFUND, "--policy", "refuse", "--seeds", "6", "--samples", "1", "--tune", "--band", "0.4,0.5",
               "--out", str(out), "--json-out", str(tmp_path / "r.json"), "--no-progress"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tune"]["in_band"] is True and report["tune"]["written"] == str(out)
    assert json.loads((tmp_path / "r.json").read_text()) == report
    tuned = load_spec(out)
    for name, value in report["tune"]["knobs"].items():
        assert tuned.data["difficulty"][name]["default"] == value
    assert yaml.safe_load(out.read_text())["cases"][0]["slots"]  # slot order preserved -> loadable


def test_cli_calibrate_reports_bad_input_without_traceback(tau2_data, capsys):
    assert main(["calibrate", REFUND, "--policy", "reference", "--seeds", "0-1", "--samples", "0", "--no-progress"]) == 2
    assert main(["calibrate", REFUND, "--policy", "reference", "--seeds", "2", "--difficulty", "users=99", "--no-progress"]) == 1
    assert main(["calibrate", "trace/nope-v0", "--policy", "noop", "--seeds", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "must be a number in" in err and "error" in err


def test_policies_from_the_shared_policy_package(tau2_data, tmp_path, capsys):
    script = tmp_path / "okay.txt"
    script.write_text("\n".join(["Okay."] * 20))
    rc = main(["calibrate", REFUND, "--policy", f"scripted:{script}", "--seeds", "2", "--samples", "2", "--no-progress"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 4 and report["mean_reward"] == 0.0 and report["groups_constant"] == 1.0
