"""The one policy factory: every spec form the command line's help texts list is a registered kind, and each
builds the policy its kind's constructor builds (scripted, a registered model, ``hf:`` a folder, a server,
the evaluation's ``base`` and ``adapter:NAME``); the front ends' factories are thin callers of it."""

from __future__ import annotations

import json

import pytest

from trace_gym.cli import build_parser
from trace_gym.eval.policies import EVAL_SPEC_HELP, resolve_policy
from trace_gym.policies import SPEC_HELP, PolicyKind, ScriptedPolicy, policy_from_spec, register_policy_kind
from trace_gym.policies.kinds import MODEL_KIND, model_policy_spec, policy_kind, spec_help, trainable
from trace_gym.policies.openai_compat import OpenAICompatPolicy


def _help_forms() -> dict[str, list[str]]:
    """``{command: forms}``: the spec forms each command's ``--policy`` (or synthesize's ``--calibrate``) lists."""
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    out = {}
    for name, p in sub.choices.items():
        for a in p._actions:
            if {"--policy", "--calibrate"} & set(a.option_strings) and a.help and "|" in a.help:
                out[name] = [f.strip() for f in a.help.removeprefix("repeatable:").split("|")]
    return out


BASELINES = {"reference", "noop", "refuse"}  # calibration's own, built by capabilities.calibrate.make_policy


def test_every_documented_spec_form_is_a_registered_kind():
    forms = _help_forms()
    assert {"rollout", "eval", "card", "calibrate"} <= set(forms)
    examples = {"FILE": "/x/s.txt", "MODEL_OR_PATH": "Org/model", "MODEL": "Org/model", "NAME": "cap-a",
                "URL#MODEL": "http://127.0.0.1:9/v1#m", "FILE.gguf": "/x/m.gguf", "[@WEIGHTS]": "@q8_0"}
    seen = set()
    for command, listed in forms.items():
        for form in listed:
            if form in BASELINES:
                assert command == "calibrate", f"{command} lists calibration's baseline {form}"
                continue
            spec = form
            for placeholder, value in examples.items():
                spec = spec.replace(placeholder, value)
            found = policy_kind(spec)
            assert found is not None, f"{command} --policy lists {form!r}, which no registered kind takes"
            seen.add(found[0].name)
    assert seen == {"scripted", "hf", MODEL_KIND, "llamacpp", "openai", "base", "adapter", "routed"}
    assert SPEC_HELP == spec_help("scripted", "hf", MODEL_KIND, "llamacpp", "openai")
    assert EVAL_SPEC_HELP.startswith(spec_help("base", "adapter", "routed"))


def test_scripted_and_server_specs_build_what_their_constructors_build(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("hi\nbye\n")
    built, direct = policy_from_spec(f"scripted:{f}"), ScriptedPolicy.from_file(f)
    assert (built.policy_id, built.act([], []), built.act([], [])) == (direct.policy_id, "hi", "bye")
    p = policy_from_spec("openai:http://127.0.0.1:9/v1#m", max_new_tokens=7, greedy=True, seed=3, device="cpu",
                         batch_size=None)
    q = OpenAICompatPolicy("http://127.0.0.1:9/v1", "m", max_tokens=7, temperature=0.0, seed=3)
    def settings(pol):
        return {k: v for k, v in vars(pol).items() if k != "client" and not k.startswith("_")}

    assert vars(p).keys() == vars(q).keys() and settings(p) == settings(q)
    with pytest.raises(ValueError, match="unknown policy spec 'nope'; expected scripted:FILE"):
        policy_from_spec("nope")


def test_model_specs_build_what_the_model_loaders_build(tmp_path):
    from tests.extras import need

    need("torch")
    from trace_gym.policies.hf import HFPolicy, tiny_test_model

    msgs = [{"role": "user", "content": "hello"}]
    opts = {"greedy": True, "max_new_tokens": 5, "device": "cpu", "seed": 0}
    by_name, direct = policy_from_spec("tiny", **opts), HFPolicy.registered("tiny", **opts)
    assert by_name.policy_id == direct.policy_id == "tiny"
    assert by_name.act(msgs, []) == direct.act(msgs, [])
    model, tok = tiny_test_model(0)
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    by_path = policy_from_spec(f"hf:{tmp_path / 'm'}", **opts)
    assert by_path.policy_id == HFPolicy.from_pretrained(str(tmp_path / "m"), **opts).policy_id
    assert by_path.act(msgs, []) == direct.act(msgs, [])
    assert model_policy_spec(str(tmp_path / "m")) == f"hf:{tmp_path / 'm'}" and model_policy_spec("tiny") == "tiny"
    assert [trainable(m) for m in ("tiny", "hf:x", "Org/model", "openai:u#m", "scripted:f", "llamacpp:smollm2")] \
        == [True, True, True, False, False, False]


def test_the_evaluation_kinds_build_the_base_model_and_its_adapters(tmp_path):
    from tests.extras import need

    need("peft")
    import peft
    import torch

    from trace_gym.policies.hf import tiny_test_model
    from trace_gym.route.policy import AdapterPolicy

    model, _ = tiny_test_model(seed=0)
    torch.manual_seed(1)
    peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                               init_lora_weights=False)).save_pretrained(str(tmp_path / "cap-a"))
    (tmp_path / "manifest.json").write_text(json.dumps({"adapters": [
        {"name": "cap-a", "path": "cap-a", "capability": "a", "env_id": "trace/cap-a-v0", "base_model": "tiny"}]}))
    gen = {"greedy": True, "max_new_tokens": 5, "device": "cpu"}
    base = resolve_policy("base", model="tiny", adapters=tmp_path, **gen)
    assert base.policy_id == "base:tiny"
    fixed = resolve_policy("adapter:cap-a", model="tiny", adapters=tmp_path, **gen)
    assert isinstance(fixed, AdapterPolicy) and fixed.policy_id == "adapter:cap-a" and fixed.active == "cap-a"
    plain = resolve_policy("tiny", model="ignored-for-plain-specs", adapters=tmp_path, **gen)
    assert plain.policy_id == "tiny"
    msgs = [{"role": "user", "content": "hello"}]
    assert base.act(msgs, []) == plain.act(msgs, [])
    with pytest.raises(ValueError, match="routed takes no argument"):
        resolve_policy("routed:x", model="tiny", adapters=tmp_path)
    with pytest.raises(FileNotFoundError, match="no router index"):
        resolve_policy("routed", model="tiny", adapters=tmp_path, **gen)


def test_a_kind_registers_once_and_takes_only_its_options():
    got = []
    kind = PolicyKind("test-echo", "test-echo:X", lambda rest, options: got.append((rest, options)) or
                      ScriptedPolicy([rest]), options=("seed",))
    register_policy_kind(kind)
    try:
        assert policy_from_spec("test-echo:hi", seed=4, device="cpu", greedy=None).act([], []) == "hi"
        assert got == [("hi", {"seed": 4})]
        with pytest.raises(ValueError, match="already registered"):
            register_policy_kind(kind)
        with pytest.raises(ValueError, match="without ':'"):
            register_policy_kind(PolicyKind("a:b", "a:b", kind.build))
    finally:
        from trace_gym.policies import kinds

        del kinds._KINDS["test-echo"]  # not a kind of the package
