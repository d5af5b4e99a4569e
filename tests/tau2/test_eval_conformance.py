"""The evaluator against tau2 1.0.1's recorded scores (every public eval corpus) and the CLI runner."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.corpora import corpus_dir


def _corpus(name: str) -> Path:
    path = corpus_dir("tau2") / name
    assert path.is_file(), f"the corpus folder lacks {name}"
    return path


@pytest.mark.slow
@pytest.mark.parametrize("domain", ["mock", "airline", "retail", "telecom"])
def test_every_public_eval_record_agrees(domain):
    from trace_gym.tau2.conformance import replay_eval_corpus

    counts, failures = replay_eval_corpus(_corpus(f"eval_{domain}.jsonl"))
    assert failures == [], failures[:3]
    agree, total = counts[domain]
    assert total > 0 and agree == total


def test_run_conformance_prints_agreement_and_exit_code(tmp_path):
    from trace_gym.tau2.conformance import run_conformance

    path = _corpus("eval_mock.jsonl")
    out = io.StringIO()
    assert run_conformance([str(path)], out=out) == 0
    lines = out.getvalue().strip().splitlines()
    assert lines[-1] == "agreement: 55/55 (100.0%)"
    assert any(line.startswith("eval:mock: 55/55") for line in lines)

    # A record whose expected reward was tampered with must disagree and fail the run.
    records = [json.loads(x) for x in path.read_text().splitlines()[:3]]
    records[0]["expected"]["reward"] = 0.5
    records[0]["expected"]["reward_info"]["reward"] = 0.5
    bad = tmp_path / "eval_mock.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    out = io.StringIO()
    assert run_conformance([str(bad)], verbose=True, out=out) == 1
    text = out.getvalue()
    assert "DISAGREE" in text and "reward" in text
    assert text.strip().splitlines()[-1] == "agreement: 2/3 (66.7%)"


def test_run_conformance_delegates_tool_corpora_and_reports_missing_files(tmp_path):
    from trace_gym.tau2.conformance import run_conformance

    path = _corpus("tools_mock.jsonl")
    out = io.StringIO()
    assert run_conformance([str(path)], out=out) == 0
    assert out.getvalue().strip().splitlines()[-1].startswith("agreement: 538/538")
    out = io.StringIO()
    assert run_conformance([str(tmp_path / "nope.jsonl")], out=out) == 1
    assert "no such file" in out.getvalue()


def test_unreadable_record_counts_as_disagreement(tmp_path):
    from trace_gym.tau2.conformance import run_conformance

    _corpus("eval_mock.jsonl")
    bad = tmp_path / "eval_x.jsonl"
    bad.write_text("{not json\n")
    out = io.StringIO()
    assert run_conformance([str(bad)], out=out) == 1
    assert out.getvalue().strip().splitlines()[-1] == "agreement: 0/1 (0.0%)"
