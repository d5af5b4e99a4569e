"""The classifier router against label scores recorded from the real SmolLM2-135M-Instruct.

``tests/fixtures/classifier_router_smollm2.json`` holds, for four requests, the label
log-probability scores SmolLM2 gave and the route it chose.  Replaying the scores checks
the decision rule offline; recomputing them with the real model (when installed) checks
that the scoring still reproduces the recording.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.extras import need, need_smollm2

torch = need("torch")

from trace_gym.policies.hf import load_smollm2, tiny_test_model  # noqa: E402
from trace_gym.route.classifier import ClassifierRouter  # noqa: E402

RECORD = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "classifier_router_smollm2.json").read_text())


def test_replayed_scores_give_the_recorded_routes(monkeypatch):
    model, tok = tiny_test_model(seed=0)
    router = ClassifierRouter(model, tok, labels=RECORD["labels"])
    table = {r["query"]: r["scores"] for r in RECORD["records"]}
    monkeypatch.setattr(router, "scores", lambda query, tools=None: dict(table[query]))
    for r in RECORD["records"]:
        assert router.route([{"role": "user", "content": r["query"]}]) == r["route"]


@pytest.mark.model
def test_real_smollm2_reproduces_the_recorded_scores():
    need_smollm2()
    model, tok = load_smollm2()
    router = ClassifierRouter(model, tok, labels=RECORD["labels"])
    for r in RECORD["records"]:
        got = router.scores(r["query"])
        assert set(got) == set(r["scores"])
        for label, want in r["scores"].items():
            assert got[label] == pytest.approx(want, abs=1e-3)
        assert router.route([{"role": "user", "content": r["query"]}]) == r["route"]
