"""Replay a ToolSandbox conformance corpus and report agreement with upstream.

For every record, the ``steps`` are replayed on a fresh sandbox of the record's
scenario (:func:`trace_gym.toolsandbox.engine.replay`), the episode is scored
(:func:`trace_gym.toolsandbox.evaluation.evaluate`, or ``aborted_result`` when the play
aborted) and compared with what upstream recorded:

* ``messages`` -- every column of every row, and ``db_snapshots`` -- every snapshot,
  both modulo a renaming of generated ids (a UUID that the scenario does not seed) and
  of object addresses in error texts;
* the abort (type, and message up to the tool list, whose order upstream leaves to set
  hashing);
* which steps were consumed (``message_steps``, ``unused_*_steps``);
* ``similarity``, ``milestone_similarity`` and ``minefield_similarity`` within 1e-6,
  ``turn_count`` exactly, the milestone/minefield mappings (indices exactly, scores
  within 1e-6) and the minefield outcome (hit or not).

:func:`run_conformance` prints the agreement per source file and the last line
``agreement: A/B (P%)``; it returns 0 only when every record agrees.

:func:`score_record` / :func:`score_corpus` check the scorer alone: they score a record's
recorded ``messages`` and ``db_snapshots`` and compare with its ``result``.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .evaluation import EvaluationInputError, EvaluationResult, aborted_result, evaluate
from .scenarios import Scenario, load_scenarios

__all__ = ["check_record", "run_conformance", "canonical_ids", "RecordCheck", "score_record", "score_corpus"]

TOLERANCE = 1e-6
# Upstream's error texts can show an object address (``<Expr [...] at 0x7F...>``): not comparable.
_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+>")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _seeded_ids(scenario: Any) -> set[str]:
    text = json.dumps({"world": {db: scenario.world_rows(db) for db in ("SETTING", "CONTACT", "MESSAGING", "REMINDER")},
                       "sandbox": scenario.sandbox_rows()})
    return set(_UUID.findall(text))


def canonical_ids(value: Any, seeded: set[str], names: dict[str, str] | None = None) -> Any:
    """``value`` with every generated id renamed ``<id0>``, ``<id1>``, ... in order of first appearance."""
    names = {} if names is None else names

    def sub(text: str) -> str:
        def rename(m: re.Match[str]) -> str:
            u = m.group(0)
            if u in seeded:
                return u
            if u not in names:
                names[u] = f"<id{len(names)}>"
            return names[u]

        return _ADDRESS.sub(" at 0x?>", _UUID.sub(rename, text))

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return sub(v)
        if isinstance(v, Mapping):
            return {sub(str(k)): walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value)


def _first_difference(ours: Any, theirs: Any, where: str = "") -> str | None:
    if isinstance(ours, Mapping) and isinstance(theirs, Mapping):
        for k in list(theirs) + [k for k in ours if k not in theirs]:
            if k not in ours or k not in theirs:
                return f"{where}.{k}: {'missing' if k not in ours else 'unexpected'}"
            d = _first_difference(ours[k], theirs[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(ours, list) and isinstance(theirs, list):
        for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
            d = _first_difference(a, b, f"{where}[{i}]")
            if d:
                return d
        if len(ours) != len(theirs):
            return f"{where}: {len(ours)} items, expected {len(theirs)}"
        return None
    if ours != theirs or type(ours) is not type(theirs) and not (
        isinstance(ours, (int, float)) and isinstance(theirs, (int, float)) and not isinstance(ours, bool)
    ):
        return f"{where}: got {ours!r}, expected {theirs!r}"
    return None


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _abort_key(exc: Mapping[str, Any] | None) -> tuple[str, str] | None:
    if not exc:
        return None
    return (exc.get("type", ""), str(exc.get("message", "")).split("Options are")[0])


def check_record(record: Mapping[str, Any], scenarios: Mapping[str, Any] | None = None) -> list[str]:
    """Replay and score one record; the list of disagreements (empty when it conforms)."""
    from .engine import replay

    scenarios = scenarios if scenarios is not None else load_scenarios()
    name = record.get("scenario")
    if name not in scenarios:
        return [f"unknown scenario {name!r}"]
    scenario = scenarios[name]
    clock = record.get("clock") or {}
    now = float(clock.get("timestamp", 1749027600.0))
    problems: list[str] = []
    res = replay(scenario, record.get("steps", []), now=now)

    seeded = _seeded_ids(scenario)
    names_ours: dict[str, str] = {}
    names_theirs: dict[str, str] = {}
    ours_msgs = canonical_ids(_jsonable(res.messages), seeded, names_ours)
    theirs_msgs = canonical_ids(record.get("messages", []), seeded, names_theirs)
    d = _first_difference(ours_msgs, theirs_msgs, "messages")
    if d:
        problems.append(d)
    ours_db = canonical_ids(_jsonable(res.db_snapshots), seeded, names_ours)
    theirs_db = canonical_ids(record.get("db_snapshots", {}), seeded, names_theirs)
    d = _first_difference(ours_db, theirs_db, "db_snapshots")
    if d:
        problems.append(d)

    for key in ("unused_agent_steps", "unused_user_steps"):
        if key in record and getattr(res, key) != record[key]:
            problems.append(f"{key}: got {getattr(res, key)}, expected {record[key]}")
    if "message_steps" in record:
        ours_steps = {str(k): v for k, v in res.message_steps.items() if k >= res.sandbox.first_new_index}
        if ours_steps != record["message_steps"]:
            problems.append(f"message_steps: got {ours_steps}, expected {record['message_steps']}")

    expected = record.get("result", {})
    if _abort_key(res.exception) != _abort_key(expected.get("exception")):
        problems.append(f"exception: got {res.exception!r}, expected {expected.get('exception')!r}")
    try:
        if res.exception is not None:
            result = aborted_result(scenario, res.exception)
        else:
            result = evaluate(scenario, res.messages, res.db_snapshots)
    except Exception as exc:  # a scorer failure is a disagreement, not a crash of the run
        problems.append(f"scoring failed: {type(exc).__name__}: {exc}")
        return problems
    for key in ("similarity", "milestone_similarity", "minefield_similarity"):
        got, want = getattr(result, key), expected.get(key)
        if want is None or abs(float(got) - float(want)) > TOLERANCE:
            problems.append(f"{key}: got {got}, expected {want}")
    if result.turn_count != expected.get("turn_count"):
        problems.append(f"turn_count: got {result.turn_count}, expected {expected.get('turn_count')}")
    for key in ("milestone_mapping", "minefield_mapping"):
        got_map = {str(k): [int(i), float(v)] for k, (i, v) in getattr(result, key).items()}
        want_map = expected.get(key, {})
        if set(got_map) != set(want_map) or any(
            got_map[k][0] != want_map[k][0] or abs(got_map[k][1] - want_map[k][1]) > TOLERANCE for k in got_map
        ):
            problems.append(f"{key}: got {got_map}, expected {want_map}")
    if (result.minefield_similarity > 0) != (float(expected.get("minefield_similarity", 0.0)) > 0):
        problems.append("minefield outcome differs")
    return problems


def _read_jsonl(path: Path) -> Iterable[tuple[int, Any]]:
    """``(line number, record)`` of every non-empty line; a line that is not JSON gives its error."""
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    yield lineno, json.loads(line)
                except json.JSONDecodeError as exc:
                    yield lineno, exc


def _records(files: Iterable[str | Path]) -> Iterable[tuple[str, int, Any]]:
    for f in files:
        path = Path(f)
        for lineno, record in _read_jsonl(path):
            yield path.stem, lineno, record


def run_conformance(files: Sequence[str | Path], verbose: bool = False) -> int:
    """Replay every record of ``files``; print per-source agreement and ``agreement: A/B (P%)``."""
    scenarios = load_scenarios()
    per_source: dict[str, list[int]] = {}
    for source, lineno, record in _records(files):
        tally = per_source.setdefault(source, [0, 0])
        tally[1] += 1
        if isinstance(record, Exception):
            problems = [f"line {lineno}: invalid JSON: {record}"]
            rid = f"{source}:{lineno}"
        else:
            rid = record.get("id", f"{source}:{lineno}")
            try:
                problems = check_record(record, scenarios)
            except Exception as exc:  # report, keep going
                problems = [f"replay failed: {type(exc).__name__}: {exc}"]
        if problems:
            if verbose:
                print(f"DIFF {rid}: " + "; ".join(problems))
        else:
            tally[0] += 1
    agree = sum(a for a, _ in per_source.values())
    total = sum(n for _, n in per_source.values())
    for source, (a, n) in sorted(per_source.items()):
        print(f"{source}: {a}/{n}")
    pct = 100.0 * agree / total if total else 0.0
    print(f"agreement: {agree}/{total} ({pct:.1f}%)")
    return 0 if total and agree == total else 1


# ---------------------------------------------------------------------------- the scorer alone


@dataclass(frozen=True)
class RecordCheck:
    """The scorer's verdict on one conformance record: ``ok`` and, if not, what differed."""

    record_id: str
    ok: bool
    problems: tuple[str, ...]
    result: EvaluationResult | None
    seconds: float


def _mapping_from_json(raw: Any) -> dict[int, tuple[int, float]]:
    return {int(k): (int(v[0]), float(v[1])) for k, v in (raw or {}).items()}


def score_record(
    record: Mapping[str, Any], scenarios: Mapping[str, Scenario] | None = None, tolerance: float = 1e-6
) -> RecordCheck:
    """Score a conformance record's ``messages`` + ``db_snapshots`` and compare with its ``result``.

    Similarities must agree within ``tolerance``, ``turn_count`` and the mapped indices exactly
    (mapped similarities within ``tolerance``).  Aborted records (``result.exception``) are scored
    with :func:`aborted_result`.
    """
    rid = str(record.get("id", "?"))
    scenarios = load_scenarios() if scenarios is None else scenarios
    name = record.get("scenario")
    if name not in scenarios:
        return RecordCheck(rid, False, (f"unknown scenario {name!r}",), None, 0.0)
    scenario = scenarios[name]
    expected = record.get("result") or {}
    start = time.perf_counter()
    try:
        if expected.get("exception"):
            result = aborted_result(scenario, expected["exception"])
        else:
            result = evaluate(scenario, record["messages"], record["db_snapshots"])
    except (EvaluationInputError, KeyError) as exc:
        return RecordCheck(rid, False, (f"{type(exc).__name__}: {exc}",), None, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    problems = []
    for key in ("similarity", "milestone_similarity", "minefield_similarity"):
        want, got = float(expected.get(key, math.nan)), getattr(result, key)
        if not abs(want - got) <= tolerance:
            problems.append(f"{key}: expected {want!r}, got {got!r}")
    if expected.get("turn_count") != result.turn_count:
        problems.append(f"turn_count: expected {expected.get('turn_count')!r}, got {result.turn_count!r}")
    for key in ("milestone_mapping", "minefield_mapping"):
        want_map = _mapping_from_json(expected.get(key))
        got_map = dict(getattr(result, key))
        same = want_map.keys() == got_map.keys() and all(
            want_map[k][0] == got_map[k][0] and abs(want_map[k][1] - got_map[k][1]) <= tolerance for k in want_map
        )
        if not same:
            problems.append(f"{key}: expected {want_map}, got {got_map}")
    return RecordCheck(rid, not problems, tuple(problems), result, seconds)


def score_corpus(
    files: Iterable[str | Path],
    scenarios: Mapping[str, Scenario] | None = None,
    tolerance: float = 1e-6,
) -> tuple[int, int, list[str]]:
    """Scorer-only conformance over JSONL record files: ``(agree, total, failures)``.

    Each failure is a line ``"<record id>: <what differed>"``.  A file that cannot be read or a
    line that is not JSON counts as one failed record.
    """
    scenarios = load_scenarios() if scenarios is None else scenarios
    agree = total = 0
    failures: list[str] = []
    for name in files:
        path = Path(name)
        if not path.is_file():
            total += 1
            failures.append(f"{path}: no such file")
            continue
        for lineno, record in _read_jsonl(path):
            where = f"{path.name}:{lineno}"
            total += 1
            if isinstance(record, Exception) or not isinstance(record, Mapping):
                failures.append(f"{where}: not a JSON record ({record})")
                continue
            check = score_record(record, scenarios, tolerance)
            if check.ok:
                agree += 1
            else:
                failures.append(f"{check.record_id}: " + "; ".join(check.problems))
    return agree, total, failures
