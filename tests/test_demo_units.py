"""Small pieces of the demo: sizes, the verdict sentence, the context guard, stage records."""

from __future__ import annotations

import pytest

from tests.extras import need, need_smollm2
from trace_gym.demo import DemoConfig, verdict


def test_sizes_and_bad_model():
    real, fast, tiny = (DemoConfig.for_run(target="tau2-retail"), DemoConfig.for_run(fast=True, target="tau2-retail"),
                        DemoConfig.for_run(model="tiny", target="tau2-retail"))
    assert fast.base_tasks < real.base_tasks and fast.train_steps <= real.train_steps
    assert tiny.max_new_tokens < real.max_new_tokens and tiny.train_steps <= real.train_steps
    assert 2 <= real.group_size and real.group_size <= 4 and 2 <= real.train_steps <= 4
    assert 1 <= real.max_adapters <= 2 and real.env_kwargs == {"unjudged_nl": "ignore"}
    with pytest.raises(ValueError, match="model must be one of"):
        DemoConfig(model="gpt")


def test_toolsandbox_target_runs_without_a_scripted_agent():
    from trace_gym.demo.config import TOOLSANDBOX_SUCCESS

    real, fast, tiny = (DemoConfig.for_run(target="toolsandbox"), DemoConfig.for_run(fast=True, target="toolsandbox"),
                        DemoConfig.for_run(model="tiny", target="toolsandbox"))
    for c in (real, fast, tiny):
        assert c.target == "trace/toolsandbox-v0" and not c.scripted and c.success == TOOLSANDBOX_SUCCESS
        assert c.band == (0.2, 0.6) and c.tune_rounds >= 1 and c.min_capabilities == 1
    assert fast.base_tasks < real.base_tasks and fast.train_steps <= real.train_steps and 0 < fast.eval_tasks
    assert tiny.max_new_tokens < real.max_new_tokens and tiny.train_steps >= 1  # the tiny run still plumbs GRPO
    # the held-out evaluation plays every scenario of the other fold (enough for a paired interval to exclude 0)
    assert real.eval_tasks == 0
    # the adapter rehearses the base model's own successes (it keeps refusing and ending where base did)
    assert real.cap_rehearse_base and DemoConfig().cap_rehearse_base is False
    # each adapter learns from its own env's reference episodes (what made SmolLM2 solve a capability env and move
    # ToolSandbox's scenarios), some of them recovered mistakes; SFT only on CPU (GRPO after it lowered the score);
    # the adapter is also measured on held-out seeds of its own env; the tau2 demo has no such warm start
    assert real.cap_warm_demos >= 32 and real.cap_warm_steps >= 24 and real.train_steps == 0
    assert real.cap_warm_recover_every > 0 and real.cap_eval_seeds >= 8 and tiny.cap_eval_seeds >= 1
    # the knob search is capped (one setting beyond the synthesized one), the format warm start is opt-in, and
    # the adapter's SFT checkpoints activations (the demo's peak memory stays under 8 GB)
    assert real.tune_episodes == real.calib_seeds * real.calib_samples and not real.warm_start
    assert real.gradient_checkpointing is True and DemoConfig.for_run(target="tau2-retail").gradient_checkpointing is None
    assert 0 < tiny.cap_warm_demos <= real.cap_warm_demos and fast.cap_warm_steps <= real.cap_warm_steps
    retail = DemoConfig.for_run(target="trace/tau2-retail-v0")
    assert DemoConfig.for_run().target == real.target  # the model's own failures drive the default demo
    assert retail.scripted and retail.success is None and retail.env_kwargs == {"unjudged_nl": "ignore"}
    assert retail.cap_warm_demos == 0
    with pytest.raises(ValueError, match="target must be one of"):
        DemoConfig.for_run(target="nonsense")
    # ToolSandbox routes as the comparison does: a request whose needed tool is missing stays with the base model
    assert (real.router_rule, real.adapter_choice) == ("needs", "select") and retail.router_rule == "vote"
    with pytest.raises(ValueError, match="adapter_choice must be one of"):
        DemoConfig(adapter_choice="both")
    with pytest.raises(ValueError, match="router_rule must be one of"):
        DemoConfig(router_rule="nearest")


def test_verdict_says_what_happened():
    base = {"mean_reward": 0.25, "pass^1": 0.25}
    assert "scored higher" in verdict({"base": base, "routed": {"mean_reward": 0.5, "pass^1": 0.5}})
    same = verdict({"base": base, "routed": dict(base)})
    assert same.startswith("no change") and "0.250" in same
    paired = {"n_tasks": 4, "value": 0.2, "low": 0.05, "high": 0.35, "wins": 3, "losses": 0, "ties": 1}
    sig = verdict({"base": base, "routed": {"mean_reward": 0.45, "pass^1": 0.25, "vs_first": {"overall": paired}}})
    assert "improved" in sig and "+0.200 [95% CI +0.050, +0.350]" in sig and "not significant" not in sig
    wide = verdict({"base": base, "routed": {"mean_reward": 0.45, "pass^1": 0.25,
                                             "vs_first": {"overall": {**paired, "low": -0.1}}}})
    assert wide.startswith("no measurable difference") and "not significant" in wide and "improved" not in wide
    cap = {"env_id": "trace/cap-x-v0", "tasks": ["1", "2"], "base": {"mean_reward": 0.1},
           "adapter:cap-x": {"mean_reward": 0.6, "vs_first": {"overall": {**paired, "n_tasks": 2, "value": 0.5}}}}
    both = verdict({"base": base, "routed": dict(base), "capability_env": cap})
    assert "held-out seeds of its own env trace/cap-x-v0: base 0.100 → adapter 0.600 (paired +0.500" in both
    assert "scored lower" in verdict({"base": base, "routed": {"mean_reward": 0.0, "pass^1": 0.0}})
    low = verdict({"base": base, "routed": {"mean_reward": 0.05, "pass^1": 0.0,
                                            "vs_first": {"overall": {**paired, "value": -0.2, "low": -0.3, "high": -0.1}}}})
    assert low.startswith("routed adapters did worse")
    assert "only the base model" in verdict({"base": base})


def test_context_guard_counts_the_episodes_a_full_context_ends_and_forwards_the_rest():
    need("torch")
    from trace_gym.demo.guard import ContextGuard
    from trace_gym.policies.base import ContextExceeded
    from trace_gym.policies.hf import HFPolicy, tiny_test_model

    need_smollm2()
    model, tok = tiny_test_model(0)
    model.config.max_position_embeddings = 64
    inner = HFPolicy(model, tok, max_new_tokens=8, greedy=True)
    guard = ContextGuard(inner)
    short = ([{"role": "user", "content": "hi"}], [])
    long = ([{"role": "user", "content": "word " * 200}], [])
    with pytest.raises(ContextExceeded) as exc:  # the model policy decides; the guard only counts
        guard.act_batch([short, long, short], seeds=[1, 2, 3])
    assert exc.value.rows == [1] and guard.fired == 1
    assert len(guard.act_batch([short, short], seeds=[1, 3])) == 2 and guard.fired == 1
    with pytest.raises(ContextExceeded):
        guard.act(*long)
    assert guard.fired == 2
    assert guard.accepts_seeds is inner.accepts_seeds and guard.batch_size == inner.batch_size
    assert not hasattr(guard, "serve")  # the transformers policy does not serve, so neither does its guard
    guard.policy_id = "renamed"
    assert inner.policy_id == "renamed" and guard.policy_id == "renamed"


def test_demo_without_toolsandbox_data_says_how_to_get_it_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    from trace_gym.cli import main

    empty = tmp_path / "no-data"
    empty.mkdir()
    monkeypatch.setenv("TOOLSANDBOX_DATA_DIR", str(empty))
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 2  # the data is looked for before any model is loaded
    text = " ".join(capsys.readouterr().out.split())
    assert "error:" in text and "trace-gym data fetch toolsandbox --from PATH_OR_URL" in text
    assert not out.exists()  # the failed run left no empty output folder
