"""The demo's format warm start with the tiny model on ToolSandbox: it runs before the loop, every stage then
loads the merged model (the plan, the base policy, the trained adapter's base), it is its own summary row,
a second run reuses it, and other warm-start settings are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.extras import need, need_smollm2

need("torch")
need("trl")
need("peft")

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

DEMO_ENV = "trace/cap-ts-state-dependency-v0"


def _cfg(out, **kw):
    from trace_gym.demo import DemoConfig

    cfg = DemoConfig.for_run(out=out, model="tiny", target="toolsandbox", warm_start=True)
    cfg.warm_start_envs, cfg.warm_start_steps, cfg.warm_start_seeds, cfg.warm_start_lr = [DEMO_ENV], 2, 1, 2e-2
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


def test_the_demo_format_warm_start_is_opt_in():
    from trace_gym.demo import DemoConfig

    assert not DemoConfig.for_run(target="toolsandbox").warm_start
    assert not DemoConfig.for_run(target="toolsandbox", fast=True).warm_start
    assert DemoConfig.for_run(target="toolsandbox", warm_start=True).warm_start
    assert not DemoConfig.for_run(target="toolsandbox", model="tiny").warm_start
    assert not DemoConfig.for_run(target="tau2-retail").warm_start
    assert DemoConfig.for_run(target="tau2-retail", warm_start=True).warm_start
    assert not DemoConfig.for_run(target="toolsandbox", warm_start=False).warm_start
    assert DemoConfig.for_run(target="toolsandbox").warm_start_envs is None  # the registry decides


def test_demo_with_a_warm_start_runs_on_the_merged_model_and_resumes(toolsandbox_data, private_dir, capsys):
    from rich.console import Console

    from trace_gym.demo import run_demo
    from trace_gym.demo.runner import prepare_model
    from trace_gym.demo.stages import Context, demo_plan
    from trace_gym.pipeline import StageStore
    from trace_gym.pipeline.warm import WarmStartMismatch

    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    out = private_dir / "demo"
    summary = run_demo(_cfg(out), Console(width=100))
    rows = {s["stage"]: s for s in summary["stages"]}
    assert [s["stage"] for s in summary["stages"]][0] == "warm_start" and not rows["warm_start"]["resumed"]
    ws = rows["warm_start"]["found"]
    merged = Path(ws["model"])
    assert merged == (out / "warm_start" / "model").resolve() or merged == out / "warm_start" / "model"
    assert (merged / "config.json").exists() and not (merged / "adapter_config.json").exists()
    assert ws["envs"] == [DEMO_ENV] and ws["steps"] == 2 and ws["demonstrations"] == 1
    assert "1 reference episodes" in rows["warm_start"]["headline"] and rows["warm_start"]["seconds"] > 0
    text = capsys.readouterr().out
    assert "0. format warm start" in text and "merged model" in text
    # every trained adapter starts from the merged weights
    manifest = json.loads((out / "adapters" / "manifest.json").read_text())["adapters"]
    assert manifest and all(e["base_model"] == str(merged) for e in manifest)

    # the plan and the base policy load the merged model
    ctx = Context(_cfg(out), Console(width=100))
    store = StageStore(out, fingerprint=ctx.cfg.to_dict())
    assert prepare_model(ctx, store) == str(merged) and store.records["warm_start"].resumed
    plan, _ = demo_plan(ctx)
    assert plan.model == str(merged)
    policy = plan.base_policy()
    assert policy.inner.model.config._name_or_path == str(merged)

    # a second run reuses every stage, the warm start included
    again = run_demo(_cfg(out), Console(width=100))
    assert all(s["resumed"] for s in again["stages"])
    created = json.loads((out / "warm_start" / "warm_start.json").read_text())["created"]
    # other warm-start settings: a clear error, nothing retrained
    with pytest.raises(WarmStartMismatch, match="steps changed"):
        run_demo(_cfg(out, warm_start_steps=3), Console(width=100))
    assert json.loads((out / "warm_start" / "warm_start.json").read_text())["created"] == created
