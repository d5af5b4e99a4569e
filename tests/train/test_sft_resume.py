"""A warm start checkpoints every ``save_steps`` and, interrupted, resumes to the uninterrupted result."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.extras import need

torch = need("torch")
need("trl")
need("peft")

from tests.helpers_adapters import adapter_weights  # noqa: E402
from tests.train.test_warm_start import DEMO_ENV, _cfg  # noqa: E402
from trace_gym.train.config import ConfigError  # noqa: E402
from trace_gym.train.demos import build_demonstrations  # noqa: E402

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def demos():
    return build_demonstrations([DEMO_ENV], 2, start=3).demos


class _Interrupt(Exception):
    pass


def _same_adapter(a, b):
    wa, wb = adapter_weights(a), adapter_weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-6)


def _record(folder):
    rec = json.loads((folder / "warm_start.json").read_text())
    return {k: rec[k] for k in ("steps", "demonstrations", "loss_before", "loss_after", "trained_tokens")}


def test_an_interrupted_warm_start_resumes_exactly(tmp_path, demos):
    from transformers import TrainerCallback

    from trace_gym.policies.hf_models import tiny_test_model
    from trace_gym.train.sft import warm_start

    def run(name, **kw):
        model, tok = tiny_test_model(seed=3)
        cfg = _cfg(tmp_path, name, env_id="", save_steps=1, sft_max_steps=3, sft_batch_size=1)
        return warm_start(cfg, model=model, tokenizer=tok, demos=demos, manifest=False, **kw)

    full = run("full")
    assert sorted(p.name for p in (full.out / "checkpoints").glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]  # save_total_limit 2

    class StopAfterSecondSave(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == 2:
                raise _Interrupt

    with pytest.raises(_Interrupt):
        run("resumed", callbacks=[StopAfterSecondSave()])
    out = tmp_path / "adapters" / "resumed"
    assert not (out / "warm_start.json").exists() and (out / "checkpoints" / "checkpoint-2").is_dir()
    resumed = run("resumed", resume=True)
    assert resumed.steps == full.steps == 3
    _same_adapter(full.out, resumed.out)
    assert _record(resumed.out) == pytest.approx(_record(full.out), rel=1e-4)
    rows = [json.loads(x) for x in (resumed.out / "sft_metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]  # the rows logged before the interruption, then the rest

    # resuming with settings that change the result is refused, naming them
    model, tok = tiny_test_model(seed=3)
    with pytest.raises(ConfigError, match="sft_learning_rate"):
        warm_start(_cfg(tmp_path, "resumed", env_id="", save_steps=1, sft_max_steps=3, sft_batch_size=1, sft_learning_rate=0.5),
                   model=model, tokenizer=tok, demos=demos, manifest=False, resume=True)


def test_sft_command_honours_save_steps_and_resume(toolsandbox_data, tmp_path, capsys):
    from trace_gym.cli import main

    def args(out):
        return ["sft", "--model", "tiny", "--out", str(out), "--sft-envs", DEMO_ENV, "--sft-seeds", "2", "--sft-steps", "3",
                "--set", "sft_batch_size=1", "--save-steps", "1", "--lora-r", "4", "--lora-alpha", "8", "--seed", "3",
                "--no-progress", "--json"]

    full, cut = tmp_path / "adapters" / "full", tmp_path / "adapters" / "cut"
    assert main(args(full)) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 3
    assert sorted(p.name for p in (full / "checkpoints").glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]
    # the same run killed right after its step-2 checkpoint: what it had written by then
    assert main(args(cut)) == 0
    capsys.readouterr()
    shutil.rmtree(cut / "checkpoints" / "checkpoint-3")
    for name in ("adapter_model.safetensors", "adapter_config.json", "warm_start.json"):
        (cut / name).unlink()
    assert main([*args(cut), "--resume"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 3
    _same_adapter(full, cut)
    assert _record(cut) == pytest.approx(_record(full), rel=1e-4)
    # other settings than the checkpointed run's: one error line naming them
    assert main([*args(cut), "--resume", "--sft-lr", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "sft_learning_rate" in err
