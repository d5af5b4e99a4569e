"""The comparison's shared format warm start with the tiny model on ToolSandbox: made once before any
method, every method loads the merged weights, the ledger shows it as a shared cost charged to no method,
a rerun reuses it and other warm-start settings are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.extras import need, need_smollm2

need("torch")
need("trl")
need("peft")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

DEMO_ENV = "trace/cap-ts-state-dependency-v0"


def _cfg(out, **kw):
    from trace_gym.compare.pipeline import CompareConfig

    base = dict(target="trace/toolsandbox-v0", model="tiny", budget=2, trials=1, n_train_tasks=2, n_test_tasks=1,
                success=0.7, methods=["base", "grpo"], out=str(out), env_kwargs={"max_steps": 2},
                gen={"max_new_tokens": 4, "temperature": 1.0},
                train={"num_generations": 2, "seeds_per_step": 1, "max_resamples": 0, "max_new_tokens_per_turn": 4,
                       "max_completion_length": 32, "lora_r": 4, "lora_alpha": 8},
                max_train_steps=1, warm_start=True, warm_start_envs=[DEMO_ENV], warm_start_steps=2, warm_start_seeds=1,
                warm_start_lr=2e-2)
    base.update(kw)
    return CompareConfig(**base).validate()


def test_warm_start_defaults():
    from trace_gym.compare.pipeline import CompareConfig

    assert CompareConfig(target="trace/toolsandbox-v0", model="smollm2").warm_start_on()
    assert CompareConfig(target="trace/toolsandbox-v0", model="hf:some/model").warm_start_on()
    assert not CompareConfig(target="trace/toolsandbox-v0", model="tiny").warm_start_on()
    assert CompareConfig(target="trace/toolsandbox-v0", model="tiny", warm_start=True).warm_start_on()
    assert not CompareConfig(target="trace/tau2-retail-v0", model="smollm2").warm_start_on()
    assert CompareConfig(target="trace/tau2-retail-v0", model="smollm2", warm_start=True).warm_start_on()
    assert not CompareConfig(target="trace/toolsandbox-v0", model="openai:http://x#m", warm_start=True).warm_start_on()
    assert CompareConfig.from_dict({"warm_start": False, "warm_start_steps": 4}).warm_start_steps == 4


def test_warm_start_knobs_from_the_command_line_and_bad_values():
    import argparse

    from trace_gym.cli import compare as cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))

    def build(*sets):
        return cli.build_config(parser.parse_args(["compare", *[a for s in sets for a in ("--set", s)]]))

    cfg = build("warm_start=true", f"warm_start_envs=[{DEMO_ENV}]", "warm_start_steps=4", "warm_start_seeds=2",
                "warm_start_lr=1.0e-4")
    assert (cfg.warm_start, cfg.warm_start_envs, cfg.warm_start_steps, cfg.warm_start_seeds, cfg.warm_start_lr) == (
        True, [DEMO_ENV], 4, 2, 1e-4)
    assert build("warm_start=false").warm_start is False and build().warm_start is None
    for bad, match in (("warm_start_steps=0", "warm_start_steps"), ("warm_start_envs=x", "warm_start_envs"),
                       ("warm_start_lr=-1", "warm_start_lr"), ("warm_start_lr=1e-4", "write 0.0001"),
                       ("warm_start=maybe", "warm_start")):
        with pytest.raises(ValueError, match=match):
            build(bad)


@given(steps=st.one_of(st.integers(-3, 5), st.booleans(), st.floats(-1, 3)), lr=st.one_of(st.floats(-1, 1), st.none()),
       envs=st.one_of(st.none(), st.lists(st.sampled_from(["", DEMO_ENV]), max_size=2), st.text(max_size=3)))
def test_warm_start_knobs_are_valid_or_a_clear_error(steps, lr, envs):
    from trace_gym.compare.pipeline import CompareConfig

    ok = (isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1 and isinstance(lr, float) and lr > 0
          and (envs is None or (isinstance(envs, list) and envs and all(envs))))
    cfg = CompareConfig(warm_start_steps=steps, warm_start_lr=lr, warm_start_envs=envs)
    if ok:
        assert cfg.validate() is cfg
    else:
        with pytest.raises(ValueError, match="warm_start"):
            cfg.validate()


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.usefixtures("one_torch_thread")
def test_compare_with_a_shared_warm_start(toolsandbox_data, tmp_path):
    from trace_gym.compare import methods as M
    from trace_gym.compare.pipeline import run_compare
    from trace_gym.compare.report import ledger_markdown
    from trace_gym.pipeline.warm import WarmStartMismatch

    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    out = tmp_path / "run"
    cfg = _cfg(out)
    doc = run_compare(cfg, log=lambda m: None)
    ws = doc["warm_start"]
    merged = out / "warm_start" / "model"
    assert ws["model"] == str(merged) and cfg.weights == str(merged) and (merged / "config.json").exists()
    assert ws["shared"] and ws["envs"] == [DEMO_ENV] and ws["steps"] == 2 and ws["demonstrations"] == 1
    # every method starts from the merged weights: the base policy and GRPO's adapter
    assert (str(merged), cfg.seed) in M._MODELS
    assert "weights" not in doc["config"] and doc["config"]["warm_start_envs"] == [DEMO_ENV]
    manifest = json.loads((out / "grpo" / "adapters" / "manifest.json").read_text())["adapters"]
    assert [e["base_model"] for e in manifest] == [str(merged)]
    # a shared cost: no method is charged for it; the ledger says so
    assert doc["methods"]["grpo"]["rollouts"] <= cfg.budget and doc["methods"]["base"]["rollouts"] == 0
    ledger = ledger_markdown(doc)
    assert "| shared: format warm start | 0 | – | 1 reference episodes of 1 capability env(s)" in ledger
    assert "format warm start" in (out / "compare.md").read_text()

    # rerun: reused, nothing retrained
    created = json.loads((out / "warm_start" / "warm_start.json").read_text())["created"]
    again = run_compare(_cfg(out), log=lambda m: None)
    assert again["warm_start"]["model"] == str(merged) and again["stages"]["ran"] == []
    assert json.loads((out / "warm_start" / "warm_start.json").read_text())["created"] == created
    # other warm-start settings: refused (a new budget's folder still shares the warm start of <out>)
    with pytest.raises(WarmStartMismatch, match="learning_rate changed"):
        run_compare(_cfg(out, warm_start_lr=1e-3, methods=["base"]), log=lambda m: None, budget_dir=out / "B9")
    assert not (out / "B9").exists()  # refused before anything was written
    with pytest.raises(WarmStartMismatch, match=r"\(steps changed\)"):
        run_compare(_cfg(out, warm_start_steps=3), log=lambda m: None)
    with pytest.raises(ValueError, match="different configuration"):  # the rest of the config is checked as before
        run_compare(_cfg(out, trials=2), log=lambda m: None)
    assert json.loads((out / "warm_start" / "warm_start.json").read_text())["created"] == created
    assert Path(again["warm_start"]["record"]).exists()
