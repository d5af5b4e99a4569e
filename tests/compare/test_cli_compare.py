from __future__ import annotations

import argparse
import json

import pytest

from trace_gym.cli import compare as cli


def _parse(argv):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    cli.register(sub)
    return parser.parse_args(["compare", *argv])


def test_flags_build_the_config(tmp_path):
    conf = tmp_path / "c.json"
    conf.write_text(json.dumps({"budget": 32, "trials": 3, "gen": {"max_new_tokens": 64, "temperature": 0.5}}))
    args = _parse(["--config", str(conf), "--target", "trace/tau2-airline-v0", "--model", "tiny", "--budget", "16",
                   "--methods", "base,gepa", "--env", "max_steps=20", "--gen", "temperature=1.0",
                   "--train", "num_generations=2", "--survey", "retail,airline", "--set", "gepa_val=3"])
    cfg = cli.build_config(args)
    assert (cfg.target, cfg.model, cfg.budget, cfg.trials) == ("trace/tau2-airline-v0", "tiny", 16, 3)
    assert cfg.methods == ["base", "gepa"] and cfg.env_kwargs == {"max_steps": 20}
    assert cfg.gen == {"max_new_tokens": 64, "temperature": 1.0}  # the flag overrides one key of the file's mapping
    assert cfg.train["num_generations"] == 2 and cfg.train["lora_r"] == 16  # defaults kept
    assert cfg.survey_domains == ["retail", "airline"] and cfg.gepa_val == 3


def test_a_toolsandbox_target_with_a_success_threshold():
    args = _parse(["--target", "trace/toolsandbox-v0", "--model", "tiny", "--success", "0.7",
                   "--set", "band=[0.2, 0.6]", "--set", "tune_rounds=1"])
    cfg = cli.build_config(args)
    assert (cfg.target, cfg.success, cfg.band, cfg.tune_rounds) == ("trace/toolsandbox-v0", 0.7, [0.2, 0.6], 1)
    from trace_gym.compare.pipeline import _target

    target = _target(cfg)
    assert target.threshold == 0.7 and target.domain == "toolsandbox"
    assert cli.build_config(_parse(["--target", "trace/toolsandbox-v0"])).success is None


@pytest.mark.parametrize("argv, message", [
    (["--env", "max_steps"], "KEY=VALUE"),
    (["--methods", "base,nope"], "unknown method"),
    (["--set", "nope=1"], "unknown compare config"),
])
def test_bad_flags_are_clear_errors(argv, message, capsys):
    assert cli._run(_parse(argv)) == 2
    assert message in capsys.readouterr().err


def test_redraw_rebuilds_table_and_plot_from_json(tmp_path, capsys):
    ev = {"env_id": "x", "policy": "p", "trials": 1, "n_tasks": 2, "rollouts": 0, "wall_s": 1.0, "mean_reward": 0.5,
          "pass_hat_k": {"1": {"k": 1, "value": 0.5, "low": 0.0, "high": 1.0, "n_tasks": 2}},
          "groups": {}, "results": {"a": [True], "b": [False]}, "rewards": {"a": [1.0], "b": [0.0]}}
    doc = {"format": "trace-gym/compare@1", "target": "trace/tau2-mock-v0", "budget": 8,
           "methods": {"base": {"rollouts": 0, "budget": 8, "eval": ev, "note": "base model"},
                       "gepa": {"rollouts": 8, "budget": 8, "eval": ev, "note": "GEPA-optimized instruction"}}}
    (tmp_path / "compare.json").write_text(json.dumps(doc))
    assert cli._run(_parse(["--redraw", str(tmp_path)])) == 0
    text = (tmp_path / "compare.md").read_text()
    assert "| GEPA | 8 | 0.500 [0.000, 1.000] |" in text
    assert (tmp_path / "compare.png").stat().st_size > 0
    assert cli._run(_parse(["--redraw", str(tmp_path / "missing")])) == 2


def test_pool_reports_a_run_and_its_swap_as_one(tmp_path, capsys):
    def doc(tasks, base, trace):
        def ev(rs):
            return {"rewards": {t: [r] for t, r in zip(tasks, rs, strict=True)}, "task_groups": {t: ["answerable"] for t in tasks}}
        return {"target": "trace/toolsandbox-v0", "budget": 8, "seeds": {"eval_seed": 7, "trials": 1},
                "methods": {"base": {"eval": ev(base)}, "trace": {"eval": ev(trace)}}}

    for name, d in (("a", doc(["t1", "t2"], [0.0, 0.5], [1.0, 0.5])), ("b", doc(["u1"], [0.2], [0.1]))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "compare.json").write_text(json.dumps(d))
    out = tmp_path / "pooled"
    assert cli._run(_parse(["--pool", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)])) == 0
    printed = capsys.readouterr().out
    assert "2 + 1 = 3" in printed and (out / "pooled.md").read_text() in printed
    assert "| overall | +0.300" in (out / "pooled.md").read_text()
    assert cli._run(_parse(["--pool", str(tmp_path / "a"), str(tmp_path / "a"), "--out", str(tmp_path / "x")])) == 2
    assert "in two runs" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_router_outcomes_on_both_front_ends():
    """``trace-gym compare --set router_outcomes=N`` and ``trace_vs_baselines.py --router-outcomes N`` set it."""
    from tests.compare.bench import benchmark_script

    cfg = cli.build_config(_parse(["--model", "tiny", "--budget", "64", "--set", "router_outcomes=2"]))
    assert cfg.router_outcomes == 2 and cfg.to_dict()["router_outcomes"] == 2
    with pytest.raises(ValueError, match="router_outcomes must be an integer"):
        cli.build_config(_parse(["--model", "tiny", "--set", "router_outcomes=x"]))
    mod = benchmark_script()
    assert mod.config_of(mod.parse_args(["--preset", "smoke-toolsandbox", "--router-outcomes", "1"])).router_outcomes == 1
    assert mod.config_of(mod.parse_args(["--preset", "cpu-toolsandbox"])).router_outcomes == 0  # off until measured
    with pytest.raises(ValueError, match="budget 8 is too small .* router_outcomes"):
        mod.config_of(mod.parse_args(["--preset", "smoke-toolsandbox", "--router-outcomes", "2"]))


def test_rehearse_peers_on_both_front_ends():
    """``trace-gym compare --set cap_rehearse_peers=true`` and ``trace_vs_baselines.py --rehearse-peers`` set it."""
    from tests.compare.bench import benchmark_script

    cfg = cli.build_config(_parse(["--model", "tiny", "--budget", "64", "--set", "cap_warm_demos=2",
                                   "--set", "cap_rehearse_peers=true"]))
    assert cfg.cap_rehearse_peers is True and cfg.to_dict()["cap_rehearse_peers"] is True
    mod = benchmark_script()
    on = mod.config_of(mod.parse_args(["--preset", "cpu-toolsandbox", "--rehearse-peers"]))
    assert on.cap_rehearse_peers is True
    assert mod.config_of(mod.parse_args(["--preset", "cpu-toolsandbox"])).cap_rehearse_peers is False  # off until measured
    assert mod.config_of(mod.parse_args(["--preset", "cpu-toolsandbox", "--no-rehearse-peers"])).cap_rehearse_peers is False
