"""Replay a τ²-bench tool-call corpus (``conformance/tools_<domain>.jsonl``) on our engine.

A call agrees when its output content matches (byte for byte, or on the first line
when the record says ``compare: first_line``), its error flag matches, and the four
DB hashes after the call equal the recorded ones.  A sequence whose start state does
not reproduce counts all its calls as disagreeing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .data import load_tasks
from .engine import Tau2Environment

__all__ = ["replay_tool_corpus", "replay_sequence"]

HASH_KEYS = ("db_hash", "user_db_hash", "db_canonical_sha256", "user_db_canonical_sha256")


def _content_agrees(got: str, want: str, compare: str) -> bool:
    if compare == "first_line":
        return got.split("\n", 1)[0] == want.split("\n", 1)[0]
    return got == want


def _start_env(seq: dict[str, Any], data_dir: str | Path | None) -> Tau2Environment:
    env = Tau2Environment(seq["domain"], solo_mode=bool(seq.get("solo_mode")), data_dir=data_dir)
    start = seq.get("start") or {"kind": "initial_db"}
    if start.get("kind") == "task_initial_state":
        tasks = {t["id"]: t for t in load_tasks(seq["domain"], data_dir)}
        task = tasks.get(start["task_id"])
        if task is None:
            raise KeyError(f"task {start['task_id']!r} not in {seq['domain']} tasks.json")
        st = task.get("initial_state") or {}
        env.set_state(st.get("initialization_data"), st.get("initialization_actions"), st.get("message_history") or [])
    elif start.get("kind") != "initial_db":
        raise ValueError(f"unknown start kind {start.get('kind')!r}")
    return env


def replay_sequence(seq: dict[str, Any], data_dir: str | Path | None = None) -> tuple[int, int, list[dict[str, Any]]]:
    """Replay one corpus line; returns ``(agree, total, failures)``."""
    calls = seq.get("calls") or []
    sid = seq.get("sequence_id")
    try:
        env = _start_env(seq, data_dir)
    except Exception as exc:  # a start that cannot be built fails every call of the sequence
        return 0, len(calls), [{"sequence_id": sid, "i": None, "problem": f"start failed: {type(exc).__name__}: {exc}"}]
    failures: list[dict[str, Any]] = []
    want0 = seq.get("initial_state_hashes")
    hashes = env.hashes()
    if want0:
        bad = {k: (hashes[k], want0.get(k)) for k in HASH_KEYS if hashes[k] != want0.get(k)}
        if bad:
            return 0, len(calls), [{"sequence_id": sid, "i": None, "problem": f"initial state hashes differ: {bad}"}]
    version = env.state_version
    agree = 0
    for call in calls:
        res = env.get_response(call["name"], call.get("arguments"), call.get("requestor", "assistant"), call.get("tool_call_id"))
        if env.state_version != version:
            hashes = env.hashes()
            version = env.state_version
        want = call["output"]
        problems = []
        if not _content_agrees(res.content, want["content"], call.get("compare", "exact")):
            problems.append("content")
        if res.error != want["error"]:
            problems.append("error flag")
        for k in HASH_KEYS:
            if hashes[k] != call.get(k):
                problems.append(k)
        if problems:
            failures.append({
                "sequence_id": sid, "i": call.get("i"), "name": call["name"], "arguments": call.get("arguments"),
                "requestor": call.get("requestor"), "problem": ", ".join(problems),
                "got": res.content, "want": want["content"], "got_error": res.error, "want_error": want["error"],
            })
        else:
            agree += 1
    return agree, len(calls), failures


def replay_tool_corpus(path: str | Path, data_dir: str | Path | None = None) -> tuple[int, int, list[dict[str, Any]]]:
    """Replay every sequence of a ``tools_<domain>.jsonl`` file; returns ``(agree, total, failures)``."""
    agree = total = 0
    failures: list[dict[str, Any]] = []
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                seq = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: invalid JSON: {exc}") from None
            a, t, f = replay_sequence(seq, data_dir)
            agree += a
            total += t
            failures.extend(f)
    return agree, total, failures
