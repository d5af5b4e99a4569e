"""``trace-gym conformance toolsandbox``: replaying the corpus and reporting agreement."""

from __future__ import annotations

import json

import pytest

from tests.corpora import corpus_dir
from trace_gym.toolsandbox.conformance import canonical_ids, run_conformance


@pytest.fixture(scope="module")
def corpus():
    return corpus_dir("toolsandbox")


def _sample(corpus, per_file=12):
    out = []
    for path in sorted(corpus.glob("*.jsonl")):
        with open(path) as fh:
            out += [json.loads(line) for _, line in zip(range(per_file), fh, strict=False)]
    return out


def _write(tmp_path, name, records):
    p = tmp_path / f"{name}.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records))
    return p


def test_public_file_agrees_fully(corpus, capsys):
    assert run_conformance([corpus / "single_tool_call_scenarios.jsonl"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "agreement: 79/79 (100.0%)"
    assert "single_tool_call_scenarios: 79/79" in out


def test_sample_of_every_source_agrees(corpus, tmp_path, capsys):
    records = _sample(corpus)
    assert run_conformance([_write(tmp_path, "sample", records)], verbose=True) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"agreement: {len(records)}/{len(records)} (100.0%)"


@pytest.mark.parametrize("tamper", ["content", "snapshot", "score", "exception", "turns"])
def test_disagreements_are_detected(corpus, tmp_path, capsys, tamper):
    good = [r for r in _sample(corpus, 40) if r["kind"] in ("oracle", "disallowed_tool")]
    rec = next(r for r in good if (r["kind"] == "disallowed_tool") == (tamper == "exception"))
    rec = json.loads(json.dumps(rec))
    if tamper == "content":
        rec["messages"][-3]["content"] += " (edited)"
    elif tamper == "snapshot":
        rec["db_snapshots"]["SETTING"][0]["rows"][0]["wifi"] = not rec["db_snapshots"]["SETTING"][0]["rows"][0]["wifi"]
    elif tamper == "score":
        rec["result"]["similarity"] = rec["result"]["similarity"] - 1e-3
    elif tamper == "exception":
        rec["result"]["exception"]["type"] = "ValueError"
    else:
        rec["result"]["turn_count"] += 1
    path = _write(tmp_path, "tampered", [rec, "not json"])
    path.write_text(path.read_text().replace('"not json"', "{broken"))
    assert run_conformance([path], verbose=True) == 1
    out = capsys.readouterr().out
    assert f"DIFF {rec['id']}" in out and "invalid JSON" in out
    assert out.strip().splitlines()[-1] == "agreement: 0/2 (0.0%)"


def test_generated_ids_are_compared_modulo_renaming():
    seeded = {"00000000-0000-0000-0000-000000000001"}
    a = canonical_ids(["11111111-1111-1111-1111-111111111111", "00000000-0000-0000-0000-000000000001",
                       "x 11111111-1111-1111-1111-111111111111"], seeded)
    b = canonical_ids(["22222222-2222-2222-2222-222222222222", "00000000-0000-0000-0000-000000000001",
                       "x 22222222-2222-2222-2222-222222222222"], seeded)
    assert a == b == ["<id0>", "00000000-0000-0000-0000-000000000001", "x <id0>"]
    assert canonical_ids(["<Expr ['a'] at 0x7F00AB>"], set()) == ["<Expr ['a'] at 0x?>"]


def test_cli_dispatch(corpus, capsys):
    from trace_gym.cli.conformance import _run

    class Args:
        suite = "toolsandbox"
        files = [str(corpus / "single_tool_call_scenarios.jsonl")]
        verbose = False

    assert _run(Args()) == 0
    assert capsys.readouterr().out.strip().endswith("(100.0%)")
