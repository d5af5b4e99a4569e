"""Telecom against the recorded τ² 1.0.1 corpus: every public tool-call sequence and every task start.

A call agrees when its content matches (exactly, or on the first line where the record
says ``compare: first_line``), its error flag matches, and all four DB hashes after the
call equal the recorded ones.  Bill ids that τ² drew from ``uuid4()`` are fed back
through the environment's injectable id source (``injected_uuid4_hex``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from tests.corpora import corpus_dir, find_corpus_dir
from trace_gym.tau2.data import load_tasks
from trace_gym.tau2.engine import Tau2Environment, corpus_uuid_source

HASH_KEYS = ("db_hash", "user_db_hash", "db_canonical_sha256", "user_db_canonical_sha256")
PUBLIC_SEQUENCES = 24
PUBLIC_CALLS = 732


def _conformance_dir() -> Path | None:
    return find_corpus_dir("tau2")


@lru_cache(maxsize=1)
def _sequences() -> tuple[dict[str, Any], ...]:
    folder = _conformance_dir()
    if folder is None or not (folder / "tools_telecom.jsonl").is_file():
        return ()
    with (folder / "tools_telecom.jsonl").open(encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


@lru_cache(maxsize=1)
def _tasks() -> dict[str, dict[str, Any]]:
    return {t["id"]: t for t in load_tasks("telecom")}


def _need_data() -> None:
    if not _sequences():
        folder = corpus_dir("tau2")  # skips, naming the corpora, when they are not on this machine
        raise AssertionError(f"{folder} lacks tools_telecom.jsonl")


def _injected_source(seq: dict[str, Any]) -> Callable[[], str]:
    """Return the recorded uuid4 hex values in the order the sequence consumed them."""
    recorded: Iterator[str] = iter([h for c in seq["calls"] for h in c.get("injected_uuid4_hex") or []])

    def next_hex() -> str:
        value = next(recorded, None)
        if value is None:
            raise AssertionError(f"{seq['sequence_id']}: more uuid4 draws than the corpus recorded")
        return value

    return next_hex


def _start(seq: dict[str, Any], uuid_source: Callable[[], str] | None) -> Tau2Environment:
    env = Tau2Environment("telecom", solo_mode=bool(seq["solo_mode"]), uuid_source=uuid_source)
    assert seq["start"]["kind"] == "task_initial_state"
    state = _tasks()[seq["start"]["task_id"]]["initial_state"]
    env.set_state(state.get("initialization_data"), state.get("initialization_actions"), state.get("message_history") or [])
    return env


def _replay(seq: dict[str, Any], uuid_source: Callable[[], str] | None) -> list[str]:
    """Replay one sequence; return a description of every disagreement (empty: 100 %)."""
    env = _start(seq, uuid_source)
    problems = []
    start = env.hashes()
    for k in HASH_KEYS:
        if start[k] != seq["initial_state_hashes"][k]:
            problems.append(f"start: {k}")
    for call in seq["calls"]:
        res = env.get_response(call["name"], call["arguments"], call["requestor"], call["tool_call_id"])
        want = call["output"]
        got_text, want_text = res.content, want["content"]
        if call["compare"] == "first_line":
            got_text, want_text = got_text.split("\n", 1)[0], want_text.split("\n", 1)[0]
        where = f"{seq['sequence_id']}#{call['i']} {call['name']}({call['arguments']}) by {call['requestor']}"
        if got_text != want_text:
            problems.append(f"{where}: content {res.content!r} != {want['content']!r}")
        if res.error != want["error"]:
            problems.append(f"{where}: error flag {res.error} != {want['error']}")
        hashes = env.hashes()
        problems.extend(f"{where}: {k}" for k in HASH_KEYS if hashes[k] != call[k])
    return problems


@pytest.mark.parametrize("index", range(PUBLIC_SEQUENCES))
def test_public_sequence_agrees(index: int) -> None:
    _need_data()
    seq = _sequences()[index]
    assert _replay(seq, _injected_source(seq)) == []


def test_whole_public_corpus_is_covered() -> None:
    _need_data()
    seqs = _sequences()
    assert len(seqs) == PUBLIC_SEQUENCES
    assert sum(len(s["calls"]) for s in seqs) == PUBLIC_CALLS
    # The replays above cover the uuid4 path, solo mode and both requestors.
    assert any("uuid4_injected" in s["tags"] for s in seqs)
    assert any(s["solo_mode"] for s in seqs)


def test_default_id_source_reproduces_the_corpus_without_injection() -> None:
    """The engine's default id source is the corpus' deterministic uuid4 replacement."""
    _need_data()
    injected = [s for s in _sequences() if "uuid4_injected" in s["tags"]]
    assert injected
    for seq in injected:
        assert _replay(seq, None) == []
    source = corpus_uuid_source()
    assert source()[:8] == "bf2c0b2e" and source()[:8] == "b0addab5"


def test_a_different_id_source_changes_only_the_new_bill_id() -> None:
    _need_data()
    seq = next(s for s in _sequences() if "uuid4_injected" in s["tags"])
    env = _start(seq, lambda: "0123456789abcdef0123456789abcdef")
    res = env.get_response("refuel_data", {"customer_id": "C1003", "line_id": "L1009", "gb_amount": 1.0})
    assert not res.error
    bills = env.canonical_db()["bills"]
    assert bills[-1]["bill_id"] == "B01234567"
    assert "B01234567" in env.canonical_db()["customers"][2]["bill_ids"]


def test_every_task_initial_state_hashes() -> None:
    """All 114 telecom tasks: hashes after ``initial_state`` (the initialization actions)."""
    folder = corpus_dir("tau2")
    assert (folder / "initial_hashes.json").is_file(), f"{folder} lacks initial_hashes.json"
    recorded = json.loads((folder / "initial_hashes.json").read_text())["task_initial_states"]["telecom"]
    tasks = _tasks()
    assert set(recorded) == set(tasks) and len(tasks) == 114
    wrong = []
    for task_id, want in recorded.items():
        state = tasks[task_id]["initial_state"]
        env = Tau2Environment("telecom")
        env.set_state(state.get("initialization_data"), state.get("initialization_actions"), state.get("message_history") or [])
        got = env.hashes()
        wrong.extend(f"{task_id}: {k}" for k in HASH_KEYS if got[k] != want[k])
    assert wrong == []


def test_initial_database_hashes() -> None:
    """The engine's own telecom data (no corpus needed): its hashes are tau2's."""
    env = Tau2Environment("telecom")
    assert env.hashes() == {
        "db_hash": "304cf5ef059852e117ea801ab9a5efc24c9713ec887679dc2e30acceb4b6742d",
        "user_db_hash": "e1f3a8637388808221228ff3f87294444e6b64caf721f5eb243a85d0a9380b28",
        "db_canonical_sha256": "6aadfbfad603c76a09b82b5fbe787988182cb7b459334c3c262d428133da5750",
        "user_db_canonical_sha256": "0a7d4eed7a5e2dad1eefabf5b01993703b5c0ef54c281d52cdfd148f0ce2462b",
    }


def test_mutating_records_reproduce_their_patches_values() -> None:
    """Spot-check the stored values (not just hashes): a refuel that creates a draft bill."""
    _need_data()
    seq = next(s for s in _sequences() if s["sequence_id"] == "telecom-026")
    env = _start(seq, _injected_source(seq))
    for call in seq["calls"]:
        env.get_response(call["name"], call["arguments"], call["requestor"], call["tool_call_id"])
        if call.get("injected_uuid4_hex"):
            added = next(op["value"] for op in call["db_patch"] if op["path"] == "/bills/-")
            assert env.canonical_db()["bills"][-1] == added
            break
    else:  # pragma: no cover - the corpus has such a call
        pytest.fail("telecom-026 has no bill-creating call")
