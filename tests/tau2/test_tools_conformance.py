"""Replay the public τ²-bench tool-call corpora (mock, airline, retail) and require 100 % agreement:
output content (exact, or first line for pydantic errors), error flag and the four DB hashes after
every call."""

from __future__ import annotations

import json

import pytest

from tests.corpora import corpus_dir
from trace_gym.tau2.tool_conformance import replay_sequence, replay_tool_corpus


def _corpus(domain: str):
    path = corpus_dir("tau2") / f"tools_{domain}.jsonl"
    assert path.is_file(), f"the corpus folder lacks {path.name}"
    return path


@pytest.mark.parametrize("domain", ["mock", "airline", "retail"])
def test_tool_corpus_agrees_fully(domain):
    path = _corpus(domain)
    agree, total, failures = replay_tool_corpus(path)
    shown = "\n".join(json.dumps(f)[:600] for f in failures[:5])
    assert total > 500
    assert agree == total, f"{domain}: {agree}/{total} agree; first failures:\n{shown}"


def test_replay_detects_a_wrong_recording():
    """The checker itself must fail when a recorded output or hash is altered."""
    path = _corpus("mock")
    seq = json.loads(path.read_text().splitlines()[0])
    agree, total, _ = replay_sequence(seq)
    assert agree == total
    seq["calls"][0]["output"]["content"] += "x"
    seq["calls"][-1]["db_hash"] = "0" * 64
    agree, total, failures = replay_sequence(seq)
    assert agree == total - 2
    assert {f["i"] for f in failures} == {seq["calls"][0]["i"], seq["calls"][-1]["i"]}
