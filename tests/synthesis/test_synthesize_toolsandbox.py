"""``synthesize --domain toolsandbox``: the ToolSandbox behaviours get their starter specs as templates."""

from __future__ import annotations

import gymnasium as gym
import pytest
import yaml

from trace_gym.analysis.taxonomy import TAXONOMY, TOOLSANDBOX_CAPABILITIES
from trace_gym.synthesis import synthesize
from trace_gym.synthesis.synthesize import synthesis_domains


def _doc(selected):
    return {"format": "trace-gym/capabilities@1", "selected": selected, "candidates": [c.to_dict() for c in TAXONOMY]}


def test_domains_come_from_the_registry():
    from trace_gym.capabilities.domains import DOMAIN_FACTORIES

    assert synthesis_domains() == sorted(DOMAIN_FACTORIES) and "toolsandbox" in synthesis_domains()
    with pytest.raises(ValueError, match="unknown domain"):
        synthesize(_doc([]), "no-such-domain", "unused")


def test_toolsandbox_behaviours_use_their_starters(toolsandbox_data, tmp_path):
    names = [c.name for c in TOOLSANDBOX_CAPABILITIES]
    out = synthesize(_doc([*names, "refund-policy-compliance"]), "toolsandbox", tmp_path)
    by = {o.capability: o for o in out}
    for cap in TOOLSANDBOX_CAPABILITIES:
        assert by[cap.name].status == "template" and by[cap.name].template == cap.starter_env, by[cap.name]
        spec = yaml.safe_load((tmp_path / f"syn-{cap.name}-toolsandbox.yaml").read_text())
        assert spec["domain"] == "toolsandbox" and spec["id"] == f"syn-{cap.name}-toolsandbox"
    # a retail starter is no template for ToolSandbox, and the reason says so
    assert by["refund-policy-compliance"].status == "skipped" and "retail" in by["refund-policy-compliance"].reasons[0]


def test_a_synthesized_toolsandbox_spec_is_a_working_env(toolsandbox_data, tmp_path):
    from trace_gym.synthesis.register import register_spec_files

    out = synthesize(_doc(["state-dependency"]), "toolsandbox", tmp_path)
    (env_id,) = register_spec_files([tmp_path / f"{out[0].spec_id}.yaml"])
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and info["tools"]


def test_cli_accepts_toolsandbox(toolsandbox_data, tmp_path):
    import json

    from trace_gym.cli import main

    caps = tmp_path / "capabilities.json"
    caps.write_text(json.dumps(_doc(["multiple-user-turn"])))
    assert main(["synthesize", str(caps), "--domain", "toolsandbox", "--out", str(tmp_path / "envs")]) == 0
    assert (tmp_path / "envs" / "syn-multiple-user-turn-toolsandbox.yaml").is_file()
