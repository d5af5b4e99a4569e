"""The supervised warm start: demonstrations from reference episodes, their masks, SFT, and `train --warm-start`."""

from __future__ import annotations

import json

import pytest

from tests.extras import need
from tests.helpers_adapters import adapter_weights

torch = need("torch")
need("trl")
need("peft")

from trace_gym.core.toolcalls import parse_action  # noqa: E402
from trace_gym.policies.prompting import format_calls  # noqa: E402
from trace_gym.train.chat import ChatRenderer  # noqa: E402
from trace_gym.train.config import ConfigError, TrainConfig  # noqa: E402
from trace_gym.train.demos import NoReferenceError, build_demonstrations, tokenize_demonstration  # noqa: E402

pytestmark = pytest.mark.model

DEMO_ENV = "trace/cap-ts-state-dependency-v0"


@pytest.fixture(scope="module")
def demos():
    return build_demonstrations([DEMO_ENV], 2, start=3).demos


def _spans(ids, mask, tokenizer):
    spans, cur = [], []
    for i, m in zip(ids, mask, strict=True):
        if m:
            cur.append(i)
        elif cur:
            spans.append(tokenizer.decode(cur))
            cur = []
    if cur:
        spans.append(tokenizer.decode(cur))
    return spans


def test_demonstrations_are_the_reference_episodes_on_train_tasks(demos):
    import gymnasium as gym

    from trace_gym.core.tasks import task_source

    env = gym.make(DEMO_ENV, disable_env_checker=True)
    src = task_source(env)
    assert [d.task_id for d in demos] == src.task_ids("train")[3:5]
    for d in demos:
        env.reset(seed=0, options={**src.reset_options(d.task_id), "hint": False})
        reference = env.unwrapped.reference_actions()
        turns = d.assistant_turns()
        assert len(turns) == len(reference) and d.reward == 1.0
        for turn, action in zip(turns, reference, strict=True):
            want = parse_action(action)
            if want.calls:
                got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in turn["tool_calls"]]
                assert got == want.calls
            else:
                assert turn["content"] == want.content and not turn.get("tool_calls")
        assert not turns[-1].get("tool_calls")  # the episode ends with the message to the user
        assert d.messages[-1] is turns[-1] or d.messages[-1] == turns[-1]
        assert "Hint" not in d.messages[0]["content"]
    env.close()


@pytest.mark.parametrize("tool_format", ["smollm2", "hermes"])
def test_only_assistant_tokens_are_trained(demos, tokenizer, tool_format):
    renderer = ChatRenderer(tokenizer, tool_format=tool_format)
    for d in demos:
        row = tokenize_demonstration(renderer, d)
        ids, mask = row["input_ids"], row["assistant_masks"]
        assert len(ids) == len(mask)
        assert tokenizer.decode(ids) == renderer.render(d.messages, d.tools, generation_prompt=False)
        want = []
        for turn in d.assistant_turns():
            calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in turn.get("tool_calls") or []]
            want.append((format_calls(calls, tool_format) if calls else turn["content"]) + tokenizer.eos_token)
        assert _spans(ids, mask, tokenizer) == want
        untrained = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if not m])
        assert d.messages[0]["content"][:40] in untrained and d.messages[1]["content"] in untrained
        assert "<tool_response>" in untrained and "<|im_start|>assistant\n" in untrained
    short = tokenize_demonstration(renderer, demos[0], max_length=50)
    assert len(short["input_ids"]) == 50


def test_recovered_demonstrations_show_the_repair_and_do_not_train_the_mistake(tokenizer):
    env_id = "trace/cap-ts-location-dependency-v0"  # reading the location fails until location service is on
    report = build_demonstrations([env_id], 3, recover_every=2)
    assert len(report.demos) == 3 and report.recovered == {env_id: 2}  # tasks 0 and 2
    rec, plain = report.demos[0], report.demos[1]
    assert not plain.untrained
    [wrong] = rec.untrained
    turns = [i for i, m in enumerate(rec.messages) if m.get("role") == "assistant"]
    assert wrong == turns[0]
    tool_reply = rec.messages[wrong + 1]
    assert tool_reply["role"] == "tool" and "Error" in tool_reply["content"]
    first_call = rec.messages[wrong]["tool_calls"][0]["function"]["name"]
    retried = [rec.messages[i]["tool_calls"][0]["function"]["name"] for i in turns[1:] if rec.messages[i].get("tool_calls")]
    assert retried[-1] == first_call and rec.reward == 1.0  # repaired, retried, and still a perfect episode
    assert not rec.messages[turns[-1]].get("tool_calls")  # and it ends with the message to the user
    renderer = ChatRenderer(tokenizer, tool_format="smollm2")
    row = tokenize_demonstration(renderer, rec)
    spans = _spans(row["input_ids"], row["assistant_masks"], tokenizer)
    assert len(spans) == len(turns) - 1  # every assistant turn but the mistaken one is trained
    # an env whose reward counts failed calls (state dependency: check the state first) keeps plain demonstrations
    strict = build_demonstrations([DEMO_ENV], 2, recover_every=1)
    assert strict.recovered == {} and len(strict.demos) == 2 and not any(d.untrained for d in strict.demos)


def test_envs_without_a_reference_are_refused():
    with pytest.raises(NoReferenceError, match="no reference solution"):
        build_demonstrations(["trace/toolsandbox-v0"], 1)


def _cfg(tmp_path, name, **kw):
    base = dict(env_id="trace-test/train-single-v0", model="tiny", out=str(tmp_path / "adapters" / name),
                sft_envs=[DEMO_ENV], sft_seeds_per_env=2, sft_max_steps=4, sft_batch_size=2, sft_learning_rate=2e-2,
                max_steps=1, num_generations=2, seeds_per_step=1, max_new_tokens_per_turn=4, max_completion_length=16,
                num_train_seeds=4, lora_r=4, lora_alpha=8, progress=False, seed=3)
    base.update(kw)
    return TrainConfig(**base)


def test_a_short_sft_run_lowers_the_loss_on_its_demonstrations(tmp_path, demos):
    from trace_gym.policies.hf import tiny_test_model
    from trace_gym.train.sft import demo_loss, warm_start

    model, tok = tiny_test_model(seed=3)
    cfg = _cfg(tmp_path, "sft", env_id="")
    res = warm_start(cfg, model=model, tokenizer=tok, demos=demos)
    rec = res.record
    assert res.steps == 4 and res.demos == 2 and rec["per_env"] == {DEMO_ENV: 2}
    assert rec["loss_after"] < rec["loss_before"] - 0.1
    rows = [json.loads(x) for x in (res.out / "sft_metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 5))
    assert not hasattr(model, "peft_config")  # the caller's model is given back without LoRA layers
    # the saved adapter reproduces the lower loss on a fresh copy of the base model
    from trace_gym.train.models import load_lora

    fresh, _ = tiny_test_model(seed=3)
    renderer = ChatRenderer(tok)
    sample = [tokenize_demonstration(renderer, d) for d in demos]
    assert demo_loss(fresh, sample) == pytest.approx(rec["loss_before"], rel=1e-4)
    assert demo_loss(load_lora(fresh, str(res.out), cfg), sample) == pytest.approx(rec["loss_after"], rel=1e-4)
    entry = json.loads((tmp_path / "adapters" / "manifest.json").read_text())["adapters"][0]
    assert entry["kind"] == "sft" and entry["path"] == str(res.out)
    with pytest.raises(ValueError, match="other LoRA settings"):
        load_lora(tiny_test_model(seed=3)[0], str(res.out), cfg.with_overrides(lora_r=8))


def test_train_warm_start_runs_sft_then_grpo_into_one_adapter(toolsandbox_data, tmp_path, capsys):
    from trace_gym.cli import main

    out = tmp_path / "adapters" / "ws"
    args = ["train", "--env", "trace-test/train-single-v0", "--model", "tiny", "--out", str(out), "--warm-start",
            "--sft-envs", DEMO_ENV, "--sft-seeds", "2", "--sft-steps", "2", "--set", "sft_batch_size=1", "--steps", "1", "--save-steps", "1",
            "--num-generations", "2", "--seeds-per-step", "1", "--lora-r", "4", "--lora-alpha", "8", "--lr", "0",
            "--max-new-tokens", "4", "--max-completion-length", "16", "--import", "tests.train.envs", "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["warm_start"]["demonstrations"] == 2 and summary["warm_start"]["steps"] == 2
    ws = out / "warm_start"
    assert (ws / "adapter_model.safetensors").exists() and (out / "adapter_model.safetensors").exists()
    # GRPO started from the warm start (with lr 0 it is kept exactly), not from a fresh LoRA
    before, after = adapter_weights(ws), adapter_weights(out)
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert any(float(v.abs().sum()) > 0 for k, v in before.items() if "lora_B" in k)  # trained: B is no longer 0
    manifest = json.loads((tmp_path / "adapters" / "manifest.json").read_text())["adapters"]
    assert [e["path"] for e in manifest] == [str(out)]
    entry = manifest[0]
    assert entry["warm_start"]["path"] == str(ws) and entry["warm_start"]["per_env"] == {DEMO_ENV: 2}
    assert entry["config"]["init_adapter"] == str(ws) and entry["steps"] == 1

    # resume: the finished warm start is reused and GRPO continues from its checkpoint
    created = json.loads((ws / "warm_start.json").read_text())["created"]
    assert main([*[a if a != "1" or i != args.index("--steps") + 1 else "2" for i, a in enumerate(args)], "--resume"]) == 0
    capsys.readouterr()
    assert json.loads((ws / "warm_start.json").read_text())["created"] == created
    assert json.loads((tmp_path / "adapters" / "manifest.json").read_text())["adapters"][0]["steps"] == 2
    # resuming with other warm-start settings is refused, naming them
    assert main([*args, "--resume", "--sft-lr", "0.5"]) == 2
    assert "sft_learning_rate" in capsys.readouterr().err


def test_warm_start_errors_are_clear(toolsandbox_data, tmp_path, capsys):
    from trace_gym.cli import main
    from trace_gym.train.sft import train_with_warm_start

    assert main(["sft", "--model", "tiny", "--out", str(tmp_path / "a")]) == 2
    assert "missing --sft-envs" in capsys.readouterr().err
    assert main(["sft", "--model", "tiny", "--out", str(tmp_path / "a"), "--sft-envs", DEMO_ENV, "--resume"]) == 2
    assert "no warm-start checkpoint" in capsys.readouterr().err
    assert main(["sft", "--model", "tiny", "--out", str(tmp_path / "a"), "--sft-envs", "trace/toolsandbox-v0"]) == 2
    assert "no reference solution" in capsys.readouterr().err
    assert main(["sft", "--model", "tiny", "--out", str(tmp_path / "a"), "--sft-envs", "nope/x-v0"]) == 2
    assert "unknown env" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="init_adapter"):
        train_with_warm_start(_cfg(tmp_path, "x", init_adapter=str(tmp_path)))
    with pytest.raises(ConfigError, match="sft_seeds_per_env"):
        _cfg(tmp_path, "x", sft_seeds_per_env=0).validate()
