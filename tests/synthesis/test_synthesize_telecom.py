"""``synthesize --domain telecom``: the telecom capabilities get their starter specs as templates."""

from __future__ import annotations

import yaml

from trace_gym.analysis.taxonomy import TAXONOMY, TELECOM_CAPABILITIES
from trace_gym.synthesis import synthesize
from trace_gym.synthesis.synthesize import _domain_tools, synthesis_domains


def _doc(selected):
    return {"format": "trace-gym/capabilities@1", "selected": selected, "candidates": [c.to_dict() for c in TAXONOMY]}


def test_telecom_capabilities_use_their_starters(tmp_path):
    assert "telecom" in synthesis_domains()
    names = [c.name for c in TELECOM_CAPABILITIES]
    out = synthesize(_doc([*names, "state-dependency"]), "telecom", tmp_path)
    by = {o.capability: o for o in out}
    for cap in TELECOM_CAPABILITIES:
        assert by[cap.name].status == "template" and by[cap.name].template == cap.starter_env, by[cap.name]
        spec = yaml.safe_load((tmp_path / f"syn-{cap.name}-telecom.yaml").read_text())
        assert spec["domain"] == "telecom" and spec["id"] == f"syn-{cap.name}-telecom"
    assert by["state-dependency"].status == "skipped" and "toolsandbox" in by["state-dependency"].reasons[0]


def test_drafts_are_told_the_users_device_tools():
    tools = _domain_tools("telecom")
    assert "enable_roaming" in tools and "calculate" not in tools
    assert any(t.startswith("toggle_airplane_mode (user's device") for t in tools)
    assert not any("user's device" in t for t in _domain_tools("retail"))


def test_cli_accepts_telecom(tmp_path):
    import json

    from trace_gym.cli import main

    caps = tmp_path / "capabilities.json"
    caps.write_text(json.dumps(_doc(["device-troubleshooting"])))
    assert main(["synthesize", str(caps), "--domain", "telecom", "--out", str(tmp_path / "envs")]) == 0
    assert (tmp_path / "envs" / "syn-device-troubleshooting-telecom.yaml").is_file()
