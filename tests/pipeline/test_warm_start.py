"""The format warm start in front of the TRACE loop (:mod:`trace_gym.pipeline.warm`) with the tiny model:
it trains on reference episodes, merges the LoRA into a plain model folder, is reused with the same settings
and refused with other ones; its default envs come from the registry."""

from __future__ import annotations

import io
import json

import pytest

from tests.extras import need, need_smollm2

torch = need("torch")
need("trl")
need("peft")

from trace_gym.pipeline.warm import (  # noqa: E402
    ADAPTER_DIR,
    MODEL_DIR,
    RECORD,
    WarmStartMismatch,
    WarmStartSettings,
    domain_capability_envs,
    run_warm_start,
)

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("one_torch_thread")]

DEMO_ENV = "trace/cap-ts-state-dependency-v0"


def _settings(**kw):
    base = dict(model="tiny", envs=[DEMO_ENV], seeds_per_env=2, steps=3, learning_rate=2e-2, seed=3, lora_r=4,
                lora_alpha=8, batch_size=2)
    base.update(kw)
    return WarmStartSettings(**base)


def _tiny_tokenizer_or_skip():

    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer


def test_default_envs_are_the_builtin_capability_envs_of_the_targets_domain(tmp_path):
    from trace_gym.capabilities.entries import spec_files
    from trace_gym.registration import env_records
    from trace_gym.synthesis.register import register_spec_files

    rows = {r["id"]: r for r in env_records()}
    builtin = {f"trace/{p.stem}-v0" for p in spec_files()}  # other tests in this process may register synthesized ones
    ts = domain_capability_envs("trace/toolsandbox-v0")
    assert ts and all(rows[e]["family"] == "capability" and rows[e]["domain"] == "toolsandbox" for e in ts)
    assert set(ts) == {i for i, r in rows.items() if i in builtin and r["family"] == "capability" and r["domain"] == "toolsandbox"}
    retail = domain_capability_envs("trace/tau2-retail-v0")
    assert retail and not set(retail) & set(ts) and all(rows[e]["domain"] == "retail" for e in retail)
    # a capability env registered at run time (a synthesized spec) is no format demonstration
    spec = (tmp_path / "ws-probe-synth.yaml")
    src = next(p for p in spec_files() if p.stem == "cap-ts-state-dependency")
    spec.write_text(src.read_text(encoding="utf-8").replace("id: cap-ts-state-dependency", "id: ws-probe-synth", 1),
                    encoding="utf-8")
    [new] = register_spec_files([spec])
    assert {r["id"]: r for r in env_records()}[new]["domain"] == "toolsandbox"
    assert domain_capability_envs("trace/toolsandbox-v0") == ts
    with pytest.raises(ValueError, match="not a registered"):
        domain_capability_envs("trace/nope-v0")


def test_bad_settings_are_refused_before_anything_is_written(tmp_path):
    for bad, match in ((dict(envs=[]), "at least one env"), (dict(steps=0), "steps"), (dict(learning_rate=0.0), "learning_rate"),
                       (dict(seeds_per_env=True), "seeds_per_env")):
        with pytest.raises(ValueError, match=match):
            run_warm_start(_settings(**bad), tmp_path / "ws")
    assert not (tmp_path / "ws").exists()


def test_warm_start_merges_into_a_plain_model_folder_and_is_reused(tmp_path):
    from rich.console import Console
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trace_gym.policies.hf import tiny_test_model
    from trace_gym.progress import reporting
    from trace_gym.train.chat import ChatRenderer
    from trace_gym.train.demos import build_demonstrations, tokenize_demonstration
    from trace_gym.train.sft import demo_loss

    _tiny_tokenizer_or_skip()
    folder = tmp_path / "ws"
    buf = io.StringIO()
    with reporting(Console(file=buf, width=100), live=False):
        ws = run_warm_start(_settings(), folder)
    assert "warm start: SFT on 1 env(s)" in buf.getvalue()  # a progress line
    assert not ws.reused and ws.steps == 3 and ws.demonstrations == 2 and ws.envs == [DEMO_ENV]
    assert ws.loss_after < ws.loss_before
    rec = json.loads((folder / RECORD).read_text())
    assert rec["settings"] == _settings().to_dict() and rec["per_env"] == {DEMO_ENV: 2} and rec["seconds"] > 0
    assert all(t.startswith(DEMO_ENV + "#") for t in rec["tasks"])
    model_dir = folder / MODEL_DIR
    assert model_dir == type(model_dir)(ws.model)
    assert not (model_dir / "adapter_config.json").exists() and (folder / ADAPTER_DIR / "adapter_config.json").exists()
    assert not list(folder.glob(".*.tmp"))

    # the folder is a plain model: it loads without PEFT and carries the trained weights (its loss is the SFT's)
    merged = AutoModelForCausalLM.from_pretrained(str(model_dir))
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    assert not hasattr(merged, "peft_config")
    demos = build_demonstrations([DEMO_ENV], 2, seed=3).demos
    rows = [tokenize_demonstration(ChatRenderer(tok), d) for d in demos]
    assert demo_loss(merged, rows) == pytest.approx(ws.loss_after, rel=1e-3)
    base, _ = tiny_test_model(seed=3)
    assert demo_loss(base, rows) == pytest.approx(ws.loss_before, rel=1e-3)

    # same settings: reused as it is, nothing trained again
    again = run_warm_start(_settings(), folder)
    assert again.reused and again.model == ws.model and again.seconds == ws.seconds
    assert json.loads((folder / RECORD).read_text())["created"] == rec["created"]
    # other settings: a clear error naming them, the folder untouched
    with pytest.raises(WarmStartMismatch, match=r"learning_rate, steps changed"):
        run_warm_start(_settings(steps=4, learning_rate=1e-2), folder)
    assert json.loads((folder / RECORD).read_text()) == rec
