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
