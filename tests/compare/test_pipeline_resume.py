"""The compare pipeline on the notes test env with a scripted agent: results, resume, redraw."""

from __future__ import annotations

import json

import pytest

from tests.compare.envs import ENV_ID, MAGIC, InstructionFollower
from tests.extras import need
from trace_gym.compare import pipeline
from trace_gym.compare.pipeline import CompareConfig, run_compare

need("gepa")


def _reflect(prompt):
    return f"```\n{MAGIC}\n```" if "failed" in str(prompt) else "```\nKeep going.\n```"


def _cfg(out, **kw):
    base = dict(target=ENV_ID, model="scripted-follower", budget=12, out=str(out), trials=2,
                methods=["base", "gepa", "grpo"], train_tasks=["0", "1", "2"], test_tasks=["3", "1"],
                gepa_val=2, gepa_minibatch=1, policy_factory=lambda seed: InstructionFollower(), reflection_lm=_reflect)
    base.update(kw)
    return CompareConfig(**base)


class _Killed(Exception):
    pass


def test_compare_runs_resumes_after_a_kill_and_redraws(tmp_path, monkeypatch):
    real = pipeline._evaluate
    calls = {"n": 0}

    def dying(cfg, policy, tasks, store):
        if store.name == "gepa.jsonl" and calls["n"] == 0:
            calls["n"] += 1
            raise _Killed("killed during the GEPA evaluation")
        return real(cfg, policy, tasks, store)

    monkeypatch.setattr(pipeline, "_evaluate", dying)
    out = tmp_path / "run"
    with pytest.raises(_Killed):
        run_compare(_cfg(out), log=lambda m: None)
    assert (out / "stages" / "gepa.json").exists() and not (out / "stages" / "eval_gepa.json").exists()
    ledger = json.loads((out / "gepa" / "budget.json").read_text())

    doc = run_compare(_cfg(out), log=lambda m: None)
    assert doc["stages"]["ran"] == ["eval_gepa"]  # only the interrupted stage ran again (grpo reuses the base eval)
    assert "gepa" in doc["stages"]["skipped"] and "eval_base" in doc["stages"]["skipped"]
    assert json.loads((out / "gepa" / "budget.json").read_text()) == ledger  # no rollout spent twice

    m = doc["methods"]
    assert m["base"]["eval"]["pass_hat_k"]["1"]["value"] == 0.0 and m["base"]["rollouts"] == 0
    assert m["gepa"]["eval"]["pass_hat_k"]["1"]["value"] == 1.0  # the optimized instruction solves held-out tasks
    assert 0 < m["gepa"]["rollouts"] <= 12
    assert m["grpo"]["skipped"] and m["grpo"]["rollouts"] == 0  # a scripted agent cannot be trained
    assert doc["details"]["gepa"]["result"]["best_candidate"] == {"system_prompt": MAGIC}
    assert doc["seeds"] == {"seed": 0, "eval_seed": 1000, "trials": 2}

    # an uninterrupted run gives the same table
    fresh = run_compare(_cfg(tmp_path / "fresh"), log=lambda m: None)
    assert {k: v["eval"]["results"] for k, v in fresh["methods"].items()} == {k: v["eval"]["results"] for k, v in m.items()}

    # the table and plot are redrawn from the JSON alone
    from trace_gym.compare.report import redraw

    (out / "compare.md").unlink()
    paths = redraw(out)
    text = (out / "compare.md").read_text()
    assert "GEPA" in text and "1.000 [1.000, 1.000]" in text and paths["markdown"].endswith("compare.md")


def test_scaling_mode_writes_one_run_per_budget(tmp_path):
    from trace_gym.compare.pipeline import run_scaling

    doc = run_scaling(_cfg(tmp_path / "s", methods=["base", "gepa"]), [2, 8], log=lambda m: None)
    by_budget = {r["budget"]: r["methods"] for r in doc["runs"]}
    assert by_budget[2]["gepa"]["rollouts"] == 2  # scoring the seed prompt spends it all: no search
    assert by_budget[2]["gepa"]["eval"]["pass_hat_k"]["1"]["value"] == 0.0
    assert 2 < by_budget[8]["gepa"]["rollouts"] <= 8
    assert by_budget[8]["gepa"]["eval"]["pass_hat_k"]["1"]["value"] == 1.0
    assert (tmp_path / "s" / "scaling.md").exists() and (tmp_path / "s" / "B8" / "compare.json").exists()
    assert (tmp_path / "s" / "scaling.png").exists()


def test_config_errors_are_clear():
    with pytest.raises(ValueError, match="unknown method"):
        CompareConfig(methods=["base", "magic"]).validate()
    with pytest.raises(ValueError, match="reuses the adapters"):
        CompareConfig(methods=["single"]).validate()
    with pytest.raises(ValueError, match="unknown compare config"):
        CompareConfig.from_dict({"nope": 1})


def test_resuming_with_another_configuration_is_refused(tmp_path):
    run_compare(_cfg(tmp_path, methods=["base"]), log=lambda m: None)
    with pytest.raises(ValueError, match="changed: trials"):
        run_compare(_cfg(tmp_path, methods=["base"], trials=3), log=lambda m: None)
    run_compare(_cfg(tmp_path, methods=["base", "gepa"]), log=lambda m: None)  # adding a method is fine
