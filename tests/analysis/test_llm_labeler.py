"""The LLM labeler on recorded SmolLM2-135M answers (tests/fixtures/record_llm_cassettes.py made them).

A 135M model rarely produces the requested JSON: this checks that malformed answers are
retried, then counted and reported as unlabeled pairs — never dropped silently — and
that replay is deterministic and offline.
"""

import json
from pathlib import Path

import pytest

from trace_gym.analysis.labelers.llm import LLMLabeler, extract_json, render_transcript
from trace_gym.llm import CassetteClient, CassetteMiss, ChatReply

from .llm_items import CAPS, ITEMS

CASSETTE = Path(__file__).parent.parent / "fixtures" / "llm_labeler_smollm2.jsonl"


def test_replayed_small_model_answers_are_accounted_for():
    client = CassetteClient(CASSETTE, "replay", model="smollm2")
    run = LLMLabeler(client, retries=1).label(ITEMS, CAPS, run=0, seed=0)
    pairs = {(lab.trajectory_id, lab.capability) for lab in run.labels} | set(run.unlabeled)
    assert pairs == {(i.trajectory_id, c.name) for i in ITEMS for c in CAPS}  # every pair labeled or reported
    assert run.malformed == len({t for t, _ in run.unlabeled})
    again = LLMLabeler(CassetteClient(CASSETTE, "replay", model="smollm2"), retries=1).label(ITEMS, CAPS, run=0, seed=0)
    assert again.to_dict() == run.to_dict()
    recorded = [json.loads(line)["response"] for line in CASSETTE.read_text().splitlines()]
    assert recorded and all(isinstance(r, str) for r in recorded)


def test_unknown_request_in_replay_is_an_error():
    client = CassetteClient(CASSETTE, "replay", model="smollm2")
    with pytest.raises(CassetteMiss, match="no recorded answer"):
        LLMLabeler(client, retries=0).label(ITEMS, CAPS, run=0, seed=12345)


class Scripted:
    """A chat client that answers from a list (to test the retry protocol precisely)."""

    model = "scripted"

    def __init__(self, answers):
        self.answers, self.seen = list(answers), []

    def chat(self, messages, *, tools=None, seed=None, temperature=None, max_tokens=None):
        self.seen.append(messages)
        return ChatReply(self.answers.pop(0))


def test_retry_feedback_then_valid_answer():
    good = json.dumps({"labels": [{"capability": c.name, "label": "LACKING", "turn": 1, "evidence": "no confirmation"} for c in CAPS]})
    client = Scripted(['{"labels": [{"capability": "confirmation-before-write", "label": "MAYBE"}]}', "```json\n" + good + "\n```"])
    run = LLMLabeler(client, retries=1).label(ITEMS[1:], CAPS, run=0, seed=0)
    assert run.malformed == 0 and len(run.labels) == 2
    assert "not usable" in client.seen[1][-1]["content"]
    assert run.labels[0].evidence[0].turn == 1


def test_extract_json_and_transcript_rendering():
    assert extract_json('<think>x</think>Sure: {"a": 1} trailing') == {"a": 1}
    with pytest.raises(ValueError):
        extract_json("no json here")
    text = render_transcript(ITEMS[0].messages)
    assert "[3] assistant calls: cancel_pending_order" in text
