import json

import yaml

from trace_gym.analysis.taxonomy import TAXONOMY
from trace_gym.llm import CassetteClient, ChatReply, request_key
from trace_gym.synthesis import synthesize
from trace_gym.synthesis.synthesize import spec_id_for


def _doc(selected):
    return {"format": "trace-gym/capabilities@1", "selected": selected, "candidates": [c.to_dict() for c in TAXONOMY]}


def test_templates_offline_and_reasons_for_the_rest(tmp_path):
    out = synthesize(_doc(["refund-policy-compliance", "precondition-verification", "information-communication"]), "retail", tmp_path)
    by = {o.capability: o for o in out}
    assert by["refund-policy-compliance"].status == "template"
    assert by["refund-policy-compliance"].template == "cap-refund-policy"
    spec = yaml.safe_load((tmp_path / "syn-refund-policy-compliance-retail.yaml").read_text())
    assert spec["id"] == "syn-refund-policy-compliance-retail" and spec["domain"] == "retail"
    assert by["precondition-verification"].status == "skipped"
    assert "airline" in by["precondition-verification"].reasons[0]
    assert by["information-communication"].status == "skipped"
    assert "no starter template" in by["information-communication"].reasons[0]
    report = json.loads((tmp_path / "_synthesis.json").read_text())
    assert [o["status"] for o in report["outcomes"]] == ["template", "skipped", "skipped"]
    # resume: an existing spec is kept
    again = synthesize(_doc(["refund-policy-compliance"]), "retail", tmp_path)
    assert again[0].status == "kept"


def test_synthesized_spec_is_a_working_env(tmp_path, tau2_data):
    import gymnasium as gym

    from trace_gym.synthesis.register import register_spec_files

    out = synthesize(_doc(["multi-step-completion"]), "retail", tmp_path)
    (env_id,) = register_spec_files([tmp_path / f"{out[0].spec_id}.yaml"])
    assert env_id == "trace/syn-multi-step-completion-retail-v0"
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    assert info["tools"] and isinstance(obs, str)


def test_llm_drafts_are_validated_and_rejections_reported(tmp_path):
    # A replay client whose recorded answers are invalid drafts: synthesis must reject them with reasons.
    from trace_gym.synthesis import synthesize as synth

    class Recorder:
        model = "fixture"

        def __init__(self):
            self.n = 0

        def chat(self, messages, *, tools=None, seed=None, temperature=None, max_tokens=None):
            self.n += 1
            return ChatReply(["not json at all", '{"id": "x", "title": "t"}', '{"capability": 3}'][min(self.n - 1, 2)])

    cas = tmp_path / "cassette.jsonl"
    rec = CassetteClient(cas, "record", Recorder(), model="fixture")
    out = synth(_doc(["information-communication"]), "retail", tmp_path / "a", client=rec, retries=2)
    assert out[0].status == "rejected"
    assert any("not JSON" in r for r in out[0].reasons)
    assert len(out[0].reasons) == 4  # why no template + 3 rejected drafts
    # replaying the cassette reproduces the same outcome without the model
    replay = CassetteClient(cas, "replay", model="fixture")
    again = synth(_doc(["information-communication"]), "retail", tmp_path / "b", client=replay, retries=2)
    assert again[0].reasons == out[0].reasons
    assert request_key("fixture", [{"role": "user", "content": "x"}], 0, 0.7) != request_key("fixture", [{"role": "user", "content": "x"}], 1, 0.7)


def test_spec_ids():
    assert spec_id_for("Refund policy / compliance", "retail") == "syn-refund-policy-compliance-retail"


def test_cli_synthesize_registers_and_calibrates(tmp_path, tau2_data):
    from trace_gym.cli import main

    caps = tmp_path / "capabilities.json"
    caps.write_text(json.dumps(_doc(["refund-policy-compliance"])))
    rc = main(["synthesize", str(caps), "--domain", "retail", "--out", str(tmp_path / "envs"),
               "--calibrate", "reference", "--seeds", "2", "--samples", "1"])
    assert rc == 0
    cal = json.loads((tmp_path / "envs" / "syn-refund-policy-compliance-retail.calibration.json").read_text())
    assert cal["summary"]["mean_reward"] == 1.0 and cal["summary"]["episodes"] == 2


def test_cli_synthesize_clamps_difficulty_overrides_per_spec(tmp_path, capsys, tau2_data):
    from trace_gym.cli import main

    caps = tmp_path / "capabilities.json"
    caps.write_text(json.dumps(_doc(["multi-step-completion"])))
    rc = main(["synthesize", str(caps), "--domain", "retail", "--out", str(tmp_path / "envs"),
               "--calibrate", "reference", "--seeds", "1", "--samples", "1",
               "--difficulty", "max_steps=12", "--difficulty", "no_such_knob=3"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "max_steps=12 is outside [24, 80]; using 24" in " ".join(out.split())
    assert "no knob 'no_such_knob'" in out
    cal = json.loads((tmp_path / "envs" / "syn-multi-step-completion-retail.calibration.json").read_text())
    assert cal["difficulty"]["max_steps"] == 24 and cal["summary"]["mean_reward"] == 1.0
