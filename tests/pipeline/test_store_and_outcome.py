"""One success rule, one pass^k, one stage store: each asked to do its job and to refuse what it should."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from trace_gym.core.outcome import TOLERANCE, is_success, success_threshold
from trace_gym.eval.metrics import pass_hat_k, task_pass_hat_k
from trace_gym.pipeline import StageOutput, StageStore


def test_is_success_is_reward_at_threshold_within_tolerance():
    assert is_success(1.0) and is_success(1.0 - TOLERANCE / 2) and not is_success(1.0 - 2 * TOLERANCE)
    assert is_success(True) and not is_success(False) and not is_success(None)
    assert is_success(0.75, 0.7) and not is_success(0.65, 0.7)


def test_an_env_declares_its_threshold():
    class Graded:
        success_threshold = 0.8

    class Wrapper:
        unwrapped = Graded()

    assert success_threshold(Wrapper()) == 0.8 and success_threshold(object()) == 1.0


def test_one_pass_hat_k_for_booleans_and_rewards():
    from trace_gym.tau2 import evaluator

    assert not hasattr(evaluator, "pass_hat_k") and evaluator.is_success is is_success  # pass^k: eval.metrics only
    assert pass_hat_k({"a": [1.0, 0.9999999, 0.5]}, 1) == pytest.approx(2 / 3)
    assert pass_hat_k([[0.85, 0.85]], 2, threshold=0.8) == 1.0 and pass_hat_k([[0.85, 0.85]], 2) == 0.0
    assert task_pass_hat_k([True, 0.0, 1], 2) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="positive integer"):
        task_pass_hat_k([True], True)


@dataclass
class Found(StageOutput):
    path: str
    items: list[int] = field(default_factory=list)

    def artifacts(self) -> list[str]:
        return [self.path]


def test_a_finished_stage_is_skipped_and_its_typed_result_loaded(tmp_path):
    art = tmp_path / "made.txt"
    calls = []

    def work() -> Found:
        calls.append(1)
        art.write_text("x")
        return Found(str(art), [1, 2])

    first = StageStore(tmp_path, fingerprint={"n": 1})
    assert first.run("one", work, Found) == Found(str(art), [1, 2]) and first.ran == ["one"]
    again = StageStore(tmp_path, fingerprint={"n": 1})
    res = again.run("one", work, Found)
    assert isinstance(res, Found) and res.items == [1, 2] and again.skipped == ["one"] and len(calls) == 1
    assert again.records["one"].resumed and again.records["one"].artifacts == [str(art)]
    record = json.loads((tmp_path / "stages" / "one.json").read_text())
    assert record["result"] == {"path": str(art), "items": [1, 2]} and record["fingerprint"] == {"n": 1}


def test_changed_settings_or_missing_artifacts_run_the_stage_again(tmp_path):
    art = tmp_path / "made.txt"
    why = []

    def work() -> Found:
        art.write_text("x")
        return Found(str(art))

    StageStore(tmp_path, fingerprint={"n": 1}).run("one", work, Found)
    changed = StageStore(tmp_path, fingerprint={"n": 2}, log=why.append)
    changed.run("one", work, Found)
    assert changed.ran == ["one"] and "settings changed since the last run: n" in why[-1]
    art.unlink()
    gone = StageStore(tmp_path, fingerprint={"n": 2}, log=why.append)
    gone.run("one", work, Found)
    assert gone.ran == ["one"] and "artifacts missing" in why[-1]
    assert StageStore(tmp_path).done("one")  # a store without a fingerprint accepts any settings


def test_a_killed_stage_leaves_no_record(tmp_path):
    def dies() -> dict:
        raise KeyboardInterrupt

    store = StageStore(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        store.run("one", dies)
    assert not store.path("one").exists() and not store.done("one")
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "two.json").write_text("{not json")
    assert store.lookup("two")[0] is None and "unreadable" in store.lookup("two")[1]
    assert store.run("two", lambda: {"ok": 1}) == {"ok": 1}  # a torn record is replaced
