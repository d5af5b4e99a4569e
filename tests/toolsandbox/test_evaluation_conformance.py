"""The scorer alone against every public conformance record (``messages`` + ``db_snapshots``).

Similarities must match upstream within 1e-6, turn counts and milestone mappings exactly.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.corpora import corpus_files, missing
from trace_gym.toolsandbox.conformance import score_corpus, score_record
from trace_gym.toolsandbox.scenarios import load_scenarios

FILES = corpus_files("toolsandbox")


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.skipif(not FILES, reason=missing("toolsandbox"))
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_public_record_is_reproduced(path: Path) -> None:
    scenarios = load_scenarios()
    records = _records(path)
    failures = []
    elapsed = []
    for record in records:
        check = score_record(record, scenarios, tolerance=1e-6)
        elapsed.append(check.seconds)
        if not check.ok:
            failures.append(f"{check.record_id}: {'; '.join(check.problems)}")
        # the mapping must be the exact one upstream reports, index for index
        if check.result is not None and not record["result"]["exception"]:
            want = {int(k): v[0] for k, v in record["result"]["milestone_mapping"].items()}
            assert {k: v[0] for k, v in check.result.milestone_mapping.items()} == want, record["id"]
    assert not failures, "\n".join(failures[:20])
    assert len(records) > 50
    print(f"{path.stem}: {len(records)} records, {1000 * sum(elapsed) / len(records):.2f} ms per evaluation")


@pytest.mark.skipif(not FILES, reason=missing("toolsandbox"))
def test_score_corpus_counts_and_reports_disagreements(tmp_path: Path) -> None:
    records = _records(FILES[0])[:6]
    agree, total, failures = score_corpus([FILES[0]])
    assert total == len(_records(FILES[0])) and agree == total and failures == []

    tampered = copy.deepcopy(records)
    tampered[0]["result"]["similarity"] = tampered[0]["result"]["similarity"] + 0.01
    tampered[1]["result"]["turn_count"] += 1
    tampered[2]["result"]["milestone_mapping"] = {"0": [999, 1.0]}
    path = tmp_path / "tampered.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in tampered) + "\n{broken\n", encoding="utf-8")
    agree, total, failures = score_corpus([path, tmp_path / "missing.jsonl"])
    assert (agree, total) == (3, 8)
    assert failures[0].startswith(f"{tampered[0]['id']}: similarity: expected")
    assert "turn_count" in failures[1] and "milestone_mapping" in failures[2]
    assert "not a JSON record" in failures[3] and "no such file" in failures[4]
