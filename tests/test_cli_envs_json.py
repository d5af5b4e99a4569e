"""``trace-gym envs --json``: one JSON object per registered id, family and domain from the registry."""

from __future__ import annotations

import json

from trace_gym.cli import main
from trace_gym.registration import ENTRIES, list_envs


def test_json_lines_with_family_and_domain(capsys):
    assert main(["envs", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == [i for i, _ in list_envs()]
    assert all({"id", "family", "domain", "title"} <= set(r) for r in rows)
    by_id = {r["id"]: r for r in rows}
    assert by_id["trace/tau2-retail-v0"]["family"] == "tau2" and by_id["trace/tau2-retail-v0"]["domain"] == "retail"
    assert by_id["trace/toolsandbox-v0"]["family"] == "toolsandbox"
    assert by_id["trace/toolsandbox-v0"]["domain"] == "toolsandbox"
    caps = [r for r in rows if r["family"] == "capability"]
    assert caps and all(r["domain"] for r in caps)
    assert by_id["trace/cap-refund-policy-v0"]["domain"] == "retail"
    assert by_id["trace/cap-precondition-verification-v0"]["domain"] == "airline"
    # every family and domain is the registry entry's own metadata
    entries = {e.id: e for e in ENTRIES}
    assert all((r["family"], r["domain"]) == (entries[r["id"]].family, entries[r["id"]].domain) for r in rows)
    assert {r["family"] for r in rows} >= {"tau2", "toolsandbox", "capability"}


def test_filter_and_synthesized_specs_carry_their_domain(tmp_path, capsys):
    from trace_gym.synthesis.register import register_spec_files
    from trace_gym.synthesis.synthesize import starter_specs_dir

    text = (starter_specs_dir() / "cap-refund-policy.yaml").read_text(encoding="utf-8")
    spec = tmp_path / "cap-json-listing-probe.yaml"
    spec.write_text(text.replace("id: cap-refund-policy", "id: cap-json-listing-probe", 1), encoding="utf-8")
    (env_id,) = register_spec_files([spec])
    assert main(["envs", "--json", "--filter", "json-listing-probe"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["id"] == env_id and row["family"] == "capability" and row["domain"] == "retail"
